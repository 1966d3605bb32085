/* SPDX-License-Identifier: MIT
 *
 * /proc/self/maps parsing and kpack_discover_binary_path(): which file is
 * mapped at an address, and at which file offset. dladdr() only knows
 * symbols and loaded objects; HIPK metadata lives in data segments, so the
 * kernel's own view of the address space is the reliable source.
 */
#include "loader/procmaps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "rocm_kpack/kpack.h"

/* The kernel pads each line after the inode to this column, then writes one
 * space, then the name (fs/proc/task_mmu.c: seq_setwidth + seq_pad). */
#define KP_MAPS_NAME_COLUMN (25 + sizeof(void*) * 6 - 1)

static const char deleted_suffix[] = " (deleted)";

bool kp_procmaps_parse_line(const char* line, size_t len, kp_mapping* out) {
  unsigned long long start, end, offset, inode;
  unsigned major, minor;
  char perms[5];
  int n = -1;
  /* No space before %n: the padding belongs to the name's column. */
  if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu%n", &start, &end, perms,
             &offset, &major, &minor, &inode, &n) != 7 ||
      n < 0 || (size_t)n > len || start > end || end > UINTPTR_MAX)
    return false;
  out->start = (uintptr_t)start;
  out->end = (uintptr_t)end;
  out->offset = offset;
  out->readable = perms[0] == 'r';
  out->dev_major = major;
  out->dev_minor = minor;
  out->inode = inode;
  size_t pos = (size_t)n;
  if (pos < len) {
    while (pos < KP_MAPS_NAME_COLUMN && line[pos] == ' ')
      pos++;
    if (pos < len && line[pos] == ' ')
      pos++;
  }
  out->path = line + pos;
  out->path_len = len - pos;
  return true;
}

kpack_error_t kp_procmaps_find(uintptr_t addr, kp_mapping* out, char** line) {
  kpack_error_t err = KPACK_ERROR_PATH_DISCOVERY_FAILED;
  size_t cap = 0;
  ssize_t len;
  FILE* maps = fopen("/proc/self/maps", "re");
  *line = NULL;
  if (maps == NULL)
    return err;
  while ((len = getline(line, &cap, maps)) > 0) {
    if ((*line)[len - 1] == '\n')
      (*line)[--len] = '\0';
    if (kp_procmaps_parse_line(*line, (size_t)len, out) && addr >= out->start &&
        addr < out->end) {
      err = KPACK_SUCCESS;
      break;
    }
  }
  fclose(maps);
  return err;
}

/* The kernel marks an unlinked file's name with " (deleted)". The name
 * without it is what the binary was loaded from, and its directory is what
 * search paths resolve against; a file really named so is kept as is,
 * recognised by its inode. Returns the length of the name to report. */
static size_t strip_deleted(const kp_mapping* m) {
  size_t slen = sizeof(deleted_suffix) - 1;
  if (m->path_len <= slen ||
      memcmp(m->path + m->path_len - slen, deleted_suffix, slen) != 0)
    return m->path_len;
  char* full = strndup(m->path, m->path_len);
  struct stat st;
  bool real_name = full != NULL && stat(full, &st) == 0 &&
                   st.st_ino == m->inode &&
                   st.st_dev == makedev(m->dev_major, m->dev_minor);
  free(full);
  return real_name ? m->path_len : m->path_len - slen;
}

KPACK_API kpack_error_t
kpack_discover_binary_path(const void* address_in_binary, char* path_out,
                           size_t path_out_size, size_t* offset_out) {
  kpack_error_t err;
  char* line = NULL;
  kp_mapping m;
  if (address_in_binary == NULL || path_out == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  uintptr_t addr = (uintptr_t)address_in_binary;
  if ((err = kp_procmaps_find(addr, &m, &line)) != KPACK_SUCCESS)
    goto done;
  /* Anonymous memory, [heap], [stack], [vdso], anon_inode:... are no file. */
  if (m.path_len == 0 || m.path[0] != '/') {
    err = KPACK_ERROR_PATH_DISCOVERY_FAILED;
    goto done;
  }
  size_t path_len = strip_deleted(&m);
  if (path_len >= path_out_size) {
    err = KPACK_ERROR_INVALID_ARGUMENT;
    goto done;
  }
  memcpy(path_out, m.path, path_len);
  path_out[path_len] = '\0';
  if (offset_out != NULL)
    *offset_out = (size_t)(addr - m.start + m.offset);
done:
  free(line);
  return err;
}
