/* SPDX-License-Identifier: MIT
 *
 * Threads libkpack starts for its own work (the pipe of a large zip
 * entry, the wheels of a split packed side by side).
 */
#ifndef KPACK_THREAD_H
#define KPACK_THREAD_H

#include <pthread.h>
#include <signal.h>

/* pthread_create() of a thread that takes no signal sent to the process:
 * those stay the application's threads' to take. Faults stay unblocked:
 * a blocked SIGBUS or SIGSEGV would end the process without its handler.
 * 0 or an errno. */
static inline int kp_thread_start(pthread_t* thread, void* (*run)(void*),
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

#endif /* KPACK_THREAD_H */
