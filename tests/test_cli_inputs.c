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

#include "fixture_code_object.h"
#include "fixture_fatbin.h"
#include "support.h"

static char* tool;
static char* archive; /* lib/libx.so#0 for gfx90a:xnack-, xnack+ and gfx1100 */
static char* code_object; /* one kernel with a mangled C++ name */
static char* fat;         /* a HIP fat binary, one bundle for gfx90a */

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
  static const fx_co_kernel co_kernels[] = {
      {"_Z4gemmPfi", 32, 16, 0, 0, 0, 16, 64, 256, 0, 0, 0}};
  fx_buf co =
      fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx90a:xnack-", co_kernels, 1);
  code_object = kt_path(kt_tmp, "k.hsaco");
  kt_write_file(code_object, co.data, co.size);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", co.data, co.size}};
  fx_buf bundle = fx_bundle(e, 2);
  fx_wrapper w = {FX_HIPF_MAGIC, 1, 0, FX_PTR_FILE, 0};
  fx_elf_opts o = {.bundles = &bundle,
                   .bundle_count = 1,
                   .wrappers = &w,
                   .wrapper_count = 1};
  fat = kt_path(kt_tmp, "libfat.so");
  fx_write_elf(fat, &o);
  fx_free(&bundle);
  fx_free(&co);
  free(data);
  return 0;
}

