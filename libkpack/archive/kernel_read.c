/* SPDX-License-Identifier: MIT
 *
 * Reading kernels: raw blobs are pread straight into the caller's buffer;
 * zstd frames are pread (with their size field, checked against the frame
 * table) into a per-thread scratch buffer and decompressed straight into
 * the caller's. A small pool of (ZSTD_DCtx, scratch) pairs lets any number
 * of threads decompress at once: a thread takes a pair from one of its
 * slots (or makes one) by atomic exchange, with no lock to wait on.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "archive/archive.h"
#include "common/input.h"
#include "common/byteorder.h"

/* No zstd frame expands further: each block yields at most 128 KiB and one
 * that yields anything takes at least 4 bytes (3-byte header + 1). */
#define KP_ZSTD_MAX_RATIO (128u * 1024u / 4u)

static kp_reader* reader_get(kpack_archive_t a) {
  kp_reader* r;
  for (size_t i = 0; i < KP_READER_SLOTS; i++)
    if ((r = atomic_exchange_explicit(&a->pool[i], NULL,
                                      memory_order_acquire)) != NULL)
      return r;
  r = calloc(1, sizeof(*r));
  if (r == NULL)
    return NULL;
  r->dctx = ZSTD_createDCtx();
  if (r->dctx == NULL) {
    free(r);
    return NULL;
  }
  return r;
}

static void reader_free(kp_reader* r) {
  ZSTD_freeDCtx(r->dctx);
  free(r->scratch);
  free(r);
}

/* Back into a free slot; with more threads reading than slots, freed. */
static void reader_put(kpack_archive_t a, kp_reader* r) {
  for (size_t i = 0; i < KP_READER_SLOTS; i++) {
    kp_reader* empty = NULL;
    if (atomic_compare_exchange_strong_explicit(
            &a->pool[i], &empty, r, memory_order_release, memory_order_relaxed))
      return;
  }
  reader_free(r);
}

void kp_reader_pool_free(kpack_archive_t a) {
  for (size_t i = 0; i < KP_READER_SLOTS; i++) {
    kp_reader* r =
        atomic_exchange_explicit(&a->pool[i], NULL, memory_order_acquire);
    if (r != NULL)
      reader_free(r);
  }
}

static kpack_error_t ensure_buffer(void** dst, size_t size) {
  if (*dst != NULL)
    return KPACK_SUCCESS;
  *dst = malloc(size ? size : 1); /* an empty kernel is still a pointer */
  return *dst != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
}

/* Reads a frame and the u32 size field before it into the scratch buffer
 * (frame at scratch + 4). *size_field_ok says whether the field matches the
 * extent: a frame-size table from the TOC is only trusted this far. */
