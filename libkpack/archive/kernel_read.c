/* SPDX-License-Identifier: MIT
 *
 * Reading kernels: raw blobs are copied (from the archive's mapping) or
 * pread straight into the caller's buffer; zstd frames are decompressed
 * straight into the caller's buffer from the mapping, or from a per-thread
 * scratch buffer they are pread into (with their size field, checked
 * against the frame table). mapping.c decides which. A small pool of
 * (ZSTD_DCtx, scratch) pairs, one for the process, lets any number of threads
 * decompress at once: a thread takes a pair from a slot (or makes one) by
 * atomic exchange, with no lock to wait on.
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
  free(r->window);
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

/* Small frames read one after the other in file order, as a program
 * loading every kernel or a reader of a whole tree does, are read
 * KP_WINDOW bytes at a time into the reader's window: one system call for
 * dozens of frames, into memory the reader keeps, where a fresh page of
 * the mapping costs a fault each (docs/design.md, "Reads from a
 * mapping"). Other reads are not slowed: a frame is only read ahead of
 * when it starts at most a window past where the reader's last frame of
 * that archive ended, or when that last frame followed the one before it
 * (a reader going through the kernels by name, whose order is not quite
 * the file's, jumps now and then and goes on in order from there). */
#define KP_WINDOW_FRAME (16u << 10)
#define KP_WINDOW (32u << 10)

/* The frame at e (with its size field, at window + 4 on return) from the
 * window, reading the window from the file if it lies past it: false if
 * the frame is not one to read this way. */
static bool window_frame(kpack_archive_t a, kp_reader* r, const kp_extent* e,
                         const uint8_t** frame, kpack_error_t* err) {
  uint64_t from = e->offset - 4, end = e->offset + e->size;
  if (a->map_mode != KP_MAP_SMALL || a->map_is_copy ||
      e->size > KP_WINDOW_FRAME)
    return false;
  if (r->serial != a->serial) {
    r->serial = a->serial;
    r->next = UINT64_MAX;
    r->in_order = false;
    r->window_len = 0;
  }
  bool ahead = from >= r->next && from - r->next < KP_WINDOW;
  if (from < r->window_at || end > r->window_at + r->window_len) {
    /* Ahead of the last frame, by less than a window: in file order, or
     * so with another thread taking every other frame (kpackfs). */
    if (!ahead && !r->in_order)
      return false;
    if (r->window == NULL && (r->window = malloc(KP_WINDOW)) == NULL)
      return false;
    uint64_t left = a->file_size > from ? a->file_size - from : 0;
    size_t len = left < KP_WINDOW ? (size_t)left : KP_WINDOW;
    r->window_len = 0;
    if (len < end - from)
      return false;
    if ((*err = kp_pread_all(a->fd, r->window, len, from)) != KPACK_SUCCESS)
      return true;
    r->window_at = from;
    r->window_len = len;
  }
  *frame = r->window + (from - r->window_at) + 4;
  *err = KPACK_SUCCESS;
  r->in_order = ahead;
  return true;
}

/* Kernel k's frame at extent e: in the mapping or the reader's window, or
 * read with the u32 size field before it into the scratch buffer (frame at
 * scratch + 4). *size_field_ok says whether that field matches the
 * extent: a frame-size table from the TOC is only trusted this far. */
static kpack_error_t read_frame(kpack_archive_t a, kp_reader* r,
                                const kp_extent* e, const uint8_t** frame,
                                bool* size_field_ok) {
  kpack_error_t err;
  /* Frames start after their size field, so offset >= 4. */
  if (window_frame(a, r, e, frame, &err)) {
    if (err != KPACK_SUCCESS)
      return err;
    r->next = e->offset + e->size;
    *size_field_ok = kp_load_le(*frame - 4, 4) == e->size;
    return KPACK_SUCCESS;
  }
  if (r->serial == a->serial) {
    r->next = e->offset + e->size; /* the next frame may start there */
    r->in_order = false;
  }
  if (kp_map_serves(a, e->size)) {
    *frame = a->map + e->offset;
    *size_field_ok = kp_load_le(*frame - 4, 4) == e->size;
    return KPACK_SUCCESS;
  }
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
  err = kp_pread_all(a->fd, r->scratch, stored + 4, e->offset - 4);
  if (err != KPACK_SUCCESS)
    return err;
  *frame = (const uint8_t*)r->scratch + 4;
  *size_field_ok = kp_load_le(r->scratch, 4) == e->size;
  return KPACK_SUCCESS;
}

