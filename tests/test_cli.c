/* SPDX-License-Identifier: MIT
 *
 * The kpack tool, run as a program ($KPACK_TEST_BIN/kpack): every
 * subcommand's output and exit status, deterministic and round-tripping
 * create, fat binary input (built byte by byte, and Debian's librocrand1),
 * verify on corrupt archives, resolve on each loader outcome, and Ctrl-C.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture_code_object.h"
#include "fixture_fatbin.h"
#include "fixture_toc.h"
#include "support.h"

extern char** environ;

static char* tmp;
static char* tool;

static int setup(void** state) {
  (void)state;
  tmp = kt_tmpdir();
  tool = kt_program("kpack");
  return 0;
}

static int teardown(void** state) {
  (void)state;
  kt_rmtree(tmp);
  free(tmp);
  free(tool);
  unsetenv("ROCM_KPACK_PATH");
  unsetenv("ROCM_KPACK_DISABLE");
  return 0;
}

/* ---- running the tool ---------------------------------------------------- */

static pid_t spawn_tool(const char* const* args, const char* out_path,
                        const char* err_path) {
  const char* argv[64];
  size_t n = 0;
  argv[n++] = tool;
  for (const char* const* a = args; *a != NULL; a++) {
    assert_true(n < 63);
    argv[n++] = *a;
  }
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  assert_int_equal(
      posix_spawn(&pid, tool, &fa, NULL, (char* const*)argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

static char* slurp(const char* path, size_t* size) {
  size_t n = 0;
  char* data = kt_read_file(path, &n);
  assert_non_null(data);
  if (size != NULL)
    *size = n;
  return data;
}

/* Runs kpack with the NULL-terminated arguments; returns its exit status and
 * optionally its stdout (with *out_size) and stderr, NUL-terminated. */
static int run_full(char** out, size_t* out_size, char** err,
                    const char* const* args) {
  char* out_path = kt_path(tmp, ".stdout");
  char* err_path = kt_path(tmp, ".stderr");
  pid_t pid = spawn_tool(args, out_path, err_path);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status)); /* never a crash */
  char* o = slurp(out_path, out_size);
  char* e = slurp(err_path, NULL);
  if (out != NULL)
    *out = o;
  else
    free(o);
  if (err != NULL)
    *err = e;
  else
    free(e);
  unlink(out_path);
  unlink(err_path);
  free(out_path);
  free(err_path);
  return WEXITSTATUS(status);
}

#define KP(out, err, ...) \
  run_full(out, NULL, err, (const char* const[]){__VA_ARGS__, NULL})

/* True if some line of `text` consists of exactly these whitespace-separated
 * words. */
static bool has_row(const char* text, const char* const* words) {
  for (const char* line = text; *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char* copy = strndup(line, len);
    char* save = NULL;
    size_t i = 0;
    bool match = true;
    for (char* w = strtok_r(copy, " \t", &save); match && w != NULL;
         w = strtok_r(NULL, " \t", &save), i++)
      match = words[i] != NULL && strcmp(w, words[i]) == 0;
    match = match && words[i] == NULL;
    free(copy);
    if (match)
      return true;
    line += len + (end != NULL);
  }
  return false;
}

#define ROW(text, ...) has_row(text, (const char* const[]){__VA_ARGS__, NULL})

/* True if some line of `text` contains every one of the substrings. */
static bool has_line(const char* text, const char* const* parts) {
  for (const char* line = text; *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char* copy = strndup(line, len);
    bool all = true;
    for (size_t i = 0; all && parts[i] != NULL; i++)
      all = strstr(copy, parts[i]) != NULL;
    free(copy);
    if (all)
      return true;
    line += len + (end != NULL);
  }
  return false;
}

#define LINE(text, ...) has_line(text, (const char* const[]){__VA_ARGS__, NULL})

static size_t count_lines(const char* text) {
  size_t n = 0;
  for (; *text; text++)
    n += *text == '\n';
  return n;
}

static char* path_in(const char* name) {
  return kt_path(tmp, name);
}

static bool exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Three kernels of two binaries; kernels[i] is kt_pattern(sizes[i], i+1). */
static const size_t sizes[] = {5000, 12345, 777};
static void* sample[3];
static const kt_kernel* sample_kernels(void) {
  static kt_kernel k[3];
  static const char* const names[][2] = {{"lib/liba.so.1#0", "gfx90a:xnack-"},
                                         {"lib/liba.so.1#0", "gfx1100"},
                                         {"lib/libb.so#3", "gfx90a:xnack-"}};
  for (int i = 0; i < 3; i++) {
    free(sample[i]);
    sample[i] = kt_pattern(sizes[i], (uint32_t)i + 1);
    k[i] = (kt_kernel){names[i][0], names[i][1], sample[i], sizes[i]};
  }
  return k;
}

static char* sample_archive(const char* name,
                            kpack_compression_scheme_t scheme) {
  static const char* const arches[] = {"gfx90a:xnack-", "gfx1100"};
  char* path = path_in(name);
  kt_write_archive(path, scheme, arches, 2, sample_kernels(), 3);
  return path;
}

static void free_sample(void) {
  for (int i = 0; i < 3; i++) {
    free(sample[i]);
    sample[i] = NULL;
  }
}

/* ---- help and usage ------------------------------------------------------ */

static void test_version_help_and_manuals(void** state) {
  (void)state;
  static const char* const cmds[] = {"list",   "info",   "cat",    "extract",
                                     "create", "verify", "resolve"};
  char *out, *err;
  assert_int_equal(KP(&out, NULL, "--version"), 0);
  kt_assert_contains(out, "kpack " KPACK_VERSION_STRING);
  free(out);
  assert_int_equal(KP(&out, NULL, "help"), 0);
  for (size_t i = 0; i < 7; i++)
    kt_assert_contains(out, cmds[i]);
  free(out);
  for (size_t i = 0; i < 7; i++) {
    char* manual;
    assert_int_equal(KP(&manual, NULL, cmds[i], "--help"), 0);
    kt_assert_contains(manual, "SYNOPSIS");
    kt_assert_contains(manual, "EXAMPLES");
    kt_assert_contains(manual, "EXIT STATUS");
    assert_int_equal(KP(&out, NULL, "help", cmds[i]), 0);
    assert_string_equal(out, manual);
    free(out);
    free(manual);
  }
  assert_int_equal(KP(NULL, &err, "frobnicate"), 2);
  kt_assert_contains(err, "frobnicate");
  free(err);
  assert_int_equal(KP(NULL, NULL, "help", "frobnicate"), 2);
}

static void test_bad_command_lines_exit_2(void** state) {
  (void)state;
  char* err;
  assert_int_equal(run_full(NULL, NULL, NULL, (const char* const[]){NULL}), 2);
  assert_int_equal(KP(NULL, &err, "list"), 2);
  kt_assert_contains(err, "kpack help list");
  free(err);
  assert_int_equal(KP(NULL, NULL, "list", "--bogus", "x.kpack"), 2);
  assert_int_equal(KP(NULL, NULL, "cat", "a.kpack", "bin"), 2);
  assert_int_equal(KP(NULL, NULL, "create", "dir"), 2); /* no -o */
  assert_int_equal(KP(NULL, NULL, "create", "-o", "x", "-l", "0", tmp), 2);
  assert_int_equal(
      KP(NULL, NULL, "create", "-o", "x", "-l", "5", "--no-compress", tmp), 2);
  assert_int_equal(KP(NULL, NULL, "create", "-o", "x"), 2); /* no input */
  assert_int_equal(KP(NULL, NULL, "resolve", "--kernel", "k"), 2); /* arch */
  assert_int_equal(KP(NULL, NULL, "verify"), 2);
  assert_int_equal(KP(NULL, NULL, "extract"), 2);
}

/* ---- list, info, cat ----------------------------------------------------- */

static void test_list_shows_every_kernel_with_sizes_and_ratio(void** state) {
  (void)state;
  char* path = sample_archive("a.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  kpack_archive_t archive;
  kpack_kernel_info_t info;
  char *out, size[32], stored[32], ratio[32];
  assert_int_equal(KP(&out, NULL, "list", path), 0);
  assert_true(ROW(out, "BINARY", "ARCH", "SIZE", "STORED", "RATIO"));
  assert_int_equal(kpack_open(path, &archive), KPACK_SUCCESS);
  const kt_kernel* k = sample_kernels();
  for (int i = 0; i < 3; i++) {
    assert_int_equal(
        kpack_get_kernel_info(archive, k[i].binary, k[i].arch, &info),
        KPACK_SUCCESS);
    snprintf(size, sizeof size, "%zu", sizes[i]);
    snprintf(stored, sizeof stored, "%llu",
             (unsigned long long)info.stored_size);
    snprintf(ratio, sizeof ratio, "%.2fx",
             (double)sizes[i] / (double)info.stored_size);
    assert_true(ROW(out, k[i].binary, k[i].arch, size, stored, ratio));
  }
  kpack_close(archive);
  kt_assert_contains(out, "3 kernels");
  assert_int_equal(count_lines(out), 5); /* header, 3 rows, total */
  free(out);
  free(path);
  free_sample();
}

static void test_list_json_and_several_archives(void** state) {
  (void)state;
  char* a = sample_archive("a.kpack", KPACK_COMPRESSION_NOOP);
  char* b = path_in("b.kpack");
  void* data = kt_pattern(100, 9);
  kt_kernel only = {"bin/tool#0", "gfx942", data, 100};
  kt_write_archive(b, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &only, 1);
  char *out, *want;
  assert_int_equal(KP(&out, NULL, "list", a, b), 0);
  assert_true(ROW(out, "ARCHIVE", "BINARY", "ARCH", "SIZE", "STORED", "RATIO"));
  assert_true(
      ROW(out, a, "lib/libb.so#3", "gfx90a:xnack-", "777", "777", "1.00x"));
  kt_assert_contains(out, "4 kernels");
  free(out);
  assert_int_equal(KP(&out, NULL, "list", "--json", a), 0);
  assert_true(asprintf(&want,
                       "{\"archive\": \"%s\", \"binary\": \"lib/libb.so#3\", "
                       "\"arch\": \"gfx90a:xnack-\", \"type\": \"hsaco\", "
                       "\"size\": 777, \"stored_size\": 777, \"ordinal\": 2}",
                       a) > 0);
  kt_assert_contains(out, want);
  assert_true(out[0] == '[');
  kt_assert_contains(out, "\n]\n");
  assert_int_equal(count_lines(out), 5); /* [, three objects, ] */
  free(want);
  free(out);
  free(data);
  free(a);
  free(b);
  free_sample();
}

/* Kernels sharing one stored frame (what -fgpu-rdc gives) add its bytes
 * to the stored totals of list and info once. */
static void test_totals_count_shared_stored_bytes_once(void** state) {
  (void)state;
  char* path = path_in("shared.kpack");
  void* data = kt_pattern(3000, 4);
  kt_kernel k[] = {{"bin/app#0", "gfx90a", data, 3000},
                   {"bin/app#1", "gfx90a", data, 3000},
                   {"bin/app#2", "gfx90a", data, 3000}};
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, 3);
  kpack_archive_t archive;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(path, &archive), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(archive, "bin/app#2", "gfx90a", &info),
                   KPACK_SUCCESS);
  kpack_close(archive);
  char *out, *want, stored[32], ratio[32];
  snprintf(stored, sizeof stored, "%llu", (unsigned long long)info.stored_size);
  snprintf(ratio, sizeof ratio, "%.2fx", 3000.0 / (double)info.stored_size);
  assert_int_equal(KP(&out, NULL, "list", path), 0);
  assert_true(ROW(out, "bin/app#1", "gfx90a", "3000", stored, ratio));
  /* Under 1 MiB: bytes or KiB, as the summary writes them. */
  if (info.stored_size < 1024)
    assert_true(asprintf(&want, "3 kernels, 8.8 KiB, stored %s B", stored) > 0);
  else
    assert_true(asprintf(&want, "3 kernels, 8.8 KiB, stored %.1f KiB",
                         (double)info.stored_size / 1024) > 0);
  kt_assert_contains(out, want);
  free(want);
  free(out);
  assert_int_equal(KP(&out, NULL, "info", "--json", path), 0);
  assert_true(asprintf(&want, "\"stored_size\": %s,", stored) > 0);
  kt_assert_contains(out, want);
  free(want);
  free(out);
  free(data);
  free(path);
}

static void test_unreadable_archives_name_file_and_status(void** state) {
  (void)state;
  char* missing = path_in("missing.kpack");
  char* garbage = path_in("garbage.kpack");
  char* good = sample_archive("good.kpack", KPACK_COMPRESSION_NOOP);
  kt_write_file(garbage, "KPAK\2\0\0\0", 8);
  char *out, *err;
  assert_int_equal(KP(&out, &err, "list", missing, good), 1);
  kt_assert_contains(err, missing);
  kt_assert_contains(err, "KPACK_ERROR_FILE_NOT_FOUND");
  kt_assert_contains(out, "lib/libb.so#3"); /* the good one is still listed */
  free(out);
  free(err);
  assert_int_equal(KP(NULL, &err, "info", garbage), 1);
  kt_assert_contains(err, garbage);
  kt_assert_contains(err, "KPACK_ERROR_INVALID_FORMAT");
  free(err);
  /* A directory stands for its archives (test_cli_messages); a device is
   * no archive. */
  assert_int_equal(KP(NULL, &err, "cat", "/dev/null", "b", "a"), 1);
  kt_assert_contains(err, "KPACK_ERROR_IO_ERROR (not a regular file)");
  free(err);
  free(missing);
  free(garbage);
  free(good);
  free_sample();
}

