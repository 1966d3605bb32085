/* SPDX-License-Identifier: MIT
 *
 * The FUSE low-level request handlers. Metadata comes from the tree
 * (tree.h), read without a lock; kernel bytes come from the shared kernel
 * cache, pinned from open to release. kpack_error_t becomes an errno here and
 * nowhere else.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "ops.h"

/* Nothing under the mount ever changes, so the kernel may cache names,
 * attributes and negative lookups for as long as it likes. */
#define KFS_TIMEOUT 86400.0

/* A read of a file whose first pin is under way on the pool. */
typedef struct kfs_waiting {
  struct kfs_waiting* next;
  fuse_req_t req;
  size_t size;
  off_t off;
} kfs_waiting;

/* An open file: a kernel, one of its text files, the archives list, or a
 * stats snapshot.
 * The open holds one reference and each read in progress another. The
 * kernel can deliver RELEASE while a read's writev() is still returning
 * (it completes the request, and so may let the file close, before the
 * syscall returns), so whoever drops the last reference frees.
 *
 * A kernel is taken from the cache (and pinned until release) by the first
 * READ, not by open: when the page cache already holds the file, no READ
 * comes and re-reading costs no decompression at all. */
typedef struct kfs_handle {
  struct kfs_handle* prev; /* the open-files list of kfs_fs */
  struct kfs_handle* next;
  atomic_uint refs;
  const kfs_node* node; /* kernels and text files: &view */
  kfs_node view;
  pthread_mutex_t pin_lock; /* serialises the first pin of `entry` */
  /* The first pin is done (or failed): reads need not wait. Read without
   * pin_lock by the request thread. */
  atomic_bool pinned;
  /* Under pin_lock: a pool job is pinning, and the reads that came in
   * meanwhile, which that job answers once it has (see kfs_read). */
  bool pinning;
  struct kfs_waiting* waiting;
  kpack_kcache_entry_t* entry; /* set once pinned; then `data` is valid */
  kfs_render* render;          /* text files: the pinned render, likewise */
  int pin_error;               /* a failed pin is not retried per READ */
  const char* data;
  size_t size;
  char* owned;   /* stats snapshot, freed at release */
  bool attached; /* found by inode (no OPEN): let go at end of file */
} kfs_handle;

static kfs_fs* fs_of(fuse_req_t req) {
  return fuse_req_userdata(req);
}

/* The one place a kpack status becomes an errno. */
static int kfs_errno(kpack_error_t err) {
  switch (err) {
    case KPACK_SUCCESS:
      return 0;
    case KPACK_ERROR_OUT_OF_MEMORY:
      return ENOMEM;
    case KPACK_ERROR_KERNEL_NOT_FOUND:
    case KPACK_ERROR_FILE_NOT_FOUND:
      return ENOENT;
    default: /* corrupt frame, short read, truncated or replaced archive */
      return EIO;
  }
}

static char* render_stats(kfs_fs* fs, size_t* size) {
  kpack_kcache_stats_t c;
  char* text = NULL;
  kpack_kcache_get_stats(fs->cache, &c);
  const kfs_tree* t = &fs->tree;
  int n = asprintf(
      &text,
      "archives=%zu\nbinaries=%zu\nkernels=%zu\nskipped=%zu\nshadowed=%zu\n"
      "cache_capacity=%" PRIu64 "\ncache_bytes=%" PRIu64
      "\ncache_entries=%" PRIu64 "\ncache_pinned=%" PRIu64 "\nhits=%" PRIu64
      "\nmisses=%" PRIu64 "\nwaits=%" PRIu64 "\nevictions=%" PRIu64
      "\ndecompressions=%" PRIu64 "\nbytes_decompressed=%" PRIu64
      "\nfailures=%" PRIu64 "\nrecycled=%" PRIu64 "\nopens=%" PRIu64
      "\nread_errors=%" PRIu64 "\nread_requests=%" PRIu64
      "\nreads_pooled=%" PRIu64 "\nzero_message_opens=%d\nstarted_ns=%" PRIu64
      "\nsources_opened_ns=%" PRIu64 "\ntree_built_ns=%" PRIu64
      "\nmounted_ns=%" PRIu64 "\ninit_ns=%" PRIu64 "\n",
      t->source_count, t->binaries, t->kernels, t->skipped, t->shadowed,
      c.capacity, c.bytes, c.entries, c.pinned, c.hits, c.misses, c.waits,
      c.evictions, c.decompressions, c.bytes_decompressed, c.failures,
      c.recycled, (uint64_t)atomic_load(&fs->opens),
      (uint64_t)atomic_load(&fs->read_errors),
      (uint64_t)atomic_load(&fs->read_requests),
      (uint64_t)atomic_load(&fs->reads_pooled), fs->no_open ? 1 : 0,
      fs->started_ns, t->opened_ns, t->built_ns, fs->mounted_ns,
      (uint64_t)atomic_load(&fs->init_ns));
  if (n < 0)
    return NULL;
  /* The renders' counters follow (render.c). */
  char* renders = NULL;
  char* all = NULL;
  if (kfs_render_stats(&fs->renders, &renders) >= 0) {
    if (asprintf(&all, "%s%s", text, renders) < 0)
      all = NULL;
    free(renders);
  }
  free(text);
  if (all != NULL)
    *size = strlen(all);
  return all;
}

/* Fills *st; false when it holds a text file's size that is not known yet
 * (0: its kernel was never rendered). */