/* The frame of kernel k, read and checked. A size field that disagrees with
 * a frame-size table makes the region be walked once and the frame read
 * again from where the walk puts it. Which extent serves a frame depends on
 * that frame alone (its own size field), never on which kernels happened to
 * be read first, so every read of a kernel gives the same answer. */
static kpack_error_t read_checked_frame(kpack_archive_t a, kp_reader* r,
                                        const kp_kernel* k, const kp_extent** e,
                                        const uint8_t** frame) {
  bool ok;
  *e = &a->toc.extents[k->ordinal];
  kpack_error_t err = read_frame(a, r, *e, frame, &ok);
  if (err != KPACK_SUCCESS || ok)
    return err;
  if (a->toc.extents_from_table) {
    err = kp_frame_table_repair(a);
    if (err == KPACK_ERROR_INVALID_FORMAT)
      return KPACK_ERROR_DECOMPRESSION_FAILED; /* a corrupt region */
    if (err != KPACK_SUCCESS)
      return err;
    *e = &__atomic_load_n(&a->walked, __ATOMIC_ACQUIRE)[k->ordinal];
    if ((err = read_frame(a, r, *e, frame, &ok)) != KPACK_SUCCESS || ok)
      return err;
  }
  return KPACK_ERROR_DECOMPRESSION_FAILED; /* changed since it was walked */
}

/* A read of one kernel: what kp_map_guarded() runs. */
typedef struct read_job {
  const kp_kernel* kernel;
  void** dst;
  kp_reader* reader;     /* zstd */
  const kp_extent* used; /* zstd: where the frame was */
  const uint8_t* frame;  /* zstd: its bytes, in the mapping or scratch */
} read_job;

/* Reads, checks and decompresses the job's frame into *dst (see
 * kp_read_kernel); the frame stays where job->frame points. */
static kpack_error_t decompress_frame(kpack_archive_t a, void* context) {
  read_job* j = context;
  const kp_kernel* k = j->kernel;
  if (k->size > SIZE_MAX)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = read_checked_frame(a, j->reader, k, &j->used, &j->frame);
  if (err != KPACK_SUCCESS)
    return err;
  size_t stored = (size_t)j->used->size, size = (size_t)k->size;
  /* A size (from the TOC or the frame header) that the frame could not
   * possibly fill is the archive's error, and never decides how much we
   * allocate. */
  if (k->size / KP_ZSTD_MAX_RATIO > stored)
    return KPACK_ERROR_INVALID_FORMAT;
  /* Nor is a frame that declares a different size decompressed. */
  unsigned long long declared = ZSTD_getFrameContentSize(j->frame, stored);
  if (declared == ZSTD_CONTENTSIZE_ERROR ||
      (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != k->size))
    return KPACK_ERROR_DECOMPRESSION_FAILED;
  if ((err = ensure_buffer(j->dst, size)) != KPACK_SUCCESS)
    return err;
  size_t n =
      ZSTD_decompressDCtx(j->reader->dctx, *j->dst, size, j->frame, stored);
  if (ZSTD_isError(n) || n != size)
    return KPACK_ERROR_DECOMPRESSION_FAILED;
  return KPACK_SUCCESS;
}

/* A raw blob, checked at open to lie inside the file and match k->size. */
static kpack_error_t copy_blob(kpack_archive_t a, void* context) {
  read_job* j = context;
  const kp_extent* e = &a->toc.extents[j->kernel->ordinal];
  size_t size = (size_t)j->kernel->size;
  kpack_error_t err = ensure_buffer(j->dst, size);
  if (err != KPACK_SUCCESS)
    return err;
  if (!kp_map_serves(a, e->size))
    return kp_pread_all(a->fd, *j->dst, size, e->offset);
  memcpy(*j->dst, a->map + e->offset, size);
  return KPACK_SUCCESS;
}

/* A reader whose decode a fault cut short goes back reset. */
static void reader_done(kp_reader* r, kpack_error_t err) {
  if (err == KPACK_ERROR_IO_ERROR)
    ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
  reader_put(r);
}

