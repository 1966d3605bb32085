/* SPDX-License-Identifier: MIT
 *
 * Names and phrases for status codes, and names of compression schemes, as
 * every message uses them.
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
    KP_NAME(KPACK_ERROR_CANCELLED)
#undef KP_NAME
  }
  return "KPACK_ERROR_UNKNOWN";
}

KPACK_API const char* kpack_error_text(kpack_error_t err) {
  switch (err) {
    case KPACK_SUCCESS:
      return "success";
    case KPACK_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case KPACK_ERROR_FILE_NOT_FOUND:
      return "no such file";
    case KPACK_ERROR_INVALID_FORMAT:
      return "malformed file";
    case KPACK_ERROR_UNSUPPORTED_VERSION:
      return "unsupported version or scheme";
    case KPACK_ERROR_KERNEL_NOT_FOUND:
      return "no such kernel";
    case KPACK_ERROR_DECOMPRESSION_FAILED:
      return "corrupt compressed data";
    case KPACK_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case KPACK_ERROR_NOT_IMPLEMENTED:
      return "disabled or not implemented";
    case KPACK_ERROR_IO_ERROR:
      return "read or write error";
    case KPACK_ERROR_MSGPACK_PARSE_FAILED:
      return "malformed table of contents";
    case KPACK_ERROR_PATH_DISCOVERY_FAILED:
      return "binary path not found";
    case KPACK_ERROR_INVALID_METADATA:
      return "malformed HIPK metadata";
    case KPACK_ERROR_ARCHIVE_NOT_FOUND:
      return "no archive could be opened";
    case KPACK_ERROR_ARCH_NOT_FOUND:
      return "no archive declares a compatible architecture";
    case KPACK_ERROR_CANCELLED:
      return "cancelled";
  }
  return "unknown status";
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
