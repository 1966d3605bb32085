/* SPDX-License-Identifier: MIT
 *
 * Indexes the zstd-per-kernel region: a u32 frame count, then per frame a
 * u32 size and the frame itself. An archive written here lists the sizes in
 * its TOC (zstd_frame_sizes), so open reads only the count; otherwise the
 * size fields are walked, in buffered chunks when frames are small. Frames
 * stay on disk (only a frame header is read where the TOC lacks
 * original_size).
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "archive/archive.h"
#include "common/input.h"
#include "common/byteorder.h"

/* The longest zstd frame header (ZSTD_FRAMEHEADERSIZE_MAX, which zstd.h
 * only exposes to static linkers). */
#define KP_ZSTD_HEADER_MAX 18

/* The walk reads this much of the region at once while frames are small:
 * one pread then serves many size fields instead of one each (larger reads
 * also take the page cache's batched path). Past KP_SMALL_FRAME, copying
 * a frame out of the page cache costs more than a call to read its size
 * field alone (about 0.5 us, or 6 KB of copying, here). */
#define KP_WALK_CHUNK (256u * 1024u)
#define KP_SMALL_FRAME (4u * 1024u)

/* A window on the region: the bytes of the last read, [start, start+len). */
typedef struct region_reader {
  int fd;
  uint64_t end; /* the region's end; reads never pass it */
  uint8_t* buf;
  uint64_t start;
  size_t len;
} region_reader;

/* The u32 at pos (pos + 4 <= end). Taken from the window if it is there;
 * otherwise read alone, or with the chunk after it when `chunk`. */
static kpack_error_t region_word(region_reader* r, uint64_t pos, bool chunk,
                                 uint32_t* word) {
  if (pos < r->start || r->len < 4 || pos - r->start > r->len - 4) {
    uint64_t left = r->end - pos;
    size_t len =
        chunk ? (left < KP_WALK_CHUNK ? (size_t)left : KP_WALK_CHUNK) : 4;
    kpack_error_t err = kp_pread_all(r->fd, r->buf, len, pos);
    if (err != KPACK_SUCCESS) {
      r->len = 0;
      return err;
    }
    r->start = pos;
    r->len = len;
  }
  *word = (uint32_t)kp_load_le(r->buf + (pos - r->start), 4);
  return KPACK_SUCCESS;
}

kpack_error_t kp_frame_table_walk(int fd, const kp_toc* toc, kp_extent** out) {
  kpack_error_t err = KPACK_ERROR_OUT_OF_MEMORY;
  size_t count = toc->extent_count;
  uint64_t start = toc->region_offset, end = start + toc->region_size;
  region_reader r = {fd, end, malloc(KP_WALK_CHUNK), 0, 0};
  kp_extent* extents = calloc(count ? count : 1, sizeof(*extents));
  uint32_t word;

  *out = NULL;
  if (r.buf == NULL || extents == NULL)
    goto fail;
  if ((err = region_word(&r, start, true, &word)) != KPACK_SUCCESS)
    goto fail;
  err = KPACK_ERROR_INVALID_FORMAT;
  if (word != count)
    goto fail; /* only a file changed since open can get here */
  uint64_t pos = start + 4, last = 0;
  for (size_t i = 0; i < count; i++) {
    if (end - pos < 4)
      goto fail;
    if ((err = region_word(&r, pos, last <= KP_SMALL_FRAME, &word)))
      goto fail;
    err = KPACK_ERROR_INVALID_FORMAT;
    pos += 4;
    if (word > end - pos)
      goto fail;
    extents[i].offset = pos;
    extents[i].size = word;
    pos += word;
    last = word;
  }
  free(r.buf);
  *out = extents;
  return KPACK_SUCCESS;

fail:
  free(r.buf);
  free(extents);
  return err;
}

/* The table is usable when it has one u32 per frame and its frames fill
 * the region exactly: 4 + sum(4 + size) == zstd_size. A table that passes
 * but is still wrong (sizes swapped, say) is caught frame by frame, where
 * each read compares the frame's own size field. */
static bool table_fits(const kp_toc* toc, const uint8_t* sizes, size_t len,
                       size_t count) {
  if (sizes == NULL || len / 4 != count || len % 4 != 0)
    return false;
  uint64_t total = 4, limit = toc->region_size;
  for (size_t i = 0; i < count; i++) {
    uint64_t frame = 4 + kp_load_le(sizes + 4 * i, 4);
    if (frame > limit - total)
      return false;
    total += frame;
  }
  return total == limit;
}

static void extents_from_table(kp_toc* toc, const uint8_t* sizes) {
  uint64_t pos = toc->region_offset + 4;
  for (size_t i = 0; i < toc->extent_count; i++) {
    pos += 4;
    toc->extents[i].offset = pos;
    toc->extents[i].size = kp_load_le(sizes + 4 * i, 4);
    pos += toc->extents[i].size;
  }
}

/* The content size a frame declares in its header; INVALID_FORMAT if it
 * declares none or the header is not a zstd frame header. The frame's size
 * field is read along with it: *size_field_ok says whether it matches the
 * extent (a frame-size table can be wrong; a walked extent cannot). */
