/* SPDX-License-Identifier: MIT
 *
 * The streaming archive writer. Kernels are appended to a temporary file as
 * they arrive (compressed inline, or by a pool of threads that hand frames
 * back in ordinal order), then the TOC and header are written and the file
 * is renamed over the destination. Output depends only on the options and
 * the sequence of kernels: ordinals follow add order, the TOC lists
 * binaries and arches sorted byte-wise, and each frame is compressed alone.
 * A kernel whose stored bytes (frame or blob) equal an earlier kernel's is
 * not stored again: its entry names the earlier one's ordinal.
 */
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include "archive/archive.h"
#include "common/byteorder.h"
#include "common/grow.h"
#include "common/input.h"

#define KP_BLOB_ALIGN 64u
#define KP_DEFAULT_LEVEL 3

typedef struct wr_entry {
  char* binary;
  char* arch;
  char* type; /* NULL: "hsaco" */
  uint64_t size;
  uint32_t ordinal;  /* of its stored bytes, shared by identical kernels */
  uint8_t* metadata; /* one msgpack map, or NULL */
  size_t metadata_size;
} wr_entry;

/* Bytes stored once in the payload: a blob or a frame. */
typedef struct wr_blob {
  uint64_t size;
  uint64_t at;   /* where its bytes start in the file */
  uint64_t hash; /* bytes_hash() of them */
} wr_blob;

/* One kernel in flight to a compression thread. A ring slot keeps its
 * buffers from job to job, so steady state allocates nothing. A `stored`
 * job carries a frame copied from another archive: it holds its output
 * already and only keeps its place in ordinal order. */
typedef struct wr_job {
  kpack_writer_t* writer; /* whose next ordinal this job is */
  int level;              /* its writer's zstd level */
  void* input;
  size_t input_size, input_cap;
  void* output;
  size_t output_size, output_cap;
  bool stored;
  bool done;
  kpack_error_t err;
} wr_job;

/* Compression threads and their ring of jobs, owned by one writer or
 * shared by the writers one caller drives (kpack_writer_pool_create).
 * `lock` protects head, tail, next_job, stopping and every job's done, err
 * and output; a job's input belongs to the thread that took it. Jobs leave
 * the ring in the order they entered it, so each writer's frames are
 * written in its ordinal order. */
struct kpack_writer_pool {
  unsigned thread_count;
  pthread_t* threads;
  pthread_mutex_t lock;
  pthread_cond_t work_ready, job_done;
  wr_job* ring;
  size_t ring_cap;
  uint64_t head;     /* oldest job not yet written */
  uint64_t next_job; /* next job a thread should take */
  uint64_t tail;     /* next free slot */
  bool stopping;
};

struct kpack_writer {
  char* path; /* the file to replace: the destination, links followed */
  char* dir;  /* its directory, where the temporary file lives */
  char* tmp_path;
  int fd;
  kpack_compression_scheme_t scheme;
  int level;
  char* group_name;
  char* family;
  char** arches;
  size_t arch_count, arch_cap;
  wr_entry* entries; /* by ordinal */
  size_t entry_count, entry_cap;
  uint32_t* index; /* open-addressing set of entry indexes + 1, by name */
  size_t index_cap;
  /* The stored blobs or frames, by ordinal; `blob_index` is an
   * open-addressing set of ordinals + 1 by hash, through which a kernel
   * finds an earlier one with the same stored bytes. */
  wr_blob* blobs;
  size_t blob_count, blob_cap;
  uint32_t* blob_index;
  size_t blob_index_cap;
  uint64_t pos;       /* next payload offset */
  uint64_t writeback; /* start_writeback() has covered [0, writeback) */
  kpack_error_t err;  /* first failure that spoils the archive; sticky */
  int sys_errno;      /* the system's reason for `err`, 0 if none */
  ZSTD_CCtx* cctx;    /* inline compression, into `frame` */
  void* frame;        /* also holds frames copied from other archives */
  size_t frame_cap;
  /* What the last call that failed failed on (kpack_writer_get_failure). */
  kpack_writer_failure_t failure;

  /* Compression threads (NULL: inline), the writer's own or shared. */
  kpack_writer_pool_t* pool;
  bool own_pool;
  size_t drained; /* kernels the pool has handed back: the next entry */
};

/* ---- name index ---------------------------------------------------------- */

