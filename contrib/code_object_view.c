/* SPDX-License-Identifier: MIT
 *
 * What is inside a code object, as the kpack tool shows it (declared in
 * code_object_view.h): `kpack info` on a code object file (target,
 * version, the kernel table, or the metadata note as JSON), and the
 * resource columns and JSON members that `kpack list --kernels` shows per
 * kernel, over libkpack's code object reader.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "code_object_view.h"
#include "json.h"

const char* cli_code_object_error_text(kpack_error_t err) {
  switch (err) {
    case KPACK_ERROR_INVALID_FORMAT:
      return "not an AMDGPU code object, or its ELF tables or notes are cut";
    case KPACK_ERROR_MSGPACK_PARSE_FAILED:
      return "metadata note is not valid MessagePack";
    case KPACK_ERROR_INVALID_METADATA:
      return "metadata note of the wrong shape";
    default:
      return cli_error_text(err);
  }
}

static void code_object_error(const char* subject, kpack_error_t err) {
  cli_error("%s: %s (%s)", subject, kpack_error_string(err),
            cli_code_object_error_text(err));
}

bool cli_is_code_object(const char* path) {
  uint8_t header[64];
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    return false;
  size_t n = fread(header, 1, sizeof(header), f);
  fclose(f);
  return kpack_is_code_object(header, n);
}

void cli_co_resource_cells(const kpack_co_kernel_t* k, char* out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < KPACK_CO_RESOURCE_COUNT && used < cap; i++) {
    const char* key;
    uint64_t value;
    int n = kpack_co_kernel_resource(k, i, &key, &value)
                ? snprintf(out + used, cap - used, "%s%" PRIu64, i ? "\t" : "",
                           value)
                : snprintf(out + used, cap - used, "%s-", i ? "\t" : "");
    used += n > 0 ? (size_t)n : 0;
  }
}

const char* const* cli_co_resource_headers(void) {
  static char names[KPACK_CO_RESOURCE_COUNT][16];
  static const char* headers[KPACK_CO_RESOURCE_COUNT];
  const kpack_co_kernel_t none = {0};
  for (size_t i = 0; i < KPACK_CO_RESOURCE_COUNT; i++) {
    const char* key;
    uint64_t value;
    kpack_co_kernel_resource(&none, i, &key, &value);
    for (size_t c = 0; c + 1 < sizeof(names[i]) && key[c]; c++)
      names[i][c] = (char)toupper((unsigned char)key[c]);
    headers[i] = names[i];
  }
  return headers;
}

#define RESOURCE_COLUMNS KPACK_CO_RESOURCE_COUNT

/* `"key": N`, or `"key": null` when the note has no value. */
static void json_count(cli_json* w, const char* key, const kpack_co_kernel_t* k,
                       uint32_t bit, uint64_t value) {
  cli_json_key(w, key);
  if (k->present & bit)
    cli_json_uint(w, value);
  else
    cli_json_null(w);
}

void cli_co_json_kernel_members(cli_json* w, const kpack_co_kernel_t* k) {
  cli_json_key_str(w, "name", k->name);
  cli_json_key_str(w, "symbol", k->symbol);
  json_count(w, "vgpr_count", k, KPACK_CO_VGPR_COUNT, k->vgpr_count);
  json_count(w, "sgpr_count", k, KPACK_CO_SGPR_COUNT, k->sgpr_count);
  json_count(w, "agpr_count", k, KPACK_CO_AGPR_COUNT, k->agpr_count);
  json_count(w, "group_segment_fixed_size", k,
             KPACK_CO_GROUP_SEGMENT_FIXED_SIZE, k->group_segment_fixed_size);
  json_count(w, "private_segment_fixed_size", k,
             KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE,
             k->private_segment_fixed_size);
  json_count(w, "kernarg_segment_size", k, KPACK_CO_KERNARG_SEGMENT_SIZE,
             k->kernarg_segment_size);
  json_count(w, "wavefront_size", k, KPACK_CO_WAVEFRONT_SIZE,
             k->wavefront_size);
  json_count(w, "max_flat_workgroup_size", k, KPACK_CO_MAX_FLAT_WORKGROUP_SIZE,
             k->max_flat_workgroup_size);
  json_count(w, "vgpr_spill_count", k, KPACK_CO_VGPR_SPILL_COUNT,
             k->vgpr_spill_count);
  json_count(w, "sgpr_spill_count", k, KPACK_CO_SGPR_SPILL_COUNT,
             k->sgpr_spill_count);
}

/* Reads and parses a code object file; a message and the status if not. */
static kpack_error_t load_file(const char* path, kpack_code_object_t** co) {
  void* data = NULL;
  size_t size = 0;
  *co = NULL;
  if (!cli_read_file(path, &data, &size)) {
    cli_error("%s: %s", path, strerror(errno));
    return KPACK_ERROR_IO_ERROR;
  }
  kpack_error_t err = kpack_code_object_parse(data, size, co);
  free(data);
  if (err != KPACK_SUCCESS)
    code_object_error(path, err);
  return err;
}

