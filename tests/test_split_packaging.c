/* SPDX-License-Identifier: MIT
 *
 * `kpack split` for packagers: where the archives go (--archive-dir), the
 * archive prefix of a system prefix, and the per-arch trees (--per-arch,
 * --group) whose union is a plain split.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

static char* tool;

static int setup(void** state) {
  tool = kt_program("kpack");
  return kt_tmp_setup(state);
}

static int teardown(void** state) {
  free(tool);
  return kt_tmp_teardown(state);
}

#define KP(out, err, ...) \
  kt_run_args(tool, (const char* const[]){__VA_ARGS__, NULL}, 300, out, err)

static void mkdirs(const char* path) {
  char* copy = strdup(path);
  for (char* p = copy + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(copy, 0755);
      *p = '/';
    }
  mkdir(copy, 0755);
  free(copy);
}

/* tree/rel, its directories made. */
static char* tree_path(const char* tree, const char* rel) {
  char* p = kt_path(tree, rel);
  char* slash = strrchr(p, '/');
  *slash = '\0';
  mkdirs(p);
  *slash = '/';
  return p;
}

static void copy_file(const char* from, const char* to) {
  size_t n;
  void* data = kt_read_file(from, &n);
  assert_non_null(data);
  kt_write_file(to, data, n);
  free(data);
  assert_int_equal(chmod(to, 0755), 0);
}

/* Puts the real librocrand at tree/rel. */
static void place_rocrand(const char* tree, const char* rel) {
  char* rocrand = kt_librocrand();
  char* lib = tree_path(tree, rel);
  copy_file(rocrand, lib);
  free(lib);
  free(rocrand);
}

static bool exists(const char* path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static bool exists_in(const char* dir, const char* rel) {
  char* p = kt_path(dir, rel);
  bool found = exists(p);
  free(p);
  return found;
}

/* ---- where the archives go ------------------------------------------------
 */

/* --archive-dir puts the archives below the tree where the packager says
 * and the binary's search path leads there. */
static void test_archive_dir_places_archives_and_search_paths(void** state) {
  (void)state;
  char* in = kt_path(kt_tmp, "ad-in");
  char* out = kt_path(kt_tmp, "ad-out");
  place_rocrand(in, "lib/librocrand.so.1.1");
  char *text, *err;
  int rc = KP(&text, &err, "split", "--no-compress", "--prefix", "rand", "-o",
              out, "--archive-dir", "share/kpack/gpu", in);
  if (rc != 0)
    fail_msg("exit %d: %s", rc, err);
  assert_true(exists_in(out, "share/kpack/gpu/rand_gfx90a:xnack-.kpack"));
  assert_false(exists_in(out, ".kpack"));
  free(text);
  free(err);
  char* lib = kt_path(out, "lib/librocrand.so.1.1");
  kpack_host_t* host;
  kpack_host_wrapper_t w;
  assert_int_equal(kpack_host_open(lib, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_wrapper(host, 0, &w), KPACK_SUCCESS);
  assert_string_equal(w.search_paths[0],
                      "../share/kpack/gpu/rand_@GFXARCH@.kpack");
  kpack_host_close(host);
  assert_int_equal(KP(NULL, NULL, "verify", "--binary", lib), 0);
  assert_int_equal(
      KP(NULL, NULL, "verify", "--binary", "--arch", "gfx90a:xnack-", lib), 0);
  free(lib);
  free(in);
  free(out);
}

/* An --archive-dir outside the tree is a bad command line. */
static void test_archive_dir_must_stay_below_the_root(void** state) {
  (void)state;
  char* in = kt_path(kt_tmp, "adbad-in");
  char* out = kt_path(kt_tmp, "adbad-out");
  place_rocrand(in, "lib/librocrand.so.1.1");
  static const char* const bad[] = {"/usr/lib/kpack", "../kpack", "a//b",
                                    "a/./b", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char* err;
    assert_int_equal(
        KP(NULL, &err, "split", "-o", out, "--archive-dir", bad[i], in), 2);
    kt_assert_contains(err, "must be a relative path");
    free(err);
    assert_false(exists(out));
  }
  free(in);
  free(out);
}

/* A staged root (a dpkg root holding usr/) is refused without
 * --archive-dir, which would put the archives at /.kpack once installed;
 * with it, the archives are named after the library, not the folder. */
static void test_system_root_needs_archive_dir_and_names_the_library(
    void** state) {
  (void)state;
  char* in = kt_path(kt_tmp, "root");
  char* out = kt_path(kt_tmp, "root-out");
  place_rocrand(in, "usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
  char *text, *err;
  assert_int_equal(KP(NULL, &err, "split", "-o", out, in), 2);
  kt_assert_contains(err, "--archive-dir");
  kt_assert_contains(err, "/.kpack");
  free(err);
  assert_false(exists(out));
  int rc = KP(&text, &err, "split", "--no-compress", "-o", out,
              "--archive-dir", "usr/lib/x86_64-linux-gnu/kpack", in);
  if (rc != 0)
    fail_msg("exit %d: %s", rc, err);
  assert_true(exists_in(
      out, "usr/lib/x86_64-linux-gnu/kpack/rocrand_gfx90a:xnack-.kpack"));
  assert_false(exists_in(
      out, "usr/lib/x86_64-linux-gnu/kpack/root_gfx90a:xnack-.kpack"));
  free(text);
  free(err);
  free(in);
  free(out);
}

/* A system prefix (usr) holding two libraries has no one name for their
 * archives: refused, asking for --prefix, nothing written. */
static void test_system_prefix_of_two_libraries_asks_for_a_prefix(
    void** state) {
  (void)state;
  char* in = kt_path(kt_tmp, "two/usr");
  char* out = kt_path(kt_tmp, "two-out");
  place_rocrand(in, "lib/librocrand.so.1.1");
  place_rocrand(in, "lib/libhiprand.so.1.1");
  char* err;
  assert_int_equal(KP(NULL, &err, "split", "-o", out, in), 2);
  kt_assert_contains(err, "--prefix");
  kt_assert_contains(err, "hiprand, rocrand");
  free(err);
  assert_false(exists(out));
  assert_int_equal(
      KP(NULL, NULL, "split", "--no-compress", "--prefix", "rand", "-o", out,
         in),
      0);
  assert_true(exists_in(out, ".kpack/rand_gfx90a:xnack-.kpack"));
  free(in);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_archive_dir_places_archives_and_search_paths, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_archive_dir_must_stay_below_the_root, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_system_root_needs_archive_dir_and_names_the_library, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_system_prefix_of_two_libraries_asks_for_a_prefix, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
