/* SPDX-License-Identifier: MIT
 *
 * Builds HIP fat binary inputs byte by byte for the bundle reader and CLI
 * tests: plain clang offload bundles, CCOB envelopes (zlib, zstd; versions
 * 1-3) and x86-64 ELF files holding them in .hip_fatbin, with or without a
 * .hipFatBinSegment of __CudaFatBinaryWrapper records and the relocations a
 * linker would emit for them. Header-only so each suite takes what it uses.
 */
#ifndef KPACK_TESTS_FATBIN_FIXTURE_H
#define KPACK_TESTS_FATBIN_FIXTURE_H

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "support.h"

#define FX_FN static __attribute__((unused))

typedef struct fx_buf {
  uint8_t* data;
  size_t size;
} fx_buf;

FX_FN void fx_put(fx_buf* b, const void* data, size_t size) {
  b->data = realloc(b->data, b->size + size + 1);
  assert_non_null(b->data);
  if (size > 0)
    memcpy(b->data + b->size, data, size);
  b->size += size;
}

FX_FN void fx_le(fx_buf* b, uint64_t v, unsigned n) {
  uint8_t bytes[8];
  for (unsigned i = 0; i < n; i++)
    bytes[i] = (uint8_t)(v >> (8 * i));
  fx_put(b, bytes, n);
}

FX_FN void fx_align(fx_buf* b, size_t align) {
  static const uint8_t zero[4096];
  while (b->size % align != 0) {
    size_t n = align - b->size % align;
    fx_put(b, zero, n < sizeof(zero) ? n : sizeof(zero));
  }
}

FX_FN void fx_set_le(fx_buf* b, size_t at, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    b->data[at + i] = (uint8_t)(v >> (8 * i));
}

FX_FN uint64_t fx_get_le(const fx_buf* b, size_t at, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = n; i-- > 0;)
    v = (v << 8) | b->data[at + i];
  return v;
}

typedef struct fx_entry {
  const char* id;
  const void* data;
  size_t size;
} fx_entry;

/* A plain bundle: header and entry table, then each code object 16-byte
 * aligned, the last one ending the bundle. */
FX_FN fx_buf fx_bundle(const fx_entry* e, size_t n) {
  fx_buf b = {0};
  size_t table = 32;
  for (size_t i = 0; i < n; i++)
    table += 24 + strlen(e[i].id);
  size_t at = (table + 15) & ~(size_t)15;
  fx_put(&b, "__CLANG_OFFLOAD_BUNDLE__", 24);
  fx_le(&b, n, 8);
  for (size_t i = 0; i < n; i++) {
    fx_le(&b, e[i].size ? at : 0, 8);
    fx_le(&b, e[i].size, 8);
    fx_le(&b, strlen(e[i].id), 8);
    fx_put(&b, e[i].id, strlen(e[i].id));
    if (e[i].size)
      at = (at + e[i].size + 15) & ~(size_t)15;
  }
  for (size_t i = 0; i < n; i++) {
    if (e[i].size == 0)
      continue;
    fx_align(&b, 16);
    fx_put(&b, e[i].data, e[i].size);
  }
  return b;
}

#define FX_ZLIB 0u
#define FX_ZSTD 1u

/* A CCOB envelope around `plain`; the hash field is left zero. zstd frames
 * carry a checksum so that a flipped byte is always detected. */
