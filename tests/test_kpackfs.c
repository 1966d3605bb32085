/* SPDX-License-Identifier: MIT
 *
 * kpackfs mounted for real (docs/mount.md): build/bin/kpackfs runs with -f in
 * a child process over archives the project's writer made, and every check
 * goes through the kernel's FUSE client. Each mount is torn down by its
 * test's teardown (fusermount3 -u, then SIGKILL and -u -z as a last resort),
 * and a watchdog does the same if a test hangs, so no mount outlives a run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fixture_code_object.h"
#include "fixture_toc.h"
#include "support.h"

/* ---- processes and mounts ------------------------------------------------ */

typedef struct mnt {
  char* dir;
  char* log; /* the daemon's stdout and stderr */
  pid_t pid;
  bool mounted;
} mnt;

#define MAX_MOUNTS 4

/* Every live mount, for the watchdog and the exit handler. */
static mnt* live[MAX_MOUNTS];
static char* tmp;
static bool under_valgrind;

/* Seconds to wait for a mount or an exit; valgrind is some 50x slower. */
static int patience(void) {
  return under_valgrind ? 120 : 20;
}

static int run(char* const argv[], const char* log) {
  pid_t pid = kt_spawn(argv, log);
  return pid > 0 ? kt_wait(pid, patience()) : -1;
}

/* Async-signal-safe teardown of every mount: the daemon is killed and the
 * mount detached lazily. Used by the watchdog and at exit. */
static void emergency_unmount(void) {
  for (int i = 0; i < MAX_MOUNTS; i++) {
    mnt* m = live[i];
    if (m == NULL)
      continue;
    if (m->pid > 0)
      kill(m->pid, SIGKILL);
    pid_t pid = fork();
    if (pid == 0) {
      execlp("fusermount3", "fusermount3", "-u", "-q", "-z", m->dir,
             (char*)NULL);
      _exit(127);
    }
    if (pid > 0)
      waitpid(pid, NULL, 0);
    if (m->pid > 0)
      waitpid(m->pid, NULL, 0);
    live[i] = NULL;
  }
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_kpackfs: watchdog: a test hung; unmounting\n";
  ssize_t ignored = write(2, msg, sizeof(msg) - 1);
  (void)ignored;
  emergency_unmount();
  _exit(1);
}

static void arm_watchdog(void) {
  signal(SIGALRM, on_alarm);
  alarm((unsigned)patience() * 15);
}

static void track(mnt* m) {
  for (int i = 0; i < MAX_MOUNTS; i++) {
    if (live[i] == NULL) {
      live[i] = m;
      return;
    }
  }
  fail_msg("too many mounts");
}

static void untrack(mnt* m) {
  for (int i = 0; i < MAX_MOUNTS; i++)
    if (live[i] == m)
      live[i] = NULL;
}

static char* slurp(const char* path) {
  size_t size;
  char* data = kt_read_file(path, &size);
  return data != NULL ? data : strdup("");
}

/* A mount point and log under tmp. */
static void mnt_init(mnt* m, const char* name) {
  memset(m, 0, sizeof(*m));
  m->dir = kt_path(tmp, name);
  assert_true(asprintf(&m->log, "%s/%s.log", tmp, name) > 0);
  mkdir(m->dir, 0755);
  unlink(m->log);
}

static size_t count_args(const char* const* args) {
  size_t n = 0;
  while (args != NULL && args[n] != NULL)
    n++;
  return n;
}

/* Starts [WRAPPER...] kpackfs -f ARGS... MOUNTPOINT and waits until the
 * mount appears. `wrapper` (a command that runs the rest, e.g. prlimit) and
 * `args` are NULL-terminated; wrapper may be NULL. Fails the test (after
 * cleaning up) if the daemon exits or the mount does not appear. */
static void mnt_start_wrapped(mnt* m, const char* const* wrapper,
                              const char* const* args) {
  char** argv =
      calloc(count_args(wrapper) + count_args(args) + 12, sizeof(*argv));
  size_t n = 0;
  char* kpackfs = kt_program("kpackfs");
  for (size_t i = 0; i < count_args(wrapper); i++)
    argv[n++] = (char*)wrapper[i];
  if (under_valgrind) {
    argv[n++] = "valgrind";
    argv[n++] = "--quiet";
    argv[n++] = "--error-exitcode=99";
    argv[n++] = "--leak-check=full";
    argv[n++] = "--errors-for-leak-kinds=definite,indirect,possible";
  }
  argv[n++] = kpackfs;
  argv[n++] = "-f";
  if (under_valgrind) {
    /* A daemon this slow may leave a second between two READs of one
     * file: its kernel is kept pinned across them, as it would be at full
     * speed, so that counts do not depend on the pace (the test's own
     * release_after, given after, wins). */
    argv[n++] = "-o";
    argv[n++] = "release_after=600";
  }
  for (size_t i = 0; i < count_args(args); i++)
    argv[n++] = (char*)args[i];
  argv[n++] = m->dir;
  argv[n] = NULL;

  m->pid = kt_spawn(argv, m->log);
  free(kpackfs);
  free(argv);
  assert_true(m->pid > 0);
  track(m);
  for (long waited = 0; !kt_is_mountpoint(m->dir); waited += 10) {
    int status;
    if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
      m->pid = 0;
      untrack(m);
      char* log = slurp(m->log);
      fail_msg("kpackfs exited (status %d) before mounting:\n%s", status, log);
    }
    if (waited > patience() * 1000L) {
      char* log = slurp(m->log);
      fail_msg("kpackfs did not mount within %d s:\n%s", patience(), log);
    }
    kt_sleep_ms(10);
  }
  m->mounted = true;
}

static void mnt_start(mnt* m, const char* const* args) {
  mnt_start_wrapped(m, NULL, args);
}

/* Unmounts and reaps the daemon; returns its wait status (-1 if it had to
 * be killed). Safe to call twice and on a mount that never started. */
static int mnt_stop(mnt* m) {
  int status = -1;
  if (m->dir == NULL)
    return status; /* never initialised */
  if (m->pid > 0) {
    if (kt_is_mountpoint(m->dir))
      (void)kt_fusermount(m->dir, false, patience());
    status = kt_wait(m->pid, patience());
    if (status == -1) {
      kill(m->pid, SIGKILL);
      waitpid(m->pid, NULL, 0);
    }
    m->pid = 0;
  }
  if (kt_is_mountpoint(m->dir))
    (void)kt_fusermount(m->dir, true, patience());
  m->mounted = false;
  untrack(m);
  return status;
}

static void mnt_free(mnt* m) {
  mnt_stop(m);
  if (m->dir != NULL)
    rmdir(m->dir);
  free(m->dir);
  free(m->log);
  memset(m, 0, sizeof(*m));
}

/* A clean daemon exits 0 after unmount (valgrind: no errors, no leaks). */
static void mnt_stop_clean(mnt* m) {
  int status = mnt_stop(m);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    char* log = slurp(m->log);
    fail_msg("kpackfs exit status %d:\n%s", status, log);
  }
}

/* ---- fixtures ------------------------------------------------------------ */

static char* path_a;      /* zstd, gfx90a/gfx942 (+gfx90a:xnack-) */
static char* path_b;      /* none, gfx1100; one duplicate of a */
static char* path_dir;    /* dir/sub/.kpack/c.kpack and a stray file */
static char* path_c;      /* the archive inside path_dir */
static char* path_unsafe; /* names that cannot be paths, and "ok#0" */
static char* path_co;     /* AMDGPU code objects: lib/libgemm.so#0 */
static char* path_co_odd; /* one without a note, one that is no code object */
static mnt main_mount;    /* a, b, dir, unsafe */

/* The code objects of path_co, built byte by byte. */
static const fx_co_kernel gemm_gfx90a[] = {
    {"gemm_f32", 128, 96, 64, 16384, 272, 96, 64, 256, 3, 1, 0},
    {"_Z6reducePfi", 24, 18, 0, 0, 0, 16, 32, 1024, 0, 0,
     KPACK_CO_AGPR_COUNT | KPACK_CO_VGPR_SPILL_COUNT |
         KPACK_CO_SGPR_SPILL_COUNT},
};
static const fx_co_kernel gemm_gfx942[] = {
    {"gemm_f16", 256, 102, 128, 65536, 0, 104, 64, 512, 0, 0, 0},
    {"_Z6reducePfi", 20, 16, 0, 0, 0, 16, 64, 1024, 0, 0, 0},
    {"odd\tname\\", 1, 2, 0, 0, 0, 0, 64, 64, 0, 0, 0},
};
static fx_buf co_gfx90a, co_gfx942;

#define UNSAFE_SKIPPED 9

typedef struct expected {
  char* rel; /* binary/arch/kernel.hsaco */
  const char* archive;
  char* binary;
  char* arch;
  void* data;
  size_t size;
  uint64_t sum;
} expected;

static expected* files;
static size_t file_count;

static void write_fixture(const char* path, kpack_compression_scheme_t scheme,
                          const char* const* arches, size_t arch_count,
                          const kt_kernel* k, size_t count) {
  kt_write_archive(path, scheme, arches, arch_count, k, count);
}

/* Kernels of `count` entries with pattern data of the given sizes. */
static kt_kernel* patterned(const kt_kernel* shape, size_t count,
                            uint32_t seed) {
  kt_kernel* k = calloc(count, sizeof(*k));
  for (size_t i = 0; i < count; i++) {
    k[i] = shape[i];
    k[i].data = kt_pattern(shape[i].size, seed + (uint32_t)i);
  }
  return k;
}

static void free_patterned(kt_kernel* k, size_t count) {
  for (size_t i = 0; i < count; i++)
    free((void*)k[i].data);
  free(k);
}

static bool is_unsafe_source(const char* archive) {
  return strcmp(archive, path_unsafe) == 0;
}

static bool listed(const char* rel) {
  for (size_t i = 0; i < file_count; i++)
    if (strcmp(files[i].rel, rel) == 0)
      return true;
  return false;
}

/* What the main mount must show: every kernel of every source, first
 * source first, minus the unsafe archive's names except ok#0/gfx90a. */
static void collect_expected(const char* const* sources, size_t count) {
  for (size_t s = 0; s < count; s++) {
    kpack_archive_t a;
    size_t binaries;
    assert_int_equal(kpack_open(sources[s], &a), KPACK_SUCCESS);
    kpack_get_binary_count(a, &binaries);
    for (size_t i = 0; i < binaries; i++) {
      const char* binary;
      size_t arches;
      kpack_get_binary(a, i, &binary);
      kpack_get_binary_arch_count(a, binary, &arches);
      for (size_t j = 0; j < arches; j++) {
        const char* arch;
        char* rel;
        kpack_get_binary_arch(a, binary, j, &arch);
        if (is_unsafe_source(sources[s]) &&
            !(strcmp(binary, "ok#0") == 0 && strcmp(arch, "gfx90a") == 0) &&
            !(strcmp(binary, "tricky#0") == 0))
          continue;
        assert_true(asprintf(&rel, "%s/%s/kernel.hsaco", binary, arch) > 0);
        if (listed(rel)) {
          free(rel);
          continue;
        }
        files = realloc(files, (file_count + 1) * sizeof(*files));
        expected* e = &files[file_count++];
        e->rel = rel;
        e->archive = sources[s];
        e->binary = strdup(binary);
        e->arch = strdup(arch);
        assert_int_equal(kpack_get_kernel(a, binary, arch, &e->data, &e->size),
                         KPACK_SUCCESS);
        e->sum = kt_fnv1a(e->data, e->size, KT_FNV_START);
      }
    }
    kpack_close(a);
  }
}

static int group_setup(void** state) {
  (void)state;
  under_valgrind = getenv("KPACK_VALGRIND") && *getenv("KPACK_VALGRIND");
  atexit(emergency_unmount);
  /* Canonical, so that paths compare equal to what kpackfs reports. */
  char* made = kt_tmpdir();
  tmp = realpath(made, NULL);
  assert_non_null(tmp);
  free(made);
  path_a = kt_path(tmp, "rand_lib_gfx9.kpack");
  path_b = kt_path(tmp, "rand_lib_gfx1100.kpack");
  path_dir = kt_path(tmp, "tree");
  path_unsafe = kt_path(tmp, "unsafe.kpack");

  static const char* arches_a[] = {"gfx90a", "gfx942"};
  const kt_kernel shape_a[] = {
      {"lib/librocrand.so.1#0", "gfx90a", NULL, 200 * 1024},
      {"lib/librocrand.so.1#0", "gfx942", NULL, 150 * 1024},
      {"lib/librocrand.so.1#0", "gfx90a:xnack-", NULL, 9000},
      {"lib/librocblas.so.5#0", "gfx90a", NULL, 1},
      {"lib/librocblas.so.5#0", "gfx942", NULL, 0},
      {"lib/librocblas.so.5#1", "gfx90a", NULL, 4097},
      {"lib/deep/nested/libx.so#2", "gfx942", NULL, 70000},
      {"bin/tool#0", "gfx90a", NULL, 3 << 20},
  };
  kt_kernel* k = patterned(shape_a, 8, 100);
  write_fixture(path_a, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches_a, 2, k, 8);
  free_patterned(k, 8);

  static const char* arches_b[] = {"gfx1100"};
  const kt_kernel shape_b[] = {
      {"lib/librocrand.so.1#0", "gfx1100", NULL, 50000},
      {"lib/librocfft.so.0#0", "gfx1100", NULL, 12345},
      {"lib/librocblas.so.5#1", "gfx90a", NULL, 777}, /* shadowed by a */
  };
  k = patterned(shape_b, 3, 200);
  write_fixture(path_b, KPACK_COMPRESSION_NOOP, arches_b, 1, k, 3);
  free_patterned(k, 3);

  char* sub = kt_path(path_dir, "sub");
  char* hidden = kt_path(sub, ".kpack");
  assert_int_equal(mkdir(path_dir, 0755), 0);
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(mkdir(hidden, 0755), 0);
  path_c = kt_path(hidden, "hip_lib_gfx1201.kpack");
  char* stray = kt_path(path_dir, "README.txt");
  kt_write_file(stray, "not an archive\n", 15);
  const kt_kernel shape_c[] = {{"lib/libhip.so#0", "gfx1201", NULL, 30000}};
  k = patterned(shape_c, 1, 300);
  write_fixture(path_c, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 1);
  free_patterned(k, 1);
  free(sub);
  free(hidden);
  free(stray);

  const kt_kernel shape_u[] = {
      {"../evil#0", "gfx90a", NULL, 100},
      {"/abs#0", "gfx90a", NULL, 100},
      {"a//b#0", "gfx90a", NULL, 100},
      {"a/./b#0", "gfx90a", NULL, 100},
      {"lib/", "gfx90a", NULL, 100},
      {".kpackfs/x#0", "gfx90a", NULL, 100},
      {"ok#0", "gfx/90a", NULL, 100},
      {"ok#0", "..", NULL, 100},
      {"ok#0", "gfx90a", NULL, 100},
      {"tricky#0", "gfx90a", NULL, 100},
      /* would make tricky#0/gfx90a/kernel.hsaco a directory */
      {"tricky#0/gfx90a", "kernel.hsaco", NULL, 100},
  };
  k = patterned(shape_u, 11, 400);
  write_fixture(path_unsafe, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 11);
  free_patterned(k, 11);

  /* Code objects for the inspection files: two in path_co; in path_co_odd
   * one without a metadata note and one that is pattern bytes. */
  path_co = kt_path(tmp, "gemm_lib.kpack");
  path_co_odd = kt_path(tmp, "odd_lib.kpack");
  co_gfx90a =
      fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx90a:xnack-", gemm_gfx90a, 2);
  co_gfx942 =
      fx_code_object_for(FX_MACH_GFX942, KPACK_FEATURE_ANY, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx942", gemm_gfx942, 3);
  static const char* arches_co[] = {"gfx90a:xnack-", "gfx942"};
  const kt_kernel co[] = {
      {"lib/libgemm.so#0", "gfx90a:xnack-", co_gfx90a.data, co_gfx90a.size},
      {"lib/libgemm.so#0", "gfx942", co_gfx942.data, co_gfx942.size},
  };
  write_fixture(path_co, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches_co, 2, co,
                2);
  fx_co_spec bare = {.e_flags =
                         fx_co_flags(FX_MACH_GFX1100, KPACK_FEATURE_UNSUPPORTED,
                                     KPACK_FEATURE_UNSUPPORTED)};
  fx_buf no_note = fx_code_object(&bare);
  void* junk = kt_pattern(5000, 77);
  const kt_kernel odd[] = {
      {"lib/libodd.so#0", "gfx1100", no_note.data, no_note.size},
      {"lib/libodd.so#0", "gfx90a", junk, 5000},
  };
  write_fixture(path_co_odd, KPACK_COMPRESSION_NOOP, NULL, 0, odd, 2);
  fx_free(&no_note);
  free(junk);

  const char* sources[] = {path_a, path_b, path_c, path_unsafe};
  collect_expected(sources, 4);
  /* collect_expected() kept both tricky#0 entries; only the first shows. */
  for (size_t i = 0; i < file_count; i++) {
    if (strcmp(files[i].binary, "tricky#0/gfx90a") == 0) {
      free(files[i].rel);
      free(files[i].binary);
      free(files[i].arch);
      free(files[i].data);
      files[i] = files[--file_count];
      break;
    }
  }

  arm_watchdog();
  mnt_init(&main_mount, "main");
  const char* args[] = {path_a, path_b, path_dir, path_unsafe, NULL};
  mnt_start(&main_mount, args);
  alarm(0);
  return 0;
}

static int group_teardown(void** state) {
  (void)state;
  int status = mnt_stop(&main_mount);
  mnt_free(&main_mount);
  for (size_t i = 0; i < file_count; i++) {
    free(files[i].rel);
    free(files[i].binary);
    free(files[i].arch);
    free(files[i].data);
  }
  free(files);
  kt_rmtree(tmp);
  free(tmp);
  free(path_a);
  free(path_b);
  free(path_c);
  free(path_dir);
  free(path_unsafe);
  free(path_co);
  free(path_co_odd);
  fx_free(&co_gfx90a);
  fx_free(&co_gfx942);
  /* The shared daemon must have exited cleanly too. */
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Per-test mounts, always torn down. */
static mnt scratch[2];

static int setup(void** state) {
  (void)state;
  arm_watchdog();
  return 0;
}

static int teardown(void** state) {
  (void)state;
  mnt_free(&scratch[0]);
  mnt_free(&scratch[1]);
  alarm(0);
  return 0;
}

/* ---- helpers over the mount ---------------------------------------------- */

static char* in_mount(const mnt* m, const char* rel) {
  return kt_path(m->dir, rel);
}

/* Reads a whole file in `chunk`-byte reads; returns NULL with errno set. */
static void* read_path(const char* path, size_t chunk, size_t* size,
                       int flags) {
  int fd = open(path, O_RDONLY | flags);
  if (fd < 0)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t* buf = malloc(cap);
  void* block = NULL;
  if (posix_memalign(&block, 4096, chunk) != 0)
    abort();
  for (;;) {
    ssize_t got = read(fd, block, chunk);
    if (got < 0) {
      int e = errno;
      free(buf);
      free(block);
      close(fd);
      errno = e;
      return NULL;
    }
    if (got == 0)
      break;
    if (n + (size_t)got > cap) {
      cap = (n + (size_t)got) * 2;
      buf = realloc(buf, cap);
    }
    memcpy(buf + n, block, (size_t)got);
    n += (size_t)got;
  }
  free(block);
  close(fd);
  *size = n;
  return buf;
}

/* Reads `path` whole, `chunk` bytes at a time, opened with `flags`: it
 * must hold exactly `want`'s `size` bytes. */
static void assert_reads(const char* path, size_t chunk, int flags,
                         const void* want, size_t want_size) {
  size_t size = 0;
  void* data = read_path(path, chunk, &size, flags);
  if (data == NULL)
    fail_msg("%s: %s", path, strerror(errno));
  assert_int_equal(size, want_size);
  assert_memory_equal(data, want, size);
  free(data);
}

static void assert_file_equals(const mnt* m, const expected* e) {
  char* path = in_mount(m, e->rel);
  assert_reads(path, 65536, 0, e->data, e->size);
  free(path);
}

/* The value of `key` in .kpackfs/stats. */
static uint64_t stat_value(const mnt* m, const char* key) {
  char* path = in_mount(m, ".kpackfs/stats");
  char* text = slurp(path);
  char* line = text;
  size_t klen = strlen(key);
  uint64_t value = UINT64_MAX;
  while (line != NULL && *line) {
    if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
      value = strtoull(line + klen + 1, NULL, 10);
      break;
    }
    line = strchr(line, '\n');
    if (line != NULL)
      line++;
  }
  free(text);
  free(path);
  if (value == UINT64_MAX)
    fail_msg("no '%s' in .kpackfs/stats", key);
  return value;
}

/* close() does not wait for the daemon's RELEASE: wait until every kernel
 * is unpinned before looking at what releasing did to the cache. */
static void await_releases(const mnt* m) {
  for (long waited = 0; stat_value(m, "cache_pinned") != 0; waited += 10) {
    if (waited > patience() * 1000L)
      fail_msg("kernels still pinned after %d s", patience());
    kt_sleep_ms(10);
  }
}

static const expected* find_expected(const char* rel) {
  for (size_t i = 0; i < file_count; i++)
    if (strcmp(files[i].rel, rel) == 0)
      return &files[i];
  fail_msg("fixture has no %s", rel);
  return NULL;
}

/* Names in a directory of the mount, in readdir order, ", "-joined. */
static char* list_dir(const mnt* m, const char* rel) {
  char* path = in_mount(m, rel);
  DIR* d = opendir(path);
  char* out = strdup("");
  assert_non_null(d);
  struct dirent* de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    char* next;
    assert_true(asprintf(&next, "%s%s%s", out, *out ? ", " : "", de->d_name) >
                0);
    free(out);
    out = next;
  }
  closedir(d);
  free(path);
  return out;
}

