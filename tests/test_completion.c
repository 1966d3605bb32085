/* SPDX-License-Identifier: MIT
 *
 * Bash completion for kpack (contrib/kpack.bash), run in bash as readline
 * would run it: COMP_WORDS and COMP_CWORD set, _kpack called, COMPREPLY
 * read back. Commands, each command's options, and the arch and binary
 * names of the archives typed so far.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static char* tool;
static char* script;
static char* archive;

static int setup(void** state) {
  kt_tmp_setup(state);
  char* program = kt_program("kpack");
  tool = realpath(program, NULL);
  assert_non_null(tool);
  free(program);
  const char* src = getenv("KPACK_SOURCE_DIR");
  script = kt_path(src != NULL && *src ? src : ".", "contrib/kpack.bash");
  archive = kt_path(kt_tmp, "rand.kpack");
  static const char* const arches[] = {"gfx1030", "gfx90a:xnack+",
                                       "gfx90a:xnack-"};
  void* data = kt_pattern(1000, 1);
  kt_kernel kernels[] = {{"lib/librand.so#0", "gfx1030", data, 1000},
                         {"lib/librand.so#0", "gfx90a:xnack-", data, 900},
                         {"lib/librand.so#1", "gfx90a:xnack+", data, 800}};
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 3,
                   kernels, 3);
  free(data);
  return 0;
}

static int teardown(void** state) {
  free(tool);
  free(script);
  free(archive);
  return kt_tmp_teardown(state);
}

/* COMPREPLY, one per line, for the words (the last one being completed;
 * "TOOL" stands for the program, "ARCHIVE" for the test's archive). */
static char* complete(const char* words) {
  char *cmd, *out, *err;
  assert_true(asprintf(&cmd,
                       "source '%s'\n"
                       "ARCHIVE='%s'\n"
                       "COMP_WORDS=('%s' %s)\n"
                       "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                       "_kpack\n"
                       "printf '%%s\\n' \"${COMPREPLY[@]}\"\n",
                       script, archive, tool, words) > 0);
  const char* args[] = {"-c", cmd, NULL};
  int status = kt_run_args("bash", args, 60, &out, &err);
  if (status != 0)
    fail_msg("bash exited %d: %s", status, err);
  free(cmd);
  free(err);
  return out;
}

static void expect(const char* words, const char* reply) {
  char* out = complete(words);
  if (strcmp(out, reply) != 0)
    fail_msg("completing %s:\ngot:\n%s\nexpected:\n%s", words, out, reply);
  free(out);
}

static void test_commands_complete(void** state) {
  (void)state;
  expect("''",
         "list\ninfo\ncat\nextract\ncreate\nverify\nresolve\nsplit\ndiff\n"
         "help\n--help\n--version\n");
  expect("d", "diff\n");
  expect("help ver", "verify\n");
}

static void test_options_come_from_the_commands_manual(void** state) {
  (void)state;
  expect("diff --", "--help\n--json\n--quiet\n");
  char* out = complete("verify -");
  kt_assert_contains(out, "--binary\n");
  kt_assert_contains(out, "--arch\n");
  kt_assert_contains(out, "-q\n");
  free(out);
}

static void test_arches_and_binaries_come_from_the_archives_named(
    void** state) {
  (void)state;
  expect("verify --binary \"$ARCHIVE\" --arch ''",
         "gfx1030\ngfx90a:xnack+\ngfx90a:xnack-\n");
  expect("cat \"$ARCHIVE\" lib/", "lib/librand.so#0\nlib/librand.so#1\n");
  expect("cat \"$ARCHIVE\" lib/librand.so#0 gfx9",
         "gfx90a:xnack+\ngfx90a:xnack-\n");
  /* a directory stands for the archives in it */
  char* words;
  assert_true(asprintf(&words, "verify --binary '%s' --arch gfx1", kt_tmp) > 0);
  expect(words, "gfx1030\n");
  free(words);
  /* readline replaces only what follows the last ':' of the word */
  expect("cat \"$ARCHIVE\" lib/librand.so#0 gfx90a:xnack", "xnack+\nxnack-\n");
}

/* With ':' in COMP_WORDBREAKS, bash's default, bash hands gfx90a:x over
 * as the words gfx90a, : and x: still an arch to complete, not a file. */
static void test_an_arch_split_at_its_colon_still_completes_as_an_arch(
    void** state) {
  (void)state;
  expect("cat \"$ARCHIVE\" lib/librand.so#0 gfx90a : xnack",
         "xnack+\nxnack-\n");
  expect("verify --binary \"$ARCHIVE\" --arch gfx90a : x", "xnack+\nxnack-\n");
  expect("verify --binary \"$ARCHIVE\" --arch gfx90a :", "xnack+\nxnack-\n");
}

/* extract -a and -b complete arches and binaries, as --arch does. */
static void test_extract_a_and_b_complete_from_the_archives(void** state) {
  (void)state;
  expect("extract \"$ARCHIVE\" -C out -a ''",
         "gfx1030\ngfx90a:xnack+\ngfx90a:xnack-\n");
  expect("extract \"$ARCHIVE\" -a gfx1", "gfx1030\n");
  expect("extract \"$ARCHIVE\" -b lib/librand.so#",
         "lib/librand.so#0\nlib/librand.so#1\n");
}

static void test_operands_complete_as_files(void** state) {
  (void)state;
  char* words;
  assert_true(asprintf(&words, "list '%s/ra'", kt_tmp) > 0);
  char* out = complete(words);
  char* expected;
  assert_true(asprintf(&expected, "%s\n", archive) > 0);
  assert_string_equal(out, expected);
  free(expected);
  free(out);
  free(words);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commands_complete),
      cmocka_unit_test(test_options_come_from_the_commands_manual),
      cmocka_unit_test(test_arches_and_binaries_come_from_the_archives_named),
      cmocka_unit_test(
          test_an_arch_split_at_its_colon_still_completes_as_an_arch),
      cmocka_unit_test(test_extract_a_and_b_complete_from_the_archives),
      cmocka_unit_test(test_operands_complete_as_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
