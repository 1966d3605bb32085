/* SPDX-License-Identifier: MIT
 *
 * The offload bundle and fat binary readers: bundles and ELF files built
 * byte by byte (plain, CCOB zlib/zstd v1-3, wrapper segments with and
 * without relocations), malformed variants of each, and the real fat binary
 * of Debian's librocrand1.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "support.h"

static const char* const gfx90a_id = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-";
static const char* const gfx906_id = "hip-amdgcn-amd-amdhsa-gfx906";
static const char* const host_id = "host-x86_64-unknown-linux-gnu-";

/* A bundle like clang's: an empty host entry and two device entries. */
static fx_buf sample_bundle(uint32_t seed, void** a, void** b) {
  *a = kt_pattern(3000, seed);
  *b = kt_pattern(1777, seed + 1);
  fx_entry e[] = {
      {host_id, NULL, 0}, {gfx90a_id, *a, 3000}, {gfx906_id, *b, 1777}};
  return fx_bundle(e, 3);
}

/* Copies `size` bytes into a buffer of exactly that size, so that any read
 * past the end is caught by ASan and valgrind. */
static void* exact_copy(const void* data, size_t size) {
  void* p = malloc(size ? size : 1);
  assert_non_null(p);
  memcpy(p, data, size);
  return p;
}

