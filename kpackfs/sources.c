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
#include <unistd.h>

#include "kpackfs.h"
#include "rocm_kpack/kpack_paths.h"
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

/* Every *.kpack below `dir`, in kpack_find_archives()'s order. */
static int walk_dir(kfs_paths* paths, const char* dir) {
  char** found = NULL;
  size_t count = 0;
  int rc = 0;
  kpack_error_t err = kpack_find_archives(dir, &found, &count);
  if (err != KPACK_SUCCESS) {
    fprintf(stderr, "kpackfs: %s: %s\n", dir,
            err == KPACK_ERROR_IO_ERROR ? strerror(errno) : "out of memory");
    return -1;
  }
  for (size_t i = 0; i < count && rc == 0; i++)
    rc = push_file(paths, found[i]);
  kpack_path_list_free(found, count);
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

  /* A list, read as the loader reads ROCM_KPACK_PATH ("\:" for a colon
   * in a name). Empty items are dropped; but a list of nothing would
   * mount an empty tree, which no one means. */
  char** items = NULL;
  size_t count = 0;
  int rc = 0;
  if (kpack_path_list_split(source, &items, &count) != KPACK_SUCCESS) {
    fprintf(stderr, "kpackfs: out of memory\n");
    return -1;
  }
  if (count == 0) {
    fprintf(stderr,
            "kpackfs: '%s': no archive named: a SOURCE list holds only ':' "
            "separators\n",
            source);
    rc = -1;
  }
  for (size_t i = 0; i < count && rc == 0; i++) {
    char* joined = kpack_path_list_joined(items, count, i);
    if (joined != NULL) {
      fprintf(stderr,
              "kpackfs: '%s': no such file or directory; '%s' exists: write "
              "a ':' inside a name in a SOURCE list as '\\:'\n",
              items[i], joined);
      free(joined);
      rc = -1;
    } else {
      rc = add_one(paths, items[i]);
    }
  }
  kpack_path_list_free(items, count);
  return rc;
}

void kfs_paths_free(kfs_paths* paths) {
  for (size_t i = 0; i < paths->count; i++)
    free(paths->items[i]);
  free(paths->items);
  *paths = (kfs_paths){0};
}

void kfs_report_source_error(const char* path, kpack_error_t err) {
  char why[512] = "";
  uint8_t head[64];
  ssize_t n = 0;
  FILE* f = fopen(path, "rb");
  if (f != NULL) {
    n = (ssize_t)fread(head, 1, sizeof(head), f);
    fclose(f);
  }
  if (err == KPACK_ERROR_INVALID_FORMAT && n > 0 &&
      kpack_is_code_object(head, (size_t)n))
    snprintf(why, sizeof(why),
             "an AMDGPU code object, not a kpack archive: pack it with kpack "
             "create, from a tree DIR/<binary>#0/<arch>/kernel.hsaco");
  else if (err == KPACK_ERROR_INVALID_FORMAT && n > 0 &&
           kpack_is_host_binary(head, (size_t)n))
    snprintf(why, sizeof(why),
             "a HIP host binary, not a kpack archive: pack its device code "
             "first, with kpack create -o x.kpack --fatbin %s, or kpack split",
             path);
  else if ((err == KPACK_ERROR_INVALID_FORMAT ||
            err == KPACK_ERROR_MSGPACK_PARSE_FAILED ||
            err == KPACK_ERROR_UNSUPPORTED_VERSION) &&
           kpack_archive_diagnose(path, why, sizeof(why)) != err)
    why[0] = '\0';
  if (why[0] != '\0')
    fprintf(stderr, "kpackfs: %s: %s (%s)\n", path, kpack_error_string(err),
            why);
  else
    fprintf(stderr, "kpackfs: %s: %s\n", path, kpack_error_string(err));
}
