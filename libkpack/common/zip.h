/* SPDX-License-Identifier: MIT
 *
 * Zip archives, the container of Python wheels: a bounded reader (stored
 * and deflated entries, ZIP64) and a deterministic writer. Owned by the
 * wheel module (producer/wheel.c); generic enough for any zip. Status
 * values are those of kpack_types.h.
 */
#ifndef KPACK_ZIP_H
#define KPACK_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sha256.h"
#include "rocm_kpack/kpack_types.h"

#define KP_ZIP_STORED 0
#define KP_ZIP_DEFLATED 8

/* ---- Reading ---------------------------------------------------------- */

typedef struct kp_zip kp_zip;

typedef struct kp_zip_entry {
  const char* name; /* as stored, NUL-terminated (holds no NUL) */
  uint16_t method;  /* KP_ZIP_STORED or KP_ZIP_DEFLATED */
  uint32_t crc32;
  uint64_t compressed_size;
  uint64_t size;
  uint64_t header_offset; /* of its local header */
  uint32_t mode; /* Unix st_mode from the external attributes, or 0 when
                    the entry was not made on Unix */
} kp_zip_entry;

/* Reads the central directory of the zip file at `path` (or of
 * data[0, size)); entries are read later, on demand. The end record must
 * close the file (its comment reaching exactly to the end), the central
 * directory must lie before it, and every entry must be a file or
 * directory name without NUL, stored or deflated, not encrypted, on a
 * single disk, with a name no other entry has.
 *   INVALID_ARGUMENT     a pointer is NULL
 *   FILE_NOT_FOUND       no file at path (errno says why)
 *   IO_ERROR             it cannot be read, or is not a regular file
 *   INVALID_FORMAT       no end record, a record or field outside the file
 *                        or the central directory, a count the directory
 *                        cannot hold, a duplicate or empty name, encryption,
 *                        several disks
 *   UNSUPPORTED_VERSION  a compression method other than stored or deflate
 *   OUT_OF_MEMORY        allocation failed */
kpack_error_t kp_zip_open(const char* path, kp_zip** zip);
kpack_error_t kp_zip_open_memory(const void* data, size_t size, kp_zip** zip);

size_t kp_zip_count(const kp_zip* zip);

/* Entry `index` in central directory order; NULL if index >= count. */
const kp_zip_entry* kp_zip_entry_at(const kp_zip* zip, size_t index);

/* The index of the entry named `name`, or SIZE_MAX. */
size_t kp_zip_find(const kp_zip* zip, const char* name);

/* Receives an entry's bytes in pieces; a status other than SUCCESS stops
 * the read and is returned by it. */
typedef kpack_error_t (*kp_zip_sink_fn)(void* user, const void* data,
                                        size_t size);

/* Streams entry `index` to `sink`, inflating a deflated one, and checks its
 * size and CRC-32 against the central directory.
 *   INVALID_ARGUMENT      a pointer is NULL or index >= count
 *   INVALID_FORMAT        the local header is missing, or it or the data
 *                         reach into the central directory
 *   DECOMPRESSION_FAILED  corrupt deflate data, data past the end of the
 *                         stream, or a size or CRC-32 that differs
 *   IO_ERROR              the file could not be read (it shrank)
 *   OUT_OF_MEMORY         allocation failed
 * or the sink's status. */
kpack_error_t kp_zip_read(kp_zip* zip, size_t index, kp_zip_sink_fn sink,
                          void* user);

/* Entry `index` whole, in a malloc'ed buffer with a NUL after its *size
 * bytes (free() it); INVALID_FORMAT when its size is above max_size. Other
 * statuses as kp_zip_read(). */
kpack_error_t kp_zip_read_alloc(kp_zip* zip, size_t index, size_t max_size,
                                char** data, size_t* size);

/* NULL is a no-op. */
void kp_zip_close(kp_zip* zip);

/* ---- Writing ---------------------------------------------------------- */

/* Writes a zip archive to `fd` (an empty regular file, written from offset
 * 0) entry by entry. The bytes are a function of the entries alone: every
 * entry is dated 1980-01-01 00:00:00, made on Unix with the mode given,
 * with no extra fields except ZIP64 ones where sizes or offsets need them. */
typedef struct kp_zip_writer kp_zip_writer;

/* INVALID_ARGUMENT (writer NULL, fd < 0), OUT_OF_MEMORY. */
kpack_error_t kp_zip_writer_create(int fd, kp_zip_writer** writer);

/* Adds an entry named `name` (no NUL, not empty; not checked against the
 * others) with permission bits `mode` (e.g. 0644 or 0755), its `size`
 * bytes read from `fd` at offset 0 (or from `data` when fd is -1),
 * deflated at `level` (1-9) or stored when level is 0. `sha256` (may be
 * NULL) receives the SHA-256 of those bytes, read once for both.
 *   INVALID_ARGUMENT  a pointer is NULL, a bad name or level
 *   IO_ERROR          the input could not be read (or ended early) or the
 *                     output written; errno says why
 *   OUT_OF_MEMORY     allocation failed */
kpack_error_t kp_zip_writer_add(kp_zip_writer* writer, const char* name,
                                uint32_t mode, int fd, const void* data,
                                uint64_t size, int level,
                                uint8_t sha256[KP_SHA256_SIZE]);

/* Writes the central directory and the end records.
 *   IO_ERROR, OUT_OF_MEMORY; an earlier failure is returned again */
kpack_error_t kp_zip_writer_finish(kp_zip_writer* writer);

/* Frees the writer (finished or not); the fd stays the caller's. */
void kp_zip_writer_free(kp_zip_writer* writer);

#endif /* KPACK_ZIP_H */