static uint64_t name_hash(const char* binary, const char* arch) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char* s = binary; *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull; /* separator no name byte can forge */
  for (const char* s = arch; *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* The slot holding (binary, arch), or the empty slot where it would go. */
static size_t index_find(const kpack_writer_t* w, const char* binary,
                         const char* arch, bool* found) {
  size_t mask = w->index_cap - 1;
  for (size_t i = name_hash(binary, arch) & mask;; i = (i + 1) & mask) {
    uint32_t v = w->index[i];
    *found = v != 0 && strcmp(w->entries[v - 1].binary, binary) == 0 &&
             strcmp(w->entries[v - 1].arch, arch) == 0;
    if (v == 0 || *found)
      return i;
  }
}

/* Doubles the table (kept at most half full, so probes stay short). */
static kpack_error_t index_grow(kpack_writer_t* w) {
  size_t cap = w->index_cap ? w->index_cap * 2 : 1024;
  uint32_t* old = w->index;
  size_t old_cap = w->index_cap;
  uint32_t* table = calloc(cap, sizeof(*table));
  if (table == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->index = table;
  w->index_cap = cap;
  for (size_t i = 0; i < old_cap; i++) {
    if (old[i] == 0)
      continue;
    const wr_entry* e = &w->entries[old[i] - 1];
    bool found;
    w->index[index_find(w, e->binary, e->arch, &found)] = old[i];
  }
  free(old);
  return KPACK_SUCCESS;
}

/* ---- payload ------------------------------------------------------------- */

/* Writes `head` then `data` at offset with one call where the kernel
 * takes both (a frame's size field and the frame). */
static kpack_error_t write_pair(int fd, const void* head, size_t head_size,
                                const void* data, size_t size,
                                uint64_t offset) {
  struct iovec iov[2] = {{(void*)head, head_size}, {(void*)data, size}};
  struct iovec* v = iov;
  int count = 2;
  while (count > 0) {
    ssize_t n = pwritev(fd, v, count, (off_t)offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = 0; /* no progress, no reason */
      return KPACK_ERROR_IO_ERROR;
    }
    offset += (uint64_t)n;
    size_t done = (size_t)n;
    while (count > 0 && done >= v->iov_len) {
      done -= v->iov_len;
      v++;
      count--;
    }
    if (count > 0) { /* partly written: the rest of this vector next */
      v->iov_base = (uint8_t*)v->iov_base + done;
      v->iov_len -= done;
    }
  }
  return KPACK_SUCCESS;
}

/* Starts writeback of what has been written since the last call, every
 * KP_WRITEBACK_STEP bytes, so that the disk works while kernels are still
 * being compressed and finish's fdatasync waits for the tail only. A hint:
 * failures are left for fdatasync to report. */
#define KP_WRITEBACK_STEP (8u << 20)
static void start_writeback(kpack_writer_t* w) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (w->pos - w->writeback < KP_WRITEBACK_STEP)
    return;
  sync_file_range(w->fd, (off_t)w->writeback, (off_t)(w->pos - w->writeback),
                  SYNC_FILE_RANGE_WRITE);
  w->writeback = w->pos;
#else
  (void)w;
#endif
}

/* ---- stored bytes, each kept once -------------------------------------- */

/* A hash of stored bytes, 8 at a time; equal hashes are confirmed by
 * comparing the bytes, so it needs to spread, not to resist attack. */
static uint64_t bytes_hash(const void* data, size_t size) {
  const uint8_t* p = data;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ size;
  for (; size >= 8; p += 8, size -= 8) {
    h = (h ^ kp_load_le(p, 8)) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  if (size > 0)
    h = (h ^ kp_load_le(p, size)) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

/* Where the probe for `hash` starts in blob_index. */
static size_t blob_slot(const kpack_writer_t* w, uint64_t hash) {
  return (size_t)hash & (w->blob_index_cap - 1);
}

static void blob_index_put(kpack_writer_t* w, uint32_t ordinal) {
  size_t i = blob_slot(w, w->blobs[ordinal].hash);
  while (w->blob_index[i] != 0)
    i = (i + 1) & (w->blob_index_cap - 1);
  w->blob_index[i] = ordinal + 1;
}

static kpack_error_t blob_index_grow(kpack_writer_t* w) {
  size_t cap = w->blob_index_cap ? w->blob_index_cap * 2 : 1024;
  uint32_t* table = calloc(cap, sizeof(*table));
  if (table == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  free(w->blob_index);
  w->blob_index = table;
  w->blob_index_cap = cap;
  for (size_t o = 0; o < w->blob_count; o++)
    blob_index_put(w, (uint32_t)o);
  return KPACK_SUCCESS;
}

/* Whether the `size` bytes already stored at `at` are `data`; read back
 * from the temporary file, so memory does not grow with the archive. */
static kpack_error_t stored_equal(const kpack_writer_t* w, uint64_t at,
                                  const void* data, size_t size, bool* equal) {
  uint8_t buf[16384];
  *equal = false;
  for (size_t done = 0; done < size;) {
    size_t n = size - done < sizeof(buf) ? size - done : sizeof(buf);
    kpack_error_t err = kp_pread_all(w->fd, buf, n, at + done);
    if (err != KPACK_SUCCESS)
      return err;
    if (memcmp(buf, (const uint8_t*)data + done, n) != 0)
      return KPACK_SUCCESS;
    done += n;
  }
  *equal = true;
  return KPACK_SUCCESS;
}

/* An earlier ordinal whose stored bytes are `data`, or UINT32_MAX. */
static kpack_error_t find_stored(const kpack_writer_t* w, const void* data,
                                 size_t size, uint64_t hash,
                                 uint32_t* ordinal) {
  *ordinal = UINT32_MAX;
  size_t mask = w->blob_index_cap - 1;
  for (size_t i = blob_slot(w, hash); w->blob_index[i] != 0;
       i = (i + 1) & mask) {
    uint32_t o = w->blob_index[i] - 1;
    bool equal;
    if (w->blobs[o].hash != hash || w->blobs[o].size != size)
      continue;
    kpack_error_t err = stored_equal(w, w->blobs[o].at, data, size, &equal);
    if (err != KPACK_SUCCESS)
      return err;
    if (equal) {
      *ordinal = o;
      break;
    }
  }
  return KPACK_SUCCESS;
}

/* Stores entry `entry`'s bytes: a 64-byte aligned blob, or a u32 frame
 * size and the frame, unless an earlier entry stored the same bytes, whose
 * ordinal it then shares. Called in entry order only. */
static kpack_error_t append_stored(kpack_writer_t* w, size_t entry,
                                   const void* data, size_t size) {
  kpack_error_t err;
  uint64_t hash = bytes_hash(data, size);
  uint32_t same;
  if (w->scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL && size > UINT32_MAX)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if ((w->blob_count + 1) * 2 > w->blob_index_cap &&
      (err = blob_index_grow(w)) != KPACK_SUCCESS)
    return err;
  if ((err = find_stored(w, data, size, hash, &same)) != KPACK_SUCCESS)
    goto fail;
  if (same != UINT32_MAX) {
    w->entries[entry].ordinal = same;
    return KPACK_SUCCESS;
  }
  wr_blob* grown =
      kp_grow(w->blobs, w->blob_count, &w->blob_cap, sizeof(*grown), 256);
  if (grown == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->blobs = grown;
  if (w->scheme == KPACK_COMPRESSION_NOOP) {
    /* Padding is left as a hole: it reads back as zeros. */
    w->pos = (w->pos + KP_BLOB_ALIGN - 1) & ~(uint64_t)(KP_BLOB_ALIGN - 1);
    err = kp_pwrite_all(w->fd, data, size, w->pos);
  } else {
    uint8_t word[4];
    kp_store_le(word, size, 4);
    err = write_pair(w->fd, word, sizeof(word), data, size, w->pos);
    w->pos += sizeof(word);
  }
  if (err != KPACK_SUCCESS)
    goto fail;
  uint32_t o = (uint32_t)w->blob_count++;
  w->blobs[o] = (wr_blob){size, w->pos, hash};
  blob_index_put(w, o);
  w->entries[entry].ordinal = o;
  w->pos += size;
  start_writeback(w);
  return KPACK_SUCCESS;

fail:
  /* Called only while the writer is good: this is its first failure. */
  w->sys_errno = errno;
  return err;
}

/* Every frame carries its content size (readers allocate from it) and a
 * checksum, so a flipped payload byte is an error rather than a wrong
 * kernel. */
static ZSTD_CCtx* new_cctx(int level) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (cctx != NULL &&
      (ZSTD_isError(
           ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level)) ||
       ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)) ||
       ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1)))) {
    ZSTD_freeCCtx(cctx);
    cctx = NULL;
  }
  return cctx;
}

