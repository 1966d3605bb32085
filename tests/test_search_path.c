/* SPDX-License-Identifier: MIT
 *
 * Search path handling (docs/loader.md): ':'-lists, lexical normalisation,
 * resolution against the binary's directory (lexical where nothing exists,
 * symlinks followed against a real tree where it does), @GFXARCH@
 * expansion and directories of *.kpack.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/search_path.h"
#include "support.h"

static void expect_list(const kp_strlist* list, const char* const* want,
                        size_t n) {
  assert_int_equal(list->count, n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(list->items[i], want[i]);
}

#define EXPECT_LIST(list, ...)                                \
  do {                                                        \
    static const char* const want_[] = {__VA_ARGS__};         \
    expect_list(list, want_, sizeof(want_) / sizeof(*want_)); \
  } while (0)

static void expect_normal(const char* in, const char* want) {
  char* got = kp_path_normalize(in);
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
}

static void expect_resolved(const char* binary, const char* path,
                            const char* want) {
  char* got = kp_path_resolve(binary, path);
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
}

static void test_list_splits_on_colons_and_drops_empty_items(void** state) {
  (void)state;
  kp_strlist list = {0};
  assert_int_equal(kp_path_list_parse("::/a/x.kpack::b.kpack:", &list),
                   KPACK_SUCCESS);
  EXPECT_LIST(&list, "/a/x.kpack", "b.kpack");
  kp_strlist_free(&list);
}

static void test_list_reads_backslash_colon_as_a_colon_in_a_name(void** state) {
  (void)state;
  kp_strlist list = {0};
  assert_int_equal(
      kp_path_list_parse("/k/rand_gfx90a\\:xnack-.kpack:/k/a\\b.kpack:c\\",
                         &list),
      KPACK_SUCCESS);
  /* Other backslashes stay, so lists written before "\:" keep meaning. */
  EXPECT_LIST(&list, "/k/rand_gfx90a:xnack-.kpack", "/k/a\\b.kpack", "c\\");
  kp_strlist_free(&list);
}

static void test_list_names_the_element_joined_with_its_neighbour(
    void** state) {
  (void)state;
  char* dir = kt_tmpdir();
  char* file = kt_path(dir, "rand_gfx90a:xnack-.kpack");
  kt_write_file(file, "x", 1);
  char* list;
  assert_true(asprintf(&list, "%s/rand_gfx90a:xnack-.kpack:/nowhere", dir) > 0);
  char** items;
  size_t count;
  assert_int_equal(kpack_path_list_split(list, &items, &count), KPACK_SUCCESS);
  assert_int_equal(count, 3);
  char* joined = kpack_path_list_joined(items, count, 0);
  assert_non_null(joined);
  assert_string_equal(joined, file);
  free(joined);
  joined = kpack_path_list_joined(items, count, 1);
  assert_string_equal(joined, file);
  free(joined);
  assert_null(kpack_path_list_joined(items, count, 2)); /* nothing joined */
  kpack_path_list_free(items, count);
  free(list);
  free(file);
  kt_rmtree(dir);
  free(dir);
}

static void test_empty_list_yields_no_items(void** state) {
  (void)state;
  kp_strlist list = {0};
  assert_int_equal(kp_path_list_parse("", &list), KPACK_SUCCESS);
  assert_int_equal(kp_path_list_parse(":::", &list), KPACK_SUCCESS);
  assert_int_equal(list.count, 0);
  kp_strlist_free(&list);
}

static void test_list_appends_after_existing_items(void** state) {
  (void)state;
  kp_strlist list = {0};
  assert_int_equal(kp_strlist_push(&list, "first"), KPACK_SUCCESS);
  assert_int_equal(kp_path_list_parse("second:third", &list), KPACK_SUCCESS);
  EXPECT_LIST(&list, "first", "second", "third");
  assert_true(kp_strlist_contains(&list, "third"));
  assert_false(kp_strlist_contains(&list, "fourth"));
  kp_strlist_free(&list);
}

static void test_normalize_removes_dots_and_duplicate_slashes(void** state) {
  (void)state;
  expect_normal("/a//b/./c/", "/a/b/c");
  expect_normal("a/./b//", "a/b");
  expect_normal("./a", "a");
}

static void test_normalize_dotdot_removes_previous_component(void** state) {
  (void)state;
  expect_normal("/opt/rocm/lib/../.kpack/x.kpack", "/opt/rocm/.kpack/x.kpack");
  expect_normal("/a/b/../../c", "/c");
  expect_normal("a/b/../..", ".");
}