/* ---- the shared mount
 * --------------------------------------------------------
 */

static size_t walked_files;
static size_t walked_dirs;
static bool walk_ok;

static int count_entry(const char* path, const struct stat* st, int flag,
                       struct FTW* ftw) {
  (void)path;
  (void)ftw;
  if (flag == FTW_F && S_ISREG(st->st_mode))
    walked_files++;
  else if (flag == FTW_D)
    walked_dirs++;
  else
    walk_ok = false;
  return 0;
}

static void test_every_kernel_reads_back_byte_for_byte(void** state) {
  (void)state;
  for (size_t i = 0; i < file_count; i++)
    assert_file_equals(&main_mount, &files[i]);
  /* Nothing else is there: the kernels with their `kernels` and
   * `metadata.json`, plus stats and archives. */
  walked_files = walked_dirs = 0;
  walk_ok = true;
  assert_int_equal(nftw(main_mount.dir, count_entry, 16, FTW_PHYS), 0);
  assert_true(walk_ok);
  assert_int_equal(walked_files, 3 * file_count + 2);
}

static void test_per_arch_archives_merge_under_one_binary_directory(
    void** state) {
  (void)state;
  char* s = list_dir(&main_mount, "lib/librocrand.so.1#0");
  /* Sorted byte-wise; gfx1100 comes from the second archive. */
  assert_string_equal(s, "gfx1100, gfx90a, gfx90a:xnack-, gfx942");
  free(s);
  s = list_dir(&main_mount, "lib");
  assert_string_equal(s,
                      "deep, libhip.so#0, librocblas.so.5#0, "
                      "librocblas.so.5#1, librocfft.so.0#0, librocrand.so.1#0");
  free(s);
  s = list_dir(&main_mount, "");
  assert_string_equal(s, ".kpackfs, bin, lib, ok#0, tricky#0");
  free(s);
  s = list_dir(&main_mount, ".kpackfs");
  assert_string_equal(s, "archives, stats");
  free(s);
  s = list_dir(&main_mount, "lib/deep/nested/libx.so#2/gfx942");
  assert_string_equal(s, "kernel.hsaco, kernels, metadata.json");
  free(s);
}

static void test_modes_owner_times_and_sizes_follow_the_archives(void** state) {
  (void)state;
  for (size_t i = 0; i < file_count; i++) {
    char* path = in_mount(&main_mount, files[i].rel);
    struct stat st, src;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(stat(files[i].archive, &src), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0444);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(st.st_size, files[i].size);
    assert_int_equal(st.st_uid, getuid());
    assert_int_equal(st.st_gid, getgid());
    assert_int_equal(st.st_mtim.tv_sec, src.st_mtim.tv_sec);
    assert_int_equal(st.st_mtim.tv_nsec, src.st_mtim.tv_nsec);
    /* Its arch directory carries the same time, and mode 0555. */
    *strrchr(path, '/') = '\0';
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_int_equal(st.st_nlink, 2);
    free(path);
  }
  struct stat st;
  char* lib = in_mount(&main_mount, "lib");
  assert_int_equal(stat(lib, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0555);
  assert_int_equal(st.st_nlink, 2 + 6); /* six subdirectories */
  free(lib);
}

static void expect_xattr(const char* path, const char* name,
                         const char* value) {
  char buf[4096];
  ssize_t len = getxattr(path, name, NULL, 0); /* size probe */
  assert_int_equal(len, (ssize_t)strlen(value));
  assert_int_equal(getxattr(path, name, buf, sizeof(buf)), len);
  assert_memory_equal(buf, value, (size_t)len);
  if (len > 1) { /* a size of 0 would be a probe */
    errno = 0;
    assert_int_equal(getxattr(path, name, buf, (size_t)len - 1), -1);
    assert_int_equal(errno, ERANGE);
  }
}

static void test_xattrs_name_archive_binary_arch_and_storage(void** state) {
  (void)state;
  const expected* e =
      find_expected("lib/librocrand.so.1#0/gfx90a/kernel.hsaco");
  char* path = in_mount(&main_mount, e->rel);
  char list[1024];
  static const char names[] =
      "user.kpack.archive\0user.kpack.binary\0user.kpack.arch\0"
      "user.kpack.compression\0user.kpack.stored_size\0user.kpack.ordinal\0"
      "user.kpack.target\0user.kpack.kernels";
  ssize_t len = listxattr(path, NULL, 0);
  assert_int_equal(len, (ssize_t)sizeof(names));
  assert_int_equal(listxattr(path, list, sizeof(list)), len);
  assert_memory_equal(list, names, sizeof(names));
  errno = 0;
  assert_int_equal(listxattr(path, list, 10), -1);
  assert_int_equal(errno, ERANGE);

  kpack_archive_t a;
  kpack_kernel_info_t info;
  char number[32];
  assert_int_equal(kpack_open(path_a, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, e->binary, e->arch, &info),
                   KPACK_SUCCESS);
  kpack_close(a);
  expect_xattr(path, "user.kpack.archive", path_a);
  expect_xattr(path, "user.kpack.binary", "lib/librocrand.so.1#0");
  expect_xattr(path, "user.kpack.arch", "gfx90a");
  expect_xattr(path, "user.kpack.compression", "zstd-per-kernel");
  snprintf(number, sizeof(number), "%" PRIu64, info.stored_size);
  expect_xattr(path, "user.kpack.stored_size", number);
  snprintf(number, sizeof(number), "%" PRIu32, info.ordinal);
  expect_xattr(path, "user.kpack.ordinal", number);
  errno = 0;
  assert_int_equal(getxattr(path, "user.kpack.nope", list, sizeof(list)), -1);
  assert_int_equal(errno, ENODATA);
  /* Pattern bytes are no code object: no target to tell. */
  errno = 0;
  assert_int_equal(getxattr(path, "user.kpack.target", list, sizeof(list)), -1);
  assert_int_equal(errno, ENODATA);
  free(path);

  /* The raw archive says "none"; directories carry no attributes. */
  path = in_mount(&main_mount, "lib/librocfft.so.0#0/gfx1100/kernel.hsaco");
  expect_xattr(path, "user.kpack.compression", "none");
  expect_xattr(path, "user.kpack.archive", path_b);
  free(path);
  path = in_mount(&main_mount, "lib/libhip.so#0/gfx1201/kernel.hsaco");
  expect_xattr(path, "user.kpack.archive", path_c);
  free(path);
  path = in_mount(&main_mount, "lib");
  assert_int_equal(listxattr(path, list, sizeof(list)), 0);
  errno = 0;
  assert_int_equal(getxattr(path, "user.kpack.arch", list, sizeof(list)), -1);
  assert_int_equal(errno, ENODATA);
  free(path);
}

static void test_archives_and_stats_describe_the_mount(void** state) {
  (void)state;
  char* path = in_mount(&main_mount, ".kpackfs/archives");
  char* text = slurp(path);
  char* want;
  /* Directory sources expand in place, to canonical paths. */
  assert_true(asprintf(&want, "%s\n%s\n%s\n%s\n", path_a, path_b, path_c,
                       path_unsafe) > 0);
  assert_string_equal(text, want);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, strlen(want));
  assert_int_equal(st.st_mode & 07777, 0444);
  free(want);
  free(text);
  free(path);

  assert_int_equal(stat_value(&main_mount, "archives"), 4);
  assert_int_equal(stat_value(&main_mount, "kernels"), file_count);
  /* rand#0, blas#0, blas#1, deep/nested/libx, tool, fft, hip, ok, tricky */
  assert_int_equal(stat_value(&main_mount, "binaries"), 9);
  assert_int_equal(stat_value(&main_mount, "skipped"), UNSAFE_SKIPPED);
  assert_int_equal(stat_value(&main_mount, "shadowed"), 1);
  assert_int_equal(stat_value(&main_mount, "cache_capacity"), 2u << 20);
  static const char* keys[] = {"cache_bytes",    "hits",
                               "misses",         "evictions",
                               "decompressions", "bytes_decompressed"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    (void)stat_value(&main_mount, keys[i]); /* present */
  /* The mount's phases, on the monotonic clock, in the order they ran;
   * INIT is answered before any request, so before this read. */
  static const char* phases[] = {"started_ns", "sources_opened_ns",
                                 "tree_built_ns", "mounted_ns", "init_ns"};
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t before = 1;
  for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
    uint64_t at = stat_value(&main_mount, phases[i]);
    if (at < before || at == UINT64_MAX)
      fail_msg("stats: %s=%llu is before the phase that precedes it", phases[i],
               (unsigned long long)at);
    before = at;
  }
  assert_true(before <=
              (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
}

static void test_unsafe_toc_names_are_skipped_with_a_warning(void** state) {
  (void)state;
  char* log = slurp(main_mount.log);
  static const char* names[] = {
      "'../evil#0'",    "'/abs#0'",  "'a//b#0'",
      "'a/./b#0'",      "'lib/'",    "'.kpackfs/x#0'",
      "arch 'gfx/90a'", "arch '..'", "'tricky#0/gfx90a'"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strstr(log, names[i]) == NULL)
      fail_msg("no warning naming %s in:\n%s", names[i], log);
  }
  assert_non_null(strstr(log, "warning"));
  free(log);
  /* Nothing escaped the mount, nothing landed in .kpackfs. */
  char* evil = kt_path(tmp, "evil#0");
  struct stat st;
  assert_int_not_equal(stat(evil, &st), 0);
  free(evil);
  char* s = list_dir(&main_mount, ".kpackfs");
  assert_string_equal(s, "archives, stats");
  free(s);
  s = list_dir(&main_mount, "ok#0");
  assert_string_equal(s, "gfx90a");
  free(s);
}

static void expect_erofs(int rc, const char* what) {
  if (rc != -1 || errno != EROFS)
    fail_msg("%s: rc %d errno %s, want EROFS", what, rc, strerror(errno));
}

static void test_every_write_is_refused_with_erofs(void** state) {
  (void)state;
  char* file =
      in_mount(&main_mount, "lib/librocblas.so.5#1/gfx90a/kernel.hsaco");
  char* dir = in_mount(&main_mount, "lib");
  char* fresh = in_mount(&main_mount, "lib/new");
  char* other = in_mount(&main_mount, "lib/other");
  char* outside = kt_path(tmp, "outside");
  expect_erofs(open(file, O_WRONLY), "open O_WRONLY");
  expect_erofs(open(file, O_RDWR), "open O_RDWR");
  expect_erofs(open(file, O_RDONLY | O_TRUNC), "open O_TRUNC");
  expect_erofs(open(file, O_WRONLY | O_APPEND), "open O_APPEND");
  expect_erofs(open(fresh, O_WRONLY | O_CREAT, 0644), "create");
  expect_erofs(mkdir(fresh, 0755), "mkdir");
  expect_erofs(mknod(fresh, S_IFIFO | 0644, 0), "mknod");
  expect_erofs(rmdir(dir), "rmdir");
  expect_erofs(unlink(file), "unlink");
  expect_erofs(rename(file, other), "rename");
  expect_erofs(symlink("x", fresh), "symlink");
  expect_erofs(link(file, other), "link");
  expect_erofs(chmod(file, 0644), "chmod");
  expect_erofs(chown(file, 0, 0), "chown");
  expect_erofs(truncate(file, 0), "truncate");
  expect_erofs(utimensat(AT_FDCWD, file, NULL, 0), "utimensat");
  expect_erofs(setxattr(file, "user.x", "1", 1, 0), "setxattr");
  expect_erofs(removexattr(file, "user.kpack.arch"), "removexattr");
  /* The file is intact. */
  assert_file_equals(
      &main_mount, find_expected("lib/librocblas.so.5#1/gfx90a/kernel.hsaco"));
  free(file);
  free(dir);
  free(fresh);
  free(other);
  free(outside);
}

#define READERS 8

static void* read_everything(void* arg) {
  size_t start = (size_t)(uintptr_t)arg;
  for (size_t k = 0; k < file_count; k++) {
    const expected* e = &files[(start + k) % file_count];
    char* path = in_mount(&main_mount, e->rel);
    size_t size = 0;
    /* Odd readers bypass the page cache so the daemon serves them too. */
    void* data = read_path(path, start % 2 ? 4096 : 65536, &size,
                           start % 2 ? O_DIRECT : 0);
    free(path);
    bool ok = data != NULL && size == e->size &&
              kt_fnv1a(data, size, KT_FNV_START) == e->sum;
    free(data);
    if (!ok)
      return (void*)e->rel;
  }
  return NULL;
}

static void test_eight_parallel_readers_see_every_checksum(void** state) {
  (void)state;
  pthread_t threads[READERS];
  for (uintptr_t i = 0; i < READERS; i++)
    assert_int_equal(
        pthread_create(&threads[i], NULL, read_everything, (void*)i), 0);
  for (int i = 0; i < READERS; i++) {
    void* bad;
    pthread_join(threads[i], &bad);
    if (bad != NULL)
      fail_msg("reader %d: wrong bytes for %s", i, (const char*)bad);
  }
}

/* Per kernel file of the fixture: its number, its arch directory's and its
 * binary directory's; looked up in the fixture's order or the reverse. */
enum { INODES_PER_FILE = 3 };
static void record_inodes(const mnt* m, bool reverse, ino_t* out) {
  for (size_t n = 0; n < file_count; n++) {
    size_t i = reverse ? file_count - 1 - n : n;
    char* rel = strdup(files[i].rel);
    for (int level = 0; level < INODES_PER_FILE; level++) {
      char* path = in_mount(m, rel);
      struct stat st;
      assert_int_equal(stat(path, &st), 0);
      out[INODES_PER_FILE * i + level] = st.st_ino;
      free(path);
      char* slash = strrchr(rel, '/');
      if (slash != NULL)
        *slash = '\0'; /* up to the directory */
    }
    free(rel);
  }
}

/* Whatever was looked up first: the main mount has served every test
 * before this one, the second mount is walked from the last file up. */
static void test_inode_numbers_are_stable_for_the_same_sources(void** state) {
  (void)state;
  size_t count = INODES_PER_FILE * file_count;
  ino_t* first = calloc(count, sizeof(*first));
  ino_t* second = calloc(count, sizeof(*second));
  record_inodes(&main_mount, false, first);
  mnt_init(&scratch[0], "again");
  const char* args[] = {path_a, path_b, path_dir, path_unsafe, NULL};
  mnt_start(&scratch[0], args);
  record_inodes(&scratch[0], true, second);
  for (size_t i = 0; i < count; i++) {
    if (first[i] != second[i])
      fail_msg("%s (%zu levels up): inode %ju then %ju",
               files[i / INODES_PER_FILE].rel, i % INODES_PER_FILE,
               (uintmax_t)first[i], (uintmax_t)second[i]);
    for (size_t j = 0; j < i && i % INODES_PER_FILE == 0; j++)
      if (j % INODES_PER_FILE == 0)
        assert_true(first[i] != first[j]);
  }
  free(first);
  free(second);
  mnt_stop_clean(&scratch[0]);
}

/* ---- dedicated mounts ---------------------------------------------------- */

static void test_chunked_read_decompresses_once_and_rereads_hit_cache(
    void** state) {
  (void)state;
  const expected* e =
      find_expected("lib/librocrand.so.1#0/gfx90a/kernel.hsaco");
  mnt* m = &scratch[0];
  mnt_init(m, "once");
  const char* args[] = {path_a, NULL};
  mnt_start(m, args);
  assert_int_equal(stat_value(m, "decompressions"), 0);
  char* path = in_mount(m, e->rel);

  /* 4 KiB O_DIRECT reads: every piece is a request to the daemon. */
  assert_reads(path, 4096, O_DIRECT, e->data, e->size);
  assert_int_equal(stat_value(m, "decompressions"), 1);
  assert_int_equal(stat_value(m, "misses"), 1);
  assert_int_equal(stat_value(m, "bytes_decompressed"), e->size);
  assert_true(stat_value(m, "read_requests") >= e->size / 4096);

  /* Through the page cache: served from the kernel cache... */
  assert_reads(path, 4096, 0, e->data, e->size);
  assert_int_equal(stat_value(m, "decompressions"), 1);
  assert_int_equal(stat_value(m, "hits"), 1);
  assert_int_equal(stat_value(m, "cache_bytes"), e->size);
  uint64_t requests = stat_value(m, "read_requests");

  /* ...and read again without a single read request (keep_cache). */
  assert_reads(path, 65536, 0, e->data, e->size);
  assert_int_equal(stat_value(m, "read_requests"), requests);
  assert_int_equal(stat_value(m, "decompressions"), 1);
  await_releases(m);
  assert_int_equal(stat_value(m, "cache_entries"), 1);
  free(path);
  mnt_stop_clean(m);
}

static void test_first_source_wins_for_the_same_binary_and_arch(void** state) {
  (void)state;
  char* x1 = kt_path(tmp, "x1.kpack");
  char* x2 = kt_path(tmp, "x2.kpack");
  void* one = kt_pattern(5000, 11);
  void* two = kt_pattern(6000, 22);
  kt_kernel k1[] = {{"lib/libdup.so#0", "gfx90a", one, 5000},
                    {"lib/only1.so#0", "gfx90a", one, 5000}};
  kt_kernel k2[] = {{"lib/libdup.so#0", "gfx90a", two, 6000},
                    {"lib/only2.so#0", "gfx90a", two, 6000}};
  write_fixture(x1, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k1, 2);
  write_fixture(x2, KPACK_COMPRESSION_NOOP, NULL, 0, k2, 2);

  for (int order = 0; order < 2; order++) {
    mnt* m = &scratch[order];
    mnt_init(m, order == 0 ? "x12" : "x21");
    const char* args[] = {order == 0 ? x1 : x2, order == 0 ? x2 : x1, NULL};
    mnt_start(m, args);
    char* path = in_mount(m, "lib/libdup.so#0/gfx90a/kernel.hsaco");
    size_t size;
    void* data = read_path(path, 65536, &size, 0);
    assert_non_null(data);
    assert_int_equal(size, order == 0 ? 5000 : 6000);
    assert_memory_equal(data, order == 0 ? one : two, size);
    expect_xattr(path, "user.kpack.archive", order == 0 ? x1 : x2);
    free(data);
    free(path);
    char* s = list_dir(m, "lib");
    assert_string_equal(s, "libdup.so#0, only1.so#0, only2.so#0");
    free(s);
    assert_int_equal(stat_value(m, "shadowed"), 1);
    assert_int_equal(stat_value(m, "kernels"), 3);
  }
  mnt_stop_clean(&scratch[0]);
  mnt_stop_clean(&scratch[1]);
  free(one);
  free(two);
  free(x1);
  free(x2);
}

/* Directories are made in the order of the sorted binary paths, which is
 * not their own order when one sibling's name is another's followed by a
 * byte below '/': "lib/a-b/..." sorts before "lib/a/...", yet "a" lists
 * before "a-b". The second archive names a binary of the first at another
 * position and one of its own, so the names are merged through the hash. */
static void test_sibling_directories_list_and_look_up_in_byte_order(
    void** state) {
  (void)state;
  char* y1 = kt_path(tmp, "y1.kpack");
  char* y2 = kt_path(tmp, "y2.kpack");
  void* one = kt_pattern(3000, 31);
  void* two = kt_pattern(3500, 32);
  kt_kernel k1[] = {{"lib/a-b/x.so#0", "gfx90a", one, 3000},
                    {"lib/a.c/z.so#0", "gfx90a", one, 3000},
                    {"lib/a/y.so#0", "gfx90a", one, 3000}};
  kt_kernel k2[] = {{"lib/a/y.so#0", "gfx942", two, 3500},
                    {"lib/b/w.so#0", "gfx942", two, 3500}};
  write_fixture(y1, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k1, 3);
  write_fixture(y2, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k2, 2);
  mnt* m = &scratch[0];
  mnt_init(m, "siblings");
  const char* args[] = {y1, y2, NULL};
  mnt_start(m, args);
  char* s = list_dir(m, "lib");
  assert_string_equal(s, "a, a-b, a.c, b");
  free(s);
  s = list_dir(m, "lib/a/y.so#0");
  assert_string_equal(s, "gfx90a, gfx942");
  free(s);
  const char* kernels[] = {
      "lib/a-b/x.so#0/gfx90a/kernel.hsaco",
      "lib/a.c/z.so#0/gfx90a/kernel.hsaco", "lib/a/y.so#0/gfx90a/kernel.hsaco",
      "lib/a/y.so#0/gfx942/kernel.hsaco", "lib/b/w.so#0/gfx942/kernel.hsaco"};
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
    char* path = in_mount(m, kernels[i]);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, strstr(kernels[i], "gfx942") ? 3500 : 3000);
    free(path);
  }
  mnt_stop_clean(m);
  free(one);
  free(two);
  free(y1);
  free(y2);
}

