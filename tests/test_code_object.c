/* SPDX-License-Identifier: MIT
 *
 * The code object reader (kpack_code_object.h): code objects built byte by
 * byte (tests/fixture_code_object.h) for every field, every way of finding
 * the note and every malformed case with its status; and the real code
 * objects of Debian's librocrand1, checked against an ELF symbol walk and a
 * msgpack-c decode of the note done here, independently of the reader.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_code_object.h"
#include "support.h"

/* ---- helpers ------------------------------------------------------------- */

/* Parses a copy of exactly `size` bytes, so ASan and valgrind catch any read
 * past the end; checks the handle is NULL on failure. */
static kpack_error_t parse_exact(const void* data, size_t size,
                                 kpack_code_object_t** co) {
  void* copy = malloc(size ? size : 1);
  assert_non_null(copy);
  if (size > 0)
    memcpy(copy, data, size);
  *co = (kpack_code_object_t*)1;
  kpack_error_t err = kpack_code_object_parse(copy, size, co);
  if (err != KPACK_SUCCESS)
    assert_null(*co);
  free(copy); /* the result owns copies of everything */
  return err;
}

static void expect_status(const fx_buf* image, kpack_error_t want) {
  kpack_code_object_t* co;
  kpack_error_t got = parse_exact(image->data, image->size, &co);
  if (got != want)
    fail_msg("parse gave %s, expected %s", kpack_error_string(got),
             kpack_error_string(want));
  kpack_code_object_free(co);
}

/* A code object around one metadata note with these description bytes. */
static fx_buf with_note(const void* desc, size_t size) {
  fx_co_note n = {NULL, 0, desc, size};
  fx_co_spec spec = {.e_flags = fx_co_flags(FX_MACH_GFX90A, KPACK_FEATURE_OFF,
                                            KPACK_FEATURE_ANY),
                     .notes = &n,
                     .note_count = 1};
  return fx_code_object(&spec);
}

static void expect_note_status(const fx_buf* desc, kpack_error_t want) {
  fx_buf image = with_note(desc->data, desc->size);
  expect_status(&image, want);
  fx_free(&image);
}

/* msgpack-c, for notes of the wrong shape. */
typedef struct packing {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} packing;

