/* SPDX-License-Identifier: MIT
 *
 * Types shared by the kpack API. The numeric values are ABI: a HIP runtime
 * built against ROCm's kpack runtime may load this library in its place.
 */
#ifndef ROCM_KPACK_TYPES_H
#define ROCM_KPACK_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open archive. Opaque; created by kpack_open(), freed by kpack_close(). */
typedef struct kpack_archive* kpack_archive_t;

/* A loader cache. Opaque; created by kpack_cache_create(). */
typedef struct kpack_cache* kpack_cache_t;

/* Status of every fallible call. kpack_error_string() names each one. */
typedef enum {
  KPACK_SUCCESS = 0,
  KPACK_ERROR_INVALID_ARGUMENT = 1,
  KPACK_ERROR_FILE_NOT_FOUND = 2,
  KPACK_ERROR_INVALID_FORMAT = 3,
  KPACK_ERROR_UNSUPPORTED_VERSION = 4,
  KPACK_ERROR_KERNEL_NOT_FOUND = 5,
  KPACK_ERROR_DECOMPRESSION_FAILED = 6,
  KPACK_ERROR_OUT_OF_MEMORY = 7,
  KPACK_ERROR_NOT_IMPLEMENTED = 8,
  KPACK_ERROR_IO_ERROR = 9,
  KPACK_ERROR_MSGPACK_PARSE_FAILED = 10,
  KPACK_ERROR_PATH_DISCOVERY_FAILED = 11,
  KPACK_ERROR_INVALID_METADATA = 12,
  KPACK_ERROR_ARCHIVE_NOT_FOUND = 13,
  KPACK_ERROR_ARCH_NOT_FOUND = 14,
  /* Not in ROCm's set: a long call of this library's (a split, verify
   * --binary) stopped because its caller asked it to (a progress callback
   * returned false, or its cancel flag was set). */
  KPACK_ERROR_CANCELLED = 15,
} kpack_error_t;

/* Archive header: "KPAK", u32 version, u64 TOC offset (little-endian). */
#define KPACK_MAGIC "KPAK"
#define KPACK_MAGIC_SIZE 4
#define KPACK_CURRENT_VERSION 1

/* How kernels are stored in the payload (TOC key "compression_scheme"). */
typedef enum {
  KPACK_COMPRESSION_NOOP = 0,            /* "none": raw blobs */
  KPACK_COMPRESSION_ZSTD_PER_KERNEL = 1, /* "zstd-per-kernel": one frame each */
} kpack_compression_scheme_t;

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_TYPES_H */