/* Three kernels; the middle one's frame gets a flipped byte. */
static char* corrupt_archive(const char* name, void** good, size_t* good_size) {
  char* path = kt_path(tmp, name);
  void* a = kt_pattern(40000, 51);
  void* b = kt_pattern(50000, 52);
  void* c = kt_pattern(60000, 53);
  kt_kernel k[] = {{"lib/a.so#0", "gfx90a", a, 40000},
                   {"lib/b.so#0", "gfx90a", b, 50000},
                   {"lib/c.so#0", "gfx90a", c, 60000}};
  write_fixture(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 3);
  kpack_archive_t arc;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(path, &arc), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(arc, "lib/b.so#0", "gfx90a", &info),
                   KPACK_SUCCESS);
  kpack_close(arc);
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  bytes[info.offset + info.stored_size / 2] ^= 0x5a;
  kt_write_file(path, bytes, size);
  free(bytes);
  good[0] = a;
  good[1] = c;
  good_size[0] = 40000;
  good_size[1] = 60000;
  free(b);
  return path;
}

/* A corrupt kernel fails every read with EIO, and only its own. With
 * -o open_requests an open's first read tries once and the open's other
 * reads fail with it; with zero-message opens the daemon sees no opens,
 * so each read request tries again (a later read may find a file that
 * was fixed), and the kernel may ask more than once per read(). */
static void corrupt_frame_case(bool open_requests) {
  void* good[2];
  size_t good_size[2];
  char* archive = corrupt_archive("corrupt.kpack", good, good_size);
  mnt* m = &scratch[0];
  mnt_init(m, "corrupt");
  const char* args[] = {"-o", "open_requests", archive, NULL};
  mnt_start(m, open_requests ? args : args + 2);
  assert_int_equal(stat_value(m, "zero_message_opens"), !open_requests);

  char* bad = in_mount(m, "lib/b.so#0/gfx90a/kernel.hsaco");
  struct stat st;
  assert_int_equal(stat(bad, &st), 0); /* metadata needs no decompression */
  assert_int_equal(st.st_size, 50000);
  /* open() succeeds (it decompresses nothing); every read fails. */
  for (int i = 0; i < 2; i++) {
    char byte;
    int fd = open(bad, O_RDONLY);
    assert_true(fd >= 0);
    errno = 0;
    assert_int_equal(read(fd, &byte, 1), -1);
    assert_int_equal(errno, EIO);
    close(fd);
  }
  const char* rel[] = {"lib/a.so#0/gfx90a/kernel.hsaco",
                       "lib/c.so#0/gfx90a/kernel.hsaco"};
  for (int i = 0; i < 2; i++) {
    char* path = in_mount(m, rel[i]);
    assert_reads(path, 65536, 0, good[i], good_size[i]);
    free(path);
  }
  if (open_requests) {
    assert_int_equal(stat_value(m, "failures"), 2);
    assert_int_equal(stat_value(m, "read_errors"), 2);
  } else {
    assert_true(stat_value(m, "failures") >= 2);
    assert_true(stat_value(m, "read_errors") >= 2);
  }
  assert_int_equal(waitpid(m->pid, NULL, WNOHANG), 0); /* still running */
  mnt_stop_clean(m);
  free(bad);
  free(good[0]);
  free(good[1]);
  free(archive);
}

static void test_corrupt_frame_is_eio_for_that_file_only(void** state) {
  (void)state;
  corrupt_frame_case(false);
}

static void test_corrupt_frame_with_open_requests_fails_once_an_open(
    void** state) {
  (void)state;
  corrupt_frame_case(true);
}

/* Kernels in an archive and a mount of their own: kernel i, of sizes[i]
 * bytes (or `size` each when sizes is NULL) and the pattern seed + i, is
 * `arch` of binary lib/STEM<i>.so#0, in STEM.kpack (zstd). */
enum { SET_MAX = 66 };
typedef struct kernel_set {
  size_t n;
  kt_kernel k[SET_MAX];
  char names[SET_MAX][32];
  char* archive;
} kernel_set;

/* Makes set `s` and mounts it on scratch[0], with `-o OPTIONS` unless
 * that is NULL. */
static mnt* mount_kernels(kernel_set* s, const char* stem, const char* arch,
                          size_t n, const size_t* sizes, size_t size,
                          uint32_t seed, const char* options) {
  assert_true(n <= SET_MAX);
  s->n = n;
  for (size_t i = 0; i < n; i++) {
    size_t bytes = sizes != NULL ? sizes[i] : size;
    snprintf(s->names[i], sizeof(s->names[i]), "lib/%s%zu.so#0", stem, i);
    s->k[i] = (kt_kernel){s->names[i], arch,
                          kt_pattern(bytes, seed + (uint32_t)i), bytes};
  }
  char file[64];
  snprintf(file, sizeof(file), "%s.kpack", stem);
  s->archive = kt_path(tmp, file);
  write_fixture(s->archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, s->k,
                n);
  mnt* m = &scratch[0];
  mnt_init(m, stem);
  const char* with[] = {"-o", options, s->archive, NULL};
  const char* without[] = {s->archive, NULL};
  mnt_start(m, options != NULL ? with : without);
  return m;
}

/* Opens `path` past the page cache and reads its first page into *page
 * (the caller frees it), which must be `want`'s: the open descriptor. */
static int open_first_page(const char* path, const void* want, void** page) {
  int fd = open(path, O_RDONLY | O_DIRECT);
  assert_true(fd >= 0);
  *page = NULL;
  assert_int_equal(posix_memalign(page, 4096, 4096), 0);
  assert_int_equal(pread(fd, *page, 4096, 0), 4096);
  assert_memory_equal(*page, want, 4096);
  return fd;
}

static void kernel_set_free(kernel_set* s) {
  for (size_t i = 0; i < s->n; i++)
    free((void*)s->k[i].data);
  free(s->archive);
}

static void test_archive_truncated_under_the_mount_is_eio_not_a_crash(
    void** state) {
  (void)state;
  enum { N = 6, SIZE = 100000 };
  kernel_set s;
  mnt* m = mount_kernels(&s, "s", "gfx90a", N, NULL, SIZE, 60, NULL);

  char* first = in_mount(m, "lib/s0.so#0/gfx90a/kernel.hsaco");
  size_t size;
  void* data = read_path(first, 65536, &size, 0);
  assert_non_null(data);
  free(data);
  struct stat st;
  assert_int_equal(stat(s.archive, &st), 0);
  assert_int_equal(truncate(s.archive, st.st_size / 3), 0);

  /* Kernels past the cut fail with EIO, each of them, every time. */
  for (int i = N / 2; i < N; i++) {
    char rel[64];
    snprintf(rel, sizeof(rel), "lib/s%d.so#0/gfx90a/kernel.hsaco", i);
    char* path = in_mount(m, rel);
    errno = 0;
    assert_null(read_path(path, 65536, &size, 0));
    assert_int_equal(errno, EIO);
    free(path);
  }
  /* The daemon is alive and still serves what it has. */
  assert_int_equal(waitpid(m->pid, NULL, WNOHANG), 0);
  assert_reads(first, 4096, O_DIRECT, s.k[0].data, SIZE);
  /* Each at least once (once a request: no opens reach the daemon). */
  assert_true(stat_value(m, "read_errors") >= N - N / 2);
  mnt_stop_clean(m);
  kernel_set_free(&s);
  free(first);
}

static void test_small_cache_still_serves_larger_kernels(void** state) {
  (void)state;
  enum { N = 6 };
  static const size_t sizes[N] = {3 << 20, 1536 << 10, 300000,
                                  300000,  300000,     300000};
  kernel_set s;
  mnt* m = mount_kernels(&s, "big", "gfx942", N, sizes, 0, 70,
                         "cache_size=1M,release_after=3600");
  assert_int_equal(stat_value(m, "cache_capacity"), 1 << 20);

  /* Two readers of the 3 MiB kernel at once share one pinned copy. */
  char* path0 = in_mount(m, "lib/big0.so#0/gfx942/kernel.hsaco");
  int fd1 = open(path0, O_RDONLY | O_DIRECT);
  int fd2 = open(path0, O_RDONLY | O_DIRECT);
  assert_true(fd1 >= 0 && fd2 >= 0);
  assert_int_equal(stat_value(m, "cache_pinned"), 0); /* open reads nothing */
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, 1 << 16), 0);
  for (off_t off = 0; off < (off_t)sizes[0]; off += 1 << 16) {
    int fd = (off >> 16) % 2 ? fd2 : fd1;
    assert_int_equal(pread(fd, buf, 1 << 16, off), 1 << 16);
    assert_memory_equal(buf, (const uint8_t*)s.k[0].data + off, 1 << 16);
    /* Until its last bytes are read (no close reaches the daemon). */
    if (off + (1 << 16) < (off_t)sizes[0])
      assert_int_equal(stat_value(m, "cache_pinned"), 1);
  }
  free(buf);
  close(fd1);
  close(fd2);
  free(path0);
  assert_int_equal(stat_value(m, "decompressions"), 1);
  await_releases(m);
  assert_int_equal(stat_value(m, "cache_entries"), 0); /* dropped */

  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      char rel[256];
      snprintf(rel, sizeof(rel), "%s/gfx942/kernel.hsaco", s.names[i]);
      char* path = in_mount(m, rel);
      assert_reads(path, 65536, O_DIRECT, s.k[i].data, sizes[i]);
      free(path);
    }
  }
  await_releases(m);
  assert_true(stat_value(m, "evictions") >= N);
  assert_true(stat_value(m, "cache_bytes") <= 1 << 20);
  assert_true(stat_value(m, "decompressions") >= N + 1);
  mnt_stop_clean(m);
  kernel_set_free(&s);
}

/* With -o open_requests every open and close reaches the daemon: a kernel
 * stays pinned while any file of it is open, however much of it was read,
 * and each open counts. */
static void test_open_requests_pin_a_kernel_until_its_last_close(void** state) {
  (void)state;
  enum { SIZE = 300000 };
  kernel_set s;
  mnt* m = mount_kernels(&s, "o", "gfx942", 1, NULL, SIZE, 90, "open_requests");
  assert_int_equal(stat_value(m, "zero_message_opens"), 0);
  char* path = in_mount(m, "lib/o0.so#0/gfx942/kernel.hsaco");
  int fd1 = open(path, O_RDONLY | O_DIRECT);
  int fd2 = open(path, O_RDONLY | O_DIRECT);
  assert_true(fd1 >= 0 && fd2 >= 0);
  assert_int_equal(stat_value(m, "opens"), 2);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, SIZE + 4096), 0);
  assert_int_equal(pread(fd1, buf, SIZE + 4096, 0), SIZE);
  assert_memory_equal(buf, s.k[0].data, SIZE);
  assert_int_equal(stat_value(m, "cache_pinned"), 1); /* read, still open */
  close(fd1);
  assert_int_equal(pread(fd2, buf, 4096, 0), 4096);
  assert_int_equal(stat_value(m, "cache_pinned"), 1);
  close(fd2);
  await_releases(m);
  free(buf);
  free(path);
  mnt_stop_clean(m);
  kernel_set_free(&s);
}

