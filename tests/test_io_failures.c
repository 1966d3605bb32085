/* SPDX-License-Identifier: MIT
 *
 * The kpack tool when a file cannot be written or read: a full disk (a
 * small tmpfs), a read-only filesystem and an unreadable input, for split
 * (of trees and of wheels), create and extract. Each message names the file and
 * the system's reason, the run stops at the first failed write, and what a
 * failed run made is taken back. Needs root (mount, setpriv); skipped without
 * it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "producer/wheel.h"
#include "fixture_program.h"
#include "support.h"

/* The filesystems a test mounted, unmounted by its teardown. */
static char* mounts[4];
static size_t mount_count;

static int teardown(void** state) {
  while (mount_count > 0) {
    char* dir = mounts[--mount_count];
    umount2(dir, MNT_DETACH);
    free(dir);
  }
  return kt_kpack_teardown(state);
}

/* A tmpfs at scratch directory `name` (created): `size` bytes, so that a
 * write past them fails with ENOSPC; read-only with `read_only`. */
static char* mount_tmpfs(const char* name, const char* size, bool read_only) {
  if (geteuid() != 0)
    skip(); /* mounting needs root */
  char* dir = kt_in_tmp(name);
  char options[64];
  kt_mkdirs(dir);
  snprintf(options, sizeof(options), "size=%s,mode=0755", size);
  assert_true(mount_count < sizeof(mounts) / sizeof(mounts[0]));
  if (mount("tmpfs", dir, "tmpfs", read_only ? MS_RDONLY : 0, options) != 0)
    fail_msg("mount tmpfs on %s: %s", dir, strerror(errno));
  mounts[mount_count++] = strdup(dir);
  return dir;
}

/* `size` bytes no compressor shrinks (an xorshift stream). */
static void* noise(size_t size, uint32_t seed) {
  uint8_t* p = malloc(size);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)x;
  }
  return p;
}

/* The names in directory `dir` other than . and .., one a line, sorted by
 * ls. */
static char* listing(const char* dir) {
  char* out = NULL;
  char* argv[] = {"ls", "-A", (char*)dir, NULL};
  assert_int_equal(kt_run(argv, 30, &out, NULL), 0);
  return out;
}

static void assert_empty_dir(const char* dir) {
  char* names = listing(dir);
  if (names[0] != '\0')
    fail_msg("%s is not empty:\n%s", dir, names);
  free(names);
}

/* A shared object linked by the system compiler whose one code object,
 * for gfx90a, is `size` incompressible bytes, plus `small` bytes for
 * gfx1100 (none when 0). */
static void write_fat(const char* path, size_t size, size_t small) {
  void* big = noise(size, 7);
  void* little = noise(small ? small : 1, 8);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", big, size},
                  {"hipv4-amdgcn-amd-amdhsa--gfx1100", little, small}};
  fx_buf bundle = fx_bundle(e, small ? 3 : 2);
  char* dir = kt_in_tmp("build");
  kt_mkdirs(dir);
  fx_program_opts o = {
      .kind = FX_PROGRAM_SHARED, .bundles = &bundle, .bundle_count = 1};
  assert_true(fx_build_program(dir, &o, path));
  kt_rmtree(dir);
  free(dir);
  fx_free(&bundle);
  free(big);
  free(little);
}

/* in/lib/libfat.so.1 (its gfx90a code object `size` bytes), in/share/sub
 * (mode 0750) with a small file, in/share/data of `data` bytes. */
static char* write_tree(size_t size, size_t data) {
  char* in = kt_in_tmp("in");
  char* lib = kt_path(in, "lib/libfat.so.1");
  char* sub = kt_path(in, "share/sub");
  char* note = kt_path(in, "share/sub/note.txt");
  char* big = kt_path(in, "share/data");
  kt_mkdirs(sub);
  assert_int_equal(chmod(sub, 0750), 0);
  char* lib_dir = kt_path(in, "lib");
  kt_mkdirs(lib_dir);
  write_fat(lib, size, 3000);
  kt_write_file(note, "note\n", 5);
  void* bytes = noise(data, 9);
  kt_write_file(big, bytes, data);
  free(bytes);
  free(lib_dir);
  free(lib);
  free(sub);
  free(note);
  free(big);
  return in;
}

