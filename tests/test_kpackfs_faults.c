/* SPDX-License-Identifier: MIT
 *
 * Fault injection under a live kpackfs mount (docs/mount.md): archives
 * truncated, overwritten, replaced and deleted while mounted, corrupt frames,
 * TOC sizes that disagree with their frames, 16 checksumming readers, unmount
 * and SIGTERM with readers active, a cache budget below one kernel. In every
 * case the daemon stays up, damaged files fail with EIO (never wrong bytes),
 * healthy files stay readable, and the daemon exits 0 at unmount (under ASan
 * that also means no memory error and no leak).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture_toc.h"
#include "support.h"

/* ---- the daemon ---------------------------------------------------------- */

typedef struct fs {
  char* dir;
  char* log; /* the daemon's stdout and stderr */
  pid_t pid;
} fs;

static char* tmp;
static fs* live; /* the mount a watchdog must tear down */
/* Static, not on a test's stack: a failed assertion longjmps out of the
 * test and teardown must still find the mount to take down. */
static fs the_mount;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds for a mount to appear or a daemon to exit. The daemon never runs
 * under valgrind, but may be a sanitizer build. */
#define PATIENCE 30

/* A test that hangs (a read stuck in a dead daemon, say) must not leave a
 * mount behind: kill the daemon, detach lazily, fail. */
static void on_watchdog(int sig) {
  (void)sig;
  static const char msg[] = "test_kpackfs_faults: watchdog fired\n";
  ssize_t ignored = write(2, msg, sizeof(msg) - 1);
  (void)ignored;
  if (live != NULL && live->pid > 0) {
    kill(live->pid, SIGKILL);
    pid_t pid = fork();
    if (pid == 0) {
      execlp("fusermount3", "fusermount3", "-u", "-q", "-z", live->dir,
             (char*)NULL);
      _exit(127);
    }
    if (pid > 0)
      waitpid(pid, NULL, 0);
  }
  _exit(1);
}

static char* log_text(const fs* m) {
  size_t size;
  char* data = kt_read_file(m->log, &size);
  return data != NULL ? data : strdup("(no log)");
}

/* kpackfs -f -o cache_size=CACHE SOURCE... DIR, waiting for the mount. */
static void fs_start(fs* m, const char* name, const char* cache,
                     const char* const* sources, size_t count) {
  char* argv[16];
  char option[64];
  size_t n = 0;
  memset(m, 0, sizeof(*m));
  m->dir = kt_path(tmp, name);
  assert_true(asprintf(&m->log, "%s/%s.log", tmp, name) > 0);
  assert_int_equal(mkdir(m->dir, 0755), 0);
  char* kpackfs = kt_program("kpackfs");
  snprintf(option, sizeof(option), "cache_size=%s", cache);
  argv[n++] = kpackfs;
  argv[n++] = "-f";
  argv[n++] = "-o";
  argv[n++] = option;
  for (size_t i = 0; i < count && n < 14; i++)
    argv[n++] = (char*)sources[i];
  argv[n++] = m->dir;
  argv[n] = NULL;
  m->pid = kt_spawn(argv, m->log);
  free(kpackfs);
  assert_true(m->pid > 0);
  live = m;
  for (double end = now() + PATIENCE; !kt_is_mountpoint(m->dir);
       kt_sleep_ms(10)) {
    int status;
    if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
      m->pid = 0;
      fail_msg("kpackfs exited (status %d) before mounting:\n%s", status,
               log_text(m));
    }
    if (now() > end)
      fail_msg("kpackfs did not mount in %d s:\n%s", PATIENCE, log_text(m));
  }
}

/* The daemon is still running and still serving the mount. */
static void assert_daemon_up(const fs* m) {
  int status;
  if (waitpid(m->pid, &status, WNOHANG) != 0)
    fail_msg("kpackfs died (status %d):\n%s", status, log_text(m));
  assert_true(kt_is_mountpoint(m->dir));
}

