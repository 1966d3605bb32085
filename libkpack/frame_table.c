/* SPDX-License-Identifier: MIT
 *
 * Indexes the zstd-per-kernel region: a u32 frame count, then per frame a
 * u32 size and the frame itself. Only the 4-byte size fields are read (and a
 * frame header where the TOC lacks original_size); frames stay on disk.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "archive.h"

/* The longest zstd frame header (ZSTD_FRAMEHEADERSIZE_MAX, which zstd.h
 * only exposes to static linkers). */
#define KP_ZSTD_HEADER_MAX 18

static uint32_t load_le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* The content size a frame declares in its header; INVALID_FORMAT if it
 * declares none or the header is not a zstd frame header. */
static kpack_error_t declared_size(int fd, const kp_extent* frame,
                                   uint64_t* size) {
  uint8_t header[KP_ZSTD_HEADER_MAX];
  size_t n =
      frame->size < sizeof(header) ? (size_t)frame->size : sizeof(header);
  kpack_error_t err = kp_pread_all(fd, header, n, frame->offset);
  if (err != KPACK_SUCCESS)
    return err;
  unsigned long long v = ZSTD_getFrameContentSize(header, n);
  if (v == ZSTD_CONTENTSIZE_UNKNOWN || v == ZSTD_CONTENTSIZE_ERROR)
    return KPACK_ERROR_INVALID_FORMAT;
  *size = v;
  return KPACK_SUCCESS;
}

kpack_error_t kp_frame_table_load(int fd, uint64_t file_size, kp_toc* toc) {
  uint8_t word[4];
  kpack_error_t err;

  if (!toc->has_region)
    return KPACK_SUCCESS; /* no kernels (checked by toc) */
  uint64_t start = toc->region_offset, size = toc->region_size;
  if (start > file_size || size > file_size - start || size < sizeof(word))
    return KPACK_ERROR_INVALID_FORMAT;
  if ((err = kp_pread_all(fd, word, sizeof(word), start)) != KPACK_SUCCESS)
    return err;
  uint32_t count = load_le32(word);
  /* Each frame needs at least its size field: refuse counts that cannot fit
   * before allocating for them. */
  if (count > (size - sizeof(word)) / sizeof(word))
    return KPACK_ERROR_INVALID_FORMAT;
  toc->extents = calloc(count ? count : 1, sizeof(*toc->extents));
  if (toc->extents == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  toc->extent_count = count;

  uint64_t pos = start + sizeof(word), end = start + size;
  for (uint32_t i = 0; i < count; i++) {
    if (end - pos < sizeof(word))
      return KPACK_ERROR_INVALID_FORMAT;
    if ((err = kp_pread_all(fd, word, sizeof(word), pos)) != KPACK_SUCCESS)
      return err;
    pos += sizeof(word);
    uint64_t frame = load_le32(word);
    if (frame > end - pos)
      return KPACK_ERROR_INVALID_FORMAT;
    toc->extents[i].offset = pos;
    toc->extents[i].size = frame;
    pos += frame;
  }

  for (size_t i = 0; i < toc->kernel_count; i++) {
    kp_kernel* k = &toc->kernels[i];
    if (k->ordinal >= toc->extent_count)
      return KPACK_ERROR_INVALID_FORMAT;
    if (!k->has_size) {
      err = declared_size(fd, &toc->extents[k->ordinal], &k->size);
      if (err != KPACK_SUCCESS)
        return err;
    }
  }
  return KPACK_SUCCESS;
}
