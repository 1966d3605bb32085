/* SPDX-License-Identifier: MIT
 *
 * kpackfs over a whole install, mounted for real: the `.kpack/` folder of
 * a multi-arch build, one archive per component and arch (40 here, the
 * shape of the 420 a ROCm install has). The tree below each binary
 * directory is made lazily (docs/mount.md), so these check what must not
 * depend on what was looked up first: a bad archive fails the mount, inode
 * numbers are the same on every mount, a deep path reached by `stat` alone
 * works, parallel readers of a fresh mount see every byte, and the tree is
 * the one `kpack extract` writes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define COMPONENTS 4
#define ARCHES 10
#define PER_ARCHIVE 25
#define ARCHIVES (COMPONENTS * ARCHES)
#define KERNELS (ARCHIVES * PER_ARCHIVE)

static const char* const components[COMPONENTS] = {"blas", "fft", "rand",
                                                   "sparse"};
static const char* const arches[ARCHES] = {
    "gfx1030", "gfx1100", "gfx1101", "gfx900",        "gfx906",
    "gfx908",  "gfx90a",  "gfx942",  "gfx90a:xnack-", "gfx942:sramecc+"};

typedef struct expected {
  char* rel; /* binary/arch/kernel.hsaco */
  size_t size;
  uint64_t sum;
} expected;

static expected files[KERNELS];
static char* install; /* the folder of archives */
static char* archive_paths[ARCHIVES];

static bool under_valgrind(void) {
  const char* v = getenv("KPACK_VALGRIND");
  return v != NULL && *v;
}

static int patience(void) {
  return under_valgrind() ? 120 : 20;
}

/* ---- the install --------------------------------------------------------- */

static char* binary_name(size_t c, size_t i) {
  char* name;
  assert_true(asprintf(&name, "lib/%s/lib%s.so.1#%zu", components[c],
                       components[c], i) > 0);
  return name;
}

static void write_install(const char* dir) {
  mkdir(dir, 0755);
  for (size_t c = 0; c < COMPONENTS; c++) {
    for (size_t a = 0; a < ARCHES; a++) {
      size_t n = c * ARCHES + a;
      kt_kernel k[PER_ARCHIVE];
      char* names[PER_ARCHIVE];
      for (size_t i = 0; i < PER_ARCHIVE; i++) {
        size_t f = n * PER_ARCHIVE + i;
        names[i] = binary_name(c, i);
        size_t size = 700 + (f * 37) % 3000;
        k[i] = (kt_kernel){names[i], arches[a], kt_pattern(size, (uint32_t)f),
                           size};
        if (files[f].rel == NULL) {
          assert_true(asprintf(&files[f].rel, "%s/%s/kernel.hsaco", names[i],
                               arches[a]) > 0);
          files[f].size = size;
          files[f].sum = kt_fnv1a(k[i].data, size, KT_FNV_START);
        }
      }
      char* path;
      assert_true(asprintf(&path, "%s/%s_lib_%s.kpack", dir, components[c],
                           arches[a]) > 0);
      kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k,
                       PER_ARCHIVE);
      if (archive_paths[n] == NULL)
        archive_paths[n] = path;
      else
        free(path);
      for (size_t i = 0; i < PER_ARCHIVE; i++) {
        free((void*)k[i].data);
        free(names[i]);
      }
    }
  }
}

/* ---- mounts -------------------------------------------------------------- */

typedef struct mnt {
  char* dir;
  char* log;
  pid_t pid;
} mnt;

static pid_t spawn_kpackfs(const char* source, const char* dir,
                           const char* log) {
  char* kpackfs = kt_program("kpackfs");
  char* argv[] = {"valgrind",
                  "--quiet",
                  "--error-exitcode=99",
                  "--leak-check=full",
                  "--errors-for-leak-kinds=definite,indirect,possible",
                  kpackfs,
                  "-f",
                  (char*)source,
                  (char*)dir,
                  NULL};
  pid_t pid = kt_spawn(under_valgrind() ? argv : argv + 5, log);
  free(kpackfs);
  return pid;
}

