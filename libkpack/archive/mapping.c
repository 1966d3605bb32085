/* SPDX-License-Identifier: MIT
 *
 * Kernel reads from a read-only shared mapping of the archive, and the
 * guard that keeps a file shrinking under the reader from killing the
 * process. Every access to a mapping runs inside kp_map_guarded(): a
 * SIGBUS on a page of that mapping (the file was cut below it) jumps back
 * out and the read returns IO_ERROR; a cut within the page the file now
 * ends in, which reads as zeros rather than faulting, is caught by
 * reading the file's last nonzero byte again after each access. Which
 * archives are mapped, and which reads use the mapping, is decided here
 * (docs/design.md, "Reads from a mapping").
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <ucontext.h>

#include "archive/archive.h"

/* Reads of a stored kernel up to this size come from the mapping (when
 * ROCM_KPACK_MMAP leaves the choice to the library). Measured on a VM
 * where each first touch of a mapped page costs about 5 us and a system
 * call 2.5 us, a kernel of more than a page reads faster through pread the
 * first time, and the pages of large kernels read once would only swell
 * the process's resident size: the mapping serves kernels that share
 * pages, and reads again of the same handle. */
#define KP_MAP_READ_MAX (4u << 10)

/* Mappings the process keeps at most, and the address space they may
 * take: beyond either, archives are read with pread. */
#define KP_MAP_MAX_COUNT 8192
#define KP_MAP_DEFAULT_BUDGET (1ull << 44)

/* The thread's access in progress: where to jump back to and the mapping
 * it reads. Set and cleared by kp_map_guarded() only, read by the
 * handler. */
typedef struct kp_map_guard {
  sigjmp_buf env;
  const uint8_t* start;
  const uint8_t* end;
  sigset_t mask; /* the thread's signal mask when the fault came */
} kp_map_guard;

static _Thread_local kp_map_guard* volatile kp_guard;

/* The dispositions the handler was installed over, the latest at
 * kp_previous_at: every SIGBUS that is not a guarded access is handed on
 * to it. A new one is written to the next slot before it is published, so
 * a handler that has read the index reads a whole disposition (slots are
 * reused only after KP_PREVIOUS_SLOTS more installs). */
#define KP_PREVIOUS_SLOTS 64
static struct sigaction kp_previous[KP_PREVIOUS_SLOTS];
static atomic_uint kp_previous_at;
static pthread_mutex_t kp_install_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t kp_budget_once = PTHREAD_ONCE_INIT;
static uint64_t kp_budget;
static atomic_uint_fast64_t kp_mapped_bytes;
static atomic_uint kp_mapped_count;

static void on_sigbus(int sig, siginfo_t* info, void* context) {
  kp_map_guard* g = kp_guard;
  const uint8_t* at = info->si_addr;
  if (g != NULL && at >= g->start && at < g->end) {
    kp_guard = NULL;
    g->mask = ((const ucontext_t*)context)->uc_sigmask;
    siglongjmp(g->env, 1);
  }
  /* Not a guarded access: as if this handler were not installed. A fault
   * with the default (or an ignored) disposition comes back when this
   * returns and ends the process; one sent by kill() is raised again. */
  const struct sigaction* previous =
      &kp_previous[atomic_load(&kp_previous_at) % KP_PREVIOUS_SLOTS];
  if (previous->sa_flags & SA_SIGINFO) {
    previous->sa_sigaction(sig, info, context);
  } else if (previous->sa_handler == SIG_DFL ||
             (previous->sa_handler == SIG_IGN && info->si_code > 0)) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    if (info->si_code <= 0)
      raise(sig);
  } else if (previous->sa_handler != SIG_IGN) {
    previous->sa_handler(sig);
  }
}

static void find_budget(void) {
  struct rlimit as;
  kp_budget = KP_MAP_DEFAULT_BUDGET;
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
      as.rlim_cur / 4 < kp_budget)
    kp_budget = as.rlim_cur / 4;
}

/* Makes sure the handler is the process's SIGBUS disposition, installing
 * it over whatever is there (a program, or a test framework, may have put
 * its own over it since): false if it cannot be. */
static bool handler_in_place(void) {
  struct sigaction now, ours;
  if (sigaction(SIGBUS, NULL, &now) != 0)
    return false;
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus)
    return true;
  memset(&ours, 0, sizeof(ours));
  ours.sa_sigaction = on_sigbus;
  /* SA_NODEFER: the jump out leaves the signal mask as it was, so
   * sigsetjmp() need not save it (no system call per read). */
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  pthread_mutex_lock(&kp_install_lock);
  unsigned next = atomic_load(&kp_previous_at) + 1;
  struct sigaction* slot = &kp_previous[next % KP_PREVIOUS_SLOTS];
  bool installed = sigaction(SIGBUS, NULL, slot) == 0;
  if (installed &&
      !((slot->sa_flags & SA_SIGINFO) && slot->sa_sigaction == on_sigbus)) {
    atomic_store(&kp_previous_at, next);
    installed = sigaction(SIGBUS, &ours, NULL) == 0;
  }
  pthread_mutex_unlock(&kp_install_lock);
  return installed;
}

