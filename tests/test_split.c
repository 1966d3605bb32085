/* SPDX-License-Identifier: MIT
 *
 * The kpack tool over HIP fat binaries, as a user runs it: the streamed
 * "fat binary -> archive entries" path that `create --fatbin` and `split`
 * share, `kpack split` over files and trees (mirror, archives, in place,
 * idempotence, a killed run) and `kpack verify --binary`.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "support.h"

static char* tmp;
static char* tool;

static int setup(void** state) {
  (void)state;
  const char* bin = getenv("KPACK_TEST_BIN"); /* exported by the Makefile */
  tmp = kt_tmpdir();
  tool = kt_path(bin != NULL ? bin : "build/bin", "kpack");
  return 0;
}

static int teardown(void** state) {
  (void)state;
  kt_rmtree(tmp);
  free(tmp);
  free(tool);
  return 0;
}

/* Runs the tool with the NULL-terminated arguments; its exit status, and
 * its stdout and stderr when out / err are not NULL. */
static int run_args(char** out, char** err, const char* const* args) {
  char* argv[64];
  size_t n = 0;
  argv[n++] = tool;
  for (const char* const* a = args; *a != NULL; a++) {
    assert_true(n < 63);
    argv[n++] = (char*)*a;
  }
  argv[n] = NULL;
  return kt_run(argv, 300, out, err);
}

#define KP(out, err, ...) \
  run_args(out, err, (const char* const[]){__VA_ARGS__, NULL})

static void assert_contains(const char* text, const char* needle) {
  if (strstr(text, needle) == NULL)
    fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static char* path_in(const char* name) {
  return kt_path(tmp, name);
}

/* ---- create --fatbin: the streamed entries ---------------------------------
 */

/* A fat binary whose first code object read is empty: an empty kernel, not
 * a failed read. */
static void test_create_fatbin_takes_an_empty_first_code_object(void** state) {
  (void)state;
  void* k = kt_pattern(3000, 5);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx1100", "", 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", k, 3000}};
  fx_buf bundle = fx_bundle(e, 3);
  fx_wrapper w = {FX_HIPF_MAGIC, 1, 0, FX_PTR_FILE, 0};
  fx_elf_opts o = {.bundles = &bundle,
                   .bundle_count = 1,
                   .wrappers = &w,
                   .wrapper_count = 1};
  fx_buf elf = fx_elf(&o);
  char* path = path_in("libempty.so");
  char* archive = path_in("empty.kpack");
  kt_write_file(path, elf.data, elf.size);
  char *out, *err;
  assert_int_equal(KP(&out, &err, "create", "-o", archive, "--fatbin", path),
                   0);
  assert_contains(out, "2 kernels");
  free(out);
  free(err);
  kpack_archive_t a;
  void* data;
  size_t size;
  assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
  assert_int_equal(
      kpack_get_kernel(a, "libempty.so#0", "gfx1100", &data, &size),
      KPACK_SUCCESS);
  assert_int_equal(size, 0);
  kpack_free_kernel(data);
  assert_int_equal(kpack_get_kernel(a, "libempty.so#0", "gfx90a", &data, &size),
                   KPACK_SUCCESS);
  assert_int_equal(size, 3000);
  assert_memory_equal(data, k, 3000);
  kpack_free_kernel(data);
  kpack_close(a);
  free(path);
  free(archive);
  fx_free(&elf);
  fx_free(&bundle);
  free(k);
}

/* A bundle with only a host entry has no kernel: a clear error (and under
 * UBSan no qsort of a NULL array). */
static void test_create_fatbin_with_only_host_code_is_a_clear_error(
    void** state) {
  (void)state;
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  fx_buf bundle = fx_bundle(e, 1);
  fx_wrapper w = {FX_HIPF_MAGIC, 1, 0, FX_PTR_FILE, 0};
  fx_elf_opts o = {.bundles = &bundle,
                   .bundle_count = 1,
                   .wrappers = &w,
                   .wrapper_count = 1};
  fx_buf elf = fx_elf(&o);
  char* path = path_in("libhost.so");
  char* archive = path_in("host.kpack");
  kt_write_file(path, elf.data, elf.size);
  char* err;
  assert_int_equal(KP(NULL, &err, "create", "-o", archive, "--fatbin", path),
                   1);
  assert_contains(err, "no kernels found");
  assert_int_equal(access(archive, F_OK), -1);
  free(err);
  free(path);
  free(archive);
  fx_free(&elf);
  fx_free(&bundle);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_create_fatbin_takes_an_empty_first_code_object, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_create_fatbin_with_only_host_code_is_a_clear_error, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
