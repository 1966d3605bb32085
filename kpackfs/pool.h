/* SPDX-License-Identifier: MIT
 *
 * pool.c: worker threads for the requests that wait (decompressing a
 * kernel, rendering a code object's text from the archive), so that the
 * one thread reading /dev/fuse answers everything else at once. Owns its
 * threads and its queue; knows nothing of FUSE.
 */
#ifndef KPACKFS_POOL_H
#define KPACKFS_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* One piece of work: `run` is called once, on a worker, with the job
 * itself, and owns it from then on. */
typedef struct kfs_job {
  struct kfs_job* next;
  void (*run)(struct kfs_job* job);
} kfs_job;

typedef struct kfs_pool {
  pthread_mutex_t lock;
  pthread_cond_t ready;
  kfs_job* head; /* first in, first out */
  kfs_job* tail;
  pthread_t* threads;
  size_t count;
  bool stopping;
} kfs_pool;

/* Starts `threads` workers (at least one). 0, or -1 when not even one
 * could be started (nothing to free then). */
int kfs_pool_start(kfs_pool* pool, size_t threads);

/* Queues `job` for the next free worker. */
void kfs_pool_submit(kfs_pool* pool, kfs_job* job);

/* Runs every job queued, then stops and joins the workers. */
void kfs_pool_stop(kfs_pool* pool);

#endif /* KPACKFS_POOL_H */
