/* SPDX-License-Identifier: MIT
 *
 * The host binary reader (kpack_host.h): kpack-ified binaries with HIPK
 * records built by the fixture builder in every linked form (ET_DYN with
 * RELATIVE and ABS64 relocations, ET_EXEC with stored pointers, relocatable
 * objects, AArch64), fat binaries, and each malformed case with its
 * documented status; then search path resolution and the real librocrand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "support.h"

#define PATTERN "../.kpack/foo_@GFXARCH@.kpack"

/* Metadata blob i: kernel "lib/libfoo<i>.so", two search paths. */
static fx_buf sample_meta(size_t i) {
  char name[64];
  snprintf(name, sizeof name, "lib/libfoo%zu.so", i);
  const char* paths[] = {PATTERN, "/opt/rocm/.kpack/all.kpack"};
  return fx_hipk_metadata(name, paths, 2);
}

/* A kpack-ified binary of `n` HIPK records: record i points at blob
 * order[i] (blob j names lib/libfoo<j>.so) with co_index 10 + i. */
static fx_buf kpackified(uint16_t type, uint16_t machine, const fx_ptr* how,
                         const size_t* order, size_t n, fx_elf_layout* layout) {
  fx_buf refs[8];
  fx_wrapper w[8];
  assert_true(n <= 8);
  for (size_t i = 0; i < n; i++) {
    refs[i] = sample_meta(i);
    w[i] = (fx_wrapper){FX_HIPK_MAGIC, 1, order[i], how[i], 10 + i};
  }
  fx_elf_opts o = {.type = type,
                   .machine = machine,
                   .no_fatbin = true,
                   .refs = refs,
                   .ref_count = n,
                   .wrappers = w,
                   .wrapper_count = n,
                   .layout = layout};
  fx_buf elf = fx_elf(&o);
  for (size_t i = 0; i < n; i++)
    fx_free(&refs[i]);
  return elf;
}

/* Checks record i against kpackified(): blob order[i], co_index 10 + i. */
static void expect_record(const kpack_host_t* h, size_t i, size_t blob) {
  kpack_host_wrapper_t w;
  char name[64];
  snprintf(name, sizeof name, "lib/libfoo%zu.so", blob);
  assert_int_equal(kpack_host_get_wrapper(h, i, &w), KPACK_SUCCESS);
  assert_int_equal(w.magic, KPACK_HOST_HIPK_MAGIC);
  assert_int_equal(w.version, 1);
  assert_int_equal(w.reserved, 10 + i);
  assert_int_equal(w.problem, KPACK_HOST_OK);
  assert_int_equal(w.status, KPACK_SUCCESS);
  assert_string_equal(w.kernel_name, name);
  assert_int_equal(w.search_path_count, 2);
  assert_string_equal(w.search_paths[0], PATTERN);
  assert_string_equal(w.search_paths[1], "/opt/rocm/.kpack/all.kpack");
}

static kpack_host_t* open_image(const fx_buf* elf) {
  /* An exact-size copy: ASan and valgrind catch any read past it. */
  void* copy = malloc(elf->size);
  assert_non_null(copy);
  memcpy(copy, elf->data, elf->size);
  kpack_host_t* h = NULL;
  assert_int_equal(kpack_host_open_memory(copy, elf->size, &h), KPACK_SUCCESS);
  free(copy); /* the handle keeps nothing of the image */
  return h;
}