static void test_normalize_dotdot_at_root_is_dropped(void** state) {
  (void)state;
  expect_normal("/../a", "/a");
  expect_normal("/..", "/");
  expect_normal("/", "/");
}

static void test_normalize_keeps_leading_dotdot_of_relative_path(void** state) {
  (void)state;
  expect_normal("../a", "../a");
  expect_normal("../../a/../b", "../../b");
  expect_normal("a/../../b", "../b");
}

static void test_normalize_empty_path_is_dot(void** state) {
  (void)state;
  expect_normal("", ".");
  expect_normal(".", ".");
}

/* Paths under a directory that does not exist resolve lexically. */
#define NOWHERE "/kpack-test-no-such-dir"

static void test_relative_path_resolves_against_binary_directory(void** state) {
  (void)state;
  expect_resolved(NOWHERE "/rocm/lib/librocblas.so.5", "../.kpack/blas.kpack",
                  NOWHERE "/rocm/.kpack/blas.kpack");
  expect_resolved(NOWHERE "/lib/libx.so", "x.kpack", NOWHERE "/lib/x.kpack");
}

static void test_absolute_path_is_kept_and_normalised(void** state) {
  (void)state;
  expect_resolved(NOWHERE "/rocm/lib/libx.so", NOWHERE "//k/./a.kpack",
                  NOWHERE "/k/a.kpack");
}

static void test_binary_in_root_or_without_directory(void** state) {
  (void)state;
  expect_resolved("/libx.so", "../kpack-test-no-such.kpack",
                  "/kpack-test-no-such.kpack");
  expect_resolved("libx.so", "kpack-test-no-such.kpack",
                  "kpack-test-no-such.kpack");
  expect_resolved("kpack-test-no-such-dir/libx.so", "../k.kpack", "k.kpack");
}

/* ---- resolution through a real tree with symlinks ---------------------------
 *
 * kt_tmp (canonical: real)/
 *   install/lib/libx.so   install/.kpack/x_gfx90a.kpack
 *   view/lib -> ../install/lib          (ROCm's "view" of an install)
 *   deep/a/b/, hop -> deep/a/b          (".." after a symlink)
 *   loop1 -> loop2, loop2 -> loop1      (a symlink loop)
 *   dangling -> nowhere
 *   last.kpack -> install/.kpack/x_gfx90a.kpack
 */
static char* real;

static void make_tree(void) {
  real = realpath(kt_tmp, NULL);
  assert_non_null(real);
  assert_int_equal(chdir(real), 0);
  assert_int_equal(system("mkdir -p install/lib install/.kpack view deep/a/b "
                          "&& touch install/lib/libx.so "
                          "install/.kpack/x_gfx90a.kpack "
                          "&& ln -s ../install/lib view/lib "
                          "&& ln -s deep/a/b hop && ln -s loop2 loop1 "
                          "&& ln -s loop1 loop2 && ln -s nowhere dangling "
                          "&& ln -s install/.kpack/x_gfx90a.kpack last.kpack"),
                   0);
}

static int tree_setup(void** state) {
  kt_tmp_setup(state);
  make_tree();
  return 0;
}

static int tree_teardown(void** state) {
  assert_int_equal(chdir("/"), 0);
  free(real);
  return kt_tmp_teardown(state);
}

/* kp_path_resolve(real/binary, path) must be real/want (or want when it
 * is absolute). */
static void expect_in_tree(const char* binary, const char* path,
                           const char* want) {
  char *b, *w;
  assert_true(asprintf(&b, "%s/%s", real, binary) > 0);
  assert_true(asprintf(&w, "%s%s%s", want[0] == '/' ? "" : real,
                       want[0] == '/' ? "" : "/", want) > 0);
  expect_resolved(b, path, w);
  free(b);
  free(w);
}

static void test_symlinked_library_directory_finds_the_real_tree(void** state) {
  (void)state;
  /* The archive for any arch, before @GFXARCH@ is expanded. */
  expect_in_tree("view/lib/libx.so", "../.kpack/x_@GFXARCH@.kpack",
                 "install/.kpack/x_@GFXARCH@.kpack");
  expect_in_tree("view/lib/libx.so", "../.kpack/x_gfx90a.kpack",
                 "install/.kpack/x_gfx90a.kpack");
  /* Not through the symlink: as before. */
  expect_in_tree("install/lib/libx.so", "../.kpack/x_gfx90a.kpack",
                 "install/.kpack/x_gfx90a.kpack");
}