static kpack_error_t declared_size(int fd, const kp_extent* frame,
                                   uint64_t* size, bool* size_field_ok) {
  uint8_t bytes[4 + KP_ZSTD_HEADER_MAX];
  size_t n = frame->size < KP_ZSTD_HEADER_MAX ? (size_t)frame->size
                                              : KP_ZSTD_HEADER_MAX;
  kpack_error_t err = kp_pread_all(fd, bytes, 4 + n, frame->offset - 4);
  if (err != KPACK_SUCCESS)
    return err;
  *size_field_ok = kp_load_le(bytes, 4) == frame->size;
  if (!*size_field_ok)
    return KPACK_SUCCESS;
  unsigned long long v = ZSTD_getFrameContentSize(bytes + 4, n);
  if (v == ZSTD_CONTENTSIZE_UNKNOWN || v == ZSTD_CONTENTSIZE_ERROR)
    return KPACK_ERROR_INVALID_FORMAT;
  *size = v;
  return KPACK_SUCCESS;
}

/* Checks every ordinal and fills in sizes the TOC left out. Clears
 * *extents_ok if a frame's size field disagrees with its extent. */
static kpack_error_t bind_kernels(int fd, kp_toc* toc, bool* extents_ok) {
  *extents_ok = true;
  for (size_t i = 0; i < toc->kernel_count; i++) {
    kp_kernel* k = &toc->kernels[i];
    if (k->ordinal >= toc->extent_count)
      return KPACK_ERROR_INVALID_FORMAT;
    if (!k->has_size) {
      kpack_error_t err =
          declared_size(fd, &toc->extents[k->ordinal], &k->size, extents_ok);
      if (err != KPACK_SUCCESS || !*extents_ok)
        return err;
    }
  }
  return KPACK_SUCCESS;
}

kpack_error_t kp_frame_table_load(int fd, uint64_t file_size, kp_toc* toc,
                                  const uint8_t* sizes, size_t sizes_len) {
  uint8_t word[4];
  kpack_error_t err;
  bool extents_ok;

  if (!toc->has_region)
    return KPACK_SUCCESS; /* no kernels (checked by toc) */
  uint64_t start = toc->region_offset, size = toc->region_size;
  if (start > file_size || size > file_size - start || size < sizeof(word))
    return KPACK_ERROR_INVALID_FORMAT;
  if ((err = kp_pread_all(fd, word, sizeof(word), start)) != KPACK_SUCCESS)
    return err;
  uint32_t count = (uint32_t)kp_load_le(word, 4);
  /* Each frame needs at least its size field: refuse counts that cannot fit
   * before allocating for them. */
  if (count > (size - sizeof(word)) / sizeof(word))
    return KPACK_ERROR_INVALID_FORMAT;
  toc->extent_count = count;

  if (table_fits(toc, sizes, sizes_len, count)) {
    toc->extents = calloc(count ? count : 1, sizeof(*toc->extents));
    if (toc->extents == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    extents_from_table(toc, sizes);
    toc->extents_from_table = true;
    if ((err = bind_kernels(fd, toc, &extents_ok)) != KPACK_SUCCESS)
      return err;
    if (extents_ok)
      return KPACK_SUCCESS;
    /* A frame that open had to look at disagrees: walk instead. */
    free(toc->extents);
    toc->extents = NULL;
    toc->extents_from_table = false;
  }
  /* Kernels that all have their size need no frame before the first read:
   * the walk waits until then (it reads one size field per frame). */
  bool sized = true;
  for (size_t i = 0; i < toc->kernel_count; i++) {
    if (toc->kernels[i].ordinal >= count)
      return KPACK_ERROR_INVALID_FORMAT;
    sized &= toc->kernels[i].has_size;
  }
  if (sized) {
    toc->extents_deferred = true;
    return KPACK_SUCCESS;
  }
  if ((err = kp_frame_table_walk(fd, toc, &toc->extents)) != KPACK_SUCCESS)
    return err;
  err = bind_kernels(fd, toc, &extents_ok);
  if (err == KPACK_SUCCESS && !extents_ok)
    err = KPACK_ERROR_INVALID_FORMAT; /* the file changed under the walk */
  return err;
}

kpack_error_t kp_extents(kpack_archive_t a) {
  if (!a->toc.extents_deferred ||
      __atomic_load_n(&a->toc.extents, __ATOMIC_ACQUIRE) != NULL)
    return KPACK_SUCCESS;
  kp_extent* walked;
  kpack_error_t err = kp_frame_table_walk(a->fd, &a->toc, &walked);
  if (err != KPACK_SUCCESS)
    return err;
  kp_extent* expected = NULL;
  if (!__atomic_compare_exchange_n(&a->toc.extents, &expected, walked, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    free(walked);
  return KPACK_SUCCESS;
}

kpack_error_t kp_frame_table_repair(kpack_archive_t a) {
  if (!a->toc.extents_from_table ||
      __atomic_load_n(&a->walked, __ATOMIC_ACQUIRE) != NULL)
    return KPACK_SUCCESS;
  kp_extent* walked;
  kpack_error_t err = kp_frame_table_walk(a->fd, &a->toc, &walked);
  if (err != KPACK_SUCCESS)
    return err;
  kp_extent* expected = NULL;
  /* Threads that raced here walked the same file; the first one's table is
   * kept, the others free theirs. */
  if (!__atomic_compare_exchange_n(&a->walked, &expected, walked, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    free(walked);
  return KPACK_SUCCESS;
}