static void test_info_shows_header_and_totals(void** state) {
  (void)state;
  char* path = sample_archive("a.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  struct stat st;
  char *out, file_size[32];
  assert_int_equal(stat(path, &st), 0);
  snprintf(file_size, sizeof file_size, "%lld", (long long)st.st_size);
  assert_int_equal(KP(&out, NULL, "info", path), 0);
  assert_true(ROW(out, "archive:", path));
  assert_true(ROW(out, "format:", "kpack", "v1"));
  assert_true(ROW(out, "group:", "test"));
  assert_true(ROW(out, "family:", "gfxtest"));
  assert_true(ROW(out, "arches:", "gfx90a:xnack-", "gfx1100"));
  assert_true(ROW(out, "compression:", "zstd-per-kernel"));
  assert_true(ROW(out, "binaries:", "2"));
  assert_true(ROW(out, "kernels:", "3"));
  assert_true(ROW(out, "file", "size:", file_size));
  kt_assert_contains(out, "size:         18122 (17.7 KiB)");
  free(out);
  assert_int_equal(KP(&out, NULL, "info", "--json", path), 0);
  kt_assert_contains(out, "\"gfx_arches\": [\"gfx90a:xnack-\", \"gfx1100\"]");
  kt_assert_contains(out, "\"compression_scheme\": \"zstd-per-kernel\"");
  kt_assert_contains(out, "\"group_name\": \"test\"");
  kt_assert_contains(out, "\"kernels\": 3, \"size\": 18122");
  free(out);
  free(path);
  free_sample();
}

static void test_cat_writes_the_kernel_bytes(void** state) {
  (void)state;
  char* path = sample_archive("a.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char *out, *err;
  size_t size;
  assert_int_equal(
      run_full(&out, &size, NULL,
               (const char* const[]){"cat", path, "lib/liba.so.1#0", "gfx1100",
                                     NULL}),
      0);
  assert_int_equal(size, sizes[1]);
  assert_memory_equal(out, sample[1], size);
  free(out);
  assert_int_equal(KP(&out, &err, "cat", path, "lib/liba.so.1#0", "gfx942"), 1);
  assert_int_equal(out[0], '\0');
  kt_assert_contains(err, "KPACK_ERROR_KERNEL_NOT_FOUND");
  kt_assert_contains(err, "gfx942");
  free(out);
  free(err);
  free(path);
  free_sample();
}

/* ---- extract and create -------------------------------------------------- */

static void test_extract_writes_the_kpackfs_layout(void** state) {
  (void)state;
  char* a = sample_archive("a.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  /* A second archive with one kernel the first also has: the first wins. */
  char* b = path_in("b.kpack");
  void* other = kt_pattern(64, 99);
  kt_kernel k[] = {{"lib/libb.so#3", "gfx90a:xnack-", other, 64},
                   {"lib/libc.so#0", "gfx942", other, 64}};
  kt_write_archive(b, KPACK_COMPRESSION_NOOP, NULL, 0, k, 2);
  char* dir = path_in("tree");
  assert_int_equal(KP(NULL, NULL, "extract", "-C", dir, a, b), 0);
  const kt_kernel* s = sample_kernels();
  for (int i = 0; i < 3; i++) {
    char* file;
    size_t n;
    assert_true(asprintf(&file, "%s/%s/%s/kernel.hsaco", dir, s[i].binary,
                         s[i].arch) > 0);
    void* data = kt_read_file(file, &n);
    assert_non_null(data);
    assert_int_equal(n, sizes[i]);
    assert_memory_equal(data, sample[i], n);
    free(data);
    free(file);
  }
  char* c = kt_path(dir, "lib/libc.so#0/gfx942/kernel.hsaco");
  assert_true(exists(c));
  free(c);
  /* Filters. */
  char* dir2 = path_in("only");
  char* out;
  assert_int_equal(
      KP(&out, NULL, "extract", "-v", "-C", dir2, "-a", "gfx1100", a), 0);
  /* The kernel, and the text files a mount shows beside it (empty here:
   * pattern bytes are no code object). */
  assert_int_equal(count_lines(out), 3);
  kt_assert_contains(out, "lib/liba.so.1#0/gfx1100/kernel.hsaco\n");
  kt_assert_contains(out, "lib/liba.so.1#0/gfx1100/kernels\n");
  kt_assert_contains(out, "lib/liba.so.1#0/gfx1100/metadata.json\n");
  free(out);
  kt_rmtree(dir);
  kt_rmtree(dir2);
  free(dir);
  free(dir2);
  free(other);
  free(a);
  free(b);
  free_sample();
}

static void test_extract_skips_names_that_escape_the_directory(void** state) {
  (void)state;
  char* a = path_in("evil.kpack");
  void* data = kt_pattern(10, 1);
  kt_kernel k[] = {{"../escaped#0", "gfx90a", data, 10},
                   {"/abs#0", "gfx90a", data, 10},
                   {"ok#0", "gfx90a", data, 10}};
  kt_write_archive(a, KPACK_COMPRESSION_NOOP, NULL, 0, k, 3);
  char* dir = path_in("x/tree");
  char* err;
  assert_int_equal(KP(NULL, &err, "extract", "-C", dir, a), 1);
  kt_assert_contains(err, "../escaped#0");
  kt_assert_contains(err, "/abs#0");
  char* escaped = path_in("x/escaped#0");
  char* ok = kt_path(dir, "ok#0/gfx90a/kernel.hsaco");
  assert_false(exists(escaped));
  assert_true(exists(ok));
  free(err);
  free(escaped);
  free(ok);
  free(dir);
  free(data);
  free(a);
}

/* Writes sample kernels as a tree in the kpackfs layout. */
static char* sample_tree(const char* name) {
  char* dir = path_in(name);
  const kt_kernel* k = sample_kernels();
  for (int i = 0; i < 3; i++) {
    char *sub, *file;
    assert_true(asprintf(&sub, "%s/%s/%s", dir, k[i].binary, k[i].arch) > 0);
    char* cmd;
    assert_true(asprintf(&cmd, "mkdir -p '%s'", sub) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    file = kt_path(sub, "kernel.hsaco");
    kt_write_file(file, k[i].data, k[i].size);
    free(file);
    free(sub);
  }
  return dir;
}

static void test_create_extract_create_is_byte_identical(void** state) {
  (void)state;
  char* tree = sample_tree("tree");
  char* a = path_in("a.kpack");
  char* b = path_in("b.kpack");
  char* tree2 = path_in("tree2");
  char* out;
  assert_int_equal(
      KP(&out, NULL, "create", "-o", a, "--group", "g", "--family", "f", tree),
      0);
  kt_assert_contains(out, "3 kernels");
  free(out);
  assert_int_equal(KP(NULL, NULL, "extract", "-C", tree2, a), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", b, "--group", "g",
                      "--family", "f", tree2),
                   0);
  assert_true(kt_same_file(a, b));
  /* The extracted files are the originals. */
  const kt_kernel* k = sample_kernels();
  for (int i = 0; i < 3; i++) {
    char *x, *y;
    assert_true(asprintf(&x, "%s/%s/%s/kernel.hsaco", tree, k[i].binary,
                         k[i].arch) > 0);
    assert_true(asprintf(&y, "%s/%s/%s/kernel.hsaco", tree2, k[i].binary,
                         k[i].arch) > 0);
    assert_true(kt_same_file(x, y));
    free(x);
    free(y);
  }
  /* Default arches: every arch present, sorted. */
  assert_int_equal(KP(&out, NULL, "info", a), 0);
  assert_true(ROW(out, "arches:", "gfx1100", "gfx90a:xnack-"));
  assert_true(ROW(out, "group:", "g"));
  free(out);
  free(tree);
  free(tree2);
  free(a);
  free(b);
  free_sample();
}

static void test_create_output_is_deterministic_whatever_the_jobs(
    void** state) {
  (void)state;
  char* tree = sample_tree("tree");
  static const char* const jobs[] = {"1", "2", "4", "0"};
  char* first = path_in("j.kpack");
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", first, tree), 0);
  for (size_t i = 0; i < 4; i++) {
    char* other = path_in("other.kpack");
    assert_int_equal(
        KP(NULL, NULL, "create", "-q", "-j", jobs[i], "-o", other, tree), 0);
    assert_true(kt_same_file(first, other));
    free(other);
  }
  /* Raw storage too, and the level changes the bytes. */
  char* raw1 = path_in("raw1.kpack");
  char* raw2 = path_in("raw2.kpack");
  char* l19 = path_in("l19.kpack");
  assert_int_equal(
      KP(NULL, NULL, "create", "-q", "--no-compress", "-o", raw1, tree), 0);
  assert_int_equal(
      KP(NULL, NULL, "create", "-q", "--no-compress", "-j2", "-o", raw2, tree),
      0);
  assert_true(kt_same_file(raw1, raw2));
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-l", "19", "-o", l19, tree),
                   0);
  assert_false(kt_same_file(first, l19));
  char* out;
  assert_int_equal(KP(&out, NULL, "info", raw1), 0);
  assert_true(ROW(out, "compression:", "none"));
  free(out);
  free(raw1);
  free(raw2);
  free(l19);
  free(first);
  free(tree);
  free_sample();
}

static void test_create_arch_option_filters_and_declares_what_it_keeps(
    void** state) {
  (void)state;
  char* tree = sample_tree("tree");
  char* a = path_in("a.kpack");
  char *out, *err;
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", a, "--arch",
                      "gfx90a:xnack-", "--arch", "gfx942", tree),
                   0);
  kt_assert_contains(err, "--arch gfx942: no kernel in the input");
  free(err);
  assert_int_equal(KP(&out, NULL, "info", a), 0);
  assert_true(ROW(out, "arches:", "gfx90a:xnack-"));
  assert_null(strstr(out, "gfx942"));
  assert_true(ROW(out, "kernels:", "2"));
  free(out);
  free(a);
  free(tree);
  free_sample();
}