static void test_dotdot_after_a_symlink_goes_to_the_target_parent(
    void** state) {
  (void)state;
  expect_in_tree("libx.so", "hop/../c.kpack", "deep/a/c.kpack");
  expect_in_tree("libx.so", "hop/../../b/../../install/lib", "install/lib");
}

static void test_missing_tail_is_normalised_lexically(void** state) {
  (void)state;
  expect_in_tree("view/lib/libx.so", "missing/deeper/../../x.kpack",
                 "install/lib/x.kpack");
  expect_in_tree("view/lib/libx.so", "missing/../../.kpack/y.kpack",
                 "install/.kpack/y.kpack");
}

static void test_loops_and_dangling_links_end_the_real_part(void** state) {
  (void)state;
  expect_in_tree("libx.so", "loop1/../x.kpack", "x.kpack");
  expect_in_tree("libx.so", "dangling/../x.kpack", "x.kpack");
  expect_in_tree("libx.so", "dangling/y.kpack", "dangling/y.kpack");
}

static void test_absolute_path_follows_symlinks_too(void** state) {
  (void)state;
  char* abs;
  assert_true(asprintf(&abs, "%s/view/lib/../.kpack/x_gfx90a.kpack", real) > 0);
  expect_in_tree("view/lib/libx.so", abs, "install/.kpack/x_gfx90a.kpack");
  free(abs);
}

static void test_existing_path_is_fully_canonical(void** state) {
  (void)state;
  expect_in_tree("libx.so", "last.kpack", "install/.kpack/x_gfx90a.kpack");
  char* binary;
  assert_true(asprintf(&binary, "%s/libx.so", real) > 0);
  expect_resolved(binary, ".", real);
  free(binary);
}

/* A binary named relative to the current directory (real/) resolves to an
 * absolute path once any of it exists. */
static void test_relative_binary_resolves_from_the_current_directory(
    void** state) {
  (void)state;
  char* want;
  assert_true(asprintf(&want, "%s/install/.kpack/x.kpack", real) > 0);
  expect_resolved("view/lib/libx.so", "../.kpack/x.kpack", want);
  free(want);
}

static void test_gfxarch_expands_for_each_arch_and_target(void** state) {
  (void)state;
  kp_target_list t[2];
  kp_strlist out = {0};
  assert_int_equal(kp_target_compatible("gfx942:xnack-", &t[0]), KPACK_SUCCESS);
  assert_int_equal(kp_target_compatible("gfx90a", &t[1]), KPACK_SUCCESS);
  assert_int_equal(
      kp_path_expand_gfxarch("/k/blas_@GFXARCH@.kpack", t, 2, &out),
      KPACK_SUCCESS);
  EXPECT_LIST(&out, "/k/blas_gfx942:xnack-.kpack", "/k/blas_gfx942.kpack",
              "/k/blas_gfx90a.kpack");
  kp_strlist_free(&out);
  kp_target_list_free(&t[0]);
  kp_target_list_free(&t[1]);
}

static void test_gfxarch_replaces_every_occurrence(void** state) {
  (void)state;
  kp_target_list t;
  kp_strlist out = {0};
  assert_int_equal(kp_target_compatible("gfx1100", &t), KPACK_SUCCESS);
  assert_int_equal(
      kp_path_expand_gfxarch("/@GFXARCH@/x_@GFXARCH@.kpack", &t, 1, &out),
      KPACK_SUCCESS);
  EXPECT_LIST(&out, "/gfx1100/x_gfx1100.kpack");
  kp_strlist_free(&out);
  kp_target_list_free(&t);
}

static void test_gfxarch_skips_paths_already_listed(void** state) {
  (void)state;
  kp_target_list t[2];
  kp_strlist out = {0};
  assert_int_equal(kp_target_compatible("gfx90a:xnack-", &t[0]), KPACK_SUCCESS);
  assert_int_equal(kp_target_compatible("gfx90a:xnack+", &t[1]), KPACK_SUCCESS);
  assert_int_equal(kp_path_expand_gfxarch("@GFXARCH@.kpack", t, 2, &out),
                   KPACK_SUCCESS);
  EXPECT_LIST(&out, "gfx90a:xnack-.kpack", "gfx90a.kpack",
              "gfx90a:xnack+.kpack");
  assert_int_equal(kp_path_expand_gfxarch("plain.kpack", t, 2, &out),
                   KPACK_SUCCESS);
  assert_int_equal(kp_path_expand_gfxarch("plain.kpack", t, 2, &out),
                   KPACK_SUCCESS);
  assert_int_equal(out.count, 4);
  assert_string_equal(out.items[3], "plain.kpack");
  kp_strlist_free(&out);
  kp_target_list_free(&t[0]);
  kp_target_list_free(&t[1]);
}

