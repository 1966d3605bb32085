/* SPDX-License-Identifier: MIT
 *
 * The one builder of AMDGPU code objects for tests, the fuzz corpus and the
 * mount fixtures: NT_AMDGPU_METADATA descriptions encoded with msgpack-c the
 * way LLVM writes them, and 64-bit ELF files (e_machine 224) built byte by
 * byte around any set of notes, reached through a PT_NOTE segment, an
 * SHT_NOTE section or both, with the layout reported so that tests can
 * damage exactly one field. Independent of any test framework; like
 * fixture_fatbin.h, a builder that cannot allocate exits the process.
 */
#ifndef KPACK_TESTS_FIXTURE_CODE_OBJECT_H
#define KPACK_TESTS_FIXTURE_CODE_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fixture_fatbin.h"
#include "rocm_kpack/kpack_code_object.h"

#define FX_EM_AMDGPU 224u
#define FX_NT_AMDGPU_METADATA 32u
#define FX_MACH_GFX906 0x2fu
#define FX_MACH_GFX908 0x30u
#define FX_MACH_GFX90A 0x3fu
#define FX_MACH_GFX942 0x4cu
#define FX_MACH_GFX1030 0x36u
#define FX_MACH_GFX1100 0x41u

/* e_flags of a v4+ code object: mach, then the xnack and sramecc fields. */
uint32_t fx_co_flags(uint32_t mach, kpack_feature_t xnack,
                     kpack_feature_t sramecc);

/* ---- the metadata note --------------------------------------------------- */

/* One kernel of amdhsa.kernels. Counts are written as the smallest
 * unsigned encoding, as LLVM does; a field in `omit` (KPACK_CO_* bits,
 * KPACK_CO_SYMBOL included) is left out, and so is ".name" when name is
 * NULL. The symbol is name + ".kd". */
typedef struct fx_co_kernel {
  const char* name;
  uint64_t vgpr, sgpr, agpr, lds, scratch, kernarg, wave, wg;
  uint64_t vgpr_spill, sgpr_spill;
  uint32_t omit;
} fx_co_kernel;

/* The description of an NT_AMDGPU_METADATA note as LLVM writes it: a map
 * of "amdhsa.kernels" (each kernel also carries keys the reader ignores:
 * .args, .language, .kernarg_segment_align, .uses_dynamic_stack),
 * "amdhsa.target" (left out when target is NULL) and "amdhsa.version"
 * [1, version - 2]. */
fx_buf fx_co_metadata(const char* target, unsigned version,
                      const fx_co_kernel* kernels, size_t count);

/* ---- the ELF file -------------------------------------------------------- */

typedef struct fx_co_note {
  const char* owner; /* "AMDGPU" (namesz 7, with the NUL) when NULL */
  uint32_t type;     /* FX_NT_AMDGPU_METADATA when 0 */
  const void* desc;
  size_t size;
} fx_co_note;

#define FX_CO_MAX_NOTES 8

/* Where fx_code_object() put things (file offsets). */
typedef struct fx_co_layout {
  size_t phoff, shoff;             /* header tables; 0 if absent */
  size_t notes_offset, notes_size; /* the note region */
  size_t note_at[FX_CO_MAX_NOTES]; /* each note's n_namesz field */
  size_t desc_at[FX_CO_MAX_NOTES]; /* each note's description */
  size_t note_shdr;                /* the SHT_NOTE section header; 0 if none */
} fx_co_layout;

typedef struct fx_co_spec {
  uint32_t e_flags;
  unsigned version;        /* code object version: EI_ABIVERSION = version - 2;
                              5 when 0 */
  bool not_hsa;            /* EI_OSABI 0 instead of 64 (ELFOSABI_AMDGPU_HSA) */
  uint16_t machine;        /* FX_EM_AMDGPU when 0 */
  const fx_co_note* notes; /* up to FX_CO_MAX_NOTES, in one region */
  size_t note_count;
  unsigned align;       /* note alignment, 4 (when 0) or 8 */
  bool no_segment;      /* no PT_NOTE program header */
  bool no_section;      /* no SHT_NOTE section */
  bool notes_at_end;    /* the region ends the file, the last desc unpadded */
  fx_co_layout* layout; /* filled when not NULL */
} fx_co_spec;

/* An ET_DYN code object: ELF header, one program header (PT_NOTE) unless
 * no_segment, the notes, a .text of a few bytes, then the section headers
 * (null, [.note], .text, .shstrtab) and .shstrtab; with notes_at_end the
 * notes come last instead. */
fx_buf fx_code_object(const fx_co_spec* spec);

/* The usual case: one metadata note for these kernels, the target and
 * e_flags of `mach` with the given features, code object version 5. */
fx_buf fx_code_object_for(uint32_t mach, kpack_feature_t xnack,
                          kpack_feature_t sramecc, const char* target,
                          const fx_co_kernel* kernels, size_t count);

#endif /* KPACK_TESTS_FIXTURE_CODE_OBJECT_H */