static bool fill_stat(kfs_fs* fs, fuse_ino_t ino, const kfs_node* n,
                      struct stat* st) {
  bool exact = true;
  const kfs_tree* t = &fs->tree;
  memset(st, 0, sizeof(*st));
  st->st_ino = ino;
  st->st_nlink = n->kind == KFS_DIR ? n->nlink : 1;
  st->st_uid = fs->uid;
  st->st_gid = fs->gid;
  st->st_blksize = 4096;
  /* A directory or kernel carries the time of the archive that made it;
   * the synthetic entries that of the newest archive. */
  struct timespec time = t->newest_mtime;
  if ((n->kind == KFS_DIR && ino > KFS_INO_META) || n->kind == KFS_KERNEL ||
      n->kind == KFS_KERNELS || n->kind == KFS_METADATA ||
      n->kind == KFS_TOC_METADATA)
    time = t->sources[n->source].mtime;
  st->st_atim = st->st_mtim = st->st_ctim = time;
  switch (n->kind) {
    case KFS_DIR:
      st->st_mode = S_IFDIR | 0555;
      st->st_size = 4096;
      break;
    case KFS_KERNEL:
    case KFS_TOC_METADATA:
      st->st_mode = S_IFREG | 0444;
      st->st_size = (off_t)n->size;
      break;
    case KFS_ARCHIVES:
      st->st_mode = S_IFREG | 0444;
      st->st_size = (off_t)t->archives_size;
      break;
    case KFS_KERNELS:
    case KFS_METADATA: {
      /* Exact once the kernel was rendered (text_size() sees to it before
       * a lookup or getattr replies); a listing renders nothing. */
      uint64_t size = 0;
      exact = kfs_render_size(&fs->renders, n, &size);
      st->st_mode = S_IFREG | 0444;
      st->st_size = (off_t)size;
      break;
    }
    case KFS_STATS: {
      size_t size = 0;
      char* text = render_stats(fs, &size);
      if (fs->no_open && text != NULL) {
        /* The snapshot its reads serve: the size just given out is its
         * own, and its new time makes the kernel drop the pages it holds
         * of the one before (FUSE_CAP_AUTO_INVAL_DATA). */
        pthread_mutex_lock(&fs->attach_lock);
        char* old = fs->stats_text;
        fs->stats_text = text;
        fs->stats_size = size;
        pthread_mutex_unlock(&fs->attach_lock);
        text = old;
        clock_gettime(CLOCK_REALTIME, &st->st_mtim);
        st->st_ctim = st->st_mtim;
      }
      free(text);
      st->st_mode = S_IFREG | 0444;
      st->st_size = (off_t)size;
      break;
    }
  }
  st->st_blocks = (st->st_size + 511) / 512;
  return exact;
}

/* Stats change under the reader: their attributes must not be cached. */
static double attr_timeout(const kfs_node* n) {
  return n->kind == KFS_STATS ? 0.0 : KFS_TIMEOUT;
}

/* Makes a text file's size known before its attributes are given out:
 * copying tools (tar, rsync, cp -a, du -b) read st_size first and copy
 * that many bytes. The render decodes only a prefix of the kernel and
 * keeps the sizes for good. 0 or an errno (the kernel cannot be read). */
static int text_size(kfs_fs* fs, const kfs_node* n) {
  uint64_t size;
  kfs_render* r;
  if ((n->kind != KFS_KERNELS && n->kind != KFS_METADATA) ||
      kfs_render_size(&fs->renders, n, &size))
    return 0;
  /* A stat walk: the kernels after this one come next. */
  kfs_render_ahead(&fs->renders, &fs->tree, n->render);
  kpack_error_t err = kfs_render_acquire(&fs->renders, &fs->tree, n, &r);
  if (err != KPACK_SUCCESS)
    return kfs_errno(err);
  kfs_render_release(&fs->renders, r);
  return 0;
}

/* Listing a tree costs round trips per directory, so init trims them:
 * every READDIR carries attributes (no LOOKUP per entry afterwards), and
 * directories need no OPENDIR/RELEASEDIR at all: the kernel then caches
 * their entries for good (FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE is its
 * default without opendir), so a second `find` costs none. */
static void* sweep_idle(void* arg);

static void kfs_init(void* userdata, struct fuse_conn_info* conn) {
  kfs_fs* fs = userdata;
  atomic_store(&fs->init_ns, kfs_clock_ns());
  /* Zero-message opens (see "Files read without OPEN"), with the one
   * file whose bytes change, .kpackfs/stats, kept fresh by its time.
   * Otherwise contents never change: no need to re-validate cached pages
   * when attributes are refreshed. */
  if (fs->want_no_open && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) &&
      (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) &&
      kfs_start_worker(&fs->sweeper, sweep_idle, fs) == 0) {
    conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    fs->sweeper_started = true;
    fs->no_open = true;
  } else {
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  }
  if (conn->capable & FUSE_CAP_READDIRPLUS) {
    conn->want |= FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  }
  /* With ACL support the kernel caches "no ACL" per inode instead of
   * asking for system.posix_acl_* on every `ls -l`; there are none. */
  if (conn->capable & FUSE_CAP_POSIX_ACL)
    conn->want |= FUSE_CAP_POSIX_ACL;
  if (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) {
    conn->want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
    fs->no_opendir = true;
  }
}

/* The inode `ino` into *view: view, or NULL if there is none. */
static const kfs_node* node_of(kfs_fs* fs, fuse_ino_t ino, kfs_node* view) {
  return kfs_tree_node(&fs->tree, ino, view) ? view : NULL;
}

/* ---- requests that wait -------------------------------------------------- */

/* One thread reads the requests and answers every one it can from memory
 * (libfuse's own worker threads, handed each request in turn, made a
 * cached re-read of many small files a third slower than one thread
 * does). A request that must wait for the archive (a kernel's first read
 * past KFS_INLINE_BYTES but not read alone, see KFS_ALONE_BYTES, a text
 * file's render for its size or bytes, a code object attribute) is handed
 * to the pool with what it needs, and its handler runs again there, where
 * it may wait. */

/* Kernels up to this size are decompressed where their first read comes
 * in: less time than handing the request over. */
#define KFS_INLINE_BYTES (64u << 10)

/* So are kernels up to this size (milliseconds of zstd) while no other
 * kernel is pinned, that is, while one file is read at a time. A kernel
 * decompressed by a worker on one CPU and copied into the page cache by
 * this thread's replies on another makes both slow: the replies read
 * lines the other core wrote, and the next decompression into that
 * recycled buffer writes lines the other core now holds. On two vCPUs a
 * 1.5 MiB zstd decode took 0.9-1.3 ms into a buffer of its own core and
 * 1.7-2.9 ms into one the other core had just read; every kernel of a
 * 1.2 GB archive read in turn came at 490-650 MB/s through the pool and
 * 860-990 MB/s here. Reads that overlap still decompress in parallel on
 * the pool. */
#define KFS_ALONE_BYTES (16u << 20)

enum { DEFER_LOOKUP, DEFER_GETATTR, DEFER_READ, DEFER_GETXATTR };

typedef struct kfs_deferred {
  kfs_job job;
  int op;
  fuse_req_t req;
  fuse_ino_t ino;          /* lookup: the parent */
  struct kfs_handle* open; /* read: the handle, one reference held */
  size_t size;
  off_t off;
  char name[]; /* lookup, getxattr */
} kfs_deferred;