static void test_shared_object_records_come_from_relative_relocations(
    void** state) {
  (void)state;
  fx_ptr how[3] = {FX_PTR_RELATIVE, FX_PTR_RELATIVE, FX_PTR_RELATIVE};
  size_t order[3] = {2, 0, 1};
  fx_buf elf = kpackified(FX_ET_DYN, 0, how, order, 3, NULL);
  kpack_host_t* h = open_image(&elf);
  kpack_host_info_t info;
  assert_int_equal(kpack_host_get_info(h, &info), KPACK_SUCCESS);
  assert_int_equal(info.kind, KPACK_HOST_KPACKIFIED);
  assert_int_equal(info.elf_type, FX_ET_DYN);
  assert_int_equal(info.machine, FX_EM_X86_64);
  assert_int_equal(info.wrapper_count, 3);
  assert_false(info.has_fatbin);
  assert_true(info.has_kpack_ref);
  for (size_t i = 0; i < 3; i++)
    expect_record(h, i, order[i]);
  kpack_host_wrapper_t w;
  assert_int_equal(kpack_host_get_wrapper(h, 3, &w),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_host_get_wrapper(NULL, 0, &w),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_host_get_wrapper(h, 0, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_host_get_info(NULL, &info),
                   KPACK_ERROR_INVALID_ARGUMENT);
  kpack_host_close(h);
  kpack_host_close(NULL);
  fx_free(&elf);
}

static void test_every_linked_form_yields_the_same_records(void** state) {
  (void)state;
  static const struct {
    uint16_t type, machine;
    fx_ptr how[3];
  } forms[] = {
      /* Non-PIE executable: addresses stored in the file. */
      {FX_ET_EXEC, FX_EM_X86_64, {FX_PTR_FILE, FX_PTR_FILE, FX_PTR_FILE}},
      {FX_ET_DYN,
       FX_EM_X86_64,
       {FX_PTR_ABS64, FX_PTR_ABS64_SECTION, FX_PTR_FILE}},
      {FX_ET_DYN,
       FX_EM_AARCH64,
       {FX_PTR_RELATIVE, FX_PTR_ABS64, FX_PTR_ABS64_SECTION}},
      {FX_ET_REL,
       FX_EM_X86_64,
       {FX_PTR_ABS64, FX_PTR_ABS64_SECTION, FX_PTR_ABS64}},
  };
  size_t order[3] = {1, 2, 0};
  for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
    fx_buf elf = kpackified(forms[f].type, forms[f].machine, forms[f].how,
                            order, 3, NULL);
    kpack_host_t* h = open_image(&elf);
    kpack_host_info_t info;
    assert_int_equal(kpack_host_get_info(h, &info), KPACK_SUCCESS);
    assert_int_equal(info.kind, KPACK_HOST_KPACKIFIED);
    assert_int_equal(info.elf_type, forms[f].type);
    assert_int_equal(info.machine, forms[f].machine);
    for (size_t i = 0; i < 3; i++)
      expect_record(h, i, order[i]);
    kpack_host_close(h);
    fx_free(&elf);
  }
}

static void test_fat_and_plain_binaries_are_told_apart(void** state) {
  (void)state;
  uint8_t code[100] = {1, 2, 3};
  fx_entry e[] = {{"hipv4-amdgcn-amd-amdhsa--gfx90a", code, sizeof(code)}};
  fx_buf bundle = fx_bundle(e, 1);
  fx_wrapper w[1] = {{FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0}};
  fx_elf_opts fat = {
      .bundles = &bundle, .bundle_count = 1, .wrappers = w, .wrapper_count = 1};
  fx_buf elf = fx_elf(&fat);
  kpack_host_t* h = open_image(&elf);
  kpack_host_info_t info;
  kpack_host_wrapper_t rec;
  assert_int_equal(kpack_host_get_info(h, &info), KPACK_SUCCESS);
  assert_int_equal(info.kind, KPACK_HOST_FAT);
  assert_true(info.has_fatbin);
  assert_false(info.has_kpack_ref);
  assert_int_equal(info.wrapper_count, 1);
  assert_int_equal(kpack_host_get_wrapper(h, 0, &rec), KPACK_SUCCESS);
  assert_int_equal(rec.magic, KPACK_HOST_HIPF_MAGIC);
  assert_null(rec.kernel_name);
  assert_int_equal(rec.pointer, FX_VADDR + 4096); /* .hip_fatbin */
  kpack_host_close(h);
  fx_free(&elf);

  /* .hip_fatbin alone (bundles walked) is still fat. */
  fat.wrapper_count = 0;
  elf = fx_elf(&fat);
  h = open_image(&elf);
  assert_int_equal(kpack_host_get_info(h, &info), KPACK_SUCCESS);
  assert_int_equal(info.kind, KPACK_HOST_FAT);
  assert_int_equal(info.wrapper_count, 0);
  kpack_host_close(h);
  fx_free(&elf);

  /* Neither: an ordinary ELF. */
  fx_elf_opts none = {.no_fatbin = true};
  elf = fx_elf(&none);
  h = open_image(&elf);
  assert_int_equal(kpack_host_get_info(h, &info), KPACK_SUCCESS);
  assert_int_equal(info.kind, KPACK_HOST_NONE);
  kpack_host_close(h);
  fx_free(&elf);
  fx_free(&bundle);
}