/* ROCM_KPACK_MMAP: unset or empty, the library decides; "0" never maps;
 * anything else maps every archive it can and reads every kernel from the
 * mapping (for tests and measurements). */
static kp_map_mode map_mode(void) {
  const char* v = getenv("ROCM_KPACK_MMAP");
  if (v == NULL || v[0] == '\0')
    return KP_MAP_SMALL;
  return v[0] == '0' ? KP_MAP_NEVER : KP_MAP_ALL;
}

void kp_map_open(kpack_archive_t a, const uint8_t* toc, size_t toc_size) {
  a->map_mode = map_mode();
  if (a->map_mode == KP_MAP_NEVER || sizeof(void*) < 8 ||
      a->file_size > SIZE_MAX)
    return;
  /* The last nonzero byte: the TOC (a map, so its first byte is not 0)
   * ends the file, after every kernel. */
  size_t last = toc_size;
  while (last > 0 && toc[last - 1] == 0)
    last--;
  pthread_once(&kp_budget_once, find_budget);
  if (last == 0 || !handler_in_place())
    return;
  size_t size = (size_t)a->file_size;
  if (atomic_fetch_add(&kp_mapped_count, 1) >= KP_MAP_MAX_COUNT) {
    atomic_fetch_sub(&kp_mapped_count, 1);
    return;
  }
  uint64_t before = atomic_fetch_add(&kp_mapped_bytes, size);
  void* map = MAP_FAILED;
  if (size <= kp_budget && before <= kp_budget - size)
    map = mmap(NULL, size, PROT_READ, MAP_SHARED, a->fd, 0);
  if (map == MAP_FAILED) {
    atomic_fetch_sub(&kp_mapped_count, 1);
    atomic_fetch_sub(&kp_mapped_bytes, size);
    return;
  }
  a->map = map;
  a->map_size = size;
  a->sentinel = (size_t)(a->file_size - toc_size) + last - 1;
  a->sentinel_value = toc[last - 1];
}

/* Archives this small are read whole at open, in the one read that also
 * gets the header and the TOC (their TOC is most of them), and kept:
 * their kernels are then one memcpy each, with no system call and no
 * page fault. */
#define KP_WHOLE_MAX (64u << 10)

bool kp_map_reads_whole(uint64_t file_size) {
  return file_size <= KP_WHOLE_MAX && map_mode() == KP_MAP_SMALL;
}

void kp_map_keep(kpack_archive_t a, uint8_t* whole) {
  a->map_mode = KP_MAP_ALL;
  a->map = whole;
  a->map_size = (size_t)a->file_size;
  a->map_is_copy = true;
}

void kp_map_close(kpack_archive_t a) {
  if (a->map == NULL)
    return;
  if (a->map_is_copy) {
    free((void*)a->map);
    a->map = NULL;
    return;
  }
  munmap((void*)a->map, a->map_size);
  atomic_fetch_sub(&kp_mapped_count, 1);
  atomic_fetch_sub(&kp_mapped_bytes, a->map_size);
  a->map = NULL;
}

/* Whether the calling thread takes SIGBUS: 1 yes, -1 no (it blocks it),
 * 0 not asked yet. */
static _Thread_local signed char kp_thread_takes_sigbus;

bool kp_map_usable(kpack_archive_t a) {
  if (a->map == NULL)
    return false;
  if (a->map_is_copy)
    return true;
  if (kp_thread_takes_sigbus == 0) {
    sigset_t blocked;
    kp_thread_takes_sigbus = pthread_sigmask(SIG_BLOCK, NULL, &blocked) == 0 &&
                                     !sigismember(&blocked, SIGBUS)
                                 ? 1
                                 : -1;
  }
  return kp_thread_takes_sigbus > 0;
}

bool kp_map_serves(kpack_archive_t a, uint64_t stored) {
  return kp_map_usable(a) &&
         (a->map_mode == KP_MAP_ALL || stored <= KP_MAP_READ_MAX);
}

kpack_error_t kp_map_guarded(kpack_archive_t a, kp_map_fn* fn, void* context) {
  kp_map_guard g;
  /* A copy never changes; a thread that may not read the mapping reads
   * with pread. */
  if (a->map_is_copy || !kp_map_usable(a))
    return fn(a, context);
  g.start = a->map;
  g.end = a->map + a->map_size;
  if (sigsetjmp(g.env, 0) != 0) {
    /* The mask the fault interrupted, back: SA_NODEFER left SIGBUS
     * unblocked through the jump, but a handler that wraps ours (a
     * sanitizer's) may have been installed without it, and the thread
     * would then die of the next fault. */
    pthread_sigmask(SIG_SETMASK, &g.mask, NULL);
    errno = 0; /* the file shrank: no system error to show */
    return KPACK_ERROR_IO_ERROR;
  }
  kp_guard = &g;
  atomic_signal_fence(memory_order_seq_cst);
  kpack_error_t err = fn(a, context);
  /* After the access: a file cut below the sentinel reads it as 0, or
   * faults on it. */
  if (((const volatile uint8_t*)a->map)[a->sentinel] != a->sentinel_value) {
    errno = 0;
    err = KPACK_ERROR_IO_ERROR;
  }
  atomic_signal_fence(memory_order_seq_cst);
  kp_guard = NULL;
  return err;
}
