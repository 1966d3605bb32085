/* SPDX-License-Identifier: MIT
 *
 * Reading kernels: raw blobs are pread straight into the caller's buffer;
 * zstd frames are pread (with their size field, checked against the frame
 * table) into a per-thread scratch buffer and decompressed straight into
 * the caller's. A small pool of (ZSTD_DCtx, scratch) pairs, one for the
 * process, lets any number of threads decompress at once: a thread takes a
 * pair from a slot (or makes one) by atomic exchange, with no lock to wait
 * on.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "archive/archive.h"
#include "common/input.h"
#include "common/byteorder.h"

/* No zstd frame expands further: each block yields at most 128 KiB and one
 * that yields anything takes at least 4 bytes (3-byte header + 1). */
#define KP_ZSTD_MAX_RATIO (128u * 1024u / 4u)

/* Idle readers, shared by every archive of the process. Taken and returned
 * by atomic exchange, without a lock, so that a process that forks in the
 * middle of a read leaves its child nothing to wait for (the reader in
 * flight is only lost to the child). A reader does not belong to an
 * archive: its context is reset by every decode and its scratch buffer
 * only ever grows. */
static _Atomic(kp_reader*) reader_pool[KP_READER_SLOTS];
static atomic_size_t reader_pool_holders;

static kp_reader* reader_get(void) {
  kp_reader* r;
  for (size_t i = 0; i < KP_READER_SLOTS; i++)
    if ((r = atomic_exchange_explicit(&reader_pool[i], NULL,
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
static void reader_put(kp_reader* r) {
  for (size_t i = 0; i < KP_READER_SLOTS; i++) {
    kp_reader* empty = NULL;
    if (atomic_compare_exchange_strong_explicit(&reader_pool[i], &empty, r,
                                                memory_order_release,
                                                memory_order_relaxed))
      return;
  }
  reader_free(r);
}

void kp_reader_pool_hold(void) {
  atomic_fetch_add_explicit(&reader_pool_holders, 1, memory_order_relaxed);
}

/* The last archive closed frees the idle readers. One opened meanwhile
 * only makes new ones: each reader is taken by exchange, freed once. */
void kp_reader_pool_release(void) {
  if (atomic_fetch_sub_explicit(&reader_pool_holders, 1,
                                memory_order_acq_rel) != 1)
    return;
  for (size_t i = 0; i < KP_READER_SLOTS; i++) {
    kp_reader* r =
        atomic_exchange_explicit(&reader_pool[i], NULL, memory_order_acquire);
    if (r != NULL)
      reader_free(r);
  }
}

size_t kp_reader_pool_idle(void) {
  size_t idle = 0;
  for (size_t i = 0; i < KP_READER_SLOTS; i++)
    idle += atomic_load_explicit(&reader_pool[i], memory_order_relaxed) != NULL;
  return idle;
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
  /* A size (from the TOC or the frame header) that the frame could not
   * possibly fill is the archive's error, and never decides how much we
   * allocate. */
  if (k->size / KP_ZSTD_MAX_RATIO > stored)
    return KPACK_ERROR_INVALID_FORMAT;
  /* Nor is a frame that declares a different size decompressed. */
  unsigned long long declared = ZSTD_getFrameContentSize(frame, stored);
  if (declared == ZSTD_CONTENTSIZE_ERROR ||
      (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != k->size))
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
    kp_reader* r = reader_get();
    if (r == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    err = decompress_frame(a, r, k, dst, &e);
    reader_put(r);
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
  kp_reader* r = reader_get();
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
  reader_put(r);
  free(kernel);
  return err;
}

/* ---- sizes and prefixes -------------------------------------------------- */

/* Kernel k's frame extent with its u32 size field checked (4 bytes read,
 * not the frame), falling back to the walked region like
 * read_checked_frame(). */
static kpack_error_t locate_frame(kpack_archive_t a, const kp_kernel* k,
                                  const kp_extent** e) {
  uint8_t field[4];
  *e = &a->toc.extents[k->ordinal];
  kpack_error_t err = kp_pread_all(a->fd, field, 4, (*e)->offset - 4);
  if (err != KPACK_SUCCESS || kp_load_le(field, 4) == (*e)->size)
    return err;
  if (a->toc.extents_from_table) {
    err = kp_frame_table_repair(a);
    if (err == KPACK_ERROR_INVALID_FORMAT)
      return KPACK_ERROR_DECOMPRESSION_FAILED;
    if (err != KPACK_SUCCESS)
      return err;
    *e = &__atomic_load_n(&a->walked, __ATOMIC_ACQUIRE)[k->ordinal];
    err = kp_pread_all(a->fd, field, 4, (*e)->offset - 4);
    if (err != KPACK_SUCCESS || kp_load_le(field, 4) == (*e)->size)
      return err;
  }
  return KPACK_ERROR_DECOMPRESSION_FAILED;
}

kpack_error_t kp_check_kernel_size(kpack_archive_t a, const kp_kernel* k) {
  if (a->toc.scheme != KPACK_COMPRESSION_ZSTD_PER_KERNEL)
    return KPACK_SUCCESS; /* open matched every blob to its size */
  const kp_extent* e = &a->toc.extents[k->ordinal];
  if (k->size / KP_ZSTD_MAX_RATIO <= e->size)
    return KPACK_SUCCESS;
  /* The frame-size table may be stale: judge by the frame's own field. */
  kpack_error_t err = locate_frame(a, k, &e);
  if (err != KPACK_SUCCESS)
    return err;
  return k->size / KP_ZSTD_MAX_RATIO > e->size ? KPACK_ERROR_INVALID_FORMAT
                                               : KPACK_SUCCESS;
}

/* Compressed bytes fed to the decoder at a time by a prefix read. */
#define KP_PREFIX_CHUNK (64u * 1024u)

/* Decodes the first `want` bytes (want < k->size) of kernel k's frame into
 * out, reading the frame in chunks only as far as they take. *too_large is
 * set when the frame's window exceeds what a streaming decoder accepts
 * (the one-shot decoder, which needs no window, still reads it). */
static kpack_error_t decode_prefix(kpack_archive_t a, kp_reader* r,
                                   const kp_kernel* k, uint8_t* out,
                                   size_t want, bool* too_large) {
  const kp_extent* e;
  kpack_error_t err = locate_frame(a, k, &e);
  if (err != KPACK_SUCCESS)
    return err;
  if (k->size / KP_ZSTD_MAX_RATIO > e->size)
    return KPACK_ERROR_INVALID_FORMAT;
  if (r->scratch_cap < KP_PREFIX_CHUNK) {
    void* grown = realloc(r->scratch, KP_PREFIX_CHUNK);
    if (grown == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    r->scratch = grown;
    r->scratch_cap = KP_PREFIX_CHUNK;
  }
  ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
  ZSTD_outBuffer ob = {out, want, 0};
  uint64_t fed = 0;
  while (ob.pos < want) {
    if (fed == e->size)
      return KPACK_ERROR_DECOMPRESSION_FAILED; /* shorter than its size */
    size_t n = e->size - fed < KP_PREFIX_CHUNK ? (size_t)(e->size - fed)
                                               : KP_PREFIX_CHUNK;
    if ((err = kp_pread_all(a->fd, r->scratch, n, e->offset + fed)) !=
        KPACK_SUCCESS)
      return err;
    if (fed == 0) {
      /* The same header check as a whole read. */
      unsigned long long declared = ZSTD_getFrameContentSize(r->scratch, n);
      if (declared == ZSTD_CONTENTSIZE_ERROR ||
          (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != k->size))
        return KPACK_ERROR_DECOMPRESSION_FAILED;
    }
    fed += n;
    ZSTD_inBuffer ib = {r->scratch, n, 0};
    while (ib.pos < ib.size && ob.pos < want) {
      size_t ret = ZSTD_decompressStream(r->dctx, &ob, &ib);
      if (ZSTD_isError(ret)) {
        *too_large =
            ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge;
        return KPACK_ERROR_DECOMPRESSION_FAILED;
      }
      if (ret == 0 && ob.pos < want)
        return KPACK_ERROR_DECOMPRESSION_FAILED; /* the frame ended early */
    }
  }
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_read_kernel_prefix(kpack_archive_t archive,
                                                 const char* binary_name,
                                                 const char* arch, void* buffer,
                                                 size_t length, size_t* size) {
  if (size != NULL)
    *size = 0;
  if (archive == NULL || binary_name == NULL || arch == NULL || size == NULL ||
      (buffer == NULL && length > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_kernel* k = kp_toc_find_kernel(&archive->toc, binary_name, arch);
  if (k == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  kpack_error_t err = kp_check_kernel_size(archive, k);
  if (err != KPACK_SUCCESS)
    return err;
  if (length >= k->size) {
    /* All of it: the whole read, with every check. */
    uint8_t empty;
    void* dst = buffer != NULL ? buffer : &empty;
    err = kp_read_kernel(archive, k, &dst);
    *size = err == KPACK_SUCCESS ? (size_t)k->size : 0;
    return err;
  }
  if (archive->toc.scheme == KPACK_COMPRESSION_NOOP) {
    err = kp_pread_all(archive->fd, buffer, length,
                       archive->toc.extents[k->ordinal].offset);
  } else {
    bool too_large = false;
    kp_reader* r = reader_get();
    if (r == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    err = decode_prefix(archive, r, k, buffer, length, &too_large);
    reader_put(r);
    if (too_large) {
      void* whole = NULL;
      if ((err = kp_read_kernel(archive, k, &whole)) == KPACK_SUCCESS)
        memcpy(buffer, whole, length);
      free(whole);
    }
  }
  *size = err == KPACK_SUCCESS ? length : 0;
  return err;
}

/* ---- public reads -------------------------------------------------------- */

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