/* `ls -lR --time-style=full-iso` of a tree, to show it did not change. */
static char* describe(const char* dir) {
  char* out = NULL;
  char* argv[] = {"ls", "-lRA", "--time-style=full-iso", (char*)dir, NULL};
  assert_int_equal(kt_run(argv, 30, &out, NULL), 0);
  return out;
}

/* ---- split --------------------------------------------------------------- */

/* The archive does not fit: the message names it with the system's reason
 * (not a TOC key, not an input), and the output directory, which the run
 * made, is gone again. The input is untouched. */
static void
test_split_to_a_full_disk_names_the_archive_and_takes_back_its_output(
    void** state) {
  (void)state;
  char* in = write_tree(600 << 10, 1000);
  char* full = mount_tmpfs("full", "256k", false);
  char* out = kt_path(full, "out");
  char* before = describe(in);
  char *stdout_text, *err, *expected;
  int rc = KT_KPACK(&stdout_text, &err, "split", "-q", "--no-compress", "-o",
                    out, "--prefix", "fat", in);
  assert_int_equal(rc, 1);
  assert_true(asprintf(&expected,
                       "kpack: %s/.kpack/fat_gfx90a.kpack: cannot write: No "
                       "space left on device\n"
                       "kpack: %s: the files and directories this run made "
                       "were removed\n",
                       out, out) > 0);
  assert_string_equal(err, expected);
  assert_empty_dir(full);
  char* after = describe(in);
  assert_string_equal(after, before);
  free(after);
  free(before);
  free(expected);
  free(stdout_text);
  free(err);
  free(out);
  free(full);
  free(in);
}

/* Not even the transformed binary fits: it is named, not its input. */
static void test_split_to_a_full_disk_names_the_binary_being_written(
    void** state) {
  (void)state;
  char* in = write_tree(2000, 10);
  char* full = mount_tmpfs("full", "8k", false);
  char* out = kt_path(full, "out");
  char *err, *expected;
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-q", "-o", out, in), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s/lib/libfat.so.1: cannot write: No space "
                       "left on device\n"
                       "kpack: %s: the files and directories this run made "
                       "were removed\n",
                       out, out) > 0);
  assert_string_equal(err, expected);
  assert_empty_dir(full);
  free(expected);
  free(err);
  free(out);
  free(full);
  free(in);
}

/* A mirrored file does not fit: the message names the copy, not its
 * source; the archives already written and the directories are removed;
 * what was there before stays as it was: the earlier archive the run
 * would have replaced too. */
static void test_split_to_a_full_disk_leaves_what_was_there(void** state) {
  (void)state;
  char* in = write_tree(2000, 400 << 10);
  char* full = mount_tmpfs("full", "256k", false);
  char* out = kt_path(full, "out");
  char* kpack_dir = kt_path(out, ".kpack");
  char* old_archive = kt_path(out, ".kpack/fat_gfx1100.kpack");
  char* keep = kt_path(out, "keep.txt");
  kt_mkdirs(kpack_dir);
  kt_write_file(old_archive, "old", 3);
  kt_write_file(keep, "keep", 4);
  char *stdout_text, *err, *expected;
  int rc = KT_KPACK(&stdout_text, &err, "split", "-q", "-o", out, "--prefix",
                    "fat", in);
  assert_int_equal(rc, 1);
  assert_true(asprintf(&expected,
                       "kpack: %s/share/data: cannot write: No space left on "
                       "device\n"
                       "kpack: %s: the files and directories this run made "
                       "were removed\n",
                       out, out) > 0);
  assert_string_equal(err, expected);
  /* Only what was there before is left, as it was: the earlier archive,
   * the untouched file, and the directories holding them. */
  char* names = listing(out);
  assert_string_equal(names, ".kpack\nkeep.txt\n");
  free(names);
  names = listing(kpack_dir);
  assert_string_equal(names, "fat_gfx1100.kpack\n");
  free(names);
  size_t size;
  char* bytes = kt_read_file(old_archive, &size);
  assert_int_equal(size, 3);
  assert_memory_equal(bytes, "old", 3);
  free(bytes);
  free(expected);
  free(stdout_text);
  free(err);
  free(keep);
  free(old_archive);
  free(kpack_dir);
  free(out);
  free(full);
  free(in);
}

