/* SPDX-License-Identifier: MIT
 *
 * Fat binary -> archive entries, streamed (see kpack_fatbin_stream.h):
 * what `kpack create --fatbin` and the split share. Memory stays bounded by
 * the code objects in hand, never by the size of the ELF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/report.h"
#include "rocm_kpack/kpack_ext.h"

struct fbs_open {
  const kpack_fatbin_t* fatbin;
  size_t bundle;
  kpack_bundle_t* handle;
};

struct kpack_fatbin_reader {
  struct fbs_open* open; /* bundles kept: (fatbin, index, handle) */
  size_t open_count, open_cap;
  void* code; /* the last code object read from a plain bundle */
  size_t code_cap;
};

static const char* compression_name(const kpack_bundle_info_t* info) {
  switch (info->compression) {
    case KPACK_BUNDLE_ZLIB:
      return "zlib";
    case KPACK_BUNDLE_ZSTD:
      return "zstd";
    case KPACK_BUNDLE_UNCOMPRESSED:
      break;
  }
  return "none";
}

KPACK_API kpack_error_t kpack_fatbin_list_code_objects(
    const kpack_fatbin_t* fatbin, const char* path, const char* name,
    kpack_fatbin_code_object_fn fn, void* user, kpack_message_fn message,
    void* message_user) {
  kp_report r = {message, message_user, KPACK_SUCCESS};
  kpack_fatbin_info_t info;
  kpack_bundle_t* bundle = NULL;
  char* binary = NULL;
  if (fatbin == NULL || path == NULL || name == NULL || fn == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t err = kpack_fatbin_get_info(fatbin, &info);
  if (err != KPACK_SUCCESS) {
    kp_status_error(&r, path, err);
    goto done;
  }
  for (size_t b = 0; b < info.bundle_count; b++) {
    kpack_bundle_info_t binfo;
    size_t device = 0;
    err = kpack_fatbin_list_bundle(fatbin, b, &bundle);
    if (err != KPACK_SUCCESS) {
      kp_error(&r, path, err, err == KPACK_ERROR_IO_ERROR ? errno : 0,
               "%s: code object %zu: %s (%s)", path, b, kpack_error_string(err),
               kp_read_reason(err, errno));
      goto done;
    }
    kpack_bundle_get_info(bundle, &binfo);
    if (asprintf(&binary, "%s#%zu", name, b) < 0) {
      binary = NULL;
      err = KPACK_ERROR_OUT_OF_MEMORY;
      kp_out_of_memory(&r);
      goto done;
    }
    for (size_t i = 0; i < binfo.entry_count; i++) {
      kpack_bundle_entry_t e;
      kpack_bundle_get_entry(bundle, i, &e);
      if (e.arch == NULL)
        continue; /* host code, or another offload kind */
      if (kpack_layout_arch_problem(e.arch) != NULL) {
        err = KPACK_ERROR_INVALID_FORMAT;
        kp_error(&r, path, err, 0,
                 "%s: code object %zu: target '%s' cannot be a directory "
                 "name",
                 path, b, e.arch);
        goto done;
      }
      kpack_fatbin_code_object_t entry = {
          .binary = binary,
          .arch = e.arch,
          .bundle = b,
          .entry = i,
          .size = e.size,
          .compressed = binfo.compression != KPACK_BUNDLE_UNCOMPRESSED};
      if (!fn(&entry, user)) {
        err = KPACK_ERROR_CANCELLED;
        goto done;
      }
      device++;
    }
    kp_say(&r, KPACK_SEVERITY_NOTE, path, KPACK_SUCCESS, 0,
           "%s: code object %zu: %zu entries, %zu for AMD GPUs, "
           "compression %s",
           path, b, binfo.entry_count, device, compression_name(&binfo));
    free(binary);
    binary = NULL;
    kpack_bundle_free(bundle);
    bundle = NULL;
  }
done:
  free(binary);
  kpack_bundle_free(bundle);
  return err;
}

/* The bundle `index` of `fatbin`, opened once until the next release: whole
 * (decompressed) when compressed, else its entry table only. */
static kpack_error_t bundle_for(kpack_fatbin_reader_t* r,
                                const kpack_fatbin_t* fatbin, size_t index,
                                bool compressed, kpack_bundle_t** out) {
  for (size_t i = 0; i < r->open_count; i++)
    if (r->open[i].fatbin == fatbin && r->open[i].bundle == index) {
      *out = r->open[i].handle;
      return KPACK_SUCCESS;
    }
  struct fbs_open* p =
      kp_grow(r->open, r->open_count, &r->open_cap, sizeof(*p), 4);
  if (p == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  r->open = p;
  kpack_error_t err = compressed ? kpack_fatbin_get_bundle(fatbin, index, out)
                                 : kpack_fatbin_list_bundle(fatbin, index, out);
  if (err == KPACK_SUCCESS)
    r->open[r->open_count++] = (struct fbs_open){fatbin, index, *out};
  return err;
}

KPACK_API kpack_error_t kpack_fatbin_reader_create(kpack_fatbin_reader_t** r) {
  if (r == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *r = calloc(1, sizeof(**r));
  return *r != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
}

KPACK_API kpack_error_t kpack_fatbin_reader_read(
    kpack_fatbin_reader_t* r, const kpack_fatbin_t* fatbin, const char* path,
    size_t bundle, size_t entry, bool compressed, const void** data,
    size_t* size, kpack_message_fn message, void* message_user) {
  kp_report report = {message, message_user, KPACK_SUCCESS};
  kpack_bundle_t* handle;
  kpack_bundle_entry_t e;
  if (r == NULL || fatbin == NULL || path == NULL || data == NULL ||
      size == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t err = bundle_for(r, fatbin, bundle, compressed, &handle);
  if (err == KPACK_SUCCESS)
    err = kpack_bundle_get_entry(handle, entry, &e);
  if (err == KPACK_SUCCESS && e.size > SIZE_MAX)
    err = KPACK_ERROR_OUT_OF_MEMORY;
  if (err == KPACK_SUCCESS && e.data == NULL && e.size > 0) {
    if (e.size > r->code_cap) {
      void* p = realloc(r->code, (size_t)e.size);
      if (p == NULL) {
        err = KPACK_ERROR_OUT_OF_MEMORY;
        goto done;
      }
      r->code = p;
      r->code_cap = (size_t)e.size;
    }
    err = kpack_bundle_read_entry(handle, entry, r->code, r->code_cap);
    e.data = r->code;
  }
done:
  if (err != KPACK_SUCCESS) {
    kp_error(&report, path, err, err == KPACK_ERROR_IO_ERROR ? errno : 0,
             "%s: code object %zu: %s (%s)", path, bundle,
             kpack_error_string(err), kp_read_reason(err, errno));
    return err;
  }
  /* An empty entry is an empty kernel: nothing to read, and a non-NULL
   * pointer for the writer. */
  *data = e.size > 0 ? e.data : (const void*)"";
  *size = (size_t)e.size;
  return KPACK_SUCCESS;
}

KPACK_API void kpack_fatbin_reader_release(kpack_fatbin_reader_t* r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->open_count; i++)
    kpack_bundle_free(r->open[i].handle);
  r->open_count = 0;
}

KPACK_API void kpack_fatbin_reader_destroy(kpack_fatbin_reader_t* r) {
  kpack_fatbin_reader_release(r);
  if (r == NULL)
    return;
  free(r->open);
  free(r->code);
  free(r);
}
