/* SPDX-License-Identifier: MIT
 *
 * Per-kernel TOC "metadata" maps: the getters over what toc.c kept, and
 * the check the writer applies before storing one. A map is kept and
 * returned as its exact MessagePack bytes; JSON is rendered on request.
 */
#include <stdlib.h>

#include "archive/archive.h"
#include "common/msgpack_json.h"
#include "common/msgpack_reader.h"

kpack_error_t kp_metadata_check(const void* data, size_t size) {
  mp_cursor c = mp_cursor_make(data, size);
  uint32_t pairs;
  char* json = NULL;
  size_t len, used;
  if (data == NULL || mp_read_map(&c, &pairs) != MP_OK)
    return KPACK_ERROR_INVALID_ARGUMENT;
  /* Rendering it proves it well-formed, exactly one value, and shallow
   * enough for every reader here (list --json, the kpackfs xattr). */
  kpack_error_t err = kp_msgpack_to_json(data, size, false, &json, &len, &used);
  free(json);
  if (err == KPACK_ERROR_OUT_OF_MEMORY)
    return err;
  if (err != KPACK_SUCCESS || used != size)
    return KPACK_ERROR_INVALID_ARGUMENT;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_entry_metadata(kpack_archive_t archive,
                                                 const char* binary_name,
                                                 const char* arch,
                                                 const void** data,
                                                 size_t* size) {
  if (data != NULL)
    *data = NULL;
  if (size != NULL)
    *size = 0;
  if (archive == NULL || binary_name == NULL || arch == NULL || data == NULL ||
      size == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_kernel* k = kp_toc_find_kernel(&archive->toc, binary_name, arch);
  if (k == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  const uint8_t* map;
  kp_toc_metadata(&archive->toc, k, &map, size);
  *data = map;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_entry_metadata_json(kpack_archive_t archive,
                                                      const char* binary_name,
                                                      const char* arch,
                                                      char** json) {
  const void* data;
  size_t size, len;
  if (json != NULL)
    *json = NULL;
  if (json == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t err =
      kpack_get_entry_metadata(archive, binary_name, arch, &data, &size);
  if (err != KPACK_SUCCESS || data == NULL)
    return err;
  return kp_msgpack_to_json(data, size, false, json, &len, NULL);
}
