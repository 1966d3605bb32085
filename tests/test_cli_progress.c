/* SPDX-License-Identifier: MIT
 *
 * Progress of the long kpack commands (extract, verify, verify --binary,
 * create, diff): a line drawn over itself on a terminal, here a
 * pseudo-terminal made by script(1), erased before the command's own
 * output; nothing of it when standard error is no terminal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "support.h"

static char* tool;
static char* archive;

static int setup(void** state) {
  kt_tmp_setup(state);
  char* program = kt_program("kpack");
  tool = realpath(program, NULL); /* run from another directory */
  assert_non_null(tool);
  free(program);
  archive = kt_path(kt_tmp, "a.kpack");
  static const char* const arches[] = {"gfx90a", "gfx942"};
  void* data = kt_pattern(50000, 1);
  kt_kernel kernels[] = {{"lib/a.so#0", "gfx90a", data, 50000},
                         {"lib/a.so#0", "gfx942", data, 40000}};
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 2,
                   kernels, 2);
  free(data);
  return 0;
}

static int teardown(void** state) {
  free(tool);
  free(archive);
  return kt_tmp_teardown(state);
}

/* What `kpack ARGS` writes to a terminal (stdout and stderr together). */
static char* on_terminal(const char* args) {
  char *cmd, *out;
  assert_true(asprintf(&cmd, "cd '%s' && '%s' %s", kt_tmp, tool, args) > 0);
  const char* argv[] = {"-qec", cmd, "/dev/null", NULL};
  assert_int_equal(kt_run_args("script", argv, 60, &out, NULL), 0);
  free(cmd);
  return out;
}

static void expect_progress(const char* args, const char* line,
                            const char* after) {
  char* out = on_terminal(args);
  char* drawn;
  assert_true(asprintf(&drawn, "\r%s", line) > 0);
  kt_assert_contains(out, drawn);
  /* erased, and the command's own output after it */
  kt_assert_contains(out, "\033[K\r\033[K");
  if (after != NULL) {
    kt_assert_contains(out, after);
    assert_true(strstr(out, after) > strstr(out, "\r\033[K"));
  }
  free(drawn);
  free(out);
}

static void test_long_commands_show_progress_on_a_terminal(void** state) {
  (void)state;
  expect_progress("verify a.kpack", "kpack: verify: a.kpack: 1 kernels",
                  "a.kpack: OK, 2 kernels");
  expect_progress("extract -C tree a.kpack", "kpack: extract: 0 kernels", NULL);
  expect_progress("create -o b.kpack tree", "kpack: create: ", NULL);
  expect_progress("diff a.kpack b.kpack", "kpack: diff: 1 kernels compared",
                  "equal: 0 added");
}

/* verify --binary of a directory counts binaries and loads as it goes. */
static void test_verify_binary_shows_progress_on_a_terminal(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "fat");
  char* lib = kt_path(dir, "libfat.so.1");
  char* build = kt_path(kt_tmp, "build");
  assert_int_equal(mkdir(dir, 0755), 0);
  assert_int_equal(mkdir(build, 0755), 0);
  void* code = kt_pattern(900, 3);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", code, 900}};
  fx_buf bundle = fx_bundle(e, 2);
  fx_program_opts o = {
      .kind = FX_PROGRAM_SHARED, .bundles = &bundle, .bundle_count = 1};
  assert_true(fx_build_program(build, &o, lib));
  fx_free(&bundle);
  free(code);
  char* out = kt_path(kt_tmp, "split");
  char* err;
  if (kt_run_args(tool,
                  (const char* const[]){"split", "-q", "-o", out, dir, NULL},
                  60, NULL, &err) != 0)
    fail_msg("split: %s", err);
  free(err);
  free(out);
  /* The binary's own line comes first, whole; the count is drawn after it
   * and erased at the end. */
  char* text = on_terminal("verify --binary split");
  kt_assert_contains(text, "split/libfat.so.1: OK, 1 record, 1 load");
  kt_assert_contains(
      text,
      "\rkpack: verify: 1 binaries, 1 loads, split/libfat.so.1\033[K"
      "\r\033[K");
  free(text);
  kt_rmtree(build);
  free(build);
  free(lib);
  free(dir);
}

static void test_no_progress_without_a_terminal(void** state) {
  (void)state;
  char* tree = kt_path(kt_tmp, "tree2");
  char* copy = kt_path(kt_tmp, "c.kpack");
  const char* const runs[][6] = {
      {"verify", archive, NULL},
      {"extract", "-C", tree, archive, NULL},
      {"create", "-o", copy, tree, NULL},
      {"diff", archive, copy, NULL},
  };
  for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
    char *out, *err;
    assert_int_equal(kt_run_args(tool, runs[i], 60, &out, &err), 0);
    assert_null(strchr(err, '\r'));
    assert_null(strchr(out, '\r'));
    free(out);
    free(err);
  }
  free(tree);
  free(copy);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_commands_show_progress_on_a_terminal),
      cmocka_unit_test(test_verify_binary_shows_progress_on_a_terminal),
      cmocka_unit_test(test_no_progress_without_a_terminal),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