/* ---- kpack info FILE.hsaco ----------------------------------------------- */

/* A kernel's name as shown: demangled (malloc'ed, in *owned) with -C. */
static const char* shown_name(const kpack_co_kernel_t* k, bool demangle,
                              char** owned) {
  *owned = demangle ? cli_demangle(k->name) : NULL;
  return *owned != NULL ? *owned : k->name;
}

static void info_json(cli_json* w, const char* path,
                      const kpack_code_object_t* co,
                      const kpack_code_object_info_t* info, bool demangle) {
  cli_json_object(w, CLI_JSON_INLINE, false);
  cli_json_key_str(w, "file", path);
  cli_json_key_uint(w, "code_object_version", info->version);
  cli_json_key_uint(w, "e_flags", info->e_flags);
  cli_json_key_str(w, "target", info->target);
  cli_json_key_str(w, "processor", info->processor);
  cli_json_key_str(w, "xnack", kpack_feature_name(info->xnack));
  cli_json_key_str(w, "sramecc", kpack_feature_name(info->sramecc));
  cli_json_key_str(w, "metadata_target", info->metadata_target);
  cli_json_key(w, "kernels");
  cli_json_array(w, 4, true);
  for (size_t i = 0; i < info->kernel_count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_co_json_kernel_members(w, &k);
    if (demangle) {
      char* owned;
      cli_json_key_str(w, "demangled", shown_name(&k, true, &owned));
      free(owned);
    }
    cli_json_end(w);
  }
  cli_json_end(w);
  cli_json_end(w);
}

static void info_text(const char* path, const kpack_code_object_t* co,
                      const kpack_code_object_info_t* info, bool first,
                      bool demangle) {
  static const char* headers[RESOURCE_COLUMNS + 1];
  static const bool right[RESOURCE_COLUMNS + 1] = {true, true, true, true, true,
                                                   true, true, true, false};
  memcpy(headers, cli_co_resource_headers(),
         RESOURCE_COLUMNS * sizeof(*headers));
  headers[RESOURCE_COLUMNS] = "KERNEL";
  cli_table t = {
      .cols = RESOURCE_COLUMNS + 1, .headers = headers, .right = right};
  char cells[256];
  if (!first)
    putchar('\n');
  printf("file:         %s\n", path);
  if (info->version > 0)
    printf("code object:  AMDGPU, version %u, e_flags 0x%" PRIx32 "\n",
           info->version, info->e_flags);
  else
    printf("code object:  AMDGPU (not for the HSA runtime), e_flags 0x%" PRIx32
           "\n",
           info->e_flags);
  printf("target:       %s\n", *info->target ? info->target : "(unknown)");
  printf("processor:    %s (xnack %s, sramecc %s)\n",
         *info->processor ? info->processor : "(unknown)",
         kpack_feature_name(info->xnack), kpack_feature_name(info->sramecc));
  if (info->has_metadata)
    printf("metadata:     %s, %zu bytes\n",
           *info->metadata_target ? info->metadata_target : "(no target)",
           info->metadata_size);
  else
    printf("metadata:     none (no NT_AMDGPU_METADATA note)\n");
  printf("kernels:      %zu\n", info->kernel_count);
  if (info->kernel_count == 0)
    return;
  putchar('\n');
  for (size_t i = 0; i < info->kernel_count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    char* owned;
    cli_co_resource_cells(&k, cells, sizeof(cells));
    cli_table_row(&t, "%s\t%s", cells,
                  cli_table_text(&t, shown_name(&k, demangle, &owned)));
    free(owned);
  }
  cli_table_print(&t, stdout);
  cli_table_free(&t);
}

int cli_code_object_info(const char* path, cli_json* json, bool first,
                         bool demangle) {
  kpack_code_object_t* co;
  kpack_code_object_info_t info;
  if (load_file(path, &co) != KPACK_SUCCESS)
    return CLI_FAIL;
  kpack_code_object_get_info(co, &info);
  if (json != NULL)
    info_json(json, path, co, &info, demangle);
  else
    info_text(path, co, &info, first, demangle);
  kpack_code_object_free(co);
  return CLI_OK;
}

int cli_code_object_metadata(const char* path) {
  void* data = NULL;
  size_t size = 0;
  kpack_co_render_t r;
  if (!cli_read_file(path, &data, &size)) {
    cli_error("%s: %s", path, strerror(errno));
    return CLI_FAIL;
  }
  /* The bytes a mount shows as metadata.json: one renderer for both. */
  kpack_error_t err = kpack_co_render(data, size, &r);
  free(data);
  if (err == KPACK_SUCCESS)
    err = r.status;
  if (err == KPACK_SUCCESS)
    fwrite(r.metadata_json, 1, r.metadata_json_size, stdout);
  else
    code_object_error(path, err);
  kpack_co_render_free(&r);
  return err == KPACK_SUCCESS ? CLI_OK : CLI_FAIL;
}
