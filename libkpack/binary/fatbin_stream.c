/* SPDX-License-Identifier: MIT
 *
 * Fat binary -> archive entries, streamed (see fatbin_stream.h): what
 * `kpack create --fatbin` and `kpack split` share. Memory stays bounded by
 * the code objects in hand, never by the size of the ELF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fatbin_stream.h"

struct fbs_open {
  const kpack_fatbin_t* fatbin;
  size_t bundle;
  kpack_bundle_t* handle;
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

bool fbs_list(const char* path, const kpack_fatbin_t* fatbin, const char* name,
              bool verbose, fbs_entry_fn fn, void* user) {
  kpack_fatbin_info_t info;
  kpack_bundle_t* bundle = NULL;
  char* binary = NULL;
  bool ok = false;
  kpack_error_t err = kpack_fatbin_get_info(fatbin, &info);
  if (err != KPACK_SUCCESS) {
    cli_kerror(path, err);
    goto done;
  }
  for (size_t b = 0; b < info.bundle_count; b++) {
    kpack_bundle_info_t binfo;
    size_t device = 0;
    err = kpack_fatbin_list_bundle(fatbin, b, &bundle);
    if (err != KPACK_SUCCESS) {
      cli_error("%s: code object %zu: %s (%s)", path, b,
                kpack_error_string(err), cli_read_reason(err, errno));
      goto done;
    }
    kpack_bundle_get_info(bundle, &binfo);
    if (asprintf(&binary, "%s#%zu", name, b) < 0) {
      binary = NULL;
      cli_error("out of memory");
      goto done;
    }
    for (size_t i = 0; i < binfo.entry_count; i++) {
      kpack_bundle_entry_t e;
      kpack_bundle_get_entry(bundle, i, &e);
      if (e.arch == NULL)
        continue; /* host code, or another offload kind */
      if (kpack_layout_arch_problem(e.arch) != NULL) {
        cli_error(
            "%s: code object %zu: target '%s' cannot be a directory "
            "name",
            path, b, e.arch);
        goto done;
      }
      fbs_entry entry = {
          .binary = binary,
          .arch = e.arch,
          .bundle = b,
          .entry = i,
          .size = e.size,
          .compressed = binfo.compression != KPACK_BUNDLE_UNCOMPRESSED};
      if (!fn(&entry, user))
        goto done;
      device++;
    }
    if (verbose)
      fprintf(stderr,
              "kpack: %s: code object %zu: %zu entries, %zu for AMD GPUs, "
              "compression %s\n",
              path, b, binfo.entry_count, device, compression_name(&binfo));
    free(binary);
    binary = NULL;
    kpack_bundle_free(bundle);
    bundle = NULL;
  }
  ok = true;
done:
  free(binary);
  kpack_bundle_free(bundle);
  return ok;
}

/* The bundle `index` of `fatbin`, opened once until the next release: whole
 * (decompressed) when compressed, else its entry table only. */
static kpack_error_t bundle_for(fbs_reader* r, const kpack_fatbin_t* fatbin,
                                size_t index, bool compressed,
                                kpack_bundle_t** out) {
  for (size_t i = 0; i < r->open_count; i++)
    if (r->open[i].fatbin == fatbin && r->open[i].bundle == index) {
      *out = r->open[i].handle;
      return KPACK_SUCCESS;
    }
  struct fbs_open* p =
      cli_grow(r->open, r->open_count, &r->open_cap, sizeof(*p), 4);
  if (p == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  r->open = p;
  kpack_error_t err = compressed ? kpack_fatbin_get_bundle(fatbin, index, out)
                                 : kpack_fatbin_list_bundle(fatbin, index, out);
  if (err == KPACK_SUCCESS)
    r->open[r->open_count++] = (struct fbs_open){fatbin, index, *out};
  return err;
}

bool fbs_read(fbs_reader* r, const char* path, const kpack_fatbin_t* fatbin,
              size_t bundle, size_t entry, bool compressed, const void** data,
              size_t* size) {
  kpack_bundle_t* handle;
  kpack_bundle_entry_t e;
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
    cli_error("%s: code object %zu: %s (%s)", path, bundle,
              kpack_error_string(err), cli_read_reason(err, errno));
    return false;
  }
  /* An empty entry is an empty kernel: nothing to read, and a non-NULL
   * pointer for the writer. */
  *data = e.size > 0 ? e.data : (const void*)"";
  *size = (size_t)e.size;
  return true;
}

void fbs_reader_release(fbs_reader* r) {
  for (size_t i = 0; i < r->open_count; i++)
    kpack_bundle_free(r->open[i].handle);
  r->open_count = 0;
}

void fbs_reader_free(fbs_reader* r) {
  fbs_reader_release(r);
  free(r->open);
  free(r->code);
  *r = (fbs_reader){0};
}