/* Directories get the input's modes when they are made: a run stopped
 * before its end (here killed, so that nothing is cleaned up) leaves none
 * with a mode of its own. */
static void test_split_directories_have_their_modes_from_the_start(
    void** state) {
  (void)state;
  char* in = write_tree(2000, 10);
  char* sub = kt_path(in, "share/sub");
  char* share = kt_path(in, "share");
  char* out = kt_in_tmp("out");
  assert_int_equal(chmod(share, 0711), 0);
  assert_int_equal(chmod(in, 0750), 0);
  /* Killed at its first step (the first transformed binary synced), so
   * that nothing is cleaned up. */
  int status =
      kt_run_killed("KPACK_SPLIT_KILL_AFTER", 1,
                    (const char* const[]){"split", "-q", "-o", out, in, NULL});
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  static const struct {
    const char* rel;
    mode_t mode;
  } dirs[] = {{"", 0750}, {"share", 0711}, {"share/sub", 0750}, {"lib", 0755}};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    struct stat st;
    char* p = kt_path(out, dirs[i].rel);
    assert_int_equal(lstat(p, &st), 0);
    if ((st.st_mode & 07777) != dirs[i].mode)
      fail_msg("%s: mode %o, not %o", p, (unsigned)(st.st_mode & 07777),
               (unsigned)dirs[i].mode);
    free(p);
  }
  free(out);
  free(share);
  free(sub);
  free(in);
}

/* ---- create -------------------------------------------------------------- */

/* Merging archives onto a full disk blames the output, not the input
 * archive the kernel came from, through every path of the writer: frames
 * copied, kernels decompressed and stored raw, compression threads. No
 * temporary file is left. */
static void test_create_to_a_full_disk_blames_the_output(void** state) {
  (void)state;
  void* k0 = noise(200 << 10, 1);
  void* k1 = noise(200 << 10, 2);
  kt_kernel kernels[] = {{"lib/x.so#0", "gfx90a", k0, 200 << 10},
                         {"lib/x.so#1", "gfx90a", k1, 200 << 10}};
  char* input = kt_in_tmp("in.kpack");
  kt_write_archive(input, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, kernels,
                   2);
  char* full = mount_tmpfs("full", "256k", false);
  char* out = kt_path(full, "out.kpack");
  static const char* const modes[][2] = {
      {"-j", "1"}, {"--no-compress", "-q"}, {"-j", "4"}};
  for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
    char *err, *expected;
    int rc = KT_KPACK(NULL, &err, "create", "-q", modes[m][0], modes[m][1],
                      "-o", out, input);
    assert_int_equal(rc, 1);
    assert_true(asprintf(&expected,
                         "kpack: %s: cannot write: No space left on device\n",
                         out) > 0);
    if (strcmp(err, expected) != 0)
      fail_msg("%s %s: got\n%s", modes[m][0], modes[m][1], err);
    assert_empty_dir(full);
    free(expected);
    free(err);
  }
  free(out);
  free(full);
  free(input);
  free(k0);
  free(k1);
}

/* A read-only output: the system's reason, for the output. */
static void test_create_to_a_read_only_filesystem_says_so(void** state) {
  (void)state;
  void* k = noise(1000, 3);
  kt_kernel kernels[] = {{"lib/x.so#0", "gfx90a", k, 1000}};
  char* input = kt_in_tmp("in.kpack");
  kt_write_archive(input, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, kernels,
                   1);
  char* ro = mount_tmpfs("ro", "256k", true);
  char* out = kt_path(ro, "out.kpack");
  char *err, *expected;
  assert_int_equal(KT_KPACK(NULL, &err, "create", "-q", "-o", out, input), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: cannot write: Read-only file system\n",
                       out) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  free(out);
  free(ro);
  free(input);
  free(k);
}

/* Runs the tool with `args` (NULL-terminated) as the user nobody; its
 * exit status, its stderr in *err. */
static int run_as_nobody(const char* const* args, char** err) {
  char* argv[16] = {
      "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
      "--",      kt_kpack};
  size_t n = 6;
  for (; *args != NULL; args++) {
    assert_true(n < 15);
    argv[n++] = (char*)*args;
  }
  argv[n] = NULL;
  return kt_run(argv, 60, NULL, err);
}