static void run_deferred(kfs_job* job);

/* Hands the request to the pool, when there is one: true when it did (the
 * pool replies). A request that cannot be queued is answered here. */
static bool defer(kfs_fs* fs, fuse_req_t req, int op, fuse_ino_t ino,
                  struct kfs_handle* open, const char* name, size_t size,
                  off_t off) {
  if (fs->pool == NULL)
    return false;
  size_t len = name != NULL ? strlen(name) + 1 : 0;
  kfs_deferred* d = malloc(sizeof(*d) + len);
  if (d == NULL)
    return false;
  *d = (kfs_deferred){.job = {.run = run_deferred},
                      .op = op,
                      .req = req,
                      .ino = ino,
                      .open = open,
                      .size = size,
                      .off = off};
  if (len > 0)
    memcpy(d->name, name, len);
  kfs_pool_submit(fs->pool, &d->job);
  return true;
}

/* A text file whose size is not known yet: its lookup or stat renders. */
static bool size_waits(kfs_fs* fs, const kfs_node* n) {
  uint64_t size;
  return (n->kind == KFS_KERNELS || n->kind == KFS_METADATA) &&
         !kfs_render_size(&fs->renders, n, &size);
}

static void lookup(fuse_req_t req, fuse_ino_t parent, const char* name,
                   bool may_defer);
static void getattr(fuse_req_t req, fuse_ino_t ino, bool may_defer);
static void read_reply(kfs_fs* fs, fuse_req_t req, struct kfs_handle* h,
                       size_t size, off_t off);
static void answer_waiting(kfs_fs* fs, struct kfs_handle* h);
static void release_handle(kfs_fs* fs, struct kfs_handle* h);
static void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                     size_t size, bool may_defer);

static void run_deferred(kfs_job* job) {
  kfs_deferred* d = (kfs_deferred*)job;
  kfs_fs* fs = fs_of(d->req); /* the request is gone once replied to */
  switch (d->op) {
    case DEFER_LOOKUP:
      lookup(d->req, d->ino, d->name, false);
      break;
    case DEFER_GETATTR:
      getattr(d->req, d->ino, false);
      break;
    case DEFER_READ:
      read_reply(fs, d->req, d->open, d->size, d->off);
      answer_waiting(fs, d->open);
      release_handle(fs, d->open);
      break;
    case DEFER_GETXATTR:
      getxattr(d->req, d->ino, d->name, d->size, false);
      break;
  }
  free(d);
}

static void lookup(fuse_req_t req, fuse_ino_t parent, const char* name,
                   bool may_defer) {
  kfs_fs* fs = fs_of(req);
  struct fuse_entry_param e;
  kfs_node view;
  const kfs_node* p = node_of(fs, parent, &view);
  if (p == NULL || p->kind != KFS_DIR) {
    fuse_reply_err(req, p == NULL ? ENOENT : ENOTDIR);
    return;
  }
  memset(&e, 0, sizeof(e));
  e.entry_timeout = KFS_TIMEOUT;
  int rc = kfs_tree_lookup(&fs->tree, parent, name, &e.ino);
  if (rc < 0) {
    fuse_reply_err(req, -rc);
    return;
  }
  const kfs_node* n = e.ino != 0 ? node_of(fs, e.ino, &view) : NULL;
  if (n != NULL && may_defer && size_waits(fs, n) &&
      defer(fs, req, DEFER_LOOKUP, parent, NULL, name, 0, 0))
    return;
  if (n == NULL) {
    e.ino = 0;
  } else {
    int err = text_size(fs, n);
    if (err != 0) {
      fuse_reply_err(req, err);
      return;
    }
    e.generation = 1;
    e.attr_timeout = attr_timeout(n);
    fill_stat(fs, e.ino, n, &e.attr);
  }
  /* ino 0 is a negative entry the kernel caches for entry_timeout. */
  fuse_reply_entry(req, &e);
}

static void detach_inode(kfs_fs* fs, fuse_ino_t ino);

/* Inodes live as long as the mount; a file the kernel forgets has no more
 * reads to come (its pages went with it). */
static void kfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  (void)nlookup;
  detach_inode(fs_of(req), ino);
  fuse_reply_none(req);
}

static void kfs_forget_multi(fuse_req_t req, size_t count,
                             struct fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; i++)
    detach_inode(fs_of(req), forgets[i].ino);
  fuse_reply_none(req);
}

static void kfs_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  lookup(req, parent, name, true);
}

static void getattr(fuse_req_t req, fuse_ino_t ino, bool may_defer) {
  kfs_fs* fs = fs_of(req);
  struct stat st;
  kfs_node view;
  const kfs_node* n = node_of(fs, ino, &view);
  if (n == NULL) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if (may_defer && size_waits(fs, n) &&
      defer(fs, req, DEFER_GETATTR, ino, NULL, NULL, 0, 0))
    return;
  int err = text_size(fs, n);
  if (err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  fill_stat(fs, ino, n, &st);
  fuse_reply_attr(req, &st, attr_timeout(n));
}

static void kfs_getattr(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info* fi) {
  (void)fi;
  getattr(req, ino, true);
}

static void kfs_opendir(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info* fi) {
  kfs_fs* fs = fs_of(req);
  kfs_node view;
  const kfs_node* n = node_of(fs, ino, &view);
  if (n == NULL || n->kind != KFS_DIR) {
    fuse_reply_err(req, n == NULL ? ENOENT : ENOTDIR);
    return;
  }
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  /* ENOSYS tells a kernel that can do without OPENDIR to stop sending it
   * (see kfs_init); older kernels get a cached directory handle. */
  if (fs->no_opendir) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

/* Entries at offset 0 and 1 are "." and ".."; child i is at offset i + 2. */
static void reply_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      bool plus) {
  kfs_fs* fs = fs_of(req);
  kfs_node dir_view, view;
  const kfs_node* dir = node_of(fs, ino, &dir_view);
  char* buf = NULL;
  size_t used = 0;
  int rc = 0;

  if (dir == NULL || dir->kind != KFS_DIR) {
    fuse_reply_err(req, dir == NULL ? ENOENT : ENOTDIR);
    return;
  }
  buf = malloc(size ? size : 1);
  if (buf == NULL) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  for (off_t i = off < 0 ? 0 : off;; i++) {
    fuse_ino_t child;
    const char* name;
    if (i < 2) {
      child = i == 0 ? ino : dir->parent;
      name = i == 0 ? "." : "..";
    } else if ((rc = kfs_tree_entry(&fs->tree, ino, (size_t)(i - 2), &child,
                                    &name)) <= 0) {
      break;
    }
    const kfs_node* n = node_of(fs, child, &view);
    if (n == NULL) {
      rc = -EIO; /* an entry without an inode: cannot happen */
      break;
    }
    size_t add;
    if (plus) {
      struct fuse_entry_param e;
      memset(&e, 0, sizeof(e));
      /* "." and ".." carry no entry: the kernel does not look them up. */
      if (i >= 2) {
        e.ino = child;
        e.generation = 1;
        e.entry_timeout = KFS_TIMEOUT;
        e.attr_timeout = attr_timeout(n);
      }
      /* A listing renders nothing: a text file not rendered yet goes out
       * with attributes the kernel must not keep, so that a stat asks. */
      if (!fill_stat(fs, child, n, &e.attr))
        e.attr_timeout = 0;
      add =
          fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
    } else {
      struct stat st;
      memset(&st, 0, sizeof(st));
      st.st_ino = child;
      st.st_mode = n->kind == KFS_DIR ? S_IFDIR : S_IFREG;
      add = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
    }
    if (add > size - used)
      break; /* did not fit: the next call resumes at this offset */
    used += add;
  }
  if (rc < 0 && used == 0)
    fuse_reply_err(req, -rc);
  else
    fuse_reply_buf(req, buf, used);
  free(buf);
}

static void kfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info* fi) {
  (void)fi;
  reply_dir(req, ino, size, off, false);
}

