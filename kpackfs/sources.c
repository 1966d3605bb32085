/* SPDX-License-Identifier: MIT
 *
 * SOURCE arguments to archive paths: files as given, directories searched
 * recursively for *.kpack in a fixed order (so that inode numbers and the
 * first-source-wins choice do not depend on readdir order), ':'-joined
 * lists for /etc/fstab. Nothing here opens an archive.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kpackfs.h"
#include "sources.h"

/* Takes ownership of `path`. A path already listed is dropped: the first
 * mention decides its place. */
static int paths_push(kfs_paths* paths, char* path) {
  for (size_t i = 0; i < paths->count; i++) {
    if (strcmp(paths->items[i], path) == 0) {
      free(path);
      return 0;
    }
  }
  char** items =
      kfs_grow(paths->items, paths->count, &paths->cap, sizeof(*items), 16);
  if (items == NULL) {
    free(path);
    fprintf(stderr, "kpackfs: out of memory\n");
    return -1;
  }
  paths->items = items;
  paths->items[paths->count++] = path;
  return 0;
}

/* A canonical path when the file exists; otherwise the argument itself, so
 * that opening it reports the error against the name the user gave. */
static int push_file(kfs_paths* paths, const char* path) {
  char* copy = realpath(path, NULL);
  if (copy == NULL)
    copy = strdup(path);
  if (copy == NULL) {
    fprintf(stderr, "kpackfs: out of memory\n");
    return -1;
  }
  return paths_push(paths, copy);
}

static bool is_archive_name(const char* name) {
  size_t n = strlen(name);
  return n > 6 && strcmp(name + n - 6, ".kpack") == 0;
}

static int bytewise(const struct dirent** a, const struct dirent** b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int walk_dir(kfs_paths* paths, const char* dir) {
  struct dirent** entries = NULL;
  int rc = 0;
  int n = scandir(dir, &entries, NULL, bytewise);
  if (n < 0) {
    fprintf(stderr, "kpackfs: %s: %s\n", dir, strerror(errno));
    return -1;
  }
  for (int i = 0; i < n && rc == 0; i++) {
    const char* name = entries[i]->d_name;
    char* path = NULL;
    struct stat st;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
      continue;
    if (asprintf(&path, "%s/%s", dir, name) < 0) {
      fprintf(stderr, "kpackfs: out of memory\n");
      rc = -1;
      break;
    }
    /* lstat first: a symlinked directory could lead back up the tree. */
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
      rc = walk_dir(paths, path);
    else if (is_archive_name(name) && stat(path, &st) == 0 &&
             S_ISREG(st.st_mode))
      rc = push_file(paths, path);
    free(path);
  }
  for (int i = 0; i < n; i++)
    free(entries[i]);
  free(entries);
  return rc;
}

static int add_one(kfs_paths* paths, const char* source) {
  struct stat st;
  if (stat(source, &st) != 0 || !S_ISDIR(st.st_mode))
    return push_file(paths, source);
  char* dir = realpath(source, NULL);
  if (dir == NULL) {
    fprintf(stderr, "kpackfs: %s: %s\n", source, strerror(errno));
    return -1;
  }
  size_t before = paths->count;
  int rc = walk_dir(paths, dir);
  if (rc == 0 && paths->count == before) {
    fprintf(stderr, "kpackfs: %s: no *.kpack archive in this directory\n",
            source);
    rc = -1;
  }
  free(dir);
  return rc;
}

int kfs_paths_add_source(kfs_paths* paths, const char* source) {
  struct stat st;
  if (*source == '\0') {
    fprintf(stderr, "kpackfs: empty SOURCE\n");
    return -1;
  }
  if (stat(source, &st) == 0 || strchr(source, ':') == NULL)
    return add_one(paths, source);

  char* list = strdup(source);
  char* save = NULL;
  int rc = 0;
  if (list == NULL) {
    fprintf(stderr, "kpackfs: out of memory\n");
    return -1;
  }
  /* strtok_r drops empty items, as the loader's path lists do; but a list
   * of nothing would mount an empty tree, which no one means. */
  size_t items = 0;
  for (char* item = strtok_r(list, ":", &save); item != NULL && rc == 0;
       item = strtok_r(NULL, ":", &save), items++)
    rc = add_one(paths, item);
  if (rc == 0 && items == 0) {
    fprintf(stderr,
            "kpackfs: '%s': no archive named: a SOURCE list holds only ':' "
            "separators\n",
            source);
    rc = -1;
  }
  free(list);
  return rc;
}

void kfs_paths_free(kfs_paths* paths) {
  for (size_t i = 0; i < paths->count; i++)
    free(paths->items[i]);
  free(paths->items);
  *paths = (kfs_paths){0};
}