static void test_create_failures_leave_no_partial_archive(void** state) {
  (void)state;
  char* tree = sample_tree("tree");
  char* out_path = path_in("out.kpack");
  char *err, *bad;
  kt_write_file(out_path, "previous", 8);

  /* A stray file in the tree. */
  char* stray = kt_path(tree, "lib/README");
  kt_write_file(stray, "hi", 2);
  assert_int_equal(KP(NULL, &err, "create", "-o", out_path, tree), 1);
  kt_assert_contains(err, stray);
  kt_assert_contains(err, "kpackfs layout");
  free(err);
  unlink(stray);
  free(stray);

  /* A binary directory without #N. */
  char* cmd;
  assert_true(asprintf(&cmd, "mkdir -p '%s/lib/noindex/gfx90a'", tree) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  bad = kt_path(tree, "lib/noindex/gfx90a/kernel.hsaco");
  kt_write_file(bad, "x", 1);
  assert_int_equal(KP(NULL, &err, "create", "-o", out_path, tree), 1);
  kt_assert_contains(err, "#N");
  free(err);
  unlink(bad);
  free(bad);

  /* The same kernel from two inputs, with different bytes. */
  char* tree2 = sample_tree("tree2");
  char* changed = kt_path(tree2, "lib/libb.so#3/gfx90a:xnack-/kernel.hsaco");
  kt_write_file(changed, "other", 5);
  assert_int_equal(KP(NULL, &err, "create", "-o", out_path, tree, tree2), 1);
  kt_assert_contains(err, "different kernels in");
  kt_assert_contains(err, changed);
  free(err);
  free(changed);

  /* A malformed ELF, and one without .hip_fatbin. */
  char* elf = path_in("bad.so");
  kt_write_file(elf, "\177ELF\2\1\1\0garbage", 16);
  assert_int_equal(KP(NULL, &err, "create", "-o", out_path, "--fatbin", elf),
                   1);
  kt_assert_contains(err, elf);
  kt_assert_contains(err, "KPACK_ERROR_INVALID_FORMAT");
  free(err);
  fx_elf_opts o = {.no_fatbin = true};
  fx_buf plain = fx_elf(&o);
  kt_write_file(elf, plain.data, plain.size);
  free(plain.data);
  assert_int_equal(KP(NULL, &err, "create", "-o", out_path, "--fatbin", elf),
                   1);
  kt_assert_contains(err, "no .hip_fatbin");
  free(err);
  /* A HIP binary given as an archive input. */
  assert_int_equal(KP(NULL, &err, "create", "-o", out_path, elf), 1);
  kt_assert_contains(err, "KPACK_ERROR_INVALID_FORMAT");
  kt_assert_contains(err, "--fatbin");
  free(err);

  /* Nothing replaced the old file, nothing was left beside it. */
  size_t n;
  char* kept = kt_read_file(out_path, &n);
  assert_int_equal(n, 8);
  assert_memory_equal(kept, "previous", 8);
  free(kept);
  DIR* d = opendir(tmp);
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    assert_null(strstr(e->d_name, ".tmp"));
  closedir(d);
  free(elf);
  free(out_path);
  free(tree);
  free(tree2);
  free_sample();
}

/* A fat binary of three translation units whose wrappers point at bundles
 * 1, 2, 0 of .hip_fatbin (the last one through a RELATIVE relocation). */
static char* sample_fatbin(const char* name, void* kernels[3][2]) {
  fx_buf bundles[3];
  for (int i = 0; i < 3; i++) {
    kernels[i][0] = kt_pattern(4000 + (size_t)i, 10 + (uint32_t)i);
    kernels[i][1] = kt_pattern(2000 + (size_t)i, 20 + (uint32_t)i);
    fx_entry e[] = {
        {"host-x86_64-unknown-linux-gnu-", NULL, 0},
        {"hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", kernels[i][0],
         4000 + (size_t)i},
        {"hip-amdgcn-amd-amdhsa--gfx1100", kernels[i][1], 2000 + (size_t)i}};
    fx_buf plain = fx_bundle(e, 3);
    if (i == 2) {
      bundles[i] = fx_ccob(3, FX_ZSTD, &plain);
      free(plain.data);
    } else {
      bundles[i] = plain;
    }
  }
  fx_wrapper w[3] = {{FX_HIPF_MAGIC, 1, 1, FX_PTR_FILE, 0},
                     {FX_HIPF_MAGIC, 1, 2, FX_PTR_FILE, 0},
                     {FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0}};
  fx_elf_opts o = {
      .bundles = bundles, .bundle_count = 3, .wrappers = w, .wrapper_count = 3};
  fx_buf elf = fx_elf(&o);
  char* path = path_in(name);
  kt_write_file(path, elf.data, elf.size);
  free(elf.data);
  for (int i = 0; i < 3; i++)
    free(bundles[i].data);
  return path;
}

static void test_create_from_fatbin_numbers_code_objects_by_wrapper(
    void** state) {
  (void)state;
  void* k[3][2];
  char* elf = sample_fatbin("libthing.so.2", k);
  char* a = path_in("a.kpack");
  char* b = path_in("b.kpack");
  char* arg;
  char *out, *err;
  assert_true(asprintf(&arg, "%s=lib/libthing.so.2", elf) > 0);
  assert_int_equal(KP(&out, &err, "create", "-v", "-o", a, "--fatbin", arg), 0);
  kt_assert_contains(out, "6 kernels");
  kt_assert_contains(err, "3 code objects (numbered by .hipFatBinSegment)");
  free(out);
  free(err);
  /* co_index N is wrapper N, which points at bundle order[N]. */
  static const size_t order[3] = {1, 2, 0};
  for (size_t co = 0; co < 3; co++) {
    char name[64];
    size_t n;
    snprintf(name, sizeof name, "lib/libthing.so.2#%zu", co);
    assert_int_equal(
        run_full(&out, &n, NULL,
                 (const char* const[]){"cat", a, name, "gfx942:sramecc+:xnack-",
                                       NULL}),
        0);
    assert_int_equal(n, 4000 + order[co]);
    assert_memory_equal(out, k[order[co]][0], n);
    free(out);
    assert_int_equal(
        run_full(&out, &n, NULL,
                 (const char* const[]){"cat", a, name, "gfx1100", NULL}),
        0);
    assert_int_equal(n, 2000 + order[co]);
    assert_memory_equal(out, k[order[co]][1], n);
    free(out);
  }
  /* Without a name, the ELF's file name. */
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", b, "--fatbin", elf), 0);
  assert_int_equal(KP(&out, NULL, "list", b), 0);
  kt_assert_contains(out, "\nlibthing.so.2#2 ");
  assert_null(strstr(out, "lib/"));
  free(out);
  for (int i = 0; i < 3; i++) {
    free(k[i][0]);
    free(k[i][1]);
  }
  free(arg);
  free(elf);
  free(a);
  free(b);
}

static void free_bundles_cli(fx_buf* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(b[i].data);
}

/* Writes the code objects of a fat binary image, read whole by the
 * in-memory reader, as a tree in the kpackfs layout under `dir`/NAME#N. */
static void tree_from_image(const fx_buf* elf, const char* dir,
                            const char* name) {
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  assert_int_equal(kpack_fatbin_open_memory(elf->data, elf->size, &fb),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  for (size_t co = 0; co < info.bundle_count; co++) {
    kpack_bundle_t* b;
    kpack_bundle_info_t bi;
    assert_int_equal(kpack_fatbin_get_bundle(fb, co, &b), KPACK_SUCCESS);
    assert_int_equal(kpack_bundle_get_info(b, &bi), KPACK_SUCCESS);
    for (size_t i = 0; i < bi.entry_count; i++) {
      kpack_bundle_entry_t e;
      char *sub, *cmd, *file;
      assert_int_equal(kpack_bundle_get_entry(b, i, &e), KPACK_SUCCESS);
      if (e.arch == NULL)
        continue;
      assert_true(asprintf(&sub, "%s/%s#%zu/%s", dir, name, co, e.arch) > 0);
      assert_true(asprintf(&cmd, "mkdir -p '%s'", sub) > 0);
      assert_int_equal(system(cmd), 0);
      file = kt_path(sub, "kernel.hsaco");
      kt_write_file(file, e.data, (size_t)e.size);
      free(file);
      free(cmd);
      free(sub);
    }
    kpack_bundle_free(b);
  }
  kpack_fatbin_close(fb);
}

/* A bundle of translation unit `tu`: a host entry and three arches, of
 * sizes that differ per unit. */
static fx_buf tu_bundle(size_t tu, unsigned ccob_version, unsigned method) {
  static const char* const ids[] = {
      "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
      "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
      "hip-amdgcn-amd-amdhsa-gfx906"};
  void* code[3];
  fx_entry e[4] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  for (size_t a = 0; a < 3; a++) {
    size_t size = 3000 + 700 * a + 31 * tu;
    code[a] = kt_pattern(size, (uint32_t)(10 * tu + a));
    e[a + 1] = (fx_entry){ids[a], code[a], size};
  }
  fx_buf plain = fx_bundle(e, 4);
  for (size_t a = 0; a < 3; a++)
    free(code[a]);
  if (ccob_version == 0)
    return plain;
  fx_buf ccob = fx_ccob(ccob_version, method, &plain);
  free(plain.data);
  return ccob;
}

/* kpack create --fatbin reads code objects straight from the file, a table
 * and an entry at a time; it must give the archive, byte for byte, that the
 * same code objects give when read whole in memory and packed as a tree.
 * Every fixture form: wrappers stored, RELATIVE, ABS64 (symbol or section
 * symbol), walked bundles, an ET_EXEC, a relocatable object, AArch64, plain
 * and CCOB v1-3 with zlib and zstd. */
static void test_create_from_fatbin_streams_the_same_archive_as_a_tree(
    void** state) {
  (void)state;
  static const struct {
    const char* name;
    uint16_t type, machine;
    size_t wrappers; /* 0: walked */
    fx_ptr how[6];
  } forms[] = {
      {"mixed.so",
       FX_ET_DYN,
       FX_EM_X86_64,
       6,
       {FX_PTR_RELATIVE, FX_PTR_FILE, FX_PTR_ABS64, FX_PTR_ABS64_SECTION,
        FX_PTR_RELATIVE, FX_PTR_RELATIVE}},
      {"walked.so", FX_ET_DYN, FX_EM_X86_64, 0, {0}},
      {"exec", FX_ET_EXEC, FX_EM_X86_64, 6, {0}},
      {"object.o",
       FX_ET_REL,
       FX_EM_X86_64,
       6,
       {FX_PTR_ABS64, FX_PTR_ABS64_SECTION, FX_PTR_ABS64, FX_PTR_ABS64,
        FX_PTR_ABS64_SECTION, FX_PTR_ABS64}},
      {"aarch64.so",
       FX_ET_DYN,
       FX_EM_AARCH64,
       6,
       {FX_PTR_RELATIVE, FX_PTR_RELATIVE, FX_PTR_ABS64, FX_PTR_RELATIVE,
        FX_PTR_RELATIVE, FX_PTR_RELATIVE}},
  };
  /* Six translation units: plain, then CCOB v1-3 zlib/zstd. */
  fx_buf bundles[6] = {tu_bundle(0, 0, 0),       tu_bundle(1, 1, FX_ZLIB),
                       tu_bundle(2, 1, FX_ZSTD), tu_bundle(3, 2, FX_ZLIB),
                       tu_bundle(4, 2, FX_ZSTD), tu_bundle(5, 3, FX_ZSTD)};
  for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
    fx_wrapper w[6];
    for (size_t i = 0; i < 6; i++) /* wrapper i -> bundle 5 - i */
      w[i] = (fx_wrapper){FX_HIPF_MAGIC, 1, 5 - i, forms[f].how[i], 0};
    fx_elf_opts o = {.type = forms[f].type,
                     .machine = forms[f].machine,
                     .bundles = bundles,
                     .bundle_count = 6,
                     .bundle_align = f % 2 ? 64 : 4096,
                     .wrappers = w,
                     .wrapper_count = forms[f].wrappers};
    fx_buf elf = fx_elf(&o);
    char* path = path_in(forms[f].name);
    char* tree = path_in("ref-tree");
    char* streamed = path_in("streamed.kpack");
    char* parallel = path_in("parallel.kpack");
    char* reference = path_in("reference.kpack");
    char* arg;
    kt_write_file(path, elf.data, elf.size);
    tree_from_image(&elf, tree, "lib/libtu.so");
    assert_true(asprintf(&arg, "%s=lib/libtu.so", path) > 0);
    assert_int_equal(
        KP(NULL, NULL, "create", "-q", "-o", streamed, "--fatbin", arg), 0);
    assert_int_equal(KP(NULL, NULL, "create", "-q", "-j", "3", "-o", parallel,
                        "--fatbin", arg),
                     0);
    assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", reference, tree), 0);
    if (!kt_same_file(streamed, reference) ||
        !kt_same_file(parallel, reference))
      fail_msg("%s: --fatbin and the tree of its code objects differ",
               forms[f].name);
    char* out;
    assert_int_equal(KP(&out, NULL, "list", streamed), 0);
    assert_int_equal(count_lines(out), 1 + 6 * 3 + 1); /* header, total */
    kt_assert_contains(out, "18 kernels");
    free(out);
    kt_rmtree(tree);
    free(arg);
    free(path);
    free(tree);
    free(streamed);
    free(parallel);
    free(reference);
    free(elf.data);
  }
  free_bundles_cli(bundles, 6);
}

/* A compressed bundle whose payload is corrupt past its entry table lists
 * fine; create fails when it reads the code, naming the file, the code
 * object and the status, and writes nothing. */
static void test_create_from_fatbin_corrupt_payload_names_code_object(
    void** state) {
  (void)state;
  /* Code objects large enough that the entry table, at the start of the
   * payload, still lists: the damage shows when the code is read. */
  void* big = kt_pattern(300000, 7);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", big, 300000}};
  fx_buf plain = fx_bundle(e, 2);
  fx_buf bundles[2] = {tu_bundle(0, 0, 0), fx_ccob(3, FX_ZSTD, &plain)};
  free(plain.data);
  free(big);
  /* Flip a byte in the last quarter of the envelope's payload. */
  bundles[1].data[bundles[1].size - bundles[1].size / 4] ^= 0x5a;
  fx_wrapper w[2] = {{FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0},
                     {FX_HIPF_MAGIC, 1, 1, FX_PTR_RELATIVE, 0}};
  fx_elf_opts o = {
      .bundles = bundles, .bundle_count = 2, .wrappers = w, .wrapper_count = 2};
  fx_buf elf = fx_elf(&o);
  char* path = path_in("broken.so");
  char* out = path_in("broken.kpack");
  char* err;
  kt_write_file(path, elf.data, elf.size);
  assert_int_equal(KP(NULL, &err, "create", "-o", out, "--fatbin", path), 1);
  kt_assert_contains(err, path);
  kt_assert_contains(err, "code object 1");
  kt_assert_contains(err, "KPACK_ERROR_DECOMPRESSION_FAILED");
  kt_assert_contains(err, "not written");
  assert_int_equal(access(out, F_OK), -1);
  free(err);
  free(out);
  free(path);
  free(elf.data);
  free_bundles_cli(bundles, 2);
}

/* Sends Ctrl-C's SIGINT to the tool started by spawn_tool(), which must
 * exit with 130; returns what it wrote to `err_path`. */
static char* interrupt_tool(pid_t pid, const char* err_path) {
  assert_int_equal(kill(pid, SIGINT), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 130);
  return slurp(err_path, NULL);
}

/* Ctrl-C during a long create: exit 130, no archive, no temporary file. */
static void test_interrupted_create_leaves_nothing(void** state) {
  (void)state;
  char* tree = path_in("big");
  for (int i = 0; i < 48; i++) {
    char *sub, *cmd, *file;
    assert_true(asprintf(&sub, "%s/lib/l%02d.so#0/gfx90a", tree, i) > 0);
    assert_true(asprintf(&cmd, "mkdir -p '%s'", sub) > 0);
    assert_int_equal(system(cmd), 0);
    file = kt_path(sub, "kernel.hsaco");
    void* data = kt_pattern(1 << 20, (uint32_t)i);
    kt_write_file(file, data, 1 << 20);
    free(data);
    free(file);
    free(cmd);
    free(sub);
  }
  char* outdir = path_in("out");
  assert_int_equal(mkdir(outdir, 0755), 0);
  char* out = kt_path(outdir, "big.kpack");
  char* o = path_in(".o");
  char* e = path_in(".e");
  /* Level 19 over 48 MiB takes many seconds. The signal is sent once the
   * temporary file exists: the handler is in place and writing has begun. */
  pid_t pid = spawn_tool(
      (const char* const[]){"create", "-l", "19", "-o", out, tree, NULL}, o, e);
  bool started = false;
  for (int i = 0; i < 2000 && !started; i++) {
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
    DIR* d = opendir(outdir);
    for (struct dirent* ent; (ent = readdir(d)) != NULL;)
      started = started || strncmp(ent->d_name, ".kpack-", 7) == 0;
    closedir(d);
  }
  assert_true(started);
  char* err = interrupt_tool(pid, e);
  kt_assert_contains(err, "interrupted");
  free(err);
  DIR* d = opendir(outdir);
  for (struct dirent* ent; (ent = readdir(d)) != NULL;)
    if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0)
      fail_msg("left behind: %s", ent->d_name);
  closedir(d);
  kt_rmtree(tree);
  free(tree);
  free(outdir);
  free(out);
  free(o);
  free(e);
}

