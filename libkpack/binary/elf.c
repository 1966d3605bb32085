/* SPDX-License-Identifier: MIT
 *
 * Section table, section names and relocated pointer fields of a 64-bit
 * little-endian ELF file (see elf.h). Everything read is bounds-checked
 * against the file; relocation sections are read a chunk at a time.
 */
#include "binary/elf.h"

#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"

#define ELF_EHDR_SIZE 64u
#define ELF_SHDR_SIZE 64u
#define ELF_RELA_SIZE 24u
#define ELF_SYM_SIZE 24u
#define ELF_SHT_RELA 4u
#define ELF_SHN_UNDEF 0u
#define ELF_SHN_XINDEX 0xffffu
#define ELF_WRAPPER_SIZE 24u
/* Relocation records read per pread. */
#define ELF_RELA_CHUNK 4096u

static void parse_section(const uint8_t* p, elf_section* s) {
  s->name = (uint32_t)kp_load_le(p, 4);
  s->type = (uint32_t)kp_load_le(p + 4, 4);
  s->flags = kp_load_le(p + 8, 8);
  s->addr = kp_load_le(p + 16, 8);
  s->offset = kp_load_le(p + 24, 8);
  s->size = kp_load_le(p + 32, 8);
  s->link = (uint32_t)kp_load_le(p + 40, 4);
  s->info = (uint32_t)kp_load_le(p + 44, 4);
}