/* An input archive or fat binary the user may not read: named, with the
 * system's reason rather than "read or write error". */
static void test_create_from_an_unreadable_input_says_why(void** state) {
  (void)state;
  if (geteuid() != 0)
    skip(); /* runs the tool as nobody */
  void* k = noise(1000, 4);
  kt_kernel kernels[] = {{"lib/x.so#0", "gfx90a", k, 1000}};
  char* input = kt_in_tmp("in.kpack");
  char* out = kt_in_tmp("out.kpack");
  kt_write_archive(input, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, kernels,
                   1);
  assert_int_equal(chmod(input, 0600), 0);
  assert_int_equal(chmod(kt_tmp, 0755), 0); /* the file, not its directory */
  char *err, *expected;
  assert_true(asprintf(&expected,
                       "kpack: %s: KPACK_ERROR_IO_ERROR (Permission denied)\n",
                       input) > 0);
  assert_int_equal(
      run_as_nobody(
          (const char* const[]){"create", "-q", "-o", out, input, NULL}, &err),
      1);
  assert_string_equal(err, expected);
  free(err);
  assert_int_equal(
      run_as_nobody((const char* const[]){"create", "-q", "-o", out, "--fatbin",
                                          input, NULL},
                    &err),
      1);
  assert_string_equal(err, expected);
  free(err);
  free(expected);
  free(out);
  free(input);
  free(k);
}

/* ---- extract ------------------------------------------------------------- */

/* A FIFO given as an archive is not read (it could block) and is called
 * what it is, not a directory. */
static void test_extract_of_a_fifo_says_it_is_no_regular_file(void** state) {
  (void)state;
  char* fifo = kt_in_tmp("fifo.kpack");
  char* dir = kt_in_tmp("tree");
  assert_int_equal(mkfifo(fifo, 0644), 0);
  char *err, *expected;
  assert_int_equal(KT_KPACK(NULL, &err, "extract", "-C", dir, fifo), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: KPACK_ERROR_IO_ERROR (not a regular file)\n",
                       fifo) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  free(dir);
  free(fifo);
}

enum { EXTRACT_KERNELS = 40, EXTRACT_SIZE = 20000 };