/* With zero-message opens the daemon cannot see a close: a file whose
 * reading stopped short stays pinned until it has not been read for
 * release_after (an hour here) or the kernel forgets it, and at most 64
 * such files at once (the least recently read goes); a file read to its
 * end is let go at once. */
static void test_at_most_64_files_read_in_part_stay_pinned(void** state) {
  (void)state;
  enum { N = 66, SIZE = 8192 };
  kernel_set s;
  mnt* m = mount_kernels(&s, "p", "gfx942", N, NULL, SIZE, 200,
                         "release_after=3600");
  assert_int_equal(stat_value(m, "zero_message_opens"), 1);
  assert_int_equal(stat_value(m, "opens"), 0);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, SIZE), 0);
  char rel[64];
  for (int i = 0; i < N; i++) {
    snprintf(rel, sizeof(rel), "%s/gfx942/kernel.hsaco", s.names[i]);
    char* path = in_mount(m, rel);
    int fd = open(path, O_RDONLY | O_DIRECT);
    assert_true(fd >= 0);
    /* The first half of all but the last, which is read whole. */
    size_t want = i < N - 1 ? 4096 : SIZE;
    assert_int_equal(pread(fd, buf, want, 0), (ssize_t)want);
    assert_memory_equal(buf, s.k[i].data, want);
    close(fd);
    free(path);
    /* The 65th takes the slot of the first; the last takes the second's
     * and is let go at its end. */
    assert_int_equal(stat_value(m, "cache_pinned"), i < 64      ? i + 1
                                                    : i < N - 1 ? 64
                                                                : 63);
  }
  free(buf);
  mnt_stop_clean(m);
  kernel_set_free(&s);
}

/* A file read in part and left alone is let go release_after (0.2 s
 * here) after its last read. */
static void test_a_file_read_in_part_is_let_go_when_left_alone(void** state) {
  (void)state;
  enum { SIZE = 300000 };
  kernel_set s;
  mnt* m =
      mount_kernels(&s, "i", "gfx942", 1, NULL, SIZE, 91, "release_after=0.2");
  char* path = in_mount(m, "lib/i0.so#0/gfx942/kernel.hsaco");
  void* buf;
  int fd = open_first_page(path, s.k[0].data, &buf);
  assert_int_equal(stat_value(m, "decompressions"), 1);
  await_releases(m); /* still open: only the daemon's clock lets it go */
  assert_int_equal(pread(fd, buf, 4096, 8192), 4096); /* pinned afresh */
  assert_memory_equal(buf, (const uint8_t*)s.k[0].data + 8192, 4096);
  close(fd);
  await_releases(m);
  free(buf);
  free(path);
  mnt_stop_clean(m);
  kernel_set_free(&s);
}

/* A file read in part is let go as soon as another file is read, by any
 * READ, once it has had none for a fiftieth of release_after (2 s here):
 * the sweeper's own turn (100 s) is past the test's patience. */
static void test_a_file_left_idle_is_let_go_when_another_is_read(void** state) {
  (void)state;
  enum { SIZE = 300000 };
  kernel_set s;
  mnt* m =
      mount_kernels(&s, "n", "gfx942", 2, NULL, SIZE, 93, "release_after=100");
  char* first = in_mount(m, "lib/n0.so#0/gfx942/kernel.hsaco");
  char* second = in_mount(m, "lib/n1.so#0/gfx942/kernel.hsaco");
  int fd1 = open(first, O_RDONLY | O_DIRECT);
  int fd2 = open(second, O_RDONLY | O_DIRECT);
  assert_true(fd1 >= 0 && fd2 >= 0);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, 4096), 0);
  assert_int_equal(pread(fd1, buf, 4096, 0), 4096);
  assert_int_equal(stat_value(m, "cache_pinned"), 1);
  kt_sleep_ms(2100); /* the first file is now idle for longer than 2 s */
  /* Past the second file's start: not attached, pinned for itself alone. */
  assert_int_equal(pread(fd2, buf, 4096, 8192), 4096);
  assert_memory_equal(buf, (const uint8_t*)s.k[1].data + 8192, 4096);
  await_releases(m);
  assert_int_equal(stat_value(m, "decompressions"), 2);
  close(fd1);
  close(fd2);
  free(buf);
  free(first);
  free(second);
  mnt_stop_clean(m);
  kernel_set_free(&s);
}

/* One file read at a time: a large kernel is decompressed where its first
 * READ comes in, on the request thread; while another kernel is pinned (a
 * file read in part, kept for an hour here), the next first read goes to
 * the pool, so that readers that overlap decompress in parallel. */
static void test_a_lone_reader_decompresses_where_its_reads_come_in(
    void** state) {
  (void)state;
  enum { N = 3, SIZE = 300000 };
  kernel_set s;
  mnt* m =
      mount_kernels(&s, "q", "gfx942", N, NULL, SIZE, 57, "release_after=3600");
  char* paths[N];
  for (int i = 0; i < N; i++) {
    char rel[64];
    snprintf(rel, sizeof(rel), "%s/gfx942/kernel.hsaco", s.names[i]);
    paths[i] = in_mount(m, rel);
  }
  for (int i = 0; i < 2; i++)
    assert_reads(paths[i], 65536, 0, s.k[i].data, SIZE);
  await_releases(m);
  assert_int_equal(stat_value(m, "decompressions"), 2);
  assert_int_equal(stat_value(m, "reads_pooled"), 0);

  /* Kernel 0 read in part, past the page cache: pinned from now on. */
  void* buf;
  int fd = open_first_page(paths[0], s.k[0].data, &buf);
  assert_int_equal(stat_value(m, "cache_pinned"), 1);
  assert_reads(paths[2], 65536, 0, s.k[2].data, SIZE);
  assert_int_equal(stat_value(m, "reads_pooled"), 1);
  assert_int_equal(stat_value(m, "decompressions"), 3);
  close(fd);
  free(buf);
  for (int i = 0; i < N; i++)
    free(paths[i]);
  mnt_stop_clean(m);
  kernel_set_free(&s);
}

/* Kernels of 200-260 KiB through a 1 MiB budget, by four readers at once
 * in different orders, every read a request to the daemon (O_DIRECT): the
 * misses keep taking over buffers of kernels just evicted while the other
 * readers' kernels are pinned, and every byte must still be the kernel's. */
#define RECYCLE_KERNELS 24
#define RECYCLE_READERS 4

typedef struct recycle_reader {
  const mnt* m;
  const kt_kernel* kernels;
  size_t start;
  const char* bad; /* the first kernel read wrong, or NULL */
} recycle_reader;

static void* read_recycled(void* arg) {
  recycle_reader* r = arg;
  for (int round = 0; round < 2 && r->bad == NULL; round++) {
    for (size_t i = 0; i < RECYCLE_KERNELS; i++) {
      /* Forwards from `start`, or backwards on odd readers. */
      size_t k = r->start % 2
                     ? (r->start + RECYCLE_KERNELS - i) % RECYCLE_KERNELS
                     : (r->start + i) % RECYCLE_KERNELS;
      const kt_kernel* e = &r->kernels[k];
      char rel[96];
      snprintf(rel, sizeof(rel), "%s/%s/kernel.hsaco", e->binary, e->arch);
      char* path = in_mount(r->m, rel);
      size_t size = 0;
      void* data = read_path(path, 16384 << (k % 3), &size, O_DIRECT);
      free(path);
      bool ok =
          data != NULL && size == e->size && memcmp(data, e->data, size) == 0;
      free(data);
      if (!ok) {
        r->bad = e->binary;
        break;
      }
    }
  }
  return NULL;
}

static void test_tiny_budget_recycles_buffers_and_every_byte_is_exact(
    void** state) {
  (void)state;
  size_t sizes[RECYCLE_KERNELS];
  for (int i = 0; i < RECYCLE_KERNELS; i++)
    sizes[i] = (200u << 10) + (size_t)i * 2600;
  kernel_set s;
  mnt* m = mount_kernels(&s, "r", "gfx942", RECYCLE_KERNELS, sizes, 0, 500,
                         "cache_size=1M");

  pthread_t threads[RECYCLE_READERS];
  recycle_reader readers[RECYCLE_READERS];
  for (size_t i = 0; i < RECYCLE_READERS; i++) {
    readers[i] = (recycle_reader){m, s.k, i * 5, NULL};
    assert_int_equal(
        pthread_create(&threads[i], NULL, read_recycled, &readers[i]), 0);
  }
  for (int i = 0; i < RECYCLE_READERS; i++)
    pthread_join(threads[i], NULL);
  for (int i = 0; i < RECYCLE_READERS; i++)
    if (readers[i].bad != NULL)
      fail_msg("reader %d: wrong bytes for %s", i, readers[i].bad);
  await_releases(m);
  assert_true(stat_value(m, "recycled") > 0);
  assert_true(stat_value(m, "evictions") > 0);
  assert_true(stat_value(m, "cache_bytes") <= 1 << 20);
  assert_int_equal(stat_value(m, "failures"), 0);
  mnt_stop_clean(m); /* TSan, ASan and valgrind builds: a clean exit */
  kernel_set_free(&s);
}

static void test_sigterm_unmounts_cleanly(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "term");
  const char* args[] = {path_a, NULL};
  mnt_start(m, args);
  char* s = list_dir(m, "lib/librocrand.so.1#0");
  free(s);
  assert_int_equal(kill(m->pid, SIGTERM), 0);
  int status = kt_wait(m->pid, patience());
  m->pid = 0;
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_false(kt_is_mountpoint(m->dir));
  /* Not in the mount table either. */
  char* mounts = slurp("/proc/self/mounts");
  char* needle;
  assert_true(asprintf(&needle, " %s ", m->dir) > 0);
  assert_null(strstr(mounts, needle));
  free(needle);
  free(mounts);
  mnt_stop(m);
}

/* Runs kpackfs to completion; returns its output in *log_text. */
static int run_kpackfs(const char* const* args, char** log_text) {
  char* argv[16];
  size_t n = 0;
  char* kpackfs = kt_program("kpackfs");
  char* log = kt_path(tmp, "run.log");
  argv[n++] = kpackfs;
  for (size_t i = 0; args[i] != NULL && n < 15; i++)
    argv[n++] = (char*)args[i];
  argv[n] = NULL;
  unlink(log);
  int status = run(argv, log);
  *log_text = slurp(log);
  free(log);
  free(kpackfs);
  return status;
}

/* A refused source exits 1, a bad command line 2. */
static void expect_refusal(const char* const* args, const char* mount_dir,
                           const char* name, const char* error) {
  char* out;
  int status = run_kpackfs(args, &out);
  int want =
      strcmp(name, "usage") == 0 || strcmp(name, "cache_size") == 0 ? 2 : 1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != want ||
      strstr(out, name) == NULL || strstr(out, error) == NULL)
    fail_msg("status %d, want %d and a message naming %s and %s:\n%s", status,
             want, name, error, out);
  assert_false(kt_is_mountpoint(mount_dir));
  free(out);
}

static void test_bad_sources_are_refused_before_mounting(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "refused");
  char* garbage = kt_path(tmp, "garbage.kpack");
  char* missing = kt_path(tmp, "missing.kpack");
  char* empty = kt_path(tmp, "empty-dir");
  char* bad_dir = kt_path(tmp, "bad-dir");
  char* inner = kt_path(bad_dir, "inner.kpack");
  kt_write_file(garbage, "this is not a kpack archive at all", 34);
  mkdir(empty, 0755);
  mkdir(bad_dir, 0755);
  kt_write_file(inner, "nope", 4);

  const char* a1[] = {"-f", garbage, m->dir, NULL};
  expect_refusal(a1, m->dir, garbage, "KPACK_ERROR_INVALID_FORMAT");
  const char* a2[] = {"-f", path_a, missing, m->dir, NULL};
  expect_refusal(a2, m->dir, missing, "KPACK_ERROR_FILE_NOT_FOUND");
  const char* a3[] = {"-f", empty, m->dir, NULL};
  expect_refusal(a3, m->dir, empty, "no *.kpack");
  const char* a4[] = {"-f", bad_dir, m->dir, NULL};
  expect_refusal(a4, m->dir, inner, "KPACK_ERROR_");
  const char* a5[] = {"-f", "-o", "cache_size=lots", path_a, m->dir, NULL};
  expect_refusal(a5, m->dir, "cache_size", "lots");
  const char* a6[] = {"-f", m->dir, NULL};
  expect_refusal(a6, m->dir, "usage", "SOURCE");
  free(garbage);
  free(missing);
  free(empty);
  free(bad_dir);
  free(inner);
}

/* A SOURCE of nothing but ':' separators names no archive: it once
 * mounted an empty tree. It is refused before mounting, alone or beside
 * good sources; a list with empty items among real ones still works. */
static void test_source_list_of_only_separators_is_refused(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "separators");
  const char* a1[] = {"-f", ":", m->dir, NULL};
  expect_refusal(a1, m->dir, "':'", "only ':' separators");
  const char* a2[] = {"-f", "::", m->dir, NULL};
  expect_refusal(a2, m->dir, "'::'", "only ':' separators");
  const char* a3[] = {"-f", path_a, ":::", m->dir, NULL};
  expect_refusal(a3, m->dir, "':::'", "only ':' separators");
  char* list;
  assert_true(asprintf(&list, "::%s::", path_b) > 0);
  const char* a4[] = {list, NULL};
  mnt_start(m, a4);
  assert_int_equal(stat_value(m, "archives"), 1);
  mnt_stop_clean(m);
  free(list);
}

static void test_help_and_version(void** state) {
  (void)state;
  char* out;
  const char* help[] = {"--help", NULL};
  int status = run_kpackfs(help, &out);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_non_null(strstr(out, "SOURCE... MOUNTPOINT"));
  assert_non_null(strstr(out, "cache_size=SIZE"));
  assert_non_null(strstr(out, "allow_other"));
  free(out);
  const char* version[] = {"--version", NULL};
  status = run_kpackfs(version, &out);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_non_null(strstr(out, "kpackfs version"));
  assert_non_null(strstr(out, "libfuse version"));
  free(out);
}

static void test_fstab_style_options_and_source_lists_are_accepted(
    void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "fstab");
  char* list;
  assert_true(asprintf(&list, "%s:%s", path_a, path_b) > 0);
  /* What mount(8) and mount.fuse3 pass for an fstab line, plus ours. */
  const char* args[] = {
      "-o",
      "rw,dev,suid,defaults,noauto,nofail,_netdev,x-systemd.automount,"
      "cache_size=2M,uid=4321,gid=8765",
      list, NULL};
  mnt_start(m, args);
  char* path = in_mount(m, "lib/librocfft.so.0#0/gfx1100/kernel.hsaco");
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_uid, 4321);
  assert_int_equal(st.st_gid, 8765);
  assert_int_equal(stat_value(m, "cache_capacity"), 2 << 20);
  assert_int_equal(stat_value(m, "archives"), 2);
  /* "rw" did not make it writable. */
  char* fresh = in_mount(m, "new");
  expect_erofs(mkdir(fresh, 0755), "mkdir");
  free(fresh);
  free(path);
  free(list);
  mnt_stop_clean(m);
}

/* Mounts `source` as mount(8) does for a fuse.kpackfs fstab line: it runs
 * mount.fuse3 SOURCE DIR -o OPTIONS, which runs `kpackfs SOURCE DIR -o
 * ...` through the shell (found in PATH), without -f, so the daemon
 * detaches. Fails the test unless DIR is then a mount point. */
static void mnt_start_helper(mnt* m, const char* source, const char* options) {
  char* path_env;
  const char* old = getenv("PATH");
  assert_true(asprintf(&path_env, "%s:/usr/sbin:/sbin:%s", kt_bin_dir(),
                       old ? old : "/usr/bin:/bin") > 0);
  char* saved = old ? strdup(old) : NULL;
  setenv("PATH", path_env, 1);
  char* argv[] = {"mount.fuse3",  (char*)source, m->dir,         "-o",
                  (char*)options, "-t",          "fuse.kpackfs", NULL};
  int status = run(argv, m->log);
  if (saved != NULL)
    setenv("PATH", saved, 1);
  free(saved);
  free(path_env);
  m->mounted = kt_is_mountpoint(m->dir);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) || !m->mounted) {
    char* log = slurp(m->log);
    fail_msg("mount.fuse3 status %d:\n%s", status, log);
  }
  track(m);
}

static void test_mount_helper_starts_the_daemon_as_fstab_would(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "helper");
  mnt_start_helper(m, path_a, "rw,noauto,cache_size=3M");
  assert_int_equal(stat_value(m, "cache_capacity"), 3 << 20);
  assert_file_equals(m, find_expected("bin/tool#0/gfx90a/kernel.hsaco"));
  /* The daemon is not our child: unmounting ends it. */
  (void)kt_fusermount(m->dir, false, patience());
  assert_false(kt_is_mountpoint(m->dir));
  untrack(m);
}

static void test_single_threaded_debug_mount_serves_reads(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "single");
  const char* args[] = {"-s", "-d", path_a, NULL};
  mnt_start(m, args);
  assert_file_equals(
      m, find_expected("lib/deep/nested/libx.so#2/gfx942/kernel.hsaco"));
  mnt_stop_clean(m);
  char* log = slurp(m->log);
  assert_non_null(strstr(log, "LOOKUP")); /* libfuse's -d request trace */
  free(log);
}

