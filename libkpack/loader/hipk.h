/* SPDX-License-Identifier: MIT
 *
 * HIPK metadata, the msgpack map a HIP binary carries instead of its device
 * code: {kernel_name: str, kpack_search_paths: [str, ...]}, and from
 * `kpack split` also kpack_arches: [str, ...], the arches it wrote the
 * binary's code objects for, and, when records differ, kpack_record_arches:
 * [[uint, ...], ...], per record (by code object index) the positions in
 * kpack_arches of the arches its code object was written for. Owned by hipk.c;
 * the parsed result belongs to the caller.
 */
#ifndef KPACK_HIPK_H
#define KPACK_HIPK_H

#include <stddef.h>

#include "rocm_kpack/kpack_types.h"
#include "loader/search_path.h"

/* The most metadata bytes ever read from the caller's pointer. */
#define KP_HIPK_MAX_SIZE ((size_t)64 * 1024)

/* Bounds of kpack_arches: entries, and bytes of one target ID. A real
 * build targets a few dozen arches; the bounds keep hostile metadata from
 * making a tool check thousands of agents. */
#define KP_HIPK_MAX_ARCHES 256
#define KP_HIPK_MAX_ARCH_LEN 255

typedef struct kp_hipk {
  char* kernel_name;
  kp_strlist search_paths; /* in metadata order, as written (may be "") */
  kp_strlist arches;       /* kpack_arches as written; empty when absent */
  /* kpack_record_arches, when present (record_count > 0): record r's
   * arches are record_arches[record_start[r]] up to
   * record_arches[record_start[r + 1]], the strings of `arches`. */
  const char** record_arches;
  uint32_t* record_start; /* record_count + 1 entries */
  size_t record_count;
} kp_hipk;

/* The arches code object `co_index` was written for: its own list when the
 * metadata has kpack_record_arches (empty for an index beyond it), else
 * the whole kpack_arches. The strings belong to `hipk`. */
void kp_hipk_record_arches(const kp_hipk* hipk, uint64_t co_index,
                           const char* const** arches, size_t* count);

/* Parses the map at the start of [data, data + size); bytes after it are
 * ignored. Unknown keys are skipped; kpack_arches is optional.
 *   INVALID_METADATA  not a map, truncated, a key missing, repeated or of
 *                     the wrong type, an empty kernel_name or search path
 *                     array, a string with an embedded NUL, or a
 *                     kpack_arches that is not an array of 1 to
 *                     KP_HIPK_MAX_ARCHES strings of 1 to
 *                     KP_HIPK_MAX_ARCH_LEN bytes, or a
 *                     kpack_record_arches that is not an array of arrays
 *                     of positions in kpack_arches (or comes without it)
 *   OUT_OF_MEMORY     allocation failed
 * On failure *out is left empty. */
kpack_error_t kp_hipk_parse(const void* data, size_t size, kp_hipk* out);

/* kp_hipk_parse() over at most KP_HIPK_MAX_SIZE bytes at `metadata`, and
 * never past the end of the readable mapping that holds it.
 *   INVALID_METADATA  also when no readable mapping holds the pointer */
kpack_error_t kp_hipk_read(const void* metadata, kp_hipk* out);

void kp_hipk_free(kp_hipk* hipk);

#endif /* KPACK_HIPK_H */
