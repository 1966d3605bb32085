/* SPDX-License-Identifier: MIT
 *
 * The kpack tool when standard output cannot be written: every command,
 * its --help and --version exit 1 with "kpack: write error: REASON", as
 * coreutils do, instead of reporting success for output that was lost.
 * /dev/full fails every write with ENOSPC.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

extern char** environ;

static char* tool;
static char* archive;

static int setup(void** state) {
  kt_tmp_setup(state);
  tool = kt_program("kpack");
  archive = kt_path(kt_tmp, "a.kpack");
  static const char* const arches[] = {"gfx90a", "gfx942"};
  /* Big enough that `cat` and `list` overflow stdio's buffer. */
  void* big = kt_pattern(100000, 1);
  kt_kernel kernels[40];
  char names[40][32];
  for (int i = 0; i < 40; i++) {
    snprintf(names[i], sizeof(names[i]), "lib/libx.so#%d", i);
    kernels[i] = (kt_kernel){names[i], arches[i % 2], big, 100000 - i};
  }
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 2,
                   kernels, 40);
  free(big);
  return 0;
}

static int teardown(void** state) {
  free(tool);
  free(archive);
  return kt_tmp_teardown(state);
}

/* Runs kpack with stdout on `out`; returns the exit status, and stderr. */
static int run_to(const char* out, char** err, const char* const* args) {
  const char* argv[32];
  size_t n = 0;
  argv[n++] = tool;
  for (; *args != NULL; args++)
    argv[n++] = *args;
  argv[n] = NULL;
  char* err_path = kt_path(kt_tmp, "stderr");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int status;
  assert_int_equal(
      posix_spawn(&pid, tool, &fa, NULL, (char* const*)argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  size_t size = 0;
  *err = kt_read_file(err_path, &size);
  assert_non_null(*err);
  free(err_path);
  return WEXITSTATUS(status);
}

/* The command succeeds with stdout on a file, and fails with the write
 * error, and only that message, with stdout on /dev/full. */
static void expect_write_error(const char* const* args) {
  char* err;
  char* file = kt_path(kt_tmp, "stdout");
  int ok = run_to(file, &err, args);
  if (ok != 0)
    fail_msg("kpack %s: exit %d with stdout on a file:\n%s", args[0], ok, err);
  free(err);
  int rc = run_to("/dev/full", &err, args);
  if (rc != 1 || strcmp(err, "kpack: write error: No space left on device\n"))
    fail_msg("kpack %s %s > /dev/full: exit %d, stderr:\n%s", args[0],
             args[1] ? args[1] : "", rc, err);
  free(err);
  free(file);
}

#define EXPECT_WRITE_ERROR(...) \
  expect_write_error((const char* const[]){__VA_ARGS__, NULL})

static void test_list_and_info_fail_on_a_full_stdout(void** state) {
  (void)state;
  EXPECT_WRITE_ERROR("list", archive);
  EXPECT_WRITE_ERROR("list", "--json", archive);
  EXPECT_WRITE_ERROR("info", archive);
  EXPECT_WRITE_ERROR("info", "--json", archive);
}

static void test_cat_fails_on_a_full_stdout(void** state) {
  (void)state;
  EXPECT_WRITE_ERROR("cat", archive, "lib/libx.so#3", "gfx942");
}

static void test_extract_verbose_fails_on_a_full_stdout(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "tree");
  EXPECT_WRITE_ERROR("extract", "-v", "-C", dir, archive);
  free(dir);
}

static void test_create_fails_on_a_full_stdout(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "tree");
  char* out = kt_path(kt_tmp, "b.kpack");
  char* err;
  assert_int_equal(
      run_to("/dev/null", &err,
             (const char* const[]){"extract", "-C", dir, archive, NULL}),
      0);
  free(err);
  EXPECT_WRITE_ERROR("create", "-o", out, dir);
  free(out);
  free(dir);
}

static void test_verify_fails_on_a_full_stdout(void** state) {
  (void)state;
  EXPECT_WRITE_ERROR("verify", archive);
}

static void test_resolve_fails_on_a_full_stdout(void** state) {
  (void)state;
  EXPECT_WRITE_ERROR("resolve", "--kernel", "lib/libx.so#2", "--search-path",
                     archive, "--arch", "gfx90a");
  EXPECT_WRITE_ERROR("resolve", "--json", "--kernel", "lib/libx.so#2",
                     "--search-path", archive, "--arch", "gfx90a");
}

static void test_help_and_version_fail_on_a_full_stdout(void** state) {
  (void)state;
  static const char* const cmds[] = {"list",   "info",   "cat",    "extract",
                                     "create", "verify", "resolve"};
  EXPECT_WRITE_ERROR("--version");
  EXPECT_WRITE_ERROR("help");
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    EXPECT_WRITE_ERROR(cmds[i], "--help");
    EXPECT_WRITE_ERROR("help", cmds[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_and_info_fail_on_a_full_stdout),
      cmocka_unit_test(test_cat_fails_on_a_full_stdout),
      cmocka_unit_test(test_extract_verbose_fails_on_a_full_stdout),
      cmocka_unit_test(test_create_fails_on_a_full_stdout),
      cmocka_unit_test(test_verify_fails_on_a_full_stdout),
      cmocka_unit_test(test_resolve_fails_on_a_full_stdout),
      cmocka_unit_test(test_help_and_version_fail_on_a_full_stdout),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