static kpack_error_t read_frame(kpack_archive_t a, kp_reader* r,
                                const kp_extent* e, bool* size_field_ok) {
  if (e->size > SIZE_MAX - 4)
    return KPACK_ERROR_OUT_OF_MEMORY;
  size_t stored = (size_t)e->size;
  if (r->scratch_cap < stored + 4) {
    void* grown = realloc(r->scratch, stored + 4);
    if (grown == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    r->scratch = grown;
    r->scratch_cap = stored + 4;
  }
  /* Frames start after their size field, so offset >= 4. */
  kpack_error_t err =
      kp_pread_all(a->fd, r->scratch, stored + 4, e->offset - 4);
  if (err != KPACK_SUCCESS)
    return err;
  *size_field_ok = kp_load_le(r->scratch, 4) == e->size;
  return KPACK_SUCCESS;
}

/* The frame of kernel k, read and checked. A size field that disagrees with
 * a frame-size table makes the region be walked once and the frame read
 * again from where the walk puts it. Which extent serves a frame depends on
 * that frame alone (its own size field), never on which kernels happened to
 * be read first, so every read of a kernel gives the same answer. */
static kpack_error_t read_checked_frame(kpack_archive_t a, kp_reader* r,
                                        const kp_kernel* k,
                                        const kp_extent** e) {
  bool ok;
  *e = &a->toc.extents[k->ordinal];
  kpack_error_t err = read_frame(a, r, *e, &ok);
  if (err != KPACK_SUCCESS || ok)
    return err;
  if (a->toc.extents_from_table) {
    err = kp_frame_table_repair(a);
    if (err == KPACK_ERROR_INVALID_FORMAT)
      return KPACK_ERROR_DECOMPRESSION_FAILED; /* a corrupt region */
    if (err != KPACK_SUCCESS)
      return err;
    *e = &__atomic_load_n(&a->walked, __ATOMIC_ACQUIRE)[k->ordinal];
    if ((err = read_frame(a, r, *e, &ok)) != KPACK_SUCCESS || ok)
      return err;
  }
  return KPACK_ERROR_DECOMPRESSION_FAILED; /* changed since it was walked */
}

/* Reads, checks and decompresses kernel k's frame into *dst (see
 * kp_read_kernel); the frame stays in r->scratch + 4, *e says where it was. */
static kpack_error_t decompress_frame(kpack_archive_t a, kp_reader* r,
                                      const kp_kernel* k, void** dst,
                                      const kp_extent** used) {
  const kp_extent* e;
  if (k->size > SIZE_MAX)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = read_checked_frame(a, r, k, &e);
  if (err != KPACK_SUCCESS)
    return err;
  *used = e;
  size_t stored = (size_t)e->size, size = (size_t)k->size;
  const uint8_t* frame = (const uint8_t*)r->scratch + 4;
  /* A frame that declares a different size is refused before allocating. */
  unsigned long long declared = ZSTD_getFrameContentSize(frame, stored);
  if (declared == ZSTD_CONTENTSIZE_ERROR ||
      (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != k->size))
    return KPACK_ERROR_DECOMPRESSION_FAILED;
  /* Nor may a size (from the TOC or the frame header) that the frame could
   * not possibly fill decide how much we allocate. */
  if (k->size / KP_ZSTD_MAX_RATIO > stored)
    return KPACK_ERROR_DECOMPRESSION_FAILED;
  if ((err = ensure_buffer(dst, size)) != KPACK_SUCCESS)
    return err;
  size_t n = ZSTD_decompressDCtx(r->dctx, *dst, size, frame, stored);
  if (ZSTD_isError(n) || n != size)
    return KPACK_ERROR_DECOMPRESSION_FAILED;
  return KPACK_SUCCESS;
}

kpack_error_t kp_read_kernel(kpack_archive_t a, const kp_kernel* k,
                             void** dst) {
  void* caller_buffer = *dst;
  kpack_error_t err;

  if (a->toc.scheme == KPACK_COMPRESSION_NOOP) {
    /* Open checked the blob lies inside the file and matches k->size. */
    const kp_extent* e = &a->toc.extents[k->ordinal];
    err = ensure_buffer(dst, (size_t)k->size);
    if (err == KPACK_SUCCESS)
      err = kp_pread_all(a->fd, *dst, (size_t)k->size, e->offset);
  } else {
    const kp_extent* e;
    kp_reader* r = reader_get(a);
    if (r == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    err = decompress_frame(a, r, k, dst, &e);
    reader_put(a, r);
  }
  if (err != KPACK_SUCCESS && caller_buffer == NULL) {
    free(*dst);
    *dst = NULL;
  }
  return err;
}

kpack_error_t kp_copy_frame(kpack_archive_t a, const kp_kernel* k, void** frame,
                            size_t* cap, size_t* size) {
  const kp_extent* e;
  void* kernel = NULL;
  if (a->toc.scheme != KPACK_COMPRESSION_ZSTD_PER_KERNEL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kp_reader* r = reader_get(a);
  if (r == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = decompress_frame(a, r, k, &kernel, &e);
  if (err == KPACK_SUCCESS && (*cap < e->size || *frame == NULL)) {
    void* grown = realloc(*frame, e->size ? (size_t)e->size : 1);
    if (grown == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
    } else {
      *frame = grown;
      *cap = (size_t)e->size;
    }
  }
  if (err == KPACK_SUCCESS) {
    memcpy(*frame, (const uint8_t*)r->scratch + 4, (size_t)e->size);
    *size = (size_t)e->size;
  }
  reader_put(a, r);
  free(kernel);
  return err;
}

KPACK_API kpack_error_t kpack_get_kernel(kpack_archive_t archive,
                                         const char* binary_name,
                                         const char* arch, void** kernel_data,
                                         size_t* kernel_size) {
  if (kernel_data != NULL)
    *kernel_data = NULL;
  if (archive == NULL || binary_name == NULL || arch == NULL ||
      kernel_data == NULL || kernel_size == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_kernel* k = kp_toc_find_kernel(&archive->toc, binary_name, arch);
  if (k == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  kpack_error_t err = kp_read_kernel(archive, k, kernel_data);
  *kernel_size = err == KPACK_SUCCESS ? (size_t)k->size : 0;
  return err;
}

KPACK_API kpack_error_t kpack_read_kernel(kpack_archive_t archive,
                                          const char* binary_name,
                                          const char* arch, void* buffer,
                                          size_t capacity, size_t* size) {
  if (archive == NULL || binary_name == NULL || arch == NULL || size == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_kernel* k = kp_toc_find_kernel(&archive->toc, binary_name, arch);
  if (k == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  if (capacity < k->size || (buffer == NULL && k->size > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  uint8_t empty; /* an empty kernel still has its frame checked */
  void* dst = buffer != NULL ? buffer : &empty;
  kpack_error_t err = kp_read_kernel(archive, k, &dst);
  *size = err == KPACK_SUCCESS ? (size_t)k->size : 0;
  return err;
}

KPACK_API void kpack_free_kernel(void* kernel_data) {
  free(kernel_data);
}
