/* SPDX-License-Identifier: MIT
 *
 * HIP fat binaries: finds .hip_fatbin and .hipFatBinSegment in a host ELF,
 * resolves each __CudaFatBinaryWrapper's bundle pointer (elf_file.c applies the
 * relocation when the linker left the field zero) and records where each
 * code object's bundle starts. Nothing else is read at open: bundles are
 * listed, parsed or read an entry at a time by offload_bundle.c, straight
 * from the file, so a gigabyte library costs its section table and one
 * offset per bundle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binary/elf_file.h"
#include "binary/offload_bundle.h"
#include "rocm_kpack/kpack_host.h"
#include "common/grow.h"

/* Zero padding between walked bundles is scanned this much at a time. */
#define FB_PAD_READ ((size_t)64 * 1024)

struct kpack_fatbin {
  kpack_fatbin_info_t info;
  kp_input fatbin;   /* the .hip_fatbin bytes */
  int fd;            /* owned by the handle; -1 for a memory image */
  uint64_t* offsets; /* bundle start in .hip_fatbin, by co_index */
};

/* Bundle offsets from the wrapper table, in wrapper order. */
static kpack_error_t locate_by_wrappers(elf_file* elf, size_t seg, size_t fat,
                                        struct kpack_fatbin* fb) {
  elf_wrapper* records;
  size_t count;
  kpack_error_t err = elf_read_wrappers(elf, seg, &records, &count);
  if (err != KPACK_SUCCESS)
    return err;
  fb->offsets = calloc(count ? count : 1, sizeof(*fb->offsets));
  if (fb->offsets == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (size_t i = 0; i < count; i++)
    if (records[i].magic != KPACK_HOST_HIPF_MAGIC ||
        !elf_pointer_in(elf, &records[i].pointer, fat, &fb->offsets[i])) {
      err = KPACK_ERROR_INVALID_FORMAT;
      goto done;
    }
  fb->info.bundle_count = count;
  fb->info.has_wrappers = true;
done:
  free(records);
  return err;
}

/* The first non-zero byte at or after `pos`, or the section's size. */
static kpack_error_t skip_padding(const kp_input* in, uint64_t* pos,
                                  kp_scratch* scratch) {
  while (*pos < in->size) {
    uint64_t left = in->size - *pos;
    size_t n = left < FB_PAD_READ ? (size_t)left : FB_PAD_READ;
    const uint8_t* p;
    kpack_error_t err = kp_input_view(in, *pos, n, scratch, &p);
    if (err != KPACK_SUCCESS)
      return err;
    for (size_t i = 0; i < n; i++)
      if (p[i] != 0) {
        *pos += i;
        return KPACK_SUCCESS;
      }
    *pos += n;
  }
  return KPACK_SUCCESS;
}

/* Without wrappers, bundles follow each other in the section, each aligned
 * and zero-padded: step over each one, then over the padding. */
static kpack_error_t locate_by_walking(struct kpack_fatbin* fb) {
  kpack_error_t err;
  kp_scratch scratch = {0};
  uint64_t pos = 0;
  size_t cap = 0;
  for (;;) {
    if ((err = skip_padding(&fb->fatbin, &pos, &scratch)) != KPACK_SUCCESS)
      break;
    if (pos == fb->fatbin.size)
      break;
    kp_input rest;
    uint64_t extent;
    if ((err = kp_input_slice(&fb->fatbin, pos, fb->fatbin.size - pos,
                              &rest)) != KPACK_SUCCESS ||
        (err = ob_measure(&rest, &extent)) != KPACK_SUCCESS)
      break;
    uint64_t* p =
        kp_grow(fb->offsets, fb->info.bundle_count, &cap, sizeof(*p), 16);
    if (p == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    fb->offsets = p;
    fb->offsets[fb->info.bundle_count++] = pos;
    pos += extent; /* extent > 0: the walk always moves on */
  }
  kp_scratch_free(&scratch);
  return err;
}

static kpack_error_t open_input(const kp_input* in, struct kpack_fatbin* fb) {
  kpack_error_t err;
  elf_file elf;
  size_t fat, seg;
  if ((err = elf_open(in, &elf)) != KPACK_SUCCESS)
    return err;
  fb->info.machine = elf.machine;
  if ((err = elf_find_section(&elf, ".hip_fatbin", &fat)) != KPACK_SUCCESS ||
      (err = elf_find_section(&elf, ".hipFatBinSegment", &seg)) !=
          KPACK_SUCCESS)
    goto done;
  if (fat != 0) {
    if ((err = elf_section_input(&elf, fat, &fb->fatbin)) != KPACK_SUCCESS)
      goto done;
    fb->info.has_fatbin = true;
    fb->info.fatbin_size = fb->fatbin.size;
    err = seg != 0 ? locate_by_wrappers(&elf, seg, fat, fb)
                   : locate_by_walking(fb);
  }
done:
  elf_close(&elf);
  return err;
}

static kpack_error_t open_common(const kp_input* in, int fd,
                                 kpack_fatbin_t** out) {
  struct kpack_fatbin* fb = calloc(1, sizeof(*fb));
  if (fb == NULL) {
    if (fd >= 0)
      close(fd);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  fb->fd = fd;
  kpack_error_t err = open_input(in, fb);
  if (err != KPACK_SUCCESS) {
    int reason = errno; /* of a failed read, for the caller */
    kpack_fatbin_close(fb);
    errno = reason;
    return err;
  }
  *out = fb;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_fatbin_open(const char* path,
                                          kpack_fatbin_t** fatbin) {
  kp_input in;
  if (fatbin == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *fatbin = NULL;
  if (path == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t err = kp_input_open(path, &in);
  return err != KPACK_SUCCESS ? err : open_common(&in, in.fd, fatbin);
}

KPACK_API kpack_error_t kpack_fatbin_open_memory(const void* data, size_t size,
                                                 kpack_fatbin_t** fatbin) {
  kp_input in;
  if (fatbin != NULL)
    *fatbin = NULL;
  if (fatbin == NULL || !kp_input_memory(data, size, &in))
    return KPACK_ERROR_INVALID_ARGUMENT;
  return open_common(&in, -1, fatbin);
}

KPACK_API kpack_error_t kpack_fatbin_get_info(const kpack_fatbin_t* fatbin,
                                              kpack_fatbin_info_t* info) {
  if (fatbin == NULL || info == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *info = fatbin->info;
  return KPACK_SUCCESS;
}

/* Bundle `index` read by `read` (ob_parse or ob_list) from its start to
 * the end of .hip_fatbin, the furthest it may reach. */
static kpack_error_t read_bundle(const kpack_fatbin_t* fatbin, size_t index,
                                 kpack_bundle_t** bundle,
                                 kpack_error_t (*read)(const kp_input*,
                                                       kpack_bundle_t**)) {
  kp_input in;
  if (bundle != NULL)
    *bundle = NULL;
  if (fatbin == NULL || bundle == NULL || index >= fatbin->info.bundle_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  uint64_t at = fatbin->offsets[index];
  kpack_error_t err =
      kp_input_slice(&fatbin->fatbin, at, fatbin->fatbin.size - at, &in);
  return err != KPACK_SUCCESS ? err : read(&in, bundle);
}

KPACK_API kpack_error_t kpack_fatbin_get_bundle(const kpack_fatbin_t* fatbin,
                                                size_t index,
                                                kpack_bundle_t** bundle) {
  return read_bundle(fatbin, index, bundle, ob_parse);
}

KPACK_API kpack_error_t kpack_fatbin_list_bundle(const kpack_fatbin_t* fatbin,
                                                 size_t index,
                                                 kpack_bundle_t** bundle) {
  return read_bundle(fatbin, index, bundle, ob_list);
}

KPACK_API void kpack_fatbin_close(kpack_fatbin_t* fatbin) {
  if (fatbin == NULL)
    return;
  if (fatbin->fd >= 0)
    close(fatbin->fd);
  free(fatbin->offsets);
  free(fatbin);
}