/* Opens `elf` and returns record 0's status, checking its problem. */
static kpack_error_t record_problem(const fx_buf* elf,
                                    kpack_host_problem_t want) {
  kpack_host_t* h = open_image(elf);
  kpack_host_wrapper_t w;
  kpack_error_t err = kpack_host_get_wrapper(h, 0, &w);
  assert_int_equal(w.problem, want);
  assert_int_equal(w.status, err);
  if (err != KPACK_SUCCESS) {
    assert_null(w.kernel_name);
    assert_int_equal(w.search_path_count, 0);
  }
  /* The problem has words to say it. */
  assert_true(strlen(kpack_host_problem_string(w.problem)) > 8);
  kpack_host_close(h);
  return err;
}

static void test_malformed_records_report_their_problem(void** state) {
  (void)state;
  fx_ptr stored[2] = {FX_PTR_FILE, FX_PTR_FILE};
  fx_ptr relative[2] = {FX_PTR_RELATIVE, FX_PTR_RELATIVE};
  size_t order[2] = {0, 1};
  fx_elf_layout L;

  /* Bad magic. */
  fx_buf elf = kpackified(FX_ET_EXEC, 0, stored, order, 2, &L);
  assert_int_equal(record_problem(&elf, KPACK_HOST_OK), KPACK_SUCCESS);
  fx_set_le(&elf, L.segment_offset, 0x12345678, 4);
  assert_int_equal(record_problem(&elf, KPACK_HOST_BAD_MAGIC),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);

  /* A zero pointer that no relocation sets. */
  elf = kpackified(FX_ET_EXEC, 0, stored, order, 2, &L);
  fx_set_le(&elf, L.segment_offset + 8, 0, 8);
  assert_int_equal(record_problem(&elf, KPACK_HOST_NULL_POINTER),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);
  elf = kpackified(FX_ET_DYN, 0, relative, order, 2, &L);
  fx_set_le(&elf, L.rela_offset + 8, 0, 8); /* R_X86_64_NONE */
  assert_int_equal(record_problem(&elf, KPACK_HOST_NULL_POINTER),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);

  /* A pointer into no section at all, stored and relocated. */
  elf = kpackified(FX_ET_EXEC, 0, stored, order, 2, &L);
  fx_set_le(&elf, L.segment_offset + 8, 0x7fff0000, 8);
  assert_int_equal(record_problem(&elf, KPACK_HOST_OUTSIDE_SECTIONS),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);
  elf = kpackified(FX_ET_DYN, 0, relative, order, 2, &L);
  fx_set_le(&elf, L.rela_offset + 16, 0x10, 8); /* below every section */
  assert_int_equal(record_problem(&elf, KPACK_HOST_OUTSIDE_SECTIONS),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);

  /* A pointer into another section: the segment itself. */
  elf = kpackified(FX_ET_DYN, 0, relative, order, 2, &L);
  fx_set_le(&elf, L.rela_offset + 16, FX_VADDR + L.segment_offset, 8);
  assert_int_equal(record_problem(&elf, KPACK_HOST_OUTSIDE_KPACK_REF),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);

  /* Relocated against an undefined symbol. */
  fx_ptr abs64[2] = {FX_PTR_ABS64, FX_PTR_ABS64};
  elf = kpackified(FX_ET_DYN, 0, abs64, order, 2, &L);
  fx_set_le(&elf, L.symtab_offset + 3 * 24 + 6, 0, 2); /* SHN_UNDEF */
  assert_int_equal(record_problem(&elf, KPACK_HOST_UNDEFINED_SYMBOL),
                   KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);

  /* Metadata that is not a HIPK map: truncated by the section's end (the
   * last blob, cut short), and a map missing a key. */
  size_t last[2] = {1, 0};
  elf = kpackified(FX_ET_DYN, 0, relative, last, 2, &L);
  kpack_host_t* h = open_image(&elf);
  kpack_host_wrapper_t w;
  assert_int_equal(kpack_host_get_wrapper(h, 0, &w), KPACK_SUCCESS);
  uint64_t cut = L.refs_size - w.metadata_offset - 3;
  kpack_host_close(h);
  /* Shrink .rocm_kpack_ref (section 1, size at +32) by 3 bytes. */
  fx_set_le(&elf, L.shoff + L.refs_index * 64 + 32, w.metadata_offset + cut, 8);
  assert_int_equal(record_problem(&elf, KPACK_HOST_BAD_METADATA),
                   KPACK_ERROR_INVALID_METADATA);
  fx_free(&elf);

  fx_buf meta = {0};
  fx_le(&meta, 0x81, 1); /* {"kernel_name": "x"} */
  fx_le(&meta, 0xab, 1);
  fx_put(&meta, "kernel_name", 11);
  fx_le(&meta, 0xa1, 1);
  fx_put(&meta, "x", 1);
  fx_wrapper one = {FX_HIPK_MAGIC, 1, 0, FX_PTR_RELATIVE, 0};
  fx_elf_opts o = {.no_fatbin = true,
                   .refs = &meta,
                   .ref_count = 1,
                   .wrappers = &one,
                   .wrapper_count = 1};
  elf = fx_elf(&o);
  assert_int_equal(record_problem(&elf, KPACK_HOST_BAD_METADATA),
                   KPACK_ERROR_INVALID_METADATA);
  fx_free(&elf);
  fx_free(&meta);
}