static void mnt_start(mnt* m, const char* name, const char* source) {
  m->dir = kt_path(kt_tmp, name);
  assert_true(asprintf(&m->log, "%s/%s.log", kt_tmp, name) > 0);
  mkdir(m->dir, 0755);
  unlink(m->log);
  m->pid = spawn_kpackfs(source, m->dir, m->log);
  assert_true(m->pid > 0);
  for (long waited = 0; !kt_is_mountpoint(m->dir); waited += 10) {
    int status;
    if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
      size_t n;
      char* log = kt_read_file(m->log, &n);
      fail_msg("kpackfs exited (status %d) before mounting:\n%s", status,
               log ? log : "");
    }
    if (waited > patience() * 1000L) {
      kill(m->pid, SIGKILL);
      fail_msg("kpackfs did not mount within %d s", patience());
    }
    kt_sleep_ms(10);
  }
}

/* Unmounts; the daemon must exit 0 (under valgrind or a sanitizer: no
 * errors, no leaks, no races). */
static void mnt_stop_clean(mnt* m) {
  assert_int_equal(kt_fusermount(m->dir, false, patience()), 0);
  int status = kt_wait(m->pid, patience());
  if (status == -1) {
    kill(m->pid, SIGKILL);
    waitpid(m->pid, NULL, 0);
  }
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    size_t n;
    char* log = kt_read_file(m->log, &n);
    fail_msg("kpackfs exit status %d:\n%s", status, log ? log : "");
  }
  rmdir(m->dir);
  free(m->dir);
  free(m->log);
}

static char* in_mount(const mnt* m, const char* rel) {
  char* path;
  assert_true(asprintf(&path, "%s%s%s", m->dir, *rel ? "/" : "", rel) > 0);
  return path;
}

/* Reads a file through the mount; its FNV-1a, or 0 with errno on error. */
static uint64_t checksum(const char* path, size_t* size) {
  static _Thread_local char buf[65536];
  int fd = open(path, O_RDONLY);
  uint64_t h = KT_FNV_START;
  *size = 0;
  if (fd < 0)
    return 0;
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      int e = errno;
      close(fd);
      errno = e;
      return 0;
    }
    h = kt_fnv1a(buf, (size_t)n, h);
    *size += (size_t)n;
  }
  close(fd);
  return h;
}

/* ---- walking ------------------------------------------------------------- */

typedef struct entry {
  char* rel;
  ino_t ino;
  mode_t mode;
  off_t size;
  nlink_t nlink;
} entry;

typedef struct walk_list {
  entry* items;
  size_t count, cap;
} walk_list;

static void walk_into(walk_list* w, const char* root, const char* rel) {
  char* path;
  assert_true(asprintf(&path, "%s%s%s", root, *rel ? "/" : "", rel) > 0);
  DIR* d = opendir(path);
  assert_non_null(d);
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        (*rel == '\0' && strcmp(e->d_name, ".kpackfs") == 0))
      continue;
    char *child, *full;
    assert_true(asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >
                0);
    assert_true(asprintf(&full, "%s/%s", root, child) > 0);
    struct stat st;
    assert_int_equal(lstat(full, &st), 0);
    free(full);
    if (w->count == w->cap) {
      w->cap = w->cap ? 2 * w->cap : 256;
      w->items = realloc(w->items, w->cap * sizeof(*w->items));
      assert_non_null(w->items);
    }
    w->items[w->count++] =
        (entry){child, st.st_ino, st.st_mode, st.st_size, st.st_nlink};
    if (S_ISDIR(st.st_mode))
      walk_into(w, root, child);
  }
  closedir(d);
  free(path);
}