kpack_error_t elf_open(const kp_input* in, elf_file* elf) {
  kpack_error_t err;
  uint8_t h[ELF_EHDR_SIZE], first[ELF_SHDR_SIZE];
  kp_scratch scratch = {0};
  const uint8_t* table;

  memset(elf, 0, sizeof(*elf));
  elf->in = *in;
  if (in->size < ELF_EHDR_SIZE)
    return KPACK_ERROR_INVALID_FORMAT;
  if ((err = kp_input_read(in, 0, h, sizeof(h))) != KPACK_SUCCESS)
    return err;
  /* ELFCLASS64, ELFDATA2LSB: HIP hosts are 64-bit little-endian. */
  if (memcmp(h, "\177ELF", 4) != 0 || h[4] != 2 || h[5] != 1)
    return KPACK_ERROR_INVALID_FORMAT;
  elf->type = (uint16_t)kp_load_le(h + 16, 2);
  elf->machine = (uint16_t)kp_load_le(h + 18, 2);
  uint64_t shoff = kp_load_le(h + 40, 8);
  uint64_t entsize = kp_load_le(h + 58, 2);
  uint64_t count = kp_load_le(h + 60, 2);
  uint64_t strndx = kp_load_le(h + 62, 2);
  if (shoff == 0)
    return KPACK_SUCCESS; /* no section table: nothing to find */
  if (entsize < ELF_SHDR_SIZE)
    return KPACK_ERROR_INVALID_FORMAT;

  /* Section 0 holds the real count and name-table index when they do not
   * fit the header's 16-bit fields. */
  if ((err = kp_input_read(in, shoff, first, sizeof(first))) != KPACK_SUCCESS)
    return err;
  if (count == 0)
    count = kp_load_le(first + 32, 8);
  if (strndx == ELF_SHN_XINDEX)
    strndx = kp_load_le(first + 40, 4);
  if (count == 0 || count > (in->size - shoff) / entsize)
    return KPACK_ERROR_INVALID_FORMAT;
  err = kp_input_view(in, shoff, (size_t)(count * entsize), &scratch, &table);
  if (err != KPACK_SUCCESS)
    goto fail;
  elf->sections = calloc((size_t)count, sizeof(*elf->sections));
  if (elf->sections == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  elf->section_count = (size_t)count;
  for (size_t i = 0; i < elf->section_count; i++)
    parse_section(table + i * entsize, &elf->sections[i]);
  kp_scratch_free(&scratch);

  kp_input names;
  err = KPACK_ERROR_INVALID_FORMAT;
  if (strndx == 0 || strndx >= count)
    goto fail;
  elf->names = (size_t)strndx;
  if ((err = elf_section_input(elf, elf->names, &names)) != KPACK_SUCCESS)
    goto fail;
  return KPACK_SUCCESS;

fail:
  kp_scratch_free(&scratch);
  elf_close(elf);
  return err;
}

void elf_close(elf_file* elf) {
  free(elf->sections);
  elf->sections = NULL;
  elf->section_count = 0;
}

kpack_error_t elf_section_input(const elf_file* elf, size_t index,
                                kp_input* out) {
  const elf_section* s = &elf->sections[index];
  if (s->type == ELF_SHT_NOBITS)
    return KPACK_ERROR_INVALID_FORMAT;
  return kp_input_slice(&elf->in, s->offset, s->size, out);
}

kpack_error_t elf_find_section(const elf_file* elf, const char* name,
                               size_t* index) {
  char got[64];
  size_t len = strlen(name) + 1; /* with its NUL */
  kp_input names;
  *index = 0;
  if (elf->section_count == 0 || len > sizeof(got))
    return KPACK_SUCCESS;
  kpack_error_t err = elf_section_input(elf, elf->names, &names);
  if (err != KPACK_SUCCESS)
    return err;
  for (size_t i = 1; i < elf->section_count; i++) {
    uint64_t at = elf->sections[i].name;
    if (at >= names.size || names.size - at < len)
      continue; /* a name running off the table matches nothing */
    if ((err = kp_input_read(&names, at, got, len)) != KPACK_SUCCESS)
      return err;
    if (memcmp(got, name, len) == 0) {
      *index = i;
      return KPACK_SUCCESS;
    }
  }
  return KPACK_SUCCESS;
}

static bool is_relative(uint16_t machine, uint32_t type) {
  return (machine == ELF_EM_X86_64 && type == 8) ||   /* R_X86_64_RELATIVE */
         (machine == ELF_EM_AARCH64 && type == 1027); /* R_AARCH64_RELATIVE */
}

static bool is_abs64(uint16_t machine, uint32_t type) {
  return (machine == ELF_EM_X86_64 && type == 1) ||  /* R_X86_64_64 */
         (machine == ELF_EM_AARCH64 && type == 257); /* R_AARCH64_ABS64 */
}

/* S + A for an ABS64 relocation through symbol `sym` of the symbol table
 * `symtab` (the relocation section's sh_link). */
static kpack_error_t abs64_target(const elf_file* elf, uint32_t symtab,
                                  uint64_t sym, uint64_t addend,
                                  elf_pointer* out) {
  uint8_t s[ELF_SYM_SIZE];
  kp_input syms;
  if (symtab == 0 || symtab >= elf->section_count)
    return KPACK_ERROR_INVALID_FORMAT;
  kpack_error_t err = elf_section_input(elf, symtab, &syms);
  if (err != KPACK_SUCCESS)
    return err;
  if (sym == 0 || sym >= syms.size / ELF_SYM_SIZE)
    return KPACK_ERROR_INVALID_FORMAT;
  if ((err = kp_input_read(&syms, sym * ELF_SYM_SIZE, s, sizeof(s))) !=
      KPACK_SUCCESS)
    return err;
  uint64_t shndx = kp_load_le(s + 6, 2);
  uint64_t value = kp_load_le(s + 8, 8);
  if (shndx == ELF_SHN_UNDEF) {
    *out = (elf_pointer){ELF_PTR_UNDEFINED, 0, 0};
  } else if (elf->type == ELF_ET_REL) {
    /* A symbol's value is an offset in its own section. */
    out->how = ELF_PTR_SECTION;
    out->section = shndx < elf->section_count ? (size_t)shndx : 0;
    out->value = value + addend;
  } else {
    *out = (elf_pointer){ELF_PTR_ADDRESS, value + addend, 0};
  }
  return KPACK_SUCCESS;
}

/* Applies one relocation section to the pointer fields. */
static kpack_error_t apply_section(const elf_file* elf, size_t rsec,
                                   size_t table, size_t record_size,
                                   size_t field, size_t count,
                                   elf_pointer* out) {
  const elf_section* rs = &elf->sections[rsec];
  const elf_section* ts = &elf->sections[table];
  bool rel = elf->type == ELF_ET_REL;
  kp_scratch scratch = {0};
  kp_input relocs;
  kpack_error_t err = elf_section_input(elf, rsec, &relocs);
  if (err != KPACK_SUCCESS)
    return err;
  if (relocs.size % ELF_RELA_SIZE != 0)
    return KPACK_ERROR_INVALID_FORMAT;
  uint64_t total = relocs.size / ELF_RELA_SIZE;
  for (uint64_t first = 0; first < total; first += ELF_RELA_CHUNK) {
    uint64_t n =
        total - first < ELF_RELA_CHUNK ? total - first : ELF_RELA_CHUNK;
    const uint8_t* chunk;
    err = kp_input_view(&relocs, first * ELF_RELA_SIZE,
                        (size_t)(n * ELF_RELA_SIZE), &scratch, &chunk);
    if (err != KPACK_SUCCESS)
      goto done;
    for (uint64_t r = 0; r < n; r++) {
      const uint8_t* p = chunk + r * ELF_RELA_SIZE;
      uint64_t where = kp_load_le(p, 8);
      uint64_t info = kp_load_le(p + 8, 8);
      uint64_t addend = kp_load_le(p + 16, 8);
      uint32_t type = (uint32_t)info;
      uint64_t slot;
      if (rel) {
        slot = where;
      } else {
        if (where < ts->addr)
          continue;
        slot = where - ts->addr;
      }
      if (slot % record_size != field || slot / record_size >= count)
        continue;
      elf_pointer* ptr = &out[slot / record_size];
      if (is_relative(elf->machine, type)) {
        *ptr = (elf_pointer){ELF_PTR_ADDRESS, addend, 0};
      } else if (is_abs64(elf->machine, type)) {
        err = abs64_target(elf, rs->link, info >> 32, addend, ptr);
        if (err != KPACK_SUCCESS)
          goto done;
      }
      /* Any other relocation: the field keeps its file value. */
    }
  }
  err = KPACK_SUCCESS;
done:
  kp_scratch_free(&scratch);
  return err;
}

kpack_error_t elf_read_pointers(const elf_file* elf, size_t table,
                                size_t record_size, size_t field, size_t count,
                                elf_pointer* out) {
  kpack_error_t err;
  kp_input records;
  kp_scratch scratch = {0};
  const uint8_t* bytes;
  if ((err = elf_section_input(elf, table, &records)) != KPACK_SUCCESS)
    return err;
  if (field > record_size || record_size - field < 8 ||
      count > records.size / record_size)
    return KPACK_ERROR_INVALID_FORMAT;
  err = kp_input_view(&records, 0, count * record_size, &scratch, &bytes);
  if (err != KPACK_SUCCESS)
    goto done;
  for (size_t i = 0; i < count; i++)
    out[i] = (elf_pointer){ELF_PTR_STORED,
                           kp_load_le(bytes + i * record_size + field, 8), 0};
  for (size_t s = 1; s < elf->section_count; s++) {
    const elf_section* rs = &elf->sections[s];
    if (rs->type != ELF_SHT_RELA ||
        (elf->type == ELF_ET_REL && rs->info != table))
      continue;
    err = apply_section(elf, s, table, record_size, field, count, out);
    if (err != KPACK_SUCCESS)
      goto done;
  }
  err = KPACK_SUCCESS;
done:
  kp_scratch_free(&scratch);
  return err;
}

bool elf_pointer_in(const elf_file* elf, const elf_pointer* ptr, size_t target,
                    uint64_t* offset) {
  const elf_section* t = &elf->sections[target];
  switch (ptr->how) {
    case ELF_PTR_SECTION:
      if (ptr->section != target || ptr->value >= t->size)
        return false;
      *offset = ptr->value;
      return true;
    case ELF_PTR_STORED:
    case ELF_PTR_ADDRESS:
      if (ptr->value < t->addr || ptr->value - t->addr >= t->size)
        return false;
      *offset = ptr->value - t->addr;
      return true;
    case ELF_PTR_UNDEFINED:
      break;
  }
  return false;
}

size_t elf_pointer_section(const elf_file* elf, const elf_pointer* ptr) {
  uint64_t offset;
  if (ptr->how == ELF_PTR_SECTION)
    return ptr->section != 0 && elf_pointer_in(elf, ptr, ptr->section, &offset)
               ? ptr->section
               : 0;
  for (size_t i = 1; i < elf->section_count; i++)
    if ((elf->sections[i].flags & ELF_SHF_ALLOC) != 0 &&
        elf_pointer_in(elf, ptr, i, &offset))
      return i;
  return 0;
}

kpack_error_t elf_read_wrappers(const elf_file* elf, size_t seg,
                                elf_wrapper** records, size_t* count) {
  kpack_error_t err;
  kp_input table;
  kp_scratch scratch = {0};
  const uint8_t* bytes;
  elf_pointer* ptrs = NULL;
  elf_wrapper* w = NULL;

  *records = NULL;
  *count = 0;
  if ((err = elf_section_input(elf, seg, &table)) != KPACK_SUCCESS)
    return err;
  if (table.size % ELF_WRAPPER_SIZE != 0)
    return KPACK_ERROR_INVALID_FORMAT;
  size_t n = (size_t)(table.size / ELF_WRAPPER_SIZE);
  w = calloc(n ? n : 1, sizeof(*w));
  ptrs = calloc(n ? n : 1, sizeof(*ptrs));
  if (w == NULL || ptrs == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  err = kp_input_view(&table, 0, (size_t)table.size, &scratch, &bytes);
  if (err != KPACK_SUCCESS)
    goto done;
  for (size_t i = 0; i < n; i++) {
    const uint8_t* r = bytes + i * ELF_WRAPPER_SIZE;
    w[i].magic = (uint32_t)kp_load_le(r, 4);
    w[i].version = (uint32_t)kp_load_le(r + 4, 4);
    w[i].reserved = kp_load_le(r + 16, 8);
  }
  err = elf_read_pointers(elf, seg, ELF_WRAPPER_SIZE, 8, n, ptrs);
  if (err != KPACK_SUCCESS)
    goto done;
  for (size_t i = 0; i < n; i++)
    w[i].pointer = ptrs[i];
  *records = w;
  *count = n;
  w = NULL;
done:
  free(w);
  free(ptrs);
  kp_scratch_free(&scratch);
  return err;
}