/* Unmounts (retrying while busy) and returns the daemon's wait status, or
 * -1 if it had to be killed. Safe on a mount that is already gone. */
static int fs_stop(fs* m) {
  int status = -1;
  if (m->pid > 0) {
    for (int i = 0; i < 50 && kt_is_mountpoint(m->dir); i++)
      if (kt_fusermount(m->dir, false, PATIENCE) != 0)
        kt_sleep_ms(100); /* EBUSY while a reader still holds a file */
    status = kt_wait(m->pid, PATIENCE);
    if (status == -1) {
      kill(m->pid, SIGKILL);
      waitpid(m->pid, NULL, 0);
    }
    m->pid = 0;
  }
  if (m->dir != NULL && kt_is_mountpoint(m->dir))
    kt_fusermount(m->dir, true, PATIENCE);
  if (live == m)
    live = NULL;
  return status;
}

/* Unmounts and requires a clean exit: status 0, which a sanitizer build of
 * the daemon would not give after an error or a leak. */
static void fs_stop_clean(fs* m) {
  int status = fs_stop(m);
  if (!(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fail_msg("kpackfs exit status %d:\n%s", status, log_text(m));
}

static void fs_free(fs* m) {
  fs_stop(m);
  if (m->dir != NULL)
    rmdir(m->dir);
  free(m->dir);
  free(m->log);
  memset(m, 0, sizeof(*m));
}

static uint64_t stat_value(const fs* m, const char* key) {
  char* path = kt_path(m->dir, ".kpackfs/stats");
  size_t size;
  char* text = kt_read_file(path, &size);
  assert_non_null(text);
  size_t len = strlen(key);
  uint64_t value = UINT64_MAX;
  for (char* line = text; line != NULL && *line;) {
    if (strncmp(line, key, len) == 0 && line[len] == '=')
      value = strtoull(line + len + 1, NULL, 10);
    line = strchr(line, '\n');
    line = line ? line + 1 : NULL;
  }
  free(text);
  free(path);
  if (value == UINT64_MAX)
    fail_msg("no %s in .kpackfs/stats", key);
  return value;
}

/* close() returns before the kernel sends the daemon its RELEASE, so a
 * kernel just read may still be pinned: wait until none is before looking
 * at what the cache keeps once nothing is open. */
static void await_releases(const fs* m) {
  for (double end = now() + PATIENCE; stat_value(m, "cache_pinned") != 0;
       kt_sleep_ms(10))
    if (now() > end)
      fail_msg("kernels still pinned %d s after their last close", PATIENCE);
}

/* ---- fixtures ------------------------------------------------------------ */

typedef struct kernel_def {
  const char* binary;
  const char* arch;
  size_t size;
} kernel_def;

/* Sizes span several FUSE reads (128 KiB each) and differ from each other. */
static const kernel_def a_kernels[] = {
    {"lib/liba.so#0", "gfx90a", 180000},
    {"lib/liba.so#0", "gfx942", 333333},
    {"lib/liba.so#1", "gfx90a", 65536},
};
static const kernel_def b_kernels[] = {
    {"lib/libb.so#0", "gfx1100", 100003},
    {"lib/libb.so#0", "gfx90a", 17},
};
static const kernel_def v_kernels[] = {
    {"lib/libv.so#0", "gfx90a", 150001},
    {"lib/libv.so#0", "gfx942", 220000},
    {"lib/libv.so#1", "gfx90a", 90000},
};
#define N_A 3
#define N_B 2
#define N_V 3
#define N_ALL (N_A + N_B + N_V)

typedef struct expected {
  char rel[96]; /* path below the mount point */
  size_t size;
  uint64_t hash;
  bool victim; /* in victim.kpack, the archive a test damages */
} expected;

static expected files[N_ALL];
static char* sources[3]; /* a.kpack (zstd), b.kpack (none), victim.kpack */

static void write_fixture(const char* path, kpack_compression_scheme_t scheme,
                          const kernel_def* defs, size_t count, uint32_t seed,
                          expected* out, bool victim) {
  kt_kernel k[4];
  for (size_t i = 0; i < count; i++) {
    void* data = kt_pattern(defs[i].size, seed + (uint32_t)i);
    k[i] = (kt_kernel){defs[i].binary, defs[i].arch, data, defs[i].size};
    snprintf(out[i].rel, sizeof(out[i].rel), "%s/%s/kernel.hsaco",
             defs[i].binary, defs[i].arch);
    out[i].size = defs[i].size;
    out[i].hash = kt_fnv1a(data, defs[i].size, KT_FNV_START);
    out[i].victim = victim;
  }
  kt_write_archive(path, scheme, NULL, 0, k, count);
  for (size_t i = 0; i < count; i++)
    free((void*)k[i].data);
}

static int setup(void** state) {
  (void)state;
  tmp = kt_tmpdir();
  sources[0] = kt_path(tmp, "a.kpack");
  sources[1] = kt_path(tmp, "b.kpack");
  sources[2] = kt_path(tmp, "victim.kpack");
  write_fixture(sources[0], KPACK_COMPRESSION_ZSTD_PER_KERNEL, a_kernels, N_A,
                10, files, false);
  write_fixture(sources[1], KPACK_COMPRESSION_NOOP, b_kernels, N_B, 20,
                files + N_A, false);
  write_fixture(sources[2], KPACK_COMPRESSION_ZSTD_PER_KERNEL, v_kernels, N_V,
                30, files + N_A + N_B, true);
  alarm(300); /* the watchdog: no test here takes a tenth of that */
  return 0;
}

static int teardown(void** state) {
  (void)state;
  alarm(0);
  if (live != NULL)
    fs_free(live);
  for (int i = 0; i < 3; i++)
    free(sources[i]);
  kt_rmtree(tmp);
  free(tmp);
  return 0;
}

/* Where kernel i of `path` is stored, from the writer's own TOC. */
static kpack_kernel_info_t info_of(const char* path, const kernel_def* def) {
  kpack_archive_t a;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, def->binary, def->arch, &info),
                   KPACK_SUCCESS);
  kpack_close(a);
  return info;
}