static void kfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                            off_t off, struct fuse_file_info* fi) {
  (void)fi;
  reply_dir(req, ino, size, off, true);
}

static void track_handle(kfs_fs* fs, kfs_handle* h) {
  pthread_mutex_lock(&fs->handles_lock);
  h->next = fs->handles;
  if (h->next != NULL)
    h->next->prev = h;
  fs->handles = h;
  pthread_mutex_unlock(&fs->handles_lock);
}

static void free_handle(kfs_fs* fs, kfs_handle* h) {
  pthread_mutex_lock(&fs->handles_lock);
  if (h->prev != NULL)
    h->prev->next = h->next;
  else if (fs->handles == h)
    fs->handles = h->next;
  if (h->next != NULL)
    h->next->prev = h->prev;
  pthread_mutex_unlock(&fs->handles_lock);
  kpack_kcache_release(fs->cache, h->entry);
  kfs_render_release(&fs->renders, h->render);
  pthread_mutex_destroy(&h->pin_lock);
  free(h->owned);
  free(h);
}

static void release_handle(kfs_fs* fs, kfs_handle* h) {
  if (h != NULL && atomic_fetch_sub(&h->refs, 1) == 1)
    free_handle(fs, h);
}

void kfs_close_open_files(kfs_fs* fs) {
  if (fs->sweeper_started) {
    pthread_mutex_lock(&fs->attach_lock);
    fs->sweep_stop = true;
    pthread_cond_signal(&fs->sweep);
    pthread_mutex_unlock(&fs->attach_lock);
    pthread_join(fs->sweeper, NULL);
    fs->sweeper_started = false;
  }
  memset(fs->attached, 0, sizeof(fs->attached)); /* in the list below */
  while (fs->handles != NULL)
    free_handle(fs, fs->handles);
  free(fs->stats_text);
  fs->stats_text = NULL;
}

/* Pins the handle's kernel on first use; 0 or an errno. */
static int pin_kernel(kfs_fs* fs, kfs_handle* h) {
  int err = 0;
  pthread_mutex_lock(&h->pin_lock);
  if (h->entry == NULL && h->pin_error == 0) {
    const kfs_node* n = h->node;
    const void* data;
    size_t size;
    kpack_error_t kerr =
        kpack_kcache_acquire(fs->cache, fs->tree.sources[n->source].archive,
                             n->binary, n->arch, &h->entry, &data, &size);
    if (kerr == KPACK_SUCCESS) {
      h->data = data;
      h->size = size;
    } else {
      atomic_fetch_add(&fs->read_errors, 1);
      h->pin_error = kfs_errno(kerr);
    }
    atomic_store(&h->pinned, true);
  }
  err = h->pin_error;
  pthread_mutex_unlock(&h->pin_lock);
  return err;
}

/* Pins the render behind a text file on first use; 0 or an errno. */
static int pin_text(kfs_fs* fs, kfs_handle* h) {
  int err = 0;
  pthread_mutex_lock(&h->pin_lock);
  if (h->render == NULL && h->pin_error == 0) {
    kpack_error_t kerr =
        kfs_render_acquire(&fs->renders, &fs->tree, h->node, &h->render);
    if (kerr == KPACK_SUCCESS) {
      const kpack_co_render_t* t = &h->render->text;
      bool json = h->node->kind == KFS_METADATA;
      h->data = json ? t->metadata_json : t->kernels;
      h->size = json ? t->metadata_json_size : t->kernels_size;
    } else {
      h->pin_error = kfs_errno(kerr);
    }
    atomic_store(&h->pinned, true);
  }
  err = h->pin_error;
  pthread_mutex_unlock(&h->pin_lock);
  return err;
}

/* A handle for reading node n (not a directory), with one reference:
 * 0 or an errno. *direct says its reads must bypass the page cache (a
 * stats snapshot per open). */
