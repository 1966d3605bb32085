/* SPDX-License-Identifier: MIT
 *
 * The tree an archive shows as files (kpack_layout.h): which TOC names can
 * be paths, and the names of the files beside a kernel. kpackfs, `kpack
 * extract` and `kpack create` all ask here.
 */
#include <stdbool.h>
#include <string.h>

#include "rocm_kpack/kpack_layout.h"

#define PREFIX_LEN (sizeof(KPACK_LAYOUT_KERNEL_PREFIX) - 1)
#define RESERVED_LEN (sizeof(KPACK_LAYOUT_RESERVED_DIR) - 1)

static bool is_dot_name(const char* s, size_t n) {
  return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* One path component: not empty, not "." or "..", no '/', not too long. */
static bool is_component(const char* s) {
  size_t n = strlen(s);
  return n > 0 && n <= KPACK_LAYOUT_NAME_MAX && !is_dot_name(s, n) &&
         strchr(s, '/') == NULL;
}

KPACK_API const char* kpack_layout_binary_problem(const char* binary) {
  if (binary == NULL || *binary == '\0')
    return "empty binary name";
  if (*binary == '/')
    return "absolute binary path";
  for (const char* p = binary;;) {
    const char* slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0)
      return "empty path component";
    if (is_dot_name(p, n))
      return "'.' or '..' path component";
    if (p == binary && n == RESERVED_LEN &&
        memcmp(p, KPACK_LAYOUT_RESERVED_DIR, RESERVED_LEN) == 0)
      return "reserved name " KPACK_LAYOUT_RESERVED_DIR;
    if (n > KPACK_LAYOUT_NAME_MAX)
      return "path component longer than 255 bytes";
    if (slash == NULL)
      return NULL;
    p = slash + 1;
  }
}

KPACK_API const char* kpack_layout_arch_problem(const char* arch) {
  return arch == NULL || !is_component(arch) ? "arch is not a file name" : NULL;
}

KPACK_API const char* kpack_layout_entry_problem(const char* binary,
                                                 const char* arch,
                                                 const char* type) {
  const char* why = kpack_layout_binary_problem(binary);
  if (why != NULL)
    return why;
  if ((why = kpack_layout_arch_problem(arch)) != NULL)
    return why;
  if (type == NULL || !is_component(type))
    return "type is not a file name";
  if (strlen(type) > KPACK_LAYOUT_NAME_MAX - PREFIX_LEN)
    return "file name 'kernel.<type>' longer than 255 bytes";
  return NULL;
}

KPACK_API kpack_error_t kpack_layout_kernel_file(const char* type, char* buf,
                                                 size_t size) {
  if (type == NULL || buf == NULL || !is_component(type))
    return KPACK_ERROR_INVALID_ARGUMENT;
  size_t n = strlen(type);
  if (size < PREFIX_LEN + 1 || n > size - PREFIX_LEN - 1)
    return KPACK_ERROR_INVALID_ARGUMENT;
  memcpy(buf, KPACK_LAYOUT_KERNEL_PREFIX, PREFIX_LEN);
  memcpy(buf + PREFIX_LEN, type, n + 1);
  return KPACK_SUCCESS;
}

KPACK_API const char* kpack_layout_kernel_type(const char* file_name) {
  if (file_name == NULL ||
      strncmp(file_name, KPACK_LAYOUT_KERNEL_PREFIX, PREFIX_LEN) != 0 ||
      file_name[PREFIX_LEN] == '\0')
    return NULL;
  return file_name + PREFIX_LEN;
}

KPACK_API int kpack_layout_file_named(const char* type, bool has_map,
                                      const char* name, size_t name_len) {
  if (type == NULL || name == NULL)
    return -1;
  size_t type_len = strlen(type);
  if (type_len > 0 && name_len == PREFIX_LEN + type_len &&
      memcmp(name, KPACK_LAYOUT_KERNEL_PREFIX, PREFIX_LEN) == 0 &&
      memcmp(name + PREFIX_LEN, type, type_len) == 0)
    return KPACK_LAYOUT_FILE_KERNEL;
  static const char* const beside[] = {
      [KPACK_LAYOUT_FILE_KERNELS] = KPACK_LAYOUT_KERNELS_FILE,
      [KPACK_LAYOUT_FILE_METADATA] = KPACK_LAYOUT_METADATA_FILE,
      [KPACK_LAYOUT_FILE_TOC_METADATA] = KPACK_LAYOUT_TOC_METADATA_FILE};
  bool code_object = strcmp(type, "hsaco") == 0;
  for (int f = KPACK_LAYOUT_FILE_KERNELS; f < KPACK_LAYOUT_FILE_COUNT; f++) {
    bool present = f == KPACK_LAYOUT_FILE_TOC_METADATA ? has_map : code_object;
    if (present && strlen(beside[f]) == name_len &&
        memcmp(beside[f], name, name_len) == 0)
      return f;
  }
  return -1;
}

KPACK_API bool kpack_layout_file_stays(size_t file_source,
                                       size_t directory_source) {
  return file_source <= directory_source;
}
