/* SPDX-License-Identifier: MIT
 *
 * sources.c: SOURCE arguments (archives, directories of archives, and the
 * ':'-separated lists /etc/fstab passes) turned into archive paths. Owns
 * nothing beyond the list it fills.
 */
#ifndef KPACKFS_SOURCES_H
#define KPACKFS_SOURCES_H

#include <stddef.h>

#include "rocm_kpack/kpack_ext.h"

/* Archive paths in mount order, canonical and without duplicates. */
typedef struct kfs_paths {
  char** items;
  size_t count;
  size_t cap;
} kfs_paths;

/* Appends the archives one SOURCE argument names: a file as is, a directory
 * as every *.kpack below it (byte-wise name order at each level, hidden
 * directories included, symlinked directories not followed). An argument
 * that is not an existing path but contains ':' is a list of SOURCEs (the
 * /etc/fstab form), split by kpack_path_list_split() ("\:" a ':' in a
 * name); empty items are dropped, and a list with none at all (":", "::")
 * is refused, as is an item only a ':' joined to its neighbour makes a
 * file of (kpack_path_list_joined()). Returns 0, or -1 after a message on
 * stderr. */
int kfs_paths_add_source(kfs_paths* paths, const char* source);
void kfs_paths_free(kfs_paths* paths);

/* Reports on stderr that archive `path` could not be opened (kpack_open()
 * returned `err`), as the kpack tool does: the status, and in parentheses
 * what kpack_archive_diagnose() finds wrong where (a truncated file: which
 * structure runs past its end, and its size), or, for a HIP host binary
 * or a code object given as a SOURCE, how to pack it into an archive. */
void kfs_report_source_error(const char* path, kpack_error_t err);

#endif /* KPACKFS_SOURCES_H */
