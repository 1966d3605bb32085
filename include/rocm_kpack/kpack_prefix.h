/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: what a kernel's code object says, from the start of
 * its bytes. The ELF header, the program headers and the NT_AMDGPU_METADATA
 * note sit at the start of an AMDGPU code object, so its target, kernels
 * and the `kernels`/`metadata.json` texts need only a prefix of it: a
 * streaming zstd decode that stops there (a read of the prefix for `none`
 * archives) costs a fraction of decompressing the whole kernel. See
 * docs/mount.md.
 */
#ifndef ROCM_KPACK_PREFIX_H
#define ROCM_KPACK_PREFIX_H

#include "kpack.h"
#include "kpack_code_object.h"
#include "kpack_render.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the first min(length, kernel size) bytes of a kernel into `buffer`
 * (NULL only when length is 0); *size receives how many. A zstd frame is
 * decoded only as far as those bytes need and read only as far as it is
 * decoded. Asking for the whole kernel (length >= its size) is
 * kpack_read_kernel(), every check included; a prefix checks the frame's
 * size field and header and every byte decoded, not the rest of the frame.
 * Thread-safe like kpack_get_kernel().
 *   INVALID_ARGUMENT      a pointer is NULL
 *   KERNEL_NOT_FOUND      no such binary or arch
 *   INVALID_FORMAT        the TOC size is more than the stored frame could
 *                         hold (found before anything is decoded)
 *   DECOMPRESSION_FAILED  a corrupt frame, or one whose header or contents
 *                         disagree with the TOC size
 *   IO_ERROR              the archive could not be read (shrank after open)
 *   OUT_OF_MEMORY         allocation failed */
KPACK_API kpack_error_t kpack_read_kernel_prefix(kpack_archive_t archive,
                                                 const char* binary_name,
                                                 const char* arch, void* buffer,
                                                 size_t length, size_t* size);

/* How many leading bytes of a code object of `size` bytes
 * kpack_code_object_parse() reads, judged from its first `avail` bytes at
 * `data`: reading stops at the first header, table or note region that
 * lies beyond them, so *needed > avail means "read that many and ask
 * again", and *needed <= avail that the prefix is enough (for bytes that
 * are not a code object, or tables that do not fit, as soon as that shows).
 * A code object whose metadata note is in no PT_NOTE segment needs all of
 * its bytes (its section headers come last).
 *   INVALID_ARGUMENT  needed is NULL, data is NULL with avail > 0, or
 *                     avail > size */
KPACK_API kpack_error_t kpack_code_object_prefix_needed(const void* data,
                                                        size_t avail,
                                                        uint64_t size,
                                                        uint64_t* needed);

/* kpack_code_object_parse() of a code object of `size` bytes from its first
 * `avail`, which must be at least what kpack_code_object_prefix_needed()
 * asks for: the same result, status for status, as parsing all of it.
 * INVALID_ARGUMENT if the prefix is too short or a pointer is NULL;
 * otherwise the statuses of kpack_code_object_parse(). */
KPACK_API kpack_error_t
kpack_code_object_parse_prefix(const void* data, size_t avail, uint64_t size,
                               kpack_code_object_t** code_object);

/* kpack_co_render() from such a prefix: the same texts. */
KPACK_API kpack_error_t kpack_co_render_prefix(const void* data, size_t avail,
                                               uint64_t size,
                                               kpack_co_render_t* render);

/* The whole loop for an archive's kernel: reads its prefix (64 KiB first,
 * then as far as kpack_code_object_prefix_needed() asks) and parses or
 * renders it. *decoded (may be NULL) receives the kernel bytes read or
 * decoded, all rounds together.
 *
 * kpack_kernel_code_object: the statuses of kpack_read_kernel_prefix(),
 * then those of kpack_code_object_parse() (bytes that are no code object
 * are INVALID_FORMAT).
 * kpack_kernel_render: the statuses of kpack_read_kernel_prefix(); bytes
 * that are no code object render as empty texts, as with
 * kpack_co_render(). */
KPACK_API kpack_error_t kpack_kernel_code_object(
    kpack_archive_t archive, const char* binary_name, const char* arch,
    kpack_code_object_t** code_object, uint64_t* decoded);
KPACK_API kpack_error_t kpack_kernel_render(kpack_archive_t archive,
                                            const char* binary_name,
                                            const char* arch,
                                            kpack_co_render_t* render,
                                            uint64_t* decoded);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_PREFIX_H */
