/* SPDX-License-Identifier: MIT
 *
 * The text a code object shows as files (kpack_render.h): the
 * `kernels` table and `metadata.json`. kpackfs serves them and `kpack
 * extract` writes them; both take them from here, so a mounted and an
 * extracted tree hold the same bytes.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack_prefix.h"
#include "rocm_kpack/kpack_render.h"

/* The `kernels` columns, in order: the key each line writes and the field
 * it shows. */
static const struct {
  const char* key;
  uint32_t bit;
  size_t offset;
} resources[KPACK_CO_RESOURCE_COUNT] = {
    {"vgpr", KPACK_CO_VGPR_COUNT, offsetof(kpack_co_kernel_t, vgpr_count)},
    {"sgpr", KPACK_CO_SGPR_COUNT, offsetof(kpack_co_kernel_t, sgpr_count)},
    {"agpr", KPACK_CO_AGPR_COUNT, offsetof(kpack_co_kernel_t, agpr_count)},
    {"lds", KPACK_CO_GROUP_SEGMENT_FIXED_SIZE,
     offsetof(kpack_co_kernel_t, group_segment_fixed_size)},
    {"scratch", KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE,
     offsetof(kpack_co_kernel_t, private_segment_fixed_size)},
    {"wave", KPACK_CO_WAVEFRONT_SIZE,
     offsetof(kpack_co_kernel_t, wavefront_size)},
    {"wg", KPACK_CO_MAX_FLAT_WORKGROUP_SIZE,
     offsetof(kpack_co_kernel_t, max_flat_workgroup_size)},
    {"kernarg", KPACK_CO_KERNARG_SEGMENT_SIZE,
     offsetof(kpack_co_kernel_t, kernarg_segment_size)},
};

KPACK_API bool kpack_co_kernel_resource(const kpack_co_kernel_t* kernel,
                                        size_t index, const char** key,
                                        uint64_t* value) {
  if (key != NULL)
    *key = NULL;
  if (value != NULL)
    *value = 0;
  if (kernel == NULL || key == NULL || value == NULL ||
      index >= KPACK_CO_RESOURCE_COUNT)
    return false;
  *key = resources[index].key;
  if (!(kernel->present & resources[index].bit))
    return false;
  memcpy(value, (const char*)kernel + resources[index].offset, sizeof(*value));
  return true;
}

/* A kernel name on one line: C escapes for the backslash and for control
 * bytes, so that a name can split neither its line nor its fields. The one
 * rule for names in columns: kpack_co_escape_name() gives it to the tool. */
static void put_name(FILE* f, const char* s) {
  for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
    if (*p == '\\')
      fputs("\\\\", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\r')
      fputs("\\r", f);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(f, "\\x%02x", *p);
    else
      fputc(*p, f);
  }
}

kpack_error_t kpack_co_escape_name(const char* name, char** escaped) {
  if (escaped != NULL)
    *escaped = NULL;
  if (name == NULL || escaped == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  put_name(f, name);
  bool failed = ferror(f) != 0;
  if (fclose(f) != 0 || failed) {
    free(text);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  *escaped = text;
  return KPACK_SUCCESS;
}

static kpack_error_t render_kernels(const kpack_code_object_t* co, size_t count,
                                    char** text, size_t* size) {
  FILE* f = open_memstream(text, size);
  if (f == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    put_name(f, k.name);
    for (size_t r = 0; r < KPACK_CO_RESOURCE_COUNT; r++) {
      const char* key;
      uint64_t value;
      if (kpack_co_kernel_resource(&k, r, &key, &value))
        fprintf(f, "%s%s=%" PRIu64, r ? " " : "\t", key, value);
      else
        fprintf(f, "%s%s=-", r ? " " : "\t", key);
    }
    fputc('\n', f);
  }
  bool failed = ferror(f) != 0;
  if (fclose(f) != 0 || failed) {
    free(*text);
    *text = NULL;
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  return KPACK_SUCCESS;
}

/* The note as indented JSON, and the newline a text file ends with. A note
 * JSON cannot show (kpack_code_object_metadata_json()) is reported in
 * *status and renders as nothing. */
static kpack_error_t render_metadata(const kpack_code_object_t* co, char** text,
                                     size_t* size, kpack_error_t* status) {
  char* json = NULL;
  size_t len = 0;
  kpack_error_t err = kpack_code_object_metadata_json(co, true, &json, &len);
  if (err == KPACK_ERROR_OUT_OF_MEMORY)
    return err;
  if (err != KPACK_SUCCESS) {
    *status = err;
    *text = strdup("");
    *size = 0;
    return *text != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
  }
  char* grown = realloc(json, len + 2);
  if (grown == NULL) {
    free(json);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  memcpy(grown + len, "\n", 2);
  *text = grown;
  *size = len + 1;
  return KPACK_SUCCESS;
}

/* Renders from a parse's outcome: `co` on success, else the parse's status
 * in `parsed` (not a code object: empty texts). Frees co. */
static kpack_error_t render_parsed(kpack_error_t parsed,
                                   kpack_code_object_t* co,
                                   kpack_co_render_t* render) {
  kpack_co_render_t r = {0};
  kpack_code_object_info_t info;
  kpack_error_t err;

  r.status = parsed;
  if (r.status == KPACK_ERROR_OUT_OF_MEMORY) {
    err = r.status;
    goto fail;
  }
  if (r.status != KPACK_SUCCESS) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    if ((r.kernels = strdup("")) == NULL ||
        (r.metadata_json = strdup("")) == NULL)
      goto fail;
    *render = r;
    return KPACK_SUCCESS;
  }
  kpack_code_object_get_info(co, &info);
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if ((r.target = strdup(info.target)) == NULL)
    goto fail;
  r.kernel_count = info.kernel_count;
  if ((err = render_kernels(co, info.kernel_count, &r.kernels,
                            &r.kernels_size)) != KPACK_SUCCESS ||
      (err = render_metadata(co, &r.metadata_json, &r.metadata_json_size,
                             &r.status)) != KPACK_SUCCESS)
    goto fail;
  kpack_code_object_free(co);
  *render = r;
  return KPACK_SUCCESS;

fail:
  kpack_co_render_free(&r);
  kpack_code_object_free(co);
  return err;
}

KPACK_API kpack_error_t kpack_co_render(const void* data, size_t size,
                                        kpack_co_render_t* render) {
  kpack_code_object_t* co = NULL;
  if (render != NULL)
    memset(render, 0, sizeof(*render));
  if (render == NULL || (data == NULL && size > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  /* An empty kernel may come without a buffer; it is no code object. */
  kpack_error_t parsed =
      kpack_code_object_parse(data != NULL ? data : "", size, &co);
  return render_parsed(parsed, co, render);
}

KPACK_API kpack_error_t kpack_co_render_prefix(const void* data, size_t avail,
                                               uint64_t size,
                                               kpack_co_render_t* render) {
  kpack_code_object_t* co = NULL;
  uint64_t needed;
  if (render != NULL)
    memset(render, 0, sizeof(*render));
  if (render == NULL ||
      kpack_code_object_prefix_needed(data, avail, size, &needed) !=
          KPACK_SUCCESS ||
      needed > avail)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t parsed = kpack_code_object_parse_prefix(data, avail, size, &co);
  return render_parsed(parsed, co, render);
}

KPACK_API void kpack_co_render_free(kpack_co_render_t* render) {
  if (render == NULL)
    return;
  free(render->kernels);
  free(render->metadata_json);
  free(render->target);
  memset(render, 0, sizeof(*render));
}
