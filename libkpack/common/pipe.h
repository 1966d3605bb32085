/* SPDX-License-Identifier: MIT
 *
 * A one-way pipe to a second thread, for work that follows a stream in
 * order: the caller pushes pieces (each with the function that takes it),
 * the pipe copies them into a ring of buffers, and its thread calls the
 * functions in the order the pieces were pushed. Zip entries use it to
 * hash and write on one core while the other inflates or reads
 * (docs/split.md, "Wheels").
 *
 *   kp_pipe* p = kp_pipe_start();    NULL: do the work inline instead
 *   kp_pipe_push(p, fn, user, data, size) ...
 *   err = kp_pipe_finish(p);         waits for every piece, frees p
 *
 * The first function to fail stops the pipe: later pieces are dropped and
 * every push and the finish return that error, with errno set as that
 * function left it on its thread. Functions run on the pipe's
 * thread only, one at a time; what they touch is the caller's again after
 * kp_pipe_finish().
 */
#ifndef KPACK_PIPE_H
#define KPACK_PIPE_H

#include <stddef.h>

#include "rocm_kpack/kpack.h"

typedef kpack_error_t (*kp_pipe_fn)(void* user, const void* data, size_t size);

typedef struct kp_pipe kp_pipe;

/* Streams shorter than this are not worth a thread. */
#define KP_PIPE_MIN_SIZE ((size_t)1 << 20)

/* A pipe with its thread running, or NULL when no thread or memory could
 * be had (the caller then calls the functions itself). */
kp_pipe* kp_pipe_start(void);

/* Queues fn(user, copy of data, size), waiting while the ring is full.
 * Returns the error of a function that failed before, else KPACK_SUCCESS. */
kpack_error_t kp_pipe_push(kp_pipe* p, kp_pipe_fn fn, void* user,
                           const void* data, size_t size);

/* Waits until every queued function has run, stops the thread and frees
 * the pipe. Returns the first error a function returned. NULL is a no-op. */
kpack_error_t kp_pipe_finish(kp_pipe* p);

/* kp_pipe_push() when `p` is not NULL, else fn(user, data, size) here. */
kpack_error_t kp_pipe_call(kp_pipe* p, kp_pipe_fn fn, void* user,
                           const void* data, size_t size);

#endif /* KPACK_PIPE_H */
