/* SPDX-License-Identifier: MIT
 *
 * Reading this process's memory map (/proc/self/maps), shared by binary
 * path discovery and the HIPK metadata bound. Owned by procmaps.c; it keeps
 * no state between calls.
 */
#ifndef KPACK_PROCMAPS_H
#define KPACK_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocm_kpack/kpack_types.h"

/* One mapping. `path` points into the line it was parsed from and is not
 * terminated; path_len is 0 for anonymous mappings. */
typedef struct kp_mapping {
  uintptr_t start;
  uintptr_t end; /* exclusive */
  uint64_t offset;
  bool readable;
  unsigned dev_major;
  unsigned dev_minor;
  uint64_t inode;
  const char* path;
  size_t path_len;
} kp_mapping;

/* Parses one maps line (without its newline; NUL-terminated at len). The
 * name starts at the kernel's fixed column, so names with spaces, even
 * leading ones, come through intact. False if the line is malformed. */
bool kp_procmaps_parse_line(const char* line, size_t len, kp_mapping* out);

/* Finds the mapping that contains `addr`. On success out->path points into
 * *line, a buffer the caller frees (also set, possibly non-NULL, on
 * failure).
 *   PATH_DISCOVERY_FAILED  no mapping contains addr, or maps is unreadable */
kpack_error_t kp_procmaps_find(uintptr_t addr, kp_mapping* out, char** line);

#endif /* KPACK_PROCMAPS_H */