/* Grows *buf to hold `need` bytes; keeps what it has on failure. */
static bool reserve(void** buf, size_t* cap, size_t need) {
  if (*cap >= need && *buf != NULL)
    return true;
  void* grown = realloc(*buf, need ? need : 1);
  if (grown == NULL)
    return false;
  *buf = grown;
  *cap = need;
  return true;
}

/* Compresses into *out (grown as needed and kept by the caller for reuse). */
static kpack_error_t compress_frame(ZSTD_CCtx* cctx, const void* data,
                                    size_t size, void** out, size_t* out_cap,
                                    size_t* out_size) {
  size_t bound = ZSTD_compressBound(size);
  if (!reserve(out, out_cap, bound))
    return KPACK_ERROR_OUT_OF_MEMORY;
  size_t n = ZSTD_compress2(cctx, *out, *out_cap, data, size);
  if (ZSTD_isError(n))
    return KPACK_ERROR_OUT_OF_MEMORY; /* the bound fits; only memory fails */
  *out_size = n;
  return KPACK_SUCCESS;
}

static void* compression_thread(void* arg) {
  kpack_writer_pool_t* p = arg;
  ZSTD_CCtx* cctx = NULL;
  int level = 0; /* cctx's level */
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stopping && p->next_job == p->tail)
      pthread_cond_wait(&p->work_ready, &p->lock);
    if (p->next_job == p->tail)
      break; /* stopping, nothing left */
    wr_job* job = &p->ring[p->next_job++ % p->ring_cap];
    pthread_mutex_unlock(&p->lock);
    /* This thread owns the job's buffers until it marks it done. */
    size_t out_size = job->output_size;
    kpack_error_t err = KPACK_SUCCESS;
    if (!job->stored) {
      /* Writers of one pool may differ in level; a frame depends only on
       * its level and its input, not on which context made it. */
      if (cctx == NULL || level != job->level) {
        ZSTD_freeCCtx(cctx);
        cctx = new_cctx(job->level);
        level = job->level;
      }
      err = cctx == NULL
                ? KPACK_ERROR_OUT_OF_MEMORY
                : compress_frame(cctx, job->input, job->input_size,
                                 &job->output, &job->output_cap, &out_size);
    }
    pthread_mutex_lock(&p->lock);
    job->output_size = out_size;
    job->err = err;
    job->done = true;
    pthread_cond_broadcast(&p->job_done);
  }
  pthread_mutex_unlock(&p->lock);
  ZSTD_freeCCtx(cctx);
  return NULL;
}

/* Writes finished jobs in ring order, each to its writer at that writer's
 * next ordinal. Waits until every job is written (all) or until the ring
 * has a free slot. */
static void drain_jobs(kpack_writer_pool_t* p, bool all) {
  pthread_mutex_lock(&p->lock);
  for (;;) {
    wr_job* job = &p->ring[p->head % p->ring_cap];
    if (p->head < p->tail && job->done) {
      /* The slot stays untouched until this (the only queueing) thread
       * queues into it again, so its output is written without the lock. */
      p->head++;
      job->done = false;
      pthread_mutex_unlock(&p->lock);
      kpack_writer_t* w = job->writer;
      size_t entry = w->drained++;
      if (w->err == KPACK_SUCCESS)
        w->err = job->err;
      if (w->err == KPACK_SUCCESS)
        w->err = append_stored(w, entry, job->output, job->output_size);
      pthread_mutex_lock(&p->lock);
      continue;
    }
    bool full = p->tail - p->head == p->ring_cap;
    if (p->head < p->tail && (all || full)) {
      pthread_cond_wait(&p->job_done, &p->lock);
      continue;
    }
    break;
  }
  pthread_mutex_unlock(&p->lock);
}