static int new_handle(kfs_fs* fs, const kfs_node* n, kfs_handle** out,
                      bool* direct) {
  kfs_handle* h = calloc(1, sizeof(*h));
  *out = NULL;
  *direct = false;
  if (h == NULL)
    return ENOMEM;
  atomic_init(&h->refs, 1);
  atomic_init(&h->pinned, false);
  pthread_mutex_init(&h->pin_lock, NULL);
  track_handle(fs, h);
  h->view = *n;
  n = &h->view; /* lives as long as the handle */
  if (n->kind == KFS_KERNEL) {
    h->node = n;
    h->size = n->size; /* from the TOC; the pinned kernel has the same */
    atomic_fetch_add(&fs->opens, 1);
  } else if (n->kind == KFS_KERNELS || n->kind == KFS_METADATA) {
    /* Its size was given out exact (text_size()); the render is pinned by
     * the first read. */
    h->node = n;
  } else if (n->kind == KFS_TOC_METADATA) {
    /* The TOC's bytes, in memory since the archive was opened. */
    const void* map = NULL;
    size_t size = 0;
    kpack_get_entry_metadata(fs->tree.sources[n->source].archive, n->binary,
                             n->arch, &map, &size);
    h->data = (const char*)map;
    h->size = size;
  } else if (n->kind == KFS_ARCHIVES) {
    h->data = fs->tree.archives_text;
    h->size = fs->tree.archives_size;
  } else {
    /* A snapshot per open, read past the page cache: counters move. */
    h->owned = render_stats(fs, &h->size);
    if (h->owned == NULL) {
      release_handle(fs, h);
      return ENOMEM;
    }
    h->data = h->owned;
    *direct = true;
  }
  *out = h;
  return 0;
}

