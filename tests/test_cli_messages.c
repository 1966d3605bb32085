/* SPDX-License-Identifier: MIT
 *
 * What the kpack tool says when a user gets something wrong, compared in
 * full: bad options, unreadable or truncated archives, a kernel name one
 * step from a real one, a directory where archives are expected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

static char* tool;
static char* archive; /* two binaries, gfx90a and gfx942 */

static int setup(void** state) {
  kt_tmp_setup(state);
  tool = kt_program("kpack");
  archive = kt_path(kt_tmp, "a.kpack");
  static const char* const arches[] = {"gfx90a", "gfx942"};
  void* data = kt_pattern(5000, 7);
  const kt_kernel kernels[] = {
      {"lib/libx.so#0", "gfx90a", data, 5000},
      {"lib/libx.so#0", "gfx942", data, 4000},
      {"lib/liby.so#0", "gfx90a", data, 3000},
  };
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 2,
                   kernels, 3);
  free(data);
  return 0;
}

static int teardown(void** state) {
  free(tool);
  free(archive);
  return kt_tmp_teardown(state);
}

/* Runs kpack with the NULL-terminated arguments: its exit status, and its
 * standard output and error when asked for. */
#define KP(out, err, ...) \
  kt_run_args(tool, (const char* const[]){__VA_ARGS__, NULL}, 30.0, out, err)

/* ---- command lines ------------------------------------------------------- */

static void test_version_answers_to_dash_v(void** state) {
  (void)state;
  char* out;
  assert_int_equal(KP(&out, NULL, "-V"), 0);
  assert_string_equal(
      out, "kpack " KPACK_VERSION_STRING " (kpack archive format v1)\n");
  free(out);
}

static void test_a_bad_option_is_reported_once(void** state) {
  (void)state;
  char* err;
  assert_int_equal(KP(NULL, &err, "verify", "--json", "--bogus", archive), 2);
  assert_string_equal(err,
                      "kpack verify: unrecognized option '--bogus'\n"
                      "Try 'kpack help verify'.\n");
  free(err);
  assert_int_equal(KP(NULL, &err, "create", "-j"), 2);
  assert_string_equal(err,
                      "kpack create: option '-j' requires an argument\n"
                      "Try 'kpack help create'.\n");
  free(err);
  assert_int_equal(KP(NULL, &err, "list", "-Z", archive), 2);
  assert_string_equal(err,
                      "kpack list: invalid option -- 'Z'\n"
                      "Try 'kpack help list'.\n");
  free(err);
  assert_int_equal(KP(NULL, &err, "split", "--output"), 2);
  assert_string_equal(err,
                      "kpack split: option '--output' requires an argument\n"
                      "Try 'kpack help split'.\n");
  free(err);
}

static void test_kpackfs_bad_command_line_exits_2(void** state) {
  (void)state;
  char* kpackfs = kt_program("kpackfs");
  char *err, *expected;
  assert_int_equal(kt_run_args(kpackfs, (const char* const[]){archive, NULL},
                               30.0, NULL, &err),
                   2);
  assert_true(
      asprintf(&expected,
               "usage: %s [options] SOURCE... MOUNTPOINT (see --help)\n",
               kpackfs) > 0);
  assert_string_equal(err, expected);
  free(err);
  assert_int_equal(kt_run_args(kpackfs,
                               (const char* const[]){"-o", "cache_size=lots",
                                                     archive, kt_tmp, NULL},
                               30.0, NULL, &err),
                   2);
  assert_string_equal(err, "kpackfs: bad cache_size 'lots' (e.g. 512M, 2G)\n");
  free(err);
  static const char* const seconds[] = {
      "release_after=", "release_after=-1", "release_after=1s",
      "release_after=0.1234", "release_after=86401"};
  for (size_t i = 0; i < sizeof(seconds) / sizeof(seconds[0]); i++) {
    assert_int_equal(kt_run_args(kpackfs,
                                 (const char* const[]){"-o", seconds[i],
                                                       archive, kt_tmp, NULL},
                                 30.0, NULL, &err),
                     2);
    char* want;
    assert_true(asprintf(&want,
                         "kpackfs: bad release_after '%s' (seconds, e.g. 1 or "
                         "0.5)\n",
                         seconds[i] + strlen("release_after=")) > 0);
    assert_string_equal(err, want);
    free(want);
    free(err);
  }
  /* An option neither kpackfs nor libfuse knows: it says which, and
   * nothing is opened or mounted. */
  assert_int_equal(kt_run_args(kpackfs,
                               (const char* const[]){"-o", "no_such_option",
                                                     archive, kt_tmp, NULL},
                               30.0, NULL, &err),
                   2);
  assert_string_equal(err,
                      "kpackfs: unknown option '-o no_such_option': kpackfs "
                      "--help lists kpackfs's options and libfuse's (FUSE "
                      "OPTIONS)\n");
  free(err);
  free(expected);
  free(kpackfs);
}