/* Queues a kernel to compress, or (stored) a finished frame to write in
 * its turn. */
static kpack_error_t queue_job(kpack_writer_t* w, const void* data, size_t size,
                               bool stored) {
  kpack_writer_pool_t* p = w->pool;
  drain_jobs(p, false);
  /* The slot at `tail` is free and invisible to the compression threads
   * until `tail` moves past it, which only this thread does. */
  pthread_mutex_lock(&p->lock);
  wr_job* job = &p->ring[p->tail % p->ring_cap];
  pthread_mutex_unlock(&p->lock);
  void** buf = stored ? &job->output : &job->input;
  size_t* cap = stored ? &job->output_cap : &job->input_cap;
  if (!reserve(buf, cap, size))
    return KPACK_ERROR_OUT_OF_MEMORY;
  memcpy(*buf, data, size);
  if (stored)
    job->output_size = size;
  else
    job->input_size = size;
  job->writer = w;
  job->level = w->level;
  job->stored = stored;
  job->err = KPACK_SUCCESS;
  pthread_mutex_lock(&p->lock);
  p->tail++;
  pthread_cond_signal(&p->work_ready);
  pthread_mutex_unlock(&p->lock);
  return KPACK_SUCCESS;
}

KPACK_API void kpack_writer_pool_destroy(kpack_writer_pool_t* p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  pthread_cond_broadcast(&p->work_ready);
  pthread_mutex_unlock(&p->lock);
  for (unsigned i = 0; i < p->thread_count; i++)
    pthread_join(p->threads[i], NULL);
  if (p->ring != NULL)
    for (size_t i = 0; i < p->ring_cap; i++) {
      free(p->ring[i].input);
      free(p->ring[i].output);
    }
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->work_ready);
  pthread_cond_destroy(&p->job_done);
  free(p->ring);
  free(p->threads);
  free(p);
}

