/* SPDX-License-Identifier: MIT
 *
 * Naming archives: ':'-separated lists with "\:" for a colon inside a name,
 * and the *.kpack files below a directory in a fixed order (so that what a
 * mount shows and what the tool lists do not depend on readdir order). The
 * loader, kpackfs and the kpack tool all read them through here.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/grow.h"
#include "rocm_kpack/kpack_paths.h"

typedef struct pl_list {
  char** items;
  size_t count, cap;
} pl_list;

/* Takes `item` (freed on failure). */
static kpack_error_t pl_push(pl_list* list, char* item) {
  char** items;
  if (item == NULL || (items = kp_grow(list->items, list->count, &list->cap,
                                       sizeof(*items), 8)) == NULL) {
    free(item);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  list->items = items;
  list->items[list->count++] = item;
  return KPACK_SUCCESS;
}

KPACK_API void kpack_path_list_free(char** items, size_t count) {
  for (size_t i = 0; i < count && items != NULL; i++)
    free(items[i]);
  free(items);
}

KPACK_API kpack_error_t kpack_path_list_split(const char* list, char*** items,
                                              size_t* count) {
  if (list == NULL || items == NULL || count == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  pl_list out = {0};
  kpack_error_t err = KPACK_SUCCESS;
  const char* p = list;
  while (err == KPACK_SUCCESS && *p != '\0') {
    /* An element is never longer than what is left of the list. */
    char* item = malloc(strlen(p) + 1);
    size_t len = 0;
    if (item == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    for (; *p != '\0' && *p != ':'; p++) {
      if (p[0] == '\\' && p[1] == ':')
        p++;
      item[len++] = *p;
    }
    item[len] = '\0';
    if (*p == ':')
      p++;
    if (len > 0)
      err = pl_push(&out, item);
    else
      free(item);
  }
  if (err != KPACK_SUCCESS) {
    kpack_path_list_free(out.items, out.count);
    return err;
  }
  *items = out.items;
  *count = out.count;
  return KPACK_SUCCESS;
}

static char* pl_join(const char* a, const char* b) {
  char* joined = NULL;
  struct stat st;
  if (asprintf(&joined, "%s:%s", a, b) < 0)
    return NULL;
  if (stat(joined, &st) == 0)
    return joined;
  free(joined);
  return NULL;
}

KPACK_API char* kpack_path_list_joined(char* const* items, size_t count,
                                       size_t index) {
  struct stat st;
  char* joined = NULL;
  if (items == NULL || index >= count || stat(items[index], &st) == 0)
    return NULL;
  if (index + 1 < count)
    joined = pl_join(items[index], items[index + 1]);
  if (joined == NULL && index > 0)
    joined = pl_join(items[index - 1], items[index]);
  return joined;
}

static int pl_bytewise(const struct dirent** a, const struct dirent** b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static bool pl_is_archive_name(const char* name) {
  size_t n = strlen(name);
  return n > 6 && strcmp(name + n - 6, ".kpack") == 0;
}

static kpack_error_t pl_walk(pl_list* out, const char* dir) {
  struct dirent** entries = NULL;
  kpack_error_t err = KPACK_SUCCESS;
  int n = scandir(dir, &entries, NULL, pl_bytewise);
  if (n < 0)
    return KPACK_ERROR_IO_ERROR;
  for (int i = 0; i < n && err == KPACK_SUCCESS; i++) {
    const char* name = entries[i]->d_name;
    char* path = NULL;
    struct stat st;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
      continue;
    size_t dir_len = strlen(dir);
    bool slash = dir_len > 0 && dir[dir_len - 1] == '/';
    if (asprintf(&path, "%s%s%s", dir, slash ? "" : "/", name) < 0) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    /* lstat first: a symlinked directory could lead back up the tree. */
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      err = pl_walk(out, path);
      free(path);
    } else if (pl_is_archive_name(name) && stat(path, &st) == 0 &&
               S_ISREG(st.st_mode)) {
      err = pl_push(out, path);
    } else {
      free(path);
    }
  }
  int saved = errno;
  for (int i = 0; i < n; i++)
    free(entries[i]);
  free(entries);
  errno = saved;
  return err;
}

KPACK_API kpack_error_t kpack_find_archives(const char* dir, char*** paths,
                                            size_t* count) {
  if (dir == NULL || paths == NULL || count == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  pl_list out = {0};
  kpack_error_t err = pl_walk(&out, dir);
  if (err != KPACK_SUCCESS) {
    kpack_path_list_free(out.items, out.count);
    return err;
  }
  *paths = out.items;
  *count = out.count;
  return KPACK_SUCCESS;
}