static void patch_bytes(const char* path, uint64_t offset, const void* data,
                        size_t size) {
  int fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, data, size, (off_t)offset), (ssize_t)size);
  close(fd);
}

/* Rewrites one entry's original_size in the TOC (msgpack-c decode, edit,
 * encode; the TOC is last in the file, so nothing else moves). */
static void set_original_size(const char* path, const char* binary,
                              const char* arch, uint64_t value) {
  size_t size;
  uint8_t* file = kt_read_file(path, &size);
  assert_non_null(file);
  uint64_t toc = fx_toc_offset(file, size);
  fx_toc t;
  fx_toc_decode(&t, file, size, toc);
  msgpack_object* o = fx_toc_at(
      &t, (const char* const[]){"toc", binary, arch, "original_size"}, 4, NULL);
  assert_non_null(o);
  o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  o->via.u64 = value;
  fx_toc_encode(&t, &file, &size, toc);
  kt_write_file(path, file, size);
  free(file);
}

/* ---- reading ------------------------------------------------------------- */

/* Reads a whole file in `chunk`-byte reads after dropping its cached pages,
 * so the request reaches the daemon. Returns 0 or -errno; *size and *hash
 * describe what was read. */
static int read_file(const char* path, size_t chunk, size_t* size,
                     uint64_t* hash) {
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -errno;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  uint8_t* buf = malloc(chunk);
  assert_non_null(buf);
  int rc = 0;
  *size = 0;
  *hash = KT_FNV_START;
  for (;;) {
    ssize_t n = read(fd, buf, chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = -errno;
      break;
    }
    if (n == 0)
      break;
    *hash = kt_fnv1a(buf, (size_t)n, *hash);
    *size += (size_t)n;
  }
  free(buf);
  close(fd);
  return rc;
}

