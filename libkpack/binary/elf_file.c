/* SPDX-License-Identifier: MIT
 *
 * Section table, program headers, section names and relocated pointer
 * fields of a 64-bit little-endian ELF file (see elf_file.h). Everything read
 * is bounds-checked against the file once, here; relocation sections are read
 * a chunk at a time. A failure leaves its reason in elf->why.
 */
#include "binary/elf_file.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"

#define ELF_SYM_SIZE 24u
#define ELF_SHT_SYMTAB_SHNDX 18u
#define ELF_SHN_UNDEF 0u
#define ELF_SHN_LORESERVE 0xff00u
#define ELF_SHN_ABS 0xfff1u
#define ELF_SHN_XINDEX 0xffffu
#define ELF_PN_XNUM 0xffffu
/* Relocation records read per pread. */
#define ELF_RELA_CHUNK 4096u

/* Records why the file cannot be read and returns `err`. */
static kpack_error_t elf_fail(elf_file* elf, kpack_error_t err, const char* fmt,
                              ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(elf->why, sizeof(elf->why), fmt, ap);
  va_end(ap);
  return err;
}

/* A table of `count` entries of `entsize` bytes at `offset` must lie within
 * the file; names it `what` when it does not. */
static kpack_error_t check_table(elf_file* elf, const char* what,
                                 uint64_t offset, uint64_t count,
                                 uint64_t entsize) {
  uint64_t size = elf->in.size;
  if (offset > size || count > (size - offset) / entsize)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "%s at 0x%" PRIx64 " (%" PRIu64 " entries of %" PRIu64
                    " bytes) extends past end of file (%" PRIu64
                    " bytes): truncated?",
                    what, offset, count, entsize, size);
  return KPACK_SUCCESS;
}

static void parse_section(const uint8_t* p, elf_section* s) {
  s->name = (uint32_t)kp_load_le(p, 4);
  s->type = (uint32_t)kp_load_le(p + 4, 4);
  s->flags = kp_load_le(p + 8, 8);
  s->addr = kp_load_le(p + 16, 8);
  s->offset = kp_load_le(p + 24, 8);
  s->size = kp_load_le(p + 32, 8);
  s->link = (uint32_t)kp_load_le(p + 40, 4);
  s->info = (uint32_t)kp_load_le(p + 44, 4);
  s->align = kp_load_le(p + 48, 8);
}

static void parse_segment(const uint8_t* p, elf_segment* s) {
  s->type = (uint32_t)kp_load_le(p, 4);
  s->flags = (uint32_t)kp_load_le(p + 4, 4);
  s->offset = kp_load_le(p + 8, 8);
  s->vaddr = kp_load_le(p + 16, 8);
  s->paddr = kp_load_le(p + 24, 8);
  s->filesz = kp_load_le(p + 32, 8);
  s->memsz = kp_load_le(p + 40, 8);
  s->align = kp_load_le(p + 48, 8);
}

elf_rela elf_rela_parse(const uint8_t* p) {
  uint64_t info = kp_load_le(p + 8, 8);
  return (elf_rela){.offset = kp_load_le(p, 8),
                    .type = (uint32_t)info,
                    .symbol = (uint32_t)(info >> 32),
                    .addend = kp_load_le(p + 16, 8)};
}

/* The header table `what` of `count` entries of `entsize` bytes at
 * `offset`, checked and viewed: *table (valid until *scratch is freed), and
 * *items, `count` zeroed elements of `size` bytes for its parse. */
static kpack_error_t view_table(elf_file* elf, const char* what,
                                uint64_t offset, uint64_t count,
                                uint64_t entsize, size_t size,
                                kp_scratch* scratch, const uint8_t** table,
                                void** items) {
  kpack_error_t err = check_table(elf, what, offset, count, entsize);
  if (err == KPACK_SUCCESS)
    err = kp_input_view(&elf->in, offset, (size_t)(count * entsize), scratch,
                        table);
  if (err == KPACK_SUCCESS && (*items = calloc((size_t)count, size)) == NULL)
    err = KPACK_ERROR_OUT_OF_MEMORY;
  return err;
}

static kpack_error_t read_sections(elf_file* elf, uint64_t count,
                                   uint64_t strndx) {
  kp_scratch scratch = {0};
  const uint8_t* table;
  void* items;
  kpack_error_t err =
      view_table(elf, "section header table", elf->shoff, count, elf->shentsize,
                 sizeof(*elf->sections), &scratch, &table, &items);
  if (err == KPACK_SUCCESS) {
    elf->sections = items;
    elf->section_count = (size_t)count;
    for (size_t i = 0; i < elf->section_count; i++)
      parse_section(table + i * elf->shentsize, &elf->sections[i]);
    elf->names = strndx < count ? (size_t)strndx : 0;
    elf->names_declared = strndx;
  }
  kp_scratch_free(&scratch);
  return err;
}