/* A TOC entry's metadata map is the attribute user.kpack.metadata, as
 * compact JSON, on that kernel only. */
static void test_metadata_map_is_a_json_xattr(void** state) {
  (void)state;
  /* {"tile": int16 128, "id": bin 0xab, "opt": [true, nil]} */
  static const uint8_t map[] = {0x83, 0xa4, 't', 'i',  'l',  'e',  0xd1, 0x00,
                                0x80, 0xa2, 'i', 'd',  0xc4, 0x01, 0xab, 0xa3,
                                'o',  'p',  't', 0x92, 0xc3, 0xc0};
  char* path = kt_path(tmp, "meta.kpack");
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel_with_metadata(
                       w, "lib/m.so#0", "gfx90a", "abc", 3, map, sizeof map),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel(w, "lib/m.so#0", "gfx942", "d", 1),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  mnt* m = &scratch[0];
  mnt_init(m, "meta");
  const char* args[] = {path, NULL};
  mnt_start(m, args);
  char* with = in_mount(m, "lib/m.so#0/gfx90a/kernel.hsaco");
  char* without = in_mount(m, "lib/m.so#0/gfx942/kernel.hsaco");
  expect_xattr(with, "user.kpack.metadata",
               "{\"tile\":128,\"id\":\"ab\",\"opt\":[true,null]}");
  char list[1024];
  ssize_t len = listxattr(with, list, sizeof(list));
  assert_true(len > 0);
  assert_non_null(memmem(list, (size_t)len, "user.kpack.metadata\0", 20));
  len = listxattr(without, list, sizeof(list));
  assert_true(len > 0);
  assert_null(memmem(list, (size_t)len, "user.kpack.metadata", 19));
  errno = 0;
  assert_int_equal(getxattr(without, "user.kpack.metadata", list, sizeof list),
                   -1);
  assert_int_equal(errno, ENODATA);
  free(with);
  free(without);
  mnt_stop_clean(m);
  free(path);
}

/* ---- at the system's limits: many sources, descriptors, long names ------- */

/* `n` copies of one small archive as tmp/DIR/librocm-kernels-gfx942-NNNN.kpack
 * (names long enough that a few hundred joined pass 4 KiB); NULL-terminated,
 * free with free_strings(). */
static char** archive_copies(const char* dir_name, size_t n) {
  char* dir = kt_path(tmp, dir_name);
  char* first = kt_path(dir, "librocm-kernels-gfx942-0000.kpack");
  char** paths = calloc(n + 1, sizeof(*paths));
  assert_int_equal(mkdir(dir, 0755), 0);
  void* code = kt_pattern(5000, 77);
  const kt_kernel k = {"lib/librocm.so#0", "gfx942", code, 5000};
  write_fixture(first, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &k, 1);
  size_t size;
  void* bytes = kt_read_file(first, &size);
  assert_non_null(bytes);
  for (size_t i = 0; i < n; i++) {
    assert_true(asprintf(&paths[i], "%s/librocm-kernels-gfx942-%04zu.kpack",
                         dir, i) > 0);
    if (i > 0)
      kt_write_file(paths[i], bytes, size);
  }
  free(bytes);
  free(code);
  free(first);
  free(dir);
  return paths;
}

static void free_strings(char** strings) {
  for (size_t i = 0; strings[i] != NULL; i++)
    free(strings[i]);
  free(strings);
}

/* The source /proc/self/mounts shows for the mount at `dir`. */
static char* mount_source_of(const char* dir) {
  char* mounts = slurp("/proc/self/mounts");
  char* needle;
  char* source = NULL;
  assert_true(asprintf(&needle, " %s fuse.kpackfs ", dir) > 0);
  char* at = strstr(mounts, needle);
  if (at != NULL) {
    char* line = at;
    while (line > mounts && line[-1] != '\n')
      line--;
    source = strndup(line, (size_t)(at - line));
  }
  free(needle);
  free(mounts);
  return source;
}

#define MANY_SOURCES 300

/* Joined, the sources are some 19 KiB: the kernel refuses a mount source
 * of 4 KiB or more, so the mount shows the first and a count. */
static void test_hundreds_of_sources_mount_under_a_short_source_name(
    void** state) {
  (void)state;
  char** paths = archive_copies("many", MANY_SOURCES);
  mnt* m = &scratch[0];
  mnt_init(m, "many-sources");
  mnt_start(m, (const char* const*)paths);
  assert_int_equal(stat_value(m, "archives"), MANY_SOURCES);
  assert_int_equal(stat_value(m, "shadowed"), MANY_SOURCES - 1);
  char* source = mount_source_of(m->dir);
  char* want;
  assert_true(asprintf(&want, "%s:+%d", paths[0], MANY_SOURCES - 1) > 0);
  assert_non_null(source);
  assert_string_equal(source, want);
  free(want);
  free(source);
  /* .kpackfs/archives still lists every one, in order. */
  char* listing = in_mount(m, ".kpackfs/archives");
  char* text = slurp(listing);
  char* line = text;
  for (size_t i = 0; i < MANY_SOURCES; i++) {
    size_t n = strlen(paths[i]);
    assert_memory_equal(line, paths[i], n);
    assert_int_equal(line[n], '\n');
    line += n + 1;
  }
  free(text);
  free(listing);
  mnt_stop_clean(m);

  /* A few sources keep showing them all. */
  mnt_init(&scratch[1], "few-sources");
  const char* few[] = {paths[0], paths[1], NULL};
  mnt_start(&scratch[1], few);
  source = mount_source_of(scratch[1].dir);
  assert_true(asprintf(&want, "%s:%s", paths[0], paths[1]) > 0);
  assert_non_null(source);
  assert_string_equal(source, want);
  free(want);
  free(source);
  mnt_stop_clean(&scratch[1]);
  free_strings(paths);
}

static void test_hundreds_of_sources_in_one_fstab_list_mount(void** state) {
  (void)state;
  char** paths = archive_copies("fstab-many", MANY_SOURCES);
  size_t len = 0;
  for (size_t i = 0; i < MANY_SOURCES; i++)
    len += strlen(paths[i]) + 1;
  char* list = calloc(1, len);
  for (size_t i = 0; i < MANY_SOURCES; i++) {
    if (i > 0)
      strcat(list, ":");
    strcat(list, paths[i]);
  }
  mnt* m = &scratch[0];
  mnt_init(m, "fstab-many");
  /* What `mount` runs for an fstab line "a:b:... MNT fuse.kpackfs ...". */
  mnt_start_helper(m, list, "rw,noauto");
  assert_int_equal(stat_value(m, "archives"), MANY_SOURCES);
  char* source = mount_source_of(m->dir);
  char* want;
  assert_true(asprintf(&want, "%s:+%d", paths[0], MANY_SOURCES - 1) > 0);
  assert_non_null(source);
  assert_string_equal(source, want);
  free(want);
  free(source);
  (void)kt_fusermount(m->dir, false, patience()); /* ends the daemon */
  assert_false(kt_is_mountpoint(m->dir));
  untrack(m);
  free(list);
  free_strings(paths);
}

#define PAST_FD_LIMIT 1030

/* One descriptor per archive for the life of the mount: 1,030 archives do
 * not fit the usual soft limit of 1024, which kpackfs raises to the hard
 * limit; when the hard limit is too low as well, it says so. */
static void test_more_archives_than_the_soft_fd_limit_mount(void** state) {
  (void)state;
  char** paths = archive_copies("fds", PAST_FD_LIMIT);
  char* dir = kt_path(tmp, "fds");
  struct rlimit lim;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
  rlim_t hard = lim.rlim_max;
  if (geteuid() == 0 && hard < 4096)
    hard = 4096; /* root may raise it for the daemon */
  if (hard < PAST_FD_LIMIT + 64)
    skip(); /* this machine's hard limit is below what the test needs */
  /* valgrind caps its client's descriptors at the soft limit it started
   * with, so under valgrind the daemon starts with soft = hard instead. */
  char* nofile;
  assert_true(asprintf(&nofile, "--nofile=%llu:%llu",
                       under_valgrind ? (unsigned long long)hard : 1024ull,
                       (unsigned long long)hard) > 0);
  const char* wrapper[] = {"prlimit", nofile, NULL};
  const char* args[] = {dir, NULL};
  mnt* m = &scratch[0];
  mnt_init(m, "fds");
  mnt_start_wrapped(m, wrapper, args);
  assert_int_equal(stat_value(m, "archives"), PAST_FD_LIMIT);
  char* last = in_mount(m, "lib/librocm.so#0/gfx942/kernel.hsaco");
  size_t size;
  void* data = read_path(last, 65536, &size, 0);
  assert_non_null(data);
  assert_int_equal(size, 5000);
  free(data);
  free(last);
  mnt_stop_clean(m);
  free(nofile);

  /* Hard limit 1024: refused before mounting, naming an archive. */
  mnt_init(&scratch[1], "fds-low");
  char* kpackfs = kt_program("kpackfs");
  char* log = kt_path(tmp, "fds-low.log");
  char* argv[] = {"prlimit", "--nofile=1024:1024", kpackfs, "-f",
                  dir,       scratch[1].dir,       NULL};
  unlink(log);
  int status = run(argv, log);
  char* out = slurp(log);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 ||
      strstr(out, "too many open files") == NULL ||
      strstr(out, "/fds/librocm-kernels-gfx942-") == NULL)
    fail_msg(
        "status %d, want 1 and 'too many open files' naming an "
        "archive:\n%s",
        status, out);
  assert_false(kt_is_mountpoint(scratch[1].dir));
  free(out);
  free(log);
  free(kpackfs);
  free(dir);
  free_strings(paths);
}

/* Sets the TOC "type" of every kernel of `binary` (the writer always
 * writes "hsaco"), re-packing the TOC with msgpack-c. */
static void set_kernel_type(const char* path, const char* binary,
                            const char* type) {
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  assert_non_null(bytes);
  uint64_t toc_offset = fx_toc_offset(bytes, size);
  fx_toc t;
  fx_toc_decode(&t, bytes, size, toc_offset);
  msgpack_object* arches =
      fx_toc_at(&t, (const char* const[]){"toc", binary}, 2, NULL);
  assert_non_null(arches);
  size_t changed = 0;
  for (uint32_t a = 0; a < arches->via.map.size; a++) {
    msgpack_object* field =
        fx_toc_get(&arches->via.map.ptr[a].val, "type", NULL);
    if (field != NULL) {
      field->via.str.ptr = type;
      field->via.str.size = (uint32_t)strlen(type);
      changed++;
    }
  }
  assert_true(changed > 0);
  fx_toc_encode(&t, &bytes, &size, toc_offset);
  kt_write_file(path, bytes, size);
  free(bytes);
}

/* statfs says names are at most 255 bytes: "kernel." + a 249-byte type
 * would be 256, and is skipped like any other name that cannot be a path;
 * 255 bytes exactly is served. */
static void test_kernel_file_names_over_255_bytes_are_skipped(void** state) {
  (void)state;
  char* archive = kt_path(tmp, "long-types.kpack");
  void* code = kt_pattern(3000, 90);
  const kt_kernel k[] = {{"lib/long.so#0", "gfx90a", code, 3000},
                         {"lib/edge.so#0", "gfx90a", code, 3000},
                         {"lib/ok.so#0", "gfx90a", code, 3000}};
  write_fixture(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 3);
  char too_long[250], longest[249];
  memset(too_long, 'x', sizeof(too_long) - 1);
  too_long[sizeof(too_long) - 1] = '\0';
  memset(longest, 'y', sizeof(longest) - 1);
  longest[sizeof(longest) - 1] = '\0';
  set_kernel_type(archive, "lib/long.so#0", too_long);
  set_kernel_type(archive, "lib/edge.so#0", longest);

  mnt* m = &scratch[0];
  mnt_init(m, "long-types");
  const char* args[] = {archive, NULL};
  mnt_start(m, args);
  assert_int_equal(stat_value(m, "kernels"), 2);
  assert_int_equal(stat_value(m, "skipped"), 1);
  char* log = slurp(m->log);
  if (strstr(log, "warning") == NULL ||
      strstr(log, "'lib/long.so#0'") == NULL || strstr(log, "255") == NULL)
    fail_msg("no warning naming lib/long.so#0 and the 255-byte limit:\n%s",
             log);
  free(log);
  char* gone = in_mount(m, "lib/long.so#0");
  struct stat st;
  assert_int_not_equal(stat(gone, &st), 0);
  assert_int_equal(errno, ENOENT);
  free(gone);
  char* s = list_dir(m, "lib");
  assert_string_equal(s, "edge.so#0, ok.so#0");
  free(s);
  char rel[300];
  snprintf(rel, sizeof(rel), "lib/edge.so#0/gfx90a/kernel.%s", longest);
  assert_int_equal(strlen(strrchr(rel, '/') + 1), 255);
  char* edge = in_mount(m, rel);
  size_t size;
  void* data = read_path(edge, 65536, &size, 0);
  if (data == NULL)
    fail_msg("%s: %s", rel, strerror(errno));
  assert_int_equal(size, 3000);
  assert_memory_equal(data, code, 3000);
  free(data);
  free(edge);
  mnt_stop_clean(m);
  free(code);
  free(archive);
}

/* A mounted tree is a `kpack create` input like an extracted one: it packs
 * back into the same archive, whatever else the mount shows beside the
 * kernels. */
static void test_mounted_tree_packs_back_into_the_same_archive(void** state) {
  (void)state;
  char* src = kt_path(tmp, "repack-src.kpack");
  char* again = kt_path(tmp, "repack-again.kpack");
  char* tool = kt_program("kpack");
  void* a = kt_pattern(30000, 61);
  void* b = kt_pattern(20000, 62);
  kt_kernel k[] = {{"lib/r.so#0", "gfx90a:xnack-", a, 30000},
                   {"lib/r.so#0", "gfx942", b, 20000},
                   {"lib/sub/q.so#1", "gfx942", a, 30000}};
  static const char* const arches[] = {"gfx90a:xnack-", "gfx942"};
  write_fixture(src, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 2, k, 3);
  mnt* m = &scratch[0];
  mnt_init(m, "repack");
  const char* args[] = {src, NULL};
  mnt_start(m, args);
  char* argv[] = {
      tool,      "create", "-q",  "--group", "test", "--family",
      "gfxtest", "-o",     again, m->dir,    NULL}; /* the header
                                                       kt_write_archive
                                                       writes */
  assert_int_equal(run(argv, NULL), 0);
  mnt_stop_clean(m);
  size_t n1, n2;
  void* x = kt_read_file(src, &n1);
  void* y = kt_read_file(again, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(x, y, n1);
  free(x);
  free(y);
  free(a);
  free(b);
  free(tool);
  free(src);
  free(again);
}

/* ---- code objects: `kernels`, `metadata.json`, their xattrs -------------- */

/* The `kernels` text docs/mount.md describes, written here from the fixture's
 * kernels: name (tab and backslash escaped), a tab, the resources, "-" for a
 * field the note leaves out. */
static char* expected_kernels(const fx_co_kernel* k, size_t n) {
  char* text = strdup("");
  for (size_t i = 0; i < n; i++) {
    char name[256] = "";
    size_t len = 0;
    for (const char* p = k[i].name; *p; p++) {
      if (*p == '\t' || *p == '\\')
        name[len++] = '\\';
      name[len++] = *p == '\t' ? 't' : *p;
    }
    name[len] = '\0';
    char agpr[32];
    if (k[i].omit & KPACK_CO_AGPR_COUNT)
      strcpy(agpr, "-");
    else
      snprintf(agpr, sizeof(agpr), "%" PRIu64, k[i].agpr);
    char* next;
    assert_true(asprintf(&next,
                         "%s%s\tvgpr=%" PRIu64 " sgpr=%" PRIu64
                         " agpr=%s lds=%" PRIu64 " scratch=%" PRIu64
                         " wave=%" PRIu64 " wg=%" PRIu64 " kernarg=%" PRIu64
                         "\n",
                         text, name, k[i].vgpr, k[i].sgpr, agpr, k[i].lds,
                         k[i].scratch, k[i].wave, k[i].wg, k[i].kernarg) > 0);
    free(text);
    text = next;
  }
  return text;
}

/* What `metadata.json` must hold: the reader's pretty JSON and a newline. */
static char* expected_json(const void* code_object, size_t size) {
  kpack_code_object_t* co;
  char *json, *text;
  size_t len;
  assert_int_equal(kpack_code_object_parse(code_object, size, &co),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_code_object_metadata_json(co, true, &json, &len),
                   KPACK_SUCCESS);
  assert_true(asprintf(&text, "%s\n", json) > 0);
  free(json);
  kpack_code_object_free(co);
  return text;
}

/* A file of the mount as a string, read 4 KiB at a time to EOF. */
static char* read_text(const mnt* m, const char* rel) {
  char* path = in_mount(m, rel);
  size_t size;
  char* data = read_path(path, 4096, &size, 0);
  if (data == NULL)
    fail_msg("%s: %s", path, strerror(errno));
  data = realloc(data, size + 1);
  data[size] = '\0';
  free(path);
  return data;
}

static off_t size_of(const mnt* m, const char* rel) {
  char* path = in_mount(m, rel);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  free(path);
  return st.st_size;
}

/* Runs a command with its output in `log` (truncated first); its exit
 * status, or -1. */
static int run_logged(char* const argv[], const char* log) {
  unlink(log);
  int status = run(argv, log);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define GEMM90 "lib/libgemm.so#0/gfx90a:xnack-/"
#define GEMM942 "lib/libgemm.so#0/gfx942/"

static void test_long_listing_sizes_text_files_without_decompressing(
    void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "co-list");
  const char* args[] = {path_co, path_co_odd, NULL};
  mnt_start(m, args);
  char* log = kt_path(tmp, "co-list.out");
  char* find[] = {"find", m->dir, NULL};
  char* ls[] = {"ls", "-lR", m->dir, NULL};
  char* du[] = {"du", "-a", m->dir, NULL};
  assert_int_equal(run_logged(find, log), 0);
  char* out = slurp(log);
  assert_non_null(strstr(out, GEMM90 "kernels\n"));
  assert_non_null(strstr(out, GEMM942 "metadata.json\n"));
  free(out);
  assert_int_equal(run_logged(ls, log), 0);
  assert_int_equal(run_logged(du, log), 0);
  char* hsaco = in_mount(m, GEMM90 "kernel.hsaco");
  char names[512];
  assert_true(listxattr(hsaco, names, sizeof(names)) > 0);
  free(hsaco);
  /* ls -lR and du stat every text file: each code object's note was
   * decoded for its exact size, but no kernel was decompressed. */
  assert_int_equal(stat_value(m, "decompressions"), 0);
  assert_int_equal(stat_value(m, "renders"), 4);
  char* want = expected_kernels(gemm_gfx90a, 2);
  assert_int_equal(size_of(m, GEMM90 "kernels"), strlen(want));
  free(want);
  want = expected_json(co_gfx90a.data, co_gfx90a.size);
  assert_int_equal(size_of(m, GEMM90 "metadata.json"), strlen(want));
  free(want);
  assert_int_equal(stat_value(m, "renders"), 4);
  free(log);
  mnt_stop_clean(m);
}

/* A listing of a fresh mount (readdir, find -name, as `ls` does without
 * -l) neither decompresses nor renders. */
static void test_find_by_name_renders_and_decompresses_nothing(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "co-find");
  const char* args[] = {path_co, path_co_odd, NULL};
  mnt_start(m, args);
  char* log = kt_path(tmp, "co-find.out");
  char* find[] = {"find", m->dir, "-name", "kernels", NULL};
  char* ls[] = {"ls", "-R", m->dir, NULL};
  assert_int_equal(run_logged(find, log), 0);
  char* out = slurp(log);
  assert_non_null(strstr(out, GEMM90 "kernels\n"));
  assert_null(strstr(out, "metadata.json"));
  free(out);
  assert_int_equal(run_logged(ls, log), 0);
  assert_int_equal(stat_value(m, "decompressions"), 0);
  assert_int_equal(stat_value(m, "renders"), 0);
  assert_int_equal(stat_value(m, "render_decoded_bytes"), 0);
  /* A stat then renders from a prefix, sized exactly, and only that. */
  char* want = expected_kernels(gemm_gfx90a, 2);
  assert_int_equal(size_of(m, GEMM90 "kernels"), strlen(want));
  free(want);
  assert_int_equal(stat_value(m, "renders"), 1);
  assert_int_equal(stat_value(m, "renders_ahead"), 0);
  /* A second is a stat walk: the kernels after it (both of path_co_odd)
   * are rendered ahead by the workers, once each. */
  want = expected_kernels(gemm_gfx942, 3);
  assert_int_equal(size_of(m, GEMM942 "kernels"), strlen(want));
  free(want);
  for (long waited = 0;
       stat_value(m, "renders_ahead") < 2 && waited < patience() * 1000L;
       waited += 10)
    usleep(10000);
  assert_int_equal(stat_value(m, "renders_ahead"), 2);
  assert_int_equal(stat_value(m, "renders"), 4);
  assert_true(size_of(m, "lib/libodd.so#0/gfx1100/metadata.json") > 0);
  assert_int_equal(size_of(m, "lib/libodd.so#0/gfx90a/kernels"), 0);
  assert_int_equal(stat_value(m, "renders"), 4);
  assert_int_equal(stat_value(m, "decompressions"), 0);
  assert_true(stat_value(m, "render_decoded_bytes") > 0);
  free(log);
  mnt_stop_clean(m);
}

