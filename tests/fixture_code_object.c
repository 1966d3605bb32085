/* SPDX-License-Identifier: MIT
 *
 * Builders of AMDGPU code objects (see fixture_code_object.h): metadata notes
 * through msgpack-c, and the ELF file around them byte by byte.
 */
#include "fixture_code_object.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_PT_NOTE 4u
#define FX_SHT_PROGBITS 1u
#define FX_SHT_STRTAB 3u
#define FX_SHT_NOTE 7u
#define FX_ELFOSABI_AMDGPU_HSA 64u

uint32_t fx_co_flags(uint32_t mach, kpack_feature_t xnack,
                     kpack_feature_t sramecc) {
  return mach | (uint32_t)xnack << 8 | (uint32_t)sramecc << 10;
}

/* ---- the metadata note --------------------------------------------------- */

static void pack_str(msgpack_packer* pk, const char* s) {
  size_t n = strlen(s);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

static void pack_count(msgpack_packer* pk, const char* key, uint64_t v) {
  pack_str(pk, key);
  msgpack_pack_uint64(pk, v);
}

static void pack_kernel(msgpack_packer* pk, const fx_co_kernel* k) {
  static const uint32_t bits[] = {
      KPACK_CO_VGPR_COUNT,
      KPACK_CO_SGPR_COUNT,
      KPACK_CO_AGPR_COUNT,
      KPACK_CO_GROUP_SEGMENT_FIXED_SIZE,
      KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE,
      KPACK_CO_KERNARG_SEGMENT_SIZE,
      KPACK_CO_WAVEFRONT_SIZE,
      KPACK_CO_MAX_FLAT_WORKGROUP_SIZE,
      KPACK_CO_VGPR_SPILL_COUNT,
      KPACK_CO_SGPR_SPILL_COUNT,
  };
  static const char* const keys[] = {
      ".vgpr_count",
      ".sgpr_count",
      ".agpr_count",
      ".group_segment_fixed_size",
      ".private_segment_fixed_size",
      ".kernarg_segment_size",
      ".wavefront_size",
      ".max_flat_workgroup_size",
      ".vgpr_spill_count",
      ".sgpr_spill_count",
  };
  const uint64_t values[] = {k->vgpr,       k->sgpr,      k->agpr, k->lds,
                             k->scratch,    k->kernarg,   k->wave, k->wg,
                             k->vgpr_spill, k->sgpr_spill};
  size_t pairs = 4; /* .args, .language, .kernarg_segment_align, .uses_... */
  for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
    pairs += !(k->omit & bits[i]);
  pairs += k->name != NULL;
  pairs += k->name != NULL && !(k->omit & KPACK_CO_SYMBOL);
  msgpack_pack_map(pk, pairs);

  /* Keys in LLVM's order (sorted), the ignored ones among them. */
  if (!(k->omit & KPACK_CO_AGPR_COUNT)) /* LLVM sorts keys: agpr first */
    pack_count(pk, ".agpr_count", k->agpr);
  pack_str(pk, ".args");
  msgpack_pack_array(pk, 1);
  msgpack_pack_map(pk, 3);
  pack_count(pk, ".offset", 0);
  pack_count(pk, ".size", 8);
  pack_str(pk, ".value_kind");
  pack_str(pk, "global_buffer");
  for (size_t i = 3; i < sizeof(bits) / sizeof(bits[0]); i++)
    if (!(k->omit & bits[i]))
      pack_count(pk, keys[i], values[i]);
  pack_count(pk, ".kernarg_segment_align", 8);
  pack_str(pk, ".language");
  pack_str(pk, "OpenCL C");
  if (k->name != NULL) {
    pack_str(pk, ".name");
    pack_str(pk, k->name);
    if (!(k->omit & KPACK_CO_SYMBOL)) {
      char* symbol;
      if (asprintf(&symbol, "%s.kd", k->name) < 0) {
        fprintf(stderr, "fixture: out of memory\n");
        exit(1);
      }
      pack_str(pk, ".symbol");
      pack_str(pk, symbol);
      free(symbol);
    }
  }
  for (size_t i = 0; i < 2; i++)
    if (!(k->omit & bits[i]))
      pack_count(pk, keys[i], values[i]);
  pack_str(pk, ".uses_dynamic_stack");
  msgpack_pack_false(pk);
}

fx_buf fx_co_metadata(const char* target, unsigned version,
                      const fx_co_kernel* kernels, size_t count) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, target != NULL ? 3 : 2);
  pack_str(&pk, "amdhsa.kernels");
  msgpack_pack_array(&pk, count);
  for (size_t i = 0; i < count; i++)
    pack_kernel(&pk, &kernels[i]);
  if (target != NULL) {
    pack_str(&pk, "amdhsa.target");
    pack_str(&pk, target);
  }
  pack_str(&pk, "amdhsa.version");
  msgpack_pack_array(&pk, 2);
  msgpack_pack_uint64(&pk, 1);
  msgpack_pack_uint64(&pk, version >= 2 ? version - 2 : 0);
  fx_buf out = {0};
  fx_put(&out, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return out;
}

/* ---- the ELF file -------------------------------------------------------- */

static const char shstrtab[] = "\0.note\0.text\0.shstrtab";
enum { NAME_NOTE = 1, NAME_TEXT = 7, NAME_SHSTRTAB = 13 };
/* s_endpgm, twice, as a stand-in for code. */
static const uint8_t text[8] = {0x00, 0x00, 0x81, 0xbf, 0x00, 0x00, 0x81, 0xbf};