static void test_kpackfs_list_says_a_name_holds_a_colon(void** state) {
  (void)state;
  char* kpackfs = kt_program("kpackfs");
  char* named = kt_path(kt_tmp, "r_gfx90a:xnack-.kpack");
  assert_int_equal(link(archive, named), 0);
  char *list, *err, *expected;
  assert_true(asprintf(&list, "%s:%s", named, archive) > 0);
  assert_int_equal(
      kt_run_args(kpackfs, (const char* const[]){list, "/nonexistent", NULL},
                  30.0, NULL, &err),
      1);
  assert_true(asprintf(&expected,
                       "kpackfs: '%s/r_gfx90a': no such file or directory; "
                       "'%s' exists: write a ':' inside a name in a SOURCE "
                       "list as '\\:'\n",
                       kt_tmp, named) > 0);
  assert_string_equal(err, expected);
  free(err);
  free(expected);
  free(list);
  unlink(named);
  free(named);
  free(kpackfs);
}

/* ---- malformed archives -------------------------------------------------- */

static void test_a_truncated_archive_says_what_is_cut_where(void** state) {
  (void)state;
  size_t size;
  unsigned char* bytes = kt_read_file(archive, &size);
  assert_non_null(bytes);
  uint64_t toc = 0;
  for (int i = 7; i >= 0; i--)
    toc = toc << 8 | bytes[8 + i];
  char* cut = kt_path(kt_tmp, "cut.kpack");
  char *err, *expected;
  /* Cut inside the kernels: the table of contents is gone. */
  kt_write_file(cut, bytes, 2000);
  assert_int_equal(KP(NULL, &err, "list", cut), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: KPACK_ERROR_INVALID_FORMAT (table of "
                       "contents at 0x%llx starts past end of file (2000 "
                       "bytes): truncated?)\n",
                       cut, (unsigned long long)toc) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  /* Cut inside the table of contents. */
  kt_write_file(cut, bytes, size - 10);
  assert_int_equal(KP(NULL, &err, "info", cut), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: KPACK_ERROR_MSGPACK_PARSE_FAILED (table of "
                       "contents at 0x%llx (%zu bytes to end of file, %zu "
                       "bytes) does not parse: truncated?)\n",
                       cut, (unsigned long long)toc, size - 10 - (size_t)toc,
                       size - 10) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  /* Not an archive at all. */
  kt_write_file(cut, "junk", 4);
  char* out;
  assert_int_equal(KP(&out, NULL, "verify", cut), 1);
  assert_true(asprintf(&expected,
                       "%s: KPACK_ERROR_INVALID_FORMAT (no kpack magic at "
                       "offset 0 (not a kpack archive))\n",
                       cut) > 0);
  assert_string_equal(out, expected);
  free(expected);
  free(out);
  unlink(cut);
  free(cut);
  free(bytes);
}

/* What the system says about a file that cannot be read as an archive, in
 * every command (root reads any file, so a device stands for the
 * unreadable one here). */
static void test_an_unreadable_input_says_the_systems_reason(void** state) {
  (void)state;
  char* err;
  assert_int_equal(KP(NULL, &err, "info", "/dev/null"), 1);
  assert_string_equal(err,
                      "kpack: /dev/null: KPACK_ERROR_IO_ERROR (not a "
                      "regular file)\n");
  free(err);
  char* out;
  assert_int_equal(KP(&out, NULL, "verify", "/dev/null"), 1);
  assert_string_equal(out,
                      "/dev/null: KPACK_ERROR_IO_ERROR (not a regular "
                      "file)\n");
  free(out);
}

/* An archive its user may not read: every command that reads archives
 * says so with the system's words. */
static void test_an_archive_without_read_permission_says_so(void** state) {
  (void)state;
  char* locked = kt_path(kt_tmp, "locked.kpack");
  assert_int_equal(link(archive, locked), 0);
  assert_int_equal(chmod(locked, 0), 0);
  static const char* const commands[] = {"list", "info", "extract"};
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
    char *err, *expected;
    int rc =
        kt_run_as_user((char* const[]){tool, (char*)commands[i], locked, NULL},
                       30.0, NULL, &err);
    if (rc < 0) {
      print_message("cannot give up CAP_DAC_OVERRIDE: not checked\n");
      free(err);
      break;
    }
    assert_int_equal(rc, 1);
    assert_true(asprintf(&expected,
                         "kpack: %s: KPACK_ERROR_IO_ERROR (Permission "
                         "denied)\n",
                         locked) > 0);
    assert_string_equal(err, expected);
    free(expected);
    free(err);
  }
  char *out, *expected;
  int rc = kt_run_as_user((char* const[]){tool, "verify", locked, NULL}, 30.0,
                          &out, NULL);
  if (rc >= 0) {
    assert_int_equal(rc, 1);
    assert_true(asprintf(&expected,
                         "%s: KPACK_ERROR_IO_ERROR (Permission denied)\n",
                         locked) > 0);
    assert_string_equal(out, expected);
    free(expected);
  }
  free(out);
  chmod(locked, 0644);
  unlink(locked);
  free(locked);
}

/* ---- kernel names -------------------------------------------------------- */

static void test_cat_suggests_the_name_a_user_likely_meant(void** state) {
  (void)state;
  char *err, *expected;
  assert_int_equal(KP(NULL, &err, "cat", archive, "usr/lib/libx.so", "gfx90a"),
                   1);
  assert_true(asprintf(&expected,
                       "kpack: %s: usr/lib/libx.so for gfx90a: "
                       "KPACK_ERROR_KERNEL_NOT_FOUND (no such kernel); did you "
                       "mean 'lib/libx.so#0'?\n",
                       archive) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  assert_int_equal(KP(NULL, &err, "cat", archive, "lib/liby.so#0", "gfx942"),
                   1);
  assert_true(asprintf(&expected,
                       "kpack: %s: lib/liby.so#0 for gfx942: "
                       "KPACK_ERROR_KERNEL_NOT_FOUND (no such kernel); "
                       "lib/liby.so#0 has gfx90a\n",
                       archive) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
}

/* A directory of per-arch archives: the hint comes from all of them. */
static void test_cat_of_a_directory_suggests_from_every_archive(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "per-arch-cat");
  assert_int_equal(mkdir(dir, 0755), 0);
  static const char* const arches[] = {"gfx1030", "gfx90a"};
  for (size_t i = 0; i < 2; i++) {
    char* path;
    assert_true(asprintf(&path, "%s/r_%s.kpack", dir, arches[i]) > 0);
    const kt_kernel kernel = {"lib/libr.so#0", arches[i], "code", 4};
    kt_write_archive(path, KPACK_COMPRESSION_NOOP, &arches[i], 1, &kernel, 1);
    free(path);
  }
  char *err, *expected;
  assert_int_equal(KP(NULL, &err, "cat", dir, "lib/libr.so", "gfx90a"), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: lib/libr.so for gfx90a: "
                       "KPACK_ERROR_KERNEL_NOT_FOUND (no such kernel); did you "
                       "mean 'lib/libr.so#0'?\n",
                       dir) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  assert_int_equal(KP(NULL, &err, "cat", dir, "lib/libr.so#0", "gfx942"), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: lib/libr.so#0 for gfx942: "
                       "KPACK_ERROR_KERNEL_NOT_FOUND (no such kernel); "
                       "lib/libr.so#0 has gfx1030, gfx90a\n",
                       dir) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  kt_rmtree(dir);
  free(dir);
}

static void test_extract_of_a_binary_it_lacks_fails_and_suggests(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "extracted");
  char *err, *expected;
  assert_int_equal(
      KP(NULL, &err, "extract", "-C", dir, "-b", "lib/libx.so", archive), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: no kernel of lib/libx.so; did you mean "
                       "'lib/libx.so#0'?\n",
                       archive) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  kt_rmtree(dir);
  free(dir);
}

static void test_resolve_tells_no_code_for_the_gpu_from_not_installed(
    void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "per-arch");
  char* other = kt_path(dir, "x_gfx942.kpack");
  assert_int_equal(mkdir(dir, 0755), 0);
  static const char* const arches[] = {"gfx942"};
  const kt_kernel kernel = {"lib/libx.so#0", "gfx942", "code", 4};
  kt_write_archive(other, KPACK_COMPRESSION_NOOP, arches, 1, &kernel, 1);
  char *search, *out;
  assert_true(asprintf(&search, "%s/x_@GFXARCH@.kpack", dir) > 0);
  assert_int_equal(KP(&out, NULL, "resolve", "--kernel", "lib/libx.so",
                      "--search-path", search, "--arch", "gfx90a"),
                   1);
  kt_assert_contains(out,
                     "\nwhy:     no code for this GPU in this build: 1 "
                     "archive beside the candidates declares gfx942\n");
  free(out);
  free(search);
  char* missing = kt_path(kt_tmp, "not-installed");
  char* expected;
  assert_true(asprintf(&search, "%s/x_@GFXARCH@.kpack", missing) > 0);
  assert_int_equal(KP(&out, NULL, "resolve", "--kernel", "lib/libx.so",
                      "--search-path", search, "--arch", "gfx90a"),
                   1);
  assert_true(asprintf(&expected,
                       "\nwhy:     archive not installed: no *.kpack archive "
                       "in %s\n",
                       missing) > 0);
  kt_assert_contains(out, expected);
  free(expected);
  free(out);
  /* The same words in the JSON result. */
  assert_int_equal(
      KP(&out, NULL, "resolve", "--json", "--kernel", "lib/libx.so",
         "--search-path", search, "--arch", "gfx90a"),
      1);
  assert_true(asprintf(&expected,
                       "\"result\": {\"status\": "
                       "\"KPACK_ERROR_ARCHIVE_NOT_FOUND\", \"why\": "
                       "\"archive not installed: no *.kpack archive in %s\"}",
                       missing) > 0);
  kt_assert_contains(out, expected);
  free(expected);
  free(out);
  free(search);
  free(missing);
  kt_rmtree(dir);
  free(other);
  free(dir);
}