static void test_kernels_and_metadata_json_show_the_code_object(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "co-text");
  const char* args[] = {path_co, NULL};
  mnt_start(m, args);

  char* want = expected_kernels(gemm_gfx90a, 2);
  char* got = read_text(m, GEMM90 "kernels");
  assert_string_equal(got, want);
  /* Now known: the exact size, without rendering again. */
  assert_int_equal(size_of(m, GEMM90 "kernels"), strlen(want));
  free(got);
  char* json = expected_json(co_gfx90a.data, co_gfx90a.size);
  got = read_text(m, GEMM90 "metadata.json");
  assert_string_equal(got, json);
  assert_int_equal(size_of(m, GEMM90 "metadata.json"), strlen(json));
  free(got);
  /* One render served both files, from a prefix: no kernel decompressed. */
  assert_int_equal(stat_value(m, "decompressions"), 0);
  assert_int_equal(stat_value(m, "renders"), 1);
  /* Later opens are served from what was kept. */
  for (int i = 0; i < 3; i++) {
    got = read_text(m, GEMM90 "kernels");
    assert_string_equal(got, want);
    free(got);
  }
  assert_int_equal(stat_value(m, "renders"), 1);
  assert_int_equal(stat_value(m, "decompressions"), 0);
  free(want);
  free(json);

  /* A name with a tab and a backslash cannot break its line. */
  want = expected_kernels(gemm_gfx942, 3);
  got = read_text(m, GEMM942 "kernels");
  assert_string_equal(got, want);
  assert_non_null(strstr(got, "odd\\tname\\\\\tvgpr=1 "));
  free(got);
  free(want);
  assert_int_equal(stat_value(m, "renders"), 2);
  mnt_stop_clean(m);
}

static void test_cat_grep_wc_and_read_see_the_whole_text(void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "co-tools");
  const char* args[] = {path_co, NULL};
  mnt_start(m, args);
  char* log = kt_path(tmp, "co-tools.out");

  /* grep -r over a fresh mount: every `kernels` is opened unrendered. */
  char* grep[] = {"grep", "-r", "gemm_f32", m->dir, "--include=kernels", NULL};
  assert_int_equal(run_logged(grep, log), 0);
  char* out = slurp(log);
  char* line;
  assert_true(
      asprintf(&line, "%s/" GEMM90 "kernels:gemm_f32\tvgpr=128 ", m->dir) > 0);
  if (strncmp(out, line, strlen(line)) != 0 ||
      strchr(out, '\n') != out + strlen(out) - 1)
    fail_msg("grep -r found:\n%s", out);
  free(line);
  free(out);

  char* path = in_mount(m, GEMM942 "kernels");
  char* wc[] = {"wc", "-l", path, NULL};
  assert_int_equal(run_logged(wc, log), 0);
  out = slurp(log);
  assert_int_equal(strtoul(out, NULL, 10), 3);
  free(out);
  free(path);

  path = in_mount(m, GEMM942 "metadata.json");
  char* cat[] = {"cat", path, NULL};
  assert_int_equal(run_logged(cat, log), 0);
  out = slurp(log);
  char* json = expected_json(co_gfx942.data, co_gfx942.size);
  assert_string_equal(out, json);
  free(out);

  /* One read() into a large buffer, as open().read() does. */
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  size_t cap = strlen(json) + 4096;
  char* buf = malloc(cap);
  assert_int_equal(read(fd, buf, cap), (ssize_t)strlen(json));
  assert_memory_equal(buf, json, strlen(json));
  assert_int_equal(read(fd, buf, cap), 0);
  close(fd);
  free(buf);
  free(json);
  free(path);
  free(log);
  mnt_stop_clean(m);
}

static void test_code_object_xattrs_and_kernels_that_are_not_code_objects(
    void** state) {
  (void)state;
  mnt* m = &scratch[0];
  mnt_init(m, "co-xattr");
  const char* args[] = {path_co, path_co_odd, NULL};
  mnt_start(m, args);

  char* path = in_mount(m, GEMM90 "kernel.hsaco");
  char list[1024];
  ssize_t len = listxattr(path, list, sizeof(list));
  assert_true(len > 0);
  assert_true(memmem(list, (size_t)len, "user.kpack.target", 18) != NULL);
  assert_true(memmem(list, (size_t)len, "user.kpack.kernels", 19) != NULL);
  assert_int_equal(stat_value(m, "renders"), 0); /* listing renders nothing */
  expect_xattr(path, "user.kpack.target", "gfx90a:xnack-");
  expect_xattr(path, "user.kpack.kernels", "2");
  free(path);
  path = in_mount(m, GEMM942 "kernel.hsaco");
  expect_xattr(path, "user.kpack.target", "gfx942");
  expect_xattr(path, "user.kpack.kernels", "3");
  free(path);
  assert_int_equal(stat_value(m, "renders"), 2);

  /* No metadata note: no kernels, and a JSON null. */
  path = in_mount(m, "lib/libodd.so#0/gfx1100/kernel.hsaco");
  expect_xattr(path, "user.kpack.target", "gfx1100");
  expect_xattr(path, "user.kpack.kernels", "0");
  free(path);
  char* text = read_text(m, "lib/libodd.so#0/gfx1100/kernels");
  assert_string_equal(text, "");
  free(text);
  text = read_text(m, "lib/libodd.so#0/gfx1100/metadata.json");
  assert_string_equal(text, "null\n");
  free(text);

  /* Bytes that are no code object: no such attributes, and empty text
   * files (what `kpack extract` writes for them); the kernel still reads. */
  path = in_mount(m, "lib/libodd.so#0/gfx90a/kernel.hsaco");
  errno = 0;
  assert_int_equal(getxattr(path, "user.kpack.target", list, sizeof(list)), -1);
  assert_int_equal(errno, ENODATA);
  size_t size;
  void* data = read_path(path, 65536, &size, 0);
  assert_non_null(data);
  assert_int_equal(size, 5000);
  free(data);
  free(path);
  const char* texts[] = {"lib/libodd.so#0/gfx90a/kernels",
                         "lib/libodd.so#0/gfx90a/metadata.json"};
  uint64_t renders = stat_value(m, "renders");
  for (int i = 0; i < 2; i++) {
    text = read_text(m, texts[i]);
    assert_string_equal(text, "");
    free(text);
    assert_int_equal(size_of(m, texts[i]), 0);
  }
  /* Rendered once, as empty, and kept: not a failure to retry. */
  assert_int_equal(stat_value(m, "renders"), renders);
  assert_int_equal(stat_value(m, "render_failures"), 0);
  mnt_stop_clean(m);
}

typedef struct text_reader {
  const mnt* m;
  const char* rel;
  const char* want;
  pthread_barrier_t* start;
  bool ok;
} text_reader;

static void* read_text_concurrently(void* arg) {
  text_reader* r = arg;
  pthread_barrier_wait(r->start);
  char* path = in_mount(r->m, r->rel);
  size_t size;
  char* data = read_path(path, 1000, &size, 0);
  r->ok = data != NULL && size == strlen(r->want) &&
          memcmp(data, r->want, size) == 0;
  free(data);
  free(path);
  return NULL;
}

/* Eight readers open both text files of a kernel at once on a fresh mount:
 * one render, no decompression, and every reader sees the whole text. A
 * reader whose size refresh raced another reader's once read it as empty,
 * so this runs a few rounds. */
static void test_parallel_first_reads_render_once(void** state) {
  (void)state;
  const char* dirs[] = {GEMM90, GEMM942};
  char* json[2] = {expected_json(co_gfx90a.data, co_gfx90a.size),
                   expected_json(co_gfx942.data, co_gfx942.size)};
  char* kernels[2] = {expected_kernels(gemm_gfx90a, 2),
                      expected_kernels(gemm_gfx942, 3)};
  for (int round = 0; round < 3; round++) {
    mnt* m = &scratch[0];
    mnt_init(m, "co-parallel");
    const char* args[] = {path_co, NULL};
    mnt_start(m, args);
    for (int d = 0; d < 2; d++) {
      enum { TEXT_READERS = 8 };
      pthread_t threads[TEXT_READERS];
      text_reader readers[TEXT_READERS];
      char rel[2][128];
      snprintf(rel[0], sizeof(rel[0]), "%smetadata.json", dirs[d]);
      snprintf(rel[1], sizeof(rel[1]), "%skernels", dirs[d]);
      pthread_barrier_t start;
      pthread_barrier_init(&start, NULL, TEXT_READERS);
      for (int i = 0; i < TEXT_READERS; i++) {
        readers[i] = (text_reader){m, rel[i % 2], i % 2 ? kernels[d] : json[d],
                                   &start, false};
        assert_int_equal(pthread_create(&threads[i], NULL,
                                        read_text_concurrently, &readers[i]),
                         0);
      }
      for (int i = 0; i < TEXT_READERS; i++) {
        pthread_join(threads[i], NULL);
        if (!readers[i].ok)
          fail_msg("round %d: a reader of %s saw other bytes", round,
                   readers[i].rel);
      }
      pthread_barrier_destroy(&start);
    }
    assert_int_equal(stat_value(m, "renders"), 2);
    assert_int_equal(stat_value(m, "decompressions"), 0);
    mnt_stop_clean(m);
    mnt_free(m);
  }
  for (int d = 0; d < 2; d++) {
    free(json[d]);
    free(kernels[d]);
  }
}

/* Debian's librocrand1 packed by the kpack tool, once per run. */
static char* real_archive(void) {
  static char* path;
  if (path != NULL)
    return path;
  char* lib = kt_librocrand();
  char* kpack = kt_program("kpack");
  char* input;
  path = kt_path(tmp, "rand_real.kpack");
  assert_true(asprintf(&input, "%s=lib/librocrand.so.1", lib) > 0);
  char* argv[] = {kpack, "create",   "-o",  path, "-l",
                  "1",   "--fatbin", input, NULL};
  char* log = kt_path(tmp, "rand_real.log");
  if (run_logged(argv, log) != 0) {
    char* text = slurp(log);
    fail_msg("kpack create failed:\n%s", text);
  }
  free(log);
  free(input);
  free(kpack);
  free(lib);
  return path;
}

static void test_real_library_files_match_the_reader(void** state) {
  (void)state;
  const char* archive = real_archive();
  mnt* m = &scratch[0];
  mnt_init(m, "co-real");
  /* A cache that holds all seven, so that reading kernel.hsaco after its
   * text files decompresses nothing more. */
  const char* args[] = {"-o", "cache_size=64M", archive, NULL};
  mnt_start(m, args);
  char* log = kt_path(tmp, "co-real.out");
  char* grep[] = {"grep",
                  "-rl",
                  "^_ZN12rocrand_host6detailL19init_engines_kernelEPN14rocrand_"
                  "device13xorwow_engineEjyy\t",
                  m->dir,
                  "--include=kernels",
                  NULL};
  assert_int_equal(run_logged(grep, log), 0);
  char* out = slurp(log);
  size_t lines = 0;
  for (char* p = out; (p = strchr(p, '\n')) != NULL; p++)
    lines++;
  assert_int_equal(lines, 7); /* in every arch */
  free(out);

  /* What the kpack tool says, for comparison: `list --kernels`, one row
   * per arch and kernel, reformatted the way `kernels` writes it. */
  char* kpack = kt_program("kpack");
  char* list[] = {kpack, "list", "--kernels", (char*)archive, NULL};
  char* table;
  assert_int_equal(kt_run(list, 120, &table, NULL), 0);

  kpack_archive_t a;
  assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
  char* arches = list_dir(m, "lib/librocrand.so.1#0");
  size_t checked = 0;
  for (char* arch = strtok(arches, ", "); arch != NULL;
       arch = strtok(NULL, ", ")) {
    void* code;
    size_t size;
    assert_int_equal(
        kpack_get_kernel(a, "lib/librocrand.so.1#0", arch, &code, &size),
        KPACK_SUCCESS);
    kpack_code_object_t* co;
    kpack_code_object_info_t info;
    assert_int_equal(kpack_code_object_parse(code, size, &co), KPACK_SUCCESS);
    kpack_code_object_get_info(co, &info);
    char rel[256];
    snprintf(rel, sizeof(rel), "lib/librocrand.so.1#0/%s/kernels", arch);
    char* text = read_text(m, rel);
    char* line = text;
    for (size_t i = 0; i < info.kernel_count; i++) {
      kpack_co_kernel_t k;
      kpack_code_object_get_kernel(co, i, &k);
      char prefix[512];
      snprintf(prefix, sizeof(prefix), "%s\tvgpr=%" PRIu64 " sgpr=%" PRIu64,
               k.name, k.vgpr_count, k.sgpr_count);
      if (strncmp(line, prefix, strlen(prefix)) != 0)
        fail_msg("%s line %zu: %.200s", rel, i, line);
      line = strchr(line, '\n') + 1;
    }
    assert_string_equal(line, "");
    char* tool_text = strdup("");
    for (char* row = strchr(table, '\n') + 1; *row;) {
      char b[64], ar[64], v[24], sg[24], ag[24], l[24], sc[24], w[24], g[24],
          ka[24], name[512];
      char* end = strchr(row, '\n');
      if (sscanf(row, "%63s %63s %23s %23s %23s %23s %23s %23s %23s %23s %511s",
                 b, ar, v, sg, ag, l, sc, w, g, ka, name) == 11 &&
          strcmp(ar, arch) == 0) {
        char* next;
        assert_true(asprintf(&next,
                             "%s%s\tvgpr=%s sgpr=%s agpr=%s lds=%s scratch=%s "
                             "wave=%s wg=%s kernarg=%s\n",
                             tool_text, name, v, sg, ag, l, sc, w, g, ka) > 0);
        free(tool_text);
        tool_text = next;
      }
      row = end + 1;
    }
    assert_string_equal(text, tool_text);
    free(tool_text);
    free(text);
    char* json = expected_json(code, size);
    snprintf(rel, sizeof(rel), "lib/librocrand.so.1#0/%s/metadata.json", arch);
    text = read_text(m, rel);
    assert_string_equal(text, json);
    /* ... and `kpack info --metadata` on the kernel.hsaco beside it. */
    snprintf(rel, sizeof(rel), "lib/librocrand.so.1#0/%s/kernel.hsaco", arch);
    char* hsaco = in_mount(m, rel);
    char* show[] = {kpack, "info", "--metadata", hsaco, NULL};
    char* tool_json;
    assert_int_equal(kt_run(show, 120, &tool_json, NULL), 0);
    assert_string_equal(text, tool_json);
    free(tool_json);
    free(hsaco);
    free(text);
    free(json);
    kpack_code_object_free(co);
    kpack_free_kernel(code);
    checked++;
  }
  assert_int_equal(checked, 7);
  /* One decompression per code object, whatever read it. */
  assert_int_equal(stat_value(m, "decompressions"), 7);
  free(table);
  free(kpack);
  free(arches);
  kpack_close(a);
  free(log);
  mnt_stop_clean(m);
}

