/* SPDX-License-Identifier: MIT
 *
 * HIPK metadata, the msgpack map a HIP binary carries instead of its device
 * code: {kernel_name: str, kpack_search_paths: [str, ...]}. Owned by
 * hipk.c; the parsed result belongs to the caller.
 */
#ifndef KPACK_HIPK_H
#define KPACK_HIPK_H

#include <stddef.h>

#include "rocm_kpack/kpack_types.h"
#include "loader/search_path.h"

/* The most metadata bytes ever read from the caller's pointer. */
#define KP_HIPK_MAX_SIZE ((size_t)64 * 1024)

typedef struct kp_hipk {
  char* kernel_name;
  kp_strlist search_paths; /* in metadata order, as written (may be "") */
} kp_hipk;

/* Parses the map at the start of [data, data + size); bytes after it are
 * ignored. Unknown keys are skipped.
 *   INVALID_METADATA  not a map, truncated, a key missing, repeated or of
 *                     the wrong type, an empty kernel_name or search path
 *                     array, or a string with an embedded NUL
 *   OUT_OF_MEMORY     allocation failed
 * On failure *out is left empty. */
kpack_error_t kp_hipk_parse(const void* data, size_t size, kp_hipk* out);

/* kp_hipk_parse() over at most KP_HIPK_MAX_SIZE bytes at `metadata`, and
 * never past the end of the readable mapping that holds it.
 *   INVALID_METADATA  also when no readable mapping holds the pointer */
kpack_error_t kp_hipk_read(const void* metadata, kp_hipk* out);

void kp_hipk_free(kp_hipk* hipk);

#endif /* KPACK_HIPK_H */
