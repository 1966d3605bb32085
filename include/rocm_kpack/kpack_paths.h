/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the lists and directories users name archives with,
 * read one way by the loader (ROCM_KPACK_PATH), kpackfs (its SOURCE list
 * and /etc/fstab) and the kpack tool (a directory given as ARCHIVE).
 */
#ifndef ROCM_KPACK_PATHS_H
#define ROCM_KPACK_PATHS_H

#include <stddef.h>

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Splits a ':'-separated list into its elements, in order, empty ones
 * dropped. "\:" stands for a ':' inside an element (archive names carry
 * one: rand_gfx90a:xnack-.kpack); every other byte, any other backslash
 * included, stands for itself, so that a list without "\:" splits as it
 * always has. On success *items holds *count malloc'ed strings, freed
 * with kpack_path_list_free().
 *   INVALID_ARGUMENT  a NULL argument
 *   OUT_OF_MEMORY */
KPACK_API kpack_error_t kpack_path_list_split(const char* list, char*** items,
                                              size_t* count);
KPACK_API void kpack_path_list_free(char** items, size_t count);

/* When element `index` of a list split by kpack_path_list_split() names
 * nothing that exists but, joined by ':' with the element before or after
 * it, names a file or directory that does: that joined path, malloc'ed
 * (the list meant one name with a ':' in it, which wants "\:"). NULL
 * otherwise. */
KPACK_API char* kpack_path_list_joined(char* const* items, size_t count,
                                       size_t index);

/* The archives a directory holds: every regular file named *.kpack below
 * `dir`, sub-directories included (hidden ones too; symbolic links to
 * directories are not followed), each level in byte-wise name order, as
 * `dir`/... paths. On success *paths holds *count malloc'ed strings (none
 * when there is no archive), freed with kpack_path_list_free().
 *   INVALID_ARGUMENT  a NULL argument
 *   IO_ERROR          `dir` or a directory below it cannot be read (errno
 *                     says why)
 *   OUT_OF_MEMORY */
KPACK_API kpack_error_t kpack_find_archives(const char* dir, char*** paths,
                                            size_t* count);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_PATHS_H */