/* Beside a kernel whose entry has a map, toc-metadata.msgpack holds the
 * map's exact bytes, sized from the TOC: listing and reading it
 * decompresses nothing, and a kernel without a map has no such file. */
static void test_toc_metadata_msgpack_is_the_map_byte_for_byte(void** state) {
  (void)state;
  /* {"tile": int16 128, "tag": str8 "fast"}: encodings a re-encoding
   * would shorten. */
  static const uint8_t map[] = {0x82, 0xa4, 't',  'i', 'l', 'e', 0xd1,
                                0x00, 0x80, 0xa3, 't', 'a', 'g', 0xd9,
                                0x04, 'f',  'a',  's', 't'};
  char* path = kt_path(tmp, "tocmeta.kpack");
  void* bytes = kt_pattern(40000, 9);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  assert_int_equal(
      kpack_writer_add_kernel_with_metadata(w, "lib/m.so#0", "gfx90a", bytes,
                                            40000, map, sizeof map),
      KPACK_SUCCESS);
  assert_int_equal(
      kpack_writer_add_kernel(w, "lib/m.so#0", "gfx942", bytes, 40000),
      KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  mnt* m = &scratch[0];
  mnt_init(m, "tocmeta");
  const char* args[] = {path, NULL};
  mnt_start(m, args);

  char* log = kt_path(tmp, "tocmeta.out");
  char* find[] = {"find", m->dir, "-type", "f", NULL};
  assert_int_equal(run_logged(find, log), 0);
  char* out = slurp(log);
  assert_non_null(strstr(out, "/lib/m.so#0/gfx90a/toc-metadata.msgpack\n"));
  assert_null(strstr(out, "/lib/m.so#0/gfx942/toc-metadata.msgpack"));
  free(out);
  free(log);
  char* names = list_dir(m, "lib/m.so#0/gfx90a");
  assert_string_equal(names,
                      "kernel.hsaco, kernels, metadata.json, "
                      "toc-metadata.msgpack");
  free(names);
  char* file = in_mount(m, "lib/m.so#0/gfx90a/toc-metadata.msgpack");
  struct stat st;
  assert_int_equal(stat(file, &st), 0);
  assert_int_equal(st.st_size, sizeof map); /* exact before any read */
  assert_int_equal(st.st_mode, S_IFREG | 0444);
  size_t size;
  void* got = read_path(file, 7, &size, 0); /* in pieces */
  assert_non_null(got);
  assert_int_equal(size, sizeof map);
  assert_memory_equal(got, map, size);
  free(got);
  errno = 0;
  assert_int_equal(open(file, O_WRONLY), -1);
  assert_int_equal(errno, EROFS);
  assert_int_equal(stat_value(m, "decompressions"), 0);
  assert_int_equal(stat_value(m, "renders"), 0);
  free(file);
  mnt_stop_clean(m);
  free(bytes);
  free(path);
}

/* The files kpackfs adds beside a kernel (kernels, metadata.json,
 * toc-metadata.msgpack) leave a name an earlier source already gave an
 * entry to that entry, with a warning naming the file. */
static void test_files_beside_a_kernel_leave_taken_names_alone(void** state) {
  (void)state;
  static const uint8_t map[] = {0x81, 0xa1, 'k', 0x01}; /* {"k": 1} */
  char* first = kt_path(tmp, "taken-first.kpack");
  char* second = kt_path(tmp, "taken-second.kpack");
  void* bytes = kt_pattern(5000, 12);
  const kt_kernel k[] = {
      {"lib/x.so#0/gfx90a", "kernels", bytes, 5000},
      {"lib/x.so#0/gfx90a", "toc-metadata.msgpack", bytes, 5000}};
  write_fixture(first, KPACK_COMPRESSION_NOOP, NULL, 0, k, 2);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_NOOP};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(second, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel_with_metadata(
                       w, "lib/x.so#0", "gfx90a", bytes, 5000, map, sizeof map),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  mnt* m = &scratch[0];
  mnt_init(m, "taken");
  const char* args[] = {first, second, NULL};
  mnt_start(m, args);

  char* names = list_dir(m, "lib/x.so#0/gfx90a");
  assert_string_equal(names,
                      "kernel.hsaco, kernels, metadata.json, "
                      "toc-metadata.msgpack");
  free(names);
  static const char* const dirs[] = {"lib/x.so#0/gfx90a/kernels",
                                     "lib/x.so#0/gfx90a/toc-metadata.msgpack"};
  for (int i = 0; i < 2; i++) {
    char* path = in_mount(m, dirs[i]);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    free(path);
  }
  char* json = in_mount(m, "lib/x.so#0/gfx90a/metadata.json");
  struct stat st;
  assert_int_equal(stat(json, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  free(json);
  char* log = slurp(m->log);
  static const char* const warned[] = {"kernels", "toc-metadata.msgpack"};
  for (int i = 0; i < 2; i++) {
    char want[200];
    snprintf(want, sizeof want,
             "%s: 'lib/x.so#0' arch 'gfx90a': no '%s' file, the name is "
             "taken",
             second, warned[i]);
    if (strstr(log, want) == NULL)
      fail_msg("no warning \"%s\" in:\n%s", want, log);
  }
  assert_null(strstr(log, "no 'metadata.json' file"));
  free(log);
  mnt_stop_clean(m);
  free(bytes);
  free(first);
  free(second);
}

/* ---- one tree: what a mount shows is what `kpack extract` writes --------- */

/* Every directory and regular file below root, as "D rel" and "F rel",
 * sorted; .kpackfs at the top is left out (kpackfs's own files). */
typedef struct tree_list {
  char** items;
  size_t count, cap;
} tree_list;

static void tree_push(tree_list* l, char kind, const char* rel) {
  if (l->count == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->items = realloc(l->items, l->cap * sizeof(*l->items));
  }
  assert_true(asprintf(&l->items[l->count++], "%c %s", kind, rel) > 0);
}

static void tree_walk(const char* root, const char* rel, tree_list* l) {
  char* dir = *rel ? kt_path(root, rel) : strdup(root);
  DIR* d = opendir(dir);
  if (d == NULL)
    fail_msg("%s: %s", dir, strerror(errno));
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        (!*rel && strcmp(e->d_name, ".kpackfs") == 0))
      continue;
    char* child;
    assert_true(asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >
                0);
    char* path = kt_path(root, child);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    if (S_ISDIR(st.st_mode)) {
      tree_push(l, 'D', child);
      tree_walk(root, child, l);
    } else if (S_ISREG(st.st_mode)) {
      tree_push(l, 'F', child);
    } else {
      fail_msg("%s: neither a directory nor a regular file", path);
    }
    free(path);
    free(child);
  }
  closedir(d);
  free(dir);
}

static int by_string(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static void tree_free(tree_list* l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i]);
  free(l->items);
}

/* The mounted tree and an extracted one hold the same names, and each file
 * the same bytes and the same size, from the first stat on (text files
 * included). Returns how many files were compared. */
static size_t assert_same_tree(const char* mounted, const char* extracted) {
  tree_list a = {0}, b = {0};
  tree_walk(mounted, "", &a);
  tree_walk(extracted, "", &b);
  qsort(a.items, a.count, sizeof(*a.items), by_string);
  qsort(b.items, b.count, sizeof(*b.items), by_string);
  for (size_t i = 0; i < a.count || i < b.count; i++) {
    const char* x = i < a.count ? a.items[i] : "(nothing)";
    const char* y = i < b.count ? b.items[i] : "(nothing)";
    if (strcmp(x, y) != 0)
      fail_msg("mount has %s where the extracted tree has %s", x, y);
  }
  size_t compared = 0;
  for (size_t i = 0; i < a.count; i++) {
    if (a.items[i][0] != 'F')
      continue;
    const char* rel = a.items[i] + 2;
    char* in_mnt = kt_path(mounted, rel);
    char* in_tree = kt_path(extracted, rel);
    struct stat before, after;
    assert_int_equal(stat(in_mnt, &before), 0);
    size_t n1, n2;
    void* x = read_path(in_mnt, 65536, &n1, 0);
    if (x == NULL)
      fail_msg("%s: %s", in_mnt, strerror(errno));
    void* y = kt_read_file(in_tree, &n2);
    assert_non_null(y);
    if (n1 != n2 || memcmp(x, y, n1) != 0)
      fail_msg("%s: %zu bytes in the mount, %zu extracted, or other bytes", rel,
               n1, n2);
    assert_int_equal(stat(in_mnt, &after), 0);
    assert_int_equal(after.st_size, n2);
    if (before.st_size != (off_t)n2)
      fail_msg("%s: size %lld before the first read, %zu bytes", rel,
               (long long)before.st_size, n2);
    free(x);
    free(y);
    free(in_mnt);
    free(in_tree);
    compared++;
  }
  tree_free(&a);
  tree_free(&b);
  return compared;
}

/* Code objects with and without a note, bytes that are no code object, and
 * metadata maps on three of them, in the canonical form `kpack create`
 * writes (entries and arches in byte order, its default level), so that a
 * tree re-packs into exactly this archive. */
static char* one_tree_archive(const char* name) {
  static const uint8_t map1[] = {0x81, 0xa4, 't', 'i', 'l', 'e', 0xd1, 0, 128};
  static const uint8_t map2[] = {0x82, 0xa3, 't', 'a', 'g',  0xd9, 2,   'o',
                                 'k',  0xa2, 'i', 'd', 0xc4, 1,    0xab};
  static const uint8_t map3[] = {0x80};
  static const char* const arches[] = {"gfx1100", "gfx90a", "gfx90a:xnack-",
                                       "gfx942"};
  fx_co_spec bare = {.e_flags =
                         fx_co_flags(FX_MACH_GFX1100, KPACK_FEATURE_UNSUPPORTED,
                                     KPACK_FEATURE_UNSUPPORTED)};
  fx_buf no_note = fx_code_object(&bare);
  void* junk = kt_pattern(5000, 31);
  void* more = kt_pattern(70000, 32);
  const struct {
    const char* binary;
    const char* arch;
    const void* data;
    size_t size;
    const uint8_t* map;
    size_t map_size;
  } k[] = {
      {"lib/libgemm.so#0", "gfx90a:xnack-", co_gfx90a.data, co_gfx90a.size,
       NULL, 0},
      {"lib/libgemm.so#0", "gfx942", co_gfx942.data, co_gfx942.size, map1,
       sizeof map1},
      {"lib/libodd.so#0", "gfx1100", no_note.data, no_note.size, map2,
       sizeof map2},
      {"lib/libodd.so#0", "gfx90a", junk, 5000, map3, sizeof map3},
      {"lib/sub/q.so#1", "gfx942", more, 70000, NULL, 0},
  };
  char* path = kt_path(tmp, name);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                              .group_name = "test",
                              .gfx_arch_family = "gfxtest",
                              .gfx_arches = arches,
                              .gfx_arch_count = 4};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    assert_int_equal(kpack_writer_add_kernel_with_metadata(
                         w, k[i].binary, k[i].arch, k[i].data, k[i].size,
                         k[i].map, k[i].map_size),
                     KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  fx_free(&no_note);
  free(junk);
  free(more);
  return path;
}

/* `kpack ARGS...` with its output in `log`; fails the test unless it exits
 * 0. */
static void kpack_ok(const char* log, const char* const* args) {
  char* argv[32];
  size_t n = 0;
  argv[n++] = kt_program("kpack");
  for (; *args != NULL && n < 31; args++)
    argv[n++] = (char*)*args;
  argv[n] = NULL;
  if (run_logged(argv, log) != 0) {
    char* text = slurp(log);
    fail_msg("%s failed:\n%s", args[-1], text);
  }
  free(argv[0]);
}
#define KPACK_OK(log, ...) \
  kpack_ok(log, (const char* const[]){__VA_ARGS__, NULL})

/* `diff -r` between the extracted tree and a fresh mount is empty, as a
 * user would check it, and so is the stricter comparison above. */
static void assert_mount_is_the_extracted_tree(const mnt* m,
                                               const char* extracted,
                                               size_t min_files) {
  assert_string_not_equal(m->dir, extracted);
  char* log = kt_path(tmp, "diff.out");
  char* diff[] = {"diff",           "-r",   "-x", ".kpackfs",
                  (char*)extracted, m->dir, NULL};
  if (run_logged(diff, log) != 0) {
    char* text = slurp(log);
    fail_msg("diff -r %s %s:\n%s", extracted, m->dir, text);
  }
  free(log);
  assert_true(assert_same_tree(m->dir, extracted) >= min_files);
}

static void test_mount_and_extract_show_one_tree(void** state) {
  (void)state;
  char* archive = one_tree_archive("one-tree.kpack");
  char* tree = kt_path(tmp, "one-tree-extracted");
  char* log = kt_path(tmp, "one-tree.log");
  KPACK_OK(log, "extract", "-C", tree, archive);
  mnt* m = &scratch[0];
  mnt_init(m, "one-tree");
  const char* args[] = {archive, NULL};
  mnt_start(m, args);
  /* 5 kernels, 4 of type hsaco with 2 text files, 3 maps. */
  assert_mount_is_the_extracted_tree(m, tree, 16);
  char* empty = kt_path(tree, "lib/libodd.so#0/gfx90a/kernels");
  size_t n;
  free(kt_read_file(empty, &n));
  assert_int_equal(n, 0); /* no code object: an empty file on both sides */
  free(empty);
  mnt_stop_clean(m);
  kt_rmtree(tree);
  free(tree);
  free(log);
  free(archive);
}

/* archive -> mount -> create and archive -> extract -> create both give
 * back the archive, byte for byte, metadata maps included. */
static void test_mounted_and_extracted_trees_repack_with_their_maps(
    void** state) {
  (void)state;
  char* archive = one_tree_archive("repack-maps.kpack");
  char* tree = kt_path(tmp, "repack-maps-extracted");
  char* from_mount = kt_path(tmp, "repack-maps-mount.kpack");
  char* from_tree = kt_path(tmp, "repack-maps-tree.kpack");
  char* log = kt_path(tmp, "repack-maps.log");
  mnt* m = &scratch[0];
  mnt_init(m, "repack-maps");
  const char* args[] = {archive, NULL};
  mnt_start(m, args);
  KPACK_OK(log, "create", "-q", "--group", "test", "--family", "gfxtest", "-o",
           from_mount, m->dir);
  /* Re-packing reads each kernel once and no text file. */
  assert_int_equal(stat_value(m, "renders"), 0);
  mnt_stop_clean(m);
  assert_true(kt_same_file(archive, from_mount));
  KPACK_OK(log, "extract", "-C", tree, archive);
  KPACK_OK(log, "create", "-q", "--group", "test", "--family", "gfxtest", "-o",
           from_tree, tree);
  assert_true(kt_same_file(archive, from_tree));
  kt_rmtree(tree);
  free(tree);
  free(from_mount);
  free(from_tree);
  free(log);
  free(archive);
}

/* One hostile TOC, two readers: the names a mount skips, extract skips
 * (kpack_layout.h decides for both), so they show one tree. Before, extract
 * wrote into a .kpackfs of its own, and left the directory of a kernel
 * whose file name was too long behind, empty. */
static void test_hostile_toc_names_give_mount_and_extract_one_tree(
    void** state) {
  (void)state;
  char long_binary[300], long_arch[300], long_type[300];
  memset(long_binary, 'b', 256);
  strcpy(long_binary + 256, "#0");
  memset(long_arch, 'g', 256);
  long_arch[256] = '\0';
  memset(long_type, 't', 249); /* "kernel." + 249 bytes: 256 */
  long_type[249] = '\0';
  const kt_kernel shape[] = {
      {".kpackfs/x#0", "gfx90a", NULL, 100},
      {long_binary, "gfx90a", NULL, 100},
      {"ok#0", long_arch, NULL, 100},
      {"ok#0", "gfx90a", NULL, 300},
      {"typed#0", "gfx90a", NULL, 100},
      {"fine/sub#1", "gfx942", NULL, 5000},
      {"../up#0", "gfx942", NULL, 100},
  };
  kt_kernel* k = patterned(shape, 7, 900);
  char* archive = kt_path(tmp, "hostile.kpack");
  write_fixture(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 7);
  free_patterned(k, 7);
  set_kernel_type(archive, "typed#0", long_type);

  char* tree = kt_path(tmp, "hostile-extracted");
  char* log = kt_path(tmp, "hostile.log");
  char* kpack = kt_program("kpack");
  char* extract[] = {kpack, "extract", "-C", tree, archive, NULL};
  /* Every skipped name is reported, and makes the exit status 1. */
  assert_int_equal(run_logged(extract, log), 1);
  char* text = slurp(log);
  assert_non_null(strstr(text, "reserved name .kpackfs"));
  assert_non_null(strstr(text, "path component longer than 255 bytes"));
  assert_non_null(strstr(text, "arch is not a file name"));
  assert_non_null(strstr(text, "longer than 255 bytes"));
  free(text);

  mnt* m = &scratch[0];
  mnt_init(m, "hostile");
  const char* args[] = {archive, NULL};
  mnt_start(m, args);
  /* ok#0/gfx90a and fine/sub#1/gfx942: a kernel and two text files each. */
  assert_mount_is_the_extracted_tree(m, tree, 6);
  mnt_stop_clean(m);
  /* The comparison leaves the mount's own .kpackfs aside: extract must not
   * have made one. */
  char* reserved = kt_path(tree, ".kpackfs");
  struct stat st;
  assert_int_equal(lstat(reserved, &st), -1);
  free(reserved);
  kt_rmtree(tree);
  free(kpack);
  free(tree);
  free(log);
  free(archive);
}

