/* SPDX-License-Identifier: MIT
 *
 * Search path handling for the loader (docs/loader.md): ':'-separated lists,
 * lexical normalisation, resolution against a binary's directory, @GFXARCH@
 * expansion and directories of *.kpack. Owned by search_path.c; it keeps no
 * state, and every list and string it returns belongs to the caller.
 */
#ifndef KPACK_SEARCH_PATH_H
#define KPACK_SEARCH_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "rocm_kpack/kpack_types.h"
#include "loader/target.h"

#define KP_GFXARCH_PLACEHOLDER "@GFXARCH@"

/* A growable list of strings the list owns. Zero-initialise to start. */
typedef struct kp_strlist {
  char** items;
  size_t count;
  size_t cap;
} kp_strlist;

/* Appends a copy of `str`. */
kpack_error_t kp_strlist_push(kp_strlist* list, const char* str);
/* Appends `str` itself; on failure it is freed. */
kpack_error_t kp_strlist_push_owned(kp_strlist* list, char* str);
bool kp_strlist_contains(const kp_strlist* list, const char* str);
void kp_strlist_free(kp_strlist* list);

/* Appends the items of a ':'-separated list, dropping empty ones; "\:" is
 * a ':' inside an item (kpack_path_list_split()). */
kpack_error_t kp_path_list_parse(const char* spec, kp_strlist* out);

/* Lexical normalisation: no ".", no empty components, ".." removes the
 * component before it (at the root it is dropped; leading ".." of a relative
 * path stays), no trailing '/'. "" and "a/.." become ".". NULL if out of
 * memory. */
char* kp_path_normalize(const char* path);

/* std::filesystem::weakly_canonical, which ROCm's loader applies: the
 * longest leading part of `path` that exists (stat() follows symlinks, and
 * ".." after one goes to its target's parent) becomes its realpath(); the
 * rest (missing, a dangling or looping symlink, unreadable) is appended and
 * the whole normalised lexically. A relative path none of which exists
 * stays relative. One stat() per existing component plus a realpath():
 * callers on a hot path remember the answer. NULL if out of memory. */
char* kp_path_weakly_canonical(const char* path);

/* The search path ROCm's loader derives from an embedded one:
 * weakly_canonical(dirname(binary_path) / path). An absolute `path` is not
 * joined; a `binary_path` without '/' lies in the current directory. NULL
 * if out of memory. */
char* kp_path_resolve(const char* binary_path, const char* path);

/* Appends `path` with every @GFXARCH@ replaced by each target of each list,
 * in list order, or `path` itself if it has no placeholder. Paths already
 * in `out` are not added again. */
kpack_error_t kp_path_expand_gfxarch(const char* path,
                                     const kp_target_list* targets,
                                     size_t target_list_count, kp_strlist* out);

/* Appends dir + "/" + name for every "*.kpack" entry directly inside `dir`
 * (dot files excluded, as a shell glob would), in byte-wise name order.
 *   IO_ERROR  the directory cannot be read */
kpack_error_t kp_path_list_dir(const char* dir, kp_strlist* out);

#endif /* KPACK_SEARCH_PATH_H */