static int by_rel(const void* a, const void* b) {
  return strcmp(((const entry*)a)->rel, ((const entry*)b)->rel);
}

static walk_list walk(const char* root) {
  walk_list w = {0};
  walk_into(&w, root, "");
  qsort(w.items, w.count, sizeof(*w.items), by_rel);
  return w;
}

static void walk_free(walk_list* w) {
  for (size_t i = 0; i < w->count; i++)
    free(w->items[i].rel);
  free(w->items);
}

/* ---- tests --------------------------------------------------------------- */

static int suite_setup(void** state) {
  /* A daemon that stops answering leaves a reader blocked in the kernel:
   * the alarm ends the suite (its daemons get SIGTERM, see kt_spawn). */
  alarm((unsigned)patience() * 20);
  int rc = kt_tmp_setup(state);
  install = kt_path(kt_tmp, "install");
  write_install(install);
  return rc;
}

static int suite_teardown(void** state) {
  for (size_t i = 0; i < KERNELS; i++)
    free(files[i].rel);
  for (size_t i = 0; i < ARCHIVES; i++)
    free(archive_paths[i]);
  free(install);
  return kt_tmp_teardown(state);
}

/* One archive in the middle of forty with a TOC that does not parse: the
 * mount is refused before anything is mounted, naming that archive. */
static void test_a_corrupt_archive_among_forty_fails_the_mount(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "corrupt");
  char* bad = NULL;
  write_install(dir);
  assert_true(asprintf(&bad, "%s/%s_lib_%s.kpack", dir, components[2],
                       arches[ARCHES / 2]) > 0);
  size_t size;
  uint8_t* bytes = kt_read_file(bad, &size);
  assert_non_null(bytes);
  uint64_t toc = 0;
  for (int i = 7; i >= 0; i--)
    toc = toc << 8 | bytes[8 + i];
  assert_true(toc < size);
  bytes[toc] = 0xc1; /* a byte MessagePack never uses */
  kt_write_file(bad, bytes, size);
  free(bytes);

  char* mnt_dir = kt_path(kt_tmp, "mnt-corrupt");
  char* log = kt_path(kt_tmp, "corrupt.log");
  mkdir(mnt_dir, 0755);
  pid_t pid = spawn_kpackfs(dir, mnt_dir, log);
  assert_true(pid > 0);
  int status = kt_wait(pid, patience());
  assert_int_not_equal(status, -1);
  assert_false(kt_is_mountpoint(mnt_dir));
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  char* text = kt_read_file(log, &size);
  assert_non_null(text);
  char* want;
  assert_true(asprintf(&want, "kpackfs: %s: KPACK_ERROR_", bad) > 0);
  if (strstr(text, want) == NULL)
    fail_msg("no \"%s\" in:\n%s", want, text);
  free(want);
  free(text);
  rmdir(mnt_dir);
  free(mnt_dir);
  free(log);
  free(bad);
  kt_rmtree(dir);
  free(dir);
}

/* Two mounts of the same folder, one walked in readdir order, the other
 * reached by `stat` alone, last path first: every path has the same inode
 * number on both. */
static void test_inode_numbers_do_not_depend_on_what_was_looked_up_first(
    void** state) {
  (void)state;
  mnt a, b;
  mnt_start(&a, "mnt-a", install);
  mnt_start(&b, "mnt-b", install);
  walk_list w = walk(a.dir);
  assert_true(w.count > KERNELS);
  for (size_t i = w.count; i-- > 0;) {
    char* path = in_mount(&b, w.items[i].rel);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if (st.st_ino != w.items[i].ino)
      fail_msg("%s: inode %ju on one mount, %ju on the other", w.items[i].rel,
               (uintmax_t)w.items[i].ino, (uintmax_t)st.st_ino);
    free(path);
  }
  walk_free(&w);
  mnt_stop_clean(&b);
  mnt_stop_clean(&a);
}