FX_FN fx_buf fx_ccob(unsigned version, unsigned method, const fx_buf* plain) {
  fx_buf b = {0}, z = {0};
  if (method == FX_ZSTD) {
    z.data = malloc(ZSTD_compressBound(plain->size));
    assert_non_null(z.data);
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    z.size = ZSTD_compress2(cctx, z.data, ZSTD_compressBound(plain->size),
                            plain->data, plain->size);
    assert_false(ZSTD_isError(z.size));
    ZSTD_freeCCtx(cctx);
  } else {
    uLongf n = compressBound(plain->size);
    z.data = malloc(n);
    assert_non_null(z.data);
    assert_int_equal(compress2(z.data, &n, plain->data, plain->size, 6), Z_OK);
    z.size = n;
  }
  size_t header = version == 1 ? 20 : version == 2 ? 24 : 32;
  fx_put(&b, "CCOB", 4);
  fx_le(&b, version, 2);
  fx_le(&b, method, 2);
  if (version == 2)
    fx_le(&b, header + z.size, 4);
  if (version >= 3)
    fx_le(&b, header + z.size, 8);
  fx_le(&b, plain->size, version >= 3 ? 8 : 4);
  fx_le(&b, 0, 8);
  fx_put(&b, z.data, z.size);
  free(z.data);
  return b;
}

/* How a wrapper's bundle address reaches the loader. */
typedef enum {
  FX_PTR_FILE,     /* stored in the wrapper itself */
  FX_PTR_RELATIVE, /* zero, filled by R_X86_64_RELATIVE (addend = address) */
  FX_PTR_ABS64,    /* zero, filled by R_X86_64_64 against a symbol */
} fx_ptr;

typedef struct fx_elf_opts {
  const fx_buf* bundles; /* laid out in .hip_fatbin, 4096-aligned */
  size_t bundle_count;
  bool segment;                 /* emit .hipFatBinSegment */
  const size_t* wrapper_bundle; /* bundle each wrapper points at */
  const fx_ptr* how;            /* per wrapper; NULL: all FX_PTR_FILE */
  size_t wrapper_count;
  bool relocatable; /* ET_REL: section addresses 0, relocations relative */
} fx_elf_opts;

#define FX_VADDR 0x400000u /* file offset + this = address (ET_DYN) */

typedef struct fx_section {
  const char* name;
  uint32_t type;
  uint64_t offset, size, align, entsize;
  uint32_t link, info;
} fx_section;

/* A 64-bit x86-64 ELF holding the bundles. Sections: null, .hip_fatbin,
 * [.hipFatBinSegment, .rela.dyn, .dynsym], .shstrtab. */