static kpack_error_t read_segments(elf_file* elf, uint64_t count) {
  kp_scratch scratch = {0};
  const uint8_t* table;
  void* items;
  kpack_error_t err =
      view_table(elf, "program header table", elf->phoff, count, elf->phentsize,
                 sizeof(*elf->segments), &scratch, &table, &items);
  if (err == KPACK_SUCCESS) {
    elf->segments = items;
    elf->segment_count = (size_t)count;
    for (size_t i = 0; i < elf->segment_count; i++)
      parse_segment(table + i * elf->phentsize, &elf->segments[i]);
  }
  kp_scratch_free(&scratch);
  return err;
}

elf_ident_kind elf_ident(const uint8_t* h, size_t size) {
  if (h == NULL || size < 6 || memcmp(h, "\177ELF", 4) != 0)
    return ELF_IDENT_NONE;
  /* ELFCLASS64, ELFDATA2LSB: HIP hosts are 64-bit little-endian. */
  return h[4] == 2 && h[5] == 1 ? ELF_IDENT_64LE : ELF_IDENT_OTHER;
}

bool elf_is_elf64le(const uint8_t* h, size_t size) {
  return size >= ELF_EHDR_SIZE && elf_ident(h, size) == ELF_IDENT_64LE;
}

/* The section name table as an input, or why there is none. */
static kpack_error_t names_input(elf_file* elf, kp_input* names) {
  if (elf->names == 0)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "section name table index %" PRIu64
                    " is not one of the %zu sections",
                    elf->names_declared, elf->section_count);
  return elf_section_input(elf, elf->names, names);
}

kpack_error_t elf_open(const kp_input* in, elf_file* elf) {
  kpack_error_t err;
  uint8_t h[ELF_EHDR_SIZE], first[ELF_SHDR_SIZE];

  memset(elf, 0, sizeof(*elf));
  elf->in = *in;
  if (in->size < ELF_EHDR_SIZE)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "%" PRIu64 " bytes: too short for an ELF header", in->size);
  if ((err = kp_input_read(in, 0, h, sizeof(h))) != KPACK_SUCCESS)
    return err;
  elf_ident_kind kind = elf_ident(h, sizeof(h));
  if (kind == ELF_IDENT_NONE)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT, "not an ELF file");
  if (kind != ELF_IDENT_64LE)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "not a 64-bit little-endian ELF (class %u, data %u)",
                    (unsigned)h[4], (unsigned)h[5]);
  elf->type = (uint16_t)kp_load_le(h + 16, 2);
  elf->machine = (uint16_t)kp_load_le(h + 18, 2);
  elf->phoff = kp_load_le(h + 32, 8);
  elf->shoff = kp_load_le(h + 40, 8);
  elf->phentsize = kp_load_le(h + 54, 2);
  uint64_t phnum = kp_load_le(h + 56, 2);
  elf->shentsize = kp_load_le(h + 58, 2);
  uint64_t count = kp_load_le(h + 60, 2);
  uint64_t strndx = kp_load_le(h + 62, 2);

  if (elf->shoff != 0) {
    if (elf->shentsize < ELF_SHDR_SIZE)
      return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                      "section header entries of %" PRIu64
                      " bytes (at least %u)",
                      elf->shentsize, ELF_SHDR_SIZE);
    if ((err = check_table(elf, "section header table", elf->shoff,
                           count ? count : 1, elf->shentsize)) != KPACK_SUCCESS)
      return err;
    /* Section 0 holds the real count, name-table index and program header
     * count when they do not fit the header's 16-bit fields. */
    if ((err = kp_input_read(in, elf->shoff, first, sizeof(first))) !=
        KPACK_SUCCESS)
      return err;
    if (count == 0)
      count = kp_load_le(first + 32, 8);
    if (strndx == ELF_SHN_XINDEX)
      strndx = kp_load_le(first + 40, 4);
    if (phnum == ELF_PN_XNUM)
      phnum = kp_load_le(first + 44, 4);
    if (count == 0)
      return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                      "section header table at 0x%" PRIx64
                      " declares no sections",
                      elf->shoff);
  }
  if (elf->phoff != 0 && phnum > 0) {
    if (elf->phentsize < ELF_PHDR_SIZE)
      return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                      "program header entries of %" PRIu64
                      " bytes (at least %u)",
                      elf->phentsize, ELF_PHDR_SIZE);
    if ((err = read_segments(elf, phnum)) != KPACK_SUCCESS)
      goto fail;
  }
  if (elf->shoff != 0 && (err = read_sections(elf, count, strndx)))
    goto fail;
  return KPACK_SUCCESS;