static void put_notes(fx_buf* b, const fx_co_spec* s, size_t align,
                      fx_co_layout* l) {
  fx_align(b, align);
  l->notes_offset = b->size;
  for (size_t i = 0; i < s->note_count && i < FX_CO_MAX_NOTES; i++) {
    const fx_co_note* n = &s->notes[i];
    const char* owner = n->owner != NULL ? n->owner : "AMDGPU";
    size_t namesz = strlen(owner) + 1;
    l->note_at[i] = b->size;
    fx_le(b, namesz, 4);
    fx_le(b, n->size, 4);
    fx_le(b, n->type ? n->type : FX_NT_AMDGPU_METADATA, 4);
    fx_put(b, owner, namesz);
    fx_align(b, align);
    l->desc_at[i] = b->size;
    fx_put(b, n->desc, n->size);
    bool last = i + 1 == s->note_count;
    if (!(last && s->notes_at_end))
      fx_align(b, align);
  }
  l->notes_size = b->size - l->notes_offset;
}

static void put_section(fx_buf* b, uint32_t name, uint32_t type, uint64_t flags,
                        uint64_t offset, uint64_t size, uint64_t align) {
  fx_le(b, name, 4);
  fx_le(b, type, 4);
  fx_le(b, flags, 8);
  fx_le(b, flags & 2 ? offset : 0, 8); /* allocated: address = offset */
  fx_le(b, offset, 8);
  fx_le(b, size, 8);
  fx_le(b, 0, 4); /* link */
  fx_le(b, 0, 4); /* info */
  fx_le(b, align, 8);
  fx_le(b, 0, 8); /* entsize */
}

fx_buf fx_code_object(const fx_co_spec* s) {
  fx_buf b = {0};
  fx_co_layout local, *l = s->layout != NULL ? s->layout : &local;
  size_t align = s->align == 8 ? 8 : 4;
  unsigned version = s->version ? s->version : 5;
  bool segment = !s->no_segment, section = !s->no_section;
  memset(l, 0, sizeof(*l));

  /* ELF header; offsets are patched once known. */
  static const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  fx_put(&b, ident, 16);
  b.data[7] = s->not_hsa ? 0 : FX_ELFOSABI_AMDGPU_HSA;
  b.data[8] = (uint8_t)(version - 2);
  fx_le(&b, 3, 2); /* ET_DYN */
  fx_le(&b, s->machine ? s->machine : FX_EM_AMDGPU, 2);
  fx_le(&b, 1, 4); /* EV_CURRENT */
  fx_le(&b, 0, 8); /* entry */
  fx_le(&b, 0, 8); /* phoff */
  fx_le(&b, 0, 8); /* shoff */
  fx_le(&b, s->e_flags, 4);
  fx_le(&b, 64, 2);
  fx_le(&b, 56, 2);
  fx_le(&b, segment ? 1 : 0, 2);
  fx_le(&b, 64, 2);
  size_t shnum = 3 + (section ? 1 : 0);
  fx_le(&b, shnum, 2);
  fx_le(&b, shnum - 1, 2); /* .shstrtab is last */

  size_t phdr = 0;
  if (segment) {
    phdr = l->phoff = b.size;
    fx_set_le(&b, 32, l->phoff, 8);
    for (int i = 0; i < 56; i++)
      fx_le(&b, 0, 1);
  }
  if (!s->notes_at_end)
    put_notes(&b, s, align, l);
  fx_align(&b, 16);
  size_t text_at = b.size;
  fx_put(&b, text, sizeof(text));
  size_t strtab_at = b.size;
  fx_put(&b, shstrtab, sizeof(shstrtab));
  fx_align(&b, 8);
  l->shoff = b.size;
  fx_set_le(&b, 40, l->shoff, 8);
  /* Section headers are written once the notes' place is known. */
  size_t shdr_at = b.size;
  for (size_t i = 0; i < shnum * 64; i++)
    fx_le(&b, 0, 1);
  if (s->notes_at_end)
    put_notes(&b, s, align, l);

  fx_buf sh = {0};
  put_section(&sh, 0, 0, 0, 0, 0, 0);
  if (section) {
    l->note_shdr = shdr_at + sh.size;
    put_section(&sh, NAME_NOTE, FX_SHT_NOTE, 2, l->notes_offset, l->notes_size,
                align);
  }
  put_section(&sh, NAME_TEXT, FX_SHT_PROGBITS, 6, text_at, sizeof(text), 16);
  put_section(&sh, NAME_SHSTRTAB, FX_SHT_STRTAB, 0, strtab_at, sizeof(shstrtab),
              1);
  memcpy(b.data + shdr_at, sh.data, sh.size);
  fx_free(&sh);

  if (segment) {
    fx_set_le(&b, phdr, FX_PT_NOTE, 4);
    fx_set_le(&b, phdr + 4, 4, 4); /* PF_R */
    fx_set_le(&b, phdr + 8, l->notes_offset, 8);
    fx_set_le(&b, phdr + 16, l->notes_offset, 8);
    fx_set_le(&b, phdr + 24, l->notes_offset, 8);
    fx_set_le(&b, phdr + 32, l->notes_size, 8);
    fx_set_le(&b, phdr + 40, l->notes_size, 8);
    fx_set_le(&b, phdr + 48, align, 8);
  }
  return b;
}

fx_buf fx_code_object_for(uint32_t mach, kpack_feature_t xnack,
                          kpack_feature_t sramecc, const char* target,
                          const fx_co_kernel* kernels, size_t count) {
  fx_buf note = fx_co_metadata(target, 5, kernels, count);
  fx_co_note n = {NULL, 0, note.data, note.size};
  fx_co_spec spec = {.e_flags = fx_co_flags(mach, xnack, sramecc),
                     .notes = &n,
                     .note_count = 1};
  fx_buf out = fx_code_object(&spec);
  fx_free(&note);
  return out;
}