static void test_directory_lists_kpack_files_in_name_order(void** state) {
  (void)state;
  char* dir = kt_tmpdir();
  const char* names[] = {"b.kpack",       "a.kpack",     "B.kpack", "notes.txt",
                         ".hidden.kpack", "x.kpack.bak", ".kpack"};
  for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
    char* p = kt_path(dir, names[i]);
    kt_write_file(p, "x", 1);
    free(p);
  }
  char* sub = kt_path(dir, "sub");
  assert_int_equal(mkdir(sub, 0755), 0);
  char* nested = kt_path(sub, "nested.kpack");
  kt_write_file(nested, "x", 1);

  kp_strlist out = {0};
  assert_int_equal(kp_path_list_dir(dir, &out), KPACK_SUCCESS);
  assert_int_equal(out.count, 3);
  const char* want[] = {"B.kpack", "a.kpack", "b.kpack"};
  for (size_t i = 0; i < 3; i++) {
    char* p = kt_path(dir, want[i]);
    assert_string_equal(out.items[i], p);
    free(p);
  }
  kp_strlist_free(&out);
  kt_rmtree(dir);
  free(nested);
  free(sub);
  free(dir);
}

static void test_directory_with_trailing_slash_has_no_double_slash(
    void** state) {
  (void)state;
  char* dir = kt_tmpdir();
  char* file = kt_path(dir, "a.kpack");
  kt_write_file(file, "x", 1);
  char* slashed;
  assert_true(asprintf(&slashed, "%s/", dir) > 0);
  kp_strlist out = {0};
  assert_int_equal(kp_path_list_dir(slashed, &out), KPACK_SUCCESS);
  assert_int_equal(out.count, 1);
  assert_string_equal(out.items[0], file);
  kp_strlist_free(&out);
  kt_rmtree(dir);
  free(slashed);
  free(file);
  free(dir);
}

static void test_missing_directory_is_an_io_error(void** state) {
  (void)state;
  kp_strlist out = {0};
  assert_int_equal(kp_path_list_dir("/nonexistent/kpack-dir", &out),
                   KPACK_ERROR_IO_ERROR);
  assert_int_equal(out.count, 0);
  kp_strlist_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_splits_on_colons_and_drops_empty_items),
      cmocka_unit_test(test_list_reads_backslash_colon_as_a_colon_in_a_name),
      cmocka_unit_test(test_list_names_the_element_joined_with_its_neighbour),
      cmocka_unit_test(test_empty_list_yields_no_items),
      cmocka_unit_test(test_list_appends_after_existing_items),
      cmocka_unit_test(test_normalize_removes_dots_and_duplicate_slashes),
      cmocka_unit_test(test_normalize_dotdot_removes_previous_component),
      cmocka_unit_test(test_normalize_dotdot_at_root_is_dropped),
      cmocka_unit_test(test_normalize_keeps_leading_dotdot_of_relative_path),
      cmocka_unit_test(test_normalize_empty_path_is_dot),
      cmocka_unit_test(test_relative_path_resolves_against_binary_directory),
      cmocka_unit_test(test_absolute_path_is_kept_and_normalised),
      cmocka_unit_test(test_binary_in_root_or_without_directory),
      cmocka_unit_test(test_gfxarch_expands_for_each_arch_and_target),
      cmocka_unit_test(test_gfxarch_replaces_every_occurrence),
      cmocka_unit_test(test_gfxarch_skips_paths_already_listed),
      cmocka_unit_test(test_directory_lists_kpack_files_in_name_order),
      cmocka_unit_test(test_directory_with_trailing_slash_has_no_double_slash),
      cmocka_unit_test(test_missing_directory_is_an_io_error),
  };
  const struct CMUnitTest tree_tests[] = {
      cmocka_unit_test(test_symlinked_library_directory_finds_the_real_tree),
      cmocka_unit_test(test_dotdot_after_a_symlink_goes_to_the_target_parent),
      cmocka_unit_test(test_missing_tail_is_normalised_lexically),
      cmocka_unit_test(test_loops_and_dangling_links_end_the_real_part),
      cmocka_unit_test(test_absolute_path_follows_symlinks_too),
      cmocka_unit_test(test_existing_path_is_fully_canonical),
      cmocka_unit_test(
          test_relative_binary_resolves_from_the_current_directory),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed + cmocka_run_group_tests_name("symlinked trees", tree_tests,
                                              tree_setup, tree_teardown);
}