static void test_resolve_notes_a_name_split_by_rocm_kpack_path(void** state) {
  (void)state;
  char* named = kt_path(kt_tmp, "x_gfx90a:xnack-.kpack");
  assert_int_equal(link(archive, named), 0);
  char *out, *expected, *prefix = kt_path(kt_tmp, "x_gfx90a");
  setenv("ROCM_KPACK_PATH", named, 1);
  assert_int_equal(KP(&out, NULL, "resolve", "--kernel", "lib/libx.so",
                      "--arch", "gfx90a:xnack-"),
                   1);
  unsetenv("ROCM_KPACK_PATH");
  assert_true(asprintf(&expected,
                       "\nnote     ROCM_KPACK_PATH: '%s' does not exist, but "
                       "'%s' does: write a ':' inside a name as '\\:'\n\n",
                       prefix, named) > 0);
  kt_assert_contains(out, expected);
  free(expected);
  free(out);
  /* Written with "\:", the loader finds it. */
  char* escaped;
  assert_true(asprintf(&escaped, "%s\\:xnack-.kpack", prefix) > 0);
  setenv("ROCM_KPACK_PATH", escaped, 1);
  assert_int_equal(KP(&out, NULL, "resolve", "--kernel", "lib/libx.so",
                      "--arch", "gfx90a:xnack-"),
                   0);
  unsetenv("ROCM_KPACK_PATH");
  assert_null(strstr(out, "note "));
  kt_assert_contains(out, "RESULT   KPACK_SUCCESS");
  free(out);
  free(escaped);
  unlink(named);
  free(prefix);
  free(named);
}

