/* SPDX-License-Identifier: MIT
 *
 * Reads from a mapping of the archive (libkpack/archive/mapping.c,
 * docs/design.md "Reads from a mapping"): which archives and reads
 * ROCM_KPACK_MMAP and the size rule give the mapping, and an archive cut,
 * replaced or rewritten while it is open, which gives an error or the
 * bytes the file now holds, never a crash, whether the reads come from the
 * mapping or through pread. The SIGBUS handler's manners with handlers of
 * the program's own run in a fresh process (this binary, re-executed).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "archive/archive.h"
#include "support.h"

enum { KERNELS = 8, KERNEL_SIZE = 40000 };

static const kpack_compression_scheme_t schemes[] = {
    KPACK_COMPRESSION_NOOP, KPACK_COMPRESSION_ZSTD_PER_KERNEL};

/* ROCM_KPACK_MMAP values: never, the library's rule, every read. */
static const char* const modes[] = {"0", "", "1"};

/* ---- fixtures ------------------------------------------------------------ */

static char names[KERNELS][16];

/* KERNELS kernels of KERNEL_SIZE bytes, each spanning several pages; the
 * bytes depend on `seed`. */
static void write_fixture(const char* path, kpack_compression_scheme_t scheme,
                          uint32_t seed) {
  kt_kernel k[KERNELS];
  for (int i = 0; i < KERNELS; i++) {
    snprintf(names[i], sizeof(names[i]), "lib/k%d.so#0", i);
    k[i] = (kt_kernel){names[i], "gfx942",
                       kt_pattern(KERNEL_SIZE, seed * 100 + (uint32_t)i),
                       KERNEL_SIZE};
  }
  kt_write_archive(path, scheme, NULL, 0, k, KERNELS);
  for (int i = 0; i < KERNELS; i++)
    free((void*)k[i].data);
}

/* kpack_open() with ROCM_KPACK_MMAP set to `mode` for that call. */
static kpack_archive_t open_in_mode(const char* path, const char* mode) {
  const char* before = getenv("ROCM_KPACK_MMAP");
  char* saved = before != NULL ? strdup(before) : NULL;
  kpack_archive_t a = NULL;
  setenv("ROCM_KPACK_MMAP", mode, 1);
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  if (saved != NULL)
    setenv("ROCM_KPACK_MMAP", saved, 1);
  else
    unsetenv("ROCM_KPACK_MMAP");
  free(saved);
  /* Every mode but "0" maps an archive this small. */
  assert_int_equal(a->map != NULL, mode[0] != '0');
  return a;
}

/* Kernel i read three ways (whole, into a buffer, its first half): the
 * status of the first two, which agree. The half may also read where the
 * whole fails, since a cut may leave it whole. Bytes read are checked
 * against seed. */
static kpack_error_t read_three_ways(kpack_archive_t a, int i, uint32_t seed) {
  void* want = kt_pattern(KERNEL_SIZE, seed * 100 + (uint32_t)i);
  void* whole = NULL;
  size_t n = 0;
  kpack_error_t err = kpack_get_kernel(a, names[i], "gfx942", &whole, &n);
  if (err == KPACK_SUCCESS) {
    assert_int_equal(n, KERNEL_SIZE);
    assert_memory_equal(whole, want, KERNEL_SIZE);
  } else {
    assert_null(whole);
  }
  kpack_free_kernel(whole);
  uint8_t* buffer = malloc(KERNEL_SIZE);
  assert_int_equal(
      kpack_read_kernel(a, names[i], "gfx942", buffer, KERNEL_SIZE, &n), err);
  kpack_error_t half = kpack_read_kernel_prefix(a, names[i], "gfx942", buffer,
                                                KERNEL_SIZE / 2, &n);
  assert_true(half == err || half == KPACK_SUCCESS);
  if (half == KPACK_SUCCESS)
    assert_memory_equal(buffer, want, KERNEL_SIZE / 2);
  free(buffer);
  free(want);
  return err;
}

/* ---- which reads come from the mapping ----------------------------------- */

