/* SPDX-License-Identifier: MIT
 *
 * Worker threads over one first-in, first-out queue of jobs (pool.h).
 */
#include <stdlib.h>

#include "kpackfs.h"
#include "pool.h"

static void* work(void* arg) {
  kfs_pool* pool = arg;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (pool->head == NULL && !pool->stopping)
      pthread_cond_wait(&pool->ready, &pool->lock);
    kfs_job* job = pool->head;
    if (job == NULL)
      break; /* stopping, and nothing left to run */
    pool->head = job->next;
    if (pool->head == NULL)
      pool->tail = NULL;
    pthread_mutex_unlock(&pool->lock);
    job->run(job);
    pthread_mutex_lock(&pool->lock);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

int kfs_pool_start(kfs_pool* pool, size_t threads) {
  *pool = (kfs_pool){0};
  pool->threads = calloc(threads ? threads : 1, sizeof(*pool->threads));
  if (pool->threads == NULL)
    return -1;
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->ready, NULL);
  while (pool->count < threads &&
         kfs_start_worker(&pool->threads[pool->count], work, pool) == 0)
    pool->count++;
  if (pool->count == 0) {
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->ready);
    free(pool->threads);
    *pool = (kfs_pool){0};
    return -1;
  }
  return 0;
}

void kfs_pool_submit(kfs_pool* pool, kfs_job* job) {
  job->next = NULL;
  pthread_mutex_lock(&pool->lock);
  if (pool->tail != NULL)
    pool->tail->next = job;
  else
    pool->head = job;
  pool->tail = job;
  pthread_cond_signal(&pool->ready);
  pthread_mutex_unlock(&pool->lock);
}

void kfs_pool_stop(kfs_pool* pool) {
  if (pool->count == 0)
    return;
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast(&pool->ready);
  pthread_mutex_unlock(&pool->lock);
  for (size_t i = 0; i < pool->count; i++)
    pthread_join(pool->threads[i], NULL);
  pthread_mutex_destroy(&pool->lock);
  pthread_cond_destroy(&pool->ready);
  free(pool->threads);
  *pool = (kfs_pool){0};
}