/* ---- directories --------------------------------------------------------- */

static void test_a_directory_stands_for_its_archives(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "archives");
  char* sub = kt_path(dir, "sub");
  char* copy = kt_path(sub, "b.kpack");
  char* other = kt_path(dir, "README");
  assert_int_equal(mkdir(dir, 0755), 0);
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(link(archive, copy), 0);
  kt_write_file(other, "not an archive", 14);
  char *out, *expected;
  assert_int_equal(KP(&out, NULL, "verify", dir), 0);
  assert_true(asprintf(&expected, "%s: OK, 3 kernels\n", copy) > 0);
  assert_string_equal(out, expected);
  free(expected);
  free(out);
  assert_int_equal(KP(&out, NULL, "list", dir), 0);
  kt_assert_contains(out, "lib/liby.so#0  gfx90a");
  free(out);
  assert_int_equal(KP(&out, NULL, "info", dir), 0);
  assert_true(asprintf(&expected, "archive:      %s\n", copy) > 0);
  kt_assert_contains(out, expected);
  free(expected);
  free(out);
  size_t size;
  assert_int_equal(KP(&out, NULL, "cat", dir, "lib/liby.so#0", "gfx90a"), 0);
  free(out);
  char* extracted = kt_path(kt_tmp, "from-dir");
  assert_int_equal(KP(NULL, NULL, "extract", "-C", extracted, dir), 0);
  char* kernel = kt_path(extracted, "lib/liby.so#0/gfx90a/kernel.hsaco");
  void* data = kt_read_file(kernel, &size);
  assert_non_null(data);
  assert_int_equal(size, 3000);
  free(data);
  /* A directory without archives is an error that says so. */
  char* empty = kt_path(kt_tmp, "empty");
  assert_int_equal(mkdir(empty, 0755), 0);
  char* err;
  assert_int_equal(KP(NULL, &err, "list", empty), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: no *.kpack archive in this directory\n",
                       empty) > 0);
  assert_string_equal(err, expected);
  free(expected);
  free(err);
  kt_rmtree(empty);
  kt_rmtree(extracted);
  kt_rmtree(dir);
  free(empty);
  free(kernel);
  free(extracted);
  free(other);
  free(copy);
  free(sub);
  free(dir);
}