static void test_mode_decides_which_reads_use_the_mapping(void** state) {
  (void)state;
  char* path = kt_in_tmp("modes.kpack");
  write_fixture(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 1);
  for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
    kpack_archive_t a = open_in_mode(path, modes[m]);
    bool mapped = modes[m][0] != '0';
    bool all = modes[m][0] == '1';
    /* Small kernels from the mapping whenever there is one; large ones
     * only when every read is asked to. */
    assert_int_equal(kp_map_serves(a, 4096), mapped);
    assert_int_equal(kp_map_serves(a, 4u << 10), mapped);
    assert_int_equal(kp_map_serves(a, (4u << 10) + 1), all);
    for (int i = 0; i < KERNELS; i++)
      assert_int_equal(read_three_ways(a, i, 1), KPACK_SUCCESS);
    kpack_close(a);
  }
  free(path);
}

/* An archive of 64 KiB or less is read whole at open, unless a mode is
 * forced: its reads copy from there, and a later cut is not seen (as for
 * an archive replaced by rename). */
static void test_a_small_archive_is_read_whole_at_open(void** state) {
  (void)state;
  char* path = kt_in_tmp("small.kpack");
  const char* name = "lib/small.so#0";
  for (size_t s = 0; s < 2; s++) {
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
      void* bytes = kt_pattern(3000, 7);
      kt_kernel k = {name, "gfx942", bytes, 3000};
      kt_write_archive(path, schemes[s], NULL, 0, &k, 1);
      const char* before = getenv("ROCM_KPACK_MMAP");
      char* saved = before != NULL ? strdup(before) : NULL;
      kpack_archive_t a = NULL;
      setenv("ROCM_KPACK_MMAP", modes[m], 1);
      assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
      if (saved != NULL)
        setenv("ROCM_KPACK_MMAP", saved, 1);
      else
        unsetenv("ROCM_KPACK_MMAP");
      free(saved);
      bool copy = modes[m][0] == '\0';
      assert_int_equal(a->map_is_copy, copy);
      assert_int_equal(truncate(path, 0), 0);
      void* got = NULL;
      size_t n = 0;
      kpack_error_t err = kpack_get_kernel(a, name, "gfx942", &got, &n);
      if (copy) {
        assert_int_equal(err, KPACK_SUCCESS);
        assert_int_equal(n, 3000);
        assert_memory_equal(got, bytes, 3000);
      } else {
        assert_int_equal(err, KPACK_ERROR_IO_ERROR);
      }
      kpack_free_kernel(got);
      kpack_close(a);
      free(bytes);
    }
  }
  free(path);
}

/* Small frames read in file order come through the reader's window, and
 * so do those after a jump from such a read (a reader going through the
 * kernels by name: k1, k10, k100, k101, ... in an archive written k0, k1,
 * k2, ...). Every order, in every mode, with two archives read by turns
 * on one thread, gives each kernel's own bytes. */
static void test_small_frames_read_right_in_any_order(void** state) {
  (void)state;
  enum { N = 300, SIZE = 2000 };
  static char small[N][24];
  kt_kernel k[N];
  for (int i = 0; i < N; i++) {
    snprintf(small[i], sizeof(small[i]), "lib/k%d.so#0", i);
    k[i] = (kt_kernel){small[i], "gfx942", kt_pattern(SIZE, (uint32_t)i), SIZE};
  }
  char* path[2] = {kt_in_tmp("order-a.kpack"), kt_in_tmp("order-b.kpack")};
  kt_write_archive(path[0], KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, N);
  kt_write_archive(path[1], KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, N);
  int order[4][N];
  for (int i = 0; i < N; i++) {
    order[0][i] = i;                     /* file order */
    order[1][i] = N - 1 - i;             /* backwards */
    order[2][i] = (i * 7) % N;           /* a stride */
    order[3][i] = i % 2 ? i - 1 : i + 1; /* pairs swapped */
  }
  for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
    kpack_archive_t a[2] = {open_in_mode(path[0], modes[m]),
                            open_in_mode(path[1], modes[m])};
    size_t binaries;
    assert_int_equal(kpack_get_binary_count(a[0], &binaries), KPACK_SUCCESS);
    for (int o = 0; o < 5; o++) {
      for (size_t i = 0; i < N; i++) {
        /* Order 4 is the TOC's: by name. */
        const char* name;
        int at;
        if (o == 4) {
          assert_int_equal(kpack_get_binary(a[0], i, &name), KPACK_SUCCESS);
          assert_int_equal(sscanf(name, "lib/k%d.so", &at), 1);
        } else {
          at = order[o][i];
        }
        void* got = NULL;
        size_t n = 0;
        assert_int_equal(
            kpack_get_kernel(a[i % 7 == 3], small[at], "gfx942", &got, &n),
            KPACK_SUCCESS);
        assert_int_equal(n, SIZE);
        assert_memory_equal(got, k[at].data, SIZE);
        kpack_free_kernel(got);
      }
    }
    kpack_close(a[0]);
    kpack_close(a[1]);
  }
  for (int i = 0; i < N; i++)
    free((void*)k[i].data);
  free(path[0]);
  free(path[1]);
}

