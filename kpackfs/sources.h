/* SPDX-License-Identifier: MIT
 *
 * sources.c: SOURCE arguments (archives, directories of archives, and the
 * ':'-separated lists /etc/fstab passes) turned into archive paths. Owns
 * nothing beyond the list it fills.
 */
#ifndef KPACKFS_SOURCES_H
#define KPACKFS_SOURCES_H

#include <stddef.h>

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

#endif /* KPACKFS_SOURCES_H */