/* A kernel deep in the tree reached by `stat PATH` on a fresh mount, with
 * nothing listed before: its file, its arch directory and its binary
 * directory are all right, and listing them afterwards agrees. */
static void test_a_deep_path_first_reached_by_stat_works(void** state) {
  (void)state;
  mnt m;
  mnt_start(&m, "mnt-deep", install);
  const expected* f = &files[(2 * ARCHES + 7) * PER_ARCHIVE + 13];
  char* path = in_mount(&m, f->rel);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_size, f->size);
  size_t size;
  assert_int_equal(checksum(path, &size), f->sum);
  assert_int_equal(size, f->size);

  free(path);
  const char* arch_end = strrchr(f->rel, '/');
  char* arch_rel = strndup(f->rel, (size_t)(arch_end - f->rel));
  path = in_mount(&m, arch_rel); /* the arch directory */
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_nlink, 2);
  walk_list w = walk(path);
  assert_int_equal(w.count, 3);
  assert_string_equal(w.items[0].rel, "kernel.hsaco");
  assert_string_equal(w.items[1].rel, "kernels");
  assert_string_equal(w.items[2].rel, "metadata.json");
  walk_free(&w);

  free(path);
  *strrchr(arch_rel, '/') = '\0';
  path = in_mount(&m, arch_rel); /* the binary directory: one arch each */
  free(arch_rel);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_nlink, 2 + ARCHES);
  DIR* d = opendir(path);
  assert_non_null(d);
  size_t seen = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    seen += e->d_name[0] != '.';
  closedir(d);
  assert_int_equal(seen, ARCHES);
  free(path);
  mnt_stop_clean(&m);
}

typedef struct reader {
  const mnt* m;
  size_t first;
  size_t wrong;
  size_t errors;
} reader;

static void* read_everything(void* arg) {
  reader* r = arg;
  for (size_t k = 0; k < KERNELS; k++) {
    const expected* f = &files[(r->first + k) % KERNELS];
    char* path = in_mount(r->m, f->rel);
    size_t size;
    errno = 0;
    uint64_t sum = checksum(path, &size);
    if (sum == 0 && errno != 0)
      r->errors++;
    else if (sum != f->sum || size != f->size)
      r->wrong++;
    free(path);
  }
  return NULL;
}

/* Sixteen readers start on a fresh mount, each at another place in the
 * install, and together make every directory on first use. */
static void test_sixteen_readers_of_a_fresh_mount_read_every_byte(
    void** state) {
  (void)state;
  enum { READERS = 16 };
  mnt m;
  mnt_start(&m, "mnt-readers", install);
  reader r[READERS];
  pthread_t t[READERS];
  for (size_t i = 0; i < READERS; i++) {
    r[i] = (reader){&m, i * KERNELS / READERS, 0, 0};
    assert_int_equal(pthread_create(&t[i], NULL, read_everything, &r[i]), 0);
  }
  for (size_t i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(r[i].errors, 0);
    assert_int_equal(r[i].wrong, 0);
  }
  mnt_stop_clean(&m);
}

/* The mount lists what `kpack extract` writes: the same directories and
 * files with the same sizes (the text files of these kernels, which are
 * not code objects, are empty in both); the counters agree. */