/* ---- an archive changed while open --------------------------------------- */

/* Where kernel i's stored bytes end. */
static uint64_t stored_end(kpack_archive_t a, int i) {
  kpack_kernel_info_t info;
  assert_int_equal(kpack_get_kernel_info(a, names[i], "gfx942", &info),
                   KPACK_SUCCESS);
  return info.offset + info.stored_size;
}

/* Cut to the first page: every kernel's pages are past the end of the
 * file, where a mapping faults with SIGBUS. */
static void test_kernels_past_a_cut_are_io_errors(void** state) {
  (void)state;
  char* path = kt_in_tmp("cut.kpack");
  for (size_t s = 0; s < 2; s++) {
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
      write_fixture(path, schemes[s], 1);
      kpack_archive_t a = open_in_mode(path, modes[m]);
      assert_int_equal(truncate(path, 4096), 0);
      for (int i = 0; i < KERNELS; i++)
        assert_int_equal(read_three_ways(a, i, 1), KPACK_ERROR_IO_ERROR);
      kpack_close(a);
    }
  }
  free(path);
}

/* Cut a few bytes before the end of a kernel: the rest of its last page
 * reads as zeros through a mapping instead of faulting, and the read
 * still fails rather than return them. A kernel wholly before the cut
 * reads (pread) or fails too (a mapping knows the file changed, not
 * where). */
static void test_a_cut_inside_a_kernels_last_page_is_an_io_error(void** state) {
  (void)state;
  char* path = kt_in_tmp("cut-in-page.kpack");
  for (size_t s = 0; s < 2; s++) {
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
      write_fixture(path, schemes[s], 1);
      kpack_archive_t a = open_in_mode(path, modes[m]);
      int i = KERNELS - 1;
      uint64_t end = stored_end(a, i);
      if (end % 4096 < 16)
        i--, end = stored_end(a, i);
      assert_true(end % 4096 >= 16); /* the cut and the end share a page */
      assert_int_equal(truncate(path, (off_t)end - 8), 0);
      assert_int_equal(read_three_ways(a, i, 1), KPACK_ERROR_IO_ERROR);
      kpack_error_t before_cut = read_three_ways(a, 0, 1);
      assert_true(before_cut == KPACK_SUCCESS ||
                  (a->map != NULL && before_cut == KPACK_ERROR_IO_ERROR));
      kpack_close(a);
    }
  }
  free(path);
}

/* A new archive renamed over the open one (as `kpack create` and package
 * managers install): the open handle still reads the file it opened. */
static void test_a_replaced_archive_reads_as_opened(void** state) {
  (void)state;
  char* path = kt_in_tmp("replaced.kpack");
  char* next = kt_in_tmp("replaced.kpack.new");
  for (size_t s = 0; s < 2; s++) {
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
      write_fixture(path, schemes[s], 1);
      kpack_archive_t a = open_in_mode(path, modes[m]);
      write_fixture(next, schemes[s], 2);
      assert_int_equal(rename(next, path), 0);
      for (int i = 0; i < KERNELS; i++)
        assert_int_equal(read_three_ways(a, i, 1), KPACK_SUCCESS);
      kpack_close(a);
    }
  }
  free(next);
  free(path);
}

/* Another archive written over the open one in place (as `cp` does: the
 * file cut to nothing, then written again): each read fails or gives the
 * kernel the file now holds at that place. */
