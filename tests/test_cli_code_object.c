/* SPDX-License-Identifier: MIT
 *
 * The kpack tool on what is inside code objects: `info` on a code object
 * file (text, --json, --metadata), `list --kernels` over archives, and
 * `verify`'s check of each code object's own target against the arch it is
 * filed under, and the `kernels` and `metadata.json` files `extract` writes
 * beside them. Code objects come from tests/fixture_code_object.h and from
 * Debian's librocrand1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_code_object.h"
#include "support.h"

static char* tool;

static int setup(void** state) {
  kt_tmp_setup(state);
  tool = kt_program("kpack");
  return 0;
}

static int teardown(void** state) {
  free(tool);
  return kt_tmp_teardown(state);
}

/* kpack ARGS...: its exit status, stdout and stderr (either may be NULL). */
#define KP(out, err, ...) \
  kt_run_args(tool, (const char* const[]){__VA_ARGS__, NULL}, 60, out, err)

static size_t count_lines(const char* text) {
  size_t n = 0;
  for (; *text; text++)
    n += *text == '\n';
  return n;
}

static const fx_co_kernel gfx90a_kernels[] = {
    {"gemm_f32", 128, 96, 64, 16384, 272, 96, 64, 256, 3, 1, 0},
    {"_Z6reducePfi", 24, 18, 0, 0, 0, 16, 32, 1024, 0, 0,
     KPACK_CO_AGPR_COUNT | KPACK_CO_VGPR_SPILL_COUNT |
         KPACK_CO_SGPR_SPILL_COUNT},
};
static const fx_co_kernel gfx942_kernels[] = {
    {"gemm_f16", 256, 102, 128, 65536, 0, 104, 64, 512, 0, 0, 0},
    {"_Z6reducePfi", 20, 16, 0, 0, 0, 16, 64, 1024, 0, 0, 0},
    {"scale", 8, 10, 0, 0, 0, 24, 64, 256, 0, 0, 0},
};

static fx_buf gfx90a_object(void) {
  return fx_code_object_for(
      FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
      "amdgcn-amd-amdhsa--gfx90a:xnack-", gfx90a_kernels, 2);
}

static fx_buf gfx942_object(void) {
  return fx_code_object_for(FX_MACH_GFX942, KPACK_FEATURE_ANY,
                            KPACK_FEATURE_ANY, "amdgcn-amd-amdhsa--gfx942",
                            gfx942_kernels, 3);
}

static char* write_object(const char* name, const fx_buf* object) {
  char* path = kt_path(kt_tmp, name);
  kt_write_file(path, object->data, object->size);
  return path;
}

/* lib/libgemm.so#0 for gfx90a:xnack- and gfx942. */
static char* gemm_archive(const char* name) {
  fx_buf a = gfx90a_object(), b = gfx942_object();
  static const char* arches[] = {"gfx90a:xnack-", "gfx942"};
  kt_kernel k[] = {{"lib/libgemm.so#0", "gfx90a:xnack-", a.data, a.size},
                   {"lib/libgemm.so#0", "gfx942", b.data, b.size}};
  char* path = kt_path(kt_tmp, name);
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 2, k, 2);
  fx_free(&a);
  fx_free(&b);
  return path;
}

/* ---- info
 * ---------------------------------------------------------------------
 */

static void test_info_shows_target_version_and_a_row_per_kernel(void** state) {
  (void)state;
  fx_buf object = gfx90a_object();
  char* path = write_object("k.hsaco", &object);
  char *out, *err;
  assert_int_equal(KP(&out, &err, "info", path), 0);
  assert_string_equal(err, "");
  kt_assert_contains(out, "code object:  AMDGPU, version 5, e_flags 0x63f\n");
  kt_assert_contains(out, "target:       gfx90a:xnack-\n");
  kt_assert_contains(out, "processor:    gfx90a (xnack off, sramecc any)\n");
  kt_assert_contains(out, "metadata:     amdgcn-amd-amdhsa--gfx90a:xnack-, ");
  kt_assert_contains(out, "kernels:      2\n");
  kt_assert_contains(out,
                     "VGPR  SGPR  AGPR    LDS  SCRATCH  WAVE    WG  KERNARG  "
                     "KERNEL\n");
  kt_assert_contains(out,
                     " 128    96    64  16384      272    64   256       96  "
                     "gemm_f32\n");
  kt_assert_contains(out,
                     "  24    18     -      0        0    32  1024       16  "
                     "_Z6reducePfi\n");
  free(out);
  free(err);
  /* Archives and code objects mix in one call. */
  char* archive = gemm_archive("gemm.kpack");
  assert_int_equal(KP(&out, NULL, "info", archive, path), 0);
  kt_assert_contains(out, "compression:  zstd-per-kernel\n");
  kt_assert_contains(out, "target:       gfx90a:xnack-\n");
  free(out);
  free(archive);
  free(path);
  fx_free(&object);
}

