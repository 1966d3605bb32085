/* SPDX-License-Identifier: MIT
 *
 * Turns search path specifications into concrete archive paths: list
 * parsing, lexical normalisation, resolution relative to the binary (the
 * part of a path that exists with its symlinks followed, as ROCm's loader
 * does), @GFXARCH@ substitution and directory listing. Only the resolution
 * and kp_path_list_dir look at the file system.
 */
#include "loader/search_path.h"
#include "rocm_kpack/kpack_paths.h"
#include "common/grow.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

kpack_error_t kp_strlist_push_owned(kp_strlist* list, char* str) {
  if (str == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  char** grown =
      kp_grow(list->items, list->count, &list->cap, sizeof(*grown), 8);
  if (grown == NULL) {
    free(str);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  list->items = grown;
  list->items[list->count++] = str;
  return KPACK_SUCCESS;
}

kpack_error_t kp_strlist_push(kp_strlist* list, const char* str) {
  return kp_strlist_push_owned(list, strdup(str));
}

bool kp_strlist_contains(const kp_strlist* list, const char* str) {
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i], str) == 0)
      return true;
  return false;
}

void kp_strlist_free(kp_strlist* list) {
  for (size_t i = 0; i < list->count; i++)
    free(list->items[i]);
  free(list->items);
  list->items = NULL;
  list->count = list->cap = 0;
}

kpack_error_t kp_path_list_parse(const char* spec, kp_strlist* out) {
  char** items = NULL;
  size_t count = 0;
  kpack_error_t err = kpack_path_list_split(spec, &items, &count);
  for (size_t i = 0; err == KPACK_SUCCESS && i < count; i++) {
    err = kp_strlist_push_owned(out, items[i]);
    items[i] = NULL; /* the list owns it now, or freed it */
  }
  kpack_path_list_free(items, count);
  return err;
}

char* kp_path_normalize(const char* path) {
  size_t len = strlen(path);
  char* out = malloc(len + 2); /* never longer than the input, or "." */
  if (out == NULL)
    return NULL;
  bool absolute = path[0] == '/';
  size_t base = absolute ? 1 : 0; /* output bytes no ".." may remove */
  size_t olen = base;
  size_t depth = 0; /* components in the output that ".." may remove */
  if (absolute)
    out[0] = '/';

  const char* p = path;
  while (*p != '\0') {
    while (*p == '/')
      p++;
    size_t clen = strcspn(p, "/");
    if (clen == 0 || (clen == 1 && p[0] == '.')) {
      p += clen;
      continue;
    }
    if (clen == 2 && p[0] == '.' && p[1] == '.') {
      if (depth > 0) {
        while (olen > base && out[olen - 1] != '/')
          olen--;
        if (olen > base)
          olen--; /* the separator before the removed component */
        depth--;
        p += clen;
        continue;
      }
      if (absolute) {
        p += clen; /* "/.." is "/" */
        continue;
      }
    } else {
      depth++;
    }
    if (olen > base)
      out[olen++] = '/';
    memcpy(out + olen, p, clen);
    olen += clen;
    p += clen;
  }
  if (olen == 0)
    out[olen++] = '.';
  out[olen] = '\0';
  return out;
}

char* kp_path_weakly_canonical(const char* path) {
  char* buf = strdup(path);
  char* out = NULL;
  if (buf == NULL)
    return NULL;
  /* The longest leading run of components that exists: buf[0, good).
   * stat() is asked about the path as written, so ".." after a symlink
   * goes to the parent of the symlink's target, as the kernel would go. */
  size_t len = strlen(buf), good = 0, end = 0;
  bool any = false;
  struct stat st;
  if (buf[0] == '/') {
    good = end = 1;
    any = true;
  }
  while (end < len) {
    while (end < len && buf[end] == '/')
      end++;
    size_t next = end;
    while (next < len && buf[next] != '/')
      next++;
    if (next == end)
      break;
    char saved = buf[next];
    buf[next] = '\0';
    bool exists = stat(buf, &st) == 0;
    buf[next] = saved;
    if (!exists)
      break; /* missing, a dangling or looping symlink, unreadable */
    good = end = next;
    any = true;
  }
  if (!any)
    goto lexical; /* a relative path of which nothing exists stays so */
  buf[good] = '\0';
  char* canonical = realpath(buf, NULL);
  buf[good] = path[good];
  if (canonical == NULL) {
    if (errno == ENOMEM)
      goto done;
    goto lexical; /* changed under us: no better answer than the text */
  }
  char* joined = NULL;
  int n = asprintf(&joined, "%s/%s", canonical, path + good);
  free(canonical);
  if (n < 0)
    goto done;
  out = kp_path_normalize(joined);
  free(joined);
  goto done;
lexical:
  out = kp_path_normalize(path);
done:
  free(buf);
  return out;
}

