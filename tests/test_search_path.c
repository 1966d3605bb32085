/* SPDX-License-Identifier: MIT
 *
 * Search path handling (SPEC §2.2): ':'-lists, lexical normalisation,
 * resolution against the binary's directory, @GFXARCH@ expansion and
 * directories of *.kpack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "search_path.h"
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

static void test_relative_path_resolves_against_binary_directory(void** state) {
  (void)state;
  expect_resolved("/opt/rocm/lib/librocblas.so.5", "../.kpack/blas.kpack",
                  "/opt/rocm/.kpack/blas.kpack");
  expect_resolved("/opt/lib/libx.so", "x.kpack", "/opt/lib/x.kpack");
}

static void test_absolute_path_is_kept_and_normalised(void** state) {
  (void)state;
  expect_resolved("/opt/rocm/lib/libx.so", "/srv//k/./a.kpack",
                  "/srv/k/a.kpack");
}

static void test_binary_in_root_or_without_directory(void** state) {
  (void)state;
  expect_resolved("/libx.so", "../k.kpack", "/k.kpack");
  expect_resolved("libx.so", "k.kpack", "k.kpack");
  expect_resolved("lib/libx.so", "../k.kpack", "k.kpack");
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
  return cmocka_run_group_tests(tests, NULL, NULL);
}
