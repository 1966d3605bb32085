/* SPDX-License-Identifier: MIT
 *
 * A kernel's code object read from the start of its bytes (kpack_prefix.h):
 * the prefix is grown until kpack_code_object_prefix_needed() is satisfied,
 * then parsed or rendered. kpackfs sizes its text files this way and `kpack
 * list --kernels` lists kernels without decompressing whole kernels.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack_archive.h"
#include "rocm_kpack/kpack_prefix.h"

/* The first read: one zstd block's worth, which holds the header, program
 * headers and note of most code objects. */
#define PREFIX_FIRST (64u * 1024u)

/* Reads kernel bytes into *buf until they hold what the parse needs; *avail
 * receives how many, *size the kernel's size. */
static kpack_error_t read_enough(kpack_archive_t archive, const char* binary,
                                 const char* arch, uint8_t** buf, size_t* avail,
                                 uint64_t* size, uint64_t* decoded) {
  kpack_kernel_info_t info;
  kpack_error_t err = kpack_get_kernel_info(archive, binary, arch, &info);
  if (err != KPACK_SUCCESS)
    return err;
  *size = info.size;
  uint64_t want = info.size < PREFIX_FIRST ? info.size : PREFIX_FIRST;
  for (;;) {
    if (want > SIZE_MAX)
      return KPACK_ERROR_OUT_OF_MEMORY;
    uint8_t* grown = realloc(*buf, want ? (size_t)want : 1);
    if (grown == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    *buf = grown;
    err = kpack_read_kernel_prefix(archive, binary, arch, *buf, (size_t)want,
                                   avail);
    if (err != KPACK_SUCCESS)
      return err;
    if (decoded != NULL)
      *decoded += *avail;
    uint64_t needed;
    err = kpack_code_object_prefix_needed(*buf, *avail, *size, &needed);
    if (err != KPACK_SUCCESS || needed <= *avail)
      return err;
    want = needed; /* beyond avail, within the kernel */
  }
}

KPACK_API kpack_error_t kpack_kernel_code_object(
    kpack_archive_t archive, const char* binary_name, const char* arch,
    kpack_code_object_t** code_object, uint64_t* decoded) {
  uint8_t* buf = NULL;
  size_t avail = 0;
  uint64_t size = 0;
  if (decoded != NULL)
    *decoded = 0;
  if (code_object == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *code_object = NULL;
  kpack_error_t err =
      read_enough(archive, binary_name, arch, &buf, &avail, &size, decoded);
  if (err == KPACK_SUCCESS)
    err = kpack_code_object_parse_prefix(buf, avail, size, code_object);
  free(buf);
  return err;
}

KPACK_API kpack_error_t kpack_kernel_render(kpack_archive_t archive,
                                            const char* binary_name,
                                            const char* arch,
                                            kpack_co_render_t* render,
                                            uint64_t* decoded) {
  uint8_t* buf = NULL;
  size_t avail = 0;
  uint64_t size = 0;
  if (decoded != NULL)
    *decoded = 0;
  if (render == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  memset(render, 0, sizeof(*render));
  kpack_error_t err =
      read_enough(archive, binary_name, arch, &buf, &avail, &size, decoded);
  if (err == KPACK_SUCCESS)
    err = kpack_co_render_prefix(buf, avail, size, render);
  free(buf);
  return err;
}
