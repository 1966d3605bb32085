/* SPDX-License-Identifier: MIT
 *
 * The tree layout (kpack_layout.h): which TOC names can become paths, and
 * the kernel file name both ways. kpackfs and `kpack extract` skip exactly
 * the entries refused here; test_kpackfs.c checks that they then show the
 * same tree.
 */
#include <stdio.h>
#include <string.h>

#include "rocm_kpack/kpack_layout.h"
#include "support.h"

/* A name of `n` copies of `c`, then `suffix`. */
static char* repeated(char c, size_t n, const char* suffix) {
  static char buf[1024];
  memset(buf, c, n);
  strcpy(buf + n, suffix);
  return buf;
}

static void test_relative_binary_paths_are_accepted(void** state) {
  (void)state;
  assert_null(kpack_layout_binary_problem("lib/librocrand.so.1#0"));
  assert_null(kpack_layout_binary_problem("a#0"));
  assert_null(kpack_layout_binary_problem("lib/.kpackfs#0")); /* not first */
  assert_null(kpack_layout_binary_problem(".kpackfsx/a#0"));
  assert_null(kpack_layout_binary_problem("...#0"));
  assert_null(kpack_layout_binary_problem(repeated('b', 255, "/x")));
}

static void test_binary_paths_that_leave_the_tree_are_refused(void** state) {
  (void)state;
  assert_string_equal(kpack_layout_binary_problem(""), "empty binary name");
  assert_string_equal(kpack_layout_binary_problem(NULL), "empty binary name");
  assert_string_equal(kpack_layout_binary_problem("/abs#0"),
                      "absolute binary path");
  assert_string_equal(kpack_layout_binary_problem("a//b#0"),
                      "empty path component");
  assert_string_equal(kpack_layout_binary_problem("lib/"),
                      "empty path component");
  assert_string_equal(kpack_layout_binary_problem("../evil#0"),
                      "'.' or '..' path component");
  assert_string_equal(kpack_layout_binary_problem("a/./b#0"),
                      "'.' or '..' path component");
  assert_string_equal(kpack_layout_binary_problem("a/.."),
                      "'.' or '..' path component");
  assert_string_equal(kpack_layout_binary_problem(".kpackfs/stats"),
                      "reserved name .kpackfs");
  assert_string_equal(kpack_layout_binary_problem(".kpackfs"),
                      "reserved name .kpackfs");
  assert_string_equal(kpack_layout_binary_problem(repeated('b', 256, "#0")),
                      "path component longer than 255 bytes");
  assert_string_equal(kpack_layout_binary_problem(repeated('b', 256, "/x")),
                      "path component longer than 255 bytes");
}

static void test_entries_need_an_arch_and_type_that_are_file_names(
    void** state) {
  (void)state;
  assert_null(kpack_layout_entry_problem("a#0", "gfx90a:xnack-", "hsaco"));
  assert_string_equal(kpack_layout_entry_problem("/a#0", "gfx90a", "hsaco"),
                      "absolute binary path");
  static const char* const bad_arches[] = {"", ".", "..", "gfx/90a", NULL};
  for (size_t i = 0; i < 5; i++) {
    assert_string_equal(kpack_layout_entry_problem("a#0", bad_arches[i], "x"),
                        "arch is not a file name");
    assert_string_equal(kpack_layout_arch_problem(bad_arches[i]),
                        "arch is not a file name");
    assert_string_equal(
        kpack_layout_entry_problem("a#0", "gfx90a", bad_arches[i]),
        "type is not a file name");
  }
  assert_null(kpack_layout_arch_problem(repeated('g', 255, "")));
  assert_string_equal(kpack_layout_arch_problem(repeated('g', 256, "")),
                      "arch is not a file name");
  /* "kernel." + type: 255 bytes are served, 256 are not. */
  assert_null(
      kpack_layout_entry_problem("a#0", "gfx90a", repeated('t', 248, "")));
  assert_string_equal(
      kpack_layout_entry_problem("a#0", "gfx90a", repeated('t', 249, "")),
      "file name 'kernel.<type>' longer than 255 bytes");
}

static void test_kernel_file_names_go_both_ways(void** state) {
  (void)state;
  char name[KPACK_LAYOUT_NAME_MAX + 1];
  assert_int_equal(kpack_layout_kernel_file("hsaco", name, sizeof(name)),
                   KPACK_SUCCESS);
  assert_string_equal(name, "kernel.hsaco");
  assert_string_equal(kpack_layout_kernel_type(name), "hsaco");
  assert_int_equal(kpack_layout_kernel_file("hsaco", name, 13), KPACK_SUCCESS);
  assert_int_equal(kpack_layout_kernel_file("hsaco", name, 12),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_layout_kernel_file("a/b", name, sizeof(name)),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_layout_kernel_file(NULL, name, sizeof(name)),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_layout_kernel_file("x", NULL, 8),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(kpack_layout_kernel_type("kernel."));
  assert_null(kpack_layout_kernel_type("kernels"));
  assert_null(kpack_layout_kernel_type("metadata.json"));
  assert_null(kpack_layout_kernel_type(NULL));
}

/* The files beside a kernel, by name (a name given by length, as a path
 * component inside a longer path is), and which of a file and a directory
 * on one path stays. */
static void test_files_beside_a_kernel_are_named_by_its_type_and_map(
    void** state) {
  (void)state;
  const char* path = "kernels/y#0";
  assert_int_equal(kpack_layout_file_named("hsaco", false, path, 7),
                   KPACK_LAYOUT_FILE_KERNELS);
  assert_int_equal(kpack_layout_file_named("hsaco", false, "kernel.hsaco", 12),
                   KPACK_LAYOUT_FILE_KERNEL);
  assert_int_equal(kpack_layout_file_named("hsaco", false, "metadata.json", 13),
                   KPACK_LAYOUT_FILE_METADATA);
  assert_int_equal(
      kpack_layout_file_named("hsaco", true, "toc-metadata.msgpack", 20),
      KPACK_LAYOUT_FILE_TOC_METADATA);
  /* What the kernel does not have is not its file. */
  assert_int_equal(
      kpack_layout_file_named("hsaco", false, "toc-metadata.msgpack", 20), -1);
  assert_int_equal(kpack_layout_file_named("bin", true, "kernels", 7), -1);
  assert_int_equal(kpack_layout_file_named("bin", true, "kernel.bin", 10),
                   KPACK_LAYOUT_FILE_KERNEL);
  assert_int_equal(kpack_layout_file_named("hsaco", false, "kernel.hsac", 11),
                   -1);
  assert_int_equal(kpack_layout_file_named("hsaco", false, "kernel.", 7), -1);
  assert_int_equal(kpack_layout_file_named(NULL, false, "kernels", 7), -1);
  /* The file stays unless the directory comes from a source before it. */
  assert_true(kpack_layout_file_stays(0, 0));
  assert_true(kpack_layout_file_stays(1, 2));
  assert_false(kpack_layout_file_stays(2, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relative_binary_paths_are_accepted),
      cmocka_unit_test(test_binary_paths_that_leave_the_tree_are_refused),
      cmocka_unit_test(test_entries_need_an_arch_and_type_that_are_file_names),
      cmocka_unit_test(test_kernel_file_names_go_both_ways),
      cmocka_unit_test(
          test_files_beside_a_kernel_are_named_by_its_type_and_map),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
