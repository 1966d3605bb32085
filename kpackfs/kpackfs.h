/* SPDX-License-Identifier: MIT
 *
 * What every kpackfs module shares: the FUSE API version, the version
 * string, the growing array, the sort and the worker start. Each module has
 * its own header saying which state it owns: sources.h (SOURCE arguments to
 * archive paths), tree.h (the inode tree, immutable once built), render.h
 * (the `kernels` and `metadata.json` texts and their cache), pool.h (the
 * workers for requests that wait), ops.h (the filesystem: everything the
 * FUSE request handlers share and change). main.c parses options and runs
 * the session: one thread reading requests, one taking the signals.
 */
#ifndef KPACKFS_H
#define KPACKFS_H

#define FUSE_USE_VERSION 35

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "rocm_kpack/kpack_ext.h"

#define KPACKFS_VERSION KPACK_VERSION_STRING

/* Makes room for element `count` of an array of `*cap` elements of `size`
 * bytes, the one way kpackfs grows an array (as kp_grow does inside the
 * library): returns `items` itself while count < *cap, else the array moved
 * to twice its capacity (`first` elements when it has none) with *cap
 * updated. NULL when that allocation fails or its size would overflow:
 * `items` and *cap are then unchanged and still the caller's. */
static inline void* kfs_grow(void* items, size_t count, size_t* cap,
                             size_t size, size_t first) {
  if (count < *cap)
    return items;
  size_t next = *cap ? *cap : first;
  if (*cap > SIZE_MAX / 2 || size == 0 || next > SIZE_MAX / 2 / size)
    return NULL;
  if (*cap)
    next = *cap * 2;
  void* grown = realloc(items, next * size);
  if (grown != NULL)
    *cap = next;
  return grown;
}

/* Sorts `count` elements of `size` bytes with qsort_r, unless they are in
 * strictly ascending order already, as the tree's names almost always are
 * (archives list them sorted): a check of n - 1 pairs instead of n log n
 * compares, the one way kpackfs sorts. */
static inline void kfs_sort(void* base, size_t count, size_t size,
                            int (*compare)(const void*, const void*, void*),
                            void* context) {
  const char* p = base;
  for (size_t i = 1; i < count; i++) {
    if (compare(p + (i - 1) * size, p + i * size, context) >= 0) {
      qsort_r(base, count, size, compare, context);
      return;
    }
  }
}

/* pthread_create() of a worker that takes no signal sent to the process:
 * the termination signals are the signal thread's to take (main.c,
 * kfs_stop), and the SIGUSR2 that interrupts a read is meant for the
 * request thread. Faults stay unblocked: libkpack turns a SIGBUS from an
 * archive cut under its mapping into an EIO (docs/design.md, "Reads from
 * a mapping"), where a blocked one would end the daemon. 0 or an errno. */
static inline int kfs_start_worker(pthread_t* thread, void* (*run)(void*),
                                   void* arg) {
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(thread, NULL, run, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* CLOCK_MONOTONIC in nanoseconds: the mount's phases in .kpackfs/stats,
 * comparable with any other process's clock on the machine. */
static inline uint64_t kfs_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* KPACKFS_H */