/* ---- JSON ---------------------------------------------------------------- */

static void test_verify_json_reports_each_archive(void** state) {
  (void)state;
  char* junk = kt_path(kt_tmp, "junk.kpack");
  kt_write_file(junk, "junk", 4);
  char *out, *expected;
  assert_int_equal(KP(&out, NULL, "verify", "--json", archive, junk), 1);
  assert_true(asprintf(&expected,
                       "{\n"
                       "  \"archives\": [\n"
                       "    {\n"
                       "      \"archive\": \"%s\",\n"
                       "      \"findings\": [],\n"
                       "      \"status\": null,\n"
                       "      \"reason\": null,\n"
                       "      \"kernels\": 3,\n"
                       "      \"problems\": 0,\n"
                       "      \"warnings\": 0,\n"
                       "      \"ok\": true\n"
                       "    },\n"
                       "    {\n"
                       "      \"archive\": \"%s\",\n"
                       "      \"findings\": [],\n"
                       "      \"status\": \"KPACK_ERROR_INVALID_FORMAT\",\n"
                       "      \"reason\": \"no kpack magic at offset 0 (not a "
                       "kpack archive)\",\n"
                       "      \"kernels\": 0,\n"
                       "      \"problems\": 1,\n"
                       "      \"warnings\": 0,\n"
                       "      \"ok\": false\n"
                       "    }\n"
                       "  ],\n"
                       "  \"summary\": {\"archives\": 2, \"failed\": 1, "
                       "\"problems\": 1, \"ok\": false, \"interrupted\": "
                       "false}\n"
                       "}\n",
                       archive, junk) > 0);
  assert_string_equal(out, expected);
  free(expected);
  free(out);
  unlink(junk);
  free(junk);
}