static void test_info_json_describes_every_kernel(void** state) {
  (void)state;
  fx_buf object = gfx90a_object();
  char* path = write_object("k.hsaco", &object);
  char* out;
  assert_int_equal(KP(&out, NULL, "info", "--json", path), 0);
  kt_assert_contains(out,
                     "\"code_object_version\": 5, \"e_flags\": 1599, "
                     "\"target\": \"gfx90a:xnack-\", \"processor\": "
                     "\"gfx90a\", \"xnack\": \"off\", \"sramecc\": \"any\", "
                     "\"metadata_target\": "
                     "\"amdgcn-amd-amdhsa--gfx90a:xnack-\"");
  kt_assert_contains(
      out,
      "{\"name\": \"gemm_f32\", \"symbol\": \"gemm_f32.kd\", \"vgpr_count\": "
      "128, \"sgpr_count\": 96, \"agpr_count\": 64, "
      "\"group_segment_fixed_size\": 16384, \"private_segment_fixed_size\": "
      "272, \"kernarg_segment_size\": 96, \"wavefront_size\": 64, "
      "\"max_flat_workgroup_size\": 256, \"vgpr_spill_count\": 3, "
      "\"sgpr_spill_count\": 1}");
  kt_assert_contains(out, "\"agpr_count\": null");
  assert_true(out[0] == '[' && strcmp(out + strlen(out) - 3, "\n]\n") == 0);
  free(out);
  free(path);
  fx_free(&object);
}

static void test_info_metadata_prints_the_note_as_kpackfs_does(void** state) {
  (void)state;
  fx_buf object = gfx942_object();
  char* path = write_object("k.hsaco", &object);
  kpack_code_object_t* co;
  char *json, *want, *out, *err;
  size_t len;
  assert_int_equal(kpack_code_object_parse(object.data, object.size, &co),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_code_object_metadata_json(co, true, &json, &len),
                   KPACK_SUCCESS);
  assert_true(asprintf(&want, "%s\n", json) > 0);
  assert_int_equal(KP(&out, NULL, "info", "--metadata", path), 0);
  assert_string_equal(out, want);
  free(out);
  free(want);
  free(json);
  kpack_code_object_free(co);

  /* No note: null. */
  fx_co_spec bare = {.e_flags = 0x041};
  fx_buf plain = fx_code_object(&bare);
  char* bare_path = write_object("bare.hsaco", &plain);
  assert_int_equal(KP(&out, NULL, "info", "--metadata", bare_path), 0);
  assert_string_equal(out, "null\n");
  free(out);
  assert_int_equal(KP(&out, NULL, "info", bare_path), 0);
  kt_assert_contains(out, "metadata:     none (no NT_AMDGPU_METADATA note)\n");
  kt_assert_contains(out, "kernels:      0\n");
  free(out);

  /* One code object only. */
  char* archive = gemm_archive("gemm.kpack");
  assert_int_equal(KP(NULL, &err, "info", "--metadata", archive), 1);
  kt_assert_contains(err, "not an AMDGPU code object");
  free(err);
  assert_int_equal(KP(NULL, &err, "info", "--metadata", path, bare_path), 2);
  kt_assert_contains(err, "--metadata takes one code object FILE");
  free(err);
  free(archive);
  free(bare_path);
  fx_free(&plain);
  free(path);
  fx_free(&object);
}

