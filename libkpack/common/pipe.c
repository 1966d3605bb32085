/* SPDX-License-Identifier: MIT
 *
 * The pipe of pipe.h: a ring of KP_PIPE_SLOTS buffers. The caller fills
 * the slot after the last committed one, appending pieces for the same
 * function until it is full, then commits it; the thread runs committed
 * slots in order and hands each back. One lock round per slot, not per
 * piece.
 */
#include "common/pipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/thread.h"

#define KP_PIPE_SLOTS 4
#define KP_PIPE_SLOT_SIZE ((size_t)256 << 10)

typedef struct pipe_slot {
  kp_pipe_fn fn;
  void* user;
  size_t size;
  unsigned char* data; /* KP_PIPE_SLOT_SIZE bytes */
} pipe_slot;

struct kp_pipe {
  pthread_mutex_t lock;
  pthread_cond_t ready; /* a slot was committed, or the pipe is stopping */
  pthread_cond_t room;  /* the thread handed a slot back */
  pthread_t thread;
  pipe_slot slots[KP_PIPE_SLOTS];
  /* Slots are numbered from 0 on, slot n in slots[n % KP_PIPE_SLOTS]:
   * [done, committed) wait for or run on the thread; `committed` is the
   * caller's while `filling`. */
  uint64_t done, committed;
  bool filling, stopping;
  kpack_error_t err; /* the first failure */
  int err_errno;     /* errno as the failed function left it */
};

static void* pipe_thread(void* arg) {
  kp_pipe* p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->done == p->committed && !p->stopping)
      pthread_cond_wait(&p->ready, &p->lock);
    if (p->done == p->committed)
      break; /* stopping, and nothing left */
    pipe_slot* s = &p->slots[p->done % KP_PIPE_SLOTS];
    bool run = p->err == KPACK_SUCCESS;
    pthread_mutex_unlock(&p->lock);
    errno = 0;
    kpack_error_t err = run ? s->fn(s->user, s->data, s->size) : KPACK_SUCCESS;
    int saved = errno;
    pthread_mutex_lock(&p->lock);
    if (err != KPACK_SUCCESS && p->err == KPACK_SUCCESS) {
      p->err = err;
      p->err_errno = saved;
    }
    p->done++;
    pthread_cond_signal(&p->room);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static void pipe_free(kp_pipe* p) {
  for (size_t i = 0; i < KP_PIPE_SLOTS; i++)
    free(p->slots[i].data);
  free(p);
}

kp_pipe* kp_pipe_start(void) {
  kp_pipe* p = calloc(1, sizeof(*p));
  if (p == NULL)
    return NULL;
  for (size_t i = 0; i < KP_PIPE_SLOTS; i++)
    if ((p->slots[i].data = malloc(KP_PIPE_SLOT_SIZE)) == NULL)
      goto no_lock;
  if (pthread_mutex_init(&p->lock, NULL) != 0)
    goto no_lock;
  if (pthread_cond_init(&p->ready, NULL) != 0)
    goto no_ready;
  if (pthread_cond_init(&p->room, NULL) != 0)
    goto no_room;
  if (kp_thread_start(&p->thread, pipe_thread, p) != 0)
    goto no_thread;
  return p;
no_thread:
  pthread_cond_destroy(&p->room);
no_room:
  pthread_cond_destroy(&p->ready);
no_ready:
  pthread_mutex_destroy(&p->lock);
no_lock:
  pipe_free(p);
  return NULL;
}

/* Hands the slot being filled to the thread. Called locked. */
static void pipe_commit(kp_pipe* p) {
  if (!p->filling)
    return;
  p->filling = false;
  p->committed++;
  pthread_cond_signal(&p->ready);
}

kpack_error_t kp_pipe_push(kp_pipe* p, kp_pipe_fn fn, void* user,
                           const void* data, size_t size) {
  const unsigned char* from = data;
  do {
    pthread_mutex_lock(&p->lock);
    pipe_slot* s = &p->slots[p->committed % KP_PIPE_SLOTS];
    if (p->filling &&
        (s->fn != fn || s->user != user || s->size == KP_PIPE_SLOT_SIZE)) {
      pipe_commit(p);
      s = &p->slots[p->committed % KP_PIPE_SLOTS];
    }
    if (!p->filling) {
      while (p->committed - p->done == KP_PIPE_SLOTS && p->err == KPACK_SUCCESS)
        pthread_cond_wait(&p->room, &p->lock);
      s->fn = fn;
      s->user = user;
      s->size = 0;
      p->filling = true;
    }
    kpack_error_t err = p->err;
    int saved = p->err_errno;
    pthread_mutex_unlock(&p->lock);
    if (err != KPACK_SUCCESS) {
      errno = saved;
      return err;
    }
    /* The slot being filled is the caller's alone. */
    size_t n = KP_PIPE_SLOT_SIZE - s->size;
    if (n > size)
      n = size;
    if (n > 0)
      memcpy(s->data + s->size, from, n);
    s->size += n;
    from += n;
    size -= n;
  } while (size > 0);
  return KPACK_SUCCESS;
}

kpack_error_t kp_pipe_finish(kp_pipe* p) {
  if (p == NULL)
    return KPACK_SUCCESS;
  pthread_mutex_lock(&p->lock);
  pipe_commit(p);
  p->stopping = true;
  pthread_cond_signal(&p->ready);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  kpack_error_t err = p->err;
  int saved = p->err_errno;
  pthread_cond_destroy(&p->room);
  pthread_cond_destroy(&p->ready);
  pthread_mutex_destroy(&p->lock);
  pipe_free(p);
  if (err != KPACK_SUCCESS)
    errno = saved;
  return err;
}

kpack_error_t kp_pipe_call(kp_pipe* p, kp_pipe_fn fn, void* user,
                           const void* data, size_t size) {
  return p != NULL ? kp_pipe_push(p, fn, user, data, size)
                   : fn(user, data, size);
}