static void kfs_open(fuse_req_t req, fuse_ino_t ino,
                     struct fuse_file_info* fi) {
  kfs_fs* fs = fs_of(req);
  kfs_node view;
  const kfs_node* n = node_of(fs, ino, &view);
  kfs_handle* h = NULL;
  bool direct;
  int err = 0;

  if (n == NULL || n->kind == KFS_DIR)
    err = n == NULL ? ENOENT : EISDIR;
  else if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
    err = EROFS;
  else if (fs->no_open)
    err = ENOSYS; /* this open and every later one succeed in the kernel */
  else
    err = new_handle(fs, n, &h, &direct);
  if (err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  fi->keep_cache = !direct; /* the page cache outlives this open */
  fi->direct_io = direct;
  fi->noflush = 1;
  fi->fh = (uint64_t)(uintptr_t)h;
  /* An interrupted open is never released by the kernel: undo it here. */
  if (fuse_reply_open(req, fi) != 0)
    release_handle(fs, h);
}

/* ---- files read without OPEN ---------------------------------------------
 * With zero-message opens (FUSE_CAP_NO_OPEN_SUPPORT: kfs_open answers
 * ENOSYS once, and the kernel opens and closes every file by itself from
 * then on, keeping its page cache), open(2) and close(2) cost no round
 * trip, and reading a file again from the page cache none at all. READs
 * then come without a handle: the READ that starts a file makes one and
 * attaches it to the inode, where the READs after it find it (its kernel
 * or render pinned once, as for an open file); the READ that reaches the
 * end of the file lets it go, as do a failed READ, FORGET and
 * release_after without a READ (the sweeper thread), and a file whose
 * reading stopped short is let go once KFS_ATTACHED others are being
 * read. A read in progress holds its own reference, so letting go never
 * pulls bytes from under a reply. .kpackfs/stats has no handle: its reads serve
 * the snapshot its last attributes described (fill_stat()). */

/* When another file is read, a file without a READ for this
 * share of release_after (20 ms by default) is taken for done with: a
 * reader's READs of one file come microseconds apart, and one that pauses
 * longer only pins its kernel again (a hit in the kernel cache while it
 * fits). */
#define KFS_PASSED_SHARE 50

/* The handle for a READ of inode `ino` at `off`, with a reference for
 * that read: the one attached to the inode, or one attached now when the
 * read starts the file. A read past the start of a file with nothing
 * attached (a page the page cache let go of, readahead answered after the
 * file's end, a reader that seeks) gets a handle of its own, not attached:
 * its kernel is pinned for that read alone, and stays in the kernel cache
 * as any released kernel does (a miss there decompresses into the memory
 * of the kernel it evicts). NULL with *err set when there is no handle to
 * make. */
static kfs_handle* attach(kfs_fs* fs, fuse_ino_t ino, off_t off, int* err) {
  kfs_handle* h = NULL;
  pthread_mutex_lock(&fs->attach_lock);
  for (size_t i = 0; i < KFS_ATTACHED && h == NULL; i++) {
    kfs_attached* a = &fs->attached[i];
    if (a->handle != NULL && a->ino == ino) {
      h = a->handle;
      atomic_fetch_add(&h->refs, 1);
      a->used_ns = kfs_clock_ns();
    }
  }
  pthread_mutex_unlock(&fs->attach_lock);
  if (h != NULL)
    return h;
  kfs_node view;
  const kfs_node* n = node_of(fs, ino, &view);
  bool direct;
  *err = n == NULL ? ENOENT : n->kind == KFS_DIR ? EISDIR : 0;
  if (*err != 0 || (*err = new_handle(fs, n, &h, &direct)) != 0)
    return NULL;
  /* A file that starts is attached: the table holds its first reference,
   * the read a second. A read past the start keeps its only one. */
  bool starts = off == 0;
  if (starts) {
    h->attached = true;
    atomic_fetch_add(&h->refs, 1);
  }
  /* Files not read for a while when another one is are taken for done
   * with: their readers went on to the next file (a reader whose last
   * pages came from the page cache sends no READ at the end). A file that
   * starts takes a free slot, else the least recently read file's (a file
   * whose reading stopped short, let go once KFS_ATTACHED others are
   * being read). */
  kfs_handle* done[KFS_ATTACHED + 1];
  size_t count = 0;
  uint64_t now = kfs_clock_ns();
  kfs_attached* slot = NULL;
  pthread_mutex_lock(&fs->attach_lock);
  for (size_t i = 0; i < KFS_ATTACHED; i++) {
    kfs_attached* a = &fs->attached[i];
    if (a->handle != NULL &&
        now - a->used_ns > fs->release_after_ns / KFS_PASSED_SHARE) {
      done[count++] = a->handle;
      a->handle = NULL;
    }
    if (slot == NULL || (slot->handle != NULL &&
                         (a->handle == NULL || a->used_ns < slot->used_ns)))
      slot = a;
  }
  if (starts) {
    if (slot->handle != NULL)
      done[count++] = slot->handle;
    *slot = (kfs_attached){.ino = ino, .handle = h, .used_ns = now};
    pthread_cond_signal(&fs->sweep); /* it may sleep with nothing to watch */
  }
  pthread_mutex_unlock(&fs->attach_lock);
  for (size_t i = 0; i < count; i++)
    release_handle(fs, done[i]);
  return h;
}

/* Lets go of the table's reference to `h` (after its last bytes, or a
 * failure: the next READ tries afresh), or to inode `ino`'s handle
 * (FORGET). */
static void detach(kfs_fs* fs, const kfs_handle* h, fuse_ino_t ino) {
  kfs_handle* found = NULL;
  pthread_mutex_lock(&fs->attach_lock);
  for (size_t i = 0; i < KFS_ATTACHED && found == NULL; i++) {
    kfs_attached* a = &fs->attached[i];
    if (a->handle != NULL && (h != NULL ? a->handle == h : a->ino == ino)) {
      found = a->handle;
      a->handle = NULL;
    }
  }
  pthread_mutex_unlock(&fs->attach_lock);
  release_handle(fs, found);
}

static void detach_inode(kfs_fs* fs, fuse_ino_t ino) {
  if (fs->no_open)
    detach(fs, NULL, ino);
}

/* The thread that lets go of the handles of files not read for
 * release_after_ns: a reader that stopped short, or whose last pages came
 * from the page cache filled by another reader, never sends the READ that
 * reaches the end. */
static void* sweep_idle(void* arg) {
  kfs_fs* fs = arg;
  kfs_handle* idle[KFS_ATTACHED];
  pthread_mutex_lock(&fs->attach_lock);
  while (!fs->sweep_stop) {
    uint64_t now = kfs_clock_ns(), due = UINT64_MAX;
    size_t count = 0;
    for (size_t i = 0; i < KFS_ATTACHED; i++) {
      kfs_attached* a = &fs->attached[i];
      if (a->handle == NULL)
        continue;
      if (now - a->used_ns >= fs->release_after_ns) {
        idle[count++] = a->handle;
        *a = (kfs_attached){0};
      } else if (a->used_ns + fs->release_after_ns < due) {
        due = a->used_ns + fs->release_after_ns;
      }
    }
    if (count > 0) {
      pthread_mutex_unlock(&fs->attach_lock);
      for (size_t i = 0; i < count; i++)
        release_handle(fs, idle[i]);
      pthread_mutex_lock(&fs->attach_lock);
      continue;
    }
    if (due == UINT64_MAX) {
      pthread_cond_wait(&fs->sweep, &fs->attach_lock);
    } else {
      struct timespec at = {.tv_sec = (time_t)(due / 1000000000u),
                            .tv_nsec = (long)(due % 1000000000u)};
      pthread_cond_timedwait(&fs->sweep, &fs->attach_lock, &at);
    }
  }
  pthread_mutex_unlock(&fs->attach_lock);
  return NULL;
}

int kfs_attach_init(kfs_fs* fs) {
  pthread_condattr_t attr;
  if (pthread_mutex_init(&fs->attach_lock, NULL) != 0)
    return -1;
  if (pthread_condattr_init(&attr) != 0 ||
      pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
      pthread_cond_init(&fs->sweep, &attr) != 0) {
    pthread_mutex_destroy(&fs->attach_lock);
    return -1;
  }
  pthread_condattr_destroy(&attr);
  return 0;
}

void kfs_attach_free(kfs_fs* fs) {
  pthread_cond_destroy(&fs->sweep);
  pthread_mutex_destroy(&fs->attach_lock);
}

/* A read of .kpackfs/stats without OPEN. */
static void read_stats(kfs_fs* fs, fuse_req_t req, size_t size, off_t off) {
  pthread_mutex_lock(&fs->attach_lock);
  if (fs->stats_text == NULL)
    fs->stats_text = render_stats(fs, &fs->stats_size);
  if (fs->stats_text == NULL)
    fuse_reply_err(req, ENOMEM);
  else if (off < 0 || (uint64_t)off >= fs->stats_size)
    fuse_reply_buf(req, NULL, 0);
  else
    fuse_reply_buf(req, fs->stats_text + off,
                   size < fs->stats_size - (size_t)off
                       ? size
                       : fs->stats_size - (size_t)off);
  pthread_mutex_unlock(&fs->attach_lock);
}

/* Replies to a read of open file `h`, pinning its bytes first (which may
 * wait: a decompression, a render). */
static void read_reply(kfs_fs* fs, fuse_req_t req, kfs_handle* h, size_t size,
                       off_t off) {
  int err = 0;
  if (h->node != NULL && h->node->kind == KFS_KERNEL) {
    err = pin_kernel(fs, h);
    atomic_fetch_add(&fs->read_requests, 1);
  } else if (h->node != NULL) {
    err = pin_text(fs, h);
  }
  if (err != 0) {
    fuse_reply_err(req, err);
  } else if (off < 0 || (uint64_t)off >= h->size) {
    fuse_reply_buf(req, NULL, 0);
  } else {
    size_t left = h->size - (size_t)off;
    fuse_reply_buf(req, h->data + off, size < left ? size : left);
  }
  /* Its last bytes are in the page cache now; or it failed, and the
   * next read tries again. */
  if (h->attached &&
      (err != 0 || (off >= 0 && (uint64_t)off + size >= h->size)))
    detach(fs, h, 0);
}

/* Whether the first read of `h` goes to the pool (see KFS_ALONE_BYTES). */
static bool read_waits(kfs_fs* fs, const kfs_handle* h) {
  if (h->node == NULL || atomic_load(&h->pinned))
    return false;
  if (h->node->kind != KFS_KERNEL)
    return true;
  if (h->node->size <= KFS_INLINE_BYTES)
    return false;
  kpack_kcache_stats_t cache;
  return h->node->size > KFS_ALONE_BYTES ||
         kpack_kcache_get_stats(fs->cache, &cache) != KPACK_SUCCESS ||
         cache.pinned > 0;
}

/* After the pool's job has pinned `h`: answers the reads that came in
 * meanwhile (the kernel's readahead sends several at once), here rather
 * than each on a worker of its own. */
static void answer_waiting(kfs_fs* fs, kfs_handle* h) {
  pthread_mutex_lock(&h->pin_lock);
  kfs_waiting* w = h->waiting;
  h->waiting = NULL;
  h->pinning = false;
  pthread_mutex_unlock(&h->pin_lock);
  while (w != NULL) {
    kfs_waiting* next = w->next;
    read_reply(fs, w->req, h, w->size, w->off);
    release_handle(fs, h);
    free(w);
    w = next;
  }
}

/* Hands a read that must wait to the pool: the first to the pool itself,
 * the others to the job that pins. True when it did. */
static bool defer_read(kfs_fs* fs, fuse_req_t req, kfs_handle* h, size_t size,
                       off_t off) {
  if (fs->pool == NULL)
    return false;
  bool first = false, queued = false;
  pthread_mutex_lock(&h->pin_lock);
  if (!atomic_load(&h->pinned)) {
    if (!h->pinning) {
      h->pinning = first = true;
    } else {
      kfs_waiting* w = malloc(sizeof(*w));
      if (w != NULL) {
        *w = (kfs_waiting){
            .next = h->waiting, .req = req, .size = size, .off = off};
        h->waiting = w;
        queued = true;
      }
    }
  }
  pthread_mutex_unlock(&h->pin_lock);
  if (first) {
    /* Read before the job may have let go of h. */
    bool kernel = h->node != NULL && h->node->kind == KFS_KERNEL;
    if (defer(fs, req, DEFER_READ, 0, h, NULL, size, off)) {
      if (kernel)
        atomic_fetch_add(&fs->reads_pooled, 1);
      return true;
    }
    pthread_mutex_lock(&h->pin_lock);
    h->pinning = false; /* answered here instead */
    pthread_mutex_unlock(&h->pin_lock);
  }
  return queued; /* else answered here, waiting on the pin if need be */
}

static void kfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info* fi) {
  kfs_fs* fs = fs_of(req);
  kfs_handle* h = (kfs_handle*)(uintptr_t)fi->fh;
  int err;
  if (h != NULL) {
    atomic_fetch_add(&h->refs, 1); /* for this read, wherever it runs */
  } else if (ino == KFS_INO_STATS) {
    read_stats(fs, req, size, off);
    return;
  } else if ((h = attach(fs, ino, off, &err)) == NULL) {
    fuse_reply_err(req, err);
    return;
  }
  if (read_waits(fs, h) && defer_read(fs, req, h, size, off))
    return;
  read_reply(fs, req, h, size, off);
  release_handle(fs, h);
}

