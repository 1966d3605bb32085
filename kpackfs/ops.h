/* SPDX-License-Identifier: MIT
 *
 * ops.c: the FUSE low-level request handlers over one filesystem. kfs_fs
 * holds the immutable tree and, beside it, everything that changes while
 * mounted: the shared kernel cache (its own lock, libkpack), the renders
 * (render.h, its own lock), the list of open files (handles_lock) and the
 * request counters (atomics). One thread reads the requests; what waits
 * runs on the pool's workers.
 */
#ifndef KPACKFS_OPS_H
#define KPACKFS_OPS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "kpackfs.h"
#include "pool.h"
#include "render.h"
#include "tree.h"

struct kfs_handle;

/* Files being read with zero-message opens (ops.c, "Files read without
 * OPEN"), each read's handle found by inode: at most this many at once. */
#define KFS_ATTACHED 64

typedef struct kfs_attached {
  fuse_ino_t ino;
  struct kfs_handle* handle; /* one reference held; NULL: the slot is free */
  uint64_t used_ns;          /* kfs_clock_ns() at its last READ */
} kfs_attached;

/* Everything the request handlers share; fuse userdata. */
typedef struct kfs_fs {
  kfs_tree tree;       /* read-only while mounted */
  kfs_renders renders; /* one slot per kernel file */
  kpack_kcache_t* cache;
  /* `handles_lock` protects the list of open files, which outlive the
   * session when it ends with files still open (SIGTERM, lazy unmount). */
  pthread_mutex_t handles_lock;
  struct kfs_handle* handles;
  uid_t uid;
  gid_t gid;
  struct fuse_session* session; /* for invalidations; set before mounting */
  bool no_opendir;              /* set once by init: the kernel skips OPENDIR */
  /* Set before mounting: ask for zero-message opens when the kernel offers
   * them (-o open_requests clears it); set once by init: they are on. */
  bool want_no_open;
  bool no_open;
  /* With no_open: the handles of the files being read, the next slot to
   * take, and the .kpackfs/stats snapshot whose size was last given out. */
  pthread_mutex_t attach_lock;
  kfs_attached attached[KFS_ATTACHED];
  char* stats_text;
  size_t stats_size;
  /* A thread lets go of handles not read for release_after_ns (-o
   * release_after): it sleeps on `sweep` (CLOCK_MONOTONIC) under
   * attach_lock until the oldest is due, or `sweep_stop`. */
  uint64_t release_after_ns;
  pthread_cond_t sweep;
  pthread_t sweeper;
  bool sweeper_started;
  bool sweep_stop;
  /* Workers for the requests that wait (ops.c, "Requests that wait"), so
   * that the one thread reading requests answers the others at once; NULL
   * (-s) answers every request where it is read. */
  kfs_pool* pool;
  atomic_uint_fast64_t opens;         /* kernel files opened */
  atomic_uint_fast64_t read_requests; /* kernel reads the daemon served */
  atomic_uint_fast64_t read_errors;   /* first reads refused (EIO...) */
  atomic_uint_fast64_t reads_pooled;  /* kernel first reads the pool served */
  /* The mount's phases, kfs_clock_ns(): main() entered, mount(2) done (set
   * before the session loop starts), INIT answered. */
  uint64_t started_ns, mounted_ns;
  atomic_uint_fast64_t init_ns;
} kfs_fs;

extern const struct fuse_lowlevel_ops kfs_ops;

/* attach_lock and `sweep`, before anything else: 0, or -1 (out of
 * memory); kfs_attach_free() at the end. */
int kfs_attach_init(kfs_fs* fs);
void kfs_attach_free(kfs_fs* fs);

/* After the session loop has returned: stops the thread that lets go of
 * idle files, then closes every file the kernel never released, unpinning
 * its kernel, so the cache can be destroyed. */
void kfs_close_open_files(kfs_fs* fs);

#endif /* KPACKFS_OPS_H */