static void test_info_on_a_broken_code_object_names_file_and_cause(
    void** state) {
  (void)state;
  /* A kernel map without ".name". */
  static const uint8_t note[] = {0x81, 0xae, 'a', 'm', 'd',  'h',
                                 's',  'a',  '.', 'k', 'e',  'r',
                                 'n',  'e',  'l', 's', 0x91, 0x80};
  fx_co_note n = {NULL, 0, note, sizeof(note)};
  fx_co_spec spec = {.e_flags = 0x63f, .notes = &n, .note_count = 1};
  fx_buf object = fx_code_object(&spec);
  char* path = write_object("broken.hsaco", &object);
  char *out, *err, *want;
  assert_int_equal(KP(&out, &err, "info", path), 1);
  assert_string_equal(out, "");
  assert_true(asprintf(&want,
                       "kpack: %s: KPACK_ERROR_INVALID_METADATA (metadata note "
                       "of the wrong shape)\n",
                       path) > 0);
  assert_string_equal(err, want);
  free(want);
  free(out);
  free(err);
  free(path);
  fx_free(&object);
}

/* ---- list --kernels ------------------------------------------------------ */

static void test_list_kernels_has_a_row_per_binary_arch_and_kernel(
    void** state) {
  (void)state;
  char* archive = gemm_archive("gemm.kpack");
  char* out;
  assert_int_equal(KP(&out, NULL, "list", "--kernels", archive), 0);
  kt_assert_contains(
      out,
      "BINARY            ARCH           VGPR  SGPR  AGPR    LDS  "
      "SCRATCH  WAVE    WG  KERNARG  KERNEL\n");
  kt_assert_contains(
      out,
      "lib/libgemm.so#0  gfx90a:xnack-   128    96    64  16384  "
      "    272    64   256       96  gemm_f32\n");
  kt_assert_contains(
      out,
      "lib/libgemm.so#0  gfx942          256   102   128  65536  "
      "      0    64   512      104  gemm_f16\n");
  kt_assert_contains(out, "5 kernels in 2 code objects\n");
  assert_int_equal(count_lines(out), 7);
  free(out);

  /* --kernel GLOB implies --kernels; several archives add a column. */
  char* again = gemm_archive("again.kpack");
  assert_int_equal(KP(&out, NULL, "list", "--kernel", "gemm_*", "--kernel",
                      "scale", archive, again),
                   0);
  kt_assert_contains(out, "ARCHIVE");
  assert_null(strstr(out, "_Z6reducePfi"));
  kt_assert_contains(out, "6 kernels in 4 code objects\n");
  free(out);
  free(again);
  free(archive);
}

static void test_list_kernels_json_lists_every_field(void** state) {
  (void)state;
  char* archive = gemm_archive("gemm.kpack");
  char* out;
  assert_int_equal(KP(&out, NULL, "list", "--kernels", "--json", "--kernel",
                      "_Z6*", archive),
                   0);
  kt_assert_contains(out,
                     "\"binary\": \"lib/libgemm.so#0\", \"arch\": "
                     "\"gfx90a:xnack-\", \"target\": \"gfx90a:xnack-\", "
                     "\"name\": \"_Z6reducePfi\", \"symbol\": "
                     "\"_Z6reducePfi.kd\", \"vgpr_count\": 24, "
                     "\"sgpr_count\": 18, \"agpr_count\": null");
  kt_assert_contains(out, "\"arch\": \"gfx942\", \"target\": \"gfx942\"");
  assert_int_equal(count_lines(out), 4); /* [, two objects, ] */
  free(out);
  free(archive);
}