static void pack_begin(packing* p) {
  msgpack_sbuffer_init(&p->sb);
  msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void pack_str(packing* p, const char* s) {
  msgpack_pack_str(&p->pk, strlen(s));
  msgpack_pack_str_body(&p->pk, s, strlen(s));
}

static fx_buf pack_end(packing* p) {
  fx_buf out = {0};
  fx_put(&out, p->sb.data, p->sb.size);
  msgpack_sbuffer_destroy(&p->sb);
  return out;
}

/* {"amdhsa.kernels": [{".name": "k", <key>: <value packed by fn>}]} */
static fx_buf kernel_with(const char* key, void (*value)(packing*)) {
  packing p;
  pack_begin(&p);
  msgpack_pack_map(&p.pk, 1);
  pack_str(&p, "amdhsa.kernels");
  msgpack_pack_array(&p.pk, 1);
  msgpack_pack_map(&p.pk, 2);
  pack_str(&p, ".name");
  pack_str(&p, "k");
  pack_str(&p, key);
  value(&p);
  return pack_end(&p);
}

static const fx_co_kernel sample[] = {
    {"gemm_f32", 128, 96, 64, 16384, 272, 96, 64, 256, 3, 1, 0},
    {"_Z6reducePfi", 24, 18, 0, 0, 0, 16, 32, 1024, 0, 0, 0},
};

static kpack_code_object_t* parse_ok(const fx_buf* image) {
  kpack_code_object_t* co;
  kpack_error_t err = parse_exact(image->data, image->size, &co);
  if (err != KPACK_SUCCESS)
    fail_msg("parse failed: %s", kpack_error_string(err));
  return co;
}

static void expect_kernel(const kpack_code_object_t* co, size_t index,
                          const fx_co_kernel* want) {
  kpack_co_kernel_t k;
  char symbol[256];
  assert_int_equal(kpack_code_object_get_kernel(co, index, &k), KPACK_SUCCESS);
  assert_string_equal(k.name, want->name);
  snprintf(symbol, sizeof(symbol), "%s.kd", want->name);
  assert_string_equal(k.symbol, want->omit & KPACK_CO_SYMBOL ? "" : symbol);
  const uint64_t got[] = {k.vgpr_count,
                          k.sgpr_count,
                          k.agpr_count,
                          k.group_segment_fixed_size,
                          k.private_segment_fixed_size,
                          k.kernarg_segment_size,
                          k.wavefront_size,
                          k.max_flat_workgroup_size,
                          k.vgpr_spill_count,
                          k.sgpr_spill_count};
  const uint64_t values[] = {want->vgpr,      want->sgpr,    want->agpr,
                             want->lds,       want->scratch, want->kernarg,
                             want->wave,      want->wg,      want->vgpr_spill,
                             want->sgpr_spill};
  for (unsigned i = 0; i < 10; i++) {
    bool present = !(want->omit & (1u << i));
    assert_int_equal(!!(k.present & (1u << i)), present);
    assert_int_equal(got[i], present ? values[i] : 0);
  }
  assert_int_equal(!!(k.present & KPACK_CO_SYMBOL),
                   !(want->omit & KPACK_CO_SYMBOL));
}

/* ---- fields
 * ------------------------------------------------------------------
 */

static void test_every_kernel_field_is_reported(void** state) {
  (void)state;
  fx_buf image =
      fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx90a:xnack-", sample, 2);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_info_t info;
  assert_int_equal(kpack_code_object_get_info(co, &info), KPACK_SUCCESS);
  assert_int_equal(info.version, 5);
  assert_int_equal(info.mach, FX_MACH_GFX90A);
  assert_string_equal(info.processor, "gfx90a");
  assert_string_equal(info.target, "gfx90a:xnack-");
  assert_string_equal(info.metadata_target, "amdgcn-amd-amdhsa--gfx90a:xnack-");
  assert_int_equal(info.xnack, KPACK_FEATURE_OFF);
  assert_int_equal(info.sramecc, KPACK_FEATURE_ANY);
  assert_true(info.has_metadata);
  assert_int_equal(info.kernel_count, 2);
  expect_kernel(co, 0, &sample[0]);
  expect_kernel(co, 1, &sample[1]);
  kpack_co_kernel_t k;
  assert_int_equal(kpack_code_object_get_kernel(co, 2, &k),
                   KPACK_ERROR_INVALID_ARGUMENT);
  kpack_code_object_free(co);
  fx_free(&image);
}

static void test_large_counts_of_every_width_read_back(void** state) {
  (void)state;
  const fx_co_kernel wide[] = {
      {"w", 0x7f, 0xff, 0xffff, 0x10000, 0xffffffffull, 0x100000000ull,
       UINT64_MAX, 1, 2, 3, 0},
  };
  fx_buf image = fx_code_object_for(FX_MACH_GFX942, KPACK_FEATURE_ANY,
                                    KPACK_FEATURE_ON, NULL, wide, 1);
  kpack_code_object_t* co = parse_ok(&image);
  expect_kernel(co, 0, &wide[0]);
  kpack_code_object_free(co);
  fx_free(&image);
}

static void test_missing_optional_keys_read_as_absent(void** state) {
  (void)state;
  const fx_co_kernel sparse[] = {
      {"no_agpr_no_spills", 8, 16, 0, 0, 0, 0, 64, 256, 0, 0,
       KPACK_CO_AGPR_COUNT | KPACK_CO_VGPR_SPILL_COUNT |
           KPACK_CO_SGPR_SPILL_COUNT | KPACK_CO_SYMBOL},
      {"only_a_name", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3ff | KPACK_CO_SYMBOL},
  };
  fx_buf image = fx_code_object_for(FX_MACH_GFX1030, KPACK_FEATURE_UNSUPPORTED,
                                    KPACK_FEATURE_UNSUPPORTED, NULL, sparse, 2);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_info_t info;
  kpack_code_object_get_info(co, &info);
  assert_string_equal(info.metadata_target, ""); /* no amdhsa.target */
  assert_string_equal(info.target, "gfx1030");
  expect_kernel(co, 0, &sparse[0]);
  expect_kernel(co, 1, &sparse[1]);
  kpack_code_object_free(co);
  fx_free(&image);
}

static void test_code_object_without_a_note_has_no_kernels(void** state) {
  (void)state;
  fx_co_spec spec = {.e_flags = fx_co_flags(FX_MACH_GFX908, KPACK_FEATURE_ON,
                                            KPACK_FEATURE_OFF)};
  fx_buf image = fx_code_object(&spec);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_info_t info;
  kpack_code_object_get_info(co, &info);
  assert_false(info.has_metadata);
  assert_int_equal(info.kernel_count, 0);
  assert_string_equal(info.target, "gfx908:sramecc-:xnack+");
  char* json;
  size_t len;
  assert_int_equal(kpack_code_object_metadata_json(co, true, &json, &len),
                   KPACK_SUCCESS);
  assert_string_equal(json, "null");
  assert_int_equal(len, 4);
  free(json);
  kpack_code_object_free(co);
  fx_free(&image);
}

/* Notes of other owners and types come first in the same region, as a
 * linker may put them; the metadata note is found after them. */
static void test_metadata_note_is_found_among_several(void** state) {
  (void)state;
  fx_buf meta = fx_co_metadata("amdgcn-amd-amdhsa--gfx942", 5, sample, 1);
  fx_buf other = fx_co_metadata(NULL, 5, sample, 2);
  static const uint8_t build_id[20] = {1, 2, 3, 4, 5};
  fx_co_note notes[] = {
      {"GNU", 3, build_id, sizeof(build_id)},   /* NT_GNU_BUILD_ID */
      {"AMD", FX_NT_AMDGPU_METADATA, "abc", 3}, /* another owner */
      {"AMDGPU", 33, other.data, other.size},   /* another type */
      {NULL, 0, meta.data, meta.size},          /* the one */
      {NULL, 0, other.data, other.size},        /* a second: ignored */
  };
  for (unsigned align = 4; align <= 8; align += 4) {
    fx_co_spec spec = {.e_flags = fx_co_flags(FX_MACH_GFX942, KPACK_FEATURE_ANY,
                                              KPACK_FEATURE_ANY),
                       .notes = notes,
                       .note_count = 5,
                       .align = align};
    fx_buf image = fx_code_object(&spec);
    kpack_code_object_t* co = parse_ok(&image);
    kpack_code_object_info_t info;
    kpack_code_object_get_info(co, &info);
    assert_int_equal(info.kernel_count, 1);
    assert_int_equal(info.metadata_size, meta.size);
    assert_string_equal(info.metadata_target, "amdgcn-amd-amdhsa--gfx942");
    expect_kernel(co, 0, &sample[0]);
    kpack_code_object_free(co);
    fx_free(&image);
  }
  fx_free(&meta);
  fx_free(&other);
}

/* The note region ends the file and the last description is not padded:
 * every description size modulo 4. */
static void test_note_at_the_end_of_the_file(void** state) {
  (void)state;
  fx_buf meta = fx_co_metadata(NULL, 5, sample, 2);
  for (size_t pad = 0; pad < 4; pad++) {
    fx_buf desc = {0};
    fx_put(&desc, meta.data, meta.size);
    for (size_t i = 0; i < pad; i++)
      fx_le(&desc, 0xc0, 1); /* trailing bytes after the map: ignored */
    fx_co_note n = {NULL, 0, desc.data, desc.size};
    fx_co_layout layout;
    fx_co_spec spec = {
        .notes = &n, .note_count = 1, .notes_at_end = true, .layout = &layout};
    fx_buf image = fx_code_object(&spec);
    assert_int_equal(layout.desc_at[0] + desc.size, image.size);
    kpack_code_object_t* co = parse_ok(&image);
    kpack_code_object_info_t info;
    kpack_code_object_get_info(co, &info);
    assert_int_equal(info.kernel_count, 2);
    expect_kernel(co, 1, &sample[1]);
    kpack_code_object_free(co);
    fx_free(&image);
    fx_free(&desc);
  }
  fx_free(&meta);
}

static void test_note_is_found_through_segment_or_section_alone(void** state) {
  (void)state;
  fx_buf meta = fx_co_metadata(NULL, 5, sample, 2);
  fx_co_note n = {NULL, 0, meta.data, meta.size};
  for (int which = 0; which < 2; which++) {
    fx_co_spec spec = {.notes = &n,
                       .note_count = 1,
                       .no_segment = which == 0,
                       .no_section = which == 1};
    fx_buf image = fx_code_object(&spec);
    kpack_code_object_t* co = parse_ok(&image);
    kpack_code_object_info_t info;
    kpack_code_object_get_info(co, &info);
    assert_int_equal(info.kernel_count, 2);
    kpack_code_object_free(co);
    fx_free(&image);
  }
  /* Neither: no way to find it, so no kernels. */
  fx_co_spec hidden = {
      .notes = &n, .note_count = 1, .no_segment = true, .no_section = true};
  fx_buf image = fx_code_object(&hidden);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_info_t info;
  kpack_code_object_get_info(co, &info);
  assert_int_equal(info.kernel_count, 0);
  kpack_code_object_free(co);
  fx_free(&image);
  fx_free(&meta);
}

static void test_unknown_keys_and_non_string_keys_are_ignored(void** state) {
  (void)state;
  packing p;
  pack_begin(&p);
  msgpack_pack_map(&p.pk, 4);
  msgpack_pack_uint8(&p.pk, 7); /* a non-str key */
  msgpack_pack_array(&p.pk, 2);
  msgpack_pack_nil(&p.pk);
  msgpack_pack_double(&p.pk, 1.5);
  pack_str(&p, "amdhsa.printf");
  msgpack_pack_array(&p.pk, 1);
  pack_str(&p, "1:1:4:%d\\n");
  pack_str(&p, "amdhsa.kernels");
  msgpack_pack_array(&p.pk, 1);
  msgpack_pack_map(&p.pk, 4);
  msgpack_pack_true(&p.pk); /* a non-str key in a kernel */
  msgpack_pack_false(&p.pk);
  pack_str(&p, ".name");
  pack_str(&p, "k");
  pack_str(&p, ".future_field");
  msgpack_pack_map(&p.pk, 1);
  pack_str(&p, "x");
  msgpack_pack_bin(&p.pk, 3);
  msgpack_pack_bin_body(&p.pk, "abc", 3);
  pack_str(&p, ".vgpr_count");
  msgpack_pack_int64(&p.pk, 9); /* a non-negative signed encoding */
  pack_str(&p, "amdhsa.target");
  pack_str(&p, "amdgcn-amd-amdhsa--gfx90a:xnack-");
  fx_buf desc = pack_end(&p);
  fx_buf image = with_note(desc.data, desc.size);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_co_kernel_t k;
  assert_int_equal(kpack_code_object_get_kernel(co, 0, &k), KPACK_SUCCESS);
  assert_string_equal(k.name, "k");
  assert_int_equal(k.vgpr_count, 9);
  assert_int_equal(k.present, KPACK_CO_VGPR_COUNT);
  kpack_code_object_free(co);
  fx_free(&image);
  fx_free(&desc);
}

/* ---- targets
 * -----------------------------------------------------------------
 */

typedef struct target_case {
  unsigned version;
  uint32_t e_flags;
  const char* metadata_target;
  const char* target;
  kpack_feature_t xnack, sramecc;
} target_case;

static void test_target_follows_each_code_object_version(void** state) {
  (void)state;
  static const target_case cases[] = {
      /* v4+: two-bit fields */
      {5, 0x63f, NULL, "gfx90a:xnack-", KPACK_FEATURE_OFF, KPACK_FEATURE_ANY},
      {4, 0x73f, NULL, "gfx90a:xnack+", KPACK_FEATURE_ON, KPACK_FEATURE_ANY},
      {6, 0xf4c, NULL, "gfx942:sramecc+:xnack+", KPACK_FEATURE_ON,
       KPACK_FEATURE_ON},
      {5, 0x94c, NULL, "gfx942:sramecc-", KPACK_FEATURE_ANY, KPACK_FEATURE_OFF},
      {5, 0x041, NULL, "gfx1100", KPACK_FEATURE_UNSUPPORTED,
       KPACK_FEATURE_UNSUPPORTED},
      {6, 0x01000251, NULL, "gfx9-generic:xnack-", KPACK_FEATURE_OFF,
       KPACK_FEATURE_UNSUPPORTED},
      /* v3: one bit each, for processors that have the feature */
      {3, 0x13f, NULL, "gfx90a:sramecc-:xnack+", KPACK_FEATURE_ON,
       KPACK_FEATURE_OFF},
      {3, 0x22f, NULL, "gfx906:sramecc+:xnack-", KPACK_FEATURE_OFF,
       KPACK_FEATURE_ON},
      {3, 0x036, NULL, "gfx1030", KPACK_FEATURE_UNSUPPORTED,
       KPACK_FEATURE_UNSUPPORTED},
      /* v2: an xnack bit only; the processor is in a note not read here */
      {2, 0x001, NULL, "", KPACK_FEATURE_ON, KPACK_FEATURE_UNSUPPORTED},
      {2, 0x000, "amdgcn-amd-amdhsa--gfx803", "gfx803", KPACK_FEATURE_OFF,
       KPACK_FEATURE_UNSUPPORTED},
      /* An unknown mach value: the note names the target. */
      {5, 0x0fe, "amdgcn-amd-amdhsa--gfx1999:xnack-", "gfx1999:xnack-",
       KPACK_FEATURE_UNSUPPORTED, KPACK_FEATURE_UNSUPPORTED},
      {5, 0x0fe, NULL, "", KPACK_FEATURE_UNSUPPORTED,
       KPACK_FEATURE_UNSUPPORTED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const target_case* c = &cases[i];
    fx_buf meta = fx_co_metadata(c->metadata_target, c->version, sample, 1);
    fx_co_note n = {NULL, 0, meta.data, meta.size};
    fx_co_spec spec = {.e_flags = c->e_flags,
                       .version = c->version,
                       .notes = &n,
                       .note_count = 1};
    fx_buf image = fx_code_object(&spec);
    kpack_code_object_t* co = parse_ok(&image);
    kpack_code_object_info_t info;
    kpack_code_object_get_info(co, &info);
    if (strcmp(info.target, c->target) != 0)
      fail_msg("case %zu: target '%s', expected '%s'", i, info.target,
               c->target);
    assert_int_equal(info.version, c->version);
    assert_int_equal(info.xnack, c->xnack);
    assert_int_equal(info.sramecc, c->sramecc);
    assert_int_equal(info.e_flags, c->e_flags);
    kpack_code_object_free(co);
    fx_free(&image);
    fx_free(&meta);
  }
}

static void test_generic_version_and_processor_are_reported(void** state) {
  (void)state;
  fx_co_spec spec = {.e_flags = 0x02000154, .version = 6};
  fx_buf image = fx_code_object(&spec);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_info_t info;
  kpack_code_object_get_info(co, &info);
  assert_string_equal(info.processor, "gfx11-generic");
  assert_int_equal(info.generic_version, 2);
  kpack_code_object_free(co);
  fx_free(&image);
}

static void test_other_os_abi_has_no_version(void** state) {
  (void)state;
  fx_co_spec spec = {.e_flags = 0x73f, .not_hsa = true};
  fx_buf image = fx_code_object(&spec);
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_info_t info;
  kpack_code_object_get_info(co, &info);
  assert_int_equal(info.version, 0);
  /* No version, no rules for the feature bits: the bare processor. */
  assert_string_equal(info.target, "gfx90a");
  kpack_code_object_free(co);
  fx_free(&image);
}

/* kpack_target_serves(target, arch) for each case. */
typedef struct serve_case {
  const char* target;
  const char* arch;
  bool serves;
} serve_case;

static void expect_serves(const serve_case* cases, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (kpack_target_serves(cases[i].target, cases[i].arch) != cases[i].serves)
      fail_msg("'%s' under '%s': expected %s", cases[i].target, cases[i].arch,
               cases[i].serves ? "serves" : "does not serve");
}

static void test_target_serves_only_archs_that_fix_its_features(void** state) {
  (void)state;
  static const serve_case cases[] = {
      {"gfx90a:xnack-", "gfx90a:xnack-", true},
      {"gfx90a:xnack-", "gfx90a:sramecc+:xnack-", true},
      {"gfx90a:xnack-", "gfx90a:xnack+", false},
      {"gfx90a:xnack-", "gfx90a", false}, /* xnack+ agents reach it */
      {"gfx908:xnack-", "gfx90a:xnack-", false},
      {"gfx90a", "gfx90a", true},
      {"gfx90a", "gfx90a:xnack+", true},
      {"gfx942:sramecc+:xnack-", "gfx942:xnack-:sramecc+", true},
      {"gfx942:sramecc+:xnack-", "gfx942:sramecc+", false},
      {"amdgcn-amd-amdhsa--gfx1030", "gfx1030", true},
      {"gfx1030", "hipv4-amdgcn-amd-amdhsa--gfx1030", true},
      {"gfx1030", "gfx1031", false},
      {"gfx10", "gfx1030", false},
      {"", "gfx90a", false},
      {"gfx90a", "", false},
      {":xnack-", ":xnack-", false},
  };
  expect_serves(cases, sizeof(cases) / sizeof(cases[0]));
  assert_false(kpack_target_serves(NULL, "gfx90a"));
  assert_false(kpack_target_serves("gfx90a", NULL));
}

/* LLVM's generic-target table: each generic serves its family's concrete
 * processors (features compared as for any target), nothing else. */
static void test_generic_targets_serve_the_processors_they_cover(void** state) {
  (void)state;
  static const serve_case cases[] = {
      {"gfx9-generic", "gfx900", true},
      {"gfx9-generic", "gfx90c", true},
      {"gfx9-generic:xnack-", "gfx906:xnack-", true},
      {"gfx9-generic:xnack-", "gfx906:sramecc+:xnack-", true},
      {"gfx9-generic:xnack-", "gfx906", false}, /* xnack+ agents reach it */
      {"gfx9-generic", "gfx908", false},
      {"gfx9-generic", "gfx90a", false},
      {"gfx9-4-generic:sramecc+:xnack-", "gfx942:sramecc+:xnack-", true},
      {"gfx9-4-generic", "gfx950", true},
      {"gfx9-4-generic", "gfx90a", false},
      {"gfx10-1-generic", "gfx1013", true},
      {"gfx10-1-generic", "gfx1030", false},
      {"gfx10-3-generic", "gfx1030", true},
      {"gfx10-3-generic", "gfx1036", true},
      {"gfx10-3-generic", "gfx1100", false},
      {"gfx11-generic", "gfx1100", true},
      {"gfx11-generic", "gfx1153", true},
      {"gfx11-generic", "gfx1200", false},
      {"gfx12-generic", "gfx1201", true},
      {"gfx12-generic", "gfx1250", false},
      {"amdgcn-amd-amdhsa--gfx11-generic", "gfx1101", true},
      /* a concrete processor never serves its generic, nor another one */
      {"gfx906", "gfx9-generic", false},
      {"gfx9-generic", "gfx9-generic", true},
      {"gfx9-generic", "gfx9-4-generic", false},
  };
  expect_serves(cases, sizeof(cases) / sizeof(cases[0]));
}

/* A parsed generic code object serves its family from the generic version
 * in e_flags; without a version it serves nothing but itself. */
static void test_generic_code_object_serves_by_its_version(void** state) {
  (void)state;
  static const struct {
    uint32_t e_flags;
    const char* arch;
    bool serves;
  } cases[] = {
      {0x01000251, "gfx906:xnack-", true},  /* gfx9-generic:xnack- v1 */
      {0x02000251, "gfx900:xnack-", true},  /* v2 */
      {0x00000251, "gfx906:xnack-", false}, /* no generic version */
      {0x01000251, "gfx90a:xnack-", false},
      {0x01000154, "gfx1103", true}, /* gfx11-generic v1 */
      {0x0100075f, "gfx942:xnack+", true},
      {0x0000073f, "gfx90a:xnack+", true}, /* concrete: version unused */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    fx_co_spec spec = {.e_flags = cases[i].e_flags, .version = 6};
    fx_buf image = fx_code_object(&spec);
    kpack_code_object_t* co = parse_ok(&image);
    kpack_code_object_info_t info;
    kpack_code_object_get_info(co, &info);
    if (kpack_code_object_serves(&info, cases[i].arch) != cases[i].serves)
      fail_msg("case %zu: '%s' v%u under '%s': expected %s", i, info.target,
               info.generic_version, cases[i].arch,
               cases[i].serves ? "serves" : "does not serve");
    kpack_code_object_free(co);
    fx_free(&image);
  }
  assert_false(kpack_code_object_serves(NULL, "gfx906"));
}

/* ---- JSON
 * ----------------------------------------------------------------------
 */

static void test_metadata_json_renders_the_whole_note(void** state) {
  (void)state;
  const fx_co_kernel one[] = {{"k", 1, 2, 0, 0, 0, 0, 64, 256, 0, 0,
                               KPACK_CO_AGPR_COUNT | KPACK_CO_VGPR_SPILL_COUNT |
                                   KPACK_CO_SGPR_SPILL_COUNT}};
  fx_buf image = fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF,
                                    KPACK_FEATURE_ANY, "t", one, 1);
  kpack_code_object_t* co = parse_ok(&image);
  char *pretty, *compact;
  size_t pretty_len, compact_len;
  assert_int_equal(
      kpack_code_object_metadata_json(co, true, &pretty, &pretty_len),
      KPACK_SUCCESS);
  assert_int_equal(
      kpack_code_object_metadata_json(co, false, &compact, &compact_len),
      KPACK_SUCCESS);
  assert_int_equal(strlen(compact), compact_len);
  assert_string_equal(
      compact,
      "{\"amdhsa.kernels\":[{\".args\":[{\".offset\":0,\".size\":8,"
      "\".value_kind\":\"global_buffer\"}],\".group_segment_fixed_size\":0,"
      "\".private_segment_fixed_size\":0,\".kernarg_segment_size\":0,"
      "\".wavefront_size\":64,\".max_flat_workgroup_size\":256,"
      "\".kernarg_segment_align\":8,\".language\":\"OpenCL C\",\".name\":"
      "\"k\",\".symbol\":\"k.kd\",\".vgpr_count\":1,\".sgpr_count\":2,"
      "\".uses_dynamic_stack\":false}],\"amdhsa.target\":\"t\","
      "\"amdhsa.version\":[1,3]}");
  assert_int_equal(strlen(pretty), pretty_len);
  static const char start[] = "{\n  \"amdhsa.kernels\": [\n    {\n";
  assert_true(strncmp(pretty, start, strlen(start)) == 0);
  assert_null(strchr(compact, '\n'));
  free(pretty);
  free(compact);
  assert_int_equal(kpack_code_object_metadata_json(co, true, NULL, &pretty_len),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_code_object_metadata_json(NULL, true, &pretty, &pretty_len),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(pretty);
  kpack_code_object_free(co);
  fx_free(&image);
}

/* ---- the files a code object shows (kpack_co_render) --------------------- */

static kpack_co_render_t render_ok(const void* data, size_t size) {
  kpack_co_render_t r;
  assert_int_equal(kpack_co_render(data, size, &r), KPACK_SUCCESS);
  assert_non_null(r.kernels);
  assert_non_null(r.metadata_json);
  assert_int_equal(strlen(r.kernels), r.kernels_size);
  assert_int_equal(strlen(r.metadata_json), r.metadata_json_size);
  return r;
}

static void test_kernels_text_is_one_line_per_kernel_in_note_order(
    void** state) {
  (void)state;
  fx_buf image =
      fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY,
                         "amdgcn-amd-amdhsa--gfx90a:xnack-", sample, 2);
  kpack_co_render_t r = render_ok(image.data, image.size);
  assert_int_equal(r.status, KPACK_SUCCESS);
  assert_string_equal(r.kernels,
                      "gemm_f32\tvgpr=128 sgpr=96 agpr=64 lds=16384 "
                      "scratch=272 wave=64 wg=256 kernarg=96\n"
                      "_Z6reducePfi\tvgpr=24 sgpr=18 agpr=0 lds=0 scratch=0 "
                      "wave=32 wg=1024 kernarg=16\n");
  assert_string_equal(r.target, "gfx90a:xnack-");
  assert_int_equal(r.kernel_count, 2);
  kpack_co_render_free(&r);
  assert_null(r.kernels); /* zeroed: a second free is harmless */
  kpack_co_render_free(&r);
  kpack_co_render_free(NULL);
  fx_free(&image);
}

static void test_kernels_text_shows_absent_counts_as_a_dash(void** state) {
  (void)state;
  const fx_co_kernel sparse[] = {
      {"no_agpr", 8, 16, 0, 0, 0, 24, 64, 256, 0, 0, KPACK_CO_AGPR_COUNT},
      {"only_a_name", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3ff | KPACK_CO_SYMBOL},
  };
  fx_buf image = fx_code_object_for(FX_MACH_GFX1030, KPACK_FEATURE_UNSUPPORTED,
                                    KPACK_FEATURE_UNSUPPORTED, NULL, sparse, 2);
  kpack_co_render_t r = render_ok(image.data, image.size);
  assert_string_equal(r.kernels,
                      "no_agpr\tvgpr=8 sgpr=16 agpr=- lds=0 scratch=0 wave=64 "
                      "wg=256 kernarg=24\n"
                      "only_a_name\tvgpr=- sgpr=- agpr=- lds=- scratch=- "
                      "wave=- wg=- kernarg=-\n");
  kpack_co_render_free(&r);
  fx_free(&image);
}

static void test_kernel_names_cannot_split_their_line_or_fields(void** state) {
  (void)state;
  const fx_co_kernel odd[] = {
      {"a\tb\\c\nd\re\x01"
       "f\x7fg",
       1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0},
  };
  fx_buf image = fx_code_object_for(FX_MACH_GFX942, KPACK_FEATURE_ANY,
                                    KPACK_FEATURE_ANY, NULL, odd, 1);
  kpack_co_render_t r = render_ok(image.data, image.size);
  assert_string_equal(r.kernels,
                      "a\\tb\\\\c\\nd\\re\\x01f\\x7fg\tvgpr=1 sgpr=2 agpr=3 "
                      "lds=4 scratch=5 wave=7 wg=8 kernarg=6\n");
  kpack_co_render_free(&r);
  fx_free(&image);
}

static void test_escape_name_writes_a_name_as_the_kernels_text_does(
    void** state) {
  (void)state;
  char* escaped;
  assert_int_equal(kpack_co_escape_name("a\tb\\c\nd\re\x01"
                                        "f\x7fg_Z3fooé",
                                        &escaped),
                   KPACK_SUCCESS);
  assert_string_equal(escaped, "a\\tb\\\\c\\nd\\re\\x01f\\x7fg_Z3fooé");
  free(escaped);
  assert_int_equal(kpack_co_escape_name("", &escaped), KPACK_SUCCESS);
  assert_string_equal(escaped, "");
  free(escaped);
  escaped = (char*)"x";
  assert_int_equal(kpack_co_escape_name(NULL, &escaped),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(escaped);
  assert_int_equal(kpack_co_escape_name("a", NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

static void test_metadata_text_is_the_indented_note_and_a_newline(
    void** state) {
  (void)state;
  fx_buf image = fx_code_object_for(FX_MACH_GFX90A, KPACK_FEATURE_OFF,
                                    KPACK_FEATURE_ANY, "t", sample, 2);
  kpack_co_render_t r = render_ok(image.data, image.size);
  kpack_code_object_t* co = parse_ok(&image);
  char* json;
  size_t len;
  assert_int_equal(kpack_code_object_metadata_json(co, true, &json, &len),
                   KPACK_SUCCESS);
  assert_int_equal(r.metadata_json_size, len + 1);
  assert_memory_equal(r.metadata_json, json, len);
  assert_string_equal(r.metadata_json + len, "\n");
  free(json);
  kpack_code_object_free(co);
  kpack_co_render_free(&r);
  fx_free(&image);

  /* Without a note: no kernels and a JSON null, still a code object. */
  fx_co_spec bare = {.e_flags = fx_co_flags(FX_MACH_GFX908, KPACK_FEATURE_ON,
                                            KPACK_FEATURE_OFF)};
  image = fx_code_object(&bare);
  r = render_ok(image.data, image.size);
  assert_int_equal(r.status, KPACK_SUCCESS);
  assert_string_equal(r.kernels, "");
  assert_string_equal(r.metadata_json, "null\n");
  assert_string_equal(r.target, "gfx908:sramecc-:xnack+");
  assert_int_equal(r.kernel_count, 0);
  kpack_co_render_free(&r);
  fx_free(&image);
}

static void expect_empty_render(const void* data, size_t size,
                                kpack_error_t why) {
  kpack_co_render_t r = render_ok(data, size);
  assert_int_equal(r.status, why);
  assert_string_equal(r.kernels, "");
  assert_string_equal(r.metadata_json, "");
  assert_null(r.target);
  assert_int_equal(r.kernel_count, 0);
  kpack_co_render_free(&r);
}

static void test_bytes_that_are_no_code_object_render_empty_files(
    void** state) {
  (void)state;
  void* junk = kt_pattern(5000, 77);
  expect_empty_render(junk, 5000, KPACK_ERROR_INVALID_FORMAT);
  free(junk);
  expect_empty_render(NULL, 0, KPACK_ERROR_INVALID_FORMAT);
  expect_empty_render("", 0, KPACK_ERROR_INVALID_FORMAT);
  /* A code object whose note is cut or of the wrong shape. */
  fx_buf desc = {0};
  fx_put(&desc, "\x81\xa1", 2);
  fx_buf image = with_note(desc.data, desc.size);
  expect_empty_render(image.data, image.size, KPACK_ERROR_MSGPACK_PARSE_FAILED);
  fx_free(&image);
  fx_free(&desc);
  fx_put(&desc, "\x91\x01", 2);
  image = with_note(desc.data, desc.size);
  expect_empty_render(image.data, image.size, KPACK_ERROR_INVALID_METADATA);
  fx_free(&image);
  fx_free(&desc);
}

/* A note the reader accepts but JSON cannot show in bounded space (a map
 * key inside a map key): the kernels still show, metadata.json is empty. */
static void test_note_json_cannot_show_leaves_only_metadata_empty(
    void** state) {
  (void)state;
  packing p;
  pack_begin(&p);
  msgpack_pack_map(&p.pk, 2);
  msgpack_pack_map(&p.pk, 1); /* key {{"x": nil}: nil} */
  msgpack_pack_map(&p.pk, 1);
  pack_str(&p, "x");
  msgpack_pack_nil(&p.pk);
  msgpack_pack_nil(&p.pk);
  msgpack_pack_nil(&p.pk);
  pack_str(&p, "amdhsa.kernels");
  msgpack_pack_array(&p.pk, 1);
  msgpack_pack_map(&p.pk, 2);
  pack_str(&p, ".name");
  pack_str(&p, "k");
  pack_str(&p, ".sgpr_count");
  msgpack_pack_uint8(&p.pk, 5);
  fx_buf desc = pack_end(&p);
  fx_buf image = with_note(desc.data, desc.size);
  kpack_co_render_t r = render_ok(image.data, image.size);
  assert_int_equal(r.status, KPACK_ERROR_MSGPACK_PARSE_FAILED);
  assert_string_equal(r.kernels,
                      "k\tvgpr=- sgpr=5 agpr=- lds=- scratch=- wave=- wg=- "
                      "kernarg=-\n");
  assert_string_equal(r.metadata_json, "");
  assert_string_equal(r.target, "gfx90a:xnack-");
  assert_int_equal(r.kernel_count, 1);
  kpack_co_render_free(&r);
  fx_free(&image);
  fx_free(&desc);
}

static void test_resources_come_in_kernels_file_order(void** state) {
  (void)state;
  static const char* const keys[] = {"vgpr",    "sgpr", "agpr", "lds",
                                     "scratch", "wave", "wg",   "kernarg"};
  const kpack_co_kernel_t k = {.vgpr_count = 1,
                               .sgpr_count = 2,
                               .agpr_count = 3,
                               .group_segment_fixed_size = 4,
                               .private_segment_fixed_size = 5,
                               .wavefront_size = 6,
                               .max_flat_workgroup_size = 7,
                               .kernarg_segment_size = 8,
                               .present = 0x3ff & ~KPACK_CO_AGPR_COUNT};
  assert_int_equal(KPACK_CO_RESOURCE_COUNT, 8);
  for (size_t i = 0; i < KPACK_CO_RESOURCE_COUNT; i++) {
    const char* key;
    uint64_t value = 99;
    bool present = kpack_co_kernel_resource(&k, i, &key, &value);
    assert_string_equal(key, keys[i]);
    assert_int_equal(present, i != 2);
    assert_int_equal(value, i == 2 ? 0 : i + 1);
  }
  const char* key = "x";
  uint64_t value = 99;
  assert_false(kpack_co_kernel_resource(&k, 8, &key, &value));
  assert_null(key);
  assert_int_equal(value, 0);
  assert_false(kpack_co_kernel_resource(NULL, 0, &key, &value));
  assert_false(kpack_co_kernel_resource(&k, 0, NULL, &value));
  kpack_co_render_t r;
  assert_int_equal(kpack_co_render("x", 1, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_co_render(NULL, 1, &r), KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(r.kernels);
}

/* ---- malformed ELF: INVALID_FORMAT --------------------------------------- */

static fx_buf sample_image(fx_co_layout* layout) {
  fx_buf meta = fx_co_metadata(NULL, 5, sample, 2);
  fx_co_note n = {NULL, 0, meta.data, meta.size};
  fx_co_spec spec = {.notes = &n, .note_count = 1, .layout = layout};
  fx_buf image = fx_code_object(&spec);
  fx_free(&meta);
  return image;
}

static void expect_damage(size_t at, uint64_t value, unsigned width,
                          kpack_error_t want) {
  fx_co_layout l;
  fx_buf image = sample_image(&l);
  fx_set_le(&image, at, value, width);
  expect_status(&image, want);
  fx_free(&image);
}

static void test_not_an_amdgpu_elf_is_invalid_format(void** state) {
  (void)state;
  fx_buf image = sample_image(NULL);
  expect_damage(0, 0x464c457e, 4, KPACK_ERROR_INVALID_FORMAT); /* magic */
  expect_damage(4, 1, 1, KPACK_ERROR_INVALID_FORMAT);          /* ELFCLASS32 */
  expect_damage(5, 2, 1, KPACK_ERROR_INVALID_FORMAT);          /* big-endian */
  expect_damage(18, 62, 2, KPACK_ERROR_INVALID_FORMAT);        /* x86-64 */
  for (size_t n = 0; n < 64; n += 7) {
    fx_buf cut = {0};
    fx_put(&cut, image.data, n);
    expect_status(&cut, KPACK_ERROR_INVALID_FORMAT);
    assert_false(kpack_is_code_object(cut.data, cut.size));
    fx_free(&cut);
  }
  assert_true(kpack_is_code_object(image.data, 64));
  assert_false(kpack_is_code_object(NULL, 64));
  fx_free(&image);
}

static void test_header_tables_outside_the_file_are_invalid_format(
    void** state) {
  (void)state;
  fx_co_layout l;
  fx_buf image = sample_image(&l);
  size_t size = image.size;
  fx_free(&image);
  expect_damage(32, size, 8, KPACK_ERROR_INVALID_FORMAT); /* e_phoff */
  expect_damage(32, UINT64_MAX - 8, 8, KPACK_ERROR_INVALID_FORMAT);
  expect_damage(56, 0xfffe, 2, KPACK_ERROR_INVALID_FORMAT);    /* e_phnum */
  expect_damage(54, 32, 2, KPACK_ERROR_INVALID_FORMAT);        /* phentsize */
  expect_damage(40, size - 10, 8, KPACK_ERROR_INVALID_FORMAT); /* e_shoff */
  expect_damage(60, 0x7fff, 2, KPACK_ERROR_INVALID_FORMAT);    /* e_shnum */
  expect_damage(58, 40, 2, KPACK_ERROR_INVALID_FORMAT);        /* shentsize */
  /* PN_XNUM: the count is in section 0, which says 0x10000. */
  image = sample_image(&l);
  fx_set_le(&image, 56, 0xffff, 2);
  fx_set_le(&image, l.shoff + 44, 0x10000, 4);
  expect_status(&image, KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&image, l.shoff + 44, 1, 4); /* the real count: fine */
  kpack_code_object_t* co = parse_ok(&image);
  kpack_code_object_free(co);
  fx_free(&image);
}

static void test_notes_outside_their_region_are_invalid_format(void** state) {
  (void)state;
  fx_co_layout l;
  fx_buf image = sample_image(&l);
  size_t size = image.size;
  fx_free(&image);
  size_t ph = l.phoff, note = l.note_at[0];
  expect_damage(ph + 8, size, 8, KPACK_ERROR_INVALID_FORMAT);  /* p_offset */
  expect_damage(ph + 32, size, 8, KPACK_ERROR_INVALID_FORMAT); /* p_filesz */
  expect_damage(ph + 32, UINT64_MAX, 8, KPACK_ERROR_INVALID_FORMAT);
  expect_damage(note, l.notes_size, 4, KPACK_ERROR_INVALID_FORMAT); /* namesz */
  expect_damage(note, UINT32_MAX, 4, KPACK_ERROR_INVALID_FORMAT);
  expect_damage(note + 4, l.notes_size, 4, KPACK_ERROR_INVALID_FORMAT);
  expect_damage(note + 4, UINT32_MAX, 4, KPACK_ERROR_INVALID_FORMAT);
  /* The section's copy of the region is checked the same way when it is
   * the one used. */
  image = sample_image(&l);
  fx_set_le(&image, l.phoff, 1, 4); /* PT_LOAD: no segment holds notes */
  fx_set_le(&image, l.note_shdr + 32, size, 8);
  expect_status(&image, KPACK_ERROR_INVALID_FORMAT);
  fx_free(&image);
  /* A region too short for a note header is padding, not an error. */
  expect_damage(ph + 32, 11, 8, KPACK_SUCCESS);
}

/* ---- malformed note: MSGPACK_PARSE_FAILED -------------------------------- */

static void test_broken_msgpack_in_the_note_fails_to_parse(void** state) {
  (void)state;
  fx_buf meta = fx_co_metadata("amdgcn-amd-amdhsa--gfx90a", 5, sample, 2);
  /* Every cut of the note short of its end. */
  for (size_t n = 0; n < meta.size; n += n < 64 ? 1 : 97) {
    fx_buf cut = {0};
    fx_put(&cut, meta.data, n);
    expect_note_status(&cut, KPACK_ERROR_MSGPACK_PARSE_FAILED);
    fx_free(&cut);
  }
  static const uint8_t reserved[] = {0x81, 0xa1, 'x', 0xc1};
  static const uint8_t long_str[] = {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff};
  static const uint8_t lying_array[] = {
      0x81, 0xae, 'a', 'm', 'd', 'h',  's',  'a',  '.',  'k', 'e',
      'r',  'n',  'e', 'l', 's', 0xdd, 0xff, 0xff, 0xff, 0xff};
  const struct {
    const uint8_t* data;
    size_t size;
  } bad[] = {{reserved, sizeof(reserved)},
             {long_str, sizeof(long_str)},
             {lying_array, sizeof(lying_array)}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    fx_buf b = {0};
    fx_put(&b, bad[i].data, bad[i].size);
    expect_note_status(&b, KPACK_ERROR_MSGPACK_PARSE_FAILED);
    fx_free(&b);
  }
  fx_free(&meta);
}

static void test_nesting_deeper_than_64_fails_to_parse(void** state) {
  (void)state;
  for (int depth = 63; depth <= 64; depth++) {
    /* {"x": [[[...]]]} with the map at depth 0. */
    fx_buf b = {0};
    fx_le(&b, 0x81, 1);
    fx_le(&b, 0xa1, 1);
    fx_le(&b, 'x', 1);
    for (int i = 0; i < depth; i++)
      fx_le(&b, 0x91, 1);
    fx_le(&b, 0xc0, 1);
    expect_note_status(
        &b, depth == 63 ? KPACK_SUCCESS : KPACK_ERROR_MSGPACK_PARSE_FAILED);
    fx_free(&b);
  }
}

/* ---- wrong shapes: INVALID_METADATA
 * ------------------------------------------
 */

static void pack_string_value(packing* p) {
  pack_str(p, "12");
}
static void pack_negative(packing* p) {
  msgpack_pack_int8(&p->pk, -1);
}
static void pack_float(packing* p) {
  msgpack_pack_double(&p->pk, 12.0);
}
static void pack_array_value(packing* p) {
  msgpack_pack_array(&p->pk, 0);
}

static void test_wrong_shapes_are_invalid_metadata(void** state) {
  (void)state;
  static const struct {
    const char* key;
    void (*value)(packing*);
  } fields[] = {
      {".vgpr_count", pack_string_value},
      {".sgpr_count", pack_negative},
      {".group_segment_fixed_size", pack_float},
      {".wavefront_size", pack_array_value},
      {".symbol", pack_negative},
      {".name", pack_string_value}, /* ".name" twice */
  };
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    fx_buf b = kernel_with(fields[i].key, fields[i].value);
    expect_note_status(&b, KPACK_ERROR_INVALID_METADATA);
    fx_free(&b);
  }
  /* The same key twice in one kernel. */
  packing p;
  pack_begin(&p);
  msgpack_pack_map(&p.pk, 1);
  pack_str(&p, "amdhsa.kernels");
  msgpack_pack_array(&p.pk, 1);
  msgpack_pack_map(&p.pk, 3);
  pack_str(&p, ".name");
  pack_str(&p, "k");
  pack_str(&p, ".vgpr_count");
  msgpack_pack_uint8(&p.pk, 1);
  pack_str(&p, ".vgpr_count");
  msgpack_pack_uint8(&p.pk, 2);
  fx_buf twice = pack_end(&p);
  expect_note_status(&twice, KPACK_ERROR_INVALID_METADATA);
  fx_free(&twice);

  /* Whole-note shapes. */
  static const uint8_t not_a_map[] = {0x90};
  static const uint8_t kernels_not_array[] = {0x81, 0xae, 'a', 'm', 'd', 'h',
                                              's',  'a',  '.', 'k', 'e', 'r',
                                              'n',  'e',  'l', 's', 0x80};
  static const uint8_t kernel_not_map[] = {0x81, 0xae, 'a', 'm', 'd',  'h',
                                           's',  'a',  '.', 'k', 'e',  'r',
                                           'n',  'e',  'l', 's', 0x91, 0x01};
  static const uint8_t kernel_without_name[] = {
      0x81, 0xae, 'a', 'm', 'd', 'h', 's', 'a',  '.',
      'k',  'e',  'r', 'n', 'e', 'l', 's', 0x91, 0x80};
  static const uint8_t target_not_str[] = {0x81, 0xad, 'a', 'm', 'd', 'h',
                                           's',  'a',  '.', 't', 'a', 'r',
                                           'g',  'e',  't', 0x05};
  static const uint8_t kernels_twice[] = {
      0x82, 0xae, 'a', 'm', 'd', 'h',  's',  'a', '.', 'k', 'e',
      'r',  'n',  'e', 'l', 's', 0x90, 0xae, 'a', 'm', 'd', 'h',
      's',  'a',  '.', 'k', 'e', 'r',  'n',  'e', 'l', 's', 0x90};
  const struct {
    const uint8_t* data;
    size_t size;
  } shapes[] = {
      {not_a_map, sizeof(not_a_map)},
      {kernels_not_array, sizeof(kernels_not_array)},
      {kernel_not_map, sizeof(kernel_not_map)},
      {kernel_without_name, sizeof(kernel_without_name)},
      {target_not_str, sizeof(target_not_str)},
      {kernels_twice, sizeof(kernels_twice)},
  };
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    fx_buf b = {0};
    fx_put(&b, shapes[i].data, shapes[i].size);
    expect_note_status(&b, KPACK_ERROR_INVALID_METADATA);
    fx_free(&b);
  }
}

static void test_arguments_are_checked(void** state) {
  (void)state;
  fx_buf image = sample_image(NULL);
  kpack_code_object_t* co = (kpack_code_object_t*)1;
  kpack_code_object_info_t info;
  kpack_co_kernel_t k;
  assert_int_equal(kpack_code_object_parse(NULL, 10, &co),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(co);
  assert_int_equal(kpack_code_object_parse(image.data, image.size, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_code_object_get_info(NULL, &info),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_code_object_get_kernel(NULL, 0, &k),
                   KPACK_ERROR_INVALID_ARGUMENT);
  co = parse_ok(&image);
  assert_int_equal(kpack_code_object_get_info(co, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_code_object_get_kernel(co, 0, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  kpack_code_object_free(co);
  kpack_code_object_free(NULL);
  assert_string_equal(kpack_feature_name(KPACK_FEATURE_ANY), "any");
  assert_string_equal(kpack_feature_name(KPACK_FEATURE_UNSUPPORTED),
                      "unsupported");
  assert_null(kpack_feature_name((kpack_feature_t)9));
  fx_free(&image);
}

/* Every prefix and many one-byte corruptions: any status, never a crash or
 * a read past the end (the copies are exact-size). */
static void test_damaged_code_objects_never_crash(void** state) {
  (void)state;
  fx_co_layout l;
  fx_buf image = sample_image(&l);
  size_t ok = 0;
  for (size_t n = 0; n <= image.size; n++) {
    for (int flip = -1; flip < 8; flip++) {
      fx_buf b = {0};
      fx_put(&b, image.data, n);
      if (flip >= 0 && n > 0)
        b.data[(n * 31 + (size_t)flip * 977) % n] ^= (uint8_t)(1u << flip);
      kpack_code_object_t* co;
      if (parse_exact(b.data, b.size, &co) == KPACK_SUCCESS) {
        kpack_code_object_info_t info;
        kpack_code_object_get_info(co, &info);
        for (size_t i = 0; i < info.kernel_count; i++) {
          kpack_co_kernel_t k;
          assert_int_equal(kpack_code_object_get_kernel(co, i, &k),
                           KPACK_SUCCESS);
          assert_non_null(k.name);
        }
        char* json;
        size_t len;
        assert_int_equal(
            kpack_code_object_metadata_json(co, false, &json, &len),
            KPACK_SUCCESS);
        free(json);
        kpack_code_object_free(co);
        ok++;
      }
      fx_free(&b);
    }
  }
  assert_true(ok > 0);
  fx_free(&image);
}

/* ---- real code objects
 * -------------------------------------------------------
 */

static int by_string(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* The kernel descriptor symbols ("*.kd") of the ELF's .dynsym, without the
 * suffix, sorted: written here from the ELF specification, not the reader. */
static char** kd_symbols(const uint8_t* elf, size_t size, size_t* count) {
  uint64_t shoff = fx_load_le(elf + 40, 8);
  size_t shnum = (size_t)fx_load_le(elf + 60, 2);
  char** names = NULL;
  *count = 0;
  assert_true(shoff + shnum * 64 <= size);
  for (size_t i = 0; i < shnum; i++) {
    const uint8_t* sh = elf + shoff + i * 64;
    if (fx_load_le(sh + 4, 4) != 11) /* SHT_DYNSYM */
      continue;
    uint64_t off = fx_load_le(sh + 24, 8), symsize = fx_load_le(sh + 32, 8);
    const uint8_t* strsh = elf + shoff + fx_load_le(sh + 40, 4) * 64;
    const char* strtab = (const char*)elf + fx_load_le(strsh + 24, 8);
    assert_true(off + symsize <= size);
    for (uint64_t s = 24; s + 24 <= symsize; s += 24) { /* skip symbol 0 */
      const char* name = strtab + fx_load_le(elf + off + s, 4);
      size_t len = strlen(name);
      if (len > 3 && strcmp(name + len - 3, ".kd") == 0) {
        names = realloc(names, (*count + 1) * sizeof(*names));
        names[(*count)++] = strndup(name, len - 3);
      }
    }
  }
  qsort(names, *count, sizeof(*names), by_string);
  return names;
}

/* The NT_AMDGPU_METADATA description, found through the program headers. */
static const uint8_t* raw_note(const uint8_t* elf, size_t size,
                               size_t* desc_size) {
  uint64_t phoff = fx_load_le(elf + 32, 8);
  size_t phnum = (size_t)fx_load_le(elf + 56, 2);
  for (size_t i = 0; i < phnum; i++) {
    const uint8_t* ph = elf + phoff + i * 56;
    if (fx_load_le(ph, 4) != 4) /* PT_NOTE */
      continue;
    uint64_t pos = fx_load_le(ph + 8, 8), end = pos + fx_load_le(ph + 32, 8);
    assert_true(end <= size);
    while (pos + 12 <= end) {
      uint32_t namesz = (uint32_t)fx_load_le(elf + pos, 4);
      uint32_t descsz = (uint32_t)fx_load_le(elf + pos + 4, 4);
      uint32_t type = (uint32_t)fx_load_le(elf + pos + 8, 4);
      uint64_t desc = pos + 12 + ((namesz + 3u) & ~3u);
      if (type == 32 && namesz == 7 &&
          memcmp(elf + pos + 12, "AMDGPU", 7) == 0) {
        *desc_size = descsz;
        return elf + desc;
      }
      pos = desc + ((descsz + 3u) & ~3u);
    }
  }
  fail_msg("no NT_AMDGPU_METADATA note");
  return NULL;
}

static const msgpack_object* map_get(const msgpack_object* map,
                                     const char* key) {
  assert_int_equal(map->type, MSGPACK_OBJECT_MAP);
  for (uint32_t i = 0; i < map->via.map.size; i++) {
    const msgpack_object_kv* kv = &map->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR &&
        kv->key.via.str.size == strlen(key) &&
        memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0)
      return &kv->val;
  }
  return NULL;
}

static uint64_t map_uint(const msgpack_object* map, const char* key) {
  const msgpack_object* v = map_get(map, key);
  assert_non_null(v);
  assert_int_equal(v->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
  return v->via.u64;
}

static bool str_is(const msgpack_object* o, const char* s) {
  return o != NULL && o->type == MSGPACK_OBJECT_STR &&
         o->via.str.size == strlen(s) &&
         memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static size_t count_occurrences(const char* text, const char* what) {
  size_t n = 0;
  for (const char* p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  return n;
}

static void check_real(const char* arch, const uint8_t* elf, size_t size) {
  kpack_code_object_t* co;
  kpack_code_object_info_t info;
  assert_int_equal(parse_exact(elf, size, &co), KPACK_SUCCESS);
  kpack_code_object_get_info(co, &info);
  /* The e_flags decoding names the arch the bundle files it under. */
  assert_string_equal(info.target, arch);
  assert_int_equal(info.version, 4);
  assert_true(kpack_target_serves(info.target, arch));

  /* Every kernel is a .kd symbol of the ELF and back. */
  size_t nsyms;
  char** syms = kd_symbols(elf, size, &nsyms);
  char** names = calloc(info.kernel_count + 1, sizeof(*names));
  assert_int_equal(info.kernel_count, nsyms);
  for (size_t i = 0; i < info.kernel_count; i++) {
    kpack_co_kernel_t k;
    assert_int_equal(kpack_code_object_get_kernel(co, i, &k), KPACK_SUCCESS);
    size_t len = strlen(k.name);
    assert_true(strncmp(k.symbol, k.name, len) == 0 &&
                strcmp(k.symbol + len, ".kd") == 0);
    names[i] = (char*)k.name;
  }
  qsort(names, info.kernel_count, sizeof(*names), by_string);
  for (size_t i = 0; i < nsyms; i++)
    assert_string_equal(names[i], syms[i]);

  /* Spot checks against msgpack-c's decode of the raw note. */
  size_t desc_size = 0;
  const uint8_t* desc = raw_note(elf, size, &desc_size);
  assert_int_equal(info.metadata_size, desc_size);
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  assert_int_equal(msgpack_unpack_next(&up, (const char*)desc, desc_size, NULL),
                   MSGPACK_UNPACK_SUCCESS);
  const msgpack_object* target = map_get(&up.data, "amdhsa.target");
  assert_true(str_is(target, info.metadata_target));
  const msgpack_object* kernels = map_get(&up.data, "amdhsa.kernels");
  assert_non_null(kernels);
  assert_int_equal(kernels->type, MSGPACK_OBJECT_ARRAY);
  assert_int_equal(kernels->via.array.size, info.kernel_count);
  size_t picks[] = {0, info.kernel_count / 2, info.kernel_count - 1};
  for (size_t p = 0; p < 3; p++) {
    const msgpack_object* want = &kernels->via.array.ptr[picks[p]];
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, picks[p], &k);
    assert_true(str_is(map_get(want, ".name"), k.name));
    assert_int_equal(k.vgpr_count, map_uint(want, ".vgpr_count"));
    assert_int_equal(k.sgpr_count, map_uint(want, ".sgpr_count"));
    assert_int_equal(k.group_segment_fixed_size,
                     map_uint(want, ".group_segment_fixed_size"));
    assert_int_equal(k.private_segment_fixed_size,
                     map_uint(want, ".private_segment_fixed_size"));
    assert_int_equal(k.kernarg_segment_size,
                     map_uint(want, ".kernarg_segment_size"));
    assert_int_equal(k.wavefront_size, map_uint(want, ".wavefront_size"));
    assert_int_equal(k.max_flat_workgroup_size,
                     map_uint(want, ".max_flat_workgroup_size"));
    assert_int_equal(k.vgpr_spill_count, map_uint(want, ".vgpr_spill_count"));
    bool has_agpr = map_get(want, ".agpr_count") != NULL;
    assert_int_equal(!!(k.present & KPACK_CO_AGPR_COUNT), has_agpr);
    if (has_agpr)
      assert_int_equal(k.agpr_count, map_uint(want, ".agpr_count"));
  }
  msgpack_unpacked_destroy(&up);

  /* The JSON holds every kernel. */
  char* json;
  size_t len;
  assert_int_equal(kpack_code_object_metadata_json(co, true, &json, &len),
                   KPACK_SUCCESS);
  assert_int_equal(count_occurrences(json, "\".name\": "), info.kernel_count);
  free(json);

  for (size_t i = 0; i < nsyms; i++)
    free(syms[i]);
  free(syms);
  free(names);
  kpack_code_object_free(co);
}

static void test_real_code_objects_match_their_symbols_and_note(void** state) {
  (void)state;
  char* path = kt_librocrand();
  kpack_fatbin_t* fb;
  kpack_bundle_t* bundle;
  kpack_bundle_info_t info;
  size_t checked = 0;
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_bundle(fb, 0, &bundle), KPACK_SUCCESS);
  assert_int_equal(kpack_bundle_get_info(bundle, &info), KPACK_SUCCESS);
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    assert_int_equal(kpack_bundle_get_entry(bundle, i, &e), KPACK_SUCCESS);
    if (e.arch == NULL)
      continue;
    check_real(e.arch, e.data, (size_t)e.size);
    checked++;
  }
  assert_int_equal(checked, 7); /* gfx803 ... gfx1030 */
  kpack_bundle_free(bundle);
  kpack_fatbin_close(fb);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kernel_field_is_reported),
      cmocka_unit_test(test_large_counts_of_every_width_read_back),
      cmocka_unit_test(test_missing_optional_keys_read_as_absent),
      cmocka_unit_test(test_code_object_without_a_note_has_no_kernels),
      cmocka_unit_test(test_metadata_note_is_found_among_several),
      cmocka_unit_test(test_note_at_the_end_of_the_file),
      cmocka_unit_test(test_note_is_found_through_segment_or_section_alone),
      cmocka_unit_test(test_unknown_keys_and_non_string_keys_are_ignored),
      cmocka_unit_test(test_target_follows_each_code_object_version),
      cmocka_unit_test(test_generic_version_and_processor_are_reported),
      cmocka_unit_test(test_generic_targets_serve_the_processors_they_cover),
      cmocka_unit_test(test_generic_code_object_serves_by_its_version),
      cmocka_unit_test(test_other_os_abi_has_no_version),
      cmocka_unit_test(test_target_serves_only_archs_that_fix_its_features),
      cmocka_unit_test(test_metadata_json_renders_the_whole_note),
      cmocka_unit_test(test_kernels_text_is_one_line_per_kernel_in_note_order),
      cmocka_unit_test(test_kernels_text_shows_absent_counts_as_a_dash),
      cmocka_unit_test(test_kernel_names_cannot_split_their_line_or_fields),
      cmocka_unit_test(test_escape_name_writes_a_name_as_the_kernels_text_does),
      cmocka_unit_test(test_metadata_text_is_the_indented_note_and_a_newline),
      cmocka_unit_test(test_bytes_that_are_no_code_object_render_empty_files),
      cmocka_unit_test(test_note_json_cannot_show_leaves_only_metadata_empty),
      cmocka_unit_test(test_resources_come_in_kernels_file_order),
      cmocka_unit_test(test_not_an_amdgpu_elf_is_invalid_format),
      cmocka_unit_test(test_header_tables_outside_the_file_are_invalid_format),
      cmocka_unit_test(test_notes_outside_their_region_are_invalid_format),
      cmocka_unit_test(test_broken_msgpack_in_the_note_fails_to_parse),
      cmocka_unit_test(test_nesting_deeper_than_64_fails_to_parse),
      cmocka_unit_test(test_wrong_shapes_are_invalid_metadata),
      cmocka_unit_test(test_arguments_are_checked),
      cmocka_unit_test(test_damaged_code_objects_never_crash),
      cmocka_unit_test(test_real_code_objects_match_their_symbols_and_note),
  };
  return cmocka_run_group_tests_name("code object", tests, NULL, NULL);
}