static void check_sample(const kpack_bundle_t* bundle, const void* a,
                         const void* b) {
  kpack_bundle_info_t info;
  kpack_bundle_entry_t e;
  assert_int_equal(kpack_bundle_get_info(bundle, &info), KPACK_SUCCESS);
  assert_int_equal(info.entry_count, 3);
  assert_int_equal(kpack_bundle_get_entry(bundle, 0, &e), KPACK_SUCCESS);
  assert_string_equal(e.id, host_id);
  assert_null(e.arch);
  assert_int_equal(e.size, 0);
  assert_int_equal(kpack_bundle_get_entry(bundle, 1, &e), KPACK_SUCCESS);
  assert_string_equal(e.id, gfx90a_id);
  assert_string_equal(e.arch, "gfx90a:xnack-");
  assert_int_equal(e.size, 3000);
  assert_memory_equal(e.data, a, 3000);
  assert_int_equal(kpack_bundle_get_entry(bundle, 2, &e), KPACK_SUCCESS);
  assert_string_equal(e.arch, "gfx906");
  assert_int_equal(e.size, 1777);
  assert_memory_equal(e.data, b, 1777);
  assert_int_equal(kpack_bundle_get_entry(bundle, 3, &e),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

static void test_plain_bundle_lists_entries_and_target_ids(void** state) {
  (void)state;
  void *a, *b;
  fx_buf buf = sample_bundle(1, &a, &b);
  kpack_bundle_t* bundle;
  kpack_bundle_info_t info;
  assert_int_equal(kpack_bundle_parse(buf.data, buf.size, &bundle),
                   KPACK_SUCCESS);
  check_sample(bundle, a, b);
  assert_int_equal(kpack_bundle_get_info(bundle, &info), KPACK_SUCCESS);
  assert_int_equal(info.compression, KPACK_BUNDLE_UNCOMPRESSED);
  assert_int_equal(info.ccob_version, 0);
  assert_int_equal(info.extent, buf.size);
  /* Entries of a plain bundle point into the input: no copy. */
  kpack_bundle_entry_t e;
  assert_int_equal(kpack_bundle_get_entry(bundle, 1, &e), KPACK_SUCCESS);
  assert_true((const uint8_t*)e.data > buf.data &&
              (const uint8_t*)e.data < buf.data + buf.size);
  kpack_bundle_free(bundle);
  kpack_bundle_free(NULL);
  free(buf.data);
  free(a);
  free(b);
}

static void test_bundle_arguments_are_checked(void** state) {
  (void)state;
  kpack_bundle_t* bundle = (kpack_bundle_t*)1;
  kpack_bundle_info_t info;
  kpack_bundle_entry_t e;
  assert_int_equal(kpack_bundle_parse(NULL, 10, &bundle),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(bundle);
  assert_int_equal(kpack_bundle_parse("x", 1, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_bundle_get_info(NULL, &info),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_bundle_get_entry(NULL, 0, &e),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_bundle_parse("not a bundle at all, no", 23, &bundle),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_null(bundle);
}

static void test_target_id_spellings(void** state) {
  (void)state;
  static const struct {
    const char* id;
    const char* arch;
  } cases[] = {
      {"hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
       "gfx942:sramecc+:xnack-"},
      {"hip-amdgcn-amd-amdhsa--gfx1030", "gfx1030"},
      {"hip-amdgcn-amd-amdhsa-gfx906", "gfx906"},
      {"hipv4-amdgcn-amd-amdhsa--", NULL},
      {"openmp-amdgcn-amd-amdhsa--gfx90a", NULL},
      {"hipv4-spirv64-amd-amdhsa--gfx90a", NULL},
      {"host-x86_64-unknown-linux-gnu", NULL},
      {"", NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    fx_entry e = {cases[i].id,
                  "\x7f"
                  "ELF",
                  4};
    fx_buf buf = fx_bundle(&e, 1);
    kpack_bundle_t* bundle;
    kpack_bundle_entry_t got;
    assert_int_equal(kpack_bundle_parse(buf.data, buf.size, &bundle),
                     KPACK_SUCCESS);
    assert_int_equal(kpack_bundle_get_entry(bundle, 0, &got), KPACK_SUCCESS);
    assert_string_equal(got.id, cases[i].id);
    if (cases[i].arch == NULL)
      assert_null(got.arch);
    else
      assert_string_equal(got.arch, cases[i].arch);
    kpack_bundle_free(bundle);
    free(buf.data);
  }
}

static void test_truncated_plain_bundle_is_invalid_at_every_length(
    void** state) {
  (void)state;
  void *a, *b;
  fx_buf buf = sample_bundle(2, &a, &b);
  for (size_t n = 0; n < buf.size; n++) {
    void* copy = exact_copy(buf.data, n);
    kpack_bundle_t* bundle = (kpack_bundle_t*)1;
    assert_int_equal(kpack_bundle_parse(copy, n, &bundle),
                     KPACK_ERROR_INVALID_FORMAT);
    assert_null(bundle);
    free(copy);
  }
  free(buf.data);
  free(a);
  free(b);
}

/* Overwrites one u64 of a copy of `buf` and expects INVALID_FORMAT. */
static void expect_invalid_with(const fx_buf* buf, size_t at, uint64_t value) {
  fx_buf copy = {exact_copy(buf->data, buf->size), buf->size, buf->size};
  kpack_bundle_t* bundle;
  fx_set_le(&copy, at, value, 8);
  assert_int_equal(kpack_bundle_parse(copy.data, copy.size, &bundle),
                   KPACK_ERROR_INVALID_FORMAT);
  free(copy.data);
}

static void test_counts_offsets_and_sizes_that_do_not_fit_are_invalid(
    void** state) {
  (void)state;
  void *a, *b;
  fx_buf buf = sample_bundle(3, &a, &b);
  size_t e1 = 32 + 24 + strlen(host_id);          /* entry 1's fixed fields */
  expect_invalid_with(&buf, 24, UINT64_MAX);      /* count */
  expect_invalid_with(&buf, 24, 4);               /* one entry too many */
  expect_invalid_with(&buf, e1, UINT64_MAX - 8);  /* offset + size wraps */
  expect_invalid_with(&buf, e1, buf.size);        /* offset past end */
  expect_invalid_with(&buf, e1 + 8, UINT64_MAX);  /* size */
  expect_invalid_with(&buf, e1 + 8, buf.size);    /* size past end */
  expect_invalid_with(&buf, e1 + 16, UINT64_MAX); /* ID length */
  expect_invalid_with(&buf, e1 + 16, buf.size - e1); /* ID past end */
  /* An embedded NUL in an ID. */
  fx_buf copy = {exact_copy(buf.data, buf.size), buf.size, buf.size};
  kpack_bundle_t* bundle;
  copy.data[e1 + 24 + 3] = 0;
  assert_int_equal(kpack_bundle_parse(copy.data, copy.size, &bundle),
                   KPACK_ERROR_INVALID_FORMAT);
  free(copy.data);
  free(buf.data);
  free(a);
  free(b);
}

static void check_ccob(unsigned version, unsigned method) {
  void *a, *b;
  fx_buf plain = sample_bundle(10 + version * 2 + method, &a, &b);
  fx_buf ccob = fx_ccob(version, method, &plain);
  /* Bytes after the envelope (padding, the next bundle) are not part of it. */
  fx_put(&ccob, "\0\0\0\0\0\0\0\0", 8);
  void* input = exact_copy(ccob.data, ccob.size);
  kpack_bundle_t* bundle;
  kpack_bundle_info_t info;
  assert_int_equal(kpack_bundle_parse(input, ccob.size, &bundle),
                   KPACK_SUCCESS);
  check_sample(bundle, a, b);
  assert_int_equal(kpack_bundle_get_info(bundle, &info), KPACK_SUCCESS);
  assert_int_equal(info.compression,
                   method == FX_ZSTD ? KPACK_BUNDLE_ZSTD : KPACK_BUNDLE_ZLIB);
  assert_int_equal(info.ccob_version, version);
  assert_int_equal(info.extent, ccob.size - 8);
  assert_int_equal(info.bundle_size, plain.size);
  /* The decompressed bundle is owned: the input can go first. */
  free(input);
  check_sample(bundle, a, b);
  kpack_bundle_free(bundle);
  free(plain.data);
  free(ccob.data);
  free(a);
  free(b);
}

static void test_ccob_zstd_versions_1_to_3(void** state) {
  (void)state;
  for (unsigned v = 1; v <= 3; v++)
    check_ccob(v, FX_ZSTD);
}

static void test_ccob_zlib_versions_1_to_3(void** state) {
  (void)state;
  for (unsigned v = 1; v <= 3; v++)
    check_ccob(v, FX_ZLIB);
}

static kpack_error_t parse_copy(const fx_buf* buf) {
  void* input = exact_copy(buf->data, buf->size);
  kpack_bundle_t* bundle = (kpack_bundle_t*)1;
  kpack_error_t err = kpack_bundle_parse(input, buf->size, &bundle);
  if (err != KPACK_SUCCESS)
    assert_null(bundle);
  kpack_bundle_free(bundle);
  free(input);
  return err;
}

static void test_ccob_corrupt_payload_fails_decompression(void** state) {
  (void)state;
  for (unsigned method = 0; method <= 1; method++) {
    for (unsigned v = 1; v <= 3; v++) {
      void *a, *b;
      fx_buf plain = sample_bundle(20, &a, &b);
      fx_buf ccob = fx_ccob(v, method, &plain);
      size_t header = v == 1 ? 20 : v == 2 ? 24 : 32;
      size_t mid = header + (ccob.size - header) / 2;
      ccob.data[mid] ^= 0x55;
      assert_int_equal(parse_copy(&ccob), KPACK_ERROR_DECOMPRESSION_FAILED);
      ccob.data[mid] ^= 0x55;
      assert_int_equal(parse_copy(&ccob), KPACK_SUCCESS);
      free(plain.data);
      free(ccob.data);
      free(a);
      free(b);
    }
  }
}

static void test_ccob_wrong_declared_size_fails_decompression(void** state) {
  (void)state;
  for (unsigned method = 0; method <= 1; method++) {
    for (unsigned v = 1; v <= 3; v++) {
      void *a, *b;
      fx_buf plain = sample_bundle(30, &a, &b);
      fx_buf ccob = fx_ccob(v, method, &plain);
      size_t at = v == 1 ? 8 : v == 2 ? 12 : 16;
      unsigned width = v == 3 ? 8 : 4;
      fx_set_le(&ccob, at, plain.size + 1, width);
      assert_int_equal(parse_copy(&ccob), KPACK_ERROR_DECOMPRESSION_FAILED);
      fx_set_le(&ccob, at, plain.size - 1, width);
      assert_int_equal(parse_copy(&ccob), KPACK_ERROR_DECOMPRESSION_FAILED);
      /* A huge claim costs nothing: output, not the header, sizes buffers. */
      fx_set_le(&ccob, at, v == 3 ? (1ull << 40) : 0xffffffffu, width);
      assert_int_equal(parse_copy(&ccob), KPACK_ERROR_DECOMPRESSION_FAILED);
      free(plain.data);
      free(ccob.data);
      free(a);
      free(b);
    }
  }
}

static void test_ccob_total_size_must_fit(void** state) {
  (void)state;
  void *a, *b;
  fx_buf plain = sample_bundle(40, &a, &b);
  for (unsigned v = 2; v <= 3; v++) {
    fx_buf ccob = fx_ccob(v, FX_ZSTD, &plain);
    unsigned width = v == 3 ? 8 : 4;
    fx_set_le(&ccob, 8, ccob.size + 1, width); /* beyond the input */
    assert_int_equal(parse_copy(&ccob), KPACK_ERROR_INVALID_FORMAT);
    fx_set_le(&ccob, 8, 3, width); /* inside the header */
    assert_int_equal(parse_copy(&ccob), KPACK_ERROR_INVALID_FORMAT);
    fx_set_le(&ccob, 8, ccob.size - 5, width); /* cuts the payload */
    assert_int_equal(parse_copy(&ccob), KPACK_ERROR_DECOMPRESSION_FAILED);
    free(ccob.data);
  }
  free(plain.data);
  free(a);
  free(b);
}

static void test_ccob_unknown_version_or_method_is_unsupported(void** state) {
  (void)state;
  void *a, *b;
  fx_buf plain = sample_bundle(50, &a, &b);
  fx_buf ccob = fx_ccob(2, FX_ZSTD, &plain);
  fx_set_le(&ccob, 4, 4, 2);
  assert_int_equal(parse_copy(&ccob), KPACK_ERROR_UNSUPPORTED_VERSION);
  fx_set_le(&ccob, 4, 0, 2);
  assert_int_equal(parse_copy(&ccob), KPACK_ERROR_UNSUPPORTED_VERSION);
  fx_set_le(&ccob, 4, 2, 2);
  fx_set_le(&ccob, 6, 2, 2);
  assert_int_equal(parse_copy(&ccob), KPACK_ERROR_UNSUPPORTED_VERSION);
  free(plain.data);
  free(ccob.data);
  free(a);
  free(b);
}

static void test_ccob_around_ccob_is_invalid(void** state) {
  (void)state;
  void *a, *b;
  fx_buf plain = sample_bundle(60, &a, &b);
  fx_buf inner = fx_ccob(3, FX_ZSTD, &plain);
  fx_buf outer = fx_ccob(3, FX_ZLIB, &inner);
  assert_int_equal(parse_copy(&outer), KPACK_ERROR_INVALID_FORMAT);
  free(plain.data);
  free(inner.data);
  free(outer.data);
  free(a);
  free(b);
}

static void test_truncated_ccob_never_succeeds(void** state) {
  (void)state;
  for (unsigned method = 0; method <= 1; method++) {
    for (unsigned v = 1; v <= 3; v++) {
      void *a, *b;
      fx_buf plain = sample_bundle(70, &a, &b);
      fx_buf ccob = fx_ccob(v, method, &plain);
      for (size_t n = 0; n < ccob.size; n++) {
        fx_buf cut = {ccob.data, n, n};
        kpack_error_t err = parse_copy(&cut);
        assert_true(err == KPACK_ERROR_INVALID_FORMAT ||
                    err == KPACK_ERROR_DECOMPRESSION_FAILED);
      }
      free(plain.data);
      free(ccob.data);
      free(a);
      free(b);
    }
  }
}

/* ---- fat binaries -------------------------------------------------------- */

/* Bundle i holds one gfx90a entry of kt_pattern(1000 + i, 100 + i) and one
 * gfx1100 entry; a host entry first, as clang writes. */
static fx_buf numbered_bundle(size_t i, unsigned ccob_version,
                              unsigned method) {
  void* a = kt_pattern(1000 + i, 100 + (uint32_t)i);
  void* b = kt_pattern(500 + i, 200 + (uint32_t)i);
  fx_entry e[] = {{host_id, NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", a, 1000 + i},
                  {"hipv4-amdgcn-amd-amdhsa--gfx1100", b, 500 + i}};
  fx_buf plain = fx_bundle(e, 3);
  free(a);
  free(b);
  if (ccob_version == 0)
    return plain;
  fx_buf ccob = fx_ccob(ccob_version, method, &plain);
  free(plain.data);
  return ccob;
}

/* Checks that code object `co` of the fat binary is numbered_bundle(i). */
static void expect_bundle(const kpack_fatbin_t* fb, size_t co, size_t i) {
  kpack_bundle_t* bundle;
  kpack_bundle_entry_t e;
  assert_int_equal(kpack_fatbin_get_bundle(fb, co, &bundle), KPACK_SUCCESS);
  assert_int_equal(kpack_bundle_get_entry(bundle, 1, &e), KPACK_SUCCESS);
  assert_string_equal(e.arch, "gfx90a");
  assert_int_equal(e.size, 1000 + i);
  void* want = kt_pattern(1000 + i, 100 + (uint32_t)i);
  assert_memory_equal(e.data, want, e.size);
  free(want);
  assert_int_equal(kpack_bundle_get_entry(bundle, 2, &e), KPACK_SUCCESS);
  assert_string_equal(e.arch, "gfx1100");
  assert_int_equal(e.size, 500 + i);
  kpack_bundle_free(bundle);
}

static void free_bundles(fx_buf* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(b[i].data);
}

/* HIPF wrappers: wrapper i points at bundle order[i] as how[i] says (all
 * stored in the file when how is NULL). */
static fx_wrapper* hipf_wrappers(const size_t* order, const fx_ptr* how,
                                 size_t n) {
  fx_wrapper* w = calloc(n, sizeof(*w));
  assert_non_null(w);
  for (size_t i = 0; i < n; i++)
    w[i] =
        (fx_wrapper){FX_HIPF_MAGIC, 1, order[i], how ? how[i] : FX_PTR_FILE, 0};
  return w;
}

/* A host ELF of `bundles` whose wrappers follow order/how (none when n is
 * 0), of the given ELF type. */
static fx_buf fatbin_elf(const fx_buf* bundles, size_t bundle_count,
                         const size_t* order, const fx_ptr* how, size_t n,
                         uint16_t type) {
  fx_wrapper* w = n ? hipf_wrappers(order, how, n) : NULL;
  fx_elf_opts o = {.type = type,
                   .bundles = bundles,
                   .bundle_count = bundle_count,
                   .wrappers = w,
                   .wrapper_count = n};
  fx_buf elf = fx_elf(&o);
  free(w);
  return elf;
}

static void test_wrappers_number_code_objects(void** state) {
  (void)state;
  fx_buf bundles[3] = {numbered_bundle(0, 0, 0), numbered_bundle(1, 2, FX_ZSTD),
                       numbered_bundle(2, 3, FX_ZLIB)};
  /* Wrapper order, not section order, is co_index order; the addresses
   * come from the file, a RELATIVE relocation and an ABS64 relocation. */
  size_t order[3] = {2, 0, 1};
  fx_ptr how[3] = {FX_PTR_FILE, FX_PTR_RELATIVE, FX_PTR_ABS64};
  fx_buf elf = fatbin_elf(bundles, 3, order, how, 3, FX_ET_DYN);
  void* image = exact_copy(elf.data, elf.size);
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  assert_int_equal(kpack_fatbin_open_memory(image, elf.size, &fb),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  assert_true(info.has_fatbin);
  assert_true(info.has_wrappers);
  assert_int_equal(info.machine, 62);
  assert_int_equal(info.bundle_count, 3);
  for (size_t co = 0; co < 3; co++)
    expect_bundle(fb, co, order[co]);
  kpack_bundle_t* bundle = (kpack_bundle_t*)1;
  assert_int_equal(kpack_fatbin_get_bundle(fb, 3, &bundle),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(bundle);
  kpack_fatbin_close(fb);
  kpack_fatbin_close(NULL);
  free(image);
  free(elf.data);
  free_bundles(bundles, 3);
}

static void test_relocatable_object_resolves_wrappers_through_symbols(
    void** state) {
  (void)state;
  fx_buf bundles[2] = {numbered_bundle(0, 0, 0), numbered_bundle(1, 0, 0)};
  size_t order[2] = {1, 0};
  fx_ptr how[2] = {FX_PTR_ABS64, FX_PTR_ABS64};
  fx_buf elf = fatbin_elf(bundles, 2, order, how, 2, FX_ET_REL);
  kpack_fatbin_t* fb;
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  expect_bundle(fb, 0, 1);
  expect_bundle(fb, 1, 0);
  kpack_fatbin_close(fb);
  free(elf.data);
  free_bundles(bundles, 2);
}

static void test_aarch64_relocations_and_section_symbols(void** state) {
  (void)state;
  fx_buf bundles[3] = {numbered_bundle(0, 0, 0), numbered_bundle(1, 0, 0),
                       numbered_bundle(2, 2, FX_ZLIB)};
  size_t order[3] = {2, 1, 0};
  /* AArch64 shared object: R_AARCH64_RELATIVE and R_AARCH64_ABS64 against
   * a symbol or against the section symbol plus an addend. */
  fx_ptr how[3] = {FX_PTR_RELATIVE, FX_PTR_ABS64, FX_PTR_ABS64_SECTION};
  fx_wrapper* w = hipf_wrappers(order, how, 3);
  fx_elf_opts o = {.machine = FX_EM_AARCH64,
                   .bundles = bundles,
                   .bundle_count = 3,
                   .bundle_align = 64,
                   .wrappers = w,
                   .wrapper_count = 3};
  fx_buf elf = fx_elf(&o);
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  assert_int_equal(info.machine, FX_EM_AARCH64);
  for (size_t co = 0; co < 3; co++)
    expect_bundle(fb, co, order[co]);
  kpack_fatbin_close(fb);
  free(elf.data);

  /* A relocatable object relocated against the section symbol. */
  fx_ptr section[3] = {FX_PTR_ABS64_SECTION, FX_PTR_ABS64_SECTION,
                       FX_PTR_ABS64};
  elf = fatbin_elf(bundles, 3, order, section, 3, FX_ET_REL);
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  for (size_t co = 0; co < 3; co++)
    expect_bundle(fb, co, order[co]);
  kpack_fatbin_close(fb);
  free(elf.data);
  free(w);
  free_bundles(bundles, 3);
}

static void test_without_segment_bundles_are_walked_in_order(void** state) {
  (void)state;
  /* Mixed forms, including a CCOB v1 whose end only decompression finds. */
  fx_buf bundles[4] = {numbered_bundle(0, 3, FX_ZSTD),
                       numbered_bundle(1, 1, FX_ZLIB), numbered_bundle(2, 0, 0),
                       numbered_bundle(3, 1, FX_ZSTD)};
  fx_buf elf = fatbin_elf(bundles, 4, NULL, NULL, 0, FX_ET_DYN);
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  assert_false(info.has_wrappers);
  assert_int_equal(info.bundle_count, 4);
  for (size_t i = 0; i < 4; i++)
    expect_bundle(fb, i, i);
  kpack_fatbin_close(fb);
  free(elf.data);
  free_bundles(bundles, 4);
}

static void test_garbage_between_walked_bundles_is_invalid(void** state) {
  (void)state;
  fx_buf bundles[2] = {numbered_bundle(0, 0, 0), numbered_bundle(1, 0, 0)};
  fx_buf elf = fatbin_elf(bundles, 2, NULL, NULL, 0, FX_ET_DYN);
  kpack_fatbin_t* fb = (kpack_fatbin_t*)1;
  /* The padding before the second bundle (at +4096 in the section). */
  assert_int_equal(elf.data[4096 + 4000], 0);
  elf.data[4096 + 4000] = 0x7f;
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_null(fb);
  free(elf.data);
  free_bundles(bundles, 2);
}

static void test_bad_wrappers_are_invalid(void** state) {
  (void)state;
  fx_buf bundles[1] = {numbered_bundle(0, 0, 0)};
  size_t order[2] = {0, 0};
  fx_wrapper* w = hipf_wrappers(order, NULL, 2);
  fx_elf_layout layout;
  fx_elf_opts o = {.bundles = bundles,
                   .bundle_count = 1,
                   .wrappers = w,
                   .wrapper_count = 2,
                   .layout = &layout};
  fx_buf elf = fx_elf(&o);
  free(w);
  kpack_fatbin_t* fb;
  size_t seg = layout.segment_offset;
  assert_memory_equal(elf.data + seg, "FPIH", 4);
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  kpack_fatbin_close(fb);

  uint64_t good = fx_get_le(&elf, seg + 32, 8);
  fx_set_le(&elf, seg + 32, 0x10, 8); /* below .hip_fatbin */
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, seg + 32, good + (1u << 20), 8); /* beyond it */
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, seg + 32, 0, 8); /* zero, no relocation */
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, seg + 32, good, 8);
  elf.data[seg + 24] = 'X'; /* magic */
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  free(elf.data);
  free_bundles(bundles, 1);
}

static void test_elf_without_fatbin_has_no_bundles(void** state) {
  (void)state;
  fx_elf_opts o = {.no_fatbin = true};
  fx_buf elf = fx_elf(&o);
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  assert_false(info.has_fatbin);
  assert_int_equal(info.bundle_count, 0);
  kpack_fatbin_close(fb);
  free(elf.data);
}

static void test_not_an_elf_is_invalid(void** state) {
  (void)state;
  kpack_fatbin_t* fb;
  static const uint8_t elf32[64] = {0x7f, 'E', 'L', 'F', 1, 1, 1};
  static const uint8_t big[64] = {0x7f, 'E', 'L', 'F', 2, 2, 1};
  assert_int_equal(kpack_fatbin_open_memory("hello", 5, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_int_equal(kpack_fatbin_open_memory(elf32, 64, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_int_equal(kpack_fatbin_open_memory(big, 64, &fb),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_int_equal(kpack_fatbin_open_memory(NULL, 64, &fb),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_fatbin_open_memory(big, 64, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

/* Opens every prefix and every one-byte corruption of the ELF and reads all
 * bundles it then reports: any status but never a crash or an overread. */
static void test_damaged_elf_never_crashes(void** state) {
  (void)state;
  fx_buf bundles[2] = {numbered_bundle(0, 2, FX_ZSTD),
                       numbered_bundle(1, 0, 0)};
  size_t order[2] = {0, 1};
  fx_ptr how[2] = {FX_PTR_RELATIVE, FX_PTR_ABS64};
  fx_buf elf = fatbin_elf(bundles, 2, order, how, 2, FX_ET_DYN);
  size_t opened = 0;
  for (size_t n = 0; n <= elf.size;
       n += n < 128 || n > elf.size - 600 ? 1 : 61) {
    for (int flip = -1; flip < 64; flip += 8) {
      uint8_t* image = exact_copy(elf.data, n);
      /* Corrupt a byte of the header or, near the end, of the tables. */
      if (flip >= 0 && n > 0) {
        size_t at = n < 128 ? (size_t)flip % n : n - 1 - (size_t)flip * 7 % n;
        image[at] ^= 0xa5;
      }
      kpack_fatbin_t* fb;
      kpack_fatbin_info_t info;
      if (kpack_fatbin_open_memory(image, n, &fb) == KPACK_SUCCESS) {
        opened++;
        assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
        for (size_t i = 0; i < info.bundle_count; i++) {
          kpack_bundle_t* bundle;
          if (kpack_fatbin_get_bundle(fb, i, &bundle) == KPACK_SUCCESS)
            kpack_bundle_free(bundle);
        }
        kpack_fatbin_close(fb);
      }
      free(image);
    }
  }
  assert_true(opened > 0); /* the intact image at least */
  free(elf.data);
  free_bundles(bundles, 2);
}

static void test_open_file_matches_memory_and_reports_errors(void** state) {
  (void)state;
  fx_buf bundles[2] = {numbered_bundle(0, 0, 0),
                       numbered_bundle(1, 3, FX_ZSTD)};
  size_t order[2] = {1, 0};
  fx_ptr how[2] = {FX_PTR_RELATIVE, FX_PTR_RELATIVE};
  fx_buf elf = fatbin_elf(bundles, 2, order, how, 2, FX_ET_DYN);
  char* dir = kt_tmpdir();
  char* path = kt_path(dir, "libfoo.so");
  char* missing = kt_path(dir, "missing.so");
  kt_write_file(path, elf.data, elf.size);
  kpack_fatbin_t* fb;
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
  expect_bundle(fb, 0, 1);
  expect_bundle(fb, 1, 0);
  kpack_fatbin_close(fb);
  assert_int_equal(kpack_fatbin_open(missing, &fb), KPACK_ERROR_FILE_NOT_FOUND);
  assert_null(fb);
  assert_int_equal(kpack_fatbin_open(dir, &fb), KPACK_ERROR_IO_ERROR);
  assert_int_equal(kpack_fatbin_open(NULL, &fb), KPACK_ERROR_INVALID_ARGUMENT);
  char* fifo = kt_path(dir, "fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(kpack_fatbin_open(fifo, &fb), KPACK_ERROR_IO_ERROR);
  free(fifo);
  kt_write_file(path, "#!/bin/sh\n", 10);
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_ERROR_INVALID_FORMAT);
  kt_rmtree(dir);
  free(dir);
  free(path);
  free(missing);
  free(elf.data);
  free_bundles(bundles, 2);
}

/* ---- streaming: entry tables and one code object at a time --------------- */

/* Lists every bundle of `fb` and checks each entry against the parsed
 * bundle: same IDs, arches and sizes, no data until read, the same bytes
 * when read. */
static void expect_listing_matches_parse(const kpack_fatbin_t* fb) {
  kpack_fatbin_info_t info;
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  for (size_t co = 0; co < info.bundle_count; co++) {
    kpack_bundle_t *listed, *parsed;
    kpack_bundle_info_t li, pi;
    assert_int_equal(kpack_fatbin_list_bundle(fb, co, &listed), KPACK_SUCCESS);
    assert_int_equal(kpack_fatbin_get_bundle(fb, co, &parsed), KPACK_SUCCESS);
    assert_int_equal(kpack_bundle_get_info(listed, &li), KPACK_SUCCESS);
    assert_int_equal(kpack_bundle_get_info(parsed, &pi), KPACK_SUCCESS);
    assert_int_equal(li.compression, pi.compression);
    assert_int_equal(li.ccob_version, pi.ccob_version);
    assert_int_equal(li.extent, pi.extent);
    assert_int_equal(li.bundle_size, pi.bundle_size);
    assert_int_equal(li.entry_count, pi.entry_count);
    for (size_t i = 0; i < li.entry_count; i++) {
      kpack_bundle_entry_t le, pe;
      assert_int_equal(kpack_bundle_get_entry(listed, i, &le), KPACK_SUCCESS);
      assert_int_equal(kpack_bundle_get_entry(parsed, i, &pe), KPACK_SUCCESS);
      assert_string_equal(le.id, pe.id);
      assert_true((le.arch == NULL) == (pe.arch == NULL));
      assert_int_equal(le.size, pe.size);
      assert_null(le.data);
      /* One byte of room more than needed is fine; it stays untouched. */
      uint8_t* buf = malloc((size_t)le.size + 1);
      assert_non_null(buf);
      buf[le.size] = 0xee;
      assert_int_equal(kpack_bundle_read_entry(listed, i, buf, le.size + 1),
                       KPACK_SUCCESS);
      assert_memory_equal(buf, pe.data, (size_t)le.size);
      assert_int_equal(buf[le.size], 0xee);
      /* A parsed bundle reads the same way. */
      memset(buf, 0, (size_t)le.size);
      assert_int_equal(kpack_bundle_read_entry(parsed, i, buf, le.size),
                       KPACK_SUCCESS);
      assert_memory_equal(buf, pe.data, (size_t)le.size);
      free(buf);
    }
    kpack_bundle_free(listed);
    kpack_bundle_free(parsed);
  }
}

static void test_listed_bundles_read_entries_like_parsed_ones(void** state) {
  (void)state;
  /* Every envelope, located through wrappers and by walking. */
  fx_buf bundles[7] = {
      numbered_bundle(0, 0, 0),       numbered_bundle(1, 1, FX_ZLIB),
      numbered_bundle(2, 1, FX_ZSTD), numbered_bundle(3, 2, FX_ZLIB),
      numbered_bundle(4, 2, FX_ZSTD), numbered_bundle(5, 3, FX_ZLIB),
      numbered_bundle(6, 3, FX_ZSTD)};
  size_t order[7] = {6, 5, 4, 3, 2, 1, 0};
  fx_ptr how[7] = {FX_PTR_RELATIVE, FX_PTR_FILE,     FX_PTR_ABS64,
                   FX_PTR_RELATIVE, FX_PTR_RELATIVE, FX_PTR_ABS64_SECTION,
                   FX_PTR_FILE};
  char* dir = kt_tmpdir();
  for (int walk = 0; walk <= 1; walk++) {
    fx_buf elf = fatbin_elf(bundles, 7, order, how, walk ? 0 : 7, FX_ET_DYN);
    char* path = kt_path(dir, walk ? "walked.so" : "wrapped.so");
    kt_write_file(path, elf.data, elf.size);
    kpack_fatbin_t* fb;
    assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
    expect_listing_matches_parse(fb);
    kpack_fatbin_close(fb);
    assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                     KPACK_SUCCESS);
    expect_listing_matches_parse(fb);
    kpack_fatbin_close(fb);
    free(path);
    free(elf.data);
  }
  kt_rmtree(dir);
  free(dir);
  free_bundles(bundles, 7);
}

static void test_read_entry_arguments_are_checked(void** state) {
  (void)state;
  fx_buf bundles[1] = {numbered_bundle(0, 0, 0)};
  fx_buf elf = fatbin_elf(bundles, 1, NULL, NULL, 0, FX_ET_DYN);
  kpack_fatbin_t* fb;
  kpack_bundle_t* b = (kpack_bundle_t*)1;
  uint8_t buf[2000];
  assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_list_bundle(fb, 1, &b),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(b);
  assert_int_equal(kpack_fatbin_list_bundle(NULL, 0, &b),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_fatbin_list_bundle(fb, 0, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_fatbin_list_bundle(fb, 0, &b), KPACK_SUCCESS);
  /* Entry 1 holds 1000 bytes. */
  assert_int_equal(kpack_bundle_read_entry(b, 1, buf, 999),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_bundle_read_entry(b, 3, buf, sizeof(buf)),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_bundle_read_entry(b, 1, NULL, sizeof(buf)),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_bundle_read_entry(NULL, 1, buf, sizeof(buf)),
                   KPACK_ERROR_INVALID_ARGUMENT);
  /* The empty host entry reads as nothing. */
  assert_int_equal(kpack_bundle_read_entry(b, 0, buf, 0), KPACK_SUCCESS);
  kpack_bundle_free(b);
  kpack_fatbin_close(fb);
  free(elf.data);
  free_bundles(bundles, 1);
}

/* A compressed bundle whose table promises more than its payload holds:
 * the table lists (it lies within the declared size), but an entry past the
 * real end cannot be read, and the whole bundle does not parse. */
static void test_compressed_bundle_shorter_than_declared_fails_on_read(
    void** state) {
  (void)state;
  for (unsigned method = FX_ZLIB; method <= FX_ZSTD; method++) {
    fx_buf plain = numbered_bundle(0, 0, 0);
    /* Entry 2's fixed fields follow the header and entries 0 and 1. */
    size_t last = 32 + 24 + strlen(host_id) + 24 +
                  strlen("hipv4-amdgcn-amd-amdhsa--gfx90a");
    assert_int_equal(fx_get_le(&plain, last + 8, 8), 500);
    fx_set_le(&plain, last + 8, 500 + 64, 8); /* 64 bytes past the end */
    fx_buf ccob = fx_ccob(3, method, &plain);
    fx_set_le(&ccob, 16, plain.size + 64, 8); /* declared size */
    fx_buf elf = fatbin_elf(&ccob, 1, NULL, NULL, 0, FX_ET_DYN);
    kpack_fatbin_t* fb;
    kpack_bundle_t *b, *whole;
    uint8_t buf[1024];
    assert_int_equal(kpack_fatbin_open_memory(elf.data, elf.size, &fb),
                     KPACK_SUCCESS);
    assert_int_equal(kpack_fatbin_list_bundle(fb, 0, &b), KPACK_SUCCESS);
    assert_int_equal(kpack_bundle_read_entry(b, 1, buf, sizeof(buf)),
                     KPACK_SUCCESS);
    void* want = kt_pattern(1000, 100);
    assert_memory_equal(buf, want, 1000);
    free(want);
    assert_int_equal(kpack_bundle_read_entry(b, 2, buf, sizeof(buf)),
                     KPACK_ERROR_DECOMPRESSION_FAILED);
    assert_int_equal(kpack_fatbin_get_bundle(fb, 0, &whole),
                     KPACK_ERROR_DECOMPRESSION_FAILED);
    kpack_bundle_free(b);
    kpack_fatbin_close(fb);
    free(elf.data);
    free(ccob.data);
    free(plain.data);
  }
}

static void test_file_truncated_after_listing_is_io_error(void** state) {
  (void)state;
  fx_buf bundles[2] = {numbered_bundle(0, 0, 0),
                       numbered_bundle(1, 2, FX_ZSTD)};
  fx_buf elf = fatbin_elf(bundles, 2, NULL, NULL, 0, FX_ET_DYN);
  char* dir = kt_tmpdir();
  char* path = kt_path(dir, "lib.so");
  kt_write_file(path, elf.data, elf.size);
  kpack_fatbin_t* fb;
  kpack_bundle_t *plain, *packed;
  uint8_t buf[2000];
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_list_bundle(fb, 0, &plain), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_list_bundle(fb, 1, &packed), KPACK_SUCCESS);
  assert_int_equal(truncate(path, 4096), 0); /* .hip_fatbin starts here */
  assert_int_equal(kpack_bundle_read_entry(plain, 1, buf, sizeof(buf)),
                   KPACK_ERROR_IO_ERROR);
  assert_int_equal(kpack_bundle_read_entry(packed, 1, buf, sizeof(buf)),
                   KPACK_ERROR_IO_ERROR);
  kpack_bundle_t* b = (kpack_bundle_t*)1;
  assert_int_equal(kpack_fatbin_get_bundle(fb, 0, &b), KPACK_ERROR_IO_ERROR);
  assert_null(b);
  kpack_bundle_free(plain);
  kpack_bundle_free(packed);
  kpack_fatbin_close(fb);
  kt_rmtree(dir);
  free(dir);
  free(path);
  free(elf.data);
  free_bundles(bundles, 2);
}

typedef struct reader_args {
  const kpack_bundle_t* bundle;
  size_t entry;
  const void* want;
  size_t size;
  int mismatches;
} reader_args;

static void* read_entry_repeatedly(void* arg) {
  reader_args* a = arg;
  uint8_t* buf = malloc(a->size);
  for (int i = 0; i < 50 && buf != NULL; i++)
    if (kpack_bundle_read_entry(a->bundle, a->entry, buf, a->size) !=
            KPACK_SUCCESS ||
        memcmp(buf, a->want, a->size) != 0)
      a->mismatches++;
  free(buf);
  return NULL;
}

static void test_entries_of_one_bundle_read_from_several_threads(void** state) {
  (void)state;
  fx_buf bundles[2] = {numbered_bundle(0, 0, 0),
                       numbered_bundle(1, 3, FX_ZSTD)};
  fx_buf elf = fatbin_elf(bundles, 2, NULL, NULL, 0, FX_ET_DYN);
  char* dir = kt_tmpdir();
  char* path = kt_path(dir, "lib.so");
  kt_write_file(path, elf.data, elf.size);
  kpack_fatbin_t* fb;
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
  kpack_bundle_t* listed[2];
  void* want[2][2];
  reader_args args[4];
  pthread_t t[4];
  for (size_t co = 0; co < 2; co++) {
    assert_int_equal(kpack_fatbin_list_bundle(fb, co, &listed[co]),
                     KPACK_SUCCESS);
    want[co][0] = kt_pattern(1000 + co, 100 + (uint32_t)co);
    want[co][1] = kt_pattern(500 + co, 200 + (uint32_t)co);
  }
  for (size_t i = 0; i < 4; i++) {
    size_t co = i / 2, e = i % 2;
    args[i] =
        (reader_args){listed[co], 1 + e, want[co][e], (e ? 500 : 1000) + co, 0};
    assert_int_equal(
        pthread_create(&t[i], NULL, read_entry_repeatedly, &args[i]), 0);
  }
  for (size_t i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(args[i].mismatches, 0);
  }
  for (size_t co = 0; co < 2; co++) {
    kpack_bundle_free(listed[co]);
    free(want[co][0]);
    free(want[co][1]);
  }
  kpack_fatbin_close(fb);
  kt_rmtree(dir);
  free(dir);
  free(path);
  free(elf.data);
  free_bundles(bundles, 2);
}

/* Peak resident memory since the last reset, in KiB (Linux VmHWM). */
static long peak_rss_kib(void) {
  char line[256];
  long kib = -1;
  FILE* f = fopen("/proc/self/status", "r");
  assert_non_null(f);
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
      break;
  fclose(f);
  return kib;
}

static void reset_peak_rss(void) {
  FILE* f = fopen("/proc/self/clear_refs", "w");
  assert_non_null(f);
  assert_true(fputs("5", f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* Bundles 256 MiB apart (a sparse file): opening, listing and reading every
 * code object one at a time, through wrappers and by walking, stays within
 * a few MiB of memory however large .hip_fatbin is. */
static void test_large_fat_binary_is_read_without_holding_it(void** state) {
  (void)state;
  fx_buf bundles[3] = {numbered_bundle(0, 0, 0), numbered_bundle(1, 0, 0),
                       numbered_bundle(2, 3, FX_ZSTD)};
  size_t order[3] = {0, 1, 2};
  fx_wrapper* w = hipf_wrappers(order, NULL, 3);
  char* dir = kt_tmpdir();
  char* path = kt_path(dir, "huge.so");
  for (int walk = 0; walk <= 1; walk++) {
    fx_elf_opts o = {.bundles = bundles,
                     .bundle_count = 3,
                     .bundle_align = (size_t)256 << 20,
                     .wrappers = w,
                     .wrapper_count = walk ? 0 : 3};
    fx_write_elf(path, &o);
    reset_peak_rss();
    long before = peak_rss_kib();
    kpack_fatbin_t* fb;
    kpack_fatbin_info_t info;
    assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
    assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
    assert_true(info.fatbin_size > (uint64_t)512 << 20);
    assert_int_equal(info.bundle_count, 3);
    for (size_t co = 0; co < 3; co++) {
      kpack_bundle_t* b;
      kpack_bundle_entry_t e;
      uint8_t buf[1100];
      assert_int_equal(kpack_fatbin_list_bundle(fb, co, &b), KPACK_SUCCESS);
      assert_int_equal(kpack_bundle_get_entry(b, 1, &e), KPACK_SUCCESS);
      assert_int_equal(kpack_bundle_read_entry(b, 1, buf, sizeof(buf)),
                       KPACK_SUCCESS);
      void* want = kt_pattern(1000 + co, 100 + (uint32_t)co);
      assert_memory_equal(buf, want, e.size);
      free(want);
      kpack_bundle_free(b);
      expect_bundle(fb, co, co);
    }
    kpack_fatbin_close(fb);
    long grown = peak_rss_kib() - before;
    if (grown > 16 * 1024)
      fail_msg("reading a %llu MiB .hip_fatbin grew the peak RSS by %ld KiB",
               (unsigned long long)(info.fatbin_size >> 20), grown);
  }
  free(w);
  kt_rmtree(dir);
  free(dir);
  free(path);
  free_bundles(bundles, 3);
}

/* ---- real data ----------------------------------------------------------- */

static void test_real_librocrand_fat_binary(void** state) {
  (void)state;
  static const char* const expected[] = {
      "gfx1030",       "gfx803",        "gfx900:xnack-", "gfx906:xnack-",
      "gfx908:xnack-", "gfx90a:xnack+", "gfx90a:xnack-"};
  char* path = kt_librocrand();
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  kpack_bundle_t* bundle;
  kpack_bundle_info_t binfo;
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  assert_true(info.has_fatbin);
  assert_true(info.has_wrappers); /* one wrapper, via R_X86_64_RELATIVE */
  assert_int_equal(info.machine, 62);
  assert_int_equal(info.bundle_count, 1);
  assert_int_equal(kpack_fatbin_get_bundle(fb, 0, &bundle), KPACK_SUCCESS);
  assert_int_equal(kpack_bundle_get_info(bundle, &binfo), KPACK_SUCCESS);
  size_t device = 0;
  for (size_t i = 0; i < binfo.entry_count; i++) {
    kpack_bundle_entry_t e;
    assert_int_equal(kpack_bundle_get_entry(bundle, i, &e), KPACK_SUCCESS);
    if (e.arch == NULL) {
      assert_true(strncmp(e.id, "host-", 5) == 0);
      continue;
    }
    assert_true(device < 7);
    assert_string_equal(e.arch, expected[device]);
    device++;
    /* A real AMD GPU code object: ELF64, e_machine EM_AMDGPU. */
    const uint8_t* h = e.data;
    assert_true(e.size > 64);
    assert_memory_equal(h, "\177ELF\2\1", 6);
    assert_int_equal(h[18] | h[19] << 8, 224);
  }
  assert_int_equal(device, 7);
  kpack_bundle_free(bundle);
  kpack_fatbin_close(fb);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_bundle_lists_entries_and_target_ids),
      cmocka_unit_test(test_bundle_arguments_are_checked),
      cmocka_unit_test(test_target_id_spellings),
      cmocka_unit_test(test_truncated_plain_bundle_is_invalid_at_every_length),
      cmocka_unit_test(
          test_counts_offsets_and_sizes_that_do_not_fit_are_invalid),
      cmocka_unit_test(test_ccob_zstd_versions_1_to_3),
      cmocka_unit_test(test_ccob_zlib_versions_1_to_3),
      cmocka_unit_test(test_ccob_corrupt_payload_fails_decompression),
      cmocka_unit_test(test_ccob_wrong_declared_size_fails_decompression),
      cmocka_unit_test(test_ccob_total_size_must_fit),
      cmocka_unit_test(test_ccob_unknown_version_or_method_is_unsupported),
      cmocka_unit_test(test_ccob_around_ccob_is_invalid),
      cmocka_unit_test(test_truncated_ccob_never_succeeds),
      cmocka_unit_test(test_wrappers_number_code_objects),
      cmocka_unit_test(
          test_relocatable_object_resolves_wrappers_through_symbols),
      cmocka_unit_test(test_aarch64_relocations_and_section_symbols),
      cmocka_unit_test(test_without_segment_bundles_are_walked_in_order),
      cmocka_unit_test(test_garbage_between_walked_bundles_is_invalid),
      cmocka_unit_test(test_bad_wrappers_are_invalid),
      cmocka_unit_test(test_elf_without_fatbin_has_no_bundles),
      cmocka_unit_test(test_not_an_elf_is_invalid),
      cmocka_unit_test(test_damaged_elf_never_crashes),
      cmocka_unit_test(test_open_file_matches_memory_and_reports_errors),
      cmocka_unit_test(test_listed_bundles_read_entries_like_parsed_ones),
      cmocka_unit_test(test_read_entry_arguments_are_checked),
      cmocka_unit_test(
          test_compressed_bundle_shorter_than_declared_fails_on_read),
      cmocka_unit_test(test_file_truncated_after_listing_is_io_error),
      cmocka_unit_test(test_entries_of_one_bundle_read_from_several_threads),
      cmocka_unit_test(test_large_fat_binary_is_read_without_holding_it),
      cmocka_unit_test(test_real_librocrand_fat_binary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