static void test_the_mount_shows_what_extract_writes(void** state) {
  (void)state;
  char* out = kt_path(kt_tmp, "extracted");
  char* kpack = kt_program("kpack");
  char* argv[ARCHIVES + 5] = {kpack, "extract", "-C", out};
  for (size_t i = 0; i < ARCHIVES; i++)
    argv[4 + i] = archive_paths[i];
  assert_int_equal(kt_run(argv, patience(), NULL, NULL), 0);

  mnt m;
  mnt_start(&m, "mnt-extract", install);
  walk_list a = walk(m.dir), b = walk(out);
  assert_int_equal(a.count, b.count);
  for (size_t i = 0; i < a.count; i++) {
    assert_string_equal(a.items[i].rel, b.items[i].rel);
    assert_int_equal(S_ISDIR(a.items[i].mode), S_ISDIR(b.items[i].mode));
    if (S_ISREG(a.items[i].mode))
      assert_int_equal(a.items[i].size, b.items[i].size);
  }
  walk_free(&a);
  walk_free(&b);

  char* stats = in_mount(&m, ".kpackfs/stats");
  size_t size;
  char* text = kt_read_file(stats, &size);
  assert_non_null(text);
  char want[128];
  snprintf(want, sizeof(want), "archives=%d\nbinaries=%d\nkernels=%d\n",
           ARCHIVES, COMPONENTS * PER_ARCHIVE, KERNELS);
  if (strstr(text, want) == NULL)
    fail_msg("no \"%s\" in:\n%s", want, text);
  free(text);
  free(stats);
  mnt_stop_clean(&m);
  kt_rmtree(out);
  free(out);
  free(kpack);
}

/* Kernels are numbered across every source, shown or not: the text files
 * of a kernel numbered after skipped and shadowed ones render into their
 * own slot (under AddressSanitizer, a table sized by the kernels shown
 * would be overrun here). */
static void test_text_files_after_skipped_and_shadowed_kernels(void** state) {
  (void)state;
  char* first = kt_path(kt_tmp, "numbered-first.kpack");
  char* second = kt_path(kt_tmp, "numbered-second.kpack");
  void* bytes = kt_pattern(3000, 5);
  const kt_kernel a[] = {{"lib/a.so#0", "gfx/bad", bytes, 3000},
                         {"lib/a.so#0", "gfx90a", bytes, 3000},
                         {"lib/b.so#0", "..", bytes, 3000}};
  const kt_kernel b[] = {{"lib/a.so#0", "gfx90a", bytes, 3000},
                         {"lib/a.so#0", "gfx942", bytes, 3000},
                         {"lib/c.so#0", "gfx1100", bytes, 3000}};
  kt_write_archive(first, KPACK_COMPRESSION_NOOP, NULL, 0, a, 3);
  kt_write_archive(second, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, b, 3);
  char* both;
  assert_true(asprintf(&both, "%s:%s", first, second) > 0);
  mnt m;
  mnt_start(&m, "mnt-numbered", both);
  static const char* const texts[] = {
      "lib/c.so#0/gfx1100/kernels", "lib/c.so#0/gfx1100/metadata.json",
      "lib/a.so#0/gfx942/kernels", "lib/a.so#0/gfx90a/metadata.json"};
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    char* path = in_mount(&m, texts[i]);
    size_t size;
    errno = 0;
    uint64_t sum = checksum(path, &size);
    if (sum == 0 && errno != 0)
      fail_msg("%s: %s", texts[i], strerror(errno));
    assert_int_equal(size, 0); /* not code objects: empty texts */
    free(path);
  }
  char* stats = in_mount(&m, ".kpackfs/stats");
  size_t size;
  char* text = kt_read_file(stats, &size);
  assert_non_null(strstr(text, "kernels=3\nskipped=2\nshadowed=1\n"));
  free(text);
  free(stats);
  mnt_stop_clean(&m);
  free(both);
  free(bytes);
  free(first);
  free(second);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_corrupt_archive_among_forty_fails_the_mount),
      cmocka_unit_test(
          test_inode_numbers_do_not_depend_on_what_was_looked_up_first),
      cmocka_unit_test(test_a_deep_path_first_reached_by_stat_works),
      cmocka_unit_test(test_sixteen_readers_of_a_fresh_mount_read_every_byte),
      cmocka_unit_test(test_the_mount_shows_what_extract_writes),
      cmocka_unit_test(test_text_files_after_skipped_and_shadowed_kernels),
  };
  return cmocka_run_group_tests_name("kpackfs install", tests, suite_setup,
                                     suite_teardown);
}