char* kp_path_resolve(const char* binary_path, const char* path) {
  if (path[0] == '/')
    return kp_path_weakly_canonical(path);
  const char* slash = strrchr(binary_path, '/');
  char* joined;
  if (slash == NULL) {
    joined = strdup(path);
  } else {
    /* Keep the slash itself so that a binary at "/x" resolves under "/". */
    size_t dir_len = (size_t)(slash - binary_path) + 1;
    size_t path_len = strlen(path);
    joined = malloc(dir_len + path_len + 1);
    if (joined != NULL) {
      memcpy(joined, binary_path, dir_len);
      memcpy(joined + dir_len, path, path_len + 1);
    }
  }
  if (joined == NULL)
    return NULL;
  char* resolved = kp_path_weakly_canonical(joined);
  free(joined);
  return resolved;
}

/* `path` with every placeholder replaced by `value`; NULL if out of memory. */
static char* substitute(const char* path, const char* value) {
  const size_t ph_len = strlen(KP_GFXARCH_PLACEHOLDER);
  size_t value_len = strlen(value), hits = 0;
  for (const char* p = path; (p = strstr(p, KP_GFXARCH_PLACEHOLDER)) != NULL;
       p += ph_len)
    hits++;
  size_t len = strlen(path);
  /* len - hits * ph_len cannot underflow: each hit is inside `path`. */
  size_t extra = len - hits * ph_len;
  if (value_len != 0 && hits > (SIZE_MAX - extra - 1) / value_len)
    return NULL;
  char* out = malloc(extra + hits * value_len + 1);
  if (out == NULL)
    return NULL;
  char* o = out;
  const char* p = path;
  const char* hit;
  while ((hit = strstr(p, KP_GFXARCH_PLACEHOLDER)) != NULL) {
    memcpy(o, p, (size_t)(hit - p));
    o += hit - p;
    memcpy(o, value, value_len);
    o += value_len;
    p = hit + ph_len;
  }
  memcpy(o, p, strlen(p) + 1);
  return out;
}

kpack_error_t kp_path_expand_gfxarch(const char* path,
                                     const kp_target_list* targets,
                                     size_t target_list_count,
                                     kp_strlist* out) {
  if (strstr(path, KP_GFXARCH_PLACEHOLDER) == NULL)
    return kp_strlist_contains(out, path) ? KPACK_SUCCESS
                                          : kp_strlist_push(out, path);
  for (size_t i = 0; i < target_list_count; i++) {
    for (size_t j = 0; j < targets[i].count; j++) {
      char* expanded = substitute(path, targets[i].names[j]);
      if (expanded == NULL)
        return KPACK_ERROR_OUT_OF_MEMORY;
      if (kp_strlist_contains(out, expanded)) {
        free(expanded);
        continue;
      }
      kpack_error_t err = kp_strlist_push_owned(out, expanded);
      if (err != KPACK_SUCCESS)
        return err;
    }
  }
  return KPACK_SUCCESS;
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static bool is_kpack_name(const char* name) {
  static const char suffix[] = ".kpack";
  size_t len = strlen(name), slen = sizeof(suffix) - 1;
  return name[0] != '.' && len > slen &&
         memcmp(name + len - slen, suffix, slen) == 0;
}

kpack_error_t kp_path_list_dir(const char* dir, kp_strlist* out) {
  kpack_error_t err = KPACK_SUCCESS;
  kp_strlist names = {0};
  DIR* d = opendir(dir);
  if (d == NULL)
    return KPACK_ERROR_IO_ERROR;
  for (;;) {
    errno = 0;
    struct dirent* entry = readdir(d);
    if (entry == NULL) {
      if (errno != 0) {
        err = KPACK_ERROR_IO_ERROR;
        goto done;
      }
      break;
    }
    if (!is_kpack_name(entry->d_name))
      continue;
    if ((err = kp_strlist_push(&names, entry->d_name)) != KPACK_SUCCESS)
      goto done;
  }
  if (names.count > 0)
    qsort(names.items, names.count, sizeof(*names.items), compare_names);
  size_t dir_len = strlen(dir);
  bool has_slash = dir_len > 0 && dir[dir_len - 1] == '/';
  for (size_t i = 0; i < names.count; i++) {
    char* path;
    if (asprintf(&path, "%s%s%s", dir, has_slash ? "" : "/", names.items[i]) <
        0) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto done;
    }
    if ((err = kp_strlist_push_owned(out, path)) != KPACK_SUCCESS)
      goto done;
  }
done:
  closedir(d);
  kp_strlist_free(&names);
  return err;
}