/* Ctrl-C during an extraction over an earlier one: exit 130, and the tree
 * as it was, times included (docs/mount.md). The signal is sent once the
 * run has made its first new directory: the handler is in place and
 * writing has begun; 20,000 kernels take far longer than that. A second
 * extraction into the tree meanwhile is refused and touches nothing. */
static void test_interrupted_extract_leaves_the_tree_as_it_was(void** state) {
  (void)state;
  enum { N = 20000 };
  kt_kernel* k = calloc(N, sizeof(*k));
  char(*names)[32] = calloc(N, sizeof(*names));
  void* data = kt_pattern(4096, 7);
  for (size_t i = 0; i < N; i++) {
    snprintf(names[i], sizeof(names[i]), "lib/n%05zu.so#0", i);
    k[i] = (kt_kernel){names[i], "gfx90a", data, 4096};
  }
  char* archive = path_in("many.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_NOOP, NULL, 0, k, N);
  char* dir = path_in("extracted");
  char* mine = kt_tree_path(dir, "notes.txt");
  kt_write_file(mine, "mine", 4);
  char* before = kt_tree_state(dir, true);
  char* first = kt_path(dir, "lib");
  char* o = path_in(".o");
  char* e = path_in(".e");
  pid_t pid = spawn_tool(
      (const char* const[]){"extract", "-C", dir, archive, NULL}, o, e);
  bool started = false;
  for (int i = 0; i < 6000 && !started; i++) { /* at most a minute */
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
    started = access(first, F_OK) == 0;
  }
  assert_true(started);
  /* A second run into the tree meanwhile touches nothing of it. */
  char* second = NULL;
  assert_int_equal(KP(NULL, &second, "extract", "-C", dir, archive), 1);
  kt_assert_contains(second, "another kpack extract is writing into");
  free(second);
  char* err = interrupt_tool(pid, e);
  kt_assert_contains(err, "extract: interrupted; ");
  kt_assert_contains(err, " is as it was");
  char* after = kt_tree_state(dir, true);
  assert_string_equal(after, before);
  free(after);
  free(err);
  free(before);
  free(first);
  free(mine);
  free(dir);
  free(archive);
  free(o);
  free(e);
  free(data);
  free(names);
  free(k);
}

/* ---- verify -------------------------------------------------------------- */

static void test_verify_reports_one_line_per_corrupt_kernel(void** state) {
  (void)state;
  char* path = sample_archive("a.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char* out;
  assert_int_equal(KP(&out, NULL, "verify", path), 0);
  kt_assert_contains(out, ": OK, 3 kernels");
  assert_int_equal(count_lines(out), 1);
  free(out);

  /* Flip a byte in the middle of two frames. */
  kpack_archive_t archive;
  kpack_kernel_info_t i0, i2;
  const kt_kernel* k = sample_kernels();
  assert_int_equal(kpack_open(path, &archive), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(archive, k[0].binary, k[0].arch, &i0),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(archive, k[2].binary, k[2].arch, &i2),
                   KPACK_SUCCESS);
  kpack_close(archive);
  size_t n;
  uint8_t* bytes = kt_read_file(path, &n);
  bytes[i0.offset + i0.stored_size / 2] ^= 0xff;
  bytes[i2.offset + i2.stored_size / 2] ^= 0xff;
  kt_write_file(path, bytes, n);
  free(bytes);

  assert_int_equal(KP(&out, NULL, "verify", "-q", path), 1);
  assert_int_equal(count_lines(out), 2);
  char *want0, *want2;
  assert_true(asprintf(&want0,
                       "%s: %s %s: KPACK_ERROR_DECOMPRESSION_FAILED (corrupt "
                       "compressed data)\n",
                       path, k[0].binary, k[0].arch) > 0);
  assert_true(asprintf(&want2, "%s: %s %s: KPACK_ERROR_DECOMPRESSION_FAILED",
                       path, k[2].binary, k[2].arch) > 0);
  kt_assert_contains(out, want0);
  kt_assert_contains(out, want2);
  free(out);
  assert_int_equal(KP(&out, NULL, "verify", path), 1);
  kt_assert_contains(out, "2 problems in 3 kernels");
  free(out);
  free(want0);
  free(want2);

  /* An archive that does not open is one problem line too. */
  char* missing = path_in("missing.kpack");
  assert_int_equal(KP(&out, NULL, "verify", "-q", missing), 1);
  assert_int_equal(count_lines(out), 1);
  kt_assert_contains(out, "KPACK_ERROR_FILE_NOT_FOUND");
  free(out);
  free(missing);
  free(path);
  free_sample();
}

/* ROCm's packing tools can file a kernel under an arch the archive does not
 * declare; its reader accepts that, so verify warns unless --strict. */
static void test_verify_undeclared_arch_is_a_warning_unless_strict(
    void** state) {
  (void)state;
  /* The writer declares every arch it packs; drop gfx1100 from the TOC's
   * gfx_arches (a msgpack array, the TOC runs to the end of the file). */
  char* path = sample_archive("undeclared.kpack", KPACK_COMPRESSION_NOOP);
  static const char both[] = "\xaagfx_arches\x92\xadgfx90a:xnack-\xa7gfx1100";
  static const char one[] = "\xaagfx_arches\x91\xadgfx90a:xnack-";
  size_t n;
  uint8_t* bytes = kt_read_file(path, &n);
  uint8_t* at = memmem(bytes, n, both, sizeof(both) - 1);
  assert_non_null(at);
  memcpy(at, one, sizeof(one) - 1);
  size_t cut = sizeof(both) - sizeof(one);
  uint8_t* rest = at + sizeof(both) - 1;
  memmove(rest - cut, rest, (size_t)(bytes + n - rest));
  kt_write_file(path, bytes, n - cut);
  free(bytes);
  char *out, *want;
  assert_true(asprintf(&want,
                       "%s: lib/liba.so.1#0 gfx1100: warning: arch not "
                       "declared in gfx_arches",
                       path) > 0);
  assert_int_equal(KP(&out, NULL, "verify", path), 0);
  kt_assert_contains(out, want);
  kt_assert_contains(out, ": OK, 3 kernels, 1 warning\n");
  assert_int_equal(count_lines(out), 2);
  free(out);
  assert_int_equal(KP(&out, NULL, "verify", "-q", path), 0);
  assert_int_equal(count_lines(out), 1);
  free(out);

  assert_int_equal(KP(&out, NULL, "verify", "--strict", path), 1);
  assert_null(strstr(out, "warning"));
  kt_assert_contains(out, "lib/liba.so.1#0 gfx1100: arch not declared");
  kt_assert_contains(out, "1 problem in 3 kernels");
  free(out);
  free(want);
  free(path);
  free_sample();
}

/* ---- resolve ------------------------------------------------------------- */

/* root/lib/libx.so (any file) and root/.kpack/<name> with kernel
 * "lib/libx.so#1" for `arch`, declared as `arches`. */
static char* resolve_tree(const char* name, const char* const* arches,
                          size_t arch_count, const char* arch,
                          const char* kernel) {
  char* cmd;
  assert_true(
      asprintf(&cmd, "mkdir -p '%s/root/lib' '%s/root/.kpack'", tmp, tmp) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  char* binary = path_in("root/lib/libx.so");
  kt_write_file(binary, "ELF?", 4);
  free(binary);
  char* rel;
  assert_true(asprintf(&rel, "root/.kpack/%s", name) > 0);
  char* path = path_in(rel);
  free(rel);
  void* data = kt_pattern(3210, 7);
  kt_kernel k = {kernel, arch, data, 3210};
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, arch_count,
                   &k, 1);
  free(data);
  return path;
}

static int resolve(char** out, const char* arch, const char* search,
                   const char* kernel) {
  char* binary = path_in("root/lib/libx.so");
  int rc = KP(out, NULL, "resolve", "--binary", binary, "--kernel", kernel,
              "--search-path", search, "--arch", arch);
  free(binary);
  return rc;
}

static void test_resolve_success_explains_the_match(void** state) {
  (void)state;
  static const char* const arches[] = {"gfx90a:xnack-"};
  char* archive = resolve_tree("x_gfx90a.kpack", arches, 1, "gfx90a:xnack-",
                               "lib/libx.so#1");
  char *out, *real = realpath(archive, NULL);
  char* other = path_in("root/.kpack/x_gfx90a:sramecc+:xnack-.kpack");
  assert_int_equal(resolve(&out, "gfx90a:sramecc+:xnack-",
                           "../.kpack/x_@GFXARCH@.kpack", "lib/libx.so#1"),
                   0);
  /* Every expansion of @GFXARCH@ is a candidate; only one exists. */
  assert_true(ROW(out, "embedded", other, "missing"));
  assert_true(ROW(out, "embedded", archive, "exists"));
  free(other);
  assert_true(ROW(out, real, "KPACK_SUCCESS", "gfx90a:xnack-"));
  assert_true(ROW(out, "gfx90a:sramecc+:xnack-", "gfx90a:sramecc+", "-", "no",
                  "archive", "declares", "it"));
  assert_true(
      ROW(out, "gfx90a:sramecc+:xnack-", "gfx90a:xnack-", real, "found"));
  kt_assert_contains(out,
                     "RESULT   KPACK_SUCCESS: gfx90a:xnack- code object, "
                     "3210 bytes");
  free(out);
  /* -o writes the code object; --json says the same. */
  char* code = path_in("code.hsaco");
  char* binary = path_in("root/lib/libx.so");
  assert_int_equal(
      KP(&out, NULL, "resolve", "--json", "-o", code, "--binary", binary,
         "--kernel", "lib/libx.so", "--co-index", "1", "--search-path",
         "../.kpack/x_gfx90a.kpack", "--arch", "gfx90a:xnack-"),
      0);
  kt_assert_contains(out, "\"result\": {\"status\": \"KPACK_SUCCESS\"");
  kt_assert_contains(out, "\"target\": \"gfx90a:xnack-\", \"size\": 3210}");
  size_t n;
  void* got = kt_read_file(code, &n);
  void* want = kt_pattern(3210, 7);
  assert_int_equal(n, 3210);
  assert_memory_equal(got, want, n);
  free(got);
  free(want);
  free(out);
  free(code);
  free(binary);
  free(real);
  free(archive);
}

/* kpack resolve gives the loader's answer for a library opened through a
 * symlinked directory: root/view/lib -> ../lib, so ../.kpack from
 * root/view/lib/libx.so is root/.kpack. */
static void test_resolve_follows_a_symlinked_library_directory(void** state) {
  (void)state;
  static const char* const arches[] = {"gfx90a"};
  char* archive =
      resolve_tree("x_gfx90a.kpack", arches, 1, "gfx90a", "lib/libx.so#0");
  char* real = realpath(archive, NULL);
  char* view = path_in("root/view");
  char* view_lib = path_in("root/view/lib");
  char* binary = path_in("root/view/lib/libx.so");
  assert_int_equal(mkdir(view, 0755), 0);
  assert_int_equal(symlink("../lib", view_lib), 0);
  char* out;
  assert_int_equal(
      KP(&out, NULL, "resolve", "--binary", binary, "--kernel", "lib/libx.so",
         "--search-path", "../.kpack/x_@GFXARCH@.kpack", "--arch", "gfx90a"),
      0);
  assert_true(ROW(out, "embedded", real, "exists"));
  assert_true(ROW(out, "gfx90a", "gfx90a", real, "found"));
  free(out);
  free(binary);
  free(view_lib);
  free(view);
  free(real);
  free(archive);
}

static void test_resolve_reports_each_failure_by_name(void** state) {
  (void)state;
  static const char* const arches[] = {"gfx1100"};
  char* archive =
      resolve_tree("x.kpack", arches, 1, "gfx1100", "lib/libx.so#1");
  char* real = realpath(archive, NULL);
  char* out;

  assert_int_equal(
      resolve(&out, "gfx1100", "../.kpack/nothere.kpack", "lib/libx.so#1"), 1);
  char* nothere = path_in("root/.kpack/nothere.kpack");
  assert_true(ROW(out, "embedded", nothere, "missing"));
  free(nothere);
  kt_assert_contains(out, "RESULT   KPACK_ERROR_ARCHIVE_NOT_FOUND");
  kt_assert_contains(out, "hint:");
  free(out);

  assert_int_equal(
      resolve(&out, "gfx90a:xnack-", "../.kpack/x.kpack", "lib/libx.so#1"), 1);
  kt_assert_contains(out, "RESULT   KPACK_ERROR_ARCH_NOT_FOUND");
  assert_true(ROW(out, real, "KPACK_SUCCESS", "gfx1100")); /* it declares */
  free(out);

  assert_int_equal(
      resolve(&out, "gfx1100", "../.kpack/x.kpack", "lib/libx.so#0"), 1);
  kt_assert_contains(out, "declared, kernel not in it");
  kt_assert_contains(out, "RESULT   KPACK_ERROR_KERNEL_NOT_FOUND");
  free(out);

  setenv("ROCM_KPACK_DISABLE", "1", 1);
  assert_int_equal(
      resolve(&out, "gfx1100", "../.kpack/x.kpack", "lib/libx.so#1"), 1);
  unsetenv("ROCM_KPACK_DISABLE");
  kt_assert_contains(out, "env      ROCM_KPACK_DISABLE=1");
  kt_assert_contains(out, "RESULT   KPACK_ERROR_NOT_IMPLEMENTED");
  free(out);

  /* A corrupt kernel in the only archive declaring the target: its error
   * is the outcome, as the loader returns the last real error. */
  kpack_archive_t opened;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(archive, &opened), KPACK_SUCCESS);
  assert_int_equal(
      kpack_get_kernel_info(opened, "lib/libx.so#1", "gfx1100", &info),
      KPACK_SUCCESS);
  kpack_close(opened);
  size_t n;
  uint8_t* bytes = kt_read_file(archive, &n);
  bytes[info.offset + info.stored_size / 2] ^= 0x5a;
  kt_write_file(archive, bytes, n);
  free(bytes);
  assert_int_equal(
      resolve(&out, "gfx1100", "../.kpack/x.kpack", "lib/libx.so#1"), 1);
  assert_true(
      ROW(out, "gfx1100", "gfx1100", real, "KPACK_ERROR_DECOMPRESSION_FAILED"));
  kt_assert_contains(out, "RESULT   KPACK_ERROR_DECOMPRESSION_FAILED");
  free(out);

  /* A corrupt archive is reported and skipped. */
  kt_write_file(archive, "KPAK\1\0\0\0\xff\xff\xff\xff\0\0\0\0", 16);
  assert_int_equal(
      resolve(&out, "gfx1100", "../.kpack/x.kpack", "lib/libx.so#1"), 1);
  kt_assert_contains(out, "KPACK_ERROR_INVALID_FORMAT");
  kt_assert_contains(out, "RESULT   KPACK_ERROR_ARCHIVE_NOT_FOUND");
  free(out);
  free(real);
  free(archive);
}

static void test_resolve_falls_through_and_follows_rocm_kpack_path(
    void** state) {
  (void)state;
  /* a.kpack declares the specific target but lacks the kernel; b.kpack has
   * it under the bare processor. ROCM_KPACK_PATH names their directory. */
  static const char* const specific[] = {"gfx942:xnack-"};
  static const char* const bare[] = {"gfx942"};
  char* a = resolve_tree("a.kpack", specific, 1, "gfx942:xnack-", "other#1");
  char* b = resolve_tree("b.kpack", bare, 1, "gfx942", "lib/libx.so#1");
  char* dir = path_in("root/.kpack");
  setenv("ROCM_KPACK_PATH", dir, 1);
  char* out;
  assert_int_equal(KP(&out, NULL, "resolve", "--kernel", "lib/libx.so#1",
                      "--arch", "gfx942:sramecc+:xnack-"),
                   0);
  unsetenv("ROCM_KPACK_PATH");
  kt_assert_contains(out, "ROCM_KPACK_PATH");
  kt_assert_contains(out, "directory (its *.kpack follow)");
  kt_assert_contains(out, "declared, kernel not in it");
  kt_assert_contains(out, "RESULT   KPACK_SUCCESS: gfx942 code object");
  free(out);
  free(dir);
  free(a);
  free(b);
}

/* ---- real data ----------------------------------------------------------- */

static void test_real_librocrand_packs_lists_verifies_and_resolves(
    void** state) {
  (void)state;
  static const char* const arches[] = {
      "gfx1030",       "gfx803",        "gfx900:xnack-", "gfx906:xnack-",
      "gfx908:xnack-", "gfx90a:xnack+", "gfx90a:xnack-"};
  char* lib = kt_librocrand();
  char *arg, *out, *cmd;
  char* archive = path_in("root/.kpack/rand_lib.kpack");
  assert_true(
      asprintf(&cmd, "mkdir -p '%s/root/lib' '%s/root/.kpack'", tmp, tmp) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  assert_true(asprintf(&arg, "%s=lib/librocrand.so.1", lib) > 0);
  assert_int_equal(KP(&out, NULL, "create", "-j2", "-o", archive, "--group",
                      "rand", "--fatbin", arg),
                   0);
  kt_assert_contains(out, "7 kernels");
  free(out);
  assert_int_equal(KP(&out, NULL, "list", archive), 0);
  for (size_t i = 0; i < 7; i++)
    assert_non_null(strstr(out, arches[i]));
  free(out);
  assert_int_equal(KP(&out, NULL, "verify", archive), 0);
  kt_assert_contains(out, "OK, 7 kernels");
  free(out);
  /* Each kernel is a real AMD GPU code object. */
  for (size_t i = 0; i < 7; i++) {
    size_t n;
    assert_int_equal(
        run_full(&out, &n, NULL,
                 (const char* const[]){"cat", archive, "lib/librocrand.so.1#0",
                                       arches[i], NULL}),
        0);
    assert_true(n > 1000000);
    assert_memory_equal(out, "\177ELF\2\1", 6);
    assert_int_equal((uint8_t)out[18] | (uint8_t)out[19] << 8, 224);
    free(out);
  }
  char* binary = path_in("root/lib/librocrand.so.1");
  kt_write_file(binary, "", 0);
  assert_int_equal(
      KP(&out, NULL, "resolve", "--binary", binary, "--kernel",
         "lib/librocrand.so.1", "--search-path", "../.kpack/rand_lib.kpack",
         "--arch", "gfx90a:sramecc+:xnack-"),
      0);
  kt_assert_contains(out, "RESULT   KPACK_SUCCESS: gfx90a:xnack- code object");
  free(out);
  free(binary);
  free(archive);
  free(arg);
  free(lib);
}

/* ---- metadata maps and archives as inputs
 * ------------------------------------
 */

/* {"tile": int16 128, "tag": str8 "fast"}: encodings a re-encoding would
 * shorten, so only a byte-for-byte copy keeps them. */
static const uint8_t meta_map[] = {0x82, 0xa4, 't',  'i', 'l', 'e', 0xd1,
                                   0x00, 0x80, 0xa3, 't', 'a', 'g', 0xd9,
                                   0x04, 'f',  'a',  's', 't'};

/* The sample kernels, the first one with meta_map, written by the library
 * in its own (unsorted) order, as another tool might. */
static char* sample_archive_with_metadata(const char* name) {
  char* path = path_in(name);
  const kt_kernel* k = sample_kernels();
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                              .group_name = "rand"};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  for (int i = 2; i >= 0; i--)
    assert_int_equal(
        kpack_writer_add_kernel_with_metadata(
            w, k[i].binary, k[i].arch, k[i].data, k[i].size,
            i == 0 ? meta_map : NULL, i == 0 ? sizeof meta_map : 0),
        KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  return path;
}

static void assert_metadata(const char* archive, const char* binary,
                            const char* arch, const void* want, size_t size) {
  kpack_archive_t a;
  const void* m;
  size_t n;
  assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_entry_metadata(a, binary, arch, &m, &n),
                   KPACK_SUCCESS);
  assert_int_equal(n, size);
  if (size > 0)
    assert_memory_equal(m, want, n);
  kpack_close(a);
}

static void test_metadata_survives_extract_and_create(void** state) {
  (void)state;
  char* a = sample_archive_with_metadata("meta.kpack");
  char* tree = path_in("tree");
  char* b = path_in("b.kpack");
  char* tree2 = path_in("tree2");
  char* c = path_in("c.kpack");
  char* out;
  assert_int_equal(KP(NULL, NULL, "extract", "-C", tree, a), 0);
  char* sidecar = kt_path(tree,
                          "lib/liba.so.1#0/gfx90a:xnack-/"
                          "toc-metadata.msgpack");
  size_t n;
  void* bytes = kt_read_file(sidecar, &n);
  assert_non_null(bytes);
  assert_int_equal(n, sizeof meta_map);
  assert_memory_equal(bytes, meta_map, n);
  free(bytes);
  char* none = kt_path(tree, "lib/liba.so.1#0/gfx1100/toc-metadata.msgpack");
  assert_false(exists(none));
  /* what a kpackfs mount shows beside each kernel is not input */
  char* rendered = kt_path(tree, "lib/liba.so.1#0/gfx1100/kernels");
  kt_write_file(rendered, "k\tvgpr=1\n", 9);
  free(rendered);
  rendered = kt_path(tree, "lib/libb.so#3/gfx90a:xnack-/metadata.json");
  kt_write_file(rendered, "{}", 2);
  free(rendered);

  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", b, tree), 0);
  assert_metadata(b, "lib/liba.so.1#0", "gfx90a:xnack-", meta_map,
                  sizeof meta_map);
  assert_metadata(b, "lib/liba.so.1#0", "gfx1100", NULL, 0);
  /* and round trips from there byte for byte */
  assert_int_equal(KP(NULL, NULL, "extract", "-C", tree2, b), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", c, tree2), 0);
  assert_true(kt_same_file(b, c));

  assert_int_equal(KP(&out, NULL, "list", "--json", b), 0);
  kt_assert_contains(out,
                     "\"ordinal\": 1, \"metadata\": {\"tile\":128,"
                     "\"tag\":\"fast\"}}");
  char* line = strstr(out, "\"gfx1100\"");
  assert_non_null(line);
  *strchr(line, '\n') = '\0'; /* that kernel's object has no metadata */
  assert_null(strstr(line, "metadata"));
  free(out);

  /* a metadata file that is not one map, or without its kernel */
  char* err;
  kt_write_file(sidecar, "\x91\x01", 2);
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", c, tree), 1);
  kt_assert_contains(err, sidecar);
  kt_assert_contains(err, "not one MessagePack map");
  free(err);
  kt_write_file(sidecar, meta_map, sizeof meta_map);
  kt_write_file(none, meta_map, sizeof meta_map);
  char* kernel = kt_path(tree, "lib/liba.so.1#0/gfx1100/kernel.hsaco");
  unlink(kernel);
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", c, tree), 1);
  kt_assert_contains(err, none);
  kt_assert_contains(err, "without a kernel.hsaco");
  free(err);
  free(kernel);
  free(none);
  free(sidecar);
  free(a);
  free(b);
  free(c);
  free(tree);
  free(tree2);
  free_sample();
}

/* Stored size of every kernel of an archive, as "binary arch size" lines. */
static char* stored_sizes(const char* archive) {
  char *out, *text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  assert_int_equal(KP(&out, NULL, "list", "--json", archive), 0);
  for (char* p = out; (p = strstr(p, "\"binary\": ")) != NULL; p++) {
    char binary[64], arch[64];
    unsigned long long stored;
    assert_int_equal(
        sscanf(p, "\"binary\": \"%63[^\"]\", \"arch\": \"%63[^\"]\"", binary,
               arch),
        2);
    assert_int_equal(sscanf(strstr(p, "\"stored_size\": "),
                            "\"stored_size\": %llu", &stored),
                     1);
    fprintf(f, "%s %s %llu\n", binary, arch, stored);
  }
  fclose(f);
  free(out);
  return text;
}

static void test_create_merges_archives_and_trees(void** state) {
  (void)state;
  const kt_kernel* k = sample_kernels();
  /* Two shards at level 19 (frames the default level would not make),
   * declaring an arch none of their kernels has, and a tree. */
  char* shard_a = path_in("shard-a.kpack");
  char* shard_b = path_in("shard-b.kpack");
  char* whole = path_in("whole.kpack");
  static const char* const declared_a[] = {"gfx90a:xnack-", "gfx90a:xnack+"};
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                              .zstd_level = 19,
                              .group_name = "rand",
                              .gfx_arch_family = "gfx9",
                              .gfx_arches = declared_a,
                              .gfx_arch_count = 2};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(shard_a, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel_with_metadata(
                       w, k[0].binary, k[0].arch, k[0].data, k[0].size,
                       meta_map, sizeof meta_map),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  o.gfx_arch_count = 0;
  assert_int_equal(kpack_writer_create(shard_b, &o, &w), KPACK_SUCCESS);
  assert_int_equal(
      kpack_writer_add_kernel(w, k[1].binary, k[1].arch, k[1].data, k[1].size),
      KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  char* tree = path_in("tree");
  char* dir;
  assert_true(
      asprintf(&dir, "mkdir -p '%s/%s/%s'", tree, k[2].binary, k[2].arch) > 0);
  assert_int_equal(system(dir), 0);
  free(dir);
  char* file;
  assert_true(asprintf(&file, "%s/%s/%s/kernel.hsaco", tree, k[2].binary,
                       k[2].arch) > 0);
  kt_write_file(file, k[2].data, k[2].size);

  char *out, *err;
  assert_int_equal(
      KP(NULL, NULL, "create", "-q", "-o", whole, shard_a, shard_b, tree), 0);
  assert_int_equal(KP(&out, NULL, "info", whole), 0);
  assert_true(ROW(out, "arches:", "gfx1100", "gfx90a:xnack+", "gfx90a:xnack-"));
  assert_true(ROW(out, "group:", "rand"));
  assert_true(ROW(out, "family:", "gfx9"));
  assert_true(ROW(out, "kernels:", "3"));
  free(out);
  assert_int_equal(KP(NULL, NULL, "verify", whole), 0);
  assert_metadata(whole, k[0].binary, k[0].arch, meta_map, sizeof meta_map);
  for (int i = 0; i < 3; i++) {
    char* tmpl;
    assert_true(asprintf(&tmpl, "%s/out.hsaco", tmp) > 0);
    size_t n;
    assert_int_equal(run_full(&out, &n, NULL,
                              (const char* const[]){"cat", whole, k[i].binary,
                                                    k[i].arch, NULL}),
                     0);
    assert_int_equal(n, k[i].size);
    assert_memory_equal(out, k[i].data, n);
    free(out);
    free(tmpl);
  }
  /* The shards' level-19 frames were carried over, not recompressed. */
  char* sa = stored_sizes(shard_a);
  char* sb = stored_sizes(shard_b);
  char* sw = stored_sizes(whole);
  kt_assert_contains(sw, sa);
  kt_assert_contains(sw, sb);
  free(sa);
  free(sb);

  /* Any input order, and identical duplicates, give the same archive. */
  char* again = path_in("again.kpack");
  char* copy = path_in("shard-a-copy.kpack");
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", copy, shard_a), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-j2", "-o", again, tree,
                      copy, shard_b, shard_a, whole),
                   0);
  assert_true(kt_same_file(whole, again));

  /* An archive that sets no group leaves the others' group alone; two
   * that differ give none, with a warning. */
  char* plain = path_in("plain.kpack");
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", plain, tree), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", again, plain, shard_b),
                   0);
  assert_int_equal(KP(&out, NULL, "info", again), 0);
  assert_true(ROW(out, "group:", "rand"));
  free(out);
  assert_int_equal(
      KP(NULL, NULL, "create", "-q", "--group", "other", "-o", plain, tree), 0);
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", again, plain, shard_b),
                   0);
  kt_assert_contains(err, "group_name differs");
  free(err);
  free(plain);

  /* -l compresses them again: same kernels, other frames. */
  assert_int_equal(
      KP(NULL, NULL, "create", "-q", "-l", "1", "-o", again, whole), 0);
  assert_false(kt_same_file(whole, again));
  char* s1 = stored_sizes(again);
  assert_null(strstr(s1, sw));
  free(s1);
  free(sw);
  assert_int_equal(KP(NULL, NULL, "verify", again), 0);
  assert_metadata(again, k[0].binary, k[0].arch, meta_map, sizeof meta_map);

  /* A conflict names both inputs; OUT is left alone. */
  kt_write_file(file, "different", 9);
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", again, whole, tree), 1);
  kt_assert_contains(err, "different kernels in");
  kt_assert_contains(err, whole);
  kt_assert_contains(err, file);
  free(err);
  /* the same kernel, different metadata */
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", copy, shard_b), 0);
  assert_int_equal(kpack_writer_create(shard_b, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel_with_metadata(
                       w, k[1].binary, k[1].arch, k[1].data, k[1].size,
                       meta_map, sizeof meta_map),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", again, copy, shard_b),
                   1);
  kt_assert_contains(err, "different metadata");
  free(err);
  /* not an archive */
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", again, file), 1);
  kt_assert_contains(err, file);
  kt_assert_contains(err, "KPACK_ERROR_INVALID_FORMAT");
  free(err);
  free(file);
  free(again);
  free(copy);
  free(tree);
  free(whole);
  free(shard_a);
  free(shard_b);
  free_sample();
}

