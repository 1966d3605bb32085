/* SPDX-License-Identifier: MIT
 *
 * HIP host binaries (see kpack_host.h): the records of .hipFatBinSegment,
 * their relocated pointers (elf_file.c, shared with the HIPF reader) and, for
 * HIPK records, the metadata maps in .rocm_kpack_ref (hipk.c, the loader's
 * own parser). Everything is read and checked at open; the handle is
 * immutable afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binary/elf_file.h"
#include "loader/hipk.h"
#include "rocm_kpack/kpack_host.h"

struct kpack_host {
  kpack_host_info_t info;
  kpack_host_wrapper_t* wrappers;
  kp_hipk* metadata; /* per record; empty unless HIPK metadata parsed */
};

static kpack_error_t problem_status(kpack_host_problem_t problem) {
  switch (problem) {
    case KPACK_HOST_OK:
      return KPACK_SUCCESS;
    case KPACK_HOST_BAD_METADATA:
      return KPACK_ERROR_INVALID_METADATA;
    default:
      return KPACK_ERROR_INVALID_FORMAT;
  }
}

/* Reads and parses the metadata map at `offset` in .rocm_kpack_ref. Like
 * the loader, it looks at most KP_HIPK_MAX_SIZE bytes ahead, and never past
 * the section. */
static kpack_error_t read_metadata(const kp_input* ref, uint64_t offset,
                                   kp_scratch* scratch, kp_hipk* out,
                                   kpack_host_problem_t* problem) {
  const uint8_t* bytes;
  uint64_t left = ref->size - offset; /* offset < size: checked by caller */
  size_t n = left < KP_HIPK_MAX_SIZE ? (size_t)left : KP_HIPK_MAX_SIZE;
  kpack_error_t err = kp_input_view(ref, offset, n, scratch, &bytes);
  if (err != KPACK_SUCCESS)
    return err;
  err = kp_hipk_parse(bytes, n, out);
  if (err == KPACK_ERROR_INVALID_METADATA) {
    *problem = KPACK_HOST_BAD_METADATA;
    return KPACK_SUCCESS;
  }
  return err;
}

/* Classifies one HIPK record's pointer and reads what it points at. */
static kpack_error_t read_hipk(elf_file* elf, const elf_pointer* ptr,
                               size_t ref_index, const kp_input* ref,
                               kp_scratch* scratch, kpack_host_wrapper_t* w,
                               kp_hipk* meta) {
  uint64_t offset;
  if (ptr->how == ELF_PTR_UNDEFINED) {
    w->problem = KPACK_HOST_UNDEFINED_SYMBOL;
  } else if (ptr->how == ELF_PTR_STORED && ptr->value == 0) {
    w->problem = KPACK_HOST_NULL_POINTER;
  } else if (ref_index != 0 && elf_pointer_in(elf, ptr, ref_index, &offset)) {
    w->metadata_offset = offset;
    kpack_error_t err = read_metadata(ref, offset, scratch, meta, &w->problem);
    if (err != KPACK_SUCCESS)
      return err;
  } else if (elf_pointer_section(elf, ptr) != 0) {
    w->problem = KPACK_HOST_OUTSIDE_KPACK_REF;
  } else {
    w->problem = KPACK_HOST_OUTSIDE_SECTIONS;
  }
  return KPACK_SUCCESS;
}

