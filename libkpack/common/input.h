/* SPDX-License-Identifier: MIT
 *
 * Untrusted bytes read by the host-binary readers (elf_file.c, fatbin.c,
 * offload_bundle.c, host.c): a caller's buffer, or a file read with pread in
 * small pieces so that a gigabyte library is never held whole and a file
 * that changes underneath is an IO_ERROR rather than a SIGBUS. Stateless: a
 * kp_input is a value that may be copied, sliced and shared by threads.
 * Opening a file by path (kp_input_open) and whole preads (kp_pread_all)
 * serve the archive modules too, as whole pwrites (kp_pwrite_all) serve
 * the writers.
 */
#ifndef KPACK_INPUT_H
#define KPACK_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocm_kpack/kpack_types.h"

/* Reads exactly `size` bytes at `offset`, retrying short reads and EINTR.
 *   IO_ERROR  the read failed (errno says why) or the file ended first (it
 *             shrank; errno 0) */
kpack_error_t kp_pread_all(int fd, void* buf, size_t size, uint64_t offset);

/* Writes exactly `size` bytes at `offset`, retrying short writes and EINTR.
 *   IO_ERROR  the write failed (errno says why) or made no progress (errno
 *             0) */
kpack_error_t kp_pwrite_all(int fd, const void* buf, size_t size,
                            uint64_t offset);

typedef struct kp_input {
  const uint8_t* mem; /* the bytes, or NULL to read `fd` */
  int fd;
  uint64_t base; /* file offset of byte 0 (fd only) */
  uint64_t size; /* readable bytes */
} kp_input;

/* Opens the regular file at `path` for reading as an input of its whole
 * size; the caller owns in->fd and closes it. O_NONBLOCK, so that a FIFO
 * or device fails the regular-file check instead of blocking the open.
 *   FILE_NOT_FOUND  no file at path (ENOENT, ENOTDIR)
 *   IO_ERROR        it cannot be opened or is not a regular file (EISDIR)
 * On failure nothing stays open and errno holds the system's reason. */
kpack_error_t kp_input_open(const char* path, kp_input* in);

/* An input over data[0, size), the bytes of an *_open_memory() or parse
 * entry point: false (nothing set) when data is NULL. */
bool kp_input_memory(const void* data, size_t size, kp_input* in);

/* Bytes [offset, offset + size) of `in` as an input of their own.
 *   INVALID_FORMAT  the range does not lie within `in` */
kpack_error_t kp_input_slice(const kp_input* in, uint64_t offset, uint64_t size,
                             kp_input* out);

/* Copies `size` bytes at `offset` into buf.
 *   INVALID_FORMAT  the range does not lie within `in`
 *   IO_ERROR        the read failed or came up short (the file shrank) */
kpack_error_t kp_input_read(const kp_input* in, uint64_t offset, void* buf,
                            size_t size);

/* A reusable buffer for kp_input_view(); zero-initialise, kp_scratch_free()
 * when done. */
typedef struct kp_scratch {
  uint8_t* data;
  size_t cap;
} kp_scratch;

/* Points *view at `size` bytes at `offset`: into the caller's buffer for a
 * memory input (no copy), else read into `scratch` (grown as needed; the
 * view lasts until its next use). Errors as kp_input_read(), and
 * OUT_OF_MEMORY. */
kpack_error_t kp_input_view(const kp_input* in, uint64_t offset, size_t size,
                            kp_scratch* scratch, const uint8_t** view);

void kp_scratch_free(kp_scratch* scratch);

#endif /* KPACK_INPUT_H */
