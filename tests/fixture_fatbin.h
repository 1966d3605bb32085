/* SPDX-License-Identifier: MIT
 *
 * The one builder of HIP host-binary inputs, shared by the cmocka suites, the
 * fuzz corpus generator (make_corpus) and the benchmark, so that they cannot
 * drift apart: code-object-like bytes, clang offload bundles, CCOB envelopes
 * (zlib or zstd, versions 1-3), HIPK metadata, and 64-bit little-endian host
 * ELF files (x86-64 or AArch64; ET_DYN, ET_EXEC or ET_REL) that hold bundles
 * in .hip_fatbin behind HIPF wrappers, or are kpack-ified (HIPK wrappers
 * pointing into .rocm_kpack_ref), with the relocations a linker emits for
 * wrapper pointers. A streaming generator writes fat binaries of any size
 * straight to a file, holding one bundle at a time.
 *
 * Independent of any test framework. Fixtures are built by trusted code, so
 * a builder that cannot allocate or write prints why and exits the process
 * (which fails the test or the tool that called it).
 */
#ifndef KPACK_TESTS_FIXTURE_FATBIN_H
#define KPACK_TESTS_FIXTURE_FATBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- growable byte buffers ------------------------------------------------
 * {0} is an empty buffer; data is malloc'ed and the caller frees it. */
typedef struct fx_buf {
  uint8_t* data;
  size_t size;
  size_t cap;
} fx_buf;

void fx_put(fx_buf* b, const void* data, size_t size);
/* Appends v as n little-endian bytes (n <= 8). */
void fx_le(fx_buf* b, uint64_t v, unsigned n);
/* Appends zero bytes until size is a multiple of align. */
void fx_align(fx_buf* b, size_t align);
/* Overwrites / reads n little-endian bytes at `at` (within size). */
void fx_set_le(fx_buf* b, size_t at, uint64_t v, unsigned n);
uint64_t fx_get_le(const fx_buf* b, size_t at, unsigned n);
/* The same on bytes not held in an fx_buf (a file read back, say). */
void fx_store_le(uint8_t* p, uint64_t v, unsigned n);
uint64_t fx_load_le(const uint8_t* p, unsigned n);
/* The section header of the section called `name` in a whole ELF64 file
 * (the process exits with a message when there is none). */
uint8_t* fx_section_header(uint8_t* elf, const char* name);
void fx_free(fx_buf* b);

/* ---- kernel bytes -------------------------------------------------------- */

/* Runs of a few repeated symbols from a small alphabet: compressible, and no
 * two seeds give the same bytes. Small and fast; for unit tests. */
void fx_fill_pattern(uint8_t* p, size_t size, uint32_t seed);

/* Code-object-like bytes: instruction-like words and frequent repeats of
 * earlier 32-byte runs. zstd -3 shrinks them about 4.6x (the real code
 * objects of librocrand shrink 4.4x); for benchmarks. */
void fx_fill_code(uint8_t* p, size_t size, uint32_t seed);

/* ---- offload bundles ----------------------------------------------------- */

typedef struct fx_entry {
  const char* id; /* "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "host-..." */
  const void* data;
  size_t size;
} fx_entry;

/* A plain "__CLANG_OFFLOAD_BUNDLE__" bundle as clang writes it: header and
 * entry table, then each non-empty code object 16-byte aligned, the last one
 * ending the bundle. An empty entry has offset 0. */
fx_buf fx_bundle(const fx_entry* entries, size_t count);

#define FX_ZLIB 0u /* CCOB compression methods */
#define FX_ZSTD 1u

/* A "CCOB" envelope (version 1, 2 or 3) around `plain`, compressed with
 * zlib level 6 or zstd level 3 (with a frame checksum, so a flipped byte is
 * always detected). The hash field holds a constant: readers ignore it. */
fx_buf fx_ccob(unsigned version, unsigned method, const fx_buf* plain);

/* ---- HIPK metadata ------------------------------------------------------- */

/* The msgpack map a kpack-ified binary keeps per wrapper:
 * {"kernel_name": name, "kpack_search_paths": [paths...]}, in the shortest
 * encodings, as ROCm's tooling writes it. */
fx_buf fx_hipk_metadata(const char* kernel_name, const char* const* paths,
                        size_t path_count);

/* ---- host ELF files ------------------------------------------------------ */

#define FX_ET_REL 1u
#define FX_ET_EXEC 2u
#define FX_ET_DYN 3u
#define FX_EM_X86_64 62u
#define FX_EM_AARCH64 183u
#define FX_HIPF_MAGIC 0x48495046u /* "HIPF": points at a bundle */
#define FX_HIPK_MAGIC 0x4B504948u /* "HIPK": points at HIPK metadata */
/* Section addresses are file offset + this, except in ET_REL (all 0). */
#define FX_VADDR 0x400000u