static kpack_error_t read_records(elf_file* elf, size_t seg, size_t ref_index,
                                  struct kpack_host* h) {
  kpack_error_t err;
  kp_input ref = {0};
  kp_scratch meta_buf = {0};
  elf_wrapper* records;
  size_t count;
  bool any_hipf = false, any_hipk = false;

  if ((err = elf_read_wrappers(elf, seg, &records, &count)) != KPACK_SUCCESS)
    return err;
  h->wrappers = calloc(count ? count : 1, sizeof(*h->wrappers));
  h->metadata = calloc(count ? count : 1, sizeof(*h->metadata));
  if (h->wrappers == NULL || h->metadata == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  h->info.wrapper_count = count;
  for (size_t i = 0; i < count; i++) {
    kpack_host_wrapper_t* w = &h->wrappers[i];
    w->magic = records[i].magic;
    w->version = records[i].version;
    w->reserved = records[i].reserved;
    w->pointer = records[i].pointer.value;
    any_hipf |= w->magic == KPACK_HOST_HIPF_MAGIC;
    any_hipk |= w->magic == KPACK_HOST_HIPK_MAGIC;
  }
  /* Metadata lives in .rocm_kpack_ref: a section the records need must
   * lie within the file. */
  if (any_hipk && ref_index != 0 &&
      (err = elf_section_input(elf, ref_index, &ref)) != KPACK_SUCCESS)
    goto done;
  for (size_t i = 0; i < count; i++) {
    kpack_host_wrapper_t* w = &h->wrappers[i];
    if (w->magic == KPACK_HOST_HIPK_MAGIC) {
      err = read_hipk(elf, &records[i].pointer, ref_index, &ref, &meta_buf, w,
                      &h->metadata[i]);
      if (err != KPACK_SUCCESS)
        goto done;
      if (w->problem == KPACK_HOST_OK) {
        w->kernel_name = h->metadata[i].kernel_name;
        w->search_paths = (const char* const*)h->metadata[i].search_paths.items;
        w->search_path_count = h->metadata[i].search_paths.count;
      }
    } else if (w->magic != KPACK_HOST_HIPF_MAGIC) {
      w->problem = KPACK_HOST_BAD_MAGIC;
    }
    w->status = problem_status(w->problem);
  }
  h->info.kind = any_hipk                         ? KPACK_HOST_KPACKIFIED
                 : any_hipf || h->info.has_fatbin ? KPACK_HOST_FAT
                                                  : KPACK_HOST_NONE;
  err = KPACK_SUCCESS;
done:
  free(records);
  kp_scratch_free(&meta_buf);
  return err;
}

static kpack_error_t read_host(const kp_input* in, struct kpack_host* h) {
  kpack_error_t err;
  elf_file elf;
  size_t seg, fat, ref;
  if ((err = elf_open(in, &elf)) != KPACK_SUCCESS)
    return err;
  h->info.elf_type = elf.type;
  h->info.machine = elf.machine;
  if ((err = elf_find_section(&elf, ".hipFatBinSegment", &seg)) ||
      (err = elf_find_section(&elf, ".hip_fatbin", &fat)) ||
      (err = elf_find_section(&elf, ".rocm_kpack_ref", &ref)))
    goto done;
  h->info.has_fatbin = fat != 0;
  h->info.has_kpack_ref = ref != 0;
  h->info.kind = fat != 0 ? KPACK_HOST_FAT : KPACK_HOST_NONE;
  if (seg != 0)
    err = read_records(&elf, seg, ref, h);
done:
  elf_close(&elf);
  return err;
}

static kpack_error_t open_input(const kp_input* in, kpack_host_t** out) {
  struct kpack_host* h = calloc(1, sizeof(*h));
  if (h == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = read_host(in, h);
  if (err != KPACK_SUCCESS) {
    kpack_host_close(h);
    return err;
  }
  *out = h;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_host_open(const char* path, kpack_host_t** host) {
  kp_input in;
  if (host == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *host = NULL;
  if (path == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t err = kp_input_open(path, &in);
  if (err != KPACK_SUCCESS)
    return err;
  err = open_input(&in, host);
  close(in.fd);
  return err;
}

KPACK_API kpack_error_t kpack_host_open_memory(const void* data, size_t size,
                                               kpack_host_t** host) {
  kp_input in;
  if (host != NULL)
    *host = NULL;
  if (host == NULL || !kp_input_memory(data, size, &in))
    return KPACK_ERROR_INVALID_ARGUMENT;
  return open_input(&in, host);
}

KPACK_API kpack_error_t kpack_host_get_info(const kpack_host_t* host,
                                            kpack_host_info_t* info) {
  if (host == NULL || info == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *info = host->info;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_host_get_wrapper(const kpack_host_t* host,
                                               size_t index,
                                               kpack_host_wrapper_t* wrapper) {
  if (host == NULL || wrapper == NULL || index >= host->info.wrapper_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *wrapper = host->wrappers[index];
  return wrapper->status;
}

KPACK_API kpack_error_t kpack_host_get_arches(const kpack_host_t* host,
                                              size_t index,
                                              const char* const** arches,
                                              size_t* count) {
  if (arches != NULL)
    *arches = NULL;
  if (count != NULL)
    *count = 0;
  if (host == NULL || arches == NULL || count == NULL ||
      index >= host->info.wrapper_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (host->wrappers[index].problem == KPACK_HOST_OK)
    kp_hipk_record_arches(&host->metadata[index],
                          host->wrappers[index].reserved, arches, count);
  if (*count == 0)
    *arches = NULL;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_host_get_binary_arches(const kpack_host_t* host,
                                                     size_t index,
                                                     const char* const** arches,
                                                     size_t* count) {
  if (arches != NULL)
    *arches = NULL;
  if (count != NULL)
    *count = 0;
  if (host == NULL || arches == NULL || count == NULL ||
      index >= host->info.wrapper_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_strlist* list = &host->metadata[index].arches;
  if (host->wrappers[index].problem == KPACK_HOST_OK && list->count > 0) {
    *arches = (const char* const*)list->items;
    *count = list->count;
  }
  return KPACK_SUCCESS;
}

KPACK_API const char* kpack_host_problem_string(kpack_host_problem_t problem) {
  switch (problem) {
    case KPACK_HOST_OK:
      return "no problem";
    case KPACK_HOST_BAD_MAGIC:
      return "the record's magic is neither HIPF nor HIPK";
    case KPACK_HOST_NULL_POINTER:
      return "the metadata pointer is 0 and no relocation sets it";
    case KPACK_HOST_UNDEFINED_SYMBOL:
      return "the metadata pointer is relocated against an undefined symbol";
    case KPACK_HOST_OUTSIDE_SECTIONS:
      return "the metadata pointer is outside every section of the file";
    case KPACK_HOST_OUTSIDE_KPACK_REF:
      return "the metadata pointer is outside .rocm_kpack_ref";
    case KPACK_HOST_BAD_METADATA:
      return "the metadata is not a {kernel_name, kpack_search_paths} map "
             "(malformed, truncated, missing a key, or a bad kpack_arches)";
  }
  return "unknown problem";
}

KPACK_API void kpack_host_close(kpack_host_t* host) {
  if (host == NULL)
    return;
  for (size_t i = 0; i < host->info.wrapper_count && host->metadata; i++)
    kp_hipk_free(&host->metadata[i]);
  free(host->metadata);
  free(host->wrappers);
  free(host);
}

KPACK_API bool kpack_is_host_binary(const void* data, size_t size) {
  const uint8_t* h = data;
  return size >= 20 && elf_ident(h, size) == ELF_IDENT_64LE &&
         (unsigned)(h[18] | h[19] << 8) != ELF_EM_AMDGPU;
}

KPACK_API kpack_error_t kpack_host_diagnose(const char* path, char* why,
                                            size_t why_size) {
  kp_input in;
  elf_file elf;
  elf_wrapper* records = NULL;
  size_t count, seg;
  if (path == NULL || why == NULL || why_size == 0)
    return KPACK_ERROR_INVALID_ARGUMENT;
  why[0] = '\0';
  kpack_error_t err = kp_input_open(path, &in);
  if (err != KPACK_SUCCESS)
    return err;
  if ((err = elf_open(&in, &elf)) == KPACK_SUCCESS) {
    err = elf_find_section(&elf, ".hipFatBinSegment", &seg);
    if (err == KPACK_SUCCESS && seg != 0)
      err = elf_read_wrappers(&elf, seg, &records, &count);
    free(records);
    elf_close(&elf);
  }
  if (err == KPACK_ERROR_INVALID_FORMAT)
    snprintf(why, why_size, "%s", elf.why);
  close(in.fd);
  return err;
}

KPACK_API kpack_error_t kpack_resolve_search_path(const char* binary_path,
                                                  const char* search_path,
                                                  char** resolved) {
  if (resolved != NULL)
    *resolved = NULL;
  if (binary_path == NULL || search_path == NULL || resolved == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *resolved = kp_path_resolve(binary_path, search_path);
  return *resolved != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
}