FX_FN fx_buf fx_elf(const fx_elf_opts* o) {
  fx_buf b = {0};
  fx_section s[6];
  size_t n = 0, bundle_at[16];
  bool rel = o->relocatable;
  assert_true(o->bundle_count <= 16);
  memset(s, 0, sizeof(s));
  fx_put(&b, (uint8_t[64]){0}, 64); /* the ELF header, filled in last */

  s[n++] = (fx_section){.name = ""};
  fx_align(&b, 4096);
  size_t fat_index = n, fat_start = b.size;
  for (size_t i = 0; i < o->bundle_count; i++) {
    fx_align(&b, 4096);
    bundle_at[i] = b.size - fat_start;
    fx_put(&b, o->bundles[i].data, o->bundles[i].size);
  }
  s[n++] = (fx_section){".hip_fatbin", 1, fat_start, b.size - fat_start,
                        4096,          0, 0,         0};
  uint64_t fat_addr = rel ? 0 : FX_VADDR + fat_start;

  size_t seg_index = 0, sym_index = 0;
  if (o->segment) {
    fx_align(&b, 8);
    size_t seg_start = b.size;
    uint64_t seg_addr = rel ? 0 : FX_VADDR + seg_start;
    for (size_t w = 0; w < o->wrapper_count; w++) {
      fx_ptr how = o->how ? o->how[w] : FX_PTR_FILE;
      uint64_t target = fat_addr + bundle_at[o->wrapper_bundle[w]];
      fx_le(&b, 0x48495046u, 4);
      fx_le(&b, 1, 4);
      fx_le(&b, how == FX_PTR_FILE ? target : 0, 8);
      fx_le(&b, 0, 8);
    }
    seg_index = n;
    s[n++] = (fx_section){
        ".hipFatBinSegment", 1, seg_start, b.size - seg_start, 8, 0, 0, 0};
    /* Symbols: null, then one per wrapper at its bundle (section-relative
     * values in a relocatable object). */
    fx_align(&b, 8);
    size_t sym_start = b.size;
    fx_put(&b, (uint8_t[24]){0}, 24);
    for (size_t w = 0; w < o->wrapper_count; w++) {
      fx_le(&b, 0, 4);
      fx_le(&b, 0x01, 1); /* STB_LOCAL, STT_OBJECT */
      fx_le(&b, 0, 1);
      fx_le(&b, fat_index, 2);
      fx_le(&b, (rel ? 0 : fat_addr) + bundle_at[o->wrapper_bundle[w]], 8);
      fx_le(&b, 0, 8);
    }
    size_t rela_start = b.size;
    for (size_t w = 0; w < o->wrapper_count; w++) {
      fx_ptr how = o->how ? o->how[w] : FX_PTR_FILE;
      uint64_t where = seg_addr + w * 24 + 8;
      if (how == FX_PTR_RELATIVE) {
        fx_le(&b, where, 8);
        fx_le(&b, 8, 8); /* R_X86_64_RELATIVE */
        fx_le(&b, fat_addr + bundle_at[o->wrapper_bundle[w]], 8);
      } else if (how == FX_PTR_ABS64) {
        fx_le(&b, where, 8);
        fx_le(&b, ((uint64_t)(w + 1) << 32) | 1, 8); /* R_X86_64_64 */
        fx_le(&b, 0, 8);
      }
    }
    sym_index = n + 1;
    s[n++] = (fx_section){
        ".rela.dyn", 4,  rela_start,          b.size - rela_start,
        8,           24, (uint32_t)sym_index, rel ? (uint32_t)seg_index : 0};
    s[n++] = (fx_section){".dynsym", 11, sym_start, rela_start - sym_start,
                          8,         24, 0,         1};
  }

  size_t names_start = b.size;
  size_t name_at[6];
  for (size_t i = 0; i < n; i++) {
    name_at[i] = b.size - names_start;
    fx_put(&b, s[i].name, strlen(s[i].name) + 1);
  }
  size_t names_index = n;
  name_at[n] = b.size - names_start;
  fx_put(&b, ".shstrtab", 10);
  s[n++] = (fx_section){".shstrtab", 3, names_start, b.size - names_start,
                        1,           0, 0,           0};

  fx_align(&b, 8);
  size_t shoff = b.size;
  for (size_t i = 0; i < n; i++) {
    fx_le(&b, i ? name_at[i] : 0, 4);
    fx_le(&b, s[i].type, 4);
    fx_le(&b, i == fat_index || i == seg_index ? 2 : 0, 8); /* SHF_ALLOC */
    fx_le(&b, rel || i == 0 || s[i].type == 3 ? 0 : FX_VADDR + s[i].offset, 8);
    fx_le(&b, s[i].offset, 8);
    fx_le(&b, s[i].size, 8);
    fx_le(&b, s[i].link, 4);
    fx_le(&b, s[i].info, 4);
    fx_le(&b, s[i].align, 8);
    fx_le(&b, s[i].entsize, 8);
  }

  memcpy(b.data, "\177ELF\2\1\1", 7);
  fx_set_le(&b, 16, rel ? 1 : 3, 2); /* ET_REL / ET_DYN */
  fx_set_le(&b, 18, 62, 2);          /* EM_X86_64 */
  fx_set_le(&b, 20, 1, 4);
  fx_set_le(&b, 40, shoff, 8);
  fx_set_le(&b, 52, 64, 2);
  fx_set_le(&b, 58, 64, 2);
  fx_set_le(&b, 60, n, 2);
  fx_set_le(&b, 62, names_index, 2);
  return b;
}

#endif /* KPACK_TESTS_FATBIN_FIXTURE_H */