/* -o through a symbolic link writes its target and keeps the link; a name
 * of 255 bytes works (the temporary name is short). */
static void test_create_output_follows_symlinks_and_takes_long_names(
    void** state) {
  (void)state;
  char* tree = sample_tree("tree");
  char* target = path_in("target.kpack");
  char* link = path_in("link.kpack");
  char* direct = path_in("direct.kpack");
  char name[256];
  memset(name, 'n', 255);
  memcpy(name + 249, ".kpack", 7);
  char* longest = path_in(name);
  kt_write_file(target, "old", 3);
  assert_int_equal(symlink("target.kpack", link), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", link, tree), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", direct, tree), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", longest, tree), 0);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_true(kt_same_file(target, direct));
  assert_true(kt_same_file(longest, direct));
  free(longest);
  free(direct);
  free(link);
  free(target);
  free(tree);
  free_sample();
}

/* ---- host binaries: info, list, resolve --binary ------------------------- */

/* A kpack-ified lib/libfoo.so under `root` (made if needed): three HIPK
 * records of kernel lib/libfoo.so with co_index 0, 1, 2 and search path
 * ../.kpack/foo_@GFXARCH@.kpack, pointers filled as `how` says, and
 * archives beside it: foo_gfx942.kpack with #0 and #1 and
 * foo_gfx90a.kpack with #2 only. Returns the binary's path. */