/* How a wrapper's pointer field reaches the loader. */
typedef enum fx_ptr {
  FX_PTR_FILE,          /* stored in the wrapper itself */
  FX_PTR_RELATIVE,      /* 0; R_*_RELATIVE with the address as addend (not in
                           ET_REL) */
  FX_PTR_ABS64,         /* 0; R_*_64 against a symbol placed at the target */
  FX_PTR_ABS64_SECTION, /* 0; R_*_64 against the target section's symbol,
                           offset in the addend (what assemblers emit for
                           local data) */
} fx_ptr;

/* One 24-byte record of .hipFatBinSegment. */
typedef struct fx_wrapper {
  uint32_t magic;    /* FX_HIPF_MAGIC or FX_HIPK_MAGIC; 0 means HIPF; any
                        other value (a damaged record) points into refs
                        when there are any, else into bundles */
  uint32_t version;  /* 0 means 1 */
  size_t target;     /* HIPF: index in bundles; HIPK: index in refs */
  fx_ptr how;        /* how the pointer field is filled */
  uint64_t reserved; /* HIPK: the code object index (co_index) */
} fx_wrapper;

/* Where fx_elf() put things (file offsets), for tests that damage them. */
typedef struct fx_elf_layout {
  size_t fatbin_offset, fatbin_size; /* .hip_fatbin; 0 if absent */
  size_t refs_offset, refs_size;     /* .rocm_kpack_ref; 0 if absent */
  size_t segment_offset;             /* .hipFatBinSegment; 0 if absent */
  size_t rela_offset, rela_size;     /* the relocation section; 0 if absent */
  size_t symtab_offset;              /* 0 if absent */
  size_t shoff;                      /* section header table */
  size_t fatbin_index, refs_index, segment_index, rela_index, symtab_index;
  size_t shnum;
} fx_elf_layout;

typedef struct fx_elf_opts {
  uint16_t type;    /* FX_ET_DYN (when 0), FX_ET_EXEC or FX_ET_REL */
  uint16_t machine; /* FX_EM_X86_64 (when 0) or FX_EM_AARCH64 */
  /* .hip_fatbin: the bundles in order, each starting bundle_align-aligned
   * (4096 when 0) and zero-padded; present unless no_fatbin. */
  const fx_buf* bundles;
  size_t bundle_count;
  size_t bundle_align;
  bool no_fatbin;
  /* .rocm_kpack_ref: HIPK metadata blobs, each 8-aligned; present when
   * ref_count > 0. */
  const fx_buf* refs;
  size_t ref_count;
  /* .hipFatBinSegment, present when wrapper_count > 0; relocations (and a
   * symbol table when one needs it) follow when a wrapper wants them. */
  const fx_wrapper* wrappers;
  size_t wrapper_count;
  fx_elf_layout* layout; /* filled when not NULL */
} fx_elf_opts;

/* A host ELF with sections null, [.hip_fatbin], [.rocm_kpack_ref],
 * [.hipFatBinSegment, [.rela.dyn | .rela.hipFatBinSegment, [.dynsym |
 * .symtab]]], .shstrtab; no program headers (nothing here loads it). */
fx_buf fx_elf(const fx_elf_opts* opts);

/* The same ELF written to `path` (through a temporary name) without being
 * held in memory; padding between bundles becomes holes, so a file with
 * bundles a gigabyte apart takes little disk. */
void fx_write_elf(const char* path, const fx_elf_opts* opts);

/* ---- large fat binaries, streamed to a file ------------------------------ */

typedef struct fx_fatbin_spec {
  size_t bundle_count;       /* translation units: one bundle + wrapper each */
  const char* const* arches; /* target IDs: one code object per arch */
  size_t arch_count;
  size_t code_object_size; /* each code object is 15/16 to 16/16 of this */
  unsigned ccob_version;   /* 0: plain bundles; else CCOB 1-3 ... */
  unsigned ccob_method;    /* ... with FX_ZSTD or FX_ZLIB */
  uint32_t seed;
} fx_fatbin_spec;

/* Size and fx_fill_code() bytes of code object `arch` of bundle `bundle`:
 * the bytes fx_write_fatbin() stores, so that a benchmark can build the
 * same kernels as a tree without parsing the file. */
size_t fx_fatbin_code_object_size(const fx_fatbin_spec* spec, size_t bundle,
                                  size_t arch);
void fx_fatbin_code_object(const fx_fatbin_spec* spec, size_t bundle,
                           size_t arch, uint8_t* out);

/* Writes an x86-64 ET_DYN host binary to `path`: bundle i holds a host entry
 * then one "hipv4-amdgcn-amd-amdhsa--<arch>" entry per arch, wrapper i points
 * at it through a RELATIVE relocation (so co_index i is bundle i). Written
 * to a temporary name and renamed into place, so an interrupted run leaves
 * no partial file under `path`. Memory: one bundle (and its envelope). */
void fx_write_fatbin(const char* path, const fx_fatbin_spec* spec);

#endif /* KPACK_TESTS_FIXTURE_FATBIN_H */