static void test_an_archive_rewritten_in_place_fails_or_reads_anew(
    void** state) {
  (void)state;
  char* path = kt_in_tmp("rewritten.kpack");
  char* other = kt_in_tmp("other.kpack");
  for (size_t s = 0; s < 2; s++) {
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
      write_fixture(path, schemes[s], 1);
      write_fixture(other, schemes[s], 2);
      kpack_archive_t a = open_in_mode(path, modes[m]);
      size_t size;
      void* bytes = kt_read_file(other, &size);
      assert_non_null(bytes);
      kt_write_file(path, bytes, size);
      free(bytes);
      for (int i = 0; i < KERNELS; i++) {
        void* got = NULL;
        size_t n = 0;
        kpack_error_t err = kpack_get_kernel(a, names[i], "gfx942", &got, &n);
        if (err == KPACK_SUCCESS) {
          /* The same names and sizes at seed 2: the new kernel. */
          void* want = kt_pattern(KERNEL_SIZE, 200 + (uint32_t)i);
          assert_memory_equal(got, want, KERNEL_SIZE);
          free(want);
        } else {
          assert_true(err == KPACK_ERROR_IO_ERROR ||
                      err == KPACK_ERROR_DECOMPRESSION_FAILED);
        }
        kpack_free_kernel(got);
      }
      kpack_close(a);
    }
  }
  free(other);
  free(path);
}

typedef struct racer {
  kpack_archive_t archive;
  kpack_compression_scheme_t scheme;
  atomic_bool stop;
  int reads, successes;
} racer;

static void* read_until_stopped(void* p) {
  racer* r = p;
  uint8_t* want[KERNELS];
  for (int i = 0; i < KERNELS; i++)
    want[i] = kt_pattern(KERNEL_SIZE, 100 + (uint32_t)i);
  while (!atomic_load(&r->stop)) {
    int i = r->reads++ % KERNELS;
    void* got = NULL;
    size_t n;
    kpack_error_t err =
        kpack_get_kernel(r->archive, names[i], "gfx942", &got, &n);
    if (err == KPACK_SUCCESS) {
      r->successes++;
      /* Frames carry a checksum: a zstd read that succeeds is right. A raw
       * blob read across a cut and a rewrite may hold zeros, as a pread
       * would. */
      if (r->scheme == KPACK_COMPRESSION_ZSTD_PER_KERNEL &&
          memcmp(got, want[i], KERNEL_SIZE) != 0)
        r->successes = -1000000;
    } else if (err != KPACK_ERROR_IO_ERROR &&
               err != KPACK_ERROR_DECOMPRESSION_FAILED) {
      r->successes = -1000000;
    }
    kpack_free_kernel(got);
    /* valgrind runs one thread at a time and hands its lock back to a
     * thread that asks at once: the writer would starve. */
    sched_yield();
  }
  for (int i = 0; i < KERNELS; i++)
    free(want[i]);
  return NULL;
}

/* Reads on two threads while the file is cut and written back, over and
 * over: every read gives the kernel or an error, and the process lives. */
static void test_reads_racing_cuts_and_rewrites_never_crash(void** state) {
  (void)state;
  char* path = kt_in_tmp("race.kpack");
  for (size_t s = 0; s < 2; s++) {
    write_fixture(path, schemes[s], 1);
    size_t size;
    uint8_t* bytes = kt_read_file(path, &size);
    assert_non_null(bytes);
    kpack_archive_t a = open_in_mode(path, "1");
    racer r[2] = {{a, schemes[s], false, 0, 0}, {a, schemes[s], false, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
      assert_int_equal(pthread_create(&t[i], NULL, read_until_stopped, &r[i]),
                       0);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    for (int round = 0; round < 200; round++) {
      assert_int_equal(ftruncate(fd, round % 2 ? 4096 : 100), 0);
      assert_int_equal(pwrite(fd, bytes, size, 0), (ssize_t)size);
    }
    close(fd);
    for (int i = 0; i < 2; i++) {
      atomic_store(&r[i].stop, true);
      pthread_join(t[i], NULL);
      assert_true(r[i].successes >= 0);
    }
    /* Whole again: every kernel reads. */
    for (int i = 0; i < KERNELS; i++)
      assert_int_equal(read_three_ways(a, i, 1), KPACK_SUCCESS);
    kpack_close(a);
    free(bytes);
  }
  free(path);
}

typedef struct blocked_reader {
  kpack_archive_t archive;
  kpack_error_t past_cut;
} blocked_reader;

static void* read_with_signals_blocked(void* p) {
  blocked_reader* b = p;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  void* d = NULL;
  size_t n;
  b->past_cut =
      kpack_get_kernel(b->archive, names[KERNELS - 1], "gfx942", &d, &n);
  kpack_free_kernel(d);
  return NULL;
}

/* A thread that blocks SIGBUS (as daemons' workers block every signal)
 * would be ended by a fault whatever the handler: its reads use pread. */
static void test_a_thread_blocking_sigbus_reads_with_pread(void** state) {
  (void)state;
  char* path = kt_in_tmp("blocked.kpack");
  for (size_t s = 0; s < 2; s++) {
    write_fixture(path, schemes[s], 1);
    kpack_archive_t a = open_in_mode(path, "1");
    assert_int_equal(truncate(path, 4096), 0);
    blocked_reader b = {a, KPACK_SUCCESS};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_with_signals_blocked, &b),
                     0);
    pthread_join(t, NULL);
    assert_int_equal(b.past_cut, KPACK_ERROR_IO_ERROR);
    kpack_close(a);
  }
  free(path);
}