/* Binary paths that run through another binary's directory, in one
 * archive: a binary named like another's directory ("lib" and
 * "lib/libx.so#0"), binaries inside another's arch directories
 * ("x#0/gfx90a", "x#0/gfx942/deep#1"), and names that differ from a
 * binary's only past a byte below '/' ("a#0-b", "a#0.c" sort between "a#0"
 * and "a#0/d" byte-wise). Mount and extract show one tree: the directories
 * where paths meet list both, with their link counts, and a second mount,
 * walked in the opposite order, gives every path the same inode number. */
static void test_nested_binary_paths_give_mount_and_extract_one_tree(
    void** state) {
  (void)state;
  const kt_kernel shape[] = {
      {"a#0", "gfx90a", NULL, 100},
      {"a#0-b", "gfx90a", NULL, 200},
      {"a#0.c", "gfx90a", NULL, 300},
      {"a#0/d", "gfx90a", NULL, 400},
      {"a#0/d/e", "gfx942", NULL, 500},
      {"lib", "gfx90a", NULL, 600},
      {"lib/libx.so#0", "gfx942", NULL, 700},
      {"x#0", "gfx90a", NULL, 800},
      {"x#0", "gfx942", NULL, 900},
      {"x#0/gfx90a", "gfx1100", NULL, 1000},
      {"x#0/gfx90a", "gfx942", NULL, 1100},
      {"x#0/gfx942/deep#1", "gfx1100", NULL, 1200},
  };
  enum { N = sizeof(shape) / sizeof(shape[0]) };
  kt_kernel* k = patterned(shape, N, 950);
  char* archive = kt_path(tmp, "nested.kpack");
  write_fixture(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, N);
  free_patterned(k, N);
  char* tree = kt_path(tmp, "nested-extracted");
  char* log = kt_path(tmp, "nested.log");
  KPACK_OK(log, "extract", "-C", tree, archive);

  mnt* m = &scratch[0];
  mnt_init(m, "nested");
  const char* args[] = {archive, NULL};
  mnt_start(m, args);
  assert_mount_is_the_extracted_tree(m, tree, 3 * N);
  static const struct {
    const char* dir;
    const char* names;
  } lists[] = {
      {"", ".kpackfs, a#0, a#0-b, a#0.c, lib, x#0"},
      {"a#0", "d, gfx90a"},
      {"a#0/d", "e, gfx90a"},
      {"lib", "gfx90a, libx.so#0"},
      {"x#0", "gfx90a, gfx942"},
      {"x#0/gfx90a", "gfx1100, gfx942, kernel.hsaco, kernels, metadata.json"},
      {"x#0/gfx942", "deep#1, kernel.hsaco, kernels, metadata.json"},
  };
  for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
    char* names = list_dir(m, lists[i].dir);
    if (strcmp(names, lists[i].names) != 0)
      fail_msg("%s/ lists %s, not %s", lists[i].dir, names, lists[i].names);
    free(names);
  }
  assert_int_equal(stat_value(m, "kernels"), N);
  assert_int_equal(stat_value(m, "binaries"), 10); /* 12 kernels */
  assert_int_equal(stat_value(m, "skipped"), 0);

  tree_list paths = {0};
  tree_walk(m->dir, "", &paths);
  ino_t* inos = calloc(paths.count, sizeof(*inos));
  for (size_t i = 0; i < paths.count; i++) {
    const char* rel = paths.items[i] + 2;
    char* in_mnt = kt_path(m->dir, rel);
    char* in_tree = kt_path(tree, rel);
    struct stat a, b;
    assert_int_equal(lstat(in_mnt, &a), 0);
    assert_int_equal(lstat(in_tree, &b), 0);
    if (a.st_nlink != b.st_nlink)
      fail_msg("%s: %ju links in the mount, %ju extracted", rel,
               (uintmax_t)a.st_nlink, (uintmax_t)b.st_nlink);
    inos[i] = a.st_ino;
    for (size_t j = 0; j < i; j++)
      if (inos[j] == inos[i])
        fail_msg("%s and %s: both inode %ju", paths.items[j] + 2, rel,
                 (uintmax_t)inos[i]);
    free(in_mnt);
    free(in_tree);
  }
  mnt* again = &scratch[1];
  mnt_init(again, "nested-again");
  mnt_start(again, args);
  for (size_t i = paths.count; i-- > 0;) {
    const char* rel = paths.items[i] + 2;
    char* path = kt_path(again->dir, rel);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    if (st.st_ino != inos[i])
      fail_msg("%s: inode %ju, then %ju on a second mount", rel,
               (uintmax_t)inos[i], (uintmax_t)st.st_ino);
    free(path);
  }
  mnt_stop_clean(again);
  mnt_stop_clean(m);
  free(inos);
  tree_free(&paths);
  kt_rmtree(tree);
  free(tree);
  free(log);
  free(archive);
}

/* A name that would be a file of one kernel and a directory of another
 * (a binary through x#0's gfx906/kernels, the binary x#0/gfx906 with the
 * arch metadata.json) is settled by one rule (kpack_layout_file_stays()):
 * in one archive the files stay and the other kernels are skipped; when a
 * source listed first needs the directory, the file is left out. Mount
 * and extract show one tree either way, and extract goes on past it. */
static void test_a_file_and_a_directory_on_one_path_settle_alike(void** state) {
  (void)state;
  const kt_kernel shape[] = {
      {"x#0", "gfx906", NULL, 100},
      {"x#0/gfx906", "metadata.json", NULL, 200},
      {"x#0/gfx906/kernels/y#0", "gfx906", NULL, 300},
  };
  kt_kernel* k = patterned(shape, 3, 960);
  char* one = kt_path(tmp, "clash-one.kpack");
  char* file = kt_path(tmp, "clash-file.kpack");
  char* dir = kt_path(tmp, "clash-dir.kpack");
  write_fixture(one, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 3);
  write_fixture(file, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 1);
  write_fixture(dir, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k + 2, 1);
  free_patterned(k, 3);
  char* kpack = kt_program("kpack");
  char* tree = kt_path(tmp, "clash-extracted");
  char* log = kt_path(tmp, "clash.log");
  char* want;

  /* One archive: x#0's files stay, both other kernels are skipped. */
  char* extract_one[] = {kpack, "extract", "-C", tree, one, NULL};
  assert_int_equal(run_logged(extract_one, log), 1);
  char* said = slurp(log);
  assert_true(asprintf(&want,
                       "kpack: %s: x#0/gfx906 for metadata.json: a file and a "
                       "directory would share a path; skipped\n"
                       "kpack: %s: x#0/gfx906/kernels/y#0 for gfx906: a file "
                       "and a directory would share a path; skipped\n",
                       one, one) > 0);
  assert_string_equal(said, want);
  free(said);
  free(want);
  mnt* m = &scratch[0];
  mnt_init(m, "clash-one");
  const char* args_one[] = {one, NULL};
  mnt_start(m, args_one);
  assert_mount_is_the_extracted_tree(m, tree, 3);
  assert_int_equal(stat_value(m, "skipped"), 2);
  mnt_stop_clean(m);
  kt_rmtree(tree);

  /* The directory's archive first: x#0's kernels file is left out. */
  char* extract_two[] = {kpack, "extract", "-C", tree, dir, file, NULL};
  assert_int_equal(run_logged(extract_two, log), 0);
  said = slurp(log);
  assert_true(asprintf(&want,
                       "kpack: warning: %s: x#0 for gfx906: no 'kernels' file, "
                       "the name is taken\n",
                       file) > 0);
  assert_string_equal(said, want);
  free(said);
  free(want);
  m = &scratch[1];
  mnt_init(m, "clash-two");
  const char* args_two[] = {dir, file, NULL};
  mnt_start(m, args_two);
  assert_mount_is_the_extracted_tree(m, tree, 5);
  assert_int_equal(stat_value(m, "skipped"), 0);
  mnt_stop_clean(m);
  kt_rmtree(tree);
  free(tree);
  free(log);
  free(kpack);
  free(one);
  free(file);
  free(dir);
}

static void test_real_library_mount_and_extract_show_one_tree(void** state) {
  (void)state;
  const char* archive = real_archive();
  char* tree = kt_path(tmp, "real-tree-extracted");
  char* again = kt_path(tmp, "real-again.kpack");
  char* log = kt_path(tmp, "real-tree.log");
  KPACK_OK(log, "extract", "-C", tree, archive);
  mnt* m = &scratch[0];
  mnt_init(m, "real-tree");
  const char* args[] = {"-o", "cache_size=64M", archive, NULL};
  mnt_start(m, args);
  assert_mount_is_the_extracted_tree(m, tree, 21); /* 7 arches, 3 files */
  /* Each code object decompressed once, for kernel.hsaco; the text files
   * come from prefixes. */
  assert_int_equal(stat_value(m, "decompressions"), 7);
  KPACK_OK(log, "create", "-q", "-l", "1", "-o", again, m->dir);
  mnt_stop_clean(m);
  assert_true(kt_same_file(archive, again));
  kt_rmtree(tree);
  free(tree);
  free(again);
  free(log);
}

/* `du -ab ROOT` as "size path-below-ROOT" lines for regular files only
 * (directory sizes are the filesystem's own), sorted. */
static char* du_files(const char* root) {
  char* log = kt_path(tmp, "du.out");
  char* du[] = {"du", "-ab", "--exclude=.kpackfs", (char*)root, NULL};
  assert_int_equal(run_logged(du, log), 0);
  char* out = slurp(log);
  tree_list lines = {0};
  size_t root_len = strlen(root);
  for (char* line = strtok(out, "\n"); line != NULL;
       line = strtok(NULL, "\n")) {
    char* tab = strchr(line, '\t');
    assert_non_null(tab);
    struct stat st;
    assert_int_equal(lstat(tab + 1, &st), 0);
    if (!S_ISREG(st.st_mode))
      continue;
    assert_true(strncmp(tab + 1, root, root_len) == 0);
    char* entry;
    assert_true(asprintf(&entry, "%.*s %s", (int)(tab - line), line,
                         tab + 1 + root_len) > 0);
    tree_push(&lines, 'F', entry);
    free(entry);
  }
  qsort(lines.items, lines.count, sizeof(*lines.items), by_string);
  char* joined = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&joined, &len);
  for (size_t i = 0; i < lines.count; i++)
    fprintf(f, "%s\n", lines.items[i]);
  fclose(f);
  tree_free(&lines);
  free(out);
  free(log);
  return joined;
}

/* Runs a shell command line; fails the test with its output unless it
 * exits 0. */
static void shell_ok(const char* command) {
  char* log = kt_path(tmp, "shell.out");
  char* argv[] = {"sh", "-c", (char*)command, NULL};
  if (run_logged(argv, log) != 0) {
    char* text = slurp(log);
    fail_msg("%s:\n%s", command, text);
  }
  free(log);
}

/* What backup and copying tools do to a freshly mounted tree (they read
 * st_size first and copy that many bytes): tar, rsync -a and cp -a each
 * give a tree that diff -r finds identical to what `kpack extract` writes,
 * and du -b sees the extracted tree's sizes. */
static void copies_of_a_fresh_mount_are_the_extracted_tree(const char* archive,
                                                           const char* name) {
  char* tree = kt_path(tmp, name);
  char* log = kt_path(tmp, "copies.log");
  KPACK_OK(log, "extract", "-C", tree, archive);
  static const char* const tools[] = {"tar", "rsync", "cp", "du"};
  for (size_t t = 0; t < sizeof tools / sizeof tools[0]; t++) {
    mnt* m = &scratch[0];
    mnt_init(m, "copies");
    const char* args[] = {archive, NULL};
    mnt_start(m, args);
    char* copy = kt_path(tmp, "copy");
    char* command = NULL;
    switch (t) {
      case 0:
        assert_true(asprintf(&command,
                             "tar -C '%s' --exclude=./.kpackfs -cf '%s.tar' . "
                             "&& mkdir '%s' && tar -C '%s' -xf '%s.tar'",
                             m->dir, copy, copy, copy, copy) > 0);
        break;
      case 1:
        assert_true(asprintf(&command,
                             "rsync -a --exclude=/.kpackfs '%s/' '%s/'", m->dir,
                             copy) > 0);
        break;
      case 2:
        assert_true(asprintf(&command, "cp -a '%s' '%s'", m->dir, copy) > 0);
        break;
      default: {
        char* mounted = du_files(m->dir);
        char* extracted = du_files(tree);
        assert_string_equal(mounted, extracted);
        free(mounted);
        free(extracted);
      }
    }
    if (command != NULL) {
      shell_ok(command);
      char* diff = NULL;
      assert_true(asprintf(&diff, "diff -r -x .kpackfs '%s' '%s'", tree, copy) >
                  0);
      shell_ok(diff);
      free(diff);
      free(command);
      /* Sizes came from prefixes: no kernel was decompressed for them. */
      assert_int_equal(stat_value(m, "render_failures"), 0);
    }
    mnt_stop_clean(m);
    mnt_free(m);
    char* tarball;
    assert_true(asprintf(&tarball, "%s.tar", copy) > 0);
    unlink(tarball);
    free(tarball);
    if (access(copy, F_OK) == 0)
      kt_rmtree(copy); /* the tests run as root: 0555 directories go too */
    free(copy);
  }
  kt_rmtree(tree);
  free(tree);
  free(log);
}

static void test_tar_rsync_cp_and_du_of_a_fresh_mount_see_the_extracted_tree(
    void** state) {
  (void)state;
  char* archive = one_tree_archive("copies.kpack");
  copies_of_a_fresh_mount_are_the_extracted_tree(archive, "copies-extracted");
  free(archive);
}

static void test_copies_of_a_fresh_real_library_mount_are_exact(void** state) {
  (void)state;
  copies_of_a_fresh_mount_are_the_extracted_tree(real_archive(),
                                                 "real-copies-extracted");
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_every_kernel_reads_back_byte_for_byte),
      T(test_per_arch_archives_merge_under_one_binary_directory),
      T(test_modes_owner_times_and_sizes_follow_the_archives),
      T(test_xattrs_name_archive_binary_arch_and_storage),
      T(test_metadata_map_is_a_json_xattr),
      T(test_toc_metadata_msgpack_is_the_map_byte_for_byte),
      T(test_files_beside_a_kernel_leave_taken_names_alone),
      T(test_mounted_tree_packs_back_into_the_same_archive),
      T(test_archives_and_stats_describe_the_mount),
      T(test_unsafe_toc_names_are_skipped_with_a_warning),
      T(test_every_write_is_refused_with_erofs),
      T(test_eight_parallel_readers_see_every_checksum),
      T(test_inode_numbers_are_stable_for_the_same_sources),
      T(test_chunked_read_decompresses_once_and_rereads_hit_cache),
      T(test_first_source_wins_for_the_same_binary_and_arch),
      T(test_sibling_directories_list_and_look_up_in_byte_order),
      T(test_corrupt_frame_is_eio_for_that_file_only),
      T(test_corrupt_frame_with_open_requests_fails_once_an_open),
      T(test_open_requests_pin_a_kernel_until_its_last_close),
      T(test_at_most_64_files_read_in_part_stay_pinned),
      T(test_a_file_read_in_part_is_let_go_when_left_alone),
      T(test_a_file_left_idle_is_let_go_when_another_is_read),
      T(test_a_lone_reader_decompresses_where_its_reads_come_in),
      T(test_archive_truncated_under_the_mount_is_eio_not_a_crash),
      T(test_small_cache_still_serves_larger_kernels),
      T(test_tiny_budget_recycles_buffers_and_every_byte_is_exact),
      T(test_sigterm_unmounts_cleanly),
      T(test_bad_sources_are_refused_before_mounting),
      T(test_source_list_of_only_separators_is_refused),
      T(test_help_and_version),
      T(test_fstab_style_options_and_source_lists_are_accepted),
      T(test_mount_helper_starts_the_daemon_as_fstab_would),
      T(test_single_threaded_debug_mount_serves_reads),
      T(test_hundreds_of_sources_mount_under_a_short_source_name),
      T(test_hundreds_of_sources_in_one_fstab_list_mount),
      T(test_more_archives_than_the_soft_fd_limit_mount),
      T(test_kernel_file_names_over_255_bytes_are_skipped),
      T(test_long_listing_sizes_text_files_without_decompressing),
      T(test_find_by_name_renders_and_decompresses_nothing),
      T(test_kernels_and_metadata_json_show_the_code_object),
      T(test_cat_grep_wc_and_read_see_the_whole_text),
      T(test_code_object_xattrs_and_kernels_that_are_not_code_objects),
      T(test_parallel_first_reads_render_once),
      T(test_real_library_files_match_the_reader),
      T(test_mount_and_extract_show_one_tree),
      T(test_mounted_and_extracted_trees_repack_with_their_maps),
      T(test_real_library_mount_and_extract_show_one_tree),
      T(test_tar_rsync_cp_and_du_of_a_fresh_mount_see_the_extracted_tree),
      T(test_copies_of_a_fresh_real_library_mount_are_exact),
      T(test_hostile_toc_names_give_mount_and_extract_one_tree),
      T(test_nested_binary_paths_give_mount_and_extract_one_tree),
      T(test_a_file_and_a_directory_on_one_path_settle_alike),
#undef T
  };
  return cmocka_run_group_tests_name("kpackfs", tests, group_setup,
                                     group_teardown);
}