static char* in_mount(const fs* m, const expected* e) {
  return kt_path(m->dir, e->rel);
}

static void assert_reads_back(const fs* m, const expected* e) {
  char* path = in_mount(m, e);
  size_t size;
  uint64_t hash;
  int rc = read_file(path, 65536, &size, &hash);
  if (rc != 0)
    fail_msg("%s: %s", e->rel, strerror(-rc));
  assert_int_equal(size, e->size);
  assert_true(hash == e->hash);
  free(path);
}

static void assert_eio(const fs* m, const expected* e) {
  char* path = in_mount(m, e);
  size_t size;
  uint64_t hash;
  int rc = read_file(path, 65536, &size, &hash);
  if (rc != -EIO)
    fail_msg("%s: expected EIO, got %s", e->rel, rc ? strerror(-rc) : "data");
  free(path);
}

/* A damaged file may still be whole (its bytes lay outside the damage) but
 * must never read as anything but its own bytes. Returns true for EIO. */
static bool assert_intact_or_eio(const fs* m, const expected* e) {
  char* path = in_mount(m, e);
  size_t size;
  uint64_t hash;
  int rc = read_file(path, 65536, &size, &hash);
  free(path);
  if (rc == -EIO)
    return true;
  if (rc != 0)
    fail_msg("%s: %s instead of EIO", e->rel, strerror(-rc));
  if (size != e->size || hash != e->hash)
    fail_msg("%s: wrong bytes after the archive was damaged", e->rel);
  return false;
}

static void assert_healthy_files_read_back(const fs* m) {
  for (size_t i = 0; i < N_ALL; i++)
    if (!files[i].victim)
      assert_reads_back(m, &files[i]);
}

static void mount_all(fs* m, const char* name, const char* cache) {
  fs_start(m, name, cache, (const char* const*)sources, 3);
}

/* ---- archives damaged under the mount
 * ----------------------------------------
 */

static void test_archive_truncated_under_the_mount(void** state) {
  (void)state;
  fs* m = &the_mount;
  mount_all(m, "mnt", "64M");
  assert_healthy_files_read_back(m);
  /* Keep only the header: every frame is gone, the daemon's TOC is not. */
  assert_int_equal(truncate(sources[2], 100), 0);
  for (size_t i = 0; i < N_ALL; i++) {
    if (!files[i].victim)
      continue;
    struct stat st;
    char* path = in_mount(m, &files[i]);
    assert_int_equal(stat(path, &st), 0); /* metadata needs no payload */
    assert_int_equal(st.st_size, files[i].size);
    free(path);
    assert_eio(m, &files[i]);
    assert_eio(m, &files[i]); /* a failure is not cached */
  }
  assert_daemon_up(m);
  assert_healthy_files_read_back(m);
  /* Growing it back to the original size with zeros: frames are garbage. */
  assert_int_equal(truncate(sources[2], 1 << 20), 0);
  for (size_t i = 0; i < N_ALL; i++)
    if (files[i].victim)
      assert_eio(m, &files[i]);
  assert_daemon_up(m);
  fs_stop_clean(m);
  fs_free(m);
}

static void test_archive_overwritten_in_place_under_the_mount(void** state) {
  (void)state;
  fs* m = &the_mount;
  mount_all(m, "mnt", "64M");
  /* Garbage over the whole payload, same size, same inode. */
  struct stat st;
  assert_int_equal(stat(sources[2], &st), 0);
  void* noise = kt_pattern((size_t)st.st_size - 64, 0xdead);
  patch_bytes(sources[2], 64, noise, (size_t)st.st_size - 64);
  free(noise);
  for (size_t i = 0; i < N_ALL; i++)
    if (files[i].victim)
      assert_eio(m, &files[i]);
  assert_daemon_up(m);
  assert_healthy_files_read_back(m);
  fs_stop_clean(m);
  fs_free(m);
}

