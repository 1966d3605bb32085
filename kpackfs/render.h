/* SPDX-License-Identifier: MIT
 *
 * render.c: what a kernel's code object shows beside it (the `kernels` and
 * `metadata.json` texts, the user.kpack.target and user.kpack.kernels
 * attributes), rendered on first use and kept within a byte budget. Owns
 * kfs_renders, the filesystem's only mutable state besides the kernel cache
 * and the open files; its one lock protects all of it.
 */
#ifndef KPACKFS_RENDER_H
#define KPACKFS_RENDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kpackfs.h"
#include "tree.h"

/* What a kernel's code object shows as files and attributes, built on the
 * first request that needs it and immutable afterwards. */
typedef struct kfs_render {
  /* Both texts, and for the attributes the target (NULL when the bytes are
   * not a code object: no attribute) and the kernel count. */
  kpack_co_render_t text;
  /* render.c's bookkeeping, under kfs_renders.lock */
  uint32_t refs;
  uint32_t slot;
  bool building; /* in the map but not built yet: wait on kfs_renders.done */
  size_t bytes;
  struct kfs_render* lru_prev;
  struct kfs_render* lru_next;
  struct kfs_render* map_next; /* kfs_renders.map's chain */
} kfs_render;

typedef struct kfs_render_slot kfs_render_slot;

/* Renders ahead: the kernels a stat walk will ask about next, rendered
 * on worker threads (see kfs_render_ahead()). */
#define KFS_RENDER_AHEAD 32
#define KFS_RENDER_WORKERS 4

/* The renders of every kernel, kept within a byte budget: released ones
 * stay in LRU order until the budget is exceeded (the page cache keeps what
 * was read anyway; this bridges closes, xattr lookups and evicted pages).
 * Sizes, once known, are remembered for good in 8 bytes a kernel, so
 * `stat` renders a kernel at most once; the renders held, a few thousand
 * at most, are found through a map by slot. */
typedef struct kfs_renders {
  pthread_mutex_t lock; /* protects everything below and each slot */
  pthread_cond_t done;  /* a render finished (single flight per kernel) */
  /* Rendering ahead: render slots queued for the workers, started on the
   * first need (after the daemon has forked) and joined by
   * kfs_renders_free(). */
  const kfs_tree* tree;
  pthread_cond_t queued;
  uint32_t queue[4 * KFS_RENDER_AHEAD];
  size_t queue_head, queue_count;
  pthread_t workers[KFS_RENDER_WORKERS];
  size_t worker_count;
  bool stopping;
  uint64_t misses; /* sizes asked for before they were known */
  uint64_t ahead;  /* renders built ahead */
  kfs_render_slot* slots;
  size_t count;
  kfs_render** map; /* held and building renders, chained by slot */
  size_t map_size;  /* buckets, a power of two */
  size_t held;      /* renders in the map */
  kfs_render* lru;  /* released renders, most recent first (circular) */
  uint64_t budget;
  uint64_t bytes;    /* held, pinned or not */
  uint64_t renders;  /* renders built */
  uint64_t failures; /* renders that failed (the kernel unreadable...) */
  uint64_t decoded;  /* kernel bytes decoded for them (prefixes) */
} kfs_renders;

#define KFS_RENDER_BUDGET (2ull << 20)

/* One slot per render slot of the tree (kfs_tree.render_slots: every
 * kernel of the sources, shown or not); called once the tree is built, and
 * freed with the filesystem. 0 or -ENOMEM. */
int kfs_renders_init(kfs_renders* renders, size_t count, uint64_t budget);
void kfs_renders_free(kfs_renders* renders);

/* The size of text file `n` (KFS_KERNELS or KFS_METADATA) if its kernel was
 * ever rendered; false otherwise. Never renders. */
bool kfs_render_size(kfs_renders* renders, const kfs_node* n, uint64_t* size);

/* The render of the kernel behind node `n` (a kernel or one of its text
 * files), built on a miss from as much of the kernel as its metadata note
 * needs (kpack_kernel_render(): a prefix, decoded outside the kernel
 * cache). Concurrent misses for one kernel build it once. Pinned until
 * kfs_render_release(). Bytes that are not a code object render too, as
 * empty texts without a target. Statuses: the kernel read's (it cannot be
 * read), OUT_OF_MEMORY; a failure is not remembered. */
kpack_error_t kfs_render_acquire(kfs_renders* renders, const kfs_tree* tree,
                                 const kfs_node* n, kfs_render** render);
void kfs_render_release(kfs_renders* renders, kfs_render* render);

/* A stat walk (du, ls -lR, rsync, tar) asks the size of each text file in
 * turn, and the first ask of a kernel's decodes a prefix of it, read from
 * the archive: called when such a size is missing for render slot `slot`,
 * this queues the next KFS_RENDER_AHEAD kernels of the sources whose sizes
 * are unknown, for worker threads to render while the walk goes on. The
 * first miss of a mount starts nothing (one file read is no walk); a
 * listing asks no size and so starts nothing either. The renders count
 * against the same budget; sizes are kept for good, so none is rendered
 * twice. */
void kfs_render_ahead(kfs_renders* renders, const kfs_tree* tree,
                      uint32_t slot);

/* Appends "renders=N\nrender_bytes=N\n" style lines for .kpackfs/stats. */
int kfs_render_stats(kfs_renders* renders, char** text);

#endif /* KPACKFS_RENDER_H */
