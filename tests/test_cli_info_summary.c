/* SPDX-License-Identifier: MIT
 *
 * `kpack info` of a kpack-ified binary (Debian's librocrand, split): one
 * summary of its records, its search paths and the archives and arches
 * they reach, instead of one row per record (those behind -v); an arch it
 * was split for whose archive is gone is named; a directory sums up the
 * HIP binaries below it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static char* tool;
static char* out_dir;
static char* binary;

static int setup(void** state) {
  kt_tmp_setup(state);
  tool = kt_program("kpack");
  char* lib = kt_librocrand();
  out_dir = kt_path(kt_tmp, "out");
  const char* args[] = {"split",    "-q",   "-o", out_dir,
                        "--prefix", "rand", lib,  NULL};
  assert_int_equal(kt_run_args(tool, args, 120, NULL, NULL), 0);
  binary = kt_path(out_dir, "librocrand.so.1.1");
  free(lib);
  return 0;
}

static int teardown(void** state) {
  free(tool);
  free(out_dir);
  free(binary);
  return kt_tmp_teardown(state);
}

static const char* const arches =
    "gfx1030 gfx803 gfx900:xnack- gfx906:xnack- gfx908:xnack- gfx90a:xnack+ "
    "gfx90a:xnack-";

static void test_summary_names_search_path_archives_and_reach(void** state) {
  (void)state;
  char *out, *err, *expected;
  const char* args[] = {"info", binary, NULL};
  assert_int_equal(kt_run_args(tool, args, 60, &out, &err), 0);
  assert_true(
      asprintf(&expected,
               "kind:         kpack-ified: device code in kpack archives\n"
               "records:      1 in .hipFatBinSegment\n"
               "split for:    %s (kpack_arches)\n"
               "kernel:       librocrand.so.1.1#0\n"
               "search path:  .kpack/rand_@GFXARCH@.kpack\n"
               "               -> %s/.kpack/rand_@GFXARCH@.kpack\n"
               "archives:     %s/.kpack/rand_gfx1030.kpack: gfx1030\n"
               "              %s/.kpack/rand_gfx803.kpack: gfx803\n",
               arches, out_dir, out_dir, out_dir) > 0);
  kt_assert_contains(out, expected);
  free(expected);
  assert_true(asprintf(&expected, "reaches:      %s\n", arches) > 0);
  kt_assert_contains(out, expected);
  assert_null(strstr(out, "RECORD"));
  assert_null(strstr(out, "not found:"));
  assert_string_equal(err, "");
  free(expected);
  free(out);
  free(err);
}

static void test_verbose_shows_one_row_per_record(void** state) {
  (void)state;
  char *out, *err;
  const char* args[] = {"info", "-v", binary, NULL};
  assert_int_equal(kt_run_args(tool, args, 60, &out, &err), 0);
  kt_assert_contains(out, "RECORD  MAGIC  KERNEL");
  kt_assert_contains(out, "0       HIPK   librocrand.so.1.1#0  ");
  assert_null(strstr(out, "reaches:"));
  free(out);
  free(err);
}

static void test_an_arch_whose_archive_is_gone_is_not_reached(void** state) {
  (void)state;
  char* archive = kt_path(out_dir, ".kpack/rand_gfx803.kpack");
  char* aside = kt_path(kt_tmp, "aside.kpack");
  assert_int_equal(rename(archive, aside), 0);
  char *out, *err;
  const char* args[] = {"info", binary, NULL};
  assert_int_equal(kt_run_args(tool, args, 60, &out, &err), 0);
  kt_assert_contains(out,
                     "reaches:      gfx1030 gfx900:xnack- gfx906:xnack- "
                     "gfx908:xnack- gfx90a:xnack+ gfx90a:xnack-\n"
                     "not found:    gfx803 (split for, no archive found "
                     "declares it)\n");
  free(out);
  free(err);
  const char* json[] = {"info", "--json", binary, NULL};
  assert_int_equal(kt_run_args(tool, json, 60, &out, &err), 0);
  kt_assert_contains(out,
                     "\"reached_arches\": [\"gfx1030\", \"gfx900:xnack-\"");
  assert_null(strstr(out, "\"gfx803\"]"));
  free(out);
  free(err);
  assert_int_equal(rename(aside, archive), 0);
  free(archive);
  free(aside);
}

/* A tree of two split copies, one split for gfx1030 only, and a fat copy:
 * gfx1030 reached by both, the other arches by one. */
static void test_a_directory_sums_up_its_binaries(void** state) {
  (void)state;
  char* tree = kt_path(kt_tmp, "tree");
  char* lib = kt_librocrand();
  char *cmd, *out, *err, *expected;
  assert_true(asprintf(&cmd,
                       "set -e; mkdir -p '%s'; cp '%s' '%s/fat.so'; "
                       "'%s' split -q -o '%s/a' '%s'; "
                       "'%s' split -q -o '%s/b' --arch gfx1030 '%s'",
                       tree, lib, tree, tool, tree, lib, tool, tree, lib) > 0);
  const char* sh[] = {"-c", cmd, NULL};
  assert_int_equal(kt_run_args("sh", sh, 120, NULL, NULL), 0);
  const char* args[] = {"info", tree, NULL};
  assert_int_equal(kt_run_args(tool, args, 60, &out, &err), 0);
  assert_true(asprintf(&expected,
                       "directory:    %s\n"
                       "binaries:     2 kpack-ified, 1 fat\n"
                       "reaches:      gfx1030 (every kpack-ified binary)\n"
                       "partly:       gfx803 (1) gfx900:xnack- (1) "
                       "gfx906:xnack- (1) gfx908:xnack- (1) gfx90a:xnack+ (1) "
                       "gfx90a:xnack- (1) (how many of the 2 reach it)\n",
                       tree) > 0);
  assert_string_equal(out, expected);
  assert_string_equal(err, "");
  free(out);
  free(err);
  const char* json[] = {"info", "--json", tree, NULL};
  assert_int_equal(kt_run_args(tool, json, 60, &out, &err), 0);
  kt_assert_contains(out,
                     "\"kpackified\": 2, \"fat\": 1, \"unreadable\": 0, "
                     "\"reached_arches\": [{\"arch\": \"gfx1030\", "
                     "\"binaries\": 2}, {\"arch\": \"gfx803\", "
                     "\"binaries\": 1}");
  free(out);
  free(err);
  const char* verbose[] = {"info", "-v", tree, NULL};
  assert_int_equal(kt_run_args(tool, verbose, 60, &out, &err), 0);
  kt_assert_contains(out, "/a/librocrand.so.1.1\n");
  kt_assert_contains(out, "/b/librocrand.so.1.1\n");
  free(out);
  free(err);
  free(expected);
  free(cmd);
  free(lib);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary_names_search_path_archives_and_reach),
      cmocka_unit_test(test_verbose_shows_one_row_per_record),
      cmocka_unit_test(test_an_arch_whose_archive_is_gone_is_not_reached),
      cmocka_unit_test(test_a_directory_sums_up_its_binaries),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
