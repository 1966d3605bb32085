/* SPDX-License-Identifier: MIT
 *
 * Names for status codes and compression schemes, as every message uses them.
 */
#include "rocm_kpack/kpack_ext.h"

KPACK_API const char* kpack_error_string(kpack_error_t err) {
  switch (err) {
#define KP_NAME(code) \
  case code:          \
    return #code;
    KP_NAME(KPACK_SUCCESS)
    KP_NAME(KPACK_ERROR_INVALID_ARGUMENT)
    KP_NAME(KPACK_ERROR_FILE_NOT_FOUND)
    KP_NAME(KPACK_ERROR_INVALID_FORMAT)
    KP_NAME(KPACK_ERROR_UNSUPPORTED_VERSION)
    KP_NAME(KPACK_ERROR_KERNEL_NOT_FOUND)
    KP_NAME(KPACK_ERROR_DECOMPRESSION_FAILED)
    KP_NAME(KPACK_ERROR_OUT_OF_MEMORY)
    KP_NAME(KPACK_ERROR_NOT_IMPLEMENTED)
    KP_NAME(KPACK_ERROR_IO_ERROR)
    KP_NAME(KPACK_ERROR_MSGPACK_PARSE_FAILED)
    KP_NAME(KPACK_ERROR_PATH_DISCOVERY_FAILED)
    KP_NAME(KPACK_ERROR_INVALID_METADATA)
    KP_NAME(KPACK_ERROR_ARCHIVE_NOT_FOUND)
    KP_NAME(KPACK_ERROR_ARCH_NOT_FOUND)
#undef KP_NAME
  }
  return "KPACK_ERROR_UNKNOWN";
}

KPACK_API const char* kpack_compression_scheme_name(
    kpack_compression_scheme_t scheme) {
  switch (scheme) {
    case KPACK_COMPRESSION_NOOP:
      return "none";
    case KPACK_COMPRESSION_ZSTD_PER_KERNEL:
      return "zstd-per-kernel";
  }
  return NULL;
}