/* ---- the handler and the program's own ------------------------------------
 * Run in a fresh process (this binary with a scenario argument): the
 * handler is installed once per process, by the first archive mapped. */

static sigjmp_buf program_jump;
static volatile sig_atomic_t program_handler_calls;

static void program_handler(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  (void)context;
  program_handler_calls++;
  siglongjmp(program_jump, 1);
}

static void install_program_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = program_handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, NULL) != 0)
    exit(10);
}

/* Touches a page of a mapping of the program's own past the end of its
 * file: 0 when the program's handler took the SIGBUS. */
static int fault_outside_kpack(const char* dir) {
  char* path = kt_path(dir, "own.bin");
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 8192) != 0)
    return 11;
  volatile uint8_t* own = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
  if (own == MAP_FAILED || ftruncate(fd, 0) != 0)
    return 12;
  int calls = program_handler_calls;
  if (sigsetjmp(program_jump, 0) == 0)
    (void)own[4096];
  munmap((void*)own, 8192);
  close(fd);
  free(path);
  return program_handler_calls == calls + 1 ? 0 : 13;
}

/* The program's handler installed first: kpack's hands it every SIGBUS
 * that is not a guarded read, and a guarded read never reaches it. */
static int scenario_program_handler_first(const char* dir) {
  char* path = kt_path(dir, "first.kpack");
  install_program_handler();
  write_fixture(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 1);
  setenv("ROCM_KPACK_MMAP", "1", 1);
  kpack_archive_t a;
  if (kpack_open(path, &a) != KPACK_SUCCESS || a->map == NULL)
    return 20;
  int err = fault_outside_kpack(dir);
  if (err != 0)
    return err;
  if (truncate(path, 4096) != 0)
    return 21;
  void* d = NULL;
  size_t n;
  if (kpack_get_kernel(a, names[KERNELS - 1], "gfx942", &d, &n) !=
          KPACK_ERROR_IO_ERROR ||
      program_handler_calls != 1)
    return 22;
  kpack_close(a);
  free(path);
  return 0;
}

/* The program's handler installed over kpack's without handing it on (a
 * test framework restoring what it found, say): the next archive opened
 * puts kpack's back on top of it, and the program's still gets the SIGBUS
 * of its own mapping. */
static int scenario_program_handler_after(const char* dir) {
  char* path = kt_path(dir, "after.kpack");
  write_fixture(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 1);
  setenv("ROCM_KPACK_MMAP", "1", 1);
  kpack_archive_t a, b;
  if (kpack_open(path, &a) != KPACK_SUCCESS || a->map == NULL)
    return 30;
  install_program_handler();
  if (kpack_open(path, &b) != KPACK_SUCCESS || b->map == NULL)
    return 31;
  int err = fault_outside_kpack(dir);
  if (err != 0)
    return err;
  if (truncate(path, 4096) != 0)
    return 32;
  void* d = NULL;
  size_t n;
  if (kpack_get_kernel(b, names[KERNELS - 1], "gfx942", &d, &n) !=
          KPACK_ERROR_IO_ERROR ||
      kpack_get_kernel(a, names[KERNELS - 1], "gfx942", &d, &n) !=
          KPACK_ERROR_IO_ERROR ||
      program_handler_calls != 1)
    return 33;
  kpack_close(b);
  kpack_close(a);
  free(path);
  return 0;
}