static void test_list_kernels_reports_unreadable_code_objects_and_goes_on(
    void** state) {
  (void)state;
  fx_buf good = gfx942_object();
  void* junk = kt_pattern(3000, 5);
  kt_kernel k[] = {{"lib/a.so#0", "gfx90a", junk, 3000},
                   {"lib/b.so#0", "gfx942", good.data, good.size}};
  char* archive = kt_path(kt_tmp, "mixed.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_NOOP, NULL, 0, k, 2);
  char *out, *err, *want;
  assert_int_equal(KP(&out, &err, "list", "--kernels", archive), 1);
  assert_true(asprintf(&want,
                       "kpack: %s: lib/a.so#0 gfx90a: "
                       "KPACK_ERROR_INVALID_FORMAT (not an AMDGPU code "
                       "object, or its ELF tables or notes are cut)\n",
                       archive) > 0);
  assert_string_equal(err, want);
  kt_assert_contains(out, "3 kernels in 1 code object\n");
  free(want);
  free(out);
  free(err);
  free(archive);
  free(junk);
  fx_free(&good);
}

/* ---- verify -------------------------------------------------------------- */

static void test_verify_names_a_mislabelled_code_object(void** state) {
  (void)state;
  fx_buf right = gfx90a_object();
  fx_buf gfx908 =
      fx_code_object_for(FX_MACH_GFX908, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx908:xnack-", gfx90a_kernels, 1);
  fx_buf any = fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_ANY,
                                  KPACK_FEATURE_ANY, NULL, gfx90a_kernels, 1);
  static const char* arches[] = {"gfx90a:xnack-", "gfx90a", "gfx942"};
  kt_kernel k[] = {
      {"lib/ok.so#0", "gfx90a:xnack-", right.data, right.size},
      /* runs with xnack on or off: fine under any gfx90a arch */
      {"lib/ok.so#0", "gfx90a", any.data, any.size},
      /* the mislabelled one */
      {"lib/bad.so#0", "gfx90a:xnack-", gfx908.data, gfx908.size},
  };
  char* archive = kt_path(kt_tmp, "mislabelled.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 3, k, 3);
  char *out, *want;
  assert_int_equal(KP(&out, NULL, "verify", archive), 1);
  assert_true(asprintf(&want,
                       "%s: lib/bad.so#0 gfx90a:xnack-: code object built for "
                       "gfx908:xnack- is filed under gfx90a:xnack- (agents the "
                       "loader sends to gfx90a:xnack- cannot all run it)\n",
                       archive) > 0);
  kt_assert_contains(out, want);
  kt_assert_contains(out, "1 problem in 3 kernels\n");
  assert_int_equal(count_lines(out), 2);
  free(want);
  free(out);

  /* An xnack- object under plain gfx90a, which xnack+ agents reach too. */
  kt_kernel loose[] = {{"lib/ok.so#0", "gfx90a", right.data, right.size}};
  char* second = kt_path(kt_tmp, "loose.kpack");
  kt_write_archive(second, KPACK_COMPRESSION_NOOP, arches + 1, 1, loose, 1);
  assert_int_equal(KP(&out, NULL, "verify", "-q", second), 1);
  kt_assert_contains(out,
                     ": code object built for gfx90a:xnack- is filed under "
                     "gfx90a (");
  free(out);
  free(second);
  free(archive);
  fx_free(&right);
  fx_free(&gfx908);
  fx_free(&any);
}

/* A v6 generic code object (gfx9-generic, generic version 1) filed under a
 * concrete processor of its family is fine; under another processor, or
 * without a generic version, it is a problem. */
static fx_buf generic_object(uint32_t e_flags, const char* target) {
  fx_buf meta = fx_co_metadata(target, 6, gfx90a_kernels, 1);
  fx_co_note n = {NULL, 0, meta.data, meta.size};
  fx_co_spec spec = {
      .e_flags = e_flags, .version = 6, .notes = &n, .note_count = 1};
  fx_buf image = fx_code_object(&spec);
  fx_free(&meta);
  return image;
}

static void test_verify_accepts_generic_code_objects_under_their_family(
    void** state) {
  (void)state;
  fx_buf v1 =
      generic_object(0x01000251, "amdgcn-amd-amdhsa--gfx9-generic:xnack-");
  fx_buf v0 =
      generic_object(0x00000251, "amdgcn-amd-amdhsa--gfx9-generic:xnack-");
  static const char* arches[] = {"gfx906:xnack-", "gfx900:xnack-",
                                 "gfx90a:xnack-"};
  kt_kernel good[] = {
      {"lib/g.so#0", "gfx906:xnack-", v1.data, v1.size},
      {"lib/g.so#0", "gfx900:xnack-", v1.data, v1.size},
  };
  char* archive = kt_path(kt_tmp, "generic.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 2, good,
                   2);
  char* out;
  assert_int_equal(KP(&out, NULL, "verify", archive), 0);
  kt_assert_contains(out, ": OK, 2 kernels\n");
  free(out);

  kt_kernel bad[] = {
      {"lib/g.so#0", "gfx90a:xnack-", v1.data, v1.size},
      {"lib/h.so#0", "gfx906:xnack-", v0.data, v0.size},
  };
  char* second = kt_path(kt_tmp, "generic-bad.kpack");
  kt_write_archive(second, KPACK_COMPRESSION_NOOP, arches, 3, bad, 2);
  assert_int_equal(KP(&out, NULL, "verify", second), 1);
  kt_assert_contains(out,
                     "lib/g.so#0 gfx90a:xnack-: code object built for "
                     "gfx9-generic:xnack- is filed under gfx90a:xnack- (");
  kt_assert_contains(out,
                     "lib/h.so#0 gfx906:xnack-: code object built for "
                     "gfx9-generic:xnack- is filed under gfx906:xnack- (");
  kt_assert_contains(out, "2 problems in 2 kernels\n");
  free(out);
  free(second);
  free(archive);
  fx_free(&v1);
  fx_free(&v0);
}

static void test_verify_warns_of_unknown_targets_and_fails_broken_notes(
    void** state) {
  (void)state;
  /* A mach value this kpack does not know, and no amdhsa.target. */
  fx_buf unknown = fx_code_object_for(
      0xfe, KPACK_FEATURE_ANY, KPACK_FEATURE_ANY, NULL, gfx90a_kernels, 1);
  static const uint8_t note[] = {0x90}; /* an array, not a map */
  fx_co_note n = {NULL, 0, note, sizeof(note)};
  fx_co_spec spec = {.e_flags = 0x63f, .notes = &n, .note_count = 1};
  fx_buf broken = fx_code_object(&spec);
  void* junk = kt_pattern(1000, 3); /* not a code object: not checked */
  static const char* arches[] = {"gfx90a:xnack-"};
  kt_kernel k[] = {{"lib/a.so#0", "gfx90a:xnack-", unknown.data, unknown.size},
                   {"lib/b.so#0", "gfx90a:xnack-", broken.data, broken.size},
                   {"lib/c.so#0", "gfx90a:xnack-", junk, 1000}};
  char* archive = kt_path(kt_tmp, "odd.kpack");
  kt_write_archive(archive, KPACK_COMPRESSION_NOOP, arches, 1, k, 3);
  char* out;
  assert_int_equal(KP(&out, NULL, "verify", archive), 1);
  kt_assert_contains(out,
                     "lib/a.so#0 gfx90a:xnack-: warning: cannot tell the "
                     "code object's target (EF_AMDGPU_MACH 0xfe, no "
                     "amdhsa.target)\n");
  kt_assert_contains(out,
                     "lib/b.so#0 gfx90a:xnack-: unreadable code object: "
                     "KPACK_ERROR_INVALID_METADATA (metadata note of the "
                     "wrong shape)\n");
  kt_assert_contains(out, "1 problem in 3 kernels\n");
  assert_int_equal(count_lines(out), 3);
  free(out);
  free(archive);
  free(junk);
  fx_free(&unknown);
  fx_free(&broken);
}

/* ---- real code objects --------------------------------------------------- */

/* `text | c++filt`, c++filt's output. */
static char* cxxfilt(const char* text) {
  char* in = kt_path(kt_tmp, "cxxfilt.in");
  kt_write_file(in, text, strlen(text));
  char* argv[] = {"sh", "-c", "c++filt < \"$0\"", in, NULL};
  char* out;
  assert_int_equal(kt_run(argv, 60, &out, NULL), 0);
  free(in);
  return out;
}

/* -C shows real librocrand kernel names exactly as c++filt demangles them:
 * the demangled table is the mangled one through c++filt (the names are
 * the last column), and --json keeps the mangled name beside. */
static void test_demangled_kernel_names_are_what_cxxfilt_shows(void** state) {
  (void)state;
  char* lib = kt_librocrand();
  char* archive = kt_path(kt_tmp, "rand-demangle.kpack");
  char* input;
  char *mangled, *demangled, *json;
  assert_true(asprintf(&input, "%s=lib/librocrand.so.1", lib) > 0);
  assert_int_equal(
      KP(NULL, NULL, "create", "-o", archive, "-l", "1", "--fatbin", input), 0);
  assert_int_equal(KP(&mangled, NULL, "list", "--kernels", archive), 0);
  assert_int_equal(KP(&demangled, NULL, "list", "--kernels", "-C", archive), 0);
  char* want = cxxfilt(mangled);
  assert_string_equal(demangled, want);
  assert_string_not_equal(demangled, mangled); /* names did change */
  kt_assert_contains(
      demangled,
      "  rocrand_host::detail::init_engines_kernel(rocrand_device::"
      "xorwow_engine*, unsigned int, unsigned long long, unsigned "
      "long long)\n");
  free(want);
  /* --demangle implies --kernels; --json has both names. */
  assert_int_equal(KP(&json, NULL, "list", "--demangle", "--json", "--kernel",
                      "*xorwow_engineEjyy", archive),
                   0);
  kt_assert_contains(
      json,
      "\"name\": \"_ZN12rocrand_host6detailL19init_engines_kernelEPN"
      "14rocrand_device13xorwow_engineEjyy\"");
  kt_assert_contains(
      json,
      "\"demangled\": \"rocrand_host::detail::init_engines_kernel("
      "rocrand_device::xorwow_engine*, unsigned int, unsigned long "
      "long, unsigned long long)\"}");
  free(json);

  /* extract --demangle writes each `kernels` file as c++filt shows it. */
  char* plain = kt_path(kt_tmp, "rand-plain");
  char* shown = kt_path(kt_tmp, "rand-shown");
  assert_int_equal(KP(NULL, NULL, "extract", "-C", plain, archive), 0);
  assert_int_equal(
      KP(NULL, NULL, "extract", "--demangle", "-C", shown, archive), 0);
  static const char* const arches[] = {"gfx1030", "gfx803", "gfx90a:xnack-"};
  for (size_t i = 0; i < 3; i++) {
    char *rel, *a, *b;
    size_t na, nb;
    assert_true(asprintf(&rel, "lib/librocrand.so.1#0/%s/kernels", arches[i]) >
                0);
    char* pa = kt_path(plain, rel);
    char* pb = kt_path(shown, rel);
    a = kt_read_file(pa, &na);
    b = kt_read_file(pb, &nb);
    free(pa);
    free(pb);
    want = cxxfilt(a);
    assert_string_equal(b, want);
    assert_true(nb > 0 && strcmp(a, b) != 0);
    free(want);
    free(a);
    free(b);
    free(rel);
  }
  kt_rmtree(plain);
  kt_rmtree(shown);
  free(plain);
  free(shown);
  free(mangled);
  free(demangled);
  free(input);
  free(archive);
  free(lib);
}

static void test_real_librocrand_kernels_list_and_verify(void** state) {
  (void)state;
  char* lib = kt_librocrand();
  char* archive = kt_path(kt_tmp, "rand.kpack");
  char* input;
  char* out;
  assert_true(asprintf(&input, "%s=lib/librocrand.so.1", lib) > 0);
  assert_int_equal(
      KP(NULL, NULL, "create", "-o", archive, "-l", "1", "--fatbin", input), 0);
  assert_int_equal(KP(&out, NULL, "verify", archive), 0);
  kt_assert_contains(out, ": OK, 7 kernels\n");
  free(out);
  /* 80 kernels in each of the 7 code objects; gfx1030 has no AGPRs. */
  assert_int_equal(KP(&out, NULL, "list", "--kernels", archive), 0);
  kt_assert_contains(out, "560 kernels in 7 code objects\n");
  assert_int_equal(count_lines(out), 562);
  free(out);
  assert_int_equal(KP(&out, NULL, "list", "--kernels", "--kernel",
                      "*xorwow_engineEjyy", archive),
                   0);
  kt_assert_contains(
      out,
      "lib/librocrand.so.1#0  gfx1030          32    44     -  "
      "6144        0    32  256       32  "
      "_ZN12rocrand_host6detailL19init_engines_kernelEPN14rocrand_"
      "device13xorwow_engineEjyy\n");
  kt_assert_contains(out, "7 kernels in 7 code objects\n");
  free(out);

  /* One of them as a file. */
  char* file = kt_path(kt_tmp, "k.hsaco");
  kpack_archive_t a;
  void* code;
  size_t size;
  assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel(a, "lib/librocrand.so.1#0", "gfx906:xnack-",
                                    &code, &size),
                   KPACK_SUCCESS);
  kt_write_file(file, code, size);
  kpack_free_kernel(code);
  kpack_close(a);
  assert_int_equal(KP(&out, NULL, "info", file), 0);
  kt_assert_contains(out, "code object:  AMDGPU, version 4, e_flags 0x62f\n");
  kt_assert_contains(out, "target:       gfx906:xnack-\n");
  kt_assert_contains(out, "processor:    gfx906 (xnack off, sramecc any)\n");
  kt_assert_contains(out, "kernels:      80\n");
  free(out);
  free(file);
  free(input);
  free(archive);
  free(lib);
}

/* ---- extract: the files beside each code object -------------------------- */

/* A whole file as a string; fails the test if it cannot be read. */
static char* read_text(const char* dir, const char* rel) {
  char* path = kt_path(dir, rel);
  size_t size;
  char* data = kt_read_file(path, &size);
  if (data == NULL)
    fail_msg("cannot read %s", path);
  free(path);
  return data;
}

static bool exists_in(const char* dir, const char* rel) {
  char* path = kt_path(dir, rel);
  FILE* f = fopen(path, "rb");
  if (f != NULL)
    fclose(f);
  free(path);
  return f != NULL;
}

/* {"tile": 128}, exactly as stored. */
static const uint8_t tile_map[] = {0x81, 0xa4, 't', 'i', 'l', 'e', 0xcc, 0x80};

/* The gemm code objects, the gfx942 one with tile_map, and 3000 pattern
 * bytes that are no code object under lib/libodd.so#0 gfx90a. */
static char* mixed_archive(const char* name) {
  fx_buf a = gfx90a_object(), b = gfx942_object();
  void* junk = kt_pattern(3000, 5);
  char* path = kt_path(kt_tmp, name);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel(w, "lib/libgemm.so#0",
                                           "gfx90a:xnack-", a.data, a.size),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel_with_metadata(
                       w, "lib/libgemm.so#0", "gfx942", b.data, b.size,
                       tile_map, sizeof tile_map),
                   KPACK_SUCCESS);
  assert_int_equal(
      kpack_writer_add_kernel(w, "lib/libodd.so#0", "gfx90a", junk, 3000),
      KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  fx_free(&a);
  fx_free(&b);
  free(junk);
  return path;
}

#define GEMM90 "lib/libgemm.so#0/gfx90a:xnack-/"
#define GEMM942 "lib/libgemm.so#0/gfx942/"
#define ODD "lib/libodd.so#0/gfx90a/"

static void test_extract_writes_kernels_and_metadata_json_beside_code_objects(
    void** state) {
  (void)state;
  char* archive = mixed_archive("mixed.kpack");
  char* dir = kt_path(kt_tmp, "mixed-tree");
  char* out;
  assert_int_equal(KP(&out, NULL, "extract", "-v", "-C", dir, archive), 0);
  /* -v names every file written: 3 code objects with their 2 text files,
   * and one metadata map. */
  assert_int_equal(count_lines(out), 10);
  kt_assert_contains(out, GEMM942 "toc-metadata.msgpack\n");
  kt_assert_contains(out, ODD "metadata.json\n");
  free(out);

  char* text = read_text(dir, GEMM90 "kernels");
  assert_string_equal(text,
                      "gemm_f32\tvgpr=128 sgpr=96 agpr=64 lds=16384 "
                      "scratch=272 wave=64 wg=256 kernarg=96\n"
                      "_Z6reducePfi\tvgpr=24 sgpr=18 agpr=- lds=0 scratch=0 "
                      "wave=32 wg=1024 kernarg=16\n");
  free(text);
  assert_int_equal(count_lines(text = read_text(dir, GEMM942 "kernels")), 3);
  free(text);
  /* metadata.json is what `kpack info --metadata` prints for the kernel. */
  const char* arches[] = {GEMM90, GEMM942};
  for (int i = 0; i < 2; i++) {
    char rel[128];
    snprintf(rel, sizeof rel, "%skernel.hsaco", arches[i]);
    char* hsaco = kt_path(dir, rel);
    assert_int_equal(KP(&out, NULL, "info", "--metadata", hsaco), 0);
    snprintf(rel, sizeof rel, "%smetadata.json", arches[i]);
    text = read_text(dir, rel);
    assert_string_equal(text, out);
    assert_true(text[0] == '{');
    free(text);
    free(out);
    free(hsaco);
  }
  /* The map, byte for byte, only where the entry has one. */
  char* map_path = kt_path(dir, GEMM942 "toc-metadata.msgpack");
  size_t n;
  void* map = kt_read_file(map_path, &n);
  assert_int_equal(n, sizeof tile_map);
  assert_memory_equal(map, tile_map, n);
  free(map);
  free(map_path);
  assert_false(exists_in(dir, GEMM90 "toc-metadata.msgpack"));
  /* Bytes that are no code object: both files, empty, as a mount shows. */
  text = read_text(dir, ODD "kernels");
  assert_string_equal(text, "");
  free(text);
  text = read_text(dir, ODD "metadata.json");
  assert_string_equal(text, "");
  free(text);
  kt_rmtree(dir);
  free(dir);
  free(archive);
}

static void test_extract_bytes_only_leaves_the_text_files_out(void** state) {
  (void)state;
  char* archive = mixed_archive("bytes.kpack");
  char* full = kt_path(kt_tmp, "bytes-full");
  char* bare = kt_path(kt_tmp, "bytes-bare");
  char* out;
  assert_int_equal(KP(NULL, NULL, "extract", "-C", full, archive), 0);
  assert_int_equal(
      KP(&out, NULL, "extract", "--bytes-only", "-v", "-C", bare, archive), 0);
  assert_int_equal(count_lines(out), 4); /* 3 kernels and the map */
  free(out);
  assert_true(exists_in(bare, GEMM942 "toc-metadata.msgpack"));
  assert_true(exists_in(bare, ODD "kernel.hsaco"));
  assert_false(exists_in(bare, GEMM90 "kernels"));
  assert_false(exists_in(bare, GEMM90 "metadata.json"));
  /* Both trees pack into one archive, the map carried through. */
  char* from_full = kt_path(kt_tmp, "bytes-full.kpack");
  char* from_bare = kt_path(kt_tmp, "bytes-bare.kpack");
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", from_full, full), 0);
  assert_int_equal(KP(NULL, NULL, "create", "-q", "-o", from_bare, bare), 0);
  size_t n1, n2;
  void* x = kt_read_file(from_full, &n1);
  void* y = kt_read_file(from_bare, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(x, y, n1);
  assert_non_null(memmem(y, n2, tile_map, sizeof tile_map));
  free(x);
  free(y);
  free(from_full);
  free(from_bare);
  /* Over an earlier full extraction, -B removes the text files it left. */
  assert_true(exists_in(full, GEMM942 "metadata.json"));
  assert_int_equal(KP(NULL, NULL, "extract", "-B", "-C", full, archive), 0);
  assert_false(exists_in(full, GEMM942 "metadata.json"));
  assert_false(exists_in(full, ODD "kernels"));
  assert_true(exists_in(full, GEMM942 "toc-metadata.msgpack"));
  kt_rmtree(full);
  kt_rmtree(bare);
  free(full);
  free(bare);
  free(archive);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_info_shows_target_version_and_a_row_per_kernel),
      T(test_info_json_describes_every_kernel),
      T(test_info_metadata_prints_the_note_as_kpackfs_does),
      T(test_info_on_a_broken_code_object_names_file_and_cause),
      T(test_list_kernels_has_a_row_per_binary_arch_and_kernel),
      T(test_list_kernels_json_lists_every_field),
      T(test_list_kernels_reports_unreadable_code_objects_and_goes_on),
      T(test_verify_names_a_mislabelled_code_object),
      T(test_verify_accepts_generic_code_objects_under_their_family),
      T(test_verify_warns_of_unknown_targets_and_fails_broken_notes),
      T(test_real_librocrand_kernels_list_and_verify),
      T(test_demangled_kernel_names_are_what_cxxfilt_shows),
      T(test_extract_writes_kernels_and_metadata_json_beside_code_objects),
      T(test_extract_bytes_only_leaves_the_text_files_out),
#undef T
  };
  return cmocka_run_group_tests_name("kpack tool: code objects", tests, NULL,
                                     NULL);
}
