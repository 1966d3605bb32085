/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the text files and attributes a code object shows in
 * a kpackfs mount and an extracted tree (`kernels`, `metadata.json`), made
 * from the parse of kpack_code_object.h, and the escaping of names in them
 * (kpack_co_escape_name(), kpack_json_quote()) for tools that show names
 * the same way.
 */
#ifndef ROCM_KPACK_RENDER_H
#define ROCM_KPACK_RENDER_H

#include "kpack_code_object.h"
#include "kpack_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kpackfs shows two text files beside every kernel of type "hsaco" (the
 * type ROCm's tools give every code object), and `kpack extract` writes the
 * same bytes there, so a mounted and an extracted tree are one:
 *
 *   kernels        one line per kernel of the note, in the note's order:
 *                  its ".name", a tab, then "vgpr=N sgpr=N agpr=N lds=N
 *                  scratch=N wave=N wg=N kernarg=N" (the counts of
 *                  kpack_co_kernel_resource(), "-" for one the note leaves
 *                  out) and "\n". In the name, backslash, tab, newline and
 *                  carriage return are written \\ \t \n \r and other
 *                  control bytes (below 0x20, and 0x7f) \xHH, so that a name
 *                  can split neither its line nor its fields. Empty when
 *                  the note lists no kernel, or there is no note.
 *   metadata.json  the note as kpack_code_object_metadata_json() renders it
 *                  with `pretty`, then "\n"; "null\n" without a note.
 *
 * Bytes that kpack_code_object_parse() refuses (not an AMDGPU ELF; tables,
 * notes or metadata malformed) show both files empty, and a note that
 * JSON cannot show (map keys nested in map keys) an empty metadata.json;
 * `kpack info FILE` says why. A kernel that cannot be read at all (a
 * corrupt frame) is the reader's error, never an empty file. The names are
 * those of the tree's layout (kpack_layout.h), kept here under their
 * earlier spelling. */
#define KPACK_CO_KERNELS_FILE KPACK_LAYOUT_KERNELS_FILE
#define KPACK_CO_METADATA_FILE KPACK_LAYOUT_METADATA_FILE

/* How many resource counts a `kernels` line shows. */
#define KPACK_CO_RESOURCE_COUNT 8

/* Resource `index` of a kernel, in the order `kernels` and `kpack list
 * --kernels` show them: 0 vgpr (.vgpr_count), 1 sgpr, 2 agpr, 3 lds
 * (.group_segment_fixed_size), 4 scratch (.private_segment_fixed_size),
 * 5 wave (.wavefront_size), 6 wg (.max_flat_workgroup_size), 7 kernarg
 * (.kernarg_segment_size). Sets *key to the short name and *value to the
 * count, and returns true when the note holds it; false with *value 0 when
 * the note leaves it out. False with *key NULL when index >=
 * KPACK_CO_RESOURCE_COUNT or a pointer is NULL. */
KPACK_API bool kpack_co_kernel_resource(const kpack_co_kernel_t* kernel,
                                        size_t index, const char** key,
                                        uint64_t* value);

/* A kernel name as a `kernels` line writes it (above): backslash, tab,
 * newline and carriage return as \\ \t \n \r, other control bytes as
 * \xHH, every other byte as it is. Tools that show names in columns use
 * it so that they escape exactly as a mount does. Sets *escaped to a
 * malloc'ed, NUL-terminated copy the caller releases with free().
 *   INVALID_ARGUMENT  name or escaped is NULL
 *   OUT_OF_MEMORY     allocation failed
 * On failure *escaped is NULL (when escaped is not NULL). */
KPACK_API kpack_error_t kpack_co_escape_name(const char* name, char** escaped);

/* `size` bytes of text as a JSON string literal, quoted, the way every
 * string in libkpack's JSON (metadata.json, kpack_get_entry_metadata_json())
 * is written: '"' and '\' escaped, newline, tab and carriage return as \n
 * \t \r, other bytes below 0x20 as \u00XX, and each byte that is not part
 * of valid UTF-8 (overlong forms, surrogates and values above U+10FFFF
 * included) as \ufffd. Tools that write JSON use it so that names read the
 * same there. Sets *json to a malloc'ed, NUL-terminated string the caller
 * releases with free().
 *   INVALID_ARGUMENT  json is NULL, or text is NULL with size > 0
 *   OUT_OF_MEMORY     allocation failed
 * On failure *json is NULL (when json is not NULL). */
KPACK_API kpack_error_t kpack_json_quote(const char* text, size_t size,
                                         char** json);

/* The files and attributes a kernel shows, from its bytes. */
typedef struct kpack_co_render {
  char* kernels;       /* the `kernels` text, NUL-terminated */
  size_t kernels_size; /* its bytes, without the NUL */
  char* metadata_json; /* the `metadata.json` text, NUL-terminated */
  size_t metadata_json_size;
  /* The code object's target ID (kpack_code_object_info_t.target) and how
   * many kernels its note lists; NULL and 0 when it is not a code object. */
  char* target;
  size_t kernel_count;
  /* KPACK_SUCCESS; or kpack_code_object_parse()'s status when the bytes
   * are not a code object (both texts empty, target NULL); or
   * kpack_code_object_metadata_json()'s when only the note cannot be
   * shown as JSON (metadata_json empty). */
  kpack_error_t status;
} kpack_co_render_t;

/* Renders the files above from the bytes of one kernel, data[0, size)
 * (data may be NULL when size is 0). Bytes that are not a code object are
 * not an error: they render as empty files, with the reason in
 * render->status. Release with kpack_co_render_free().
 *   INVALID_ARGUMENT  render is NULL, or data is NULL with size > 0
 *   OUT_OF_MEMORY     allocation failed
 * On failure *render is zeroed (nothing to free). */
KPACK_API kpack_error_t kpack_co_render(const void* data, size_t size,
                                        kpack_co_render_t* render);

/* Frees what kpack_co_render() allocated and zeroes *render. NULL
 * and a zeroed render are no-ops. */
KPACK_API void kpack_co_render_free(kpack_co_render_t* render);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_RENDER_H */