static char* kpackified_tree(const char* root, uint16_t type, fx_ptr how,
                             void* kernels[3]) {
  const char* paths[] = {"../.kpack/foo_@GFXARCH@.kpack"};
  fx_buf refs[1] = {fx_hipk_metadata("lib/libfoo.so", paths, 1)};
  fx_wrapper w[3];
  for (size_t i = 0; i < 3; i++)
    w[i] = (fx_wrapper){FX_HIPK_MAGIC, 1, 0, how, i};
  fx_elf_opts o = {.type = type,
                   .no_fatbin = true,
                   .refs = refs,
                   .ref_count = 1,
                   .wrappers = w,
                   .wrapper_count = 3};
  char* cmd;
  assert_true(asprintf(&cmd, "mkdir -p '%s/lib' '%s/.kpack'", root, root) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  char* binary = kt_path(root, "lib/libfoo.so");
  fx_write_elf(binary, &o);
  fx_free(&refs[0]);
  for (size_t i = 0; i < 3; i++)
    kernels[i] = kt_pattern(3000 + 100 * i, 40 + (uint32_t)i);
  static const char* const a942[] = {"gfx942"};
  static const char* const a90a[] = {"gfx90a"};
  kt_kernel k942[2] = {{"lib/libfoo.so#0", "gfx942", kernels[0], 3000},
                       {"lib/libfoo.so#1", "gfx942", kernels[1], 3100}};
  kt_kernel k90a[1] = {{"lib/libfoo.so#2", "gfx90a", kernels[2], 3200}};
  char* a = kt_path(root, ".kpack/foo_gfx942.kpack");
  char* b = kt_path(root, ".kpack/foo_gfx90a.kpack");
  kt_write_archive(a, KPACK_COMPRESSION_ZSTD_PER_KERNEL, a942, 1, k942, 2);
  kt_write_archive(b, KPACK_COMPRESSION_NOOP, a90a, 1, k90a, 1);
  free(a);
  free(b);
  return binary;
}

static void free_kernels3(void* k[3]) {
  for (int i = 0; i < 3; i++)
    free(k[i]);
}

static void test_info_shows_what_a_host_binary_carries(void** state) {
  (void)state;
  void* k[3][2];
  char* fat = sample_fatbin("libthing.so.2", k);
  char *out, *err;
  /* Fat: bundles by co_index, compression, sizes, arches. */
  assert_int_equal(KP(&out, NULL, "info", fat), 0);
  kt_assert_contains(out, "fat binary: device code inside");
  kt_assert_contains(out, "numbered by .hipFatBinSegment");
  /* co_index 1 is the compressed bundle (wrapper 1 -> bundle 2). */
  assert_true(LINE(out, "0  none ", "  gfx942:sramecc+:xnack- gfx1100"));
  assert_true(
      LINE(out, "1  zstd (CCOB v3) ", " gfx942:sramecc+:xnack- gfx1100"));
  assert_true(LINE(out, "2  none ", "  gfx942:sramecc+:xnack- gfx1100"));
  kt_assert_contains(out, "3 bundles, 6 code objects: "); /* as list counts */
  free(out);
  assert_int_equal(KP(&out, NULL, "info", "--json", fat), 0);
  kt_assert_contains(out, "\"kind\": \"fat\"");
  kt_assert_contains(out, "\"numbered_by\": \"wrappers\"");
  kt_assert_contains(out, "\"compression\": \"zstd\", \"ccob_version\": 3");
  kt_assert_contains(out, "\"arch\": \"gfx1100\", \"size\": 2001");
  free(out);
  /* list: one row per code object, named as create --fatbin names it. */
  assert_int_equal(KP(&out, NULL, "list", fat), 0);
  assert_true(
      ROW(out, "libthing.so.2#0", "gfx942:sramecc+:xnack-", "4001", "none"));
  assert_true(
      ROW(out, "libthing.so.2#1", "gfx1100", "2002", "zstd", "(CCOB", "v3)"));
  kt_assert_contains(out, "6 code objects");
  free(out);

  /* kpack-ified: each record's kernel and search path, as written and as
   * resolved against the binary's directory. */
  char* root = path_in("kp");
  void* kk[3];
  char* binary = kpackified_tree(root, FX_ET_DYN, FX_PTR_RELATIVE, kk);
  char* real = realpath(root, NULL);
  char* resolved;
  assert_true(asprintf(&resolved, "%s/.kpack/foo_@GFXARCH@.kpack", real) > 0);
  assert_int_equal(KP(&out, NULL, "info", "-v", binary), 0);
  kt_assert_contains(out, "kpack-ified: device code in kpack archives");
  kt_assert_contains(out, "ET_DYN");
  for (int i = 0; i < 3; i++) {
    char rec[8], kernel[32];
    snprintf(rec, sizeof rec, "%d", i);
    snprintf(kernel, sizeof kernel, "lib/libfoo.so#%d", i);
    assert_true(ROW(out, rec, "HIPK", kernel, "../.kpack/foo_@GFXARCH@.kpack",
                    resolved));
  }
  free(out);
  assert_int_equal(KP(&out, NULL, "info", "--json", binary), 0);
  kt_assert_contains(out, "\"kind\": \"kpack-ified\"");
  kt_assert_contains(out, "\"co_index\": 2");
  kt_assert_contains(out, resolved);
  free(out);
  /* list has no code objects to show there. */
  assert_int_equal(KP(&out, &err, "list", binary), 0);
  kt_assert_contains(err, "kpack-ified");
  free(out);
  free(err);

  /* A record the runtime cannot use: named with its reason, exit 1. */
  fx_buf meta = fx_hipk_metadata("lib/libbad.so", (const char*[]){"x"}, 1);
  meta.size -= 2; /* cut the last string short */
  fx_wrapper w[2] = {{FX_HIPK_MAGIC, 1, 0, FX_PTR_FILE, 0},
                     {0x12345678, 1, 0, FX_PTR_FILE, 1}};
  fx_elf_opts o = {.type = FX_ET_EXEC,
                   .no_fatbin = true,
                   .refs = &meta,
                   .ref_count = 1,
                   .wrappers = w,
                   .wrapper_count = 2};
  char* bad = path_in("libbad.so");
  fx_write_elf(bad, &o);
  fx_free(&meta);
  assert_int_equal(KP(&out, &err, "info", "-v", bad), 1);
  kt_assert_contains(err, bad);
  kt_assert_contains(err, "record 0");
  kt_assert_contains(err, "KPACK_ERROR_INVALID_METADATA");
  kt_assert_contains(err, "record 1 (magic 0x12345678)");
  kt_assert_contains(err, "neither HIPF nor HIPK");
  kt_assert_contains(out, "KPACK_ERROR_INVALID_METADATA");
  free(out);
  free(err);

  /* No HIP device code at all. */
  fx_elf_opts plain = {.no_fatbin = true};
  fx_write_elf(bad, &plain);
  assert_int_equal(KP(&out, NULL, "info", bad), 0);
  kt_assert_contains(out, "no HIP device code");
  free(out);
  assert_int_equal(KP(NULL, &err, "list", bad), 1);
  kt_assert_contains(err, "no HIP device code");
  free(err);

  free(bad);
  free(resolved);
  free(real);
  free(binary);
  free(root);
  free_kernels3(kk);
  for (int i = 0; i < 3; i++) {
    free(k[i][0]);
    free(k[i][1]);
  }
  free(fat);
}

/* resolve --binary alone runs the loader's search for every HIPK record of
 * the binary, as the HIP runtime would, in both linked forms: a shared
 * object (pointers from RELATIVE relocations) and an executable (pointers
 * stored). */
static void test_resolve_binary_explains_every_record(void** state) {
  (void)state;
  static const struct {
    const char* dir;
    uint16_t type;
    fx_ptr how;
  } forms[] = {{"dyn", FX_ET_DYN, FX_PTR_RELATIVE},
               {"exec", FX_ET_EXEC, FX_PTR_FILE}};
  for (size_t f = 0; f < 2; f++) {
    char* root = path_in(forms[f].dir);
    void* k[3];
    char* binary = kpackified_tree(root, forms[f].type, forms[f].how, k);
    char* real = realpath(root, NULL);
    char *out, *err, *found942, *found90a, *resolved;
    assert_true(asprintf(&found942, "gfx942 from %s/.kpack/foo_gfx942.kpack",
                         real) > 0);
    assert_true(asprintf(&found90a, "gfx90a from %s/.kpack/foo_gfx90a.kpack",
                         real) > 0);
    assert_true(asprintf(&resolved,
                         "../.kpack/foo_@GFXARCH@.kpack -> "
                         "%s/.kpack/foo_@GFXARCH@.kpack",
                         real) > 0);

    /* A gfx942 agent: #0 and #1 are there, #2 only in the gfx90a archive. */
    assert_int_equal(KP(&out, NULL, "resolve", "--binary", binary, "--arch",
                        "gfx942:sramecc+:xnack-"),
                     1);
    kt_assert_contains(out, "kpack-ified: 3 records");
    kt_assert_contains(out, "== record 0: kernel lib/libfoo.so#0");
    kt_assert_contains(out, "== record 2: kernel lib/libfoo.so#2");
    kt_assert_contains(out, resolved);
    kt_assert_contains(out, "SUMMARY: 2 of 3 found");
    assert_true(ROW(out, "0", "lib/libfoo.so#0", "KPACK_SUCCESS", "gfx942",
                    "from", found942 + strlen("gfx942 from ")));
    assert_true(ROW(out, "2", "lib/libfoo.so#2", "KPACK_ERROR_KERNEL_NOT_FOUND",
                    "no", "such", "kernel"));
    free(out);

    /* Agent with both: every record found, from the right archive. */
    assert_int_equal(KP(&out, NULL, "resolve", "--summary", "--binary", binary,
                        "--arch", "gfx942", "--arch", "gfx90a"),
                     0);
    kt_assert_contains(out, "SUMMARY: 3 of 3 found");
    kt_assert_contains(out, found942);
    kt_assert_contains(out, found90a);
    assert_null(strstr(out, "CANDIDATE PATHS")); /* --summary */
    free(out);

    /* One record, its code object written out. */
    char* code = path_in("code.hsaco");
    assert_int_equal(KP(&out, NULL, "resolve", "--binary", binary, "--co-index",
                        "1", "--arch", "gfx942", "-o", code),
                     0);
    kt_assert_contains(out, "== record 1: kernel lib/libfoo.so#1");
    assert_null(strstr(out, "== record 0"));
    size_t n;
    void* got = kt_read_file(code, &n);
    assert_int_equal(n, 3100);
    assert_memory_equal(got, k[1], n);
    free(got);
    free(out);

    /* JSON: one object per record. */
    assert_int_equal(KP(&out, NULL, "resolve", "--json", "--binary", binary,
                        "--arch", "gfx90a"),
                     1);
    kt_assert_contains(out, "\"kind\": \"kpack-ified\"");
    kt_assert_contains(out, "\"kernel\": \"lib/libfoo.so#2\"");
    /* #0 and #1 are not in the gfx90a archive; #2 is. */
    kt_assert_contains(out,
                       "\"result\": {\"status\": "
                       "\"KPACK_ERROR_KERNEL_NOT_FOUND\"}");
    kt_assert_contains(out, "\"result\": {\"status\": \"KPACK_SUCCESS\"");
    free(out);

    /* Without the archives: ARCHIVE_NOT_FOUND for each, with a hint. */
    char* kp = kt_path(root, ".kpack");
    kt_rmtree(kp);
    assert_int_equal(
        KP(&out, NULL, "resolve", "--binary", binary, "--arch", "gfx942"), 1);
    assert_true(ROW(out, "1", "lib/libfoo.so#1",
                    "KPACK_ERROR_ARCHIVE_NOT_FOUND", "no", "archive", "could",
                    "be", "opened"));
    kt_assert_contains(out, "hint: no candidate path led to an archive");
    free(out);

    /* Usage: -o needs --co-index; --summary goes with --binary alone. */
    assert_int_equal(KP(NULL, &err, "resolve", "--binary", binary, "--arch",
                        "gfx942", "-o", code),
                     2);
    kt_assert_contains(err, "--co-index");
    free(err);
    assert_int_equal(KP(NULL, &err, "resolve", "--summary", "--kernel", "x",
                        "--arch", "gfx942"),
                     2);
    kt_assert_contains(err, "--summary");
    free(err);
    free(kp);
    free(code);
    free(found942);
    free(found90a);
    free(resolved);
    free(real);
    free(binary);
    free(root);
    free_kernels3(k);
  }
}

/* A binary that still carries its fat binary never reaches the loader:
 * resolve says so and lists the bundles' arches. */
static void test_resolve_binary_on_a_fat_binary_lists_its_arches(void** state) {
  (void)state;
  void* k[3][2];
  char* fat = sample_fatbin("libthing.so.2", k);
  char *out, *err;
  assert_int_equal(
      KP(&out, NULL, "resolve", "--binary", fat, "--arch", "gfx1100"), 0);
  kt_assert_contains(out, "This is a fat binary");
  kt_assert_contains(out, "never asks the kpack loader");
  assert_true(
      ROW(out, "0", "none", "gfx942:sramecc+:xnack-", "gfx1100", "gfx1100"));
  assert_true(ROW(out, "1", "zstd", "(CCOB", "v3)", "gfx942:sramecc+:xnack-",
                  "gfx1100", "gfx1100"));
  free(out);
  assert_int_equal(
      KP(&out, NULL, "resolve", "--json", "--binary", fat, "--arch", "gfx1100"),
      0);
  kt_assert_contains(out, "\"kind\": \"fat\"");
  kt_assert_contains(out,
                     "{\"co_index\": 2, \"arches\": [\"gfx942:sramecc+:"
                     "xnack-\", \"gfx1100\"], \"loadable\": [\"gfx1100\"]}");
  free(out);
  /* Not an ELF at all. */
  char* junk = path_in("junk.so");
  kt_write_file(junk, "\177ELF\2\1\1\0garbage", 16);
  assert_int_equal(
      KP(NULL, &err, "resolve", "--binary", junk, "--arch", "gfx1100"), 1);
  kt_assert_contains(err, junk);
  kt_assert_contains(err, "KPACK_ERROR_INVALID_FORMAT");
  free(err);
  free(junk);
  for (int i = 0; i < 3; i++) {
    free(k[i][0]);
    free(k[i][1]);
  }
  free(fat);
}

/* On a fat binary, resolve says which entries of each bundle the agent can
 * run, by the library's target matching: the same processor, and each
 * feature an entry states set the same way by one of the --arch names. */
static void test_resolve_binary_on_a_fat_binary_says_what_the_agent_runs(
    void** state) {
  (void)state;
  void* k[3][2];
  char* fat = sample_fatbin("libthing.so.2", k);
  char* out;
  /* The exact target; its features in the other order name no target the
   * runtime gives, and are refused as verify --arch refuses them. */
  assert_int_equal(KP(&out, NULL, "resolve", "--binary", fat, "--arch",
                      "gfx942:sramecc+:xnack-"),
                   0);
  assert_true(ROW(out, "0", "none", "gfx942:sramecc+:xnack-", "gfx1100",
                  "gfx942:sramecc+:xnack-"));
  assert_true(ROW(out, "1", "zstd", "(CCOB", "v3)", "gfx942:sramecc+:xnack-",
                  "gfx1100", "gfx942:sramecc+:xnack-"));
  kt_assert_contains(out, "3 of 3 code\nobjects have one.");
  free(out);
  char* err;
  assert_int_equal(KP(&out, &err, "resolve", "--binary", fat, "--arch",
                      "gfx942:xnack-:sramecc+"),
                   2);
  kt_assert_contains(err, "not a GPU target: sramecc comes before xnack");
  free(out);
  free(err);
  /* An xnack+ agent, or one whose settings are not given, cannot run an
   * xnack- object; nor can another processor. */
  static const char* const unserved[] = {"gfx942:sramecc+:xnack+", "gfx942",
                                         "gfx90a:sramecc+:xnack-"};
  for (int i = 0; i < 3; i++) {
    /* The runtime would have nothing to load: a failed search. */
    assert_int_equal(
        KP(&out, NULL, "resolve", "--binary", fat, "--arch", unserved[i]), 1);
    assert_true(
        ROW(out, "0", "none", "gfx942:sramecc+:xnack-", "gfx1100", "none"));
    assert_true(ROW(out, "1", "zstd", "(CCOB", "v3)", "gfx942:sramecc+:xnack-",
                    "gfx1100", "none"));
    kt_assert_contains(out,
                       "0 of 3 code\nobjects have one; where LOADABLE is "
                       "none, the HIP runtime has\nnothing to load");
    free(out);
  }
  /* Every --arch counts, with or without the triple. */
  assert_int_equal(
      KP(&out, NULL, "resolve", "--json", "--binary", fat, "--arch", "gfx90a",
         "--arch", "amdgcn-amd-amdhsa--gfx1100", "--arch",
         "gfx942:sramecc+:xnack-"),
      0);
  for (int co = 0; co < 3; co++) {
    char want[160];
    snprintf(want, sizeof want,
             "{\"co_index\": %d, \"arches\": [\"gfx942:sramecc+:xnack-\", "
             "\"gfx1100\"], \"loadable\": [\"gfx942:sramecc+:xnack-\", "
             "\"gfx1100\"]}",
             co);
    kt_assert_contains(out, want);
  }
  free(out);
  assert_int_equal(KP(&out, NULL, "resolve", "--json", "--binary", fat,
                      "--arch", "gfx942:sramecc-:xnack-"),
                   1);
  kt_assert_contains(out, "\"gfx1100\"], \"loadable\": []}");
  free(out);
  for (int i = 0; i < 3; i++) {
    free(k[i][0]);
    free(k[i][1]);
  }
  free(fat);
}

/* The real librocrand: info and list read its fat binary and count its
 * code objects alike, resolve --binary says it is one. */
static void test_real_librocrand_host_binary(void** state) {
  (void)state;
  static const char* const arches[] = {
      "gfx1030",       "gfx803",        "gfx900:xnack-", "gfx906:xnack-",
      "gfx908:xnack-", "gfx90a:xnack+", "gfx90a:xnack-"};
  char* lib = kt_librocrand();
  char* out;
  assert_int_equal(KP(&out, NULL, "info", lib), 0);
  kt_assert_contains(out, "fat binary: device code inside");
  kt_assert_contains(out, "ET_DYN");
  /* info and list count the same code objects: one per GPU arch, in one
   * bundle (one co_index). */
  kt_assert_contains(out, "bundles:      1, numbered by .hipFatBinSegment");
  kt_assert_contains(out, "1 bundle, 7 code objects: ");
  kt_assert_contains(out,
                     "gfx1030 gfx803 gfx900:xnack- gfx906:xnack- "
                     "gfx908:xnack- gfx90a:xnack+ gfx90a:xnack-");
  free(out);
  assert_int_equal(KP(&out, NULL, "list", lib), 0);
  for (size_t i = 0; i < 7; i++) {
    char arch[32];
    snprintf(arch, sizeof arch, "  %s  ", arches[i]);
    assert_true(LINE(out, "librocrand.so.1.1#0", arch, "  none"));
  }
  kt_assert_contains(out, "7 code objects");
  free(out);
  assert_int_equal(KP(&out, NULL, "resolve", "--binary", lib, "--arch",
                      "gfx90a:sramecc+:xnack-"),
                   0);
  kt_assert_contains(out, "This is a fat binary");
  /* Of its seven targets, the agent runs the xnack- build of its own. */
  assert_true(ROW(out, "0", "none", "gfx1030", "gfx803", "gfx900:xnack-",
                  "gfx906:xnack-", "gfx908:xnack-", "gfx90a:xnack+",
                  "gfx90a:xnack-", "gfx90a:xnack-"));
  free(out);
  free(lib);
}

/* ---- JSON whatever fails ------------------------------------------------- */

/* `kpack ARGS...` (any exit status) prints one JSON document: jq, a real
 * parser, reads its standard output without error. */
static void expect_json(const char* const* args) {
  char* out = NULL;
  run_full(&out, NULL, NULL, args);
  char* file = path_in("out.json");
  kt_write_file(file, out, strlen(out));
  char* err = NULL;
  char* jq[] = {"jq", ".", file, NULL};
  if (kt_run(jq, 30, NULL, &err) != 0) {
    fail_msg("kpack %s %s ...: not JSON (%s):\n%s", args[0], args[1], err, out);
  }
  free(err);
  free(out);
  free(file);
}
#define EXPECT_JSON(...) expect_json((const char* const[]){__VA_ARGS__, NULL})

static void test_every_json_output_parses_whatever_fails(void** state) {
  (void)state;
  char* good = sample_archive("good.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char* garbage = path_in("garbage.kpack");
  char* missing = path_in("missing.kpack");
  kt_write_file(garbage, "KPAK\1\0\0\0", 8);
  /* A code object cut after its header: recognised, then refused. */
  static const fx_co_kernel kernels[] = {
      {"gemm\tf32", 128, 96, 64, 16384, 272, 96, 64, 256, 3, 1, 0}};
  fx_buf co =
      fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx90a:xnack-", kernels, 1);
  char* good_co = path_in("good.hsaco");
  char* cut_co = path_in("cut.hsaco");
  kt_write_file(good_co, co.data, co.size);
  kt_write_file(cut_co, co.data, 64);
  fx_free(&co);
  void* k[3][2];
  char* fat = sample_fatbin("libthing.so.2", k);
  /* A fat binary with a record that is neither HIPF nor HIPK: its host
   * view opens, its fat binary view does not. */
  fx_entry e[] = {{"hipv4-amdgcn-amd-amdhsa--gfx90a", "abcd", 4}};
  fx_buf bundle = fx_bundle(e, 1);
  fx_wrapper w[2] = {{0, 1, 0, FX_PTR_FILE, 0},
                     {0x12345678, 1, 0, FX_PTR_FILE, 0}};
  fx_elf_opts o = {
      .bundles = &bundle, .bundle_count = 1, .wrappers = w, .wrapper_count = 2};
  char* bad_fat = path_in("badfat.so");
  fx_write_elf(bad_fat, &o);
  fx_free(&bundle);
  char* root = path_in("kp");
  void* kk[3];
  char* kpackified = kpackified_tree(root, FX_ET_DYN, FX_PTR_RELATIVE, kk);

  EXPECT_JSON("list", "--json", good, garbage, missing, fat, bad_fat,
              kpackified, good);
  EXPECT_JSON("list", "--json", garbage, good);
  EXPECT_JSON("list", "--json", missing);
  /* JSON text is UTF-8: bytes of a TOC name that are not become U+FFFD. */
  void* data = kt_pattern(10, 3);
  kt_kernel odd[] = {{"lib/\xff\xc3.so#0", "gfx90a", data, 10}};
  char* latin = path_in("latin.kpack");
  kt_write_archive(latin, KPACK_COMPRESSION_NOOP, NULL, 0, odd, 1);
  char* out;
  assert_int_equal(KP(&out, NULL, "list", "--json", latin), 0);
  kt_assert_contains(out, "\"binary\": \"lib/\\ufffd\\ufffd.so#0\"");
  free(out);
  EXPECT_JSON("list", "--json", latin);
  free(latin);
  free(data);
  /* Pattern bytes typed hsaco: each code object fails to parse. */
  EXPECT_JSON("list", "--kernels", "--json", good, garbage, missing, good);
  EXPECT_JSON("info", "--json", cut_co, good, garbage, good_co, fat, bad_fat,
              kpackified, missing, cut_co);
  EXPECT_JSON("info", "--json", garbage, cut_co, bad_fat);
  EXPECT_JSON("info", "--json", bad_fat, good);
  EXPECT_JSON("resolve", "--json", "--binary", bad_fat, "--arch", "gfx90a");
  EXPECT_JSON("resolve", "--json", "--binary", fat, "--arch", "gfx90a");
  EXPECT_JSON("resolve", "--json", "--binary", kpackified, "--arch", "gfx942");
  EXPECT_JSON("resolve", "--json", "--kernel", "lib/x.so#0", "--search-path",
              garbage, "--search-path", missing, "--search-path", good,
              "--arch", "gfx90a:xnack-");

  for (int i = 0; i < 3; i++) {
    free(k[i][0]);
    free(k[i][1]);
  }
  free_kernels3(kk);
  free(kpackified);
  free(root);
  free(bad_fat);
  free(fat);
  free(good_co);
  free(cut_co);
  free(good);
  free(garbage);
  free(missing);
  free_sample();
}

/* ---- defects at the edges ------------------------------------------------ */

/* Sets `key` of every arch entry of `binary` in the TOC of the archive at
 * `path` to `value`, re-encoding the TOC with msgpack-c. */
static void set_toc_field(const char* path, const char* binary, const char* key,
                          msgpack_object value) {
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  assert_non_null(bytes);
  uint64_t toc_offset = fx_toc_offset(bytes, size);
  fx_toc t;
  fx_toc_decode(&t, bytes, size, toc_offset);
  msgpack_object* arches =
      fx_toc_at(&t, (const char* const[]){"toc", binary}, 2, NULL);
  assert_non_null(arches);
  for (uint32_t a = 0; a < arches->via.map.size; a++) {
    msgpack_object* field = fx_toc_get(&arches->via.map.ptr[a].val, key, NULL);
    assert_non_null(field);
    *field = value;
  }
  fx_toc_encode(&t, &bytes, &size, toc_offset);
  kt_write_file(path, bytes, size);
  free(bytes);
}

/* The same binary, arch and bytes with another type is another entry:
 * merging the two is a conflict naming both, whichever comes first. */
static void test_merge_refuses_the_same_kernel_with_another_type(void** state) {
  (void)state;
  char* a = sample_archive("a.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char* c = sample_archive("c.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_toc_field(c, "lib/libb.so#3", "type", fx_toc_str("blob"));
  char* out = path_in("t.kpack");
  char* err;
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", out, c, a), 1);
  kt_assert_contains(err, "lib/libb.so#3 for gfx90a:xnack-");
  kt_assert_contains(err, "'blob'");
  kt_assert_contains(err, "'hsaco'");
  kt_assert_contains(err, a);
  kt_assert_contains(err, c);
  assert_false(exists(out));
  free(err);
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", out, a, c), 1);
  kt_assert_contains(err, "'blob'");
  free(err);
  /* The same type on both sides still merges. */
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", out, a, a), 0);
  free(out);
  free(a);
  free(c);
  free_sample();
}

/* A fat binary whose .hip_fatbin holds no code object has nothing for the
 * runtime to load: resolve --binary says so and fails. */
static void test_resolve_of_a_fat_binary_without_code_objects_fails(
    void** state) {
  (void)state;
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  fx_buf host_only = fx_bundle(e, 1);
  fx_elf_opts o = {.bundles = &host_only, .bundle_count = 0};
  char* fat = path_in("empty-fat.so");
  fx_write_elf(fat, &o);
  fx_free(&host_only);
  char *out, *err;
  assert_int_equal(
      KP(&out, &err, "resolve", "--binary", fat, "--arch", "gfx90a"), 1);
  kt_assert_contains(err, "holds no code object");
  free(out);
  free(err);
  assert_int_equal(
      KP(&out, NULL, "resolve", "--json", "--binary", fat, "--arch", "gfx90a"),
      1);
  kt_assert_contains(out, "\"bundles\": []");
  free(out);
  free(fat);
}

/* A tab or newline in a TOC name is escaped in tables, as the kernels file
 * escapes kernel names, so each row stays one line of aligned columns. */
static void test_tables_escape_tabs_and_newlines_in_names(void** state) {
  (void)state;
  void* data = kt_pattern(100, 5);
  kt_kernel k[] = {{"lib/a\tb\nc.so#0", "gfx90a", data, 100},
                   {"lib/plain.so#0", "gfx\\90a", data, 100}};
  char* archive = path_in("tabs.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_NOOP, NULL, 0, k, 2);
  char* out;
  assert_int_equal(KP(&out, NULL, "list", archive), 0);
  assert_true(ROW(out, "lib/a\\tb\\nc.so#0", "gfx90a", "100", "100", "1.00x"));
  assert_true(ROW(out, "lib/plain.so#0", "gfx\\\\90a", "100", "100", "1.00x"));
  assert_int_equal(count_lines(out), 4); /* header, two rows, total */
  free(out);
  free(data);

  /* resolve --summary: one row per record, whatever the kernel is named. */
  const char* paths[] = {"../.kpack/none_@GFXARCH@.kpack"};
  fx_buf refs[1] = {fx_hipk_metadata("lib/a\tb\nc.so", paths, 1)};
  fx_wrapper w[1] = {{FX_HIPK_MAGIC, 1, 0, FX_PTR_RELATIVE, 0}};
  fx_elf_opts o = {.no_fatbin = true,
                   .refs = refs,
                   .ref_count = 1,
                   .wrappers = w,
                   .wrapper_count = 1};
  char* binary = path_in("tabbed.so");
  fx_write_elf(binary, &o);
  fx_free(&refs[0]);
  assert_int_equal(KP(&out, NULL, "resolve", "--summary", "--binary", binary,
                      "--arch", "gfx90a"),
                   1);
  assert_true(ROW(out, "0", "lib/a\\tb\\nc.so#0",
                  "KPACK_ERROR_ARCHIVE_NOT_FOUND", "no", "archive", "could",
                  "be", "opened"));
  free(out);
  free(binary);
  free(archive);
}

/* Sizes that add up past 64 bits are said to, not wrapped round to a few
 * bytes. */
static void test_list_total_does_not_wrap(void** state) {
  (void)state;
  char* archive =
      sample_archive("huge.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  msgpack_object huge = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER,
                         .via.u64 = UINT64_MAX - 10};
  set_toc_field(archive, "lib/liba.so.1#0", "original_size", huge);
  char* out;
  assert_int_equal(KP(&out, NULL, "list", archive), 0);
  kt_assert_contains(out, "3 kernels, over 16.0 EiB, stored ");
  free(out);
  free(archive);
  free_sample();
}

/* The loader drops an empty search path; info and resolve show that, not
 * the binary's directory. */
static void test_empty_search_paths_are_shown_dropped(void** state) {
  (void)state;
  const char* paths[] = {"", "../.kpack/x_@GFXARCH@.kpack"};
  fx_buf refs[1] = {fx_hipk_metadata("lib/libe.so", paths, 2)};
  fx_wrapper w[1] = {{FX_HIPK_MAGIC, 1, 0, FX_PTR_RELATIVE, 0}};
  fx_elf_opts o = {.no_fatbin = true,
                   .refs = refs,
                   .ref_count = 1,
                   .wrappers = w,
                   .wrapper_count = 1};
  char* dir = path_in("lib");
  assert_int_equal(mkdir(dir, 0755), 0);
  char* binary = path_in("lib/libe.so");
  fx_write_elf(binary, &o);
  fx_free(&refs[0]);
  char* out;
  assert_int_equal(KP(&out, NULL, "info", "-v", binary), 0);
  assert_true(ROW(out, "0", "HIPK", "lib/libe.so#0", "\"\"", "(empty:", "the",
                  "loader", "skips", "it)"));
  /* The binary's directory, alone on the end of a line, is what an empty
   * path would resolve to: the loader never tries it. */
  char *real = realpath(dir, NULL), *line_end;
  assert_true(asprintf(&line_end, "%s\n", real) > 0);
  assert_null(strstr(out, line_end));
  free(out);
  assert_int_equal(KP(&out, NULL, "info", "--json", binary), 0);
  kt_assert_contains(
      out, "{\"written\": \"\", \"resolved\": null, \"dropped\": true}");
  free(out);
  assert_int_equal(KP(&out, NULL, "resolve", "--binary", binary, "--arch",
                      "gfx90a", "--co-index", "0"),
                   1);
  kt_assert_contains(out, "  \"\" -> (empty: the loader skips it)\n");
  assert_null(strstr(out, line_end));
  free(out);
  free(line_end);
  free(real);
  free(binary);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_version_help_and_manuals, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_command_lines_exit_2, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_list_shows_every_kernel_with_sizes_and_ratio, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_json_and_several_archives,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_totals_count_shared_stored_bytes_once, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_unreadable_archives_name_file_and_status, setup, teardown),
      cmocka_unit_test_setup_teardown(test_info_shows_header_and_totals, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cat_writes_the_kernel_bytes, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_extract_writes_the_kpackfs_layout,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_extract_skips_names_that_escape_the_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_create_extract_create_is_byte_identical, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_create_output_is_deterministic_whatever_the_jobs, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_create_arch_option_filters_and_declares_what_it_keeps, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_create_failures_leave_no_partial_archive, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_create_from_fatbin_numbers_code_objects_by_wrapper, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_create_from_fatbin_streams_the_same_archive_as_a_tree, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_create_from_fatbin_corrupt_payload_names_code_object, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_interrupted_extract_leaves_the_tree_as_it_was, setup, teardown),
      cmocka_unit_test_setup_teardown(test_interrupted_create_leaves_nothing,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_metadata_survives_extract_and_create,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_create_merges_archives_and_trees,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_create_output_follows_symlinks_and_takes_long_names, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_verify_reports_one_line_per_corrupt_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_verify_undeclared_arch_is_a_warning_unless_strict, setup,
          teardown),
      cmocka_unit_test_setup_teardown(test_resolve_success_explains_the_match,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_resolve_follows_a_symlinked_library_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resolve_reports_each_failure_by_name,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_resolve_falls_through_and_follows_rocm_kpack_path, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_real_librocrand_packs_lists_verifies_and_resolves, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_info_shows_what_a_host_binary_carries, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resolve_binary_explains_every_record,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_resolve_binary_on_a_fat_binary_lists_its_arches, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_resolve_binary_on_a_fat_binary_says_what_the_agent_runs, setup,
          teardown),
      cmocka_unit_test_setup_teardown(test_real_librocrand_host_binary, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_every_json_output_parses_whatever_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_merge_refuses_the_same_kernel_with_another_type, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_resolve_of_a_fat_binary_without_code_objects_fails, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_tables_escape_tabs_and_newlines_in_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_total_does_not_wrap, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_empty_search_paths_are_shown_dropped,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