fail:
  elf_close(elf);
  return err;
}

void elf_close(elf_file* elf) {
  free(elf->sections);
  free(elf->segments);
  elf->sections = NULL;
  elf->segments = NULL;
  elf->section_count = 0;
  elf->segment_count = 0;
}

kpack_error_t elf_section_input(elf_file* elf, size_t index, kp_input* out) {
  const elf_section* s = &elf->sections[index];
  if (s->type == ELF_SHT_NOBITS)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "section %zu has no bytes in the file (SHT_NOBITS)", index);
  if (kp_input_slice(&elf->in, s->offset, s->size, out) != KPACK_SUCCESS)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "section %zu at 0x%" PRIx64 " (%" PRIu64
                    " bytes) extends past end of file (%" PRIu64
                    " bytes): truncated?",
                    index, s->offset, s->size, elf->in.size);
  return KPACK_SUCCESS;
}

kpack_error_t elf_section_name(elf_file* elf, size_t index, char* name,
                               size_t size) {
  kp_input names;
  name[0] = '\0';
  if (size == 0 || elf->section_count == 0 ||
      names_input(elf, &names) != KPACK_SUCCESS)
    return KPACK_SUCCESS;
  uint64_t at = elf->sections[index].name;
  if (at >= names.size)
    return KPACK_SUCCESS;
  size_t n = names.size - at < size - 1 ? (size_t)(names.size - at) : size - 1;
  kpack_error_t err = kp_input_read(&names, at, name, n);
  if (err != KPACK_SUCCESS)
    return err;
  name[n] = '\0';
  if (strlen(name) == n && n == size - 1 && names.size - at > n)
    name[0] = '\0'; /* longer than the buffer: matches nothing */
  return KPACK_SUCCESS;
}

kpack_error_t elf_find_section(elf_file* elf, const char* name, size_t* index) {
  char got[64];
  size_t len = strlen(name) + 1; /* with its NUL */
  kp_input names;
  *index = 0;
  if (elf->section_count == 0 || len > sizeof(got))
    return KPACK_SUCCESS;
  kpack_error_t err = names_input(elf, &names);
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

bool elf_address_offset(const elf_file* elf, uint64_t addr, uint64_t* offset) {
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* s = &elf->segments[i];
    if (s->type == ELF_PT_LOAD && addr >= s->vaddr &&
        addr - s->vaddr < s->filesz) {
      *offset = s->offset + (addr - s->vaddr);
      return true;
    }
  }
  return false;
}

bool elf_relocation_applies(const elf_file* elf, size_t index, size_t table) {
  const elf_section* rs = &elf->sections[index];
  if (rs->info == table)
    return true;
  return elf->type != ELF_ET_REL && (rs->flags & ELF_SHF_ALLOC) != 0;
}

static bool is_relative(uint16_t machine, uint32_t type) {
  return (machine == ELF_EM_X86_64 && type == 8) ||   /* R_X86_64_RELATIVE */
         (machine == ELF_EM_AARCH64 && type == 1027); /* R_AARCH64_RELATIVE */
}

static bool is_abs64(uint16_t machine, uint32_t type) {
  return (machine == ELF_EM_X86_64 && type == 1) ||  /* R_X86_64_64 */
         (machine == ELF_EM_AARCH64 && type == 257); /* R_AARCH64_ABS64 */
}

/* The section of symbol `sym` whose st_shndx is SHN_XINDEX: its entry in the
 * SHT_SYMTAB_SHNDX section that extends symbol table `symtab`. */
static kpack_error_t extended_index(elf_file* elf, uint32_t symtab,
                                    uint64_t sym, uint64_t* shndx) {
  for (size_t i = 1; i < elf->section_count; i++) {
    const elf_section* s = &elf->sections[i];
    if (s->type != ELF_SHT_SYMTAB_SHNDX || s->link != symtab)
      continue;
    kp_input table;
    uint8_t v[4];
    kpack_error_t err = elf_section_input(elf, i, &table);
    if (err != KPACK_SUCCESS)
      return err;
    if (sym >= table.size / 4)
      break;
    if ((err = kp_input_read(&table, sym * 4, v, 4)) != KPACK_SUCCESS)
      return err;
    *shndx = kp_load_le(v, 4);
    return KPACK_SUCCESS;
  }
  return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                  "symbol %" PRIu64
                  " of section %u has SHN_XINDEX but no "
                  "SHT_SYMTAB_SHNDX entry",
                  sym, symtab);
}

/* S + A for an ABS64 relocation through symbol `sym` of the symbol table
 * `symtab` (the relocation section's sh_link). */