/* One damaged record does not hide the others. */
static void test_one_bad_record_leaves_the_others_readable(void** state) {
  (void)state;
  fx_ptr how[3] = {FX_PTR_RELATIVE, FX_PTR_RELATIVE, FX_PTR_RELATIVE};
  size_t order[3] = {0, 1, 2};
  fx_elf_layout L;
  fx_buf elf = kpackified(FX_ET_DYN, 0, how, order, 3, &L);
  fx_set_le(&elf, L.segment_offset + 24, 0x46495048, 4); /* "HPIF" */
  kpack_host_t* h = open_image(&elf);
  kpack_host_wrapper_t w;
  expect_record(h, 0, 0);
  assert_int_equal(kpack_host_get_wrapper(h, 1, &w),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_int_equal(w.problem, KPACK_HOST_BAD_MAGIC);
  assert_int_equal(w.magic, 0x46495048);
  expect_record(h, 2, 2);
  kpack_host_close(h);
  fx_free(&elf);
}

static kpack_error_t open_status(const fx_buf* elf) {
  kpack_host_t* h = (kpack_host_t*)1;
  kpack_error_t err = kpack_host_open_memory(elf->data, elf->size, &h);
  if (err != KPACK_SUCCESS)
    assert_null(h);
  kpack_host_close(h);
  return err;
}

static void test_sections_that_do_not_fit_fail_the_open(void** state) {
  (void)state;
  fx_ptr how[2] = {FX_PTR_RELATIVE, FX_PTR_RELATIVE};
  size_t order[2] = {0, 1};
  fx_elf_layout L;
  fx_buf elf = kpackified(FX_ET_DYN, 0, how, order, 2, &L);
  assert_int_equal(open_status(&elf), KPACK_SUCCESS);
#define SHDR(index, field) (L.shoff + (index)*64 + (field))
  /* .rocm_kpack_ref past the end of the file. */
  fx_set_le(&elf, SHDR(L.refs_index, 24), elf.size, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, SHDR(L.refs_index, 24), L.refs_offset, 8);
  fx_set_le(&elf, SHDR(L.refs_index, 32), elf.size, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, SHDR(L.refs_index, 32), L.refs_size, 8);
  /* .hipFatBinSegment not whole records, or past the end. */
  fx_set_le(&elf, SHDR(L.segment_index, 32), 47, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, SHDR(L.segment_index, 32), 48, 8);
  fx_set_le(&elf, SHDR(L.segment_index, 24), elf.size - 24, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, SHDR(L.segment_index, 24), L.segment_offset, 8);
  /* A relocation section past the end, or not whole records. */
  fx_set_le(&elf, SHDR(L.rela_index, 32), L.rela_size + 24 * 1000, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, SHDR(L.rela_index, 32), L.rela_size - 1, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, SHDR(L.rela_index, 32), L.rela_size, 8);
  /* The section table itself past the end. */
  fx_set_le(&elf, 40, elf.size - 64, 8);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_set_le(&elf, 40, L.shoff, 8);
  assert_int_equal(open_status(&elf), KPACK_SUCCESS);
#undef SHDR
  fx_free(&elf);

  /* A relocation naming a symbol its table does not have. */
  fx_ptr abs64[2] = {FX_PTR_ABS64, FX_PTR_ABS64};
  elf = kpackified(FX_ET_DYN, 0, abs64, order, 2, &L);
  fx_set_le(&elf, L.rela_offset + 12, 99, 4);
  assert_int_equal(open_status(&elf), KPACK_ERROR_INVALID_FORMAT);
  fx_free(&elf);

  /* Not a 64-bit little-endian ELF. */
  fx_buf junk = {0};
  fx_put(&junk, "\177ELF\1\1\1", 7);
  fx_align(&junk, 64);
  assert_int_equal(open_status(&junk), KPACK_ERROR_INVALID_FORMAT);
  fx_free(&junk);
  kpack_host_t* h;
  assert_int_equal(kpack_host_open_memory(NULL, 10, &h),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_host_open_memory("x", 1, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

/* Every prefix and many one-byte corruptions: any status, never a crash,
 * and a record that reads has a kernel name. */
static void test_damaged_images_never_crash(void** state) {
  (void)state;
  fx_ptr how[3] = {FX_PTR_RELATIVE, FX_PTR_ABS64, FX_PTR_ABS64_SECTION};
  size_t order[3] = {0, 1, 2};
  fx_buf elf = kpackified(FX_ET_DYN, 0, how, order, 3, NULL);
  size_t opened = 0;
  for (size_t n = 0; n <= elf.size; n++) {
    for (int flip = -1; flip < 4; flip++) {
      uint8_t* image = malloc(n ? n : 1);
      assert_non_null(image);
      memcpy(image, elf.data, n);
      if (flip >= 0 && n > 0)
        image[(n * 7 + (size_t)flip * 131) % n] ^= 0x5a;
      kpack_host_t* h;
      kpack_host_info_t info;
      if (kpack_host_open_memory(image, n, &h) == KPACK_SUCCESS) {
        opened++;
        assert_int_equal(kpack_host_get_info(h, &info), KPACK_SUCCESS);
        for (size_t i = 0; i < info.wrapper_count; i++) {
          kpack_host_wrapper_t w;
          if (kpack_host_get_wrapper(h, i, &w) == KPACK_SUCCESS &&
              w.magic == KPACK_HOST_HIPK_MAGIC)
            assert_non_null(w.kernel_name);
        }
        kpack_host_close(h);
      }
      free(image);
    }
  }
  assert_true(opened > 0);
  fx_free(&elf);
}

static void test_open_file_matches_memory_and_reports_errors(void** state) {
  (void)state;
  fx_ptr how[2] = {FX_PTR_RELATIVE, FX_PTR_RELATIVE};
  size_t order[2] = {1, 0};
  fx_buf elf = kpackified(FX_ET_DYN, 0, how, order, 2, NULL);
  char* dir = kt_tmpdir();
  char* path = kt_path(dir, "libfoo.so");
  kt_write_file(path, elf.data, elf.size);
  kpack_host_t* h;
  assert_int_equal(kpack_host_open(path, &h), KPACK_SUCCESS);
  expect_record(h, 0, 1);
  expect_record(h, 1, 0);
  kpack_host_close(h);
  char* missing = kt_path(dir, "missing.so");
  assert_int_equal(kpack_host_open(missing, &h), KPACK_ERROR_FILE_NOT_FOUND);
  assert_null(h);
  assert_int_equal(kpack_host_open(dir, &h), KPACK_ERROR_IO_ERROR);
  char* fifo = kt_path(dir, "fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(kpack_host_open(fifo, &h), KPACK_ERROR_IO_ERROR);
  assert_int_equal(kpack_host_open(NULL, &h), KPACK_ERROR_INVALID_ARGUMENT);
  kt_write_file(path, "#!/bin/sh\n", 10);
  assert_int_equal(kpack_host_open(path, &h), KPACK_ERROR_INVALID_FORMAT);
  kt_rmtree(dir);
  free(fifo);
  free(missing);
  free(path);
  free(dir);
  fx_free(&elf);
}

static void test_search_paths_resolve_against_the_binary(void** state) {
  (void)state;
  char* r;
  assert_int_equal(
      kpack_resolve_search_path("/opt/rocm/lib/libfoo.so", PATTERN, &r),
      KPACK_SUCCESS);
  assert_string_equal(r, "/opt/rocm/.kpack/foo_@GFXARCH@.kpack");
  free(r);
  assert_int_equal(
      kpack_resolve_search_path("/opt/rocm/lib/libfoo.so", "/abs/x.kpack", &r),
      KPACK_SUCCESS);
  assert_string_equal(r, "/abs/x.kpack");
  free(r);
  /* A binary without a directory lies in the current one. */
  char cwd[4096], *want;
  assert_non_null(getcwd(cwd, sizeof(cwd)));
  assert_int_equal(kpack_resolve_search_path("libfoo.so", "./a/../b.kpack", &r),
                   KPACK_SUCCESS);
  assert_true(asprintf(&want, "%s/b.kpack", cwd) > 0);
  assert_string_equal(r, want);
  free(want);
  free(r);
  /* A library opened through a symlinked directory finds the archives of
   * the real tree, as ROCm's loader does. */
  char* dir = kt_tmpdir();
  char* real = realpath(dir, NULL);
  char *install, *view, *binary;
  assert_true(asprintf(&install, "%s/install/lib", dir) > 0);
  assert_true(asprintf(&view, "%s/view", dir) > 0);
  assert_true(asprintf(&binary, "%s/view/libx.so", dir) > 0);
  assert_true(asprintf(&want, "%s/install/.kpack/x_@GFXARCH@.kpack", real) > 0);
  char* mk;
  assert_true(asprintf(&mk, "mkdir -p '%s'", install) > 0);
  assert_int_equal(system(mk), 0);
  assert_int_equal(symlink(install, view), 0);
  assert_int_equal(
      kpack_resolve_search_path(binary, "../.kpack/x_@GFXARCH@.kpack", &r),
      KPACK_SUCCESS);
  assert_string_equal(r, want);
  free(r);
  kt_rmtree(dir);
  free(mk);
  free(want);
  free(binary);
  free(view);
  free(install);
  free(real);
  free(dir);
  assert_int_equal(kpack_resolve_search_path(NULL, "x", &r),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(r);
  assert_int_equal(kpack_resolve_search_path("x", NULL, &r),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_resolve_search_path("x", "y", NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_shared_object_records_come_from_relative_relocations),
      cmocka_unit_test(test_every_linked_form_yields_the_same_records),
      cmocka_unit_test(test_fat_and_plain_binaries_are_told_apart),
      cmocka_unit_test(test_malformed_records_report_their_problem),
      cmocka_unit_test(test_one_bad_record_leaves_the_others_readable),
      cmocka_unit_test(test_sections_that_do_not_fit_fail_the_open),
      cmocka_unit_test(test_damaged_images_never_crash),
      cmocka_unit_test(test_open_file_matches_memory_and_reports_errors),
      cmocka_unit_test(test_search_paths_resolve_against_the_binary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