KPACK_API kpack_error_t kpack_writer_pool_create(unsigned threads,
                                                 kpack_writer_pool_t** pool) {
  if (pool != NULL)
    *pool = NULL;
  if (pool == NULL || threads == 0)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_writer_pool_t* p = calloc(1, sizeof(*p));
  if (p == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work_ready, NULL);
  pthread_cond_init(&p->job_done, NULL);
  p->ring_cap = (size_t)threads * 4;
  p->ring = calloc(p->ring_cap, sizeof(*p->ring));
  p->threads = calloc(threads, sizeof(*p->threads));
  if (p->ring == NULL || p->threads == NULL) {
    kpack_writer_pool_destroy(p);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  for (; p->thread_count < threads; p->thread_count++)
    if (pthread_create(&p->threads[p->thread_count], NULL, compression_thread,
                       p) != 0)
      break;
  if (p->thread_count == 0) {
    kpack_writer_pool_destroy(p);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  *pool = p;
  return KPACK_SUCCESS;
}

/* ---- lifecycle
 * ---------------------------------------------------------------- */

static void writer_free(kpack_writer_t* w) {
  if (w->own_pool)
    kpack_writer_pool_destroy(w->pool);
  else if (w->pool != NULL)
    drain_jobs(w->pool, true); /* no job may outlive its writer */
  if (w->fd >= 0)
    close(w->fd);
  if (w->tmp_path != NULL)
    unlink(w->tmp_path);
  for (size_t i = 0; i < w->entry_count; i++) {
    free(w->entries[i].binary);
    free(w->entries[i].arch);
    free(w->entries[i].type);
    free(w->entries[i].metadata);
  }
  for (size_t i = 0; i < w->arch_count; i++)
    free(w->arches[i]);
  ZSTD_freeCCtx(w->cctx);
  free(w->frame);
  free(w->arches);
  free(w->entries);
  free(w->index);
  free(w->blobs);
  free(w->blob_index);
  free(w->group_name);
  free(w->family);
  free(w->path);
  free(w->dir);
  free(w->tmp_path);
  free(w);
}

/* The file `path` names: a symbolic link is followed (relative targets
 * against the link's directory), so that finishing replaces the file it
 * points to and keeps the link, as writing through it would. A dangling
 * link names the file to create. Malloc'ed; NULL with errno on failure
 * (ELOOP past 40 links). */
static char* final_target(const char* path) {
  char* cur = strdup(path);
  for (int links = 0; cur != NULL; links++) {
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
      return cur; /* a file, a directory (rename will say so), or nothing */
    if (links == 40) {
      errno = ELOOP;
      break;
    }
    char target[PATH_MAX];
    ssize_t n = readlink(cur, target, sizeof(target) - 1);
    if (n < 0)
      break;
    target[n] = '\0';
    char* next = NULL;
    const char* slash = strrchr(cur, '/');
    if (target[0] == '/' || slash == NULL)
      next = strdup(target);
    else if (asprintf(&next, "%.*s/%s", (int)(slash - cur), cur, target) < 0)
      next = NULL;
    free(cur);
    cur = next;
  }
  free(cur);
  return NULL;
}

/* The directory part of a path ("." if none), malloc'ed. */
static char* dir_of(const char* path) {
  const char* slash = strrchr(path, '/');
  if (slash == NULL)
    return strdup(".");
  if (slash == path)
    return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

/* Ends a call that failed with `err`, remembering on what for
 * kpack_writer_get_failure(): the archive whenever the writer is poisoned
 * (whatever failed first is what every later call returns), else `side`
 * with the system's reason `sys_errno`. */
static kpack_error_t call_failed(kpack_writer_t* w, kpack_error_t err,
                                 kpack_writer_side_t side, int sys_errno) {
  if (w->err != KPACK_SUCCESS) {
    side = KPACK_WRITER_SIDE_ARCHIVE;
    sys_errno = w->sys_errno;
  }
  w->failure = (kpack_writer_failure_t){side, sys_errno};
  return err;
}

/* Creates "<dir>/.kpack-<pid>-<n>.tmp" exclusively beside the destination
 * (rename needs the same filesystem; a short name, because the
 * destination's own may already be near NAME_MAX), with the mode a plain
 * create would give (0666 less the umask), so the renamed archive looks
 * ordinary. */
static kpack_error_t create_temp(kpack_writer_t* w) {
  static unsigned counter;
  size_t len = strlen(w->dir) + 64;
  w->tmp_path = malloc(len);
  if (w->tmp_path == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    snprintf(w->tmp_path, len, "%s/.kpack-%ld-%u.tmp", w->dir, (long)getpid(),
             n);
    w->fd = open(w->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd >= 0)
      return KPACK_SUCCESS;
    if (errno != EEXIST)
      break;
  }
  free(w->tmp_path);
  w->tmp_path = NULL;
  return KPACK_ERROR_IO_ERROR;
}

/* After the rename: sync the directory, so that a crash cannot bring the
 * old archive (or no archive) back. Filesystems that cannot sync a
 * directory (EINVAL) have nothing to make durable this way. */
static kpack_error_t sync_dir(const char* dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return KPACK_ERROR_IO_ERROR;
  kpack_error_t err = KPACK_SUCCESS;
  int reason = 0;
  if (fsync(fd) != 0 && errno != EINVAL) {
    err = KPACK_ERROR_IO_ERROR;
    reason = errno;
  }
  close(fd);
  errno = reason;
  return err;
}

static kpack_error_t add_arch(kpack_writer_t* w, const char* arch) {
  for (size_t i = 0; i < w->arch_count; i++)
    if (strcmp(w->arches[i], arch) == 0)
      return KPACK_SUCCESS;
  char** grown =
      kp_grow(w->arches, w->arch_count, &w->arch_cap, sizeof(*grown), 8);
  if (grown == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->arches = grown;
  if ((w->arches[w->arch_count] = strdup(arch)) == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->arch_count++;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_writer_create(const char* path,
                                            const kpack_writer_options_t* o,
                                            kpack_writer_t** writer) {
  kpack_error_t err = KPACK_ERROR_OUT_OF_MEMORY;
  if (writer != NULL)
    *writer = NULL;
  if (path == NULL || o == NULL || writer == NULL || *path == '\0' ||
      (o->gfx_arches == NULL && o->gfx_arch_count > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (o->scheme != KPACK_COMPRESSION_NOOP &&
      o->scheme != KPACK_COMPRESSION_ZSTD_PER_KERNEL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  int level = o->zstd_level == 0 ? KP_DEFAULT_LEVEL : o->zstd_level;
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
    return KPACK_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < o->gfx_arch_count; i++)
    if (o->gfx_arches[i] == NULL)
      return KPACK_ERROR_INVALID_ARGUMENT;

  kpack_writer_t* w = calloc(1, sizeof(*w));
  if (w == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->fd = -1;
  w->scheme = o->scheme;
  w->level = level;
  w->pos = KP_PAYLOAD_START;
  w->path = final_target(path);
  if (w->path == NULL) {
    err = errno == ENOMEM ? KPACK_ERROR_OUT_OF_MEMORY : KPACK_ERROR_IO_ERROR;
    goto fail;
  }
  w->dir = dir_of(w->path);
  w->group_name = strdup(o->group_name ? o->group_name : "");
  w->family = strdup(o->gfx_arch_family ? o->gfx_arch_family : "");
  if (w->dir == NULL || w->group_name == NULL || w->family == NULL)
    goto fail;
  for (size_t i = 0; i < o->gfx_arch_count; i++)
    if ((err = add_arch(w, o->gfx_arches[i])))
      goto fail;
  if ((err = index_grow(w)))
    goto fail;
  if (w->scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL) {
    /* The frame count precedes the frames; it is filled in at finish. */
    w->pos += 4;
    if (o->pool != NULL) {
      w->pool = o->pool;
    } else if (o->threads > 1) {
      err = kpack_writer_pool_create(o->threads, &w->pool);
      w->own_pool = w->pool != NULL;
    } else if ((w->cctx = new_cctx(level)) == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
    }
    if (err != KPACK_SUCCESS)
      goto fail;
  }
  if ((err = create_temp(w)))
    goto fail;
  *writer = w;
  return KPACK_SUCCESS;

fail:;
  int reason = err == KPACK_ERROR_IO_ERROR ? errno : 0;
  writer_free(w);
  errno = reason; /* the header promises it; cleanup must not change it */
  return err;
}

/* What a kernel's TOC entry says besides its name. */
typedef struct wr_entry_info {
  uint64_t size;
  const char* type; /* NULL: "hsaco" */
  const void* metadata;
  size_t metadata_size;
} wr_entry_info;

static void free_entry(wr_entry* e) {
  free(e->binary);
  free(e->arch);
  free(e->type);
  free(e->metadata);
}

static kpack_error_t record_entry(kpack_writer_t* w, const char* binary,
                                  const char* arch, const wr_entry_info* info) {
  bool found;
  size_t slot = index_find(w, binary, arch, &found);
  if (found)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (w->entry_count == UINT32_MAX)
    return KPACK_ERROR_INVALID_ARGUMENT;
  wr_entry* entries =
      kp_grow(w->entries, w->entry_count, &w->entry_cap, sizeof(*entries), 256);
  if (entries == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->entries = entries;
  wr_entry* e = &w->entries[w->entry_count];
  memset(e, 0, sizeof(*e));
  e->binary = strdup(binary);
  e->arch = strdup(arch);
  e->size = info->size;
  bool ok = e->binary != NULL && e->arch != NULL;
  if (ok && info->type != NULL && strcmp(info->type, "hsaco") != 0)
    ok = (e->type = strdup(info->type)) != NULL;
  if (ok && info->metadata != NULL) {
    e->metadata = malloc(info->metadata_size);
    if ((ok = e->metadata != NULL)) {
      memcpy(e->metadata, info->metadata, info->metadata_size);
      e->metadata_size = info->metadata_size;
    }
  }
  kpack_error_t err = ok ? add_arch(w, arch) : KPACK_ERROR_OUT_OF_MEMORY;
  if (err != KPACK_SUCCESS) {
    free_entry(e);
    return err;
  }
  w->index[slot] = (uint32_t)++w->entry_count;
  if (w->entry_count * 2 > w->index_cap && (err = index_grow(w)) != 0) {
    /* The entry is recorded but its payload will not follow: every later
     * frame would land against the wrong ordinal, so the writer is done. */
    w->err = err;
    return err;
  }
  return KPACK_SUCCESS;
}

static bool valid_names(const char* binary_name, const char* arch) {
  return binary_name != NULL && arch != NULL && *binary_name != '\0' &&
         *arch != '\0';
}

static kpack_error_t add_entry(kpack_writer_t* w, const char* binary_name,
                               const char* arch, const void* data,
                               const wr_entry_info* info) {
  static const uint8_t nothing = 0;
  if (data == NULL)
    data = &nothing;
  size_t size = (size_t)info->size;
  size_t entry = w->entry_count;
  kpack_error_t err = record_entry(w, binary_name, arch, info);
  if (err != KPACK_SUCCESS)
    return err;
  if (w->scheme == KPACK_COMPRESSION_NOOP) {
    err = append_stored(w, entry, data, size);
  } else if (w->pool != NULL) {
    err = queue_job(w, data, size, false);
  } else {
    size_t frame_size;
    err = compress_frame(w->cctx, data, size, &w->frame, &w->frame_cap,
                         &frame_size);
    if (err == KPACK_SUCCESS)
      err = append_stored(w, entry, w->frame, frame_size);
  }
  /* The entry is recorded, so a failure here poisons the whole archive. */
  if (err != KPACK_SUCCESS)
    w->err = err;
  return err;
}

KPACK_API kpack_error_t kpack_writer_add_kernel(kpack_writer_t* w,
                                                const char* binary_name,
                                                const char* arch,
                                                const void* data, size_t size) {
  return kpack_writer_add_kernel_with_metadata(w, binary_name, arch, data, size,
                                               NULL, 0);
}

KPACK_API kpack_error_t kpack_writer_add_kernel_with_metadata(
    kpack_writer_t* w, const char* binary_name, const char* arch,
    const void* data, size_t size, const void* metadata, size_t metadata_size) {
  if (w == NULL || !valid_names(binary_name, arch) ||
      (data == NULL && size > 0) || (metadata == NULL && metadata_size > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (w->err != KPACK_SUCCESS)
    return call_failed(w, w->err, KPACK_WRITER_SIDE_ARCHIVE, 0);
  kpack_error_t err = KPACK_SUCCESS;
  if (metadata != NULL) {
    err = kp_metadata_check(metadata, metadata_size);
    if (err != KPACK_SUCCESS)
      return call_failed(w, err, KPACK_WRITER_SIDE_NONE, 0);
  }
  wr_entry_info info = {size, NULL, metadata, metadata_size};
  err = add_entry(w, binary_name, arch, data, &info);
  if (err != KPACK_SUCCESS)
    return call_failed(w, err, KPACK_WRITER_SIDE_NONE, 0);
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_writer_copy_kernel(kpack_writer_t* w,
                                                 kpack_archive_t archive,
                                                 const char* binary_name,
                                                 const char* arch,
                                                 unsigned flags) {
  if (w == NULL || archive == NULL || !valid_names(binary_name, arch) ||
      (flags & ~KPACK_WRITER_RECOMPRESS) != 0)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (w->err != KPACK_SUCCESS)
    return call_failed(w, w->err, KPACK_WRITER_SIDE_ARCHIVE, 0);
  const kp_kernel* k = kp_toc_find_kernel(&archive->toc, binary_name, arch);
  if (k == NULL)
    return call_failed(w, KPACK_ERROR_KERNEL_NOT_FOUND,
                       KPACK_WRITER_SIDE_SOURCE, 0);
  if (k->size > SIZE_MAX)
    return call_failed(w, KPACK_ERROR_OUT_OF_MEMORY, KPACK_WRITER_SIDE_NONE, 0);
  /* A map written by another tool is passed on only if it is one this
   * writer would accept itself. */
  const uint8_t* map;
  size_t map_size;
  kp_toc_metadata(&archive->toc, k, &map, &map_size);
  if (map != NULL && kp_metadata_check(map, map_size) != KPACK_SUCCESS)
    return call_failed(w, KPACK_ERROR_INVALID_METADATA,
                       KPACK_WRITER_SIDE_SOURCE, 0);
  wr_entry_info info = {k->size, kp_toc_str(&archive->toc, k->type), map,
                        map_size};
  kpack_error_t err;

  if (w->scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL &&
      archive->toc.scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL &&
      !(flags & KPACK_WRITER_RECOMPRESS)) {
    /* The frame goes over byte for byte, once it has read back as the
     * kernel: merging never decompresses into a different archive. */
    size_t frame_size;
    err = kp_copy_frame(archive, k, &w->frame, &w->frame_cap, &frame_size);
    if (err != KPACK_SUCCESS) /* nothing recorded yet: the archive is good */
      return call_failed(w, err, KPACK_WRITER_SIDE_SOURCE,
                         err == KPACK_ERROR_IO_ERROR ? errno : 0);
    size_t entry = w->entry_count;
    if ((err = record_entry(w, binary_name, arch, &info)) != KPACK_SUCCESS)
      return call_failed(w, err, KPACK_WRITER_SIDE_NONE, 0);
    if (w->pool != NULL)
      err = queue_job(w, w->frame, frame_size, true);
    else
      err = append_stored(w, entry, w->frame, frame_size);
    if (err != KPACK_SUCCESS) {
      w->err = err;
      return call_failed(w, err, KPACK_WRITER_SIDE_ARCHIVE, 0);
    }
    return KPACK_SUCCESS;
  }
  void* data = NULL;
  if ((err = kp_read_kernel(archive, k, &data)) != KPACK_SUCCESS)
    return call_failed(w, err, KPACK_WRITER_SIDE_SOURCE,
                       err == KPACK_ERROR_IO_ERROR ? errno : 0);
  err = add_entry(w, binary_name, arch, data, &info);
  free(data);
  if (err != KPACK_SUCCESS)
    return call_failed(w, err, KPACK_WRITER_SIDE_NONE, 0);
  return KPACK_SUCCESS;
}

KPACK_API void kpack_writer_get_failure(const kpack_writer_t* w,
                                        kpack_writer_failure_t* failure) {
  if (failure != NULL)
    *failure = w != NULL ? w->failure
                         : (kpack_writer_failure_t){KPACK_WRITER_SIDE_NONE, 0};
}

/* ---- TOC
 * ----------------------------------------------------------------------- */

static int compare_entry_names(const void* a, const void* b) {
  const wr_entry* x = *(const wr_entry* const*)a;
  const wr_entry* y = *(const wr_entry* const*)b;
  int cmp = strcmp(x->binary, y->binary);
  return cmp != 0 ? cmp : strcmp(x->arch, y->arch);
}

static int pack_cstr(msgpack_packer* pk, const char* s) {
  size_t n = strlen(s);
  return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

/* zstd_frame_sizes (docs/format.md): every frame's size, u32 LE by ordinal, the
 * same values as the size fields in the region, so that a reader can place
 * every frame without reading the region. Omitted if it could not be one
 * msgpack bin. */
static int pack_frame_sizes(kpack_writer_t* w, msgpack_packer* pk) {
  size_t len = w->blob_count * 4;
  uint8_t* sizes = malloc(len ? len : 1);
  if (sizes == NULL)
    return -1;
  for (size_t i = 0; i < w->blob_count; i++)
    kp_store_le(sizes + 4 * i, w->blobs[i].size, 4);
  int rc = pack_cstr(pk, "zstd_frame_sizes");
  rc |= msgpack_pack_bin(pk, len);
  rc |= msgpack_pack_bin_body(pk, sizes, len);
  free(sizes);
  return rc;
}

/* The TOC map. Key order follows ROCm's writer: header fields, "toc", then
 * the scheme and its payload index; the frame-size table comes last. */
static int pack_toc(kpack_writer_t* w, msgpack_packer* pk, wr_entry** sorted) {
  int rc = 0;
  bool frame_sizes = w->scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL &&
                     w->blob_count <= UINT32_MAX / 4;
  rc |= msgpack_pack_map(pk, w->scheme == KPACK_COMPRESSION_NOOP ? 7
                             : frame_sizes                       ? 9
                                                                 : 8);
  rc |= pack_cstr(pk, "format_version");
  rc |= msgpack_pack_uint32(pk, KPACK_CURRENT_VERSION);
  rc |= pack_cstr(pk, "group_name") || pack_cstr(pk, w->group_name);
  rc |= pack_cstr(pk, "gfx_arch_family") || pack_cstr(pk, w->family);
  rc |= pack_cstr(pk, "gfx_arches");
  rc |= msgpack_pack_array(pk, w->arch_count);
  for (size_t i = 0; i < w->arch_count; i++)
    rc |= pack_cstr(pk, w->arches[i]);

  size_t binaries = 0;
  for (size_t i = 0; i < w->entry_count; i++)
    binaries += i == 0 || strcmp(sorted[i - 1]->binary, sorted[i]->binary);
  rc |= pack_cstr(pk, "toc");
  rc |= msgpack_pack_map(pk, binaries);
  for (size_t i = 0; i < w->entry_count;) {
    size_t j = i;
    while (j < w->entry_count &&
           strcmp(sorted[j]->binary, sorted[i]->binary) == 0)
      j++;
    rc |= pack_cstr(pk, sorted[i]->binary);
    rc |= msgpack_pack_map(pk, j - i);
    for (; i < j; i++) {
      const wr_entry* e = sorted[i];
      rc |= pack_cstr(pk, e->arch);
      /* ROCm's entry order; "metadata" only when there is one. */
      rc |= msgpack_pack_map(pk, e->metadata != NULL ? 4 : 3);
      rc |= pack_cstr(pk, "type") || pack_cstr(pk, e->type ? e->type : "hsaco");
      rc |= pack_cstr(pk, "ordinal");
      rc |= msgpack_pack_uint32(pk, e->ordinal);
      rc |= pack_cstr(pk, "original_size");
      rc |= msgpack_pack_uint64(pk, e->size);
      if (e->metadata != NULL) {
        /* Checked to be one map when added: copied as it came. */
        rc |= pack_cstr(pk, "metadata");
        rc |=
            pk->callback(pk->data, (const char*)e->metadata, e->metadata_size);
      }
    }
  }

  rc |= pack_cstr(pk, "compression_scheme");
  rc |= pack_cstr(pk, kpack_compression_scheme_name(w->scheme));
  if (w->scheme == KPACK_COMPRESSION_NOOP) {
    rc |= pack_cstr(pk, "blobs");
    rc |= msgpack_pack_array(pk, w->blob_count);
    for (size_t i = 0; i < w->blob_count; i++) {
      rc |= msgpack_pack_map(pk, 2);
      rc |= pack_cstr(pk, "offset") || msgpack_pack_uint64(pk, w->blobs[i].at);
      rc |= pack_cstr(pk, "size") || msgpack_pack_uint64(pk, w->blobs[i].size);
    }
  } else {
    rc |= pack_cstr(pk, "zstd_offset");
    rc |= msgpack_pack_uint64(pk, KP_PAYLOAD_START);
    rc |= pack_cstr(pk, "zstd_size");
    rc |= msgpack_pack_uint64(pk, w->pos - KP_PAYLOAD_START);
    if (frame_sizes)
      rc |= pack_frame_sizes(w, pk);
  }
  return rc;
}

static kpack_error_t write_toc_and_header(kpack_writer_t* w) {
  kpack_error_t err = KPACK_ERROR_OUT_OF_MEMORY;
  msgpack_sbuffer buf;
  msgpack_packer pk;
  wr_entry** sorted =
      malloc((w->entry_count ? w->entry_count : 1) * sizeof(*sorted));
  msgpack_sbuffer_init(&buf);
  if (sorted == NULL)
    goto done;
  for (size_t i = 0; i < w->entry_count; i++)
    sorted[i] = &w->entries[i];
  qsort(sorted, w->entry_count, sizeof(*sorted), compare_entry_names);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  if (pack_toc(w, &pk, sorted) != 0)
    goto done;

  uint8_t header[KP_PAYLOAD_START] = {0};
  uint64_t toc_offset = w->pos;
  memcpy(header, KPACK_MAGIC, KPACK_MAGIC_SIZE);
  kp_store_le(header + 4, KPACK_CURRENT_VERSION, 4);
  kp_store_le(header + 8, toc_offset, 8);
  if ((err = kp_pwrite_all(w->fd, buf.data, buf.size, toc_offset)))
    goto done;
  if ((err = kp_pwrite_all(w->fd, header, sizeof(header), 0)))
    goto done;
  if (w->scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL) {
    uint8_t count[4];
    kp_store_le(count, w->blob_count, 4);
    err = kp_pwrite_all(w->fd, count, sizeof(count), KP_PAYLOAD_START);
  }
done:;
  int reason = errno; /* of a failed write, for the caller */
  msgpack_sbuffer_destroy(&buf);
  free(sorted);
  errno = reason;
  return err;
}

KPACK_API kpack_error_t kpack_writer_finish(kpack_writer_t* w) {
  if (w == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (w->pool != NULL)
    drain_jobs(w->pool, true);
  if (w->own_pool) { /* its threads have nothing left to do */
    kpack_writer_pool_destroy(w->pool);
    w->pool = NULL;
    w->own_pool = false;
  }
  kpack_error_t err = w->err;
  int reason = w->sys_errno; /* of each step that fails, for errno */
  if (err == KPACK_SUCCESS && (err = write_toc_and_header(w)) != KPACK_SUCCESS)
    reason = err == KPACK_ERROR_IO_ERROR ? errno : 0;
  /* Durable before visible: a crash leaves the old archive or the new one. */
  if (err == KPACK_SUCCESS && fdatasync(w->fd) != 0) {
    err = KPACK_ERROR_IO_ERROR;
    reason = errno;
  }
  if (close(w->fd) != 0 && err == KPACK_SUCCESS) {
    err = KPACK_ERROR_IO_ERROR;
    reason = errno;
  }
  w->fd = -1;
  if (err == KPACK_SUCCESS && rename(w->tmp_path, w->path) != 0) {
    err = KPACK_ERROR_IO_ERROR;
    reason = errno;
  }
  if (err == KPACK_SUCCESS) {
    free(w->tmp_path);
    w->tmp_path = NULL; /* nothing left to unlink */
    if ((err = sync_dir(w->dir)) != KPACK_SUCCESS)
      reason = errno;
  }
  writer_free(w);
  errno = err == KPACK_SUCCESS ? 0 : reason;
  return err;
}

KPACK_API void kpack_writer_abort(kpack_writer_t* w) {
  if (w != NULL)
    writer_free(w);
}