/* ---- defaults ------------------------------------------------------------ */

/* A directory in the layout `kpack create` takes, one kernel in it. */
static char* make_tree(const char* name) {
  char* tree = kt_path(kt_tmp, name);
  char* dir;
  assert_true(asprintf(&dir, "%s/lib/libx.so#0/gfx90a", tree) > 0);
  char* mk;
  assert_true(asprintf(&mk, "mkdir -p '%s'", dir) > 0);
  assert_int_equal(system(mk), 0);
  char* file = kt_path(dir, "kernel.hsaco");
  void* data = kt_pattern(100000, 3);
  kt_write_file(file, data, 100000);
  free(data);
  free(file);
  free(mk);
  free(dir);
  return tree;
}

static void test_create_uses_one_thread_per_cpu_unless_told(void** state) {
  (void)state;
  char* tree = make_tree("tree");
  char* out_path = kt_path(kt_tmp, "t.kpack");
  char *out, *expected;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  assert_true(
      asprintf(&expected, ", %ld thread%s\n", cpus, cpus == 1 ? "" : "s") > 0);
  assert_int_equal(KP(&out, NULL, "create", "-o", out_path, tree), 0);
  kt_assert_contains(out, expected);
  free(out);
  assert_int_equal(KP(&out, NULL, "create", "-j1", "-o", out_path, tree), 0);
  kt_assert_contains(out, ", 1 thread\n");
  free(out);
  free(expected);
  free(out_path);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_answers_to_dash_v),
      cmocka_unit_test(test_a_bad_option_is_reported_once),
      cmocka_unit_test(test_kpackfs_bad_command_line_exits_2),
      cmocka_unit_test(test_kpackfs_list_says_a_name_holds_a_colon),
      cmocka_unit_test(test_a_truncated_archive_says_what_is_cut_where),
      cmocka_unit_test(test_an_unreadable_input_says_the_systems_reason),
      cmocka_unit_test(test_an_archive_without_read_permission_says_so),
      cmocka_unit_test(test_cat_suggests_the_name_a_user_likely_meant),
      cmocka_unit_test(test_cat_of_a_directory_suggests_from_every_archive),
      cmocka_unit_test(test_extract_of_a_binary_it_lacks_fails_and_suggests),
      cmocka_unit_test(
          test_resolve_tells_no_code_for_the_gpu_from_not_installed),
      cmocka_unit_test(test_resolve_notes_a_name_split_by_rocm_kpack_path),
      cmocka_unit_test(test_a_directory_stands_for_its_archives),
      cmocka_unit_test(test_verify_json_reports_each_archive),
      cmocka_unit_test(test_create_uses_one_thread_per_cpu_unless_told),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