static void kfs_release(fuse_req_t req, fuse_ino_t ino,
                        struct fuse_file_info* fi) {
  (void)ino;
  release_handle(fs_of(req), (kfs_handle*)(uintptr_t)fi->fh);
  fuse_reply_err(req, 0);
}

static void kfs_statfs(fuse_req_t req, fuse_ino_t ino) {
  kfs_fs* fs = fs_of(req);
  struct statvfs st;
  (void)ino;
  memset(&st, 0, sizeof(st));
  st.f_bsize = st.f_frsize = 4096;
  st.f_blocks = (fs->tree.kernel_bytes + 4095) / 4096;
  st.f_files = fs->tree.inodes;
  st.f_namemax = 255;
  st.f_flag = ST_RDONLY;
  fuse_reply_statfs(req, &st);
}

/* ---- extended attributes ------------------------------------------------- */

static const char* const xattr_names[] = {
    "user.kpack.archive",     "user.kpack.binary",      "user.kpack.arch",
    "user.kpack.compression", "user.kpack.stored_size", "user.kpack.ordinal",
    "user.kpack.metadata",
};
#define XATTR_COUNT (sizeof(xattr_names) / sizeof(xattr_names[0]))
#define XATTR_METADATA 6

/* user.kpack.metadata exists only on kernels whose TOC entry has a map. */
static bool xattr_present(const kfs_fs* fs, const kfs_node* n, size_t index) {
  const void* map = NULL;
  size_t size;
  if (index != XATTR_METADATA)
    return true;
  kpack_get_entry_metadata(fs->tree.sources[n->source].archive, n->binary,
                           n->arch, &map, &size);
  return map != NULL;
}

/* Writes attribute `index` of kernel node `n` into buf; returns its length
 * (without a terminator: xattr values are byte strings). */
static size_t xattr_value(const kfs_fs* fs, const kfs_node* n, size_t index,
                          char* buf, size_t cap) {
  const kfs_source* s = &fs->tree.sources[n->source];
  kpack_kernel_info_t info;
  memset(&info, 0, sizeof(info));
  kpack_get_kernel_info(s->archive, n->binary, n->arch, &info);
  switch (index) {
    case 0:
      return (size_t)snprintf(buf, cap, "%s", s->path);
    case 1:
      return (size_t)snprintf(buf, cap, "%s", n->binary);
    case 2:
      return (size_t)snprintf(buf, cap, "%s", n->arch);
    case 3:
      return (size_t)snprintf(buf, cap, "%s", s->scheme);
    case 4:
      return (size_t)snprintf(buf, cap, "%" PRIu64, info.stored_size);
    case 5:
      return (size_t)snprintf(buf, cap, "%" PRIu32, info.ordinal);
    default: {
      char* json = NULL; /* compact JSON; "" if it cannot be rendered */
      kpack_get_entry_metadata_json(s->archive, n->binary, n->arch, &json);
      size_t len = (size_t)snprintf(buf, cap, "%s", json ? json : "");
      free(json);
      return len;
    }
  }
}

/* Answers a size probe (size 0) with the length, else the bytes or ERANGE. */
static void reply_xattr_bytes(fuse_req_t req, const char* value, size_t len,
                              size_t size) {
  if (size == 0)
    fuse_reply_xattr(req, len);
  else if (size < len)
    fuse_reply_err(req, ERANGE);
  else
    fuse_reply_buf(req, value, len);
}

/* Attributes read from the code object itself (render.c): listed for every
 * code object (type "hsaco"), computed only when asked for. */
static const char* const code_object_xattrs[] = {
    "user.kpack.target",
    "user.kpack.kernels",
};
#define CODE_OBJECT_XATTR_COUNT \
  (sizeof(code_object_xattrs) / sizeof(code_object_xattrs[0]))

static bool is_code_object(const kfs_fs* fs, const kfs_node* n) {
  kpack_kernel_info_t info;
  return n->kind == KFS_KERNEL &&
         kpack_get_kernel_info(fs->tree.sources[n->source].archive, n->binary,
                               n->arch, &info) == KPACK_SUCCESS &&
         strcmp(info.type, "hsaco") == 0;
}

/* Kernel bytes that are not a code object have no such attribute
 * (ENODATA); a kernel that cannot be read is EIO like its reads. */