kpack_error_t kp_read_kernel(kpack_archive_t a, const kp_kernel* k,
                             void** dst) {
  void* caller_buffer = *dst;
  read_job job = {.kernel = k, .dst = dst};
  if (a->map_is_copy && a->toc.scheme == KPACK_COMPRESSION_NOOP) {
    /* A small archive read whole at open, its blobs matched to their
     * sizes and extents there: one copy, nothing to guard. A program
     * loading a few tiny kernels spends most of its time here. */
    kpack_error_t err = ensure_buffer(dst, (size_t)k->size);
    if (err == KPACK_SUCCESS)
      memcpy(*dst, a->map + a->toc.extents[k->ordinal].offset, (size_t)k->size);
    return err;
  }
  kpack_error_t err = kp_extents(a);
  if (err != KPACK_SUCCESS)
    return err;

  if (a->toc.scheme == KPACK_COMPRESSION_NOOP) {
    err = kp_map_guarded(a, copy_blob, &job);
  } else {
    if ((job.reader = reader_get()) == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    err = kp_map_guarded(a, decompress_frame, &job);
    reader_done(job.reader, err);
  }
  if (err != KPACK_SUCCESS && caller_buffer == NULL) {
    free(*dst);
    *dst = NULL;
  }
  return err;
}

/* Decompresses the job's kernel (into a buffer freed here) to check its
 * frame, then copies the frame out, both inside the guard. */
typedef struct copy_job {
  read_job read;
  void** frame;
  size_t* cap;
  size_t* size;
} copy_job;

static kpack_error_t copy_checked_frame(kpack_archive_t a, void* context) {
  copy_job* j = context;
  kpack_error_t err = decompress_frame(a, &j->read);
  if (err != KPACK_SUCCESS)
    return err;
  size_t stored = (size_t)j->read.used->size;
  if (*j->cap < stored || *j->frame == NULL) {
    void* grown = realloc(*j->frame, stored ? stored : 1);
    if (grown == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    *j->frame = grown;
    *j->cap = stored;
  }
  memcpy(*j->frame, j->read.frame, stored);
  *j->size = stored;
  return KPACK_SUCCESS;
}

kpack_error_t kp_copy_frame(kpack_archive_t a, const kp_kernel* k, void** frame,
                            size_t* cap, size_t* size) {
  void* kernel = NULL;
  if (a->toc.scheme != KPACK_COMPRESSION_ZSTD_PER_KERNEL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t walked = kp_extents(a);
  if (walked != KPACK_SUCCESS)
    return walked;
  copy_job job = {.read = {.kernel = k, .dst = &kernel},
                  .frame = frame,
                  .cap = cap,
                  .size = size};
  if ((job.read.reader = reader_get()) == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = kp_map_guarded(a, copy_checked_frame, &job);
  reader_done(job.read.reader, err);
  free(kernel);
  return err;
}

/* ---- sizes and prefixes -------------------------------------------------- */

/* The u32 size field before extent e's frame, from the mapping or read. */
static kpack_error_t read_size_field(kpack_archive_t a, const kp_extent* e,
                                     uint32_t* field) {
  uint8_t bytes[4];
  const uint8_t* at = bytes;
  if (kp_map_serves(a, e->size))
    at = a->map + e->offset - 4;
  else if (kp_pread_all(a->fd, bytes, 4, e->offset - 4) != KPACK_SUCCESS)
    return KPACK_ERROR_IO_ERROR;
  *field = (uint32_t)kp_load_le(at, 4);
  return KPACK_SUCCESS;
}

/* Kernel k's frame extent with its u32 size field checked (4 bytes read,
 * not the frame), falling back to the walked region like
 * read_checked_frame(). Reads the mapping: call it guarded. */
static kpack_error_t locate_frame(kpack_archive_t a, const kp_kernel* k,
                                  const kp_extent** e) {
  uint32_t field;
  *e = &a->toc.extents[k->ordinal];
  kpack_error_t err = read_size_field(a, *e, &field);
  if (err != KPACK_SUCCESS || field == (*e)->size)
    return err;
  if (a->toc.extents_from_table) {
    err = kp_frame_table_repair(a);
    if (err == KPACK_ERROR_INVALID_FORMAT)
      return KPACK_ERROR_DECOMPRESSION_FAILED;
    if (err != KPACK_SUCCESS)
      return err;
    *e = &__atomic_load_n(&a->walked, __ATOMIC_ACQUIRE)[k->ordinal];
    err = read_size_field(a, *e, &field);
    if (err != KPACK_SUCCESS || field == (*e)->size)
      return err;
  }
  return KPACK_ERROR_DECOMPRESSION_FAILED;
}

static kpack_error_t check_size(kpack_archive_t a, void* context) {
  const kp_kernel* k = context;
  const kp_extent* e;
  kpack_error_t err = locate_frame(a, k, &e);
  if (err != KPACK_SUCCESS)
    return err;
  return k->size / KP_ZSTD_MAX_RATIO > e->size ? KPACK_ERROR_INVALID_FORMAT
                                               : KPACK_SUCCESS;
}

kpack_error_t kp_check_kernel_size(kpack_archive_t a, const kp_kernel* k) {
  if (a->toc.scheme != KPACK_COMPRESSION_ZSTD_PER_KERNEL)
    return KPACK_SUCCESS; /* open matched every blob to its size */
  kpack_error_t err = kp_extents(a);
  if (err != KPACK_SUCCESS)
    return err;
  const kp_extent* e = &a->toc.extents[k->ordinal];
  if (k->size / KP_ZSTD_MAX_RATIO <= e->size)
    return KPACK_SUCCESS;
  /* The frame-size table may be stale: judge by the frame's own field. */
  return kp_map_guarded(a, check_size, (void*)k);
}

/* Compressed bytes fed to the decoder at a time by a prefix read. */
#define KP_PREFIX_CHUNK (64u * 1024u)

/* The first `want` bytes (want < kernel->size) of a kernel's frame. */
typedef struct prefix_job {
  const kp_kernel* kernel;
  kp_reader* reader;
  uint8_t* out;
  size_t want;
  bool too_large; /* the frame's window exceeds what a streaming decoder
                   * accepts (the one-shot decoder, which needs no window,
                   * still reads it) */
} prefix_job;

/* Decodes the job's prefix, feeding the decoder from the mapping or in
 * chunks read only as far as they take. */
static kpack_error_t decode_prefix(kpack_archive_t a, void* context) {
  prefix_job* j = context;
  const kp_kernel* k = j->kernel;
  kp_reader* r = j->reader;
  const kp_extent* e;
  kpack_error_t err = locate_frame(a, k, &e);
  if (err != KPACK_SUCCESS)
    return err;
  if (k->size / KP_ZSTD_MAX_RATIO > e->size)
    return KPACK_ERROR_INVALID_FORMAT;
  bool mapped = kp_map_serves(a, e->size);
  if (!mapped && r->scratch_cap < KP_PREFIX_CHUNK) {
    void* grown = realloc(r->scratch, KP_PREFIX_CHUNK);
    if (grown == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    r->scratch = grown;
    r->scratch_cap = KP_PREFIX_CHUNK;
  }
  ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
  ZSTD_outBuffer ob = {j->out, j->want, 0};
  uint64_t fed = 0;
  while (ob.pos < j->want) {
    if (fed == e->size)
      return KPACK_ERROR_DECOMPRESSION_FAILED; /* shorter than its size */
    /* From the mapping, the whole frame at once: the decoder reads only as
     * far as the prefix takes. */
    size_t n = mapped || e->size - fed < KP_PREFIX_CHUNK
                   ? (size_t)(e->size - fed)
                   : KP_PREFIX_CHUNK;
    const uint8_t* in = r->scratch;
    if (mapped)
      in = a->map + e->offset + fed;
    else if ((err = kp_pread_all(a->fd, r->scratch, n, e->offset + fed)) !=
             KPACK_SUCCESS)
      return err;
    if (fed == 0) {
      /* The same header check as a whole read. */
      unsigned long long declared = ZSTD_getFrameContentSize(in, n);
      if (declared == ZSTD_CONTENTSIZE_ERROR ||
          (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != k->size))
        return KPACK_ERROR_DECOMPRESSION_FAILED;
    }
    fed += n;
    ZSTD_inBuffer ib = {in, n, 0};
    while (ib.pos < ib.size && ob.pos < j->want) {
      size_t ret = ZSTD_decompressStream(r->dctx, &ob, &ib);
      if (ZSTD_isError(ret)) {
        j->too_large =
            ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge;
        return KPACK_ERROR_DECOMPRESSION_FAILED;
      }
      if (ret == 0 && ob.pos < j->want)
        return KPACK_ERROR_DECOMPRESSION_FAILED; /* the frame ended early */
    }
  }
  return KPACK_SUCCESS;
}

/* The first `want` bytes of a raw blob. */
static kpack_error_t copy_blob_prefix(kpack_archive_t a, void* context) {
  prefix_job* j = context;
  const kp_extent* e = &a->toc.extents[j->kernel->ordinal];
  if (!kp_map_serves(a, e->size))
    return kp_pread_all(a->fd, j->out, j->want, e->offset);
  memcpy(j->out, a->map + e->offset, j->want);
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
  prefix_job job = {.kernel = k, .out = buffer, .want = length};
  if (archive->toc.scheme == KPACK_COMPRESSION_NOOP) {
    err = kp_map_guarded(archive, copy_blob_prefix, &job);
  } else {
    if ((job.reader = reader_get()) == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    err = kp_map_guarded(archive, decode_prefix, &job);
    reader_done(job.reader, err);
    if (job.too_large) {
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
