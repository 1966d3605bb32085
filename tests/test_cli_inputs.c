/* SPDX-License-Identifier: MIT
 *
 * The kpack tool never answers "OK" to the wrong question: a target that is
 * no GPU target is refused by every command that takes one, in the same
 * words; a filter that matches nothing is an error, not an empty success;
 * an input that is no archive is told what works on it. Messages are
 * compared in full.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

static char* tool;
static char* archive; /* lib/libx.so#0 for gfx90a:xnack-, xnack+ and gfx1100 */

static int setup(void** state) {
  kt_tmp_setup(state);
  tool = kt_program("kpack");
  archive = kt_path(kt_tmp, "a.kpack");
  static const char* const arches[] = {"gfx1100", "gfx90a:xnack+",
                                       "gfx90a:xnack-"};
  void* data = kt_pattern(5000, 7);
  const kt_kernel kernels[] = {
      {"lib/libx.so#0", "gfx1100", data, 3000},
      {"lib/libx.so#0", "gfx90a:xnack+", data, 4000},
      {"lib/libx.so#0", "gfx90a:xnack-", data, 5000},
  };
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 3,
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
  kt_run_args(tool, (const char* const[]){__VA_ARGS__, NULL}, 60.0, out, err)

/* The archive's declared arches, space-separated. */
static char* declared(const char* path) {
  kpack_archive_t a;
  size_t count;
  char* list = NULL;
  size_t size = 0;
  FILE* f = open_memstream(&list, &size);
  assert_non_null(f);
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_architecture_count(a, &count), KPACK_SUCCESS);
  for (size_t i = 0; i < count; i++) {
    const char* arch;
    assert_int_equal(kpack_get_architecture(a, i, &arch), KPACK_SUCCESS);
    fprintf(f, "%s%s", i ? " " : "", arch);
  }
  kpack_close(a);
  fclose(f);
  return list;
}

/* ---- create --arch ------------------------------------------------------- */

/* --arch gfx90a keeps both xnack variants and declares them, not a bare
 * gfx90a that holds no kernel (a bare gfx90a agent would stop there with
 * KERNEL_NOT_FOUND instead of going on to the next archive). */
static void test_create_arch_declares_only_arches_holding_kernels(
    void** state) {
  (void)state;
  char* out = kt_path(kt_tmp, "create-gfx90a.kpack");
  char* err;
  assert_int_equal(KP(NULL, &err, "create", "-q", "-o", out, "--arch", "gfx90a",
                      "--arch", "gfx942", archive),
                   0);
  assert_string_equal(err,
                      "kpack: warning: --arch gfx942: no kernel in the input "
                      "could be served to such an agent; the archive does not "
                      "declare it\n");
  char* arches = declared(out);
  assert_string_equal(arches, "gfx90a:xnack+ gfx90a:xnack-");
  free(arches);
  free(err);
  free(out);
}

static void test_create_arch_refuses_what_is_no_gpu_target(void** state) {
  (void)state;
  char* out = kt_path(kt_tmp, "create-typo.kpack");
  char* err;
  assert_int_equal(
      KP(NULL, &err, "create", "-o", out, "--arch", "gfx90a:xnak-", archive),
      2);
  assert_string_equal(
      err,
      "kpack create: --arch 'gfx90a:xnak-': not a GPU target: 'xnak-' is not "
      "a target feature (the features are sramecc and xnack, each followed "
      "by + or -)\n"
      "Try 'kpack help create'.\n");
  assert_int_equal(access(out, F_OK), -1);
  free(err);
  free(out);
}

/* ---- extract -a ---------------------------------------------------------- */

/* -a takes a GPU target (or an arch an archive has); one that keeps
 * nothing is an error, and no directory is made. */
static void test_extract_arch_that_keeps_nothing_is_an_error(void** state) {
  (void)state;
  char* dir = kt_path(kt_tmp, "extracted");
  char *out, *err, *expected;
  assert_int_equal(KP(&out, &err, "extract", "-C", dir, "-a", "gfx90", archive),
                   2);
  assert_string_equal(out, "");
  assert_string_equal(
      err,
      "kpack extract: -a 'gfx90': not a GPU target: 'gfx90' is "
      "not a GPU processor kpack knows (such as gfx90a, gfx942, "
      "gfx1100 or gfx9-generic)\n"
      "Try 'kpack help extract'.\n");
  assert_int_equal(access(dir, F_OK), -1);
  free(out);
  free(err);
  /* A real target the archive has no kernel for: it says which it has. */
  assert_int_equal(
      KP(&out, &err, "extract", "-C", dir, "-a", "gfx90a", archive), 1);
  assert_true(asprintf(&expected,
                       "kpack: %s: no kernel for gfx90a; its arches: gfx1100, "
                       "gfx90a:xnack+, gfx90a:xnack-\n",
                       archive) > 0);
  assert_string_equal(err, expected);
  assert_int_equal(access(dir, F_OK), -1);
  free(expected);
  free(out);
  free(err);
  /* An arch as listed extracts it alone. */
  assert_int_equal(
      KP(NULL, NULL, "extract", "-C", dir, "-a", "gfx90a:xnack-", archive), 0);
  char* kernel = kt_path(dir, "lib/libx.so#0/gfx90a:xnack-/kernel.hsaco");
  char* other = kt_path(dir, "lib/libx.so#0/gfx1100");
  assert_int_equal(access(kernel, F_OK), 0);
  assert_int_equal(access(other, F_OK), -1);
  free(kernel);
  free(other);
  kt_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_arch_declares_only_arches_holding_kernels),
      cmocka_unit_test(test_create_arch_refuses_what_is_no_gpu_target),
      cmocka_unit_test(test_extract_arch_that_keeps_nothing_is_an_error),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