static void reply_code_object_xattr(fuse_req_t req, kfs_fs* fs,
                                    const kfs_node* n, size_t index,
                                    size_t size) {
  kfs_render* r;
  char count[32];
  kpack_error_t err = kfs_render_acquire(&fs->renders, &fs->tree, n, &r);
  if (err != KPACK_SUCCESS) {
    fuse_reply_err(req, kfs_errno(err));
    return;
  }
  if (r->text.target == NULL) {
    fuse_reply_err(req, ENODATA);
  } else {
    snprintf(count, sizeof(count), "%zu", r->text.kernel_count);
    const char* value = index == 0 ? r->text.target : count;
    reply_xattr_bytes(req, value, strlen(value), size);
  }
  kfs_render_release(&fs->renders, r);
}

static void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                     size_t size, bool may_defer) {
  kfs_fs* fs = fs_of(req);
  kfs_node view;
  const kfs_node* n = node_of(fs, ino, &view);
  if (n == NULL) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  for (size_t i = 0; i < CODE_OBJECT_XATTR_COUNT; i++) {
    if (strcmp(name, code_object_xattrs[i]) == 0 && is_code_object(fs, n)) {
      /* Rendered from the code object: may wait for the archive. */
      if (may_defer && defer(fs, req, DEFER_GETXATTR, ino, NULL, name, size, 0))
        return;
      reply_code_object_xattr(req, fs, n, i, size);
      return;
    }
  }
  for (size_t i = 0; n->kind == KFS_KERNEL && i < XATTR_COUNT; i++) {
    if (strcmp(name, xattr_names[i]) == 0 && xattr_present(fs, n, i)) {
      size_t len = xattr_value(fs, n, i, NULL, 0);
      char* value = malloc(len + 1);
      if (value == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
      }
      xattr_value(fs, n, i, value, len + 1);
      reply_xattr_bytes(req, value, len, size);
      free(value);
      return;
    }
  }
  fuse_reply_err(req, ENODATA);
}

static void kfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                         size_t size) {
  getxattr(req, ino, name, size, true);
}

static void kfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  kfs_fs* fs = fs_of(req);
  kfs_node view;
  const kfs_node* n = node_of(fs, ino, &view);
  char list[256];
  size_t len = 0;
  if (n == NULL) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  for (size_t i = 0; n->kind == KFS_KERNEL && i < XATTR_COUNT; i++) {
    if (!xattr_present(fs, n, i))
      continue;
    size_t add = strlen(xattr_names[i]) + 1; /* names are NUL-separated */
    memcpy(list + len, xattr_names[i], add);
    len += add;
  }
  for (size_t i = 0; i < CODE_OBJECT_XATTR_COUNT && is_code_object(fs, n);
       i++) {
    size_t add = strlen(code_object_xattrs[i]) + 1;
    memcpy(list + len, code_object_xattrs[i], add);
    len += add;
  }
  reply_xattr_bytes(req, list, len, size);
}

/* ---- everything that would write ----------------------------------------- */

static void refuse(fuse_req_t req) {
  fuse_reply_err(req, EROFS);
}

static void kfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr,
                        int to_set, struct fuse_file_info* fi) {
  (void)ino, (void)attr, (void)to_set, (void)fi;
  refuse(req);
}

static void kfs_mknod(fuse_req_t req, fuse_ino_t parent, const char* name,
                      mode_t mode, dev_t rdev) {
  (void)parent, (void)name, (void)mode, (void)rdev;
  refuse(req);
}

static void kfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name,
                      mode_t mode) {
  (void)parent, (void)name, (void)mode;
  refuse(req);
}

static void kfs_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  (void)parent, (void)name;
  refuse(req);
}

static void kfs_symlink(fuse_req_t req, const char* link, fuse_ino_t parent,
                        const char* name) {
  (void)link, (void)parent, (void)name;
  refuse(req);
}

static void kfs_rename(fuse_req_t req, fuse_ino_t parent, const char* name,
                       fuse_ino_t newparent, const char* newname,
                       unsigned int flags) {
  (void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
  refuse(req);
}

static void kfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                     const char* newname) {
  (void)ino, (void)newparent, (void)newname;
  refuse(req);
}

static void kfs_write(fuse_req_t req, fuse_ino_t ino, const char* buf,
                      size_t size, off_t off, struct fuse_file_info* fi) {
  (void)ino, (void)buf, (void)size, (void)off, (void)fi;
  refuse(req);
}

static void kfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                         const char* value, size_t size, int flags) {
  (void)ino, (void)name, (void)value, (void)size, (void)flags;
  refuse(req);
}

static void kfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  (void)ino, (void)name;
  refuse(req);
}

static void kfs_create(fuse_req_t req, fuse_ino_t parent, const char* name,
                       mode_t mode, struct fuse_file_info* fi) {
  (void)parent, (void)name, (void)mode, (void)fi;
  refuse(req);
}

static void kfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
                          off_t offset, off_t length,
                          struct fuse_file_info* fi) {
  (void)ino, (void)mode, (void)offset, (void)length, (void)fi;
  refuse(req);
}

static void kfs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                                struct fuse_file_info* fi_in,
                                fuse_ino_t ino_out, off_t off_out,
                                struct fuse_file_info* fi_out, size_t len,
                                int flags) {
  (void)ino_in, (void)off_in, (void)fi_in, (void)ino_out, (void)off_out;
  (void)fi_out, (void)len, (void)flags;
  refuse(req);
}

const struct fuse_lowlevel_ops kfs_ops = {
    .init = kfs_init,
    .lookup = kfs_lookup,
    .forget = kfs_forget,
    .forget_multi = kfs_forget_multi,
    .getattr = kfs_getattr,
    .opendir = kfs_opendir,
    .readdir = kfs_readdir,
    .readdirplus = kfs_readdirplus,
    .open = kfs_open,
    .read = kfs_read,
    .release = kfs_release,
    .statfs = kfs_statfs,
    .getxattr = kfs_getxattr,
    .listxattr = kfs_listxattr,
    .setattr = kfs_setattr,
    .mknod = kfs_mknod,
    .mkdir = kfs_mkdir,
    .unlink = kfs_unlink,
    .rmdir = kfs_unlink,
    .symlink = kfs_symlink,
    .rename = kfs_rename,
    .link = kfs_link,
    .write = kfs_write,
    .setxattr = kfs_setxattr,
    .removexattr = kfs_removexattr,
    .create = kfs_create,
    .fallocate = kfs_fallocate,
    .copy_file_range = kfs_copy_file_range,
};