static kpack_error_t abs64_target(elf_file* elf, uint32_t symtab, uint64_t sym,
                                  uint64_t addend, elf_pointer* out) {
  uint8_t s[ELF_SYM_SIZE];
  kp_input syms;
  if (sym == 0) { /* no symbol: S is 0 */
    *out = (elf_pointer){ELF_PTR_ADDRESS, addend, 0};
    return KPACK_SUCCESS;
  }
  if (symtab == 0 || symtab >= elf->section_count)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "relocation symbol table %u is not a section", symtab);
  kpack_error_t err = elf_section_input(elf, symtab, &syms);
  if (err != KPACK_SUCCESS)
    return err;
  if (sym >= syms.size / ELF_SYM_SIZE)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "relocation names symbol %" PRIu64
                    " but section %u holds %" PRIu64,
                    sym, symtab, syms.size / ELF_SYM_SIZE);
  if ((err = kp_input_read(&syms, sym * ELF_SYM_SIZE, s, sizeof(s))) !=
      KPACK_SUCCESS)
    return err;
  uint64_t shndx = kp_load_le(s + 6, 2);
  uint64_t value = kp_load_le(s + 8, 8);
  if (shndx == ELF_SHN_XINDEX &&
      (err = extended_index(elf, symtab, sym, &shndx)) != KPACK_SUCCESS)
    return err;
  bool reserved = shndx >= ELF_SHN_LORESERVE && shndx <= ELF_SHN_XINDEX &&
                  kp_load_le(s + 6, 2) != ELF_SHN_XINDEX;
  if (shndx == ELF_SHN_UNDEF || (reserved && shndx != ELF_SHN_ABS)) {
    /* Undefined, SHN_COMMON and the other reserved indices: no address. */
    *out = (elf_pointer){ELF_PTR_UNDEFINED, 0, 0};
  } else if (elf->type == ELF_ET_REL && !reserved) {
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
static kpack_error_t apply_section(elf_file* elf, size_t rsec, size_t table,
                                   size_t record_size, size_t field,
                                   size_t count, elf_pointer* out) {
  const elf_section* rs = &elf->sections[rsec];
  const elf_section* ts = &elf->sections[table];
  bool rel = elf->type == ELF_ET_REL;
  kp_scratch scratch = {0};
  kp_input relocs;
  kpack_error_t err = elf_section_input(elf, rsec, &relocs);
  if (err != KPACK_SUCCESS)
    return err;
  if (relocs.size % ELF_RELA_SIZE != 0)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "relocation section %zu is %" PRIu64
                    " bytes, not whole %u-byte records",
                    rsec, relocs.size, ELF_RELA_SIZE);
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
      elf_rela rec = elf_rela_parse(p);
      uint64_t slot;
      if (rel) {
        slot = rec.offset;
      } else {
        if (rec.offset < ts->addr)
          continue;
        slot = rec.offset - ts->addr;
      }
      if (slot % record_size != field || slot / record_size >= count)
        continue;
      elf_pointer* ptr = &out[slot / record_size];
      if (is_relative(elf->machine, rec.type)) {
        *ptr = (elf_pointer){ELF_PTR_ADDRESS, rec.addend, 0};
      } else if (is_abs64(elf->machine, rec.type)) {
        err = abs64_target(elf, rs->link, rec.symbol, rec.addend, ptr);
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

kpack_error_t elf_read_pointers(elf_file* elf, size_t table, size_t record_size,
                                size_t field, size_t count, elf_pointer* out) {
  kpack_error_t err;
  kp_input records;
  kp_scratch scratch = {0};
  const uint8_t* bytes;
  if ((err = elf_section_input(elf, table, &records)) != KPACK_SUCCESS)
    return err;
  if (field > record_size || record_size - field < 8 ||
      count > records.size / record_size)
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    "section %zu holds fewer than %zu records", table, count);
  err = kp_input_view(&records, 0, count * record_size, &scratch, &bytes);
  if (err != KPACK_SUCCESS)
    goto done;
  for (size_t i = 0; i < count; i++)
    out[i] = (elf_pointer){ELF_PTR_STORED,
                           kp_load_le(bytes + i * record_size + field, 8), 0};
  for (size_t s = 1; s < elf->section_count; s++) {
    if (elf->sections[s].type != ELF_SHT_RELA ||
        !elf_relocation_applies(elf, s, table))
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

kpack_error_t elf_read_wrappers(elf_file* elf, size_t seg,
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
    return elf_fail(elf, KPACK_ERROR_INVALID_FORMAT,
                    ".hipFatBinSegment is %" PRIu64
                    " bytes, not whole %u-byte records",
                    table.size, ELF_WRAPPER_SIZE);
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