/* Another valid archive copied over the same inode: the mount's TOC is now
 * stale. Each file reads as its old bytes, or fails; nothing else. */
static void test_archive_rewritten_with_other_contents(void** state) {
  (void)state;
  fs* m = &the_mount;
  mount_all(m, "mnt", "64M");
  size_t size;
  void* other = kt_read_file(sources[0], &size);
  assert_non_null(other);
  kt_write_file(sources[2], other, size); /* O_TRUNC, then new bytes */
  free(other);
  for (size_t i = 0; i < N_ALL; i++)
    if (files[i].victim)
      assert_intact_or_eio(m, &files[i]);
  assert_daemon_up(m);
  assert_healthy_files_read_back(m);
  fs_stop_clean(m);
  fs_free(m);
}

/* Deleting or renaming over an archive leaves the mounted inode intact:
 * the daemon keeps reading the archive it opened. */
static void test_archive_deleted_or_replaced_under_the_mount(void** state) {
  (void)state;
  fs* m = &the_mount;
  mount_all(m, "mnt", "64M");
  assert_int_equal(unlink(sources[2]), 0);
  for (size_t i = 0; i < N_ALL; i++)
    if (files[i].victim)
      assert_reads_back(m, &files[i]);
  /* a.kpack replaced by rename(2), the way package managers update files */
  char* fresh = kt_path(tmp, "replacement.kpack");
  size_t size;
  void* bytes = kt_read_file(sources[1], &size);
  kt_write_file(fresh, bytes, size);
  free(bytes);
  assert_int_equal(rename(fresh, sources[0]), 0);
  free(fresh);
  assert_daemon_up(m);
  for (size_t i = 0; i < N_ALL; i++)
    assert_reads_back(m, &files[i]);
  fs_stop_clean(m);
  fs_free(m);
}

/* ---- archives damaged before mounting
 * -----------------------------------------
 */

static void test_corrupt_frames_are_eio_for_those_files_only(void** state) {
  (void)state;
  /* Kernel 0: bytes flipped mid-frame; kernel 2: its checksum. */
  kpack_kernel_info_t k0 = info_of(sources[2], &v_kernels[0]);
  kpack_kernel_info_t k2 = info_of(sources[2], &v_kernels[2]);
  uint8_t junk[32];
  memset(junk, 0xa5, sizeof(junk));
  patch_bytes(sources[2], k0.offset + k0.stored_size / 2, junk, sizeof(junk));
  patch_bytes(sources[2], k2.offset + k2.stored_size - 1, junk, 1);
  fs* m = &the_mount;
  mount_all(m, "mnt", "64M");
  expected* v = files + N_A + N_B;
  for (int round = 0; round < 2; round++) {
    assert_eio(m, &v[0]);
    assert_reads_back(m, &v[1]);
    assert_eio(m, &v[2]);
  }
  assert_daemon_up(m);
  assert_healthy_files_read_back(m);
  assert_true(stat_value(m, "decompressions") >= N_ALL - 2);
  fs_stop_clean(m);
  fs_free(m);
}

static void test_toc_size_disagreeing_with_its_frame_is_eio(void** state) {
  (void)state;
  /* One off by one, one absurd (a TOC may claim anything): st_size follows
   * the TOC, a read fails, nothing is allocated for the claim. */
  set_original_size(sources[2], v_kernels[0].binary, v_kernels[0].arch,
                    v_kernels[0].size + 1);
  set_original_size(sources[2], v_kernels[1].binary, v_kernels[1].arch,
                    1ull << 40);
  fs* m = &the_mount;
  mount_all(m, "mnt", "64M");
  expected* v = files + N_A + N_B;
  struct stat st;
  char* path = in_mount(m, &v[1]);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal((uint64_t)st.st_size, 1ull << 40);
  free(path);
  assert_eio(m, &v[0]);
  assert_eio(m, &v[1]);
  assert_reads_back(m, &v[2]);
  assert_daemon_up(m);
  assert_healthy_files_read_back(m);
  /* The absurd claim never reached the budget's accounting. */
  assert_true(stat_value(m, "cache_bytes") <= 64u << 20);
  fs_stop_clean(m);
  fs_free(m);
}

