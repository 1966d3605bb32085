/* SPDX-License-Identifier: MIT
 *
 * The one ELF reader (libkpack/binary/elf_file.c) under the host and
 * fat-binary readers, on files the system toolchain makes: a shared object
 * linked with --emit-relocs, whose static relocations must not be taken for
 * dynamic ones; a relocatable object with more sections than the 16-bit section
 * index holds (symbols through SHT_SYMTAB_SHNDX); and truncated files, for
 * which the library and the tool say what is cut off and where.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "rocm_kpack/kpack_bundle.h"
#include "rocm_kpack/kpack_host.h"
#include "support.h"

/* Bundle b: one code object, for gfx906 (b == 0) or gfx90a (b == 1). */
static fx_buf arch_bundle(size_t b) {
  uint8_t data[2000];
  fx_fill_pattern(data, sizeof(data), (uint32_t)b + 1);
  fx_entry e = {b == 0 ? "hipv4-amdgcn-amd-amdhsa--gfx906"
                       : "hipv4-amdgcn-amd-amdhsa--gfx90a",
                data, sizeof(data)};
  return fx_bundle(&e, 1);
}

/* The arch of the only code object of the fat binary's bundle `co`. */
static char* bundle_arch(const char* path, size_t co) {
  kpack_fatbin_t* fb;
  kpack_bundle_t* b;
  kpack_bundle_entry_t e;
  assert_int_equal(kpack_fatbin_open(path, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_bundle(fb, co, &b), KPACK_SUCCESS);
  assert_int_equal(kpack_bundle_get_entry(b, 0, &e), KPACK_SUCCESS);
  char* arch = strdup(e.arch);
  kpack_bundle_free(b);
  kpack_fatbin_close(fb);
  return arch;
}

/* A linked file built with --emit-relocs keeps .rela.debug_info, whose
 * offsets are offsets in .debug_info, not addresses. One that equals the
 * address of record 0's pointer must not redirect the record. */
static void test_static_relocations_of_a_linked_file_are_ignored(void** s) {
  (void)s;
  char* dir = kt_tmpdir();
  char* so = kt_path(dir, "libfx.so");
  fx_buf bundles[2] = {arch_bundle(0), arch_bundle(1)};
  size_t target[2] = {1, 0}; /* record 0: gfx90a, record 1: gfx906 */
  fx_program_opts o = {.kind = FX_PROGRAM_SHARED,
                       .bundles = bundles,
                       .bundle_count = 2,
                       .target = target,
                       .emit_relocs = true};
  assert_true(fx_build_program(dir, &o, so));
  char* arch = bundle_arch(so, 0);
  assert_string_equal(arch, "gfx90a");
  free(arch);

  /* Record 1's RELATIVE addend is the gfx906 bundle's address; make the
   * first .rela.debug_info entry a RELATIVE at record 0's pointer. */
  size_t size;
  uint8_t* elf = kt_read_file(so, &size);
  uint8_t* seg = fx_section_header(elf, ".hipFatBinSegment");
  uint8_t* dyn = fx_section_header(elf, ".rela.dyn");
  uint8_t* dbg = fx_section_header(elf, ".rela.debug_info");
  uint64_t ptr0 = fx_load_le(seg + 16, 8) + 8, gfx906 = 0;
  for (uint64_t at = 0; at < fx_load_le(dyn + 32, 8); at += 24) {
    const uint8_t* r = elf + fx_load_le(dyn + 24, 8) + at;
    if (fx_load_le(r, 8) == ptr0 + 24)
      gfx906 = fx_load_le(r + 16, 8);
  }
  assert_int_not_equal(gfx906, 0);
  uint8_t* r = elf + fx_load_le(dbg + 24, 8);
  fx_store_le(r, ptr0, 8);
  fx_store_le(r + 8, 8 /* R_X86_64_RELATIVE */, 8);
  fx_store_le(r + 16, gfx906, 8);
  kt_write_file(so, elf, size);
  arch = bundle_arch(so, 0);
  assert_string_equal(arch, "gfx90a");
  free(arch);

  free(elf);
  fx_free(&bundles[0]);
  fx_free(&bundles[1]);
  kt_rmtree(dir);
  free(so);
  free(dir);
}

/* An object with 65,300 sections before .hip_fatbin: its index is past
 * SHN_LORESERVE, so the section symbol the record's R_X86_64_64 names
 * holds SHN_XINDEX and the real index sits in .symtab_shndx. */
static void test_symbols_past_the_reserved_indices_find_their_section(
    void** s) {
  (void)s;
  char* dir = kt_tmpdir();
  char* bin = kt_path(dir, "bundle.bin");
  char* src = kt_path(dir, "many.s");
  char* obj = kt_path(dir, "many.o");
  fx_buf bundle = arch_bundle(1);
  kt_write_file(bin, bundle.data, bundle.size);
  FILE* f = fopen(src, "w");
  assert_non_null(f);
  for (int i = 0; i < 65300; i++)
    fprintf(f, ".section .s%d,\"a\"\n.byte 0\n", i);
  fprintf(f,
          ".section .hip_fatbin,\"a\",@progbits\n.p2align 12\nfx_b0:\n"
          ".incbin \"%s\"\n"
          ".section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n"
          ".long 0x48495046\n.long 1\n.quad fx_b0\n.quad 0\n",
          bin);
  fclose(f);
  char* argv[] = {"as", "-o", obj, src, NULL};
  char* err = NULL;
  if (kt_run(argv, 120, NULL, &err) != 0)
    fail_msg("as: %s", err);
  free(err);
  char* arch = bundle_arch(obj, 0);
  assert_string_equal(arch, "gfx90a");
  free(arch);
  fx_free(&bundle);
  kt_rmtree(dir);
  free(bin);
  free(src);
  free(obj);
  free(dir);
}

/* A file cut inside its section header table: the reader says so, and so
 * does the tool. */
static void test_truncated_elf_says_what_and_where(void** s) {
  (void)s;
  char* dir = kt_tmpdir();
  char* path = kt_path(dir, "cut.so");
  fx_buf bundle = arch_bundle(0);
  fx_wrapper w = {.how = FX_PTR_RELATIVE};
  fx_elf_layout L;
  fx_elf_opts o = {.bundles = &bundle,
                   .bundle_count = 1,
                   .wrappers = &w,
                   .wrapper_count = 1,
                   .layout = &L};
  fx_buf elf = fx_elf(&o);
  kt_write_file(path, elf.data, L.shoff + 10);

  char why[256], want[200];
  snprintf(want, sizeof(want),
           "section header table at 0x%zx (%zu entries of 64 bytes) extends "
           "past end of file (%zu bytes): truncated?",
           L.shoff, L.shnum, L.shoff + 10);
  assert_int_equal(kpack_host_diagnose(path, why, sizeof(why)),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_string_equal(why, want);

  char* tool = kt_program("kpack");
  char* argv[] = {tool, "info", path, NULL};
  char *out = NULL, *err = NULL;
  assert_int_equal(kt_run(argv, 30, &out, &err), 1);
  if (strstr(err, want) == NULL || strstr(err, path) == NULL)
    fail_msg("kpack info: %s", err);
  free(out);
  free(err);

  /* The whole file reads; its records are whole. */
  kt_write_file(path, elf.data, elf.size);
  assert_int_equal(kpack_host_diagnose(path, why, sizeof(why)), KPACK_SUCCESS);
  assert_string_equal(why, "");

  free(tool);
  fx_free(&elf);
  fx_free(&bundle);
  kt_rmtree(dir);
  free(path);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_static_relocations_of_a_linked_file_are_ignored),
      cmocka_unit_test(
          test_symbols_past_the_reserved_indices_find_their_section),
      cmocka_unit_test(test_truncated_elf_says_what_and_where),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