static int teardown(void** state) {
  free(tool);
  free(archive);
  free(code_object);
  free(fat);
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

/* ---- resolve ------------------------------------------------------------- */

static void test_resolve_arch_refuses_what_is_no_gpu_target(void** state) {
  (void)state;
  char *out, *err;
  assert_int_equal(KP(&out, &err, "resolve", "--kernel", "lib/libx.so",
                      "--search-path", archive, "--arch", "gfx9000"),
                   2);
  assert_string_equal(out, "");
  assert_string_equal(err,
                      "kpack resolve: --arch 'gfx9000': not a GPU target: "
                      "'gfx9000' is not a GPU processor kpack knows (such as "
                      "gfx90a, gfx942, gfx1100 or gfx9-generic)\n"
                      "Try 'kpack help resolve'.\n");
  free(out);
  free(err);
}

/* ROCM_KPACK_PATH naming an archive with an unescaped ':' in its name:
 * the why: line says what the note says, not "no code for this GPU" (the
 * archive beside is for this very GPU), and no hint contradicts it. */
static void test_resolve_why_agrees_with_its_note_on_a_split_name(
    void** state) {
  (void)state;
  char* named = kt_path(kt_tmp, "r_gfx90a:xnack-.kpack");
  assert_int_equal(link(archive, named), 0);
  assert_int_equal(setenv("ROCM_KPACK_PATH", named, 1), 0);
  char *out, *want;
  int rc = KP(&out, NULL, "resolve", "--kernel", "lib/libx.so", "--arch",
              "gfx90a:xnack-");
  unsetenv("ROCM_KPACK_PATH");
  assert_int_equal(rc, 1);
  assert_true(asprintf(&want,
                       "\nRESULT   KPACK_ERROR_ARCHIVE_NOT_FOUND (no archive "
                       "could be opened)\n"
                       "why:     '%s' is there, but ROCM_KPACK_PATH split its "
                       "name at the ':': write that ':' as '\\:'\n",
                       named) > 0);
  size_t n = strlen(out), w = strlen(want);
  if (n < w || strcmp(out + n - w, want) != 0)
    fail_msg("the output does not end with\n%s\nbut reads\n%s", want, out);
  kt_assert_contains(out, "note     ROCM_KPACK_PATH: ");
  free(want);
  free(out);
  unlink(named);
  free(named);
}

static void test_resolve_output_failure_gives_the_system_reason(void** state) {
  (void)state;
  char* dest = kt_path(kt_tmp, "no-such-dir/k.hsaco");
  char *err, *want;
  assert_int_equal(
      KP(NULL, &err, "resolve", "--kernel", "lib/libx.so", "--search-path",
         archive, "--arch", "gfx1100", "-o", dest),
      1);
  assert_true(asprintf(&want,
                       "kpack: %s: cannot write: No such file or directory\n",
                       dest) > 0);
  assert_string_equal(err, want);
  free(want);
  free(err);
  free(dest);
}

/* ---- inputs that are no archive ------------------------------------------ */

/* list and list --kernels of a code object or a fat binary say what works
 * on it, and print no empty table. */
static void test_list_of_what_is_no_archive_points_at_what_works(void** state) {
  (void)state;
  char *out, *err, *want;
  assert_int_equal(KP(&out, &err, "list", code_object), 1);
  assert_string_equal(out, "");
  assert_true(asprintf(&want,
                       "kpack: %s: an AMDGPU code object, not a kpack "
                       "archive: `kpack info %s` shows its kernels\n",
                       code_object, code_object) > 0);
  assert_string_equal(err, want);
  free(out);
  free(err);
  assert_int_equal(KP(&out, &err, "list", "--kernels", code_object), 1);
  assert_string_equal(out, "");
  assert_string_equal(err, want);
  free(want);
  free(out);
  free(err);
  assert_int_equal(KP(&out, &err, "list", "--kernels", fat), 1);
  assert_string_equal(out, "");
  assert_true(asprintf(&want,
                       "kpack: %s: a HIP host binary, not a kpack archive: "
                       "`kpack list %s` lists its code objects; for their GPU "
                       "kernels, pack them first (kpack create -o x.kpack "
                       "--fatbin %s)\n",
                       fat, fat, fat) > 0);
  assert_string_equal(err, want);
  free(want);
  free(out);
  free(err);
}

static void test_diff_of_host_binaries_points_at_create_fatbin(void** state) {
  (void)state;
  char *out, *err, *want;
  assert_int_equal(KP(&out, &err, "diff", fat, fat), 2);
  assert_string_equal(out, "");
  assert_true(asprintf(&want,
                       "kpack: %s: a HIP host binary, not a kpack archive: "
                       "pack the device code of each first (kpack create -o "
                       "a.kpack --fatbin %s) and compare the archives\n",
                       fat, fat) > 0);
  assert_string_equal(err, want);
  free(want);
  free(out);
  free(err);
}

/* info takes -C as list --kernels does. */
static void test_info_demangles_a_code_objects_kernels(void** state) {
  (void)state;
  char* out;
  assert_int_equal(KP(&out, NULL, "info", "-C", code_object), 0);
  kt_assert_contains(out, "  gemm(float*, int)\n");
  free(out);
  assert_int_equal(KP(&out, NULL, "info", "--json", "--demangle", code_object),
                   0);
  kt_assert_contains(out, "\"name\": \"_Z4gemmPfi\"");
  kt_assert_contains(out, "\"demangled\": \"gemm(float*, int)\"");
  free(out);
}

/* ---- the command line ---------------------------------------------------- */

static void test_a_mistyped_command_gets_the_likely_one(void** state) {
  (void)state;
  char* err;
  assert_int_equal(KP(NULL, &err, "lst", archive), 2);
  assert_string_equal(err,
                      "kpack: no such command 'lst'; did you mean 'list'? "
                      "(see 'kpack help')\n");
  free(err);
  assert_int_equal(KP(NULL, &err, "help", "extr"), 2);
  assert_string_equal(err,
                      "kpack: no such command 'extr'; did you mean 'extract'? "
                      "(see 'kpack help')\n");
  free(err);
  assert_int_equal(KP(NULL, &err, "frobnicate"), 2);
  assert_string_equal(err,
                      "kpack: no such command 'frobnicate' (see 'kpack "
                      "help')\n");
  free(err);
}

/* What `kpack ARGS` writes to a terminal (a pseudo-terminal from script),
 * and its exit status. */
static int on_terminal(const char* args, char** out) {
  char* cmd;
  assert_true(asprintf(&cmd, "'%s' %s", tool, args) > 0);
  const char* argv[] = {"-qec", cmd, "/dev/null", NULL};
  int rc = kt_run_args("script", argv, 60, out, NULL);
  free(cmd);
  return rc;
}

/* cat refuses to write binary bytes to a terminal, as gzip and zstd do,
 * unless -f; a pipe or a file is fine. */
static void test_cat_to_a_terminal_needs_f(void** state) {
  (void)state;
  char *args, *out;
  assert_true(asprintf(&args, "cat '%s' 'lib/libx.so#0' gfx1100", archive) > 0);
  assert_int_equal(on_terminal(args, &out), 1);
  assert_string_equal(out,
                      "kpack: cat: standard output is a terminal: redirect the "
                      "kernel's bytes to a file (> k.hsaco) or a pipe, or give "
                      "-f to write them to the terminal anyway\r\n");
  free(out);
  free(args);
  assert_true(asprintf(&args, "cat -f '%s' 'lib/libx.so#0' gfx1100 | wc -c",
                       archive) > 0);
  assert_int_equal(on_terminal(args, &out), 0);
  assert_string_equal(out, "3000\r\n");
  free(out);
  free(args);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_arch_declares_only_arches_holding_kernels),
      cmocka_unit_test(test_create_arch_refuses_what_is_no_gpu_target),
      cmocka_unit_test(test_extract_arch_that_keeps_nothing_is_an_error),
      cmocka_unit_test(test_resolve_arch_refuses_what_is_no_gpu_target),
      cmocka_unit_test(test_resolve_why_agrees_with_its_note_on_a_split_name),
      cmocka_unit_test(test_resolve_output_failure_gives_the_system_reason),
      cmocka_unit_test(test_list_of_what_is_no_archive_points_at_what_works),
      cmocka_unit_test(test_diff_of_host_binaries_points_at_create_fatbin),
      cmocka_unit_test(test_info_demangles_a_code_objects_kernels),
      cmocka_unit_test(test_a_mistyped_command_gets_the_likely_one),
      cmocka_unit_test(test_cat_to_a_terminal_needs_f),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