/* ---- many readers -------------------------------------------------------- */

typedef struct reader {
  const fs* m;
  double until;
  unsigned seed;
  bool stop_on_error; /* the mount is going away: errors end the loop */
  size_t reads, wrong, errors;
  int last_error;
} reader;

static void* reader_main(void* p) {
  reader* r = p;
  static const size_t chunks[] = {4096, 3001, 65536, 131072, 1 << 20};
  while (now() < r->until) {
    r->seed = r->seed * 1103515245u + 12345u;
    const expected* e = &files[(r->seed >> 8) % N_ALL];
    size_t chunk = chunks[(r->seed >> 20) % 5], size;
    uint64_t hash;
    char* path = kt_path(r->m->dir, e->rel);
    int rc = read_file(path, chunk, &size, &hash);
    free(path);
    if (rc != 0) {
      r->errors++;
      r->last_error = -rc;
      if (r->stop_on_error)
        break;
      continue;
    }
    __atomic_fetch_add(&r->reads, 1, __ATOMIC_RELAXED); /* polled */
    if (size != e->size || hash != e->hash)
      r->wrong++;
  }
  return NULL;
}

static void start_readers(reader* r, pthread_t* t, int count, const fs* m,
                          double seconds, bool stop_on_error) {
  for (int i = 0; i < count; i++) {
    r[i] = (reader){.m = m,
                    .until = now() + seconds,
                    .seed = (unsigned)i * 7919u + 1,
                    .stop_on_error = stop_on_error};
    assert_int_equal(pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
  }
}

static void test_sixteen_readers_checksum_every_file(void** state) {
  (void)state;
  enum { READERS = 16 };
  reader r[READERS];
  pthread_t t[READERS];
  fs* m = &the_mount;
  /* A budget of about two kernels: hits, misses and evictions all race. */
  mount_all(m, "mnt", "512K");
  start_readers(r, t, READERS, m, 3.0, false);
  size_t reads = 0;
  for (int i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(r[i].wrong, 0);
    if (r[i].errors != 0)
      fail_msg("reader %d: %zu errors, last %s", i, r[i].errors,
               strerror(r[i].last_error));
    reads += r[i].reads;
  }
  assert_true(reads >= N_ALL); /* a read of every file is all but certain */
  assert_daemon_up(m);
  await_releases(m);
  assert_true(stat_value(m, "cache_bytes") <= 512u << 10);
  assert_true(stat_value(m, "evictions") > 0);
  fs_stop_clean(m);
  fs_free(m);
}

static void test_cache_budget_smaller_than_any_kernel(void** state) {
  (void)state;
  enum { READERS = 8 };
  reader r[READERS];
  pthread_t t[READERS];
  fs* m = &the_mount;
  mount_all(m, "mnt", "1K"); /* smaller than all kernels but one */
  for (size_t i = 0; i < N_ALL; i++)
    assert_reads_back(m, &files[i]);
  start_readers(r, t, READERS, m, 1.5, false);
  for (int i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(r[i].wrong, 0);
    assert_int_equal(r[i].errors, 0);
  }
  assert_daemon_up(m);
  /* Nothing is open any more, so nothing above the budget is held. */
  await_releases(m);
  assert_true(stat_value(m, "cache_bytes") <= 1024);
  assert_true(stat_value(m, "decompressions") >= N_ALL);
  fs_stop_clean(m);
  fs_free(m);
}

/* Readers racing a damaged archive: healthy files stay exact, damaged ones
 * are exact or EIO, the daemon survives the whole time. */
static void test_readers_race_truncation(void** state) {
  (void)state;
  enum { READERS = 8 };
  reader r[READERS];
  pthread_t t[READERS];
  fs* m = &the_mount;
  mount_all(m, "mnt", "256K");
  start_readers(r, t, READERS, m, 2.0, false);
  kt_sleep_ms(300);
  assert_int_equal(truncate(sources[2], 4096), 0);
  for (int i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(r[i].wrong, 0);
    if (r[i].errors != 0)
      assert_int_equal(r[i].last_error, EIO);
  }
  assert_daemon_up(m);
  assert_healthy_files_read_back(m);
  fs_stop_clean(m);
  fs_free(m);
}

/* ---- going away with readers active
 * -------------------------------------------
 */

/* Waits until every reader has finished a read, so that what follows
 * happens with reads in flight rather than before the first. */
static void await_first_reads(reader* r, int count) {
  for (int i = 0; i < count; i++)
    while (__atomic_load_n(&r[i].reads, __ATOMIC_RELAXED) == 0)
      kt_sleep_ms(5);
}

static void test_lazy_unmount_while_readers_are_active(void** state) {
  (void)state;
  enum { READERS = 8 };
  reader r[READERS];
  pthread_t t[READERS];
  fs* m = &the_mount;
  mount_all(m, "mnt", "1M");
  start_readers(r, t, READERS, m, 20.0, true);
  await_first_reads(r, READERS);
  /* The mount leaves the namespace at once; open files drain, then the
   * daemon gets DESTROY and must exit cleanly. */
  assert_int_equal(kt_fusermount(m->dir, true, PATIENCE), 0);
  double deadline = now() + PATIENCE;
  for (int i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(r[i].wrong, 0);
  }
  assert_true(now() < deadline); /* readers noticed instead of hanging */
  int status = kt_wait(m->pid, PATIENCE);
  m->pid = 0;
  if (!(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fail_msg("kpackfs exit status %d after a lazy unmount:\n%s", status,
             log_text(m));
  assert_false(kt_is_mountpoint(m->dir));
  fs_free(m);
}

static void test_sigterm_while_readers_are_active(void** state) {
  (void)state;
  enum { READERS = 8 };
  reader r[READERS];
  pthread_t t[READERS];
  fs* m = &the_mount;
  mount_all(m, "mnt", "1M");
  start_readers(r, t, READERS, m, 20.0, true);
  await_first_reads(r, READERS);
  assert_int_equal(kill(m->pid, SIGTERM), 0);
  for (int i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(r[i].wrong, 0);
  }
  int status = kt_wait(m->pid, PATIENCE);
  m->pid = 0;
  if (!(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0))
    fail_msg("kpackfs exit status %d after SIGTERM:\n%s", status, log_text(m));
  /* Unmounted by the daemon itself, possibly lazily if a file was open. */
  for (double end = now() + PATIENCE; kt_is_mountpoint(m->dir) && now() < end;)
    kt_sleep_ms(10);
  assert_false(kt_is_mountpoint(m->dir));
  fs_free(m);
}

static int group_setup(void** state) {
  (void)state;
  signal(SIGALRM, on_watchdog);
  return 0;
}

#define FAULT_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      FAULT_TEST(test_archive_truncated_under_the_mount),
      FAULT_TEST(test_archive_overwritten_in_place_under_the_mount),
      FAULT_TEST(test_archive_rewritten_with_other_contents),
      FAULT_TEST(test_archive_deleted_or_replaced_under_the_mount),
      FAULT_TEST(test_corrupt_frames_are_eio_for_those_files_only),
      FAULT_TEST(test_toc_size_disagreeing_with_its_frame_is_eio),
      FAULT_TEST(test_sixteen_readers_checksum_every_file),
      FAULT_TEST(test_cache_budget_smaller_than_any_kernel),
      FAULT_TEST(test_readers_race_truncation),
      FAULT_TEST(test_lazy_unmount_while_readers_are_active),
      FAULT_TEST(test_sigterm_while_readers_are_active),
  };
  return cmocka_run_group_tests_name("kpackfs faults", tests, group_setup,
                                     NULL);
}