/* An archive of 40 incompressible kernels lib/x.so#N for gfx90a. */
static char* write_many(void) {
  kt_kernel kernels[EXTRACT_KERNELS];
  char names[EXTRACT_KERNELS][32];
  void* data[EXTRACT_KERNELS];
  for (size_t i = 0; i < EXTRACT_KERNELS; i++) {
    snprintf(names[i], sizeof(names[i]), "lib/x.so#%zu", i);
    data[i] = noise(EXTRACT_SIZE, (uint32_t)i + 10);
    kernels[i] = (kt_kernel){names[i], "gfx90a", data[i], EXTRACT_SIZE};
  }
  char* archive = kt_in_tmp("many.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, kernels,
                   EXTRACT_KERNELS);
  for (size_t i = 0; i < EXTRACT_KERNELS; i++)
    free(data[i]);
  return archive;
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Extraction onto a full disk stops at the first file that cannot be
 * written: one message naming it, one saying that DIR is as it was; the
 * kernels it wrote are taken back, the directories it made removed, and
 * an earlier extraction's files there (replaced as the run went) put
 * back, times included. */
static void test_extract_to_a_full_disk_stops_at_the_first_failure(
    void** state) {
  (void)state;
  char* archive = write_many();
  char* full = mount_tmpfs("full", "256k", false);
  char* dir = kt_path(full, "tree");
  /* An earlier extraction of the first kernel, a file of its own. */
  char* earlier = kt_path(dir, "lib/x.so#0/gfx90a");
  kt_mkdirs(earlier);
  char* earlier_kernel = kt_path(earlier, "kernel.hsaco");
  kt_write_file(earlier_kernel, "earlier", 7);
  char* mine = kt_path(dir, "notes.txt");
  kt_write_file(mine, "mine", 4);
  char* before = kt_tree_state(dir, true);
  char *err, *expected;
  assert_int_equal(KT_KPACK(NULL, &err, "extract", "-B", "-C", dir, archive),
                   1);
  /* Kernels go out in byte order of their names: the first that did not
   * fit is named. */
  char names[EXTRACT_KERNELS][32];
  const char* order[EXTRACT_KERNELS];
  for (size_t i = 0; i < EXTRACT_KERNELS; i++) {
    snprintf(names[i], sizeof(names[i]), "lib/x.so#%zu", i);
    order[i] = names[i];
  }
  qsort(order, EXTRACT_KERNELS, sizeof(order[0]), compare_names);
  size_t whole = 0;
  for (; whole < EXTRACT_KERNELS; whole++) {
    char* p;
    assert_true(asprintf(&p, "%s/%s/gfx90a/kernel.hsaco: cannot write", dir,
                         order[whole]) > 0);
    bool named = strstr(err, p) != NULL;
    free(p);
    if (named)
      break;
  }
  assert_true(whole > 0 && whole < EXTRACT_KERNELS);
  assert_true(asprintf(&expected,
                       "kpack: %s/%s/gfx90a/kernel.hsaco: cannot write: No "
                       "space left on device\n"
                       "kpack: extract: stopped; %s is as it was (the %zu "
                       "kernels written taken back)\n",
                       dir, order[whole], dir, whole) > 0);
  assert_string_equal(err, expected);
  char* after = kt_tree_state(dir, true);
  assert_string_equal(after, before);
  free(after);
  free(before);
  free(mine);
  free(earlier_kernel);
  free(earlier);
  free(expected);
  free(err);
  free(dir);
  free(full);
  free(archive);
}

/* A read-only directory: one message with the system's reason, not one per
 * kernel. */
static void test_extract_to_a_read_only_filesystem_stops_at_once(void** state) {
  (void)state;
  char* archive = write_many();
  char* ro = mount_tmpfs("ro", "256k", true);
  char *err, *expected;
  assert_int_equal(KT_KPACK(NULL, &err, "extract", "-C", ro, archive), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s/.kpack-extract.journal: cannot create: "
                       "Read-only file system\n"
                       "kpack: extract: stopped; %s is as it was (the 0 "
                       "kernels written taken back)\n",
                       ro, ro) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  free(ro);
  free(archive);
}

/* An extraction over an earlier one: `dir` holds archive `one`
 * extracted, a map beside lib/a.so#0 that archive `two` has not, and a
 * file of the user's; `ref` is a copy of it with `two` extracted over. */
typedef struct over_earlier {
  void* d[3];
  char *one, *two, *dir, *ref, *stale, *mine;
} over_earlier;

/* `dir` as it is before the extraction of `two`. */
static void over_earlier_reset(const over_earlier* o) {
  kt_rmtree(o->dir);
  assert_int_equal(KT_KPACK(NULL, NULL, "extract", "-C", o->dir, o->one), 0);
  kt_write_file(o->stale, "\x80", 1);
  kt_write_file(o->mine, "mine", 4);
}

static void over_earlier_make(over_earlier* o, const char* name,
                              uint32_t seed) {
  size_t sizes[3] = {3000, 5000, 4000};
  for (size_t i = 0; i < 3; i++)
    o->d[i] = noise(sizes[i], seed + (uint32_t)i);
  const kt_kernel first[] = {{"lib/a.so#0", "gfx90a", o->d[0], 3000},
                             {"lib/b.so#0", "gfx90a", o->d[1], 5000}};
  const kt_kernel second[] = {{"lib/a.so#0", "gfx90a", o->d[2], 4000},
                              {"lib/b.so#0", "gfx942", o->d[1], 5000},
                              {"lib/c.so#0", "gfx90a", o->d[0], 3000}};
  char path[64];
  snprintf(path, sizeof(path), "%s-1.kpack", name);
  o->one = kt_in_tmp(path);
  snprintf(path, sizeof(path), "%s-2.kpack", name);
  o->two = kt_in_tmp(path);
  kt_write_archive(o->one, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, first,
                   2);
  kt_write_archive(o->two, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, second,
                   3);
  snprintf(path, sizeof(path), "%s-tree", name);
  o->dir = kt_in_tmp(path);
  snprintf(path, sizeof(path), "%s-ref", name);
  o->ref = kt_in_tmp(path);
  o->stale = kt_path(o->dir, "lib/a.so#0/gfx90a/toc-metadata.msgpack");
  o->mine = kt_path(o->dir, "notes.txt");
  over_earlier_reset(o);
  char* cp_argv[] = {"cp", "-a", o->dir, o->ref, NULL};
  assert_int_equal(kt_run(cp_argv, 60, NULL, NULL), 0);
  assert_int_equal(KT_KPACK(NULL, NULL, "extract", "-C", o->ref, o->two), 0);
}

static void over_earlier_free(over_earlier* o) {
  free(o->mine);
  free(o->stale);
  free(o->ref);
  free(o->dir);
  free(o->two);
  free(o->one);
  for (size_t i = 0; i < 3; i++)
    free(o->d[i]);
}

/* Extraction over an earlier one, each write failed in turn
 * (KPACK_EXTRACT_FAIL_AFTER: each directory made, each file written, each
 * file kept aside and put in place, a stale file beside a kernel moved
 * away): every failed run leaves the tree exactly as it was, times
 * included, and the run that succeeds gives the tree a clean extraction
 * over a copy gives. */
static void failing_at_each_write(const char* name) {
  over_earlier o;
  over_earlier_make(&o, name, 21);
  unsigned failures = kt_fail_each_write(
      "KPACK_EXTRACT_FAIL_AFTER", o.dir,
      (const char* const[]){"extract", "-C", o.dir, o.two, NULL});
  /* 3 directories made; lib/a.so#0's 3 files each written, kept and put
   * in place, its stale map moved away; 3 files written and put in place
   * for each of the other two kernels. */
  assert_int_equal(failures, 25);
  kt_assert_same_tree(o.dir, o.ref);
  assert_int_not_equal(access(o.stale, F_OK), 0);
  over_earlier_free(&o);
}

static void test_extract_failing_at_each_write_leaves_the_tree(void** state) {
  (void)state;
  failing_at_each_write("each");
}

/* A second extraction into DIR while the first is stopped at its first
 * write, its journal just in place: the second is refused and changes
 * nothing, and the first, let go on, completes as if alone. The journal
 * takes its name only once it is locked and written (O_TMPFILE), so
 * there is no moment at which the second could take it for a killed
 * run's and take it back; made by name, it is locked at once. */
static void beside_a_run_that_just_began(const char* name) {
  over_earlier o;
  over_earlier_make(&o, name, 41);
  const char* const args[] = {"extract", "-C", o.dir, o.two, NULL};
  pid_t first = kt_start_stopped("KPACK_EXTRACT_STOP_AFTER", 1, args);
  char* journal = kt_path(o.dir, ".kpack-extract.journal");
  assert_int_equal(access(journal, F_OK), 0);
  char* before = kt_tree_state(o.dir, true);
  char* err = NULL;
  assert_int_equal(kt_run_args(kt_kpack, args, 300, NULL, &err), 1);
  kt_assert_contains(err, "another kpack extract is writing into");
  char* after = kt_tree_state(o.dir, true);
  assert_string_equal(after, before);
  assert_int_equal(kt_resume_stopped(first), 0);
  assert_int_not_equal(access(journal, F_OK), 0);
  kt_assert_same_tree(o.dir, o.ref);
  free(after);
  free(before);
  free(err);
  free(journal);
  over_earlier_free(&o);
}

static void test_extract_beside_a_run_that_just_began_is_refused(void** state) {
  (void)state;
  beside_a_run_that_just_began("beside");
}

/* The same extraction killed (SIGKILL: nothing cleaned up) at each of
 * its writes, then at each step of its end (each kept file removed, then
 * its journal), then run again: the next run takes back what the killed
 * one changed, or completes it when it had ended. The next run is failed
 * at its own first write, which it takes back, so the tree shows what the
 * recovery left: the tree as it was, or as the whole extraction makes
 * it. */
static void killed_at_each_step(const char* name) {
  over_earlier o;
  over_earlier_make(&o, name, 31);
  char* before = kt_tree_state(o.dir, true);
  const char* const args[] = {"extract", "-C", o.dir, o.two, NULL};
  unsigned kills = 0;
  for (unsigned step = 1; step < 100; step++) {
    int status = kt_run_killed("KPACK_EXTRACT_KILL_AFTER", step, args);
    if (WIFEXITED(status)) {
      assert_int_equal(WEXITSTATUS(status), 0);
      break;
    }
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    kills++;
    char* err = NULL;
    if (step == 1) { /* what is left is not packed */
      char* packed = kt_in_tmp("killed-packed.kpack");
      assert_int_equal(
          KT_KPACK(NULL, &err, "create", "-q", "-o", packed, o.dir), 1);
      kt_assert_contains(err, "left by a kpack extract that was killed");
      free(err);
      free(packed);
    }
    setenv("KPACK_EXTRACT_FAIL_AFTER", "1", 1);
    int rc = kt_run_args(kt_kpack, args, 300, NULL, &err);
    unsetenv("KPACK_EXTRACT_FAIL_AFTER");
    assert_int_equal(rc, 1);
    /* 25 writes (test_extract_failing_at_each_write_leaves_the_tree),
     * then the end. */
    bool ended = step > 25;
    kt_assert_contains(err, ended ? "killed as it ended, was completed"
                                  : "what it had changed was taken back");
    if (!ended) {
      char* after = kt_tree_state(o.dir, true);
      if (strcmp(after, before) != 0)
        fail_msg(
            "killed at step %u, then taken back: %s changed:\n%s\n"
            "was:\n%s",
            step, o.dir, after, before);
      free(after);
    } else {
      kt_assert_same_tree(o.dir, o.ref);
      over_earlier_reset(&o); /* for the next kill */
      free(before);
      before = kt_tree_state(o.dir, true);
    }
    free(err);
  }
  /* 25 writes; 4 files kept (lib/a.so#0's 3 and its stale map), then the
   * journal. */
  assert_int_equal(kills, 30);
  kt_assert_same_tree(o.dir, o.ref);
  free(before);
  over_earlier_free(&o);
}

static void test_extract_killed_at_each_step_is_taken_back_by_the_next_run(
    void** state) {
  (void)state;
  killed_at_each_step("killed");
}

/* ---- a journal made by name ----------------------------------------------
 * Where an unnamed file cannot be linked into DIR (no /proc on an older
 * kernel, without CAP_DAC_READ_SEARCH), or the filesystem makes none, the
 * journal is made under its name and locked at once. The same three
 * checks, with the link failed through KPACK_EXTRACT_NAMED_JOURNAL: a run
 * that fails at each write, or is killed at each step and taken back, and
 * a second run beside one held at its first write, which the lock still
 * refuses. */

static int named_journal_setup(void** state) {
  setenv("KPACK_EXTRACT_NAMED_JOURNAL", "1", 1);
  return kt_kpack_setup(state);
}

static int named_journal_teardown(void** state) {
  unsetenv("KPACK_EXTRACT_NAMED_JOURNAL");
  return kt_kpack_teardown(state);
}

static void test_named_journal_failing_at_each_write_leaves_the_tree(
    void** state) {
  (void)state;
  failing_at_each_write("each-named");
}

static void test_named_journal_killed_at_each_step_is_taken_back(void** state) {
  (void)state;
  killed_at_each_step("killed-named");
}

static void test_named_journal_beside_a_run_that_just_began_is_refused(
    void** state) {
  (void)state;
  beside_a_run_that_just_began("beside-named");
}

/* A journal kpack extract did not write, or one naming a path outside
 * DIR, stops the run before it writes anything, and nothing it names is
 * touched. */
static void test_extract_refuses_a_journal_it_did_not_write(void** state) {
  (void)state;
  void* data = noise(3000, 41);
  const kt_kernel k[] = {{"lib/a.so#0", "gfx90a", data, 3000}};
  char* archive = kt_in_tmp("journal.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 1);
  char* dir = kt_in_tmp("journal-tree");
  char* outside = kt_in_tmp("outside.txt");
  kt_write_file(outside, "outside", 7);
  kt_mkdirs(dir);
  char* journal = kt_path(dir, ".kpack-extract.journal");
  static const char escape[] = "kpack extract journal 1\nN../outside.txt";
  const struct {
    const char* bytes;
    size_t size;
  } bad[] = {{"not a journal", 13}, {escape, sizeof(escape)}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kt_write_file(journal, bad[i].bytes, bad[i].size);
    char* before = kt_tree_state(dir, true);
    char* err = NULL;
    assert_int_equal(KT_KPACK(NULL, &err, "extract", "-C", dir, archive), 1);
    char* expected;
    assert_true(asprintf(&expected,
                         "kpack: %s: not a journal kpack extract wrote; "
                         "remove it to go on\n",
                         journal) > 0);
    assert_string_equal(err, expected);
    char* after = kt_tree_state(dir, true);
    assert_string_equal(after, before);
    assert_int_equal(access(outside, F_OK), 0);
    free(after);
    free(before);
    free(expected);
    free(err);
  }
  /* Removed, the run goes on. */
  assert_int_equal(unlink(journal), 0);
  assert_int_equal(KT_KPACK(NULL, NULL, "extract", "-C", dir, archive), 0);
  assert_int_not_equal(access(journal, F_OK), 0);
  free(journal);
  free(outside);
  free(dir);
  free(archive);
  free(data);
}

/* A wheel's large file is written by a second thread while the first
 * inflates: a full disk there still names the wheel and the system's
 * reason, and the output directory is left as it was. */
static void test_wheel_split_to_a_full_disk_leaves_what_was_there(
    void** state) {
  (void)state;
  char* tree = kt_in_tmp("wheel-tree");
  char* big = kt_tree_path(tree, "kpfull/big.bin");
  void* bytes = noise(3 << 20, 11);
  kt_write_file(big, bytes, 3 << 20);
  free(bytes);
  char* wheels = kt_in_tmp("wheels");
  kt_mkdirs(wheels);
  kp_wheel_pack_options o = {.project = "kp-full",
                             .version = "1.0",
                             .tags = "py3-none-any",
                             .root_is_purelib = true,
                             .level = 1};
  char* wheel;
  assert_int_equal(kp_wheel_pack(tree, wheels, &o, &wheel), KPACK_SUCCESS);
  char* full = mount_tmpfs("wheel-full", "1m", false);
  char* out = kt_path(full, "out");
  char* keep = kt_tree_path(out, "keep.txt");
  kt_write_file(keep, "keep", 4);
  char *stdout_text, *err, *expected;
  int rc =
      KT_KPACK(&stdout_text, &err, "split", "-q", "--wheel", wheel, "-o", out);
  assert_int_equal(rc, 1);
  assert_true(asprintf(&expected, "kpack: split: %s: No space left on device\n",
                       wheel) > 0);
  assert_string_equal(err, expected);
  char* names = listing(out);
  assert_string_equal(names, "keep.txt\n");
  free(names);
  free(expected);
  free(stdout_text);
  free(err);
  free(keep);
  free(out);
  free(full);
  free(wheel);
  free(wheels);
  free(big);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_split_to_a_full_disk_names_the_archive_and_takes_back_its_output,
          kt_kpack_setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_split_to_a_full_disk_names_the_binary_being_written,
          kt_kpack_setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_split_to_a_full_disk_leaves_what_was_there, kt_kpack_setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_wheel_split_to_a_full_disk_leaves_what_was_there, kt_kpack_setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_split_directories_have_their_modes_from_the_start,
          kt_kpack_setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_create_to_a_full_disk_blames_the_output, kt_kpack_setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_create_to_a_read_only_filesystem_says_so, kt_kpack_setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_create_from_an_unreadable_input_says_why, kt_kpack_setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_of_a_fifo_says_it_is_no_regular_file, kt_kpack_setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_to_a_full_disk_stops_at_the_first_failure,
          kt_kpack_setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_failing_at_each_write_leaves_the_tree, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_killed_at_each_step_is_taken_back_by_the_next_run,
          kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_refuses_a_journal_it_did_not_write, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_beside_a_run_that_just_began_is_refused, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_named_journal_failing_at_each_write_leaves_the_tree,
          named_journal_setup, named_journal_teardown),
      cmocka_unit_test_setup_teardown(
          test_named_journal_killed_at_each_step_is_taken_back,
          named_journal_setup, named_journal_teardown),
      cmocka_unit_test_setup_teardown(
          test_named_journal_beside_a_run_that_just_began_is_refused,
          named_journal_setup, named_journal_teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_to_a_read_only_filesystem_stops_at_once, kt_kpack_setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