/* kpack's handler wrapped by one installed without SA_NODEFER, which
 * calls it (as ThreadSanitizer's does): the kernel blocks SIGBUS while
 * the wrapper runs, kpack's jumps out of both, and the thread must not
 * keep SIGBUS blocked, or the next guarded read's fault would end the
 * process. */
static struct sigaction kpack_disposition;

static void wrapping_handler(int sig, siginfo_t* info, void* context) {
  kpack_disposition.sa_sigaction(sig, info, context);
}

static int scenario_wrapped_without_nodefer(const char* dir) {
  char* path = kt_path(dir, "wrapped.kpack");
  write_fixture(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 1);
  setenv("ROCM_KPACK_MMAP", "1", 1);
  kpack_archive_t a;
  if (kpack_open(path, &a) != KPACK_SUCCESS || a->map == NULL)
    return 40;
  struct sigaction wrap;
  memset(&wrap, 0, sizeof(wrap));
  wrap.sa_sigaction = wrapping_handler;
  wrap.sa_flags = SA_SIGINFO;
  sigemptyset(&wrap.sa_mask);
  if (sigaction(SIGBUS, NULL, &kpack_disposition) != 0 ||
      !(kpack_disposition.sa_flags & SA_SIGINFO) ||
      sigaction(SIGBUS, &wrap, NULL) != 0)
    return 41;
  if (truncate(path, 4096) != 0)
    return 42;
  for (int i = 0; i < KERNELS; i++) {
    void* d = NULL;
    size_t n;
    if (kpack_get_kernel(a, names[i], "gfx942", &d, &n) != KPACK_ERROR_IO_ERROR)
      return 43;
  }
  sigset_t now;
  if (pthread_sigmask(SIG_BLOCK, NULL, &now) != 0 || sigismember(&now, SIGBUS))
    return 44;
  kpack_close(a);
  free(path);
  return 0;
}

/* The path of this test binary, to run a scenario in a fresh process. */
static char self[4096];

static void run_scenario(const char* name) {
  char* argv[] = {self, (char*)name, kt_tmp, NULL};
  char *out = NULL, *err = NULL;
  int status = kt_run(argv, 120, &out, &err);
  if (status != 0)
    fail_msg("scenario %s exited %d: %s%s", name, status, out, err);
  free(out);
  free(err);
}

static void test_a_sigbus_outside_kpack_reaches_the_programs_handler(
    void** state) {
  (void)state;
  run_scenario("program-handler-first");
}

static void test_a_handler_installed_over_kpacks_is_wrapped_at_the_next_open(
    void** state) {
  (void)state;
  run_scenario("program-handler-after");
}

static void test_a_wrapper_without_nodefer_leaves_sigbus_unblocked(
    void** state) {
  (void)state;
  run_scenario("wrapped-without-nodefer");
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "wrapped-without-nodefer") == 0)
    return scenario_wrapped_without_nodefer(argv[2]);
  if (argc == 3 && strcmp(argv[1], "program-handler-first") == 0)
    return scenario_program_handler_first(argv[2]);
  if (argc == 3 && strcmp(argv[1], "program-handler-after") == 0)
    return scenario_program_handler_after(argv[2]);
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0)
    return 1;
  self[n] = '\0';
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mode_decides_which_reads_use_the_mapping),
      cmocka_unit_test(test_a_small_archive_is_read_whole_at_open),
      cmocka_unit_test(test_small_frames_read_right_in_any_order),
      cmocka_unit_test(test_kernels_past_a_cut_are_io_errors),
      cmocka_unit_test(test_a_cut_inside_a_kernels_last_page_is_an_io_error),
      cmocka_unit_test(test_a_replaced_archive_reads_as_opened),
      cmocka_unit_test(test_an_archive_rewritten_in_place_fails_or_reads_anew),
      cmocka_unit_test(test_reads_racing_cuts_and_rewrites_never_crash),
      cmocka_unit_test(test_a_thread_blocking_sigbus_reads_with_pread),
      cmocka_unit_test(
          test_a_sigbus_outside_kpack_reaches_the_programs_handler),
      cmocka_unit_test(
          test_a_handler_installed_over_kpacks_is_wrapped_at_the_next_open),
      cmocka_unit_test(test_a_wrapper_without_nodefer_leaves_sigbus_unblocked),
  };
  return cmocka_run_group_tests_name("mapping", tests, kt_tmp_setup,
                                     kt_tmp_teardown);
}
