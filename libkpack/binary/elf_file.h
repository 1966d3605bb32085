/* SPDX-License-Identifier: MIT
 *
 * The little ELF reading the host-binary readers share (fatbin.c for HIPF
 * wrappers, host.c for HIPK wrappers): the section table of a 64-bit
 * little-endian file, sections by name, the final value of pointer fields
 * in a table of records once the linker's relocations are applied, and the
 * wrapper records of .hipFatBinSegment read that way.
 * Reads go through kp_input in small pieces; nothing but the section table
 * is kept. Owned by elf_file.c; an elf_file belongs to its caller.
 */
#ifndef KPACK_ELF_FILE_H
#define KPACK_ELF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/input.h"

#define ELF_ET_REL 1u
#define ELF_ET_EXEC 2u
#define ELF_ET_DYN 3u
#define ELF_EM_X86_64 62u
#define ELF_EM_AARCH64 183u
#define ELF_SHT_PROGBITS 1u
#define ELF_SHT_RELA 4u
#define ELF_SHT_NOTE 7u
#define ELF_SHT_NOBITS 8u
#define ELF_SHT_RELR 19u
#define ELF_SHF_ALLOC 2u
#define ELF_PT_LOAD 1u
#define ELF_PT_INTERP 3u
#define ELF_PT_NOTE 4u
#define ELF_PT_PHDR 6u
#define ELF_EHDR_SIZE 64u
#define ELF_PHDR_SIZE 56u
#define ELF_SHDR_SIZE 64u
#define ELF_RELA_SIZE 24u
#define ELF_WRAPPER_SIZE 24u

typedef struct elf_section {
  uint32_t name; /* offset in the section name table */
  uint32_t type;
  uint64_t flags;
  uint64_t addr;
  uint64_t offset;
  uint64_t size;
  uint32_t link;
  uint32_t info;
  uint64_t align;
} elf_section;

typedef struct elf_segment {
  uint32_t type;
  uint32_t flags;
  uint64_t offset;
  uint64_t vaddr;
  uint64_t paddr;
  uint64_t filesz;
  uint64_t memsz;
  uint64_t align;
} elf_segment;

/* One relocation record (Elf64_Rela), as elf_rela_parse() reads it. */
typedef struct elf_rela {
  uint64_t offset; /* where it applies */
  uint32_t type;   /* the low half of r_info */
  uint32_t symbol; /* the high half: its index in the linked symbol table */
  uint64_t addend;
} elf_rela;

/* The record in the ELF_RELA_SIZE bytes at `p`. */
elf_rela elf_rela_parse(const uint8_t* p);

/* What the last failing call on an elf_file found wrong, in words, e.g.
 * "section header table at 0x1000 extends past end of file (2048 bytes):
 * truncated?". */
#define ELF_WHY_SIZE 200

typedef struct elf_file {
  kp_input in;
  uint16_t type;
  uint16_t machine;
  uint64_t shoff;          /* section header table; 0 when there is none */
  uint64_t shentsize;      /* its entry size (at least ELF_SHDR_SIZE) */
  uint64_t phoff;          /* program header table; 0 when there is none */
  uint64_t phentsize;      /* its entry size (at least ELF_PHDR_SIZE) */
  elf_section* sections;   /* [0] is the null section */
  size_t section_count;    /* 0 when the file has no section table */
  uint64_t names_declared; /* e_shstrndx (or section 0's sh_link) */
  size_t names;            /* index of the section name table; 0 when
                              e_shstrndx names no section */
  elf_segment* segments;   /* the program headers, in table order */
  size_t segment_count;
  char why[ELF_WHY_SIZE]; /* set by a call that fails with INVALID_FORMAT */
} elf_file;

#define ELF_EM_AMDGPU 224u

/* What the identification bytes at the start of a file say. */
typedef enum elf_ident_kind {
  ELF_IDENT_NONE,  /* not an ELF file (or fewer than 6 bytes) */
  ELF_IDENT_OTHER, /* an ELF file of another class or byte order */
  ELF_IDENT_64LE,  /* a 64-bit little-endian ELF file, the only kind read */
} elf_ident_kind;

/* Classifies the first `size` bytes at `h` (6 are enough). */
elf_ident_kind elf_ident(const uint8_t* h, size_t size);

/* True when `h` (size bytes) holds the whole header of a 64-bit
 * little-endian ELF file. */
bool elf_is_elf64le(const uint8_t* h, size_t size);

/* Reads the ELF header, the section table and the program headers (with the
 * extended section count, name table index and program header count of
 * section 0 when the header's 16-bit fields cannot hold them). The section
 * name table is checked when a name is first looked up. On failure
 * elf->why says what is wrong and where.
 *   INVALID_FORMAT  not a 64-bit little-endian ELF, a section table or
 *                   program header table outside the file, or entries too
 *                   small
 *   IO_ERROR        the read failed
 *   OUT_OF_MEMORY   allocation failed */
kpack_error_t elf_open(const kp_input* in, elf_file* elf);
void elf_close(elf_file* elf);

/* *index is the section called `name`, or 0 when there is none.
 *   INVALID_FORMAT  the section name table is missing or outside the file
 *   IO_ERROR        a read failed */
kpack_error_t elf_find_section(elf_file* elf, const char* name, size_t* index);

/* The file bytes of section `index`.
 *   INVALID_FORMAT  a NOBITS section, or one that runs past the file */
kpack_error_t elf_section_input(elf_file* elf, size_t index, kp_input* out);

/* The name of section `index` (at most size - 1 bytes, NUL-terminated; ""
 * when it runs off the name table).
 *   IO_ERROR  a read failed */
kpack_error_t elf_section_name(elf_file* elf, size_t index, char* name,
                               size_t size);

/* The file offset of address `addr` when a PT_LOAD holds it in its file
 * bytes (a program's view), else false. */
bool elf_address_offset(const elf_file* elf, uint64_t addr, uint64_t* offset);

/* True when relocation section `index` is one the loader applies to a linked
 * file (allocated), or in any file one that names section `table` in
 * sh_info. A linked file built with --emit-relocs keeps the static
 * relocations of every section, whose offsets are not addresses. */
bool elf_relocation_applies(const elf_file* elf, size_t index, size_t table);

/* How the value of a pointer field was found. */
typedef enum {
  ELF_PTR_STORED,    /* no relocation: the value in the file, an address */
  ELF_PTR_ADDRESS,   /* RELATIVE (the addend) or ABS64 in a linked file */
  ELF_PTR_SECTION,   /* ABS64 in a relocatable object: an offset in `section` */
  ELF_PTR_UNDEFINED, /* ABS64 against an undefined symbol: unknown */
} elf_ptr_how;

typedef struct elf_pointer {
  elf_ptr_how how;
  uint64_t value;
  size_t section; /* ELF_PTR_SECTION only */
} elf_pointer;

/* The final value of the u64 at byte `field` of each of the first `count`
 * records of `record_size` bytes in section `table`: what an R_*_RELATIVE
 * or R_*_64 relocation (x86-64, AArch64) targeting it yields, else the value
 * stored there. Only relocation sections elf_relocation_applies() to `table`
 * count; in a relocatable object their offsets are section-relative. An
 * R_*_64 without a symbol is its addend; one through a symbol in section
 * SHN_XINDEX finds the section in SHT_SYMTAB_SHNDX, and one through a
 * reserved index (SHN_ABS: an address; SHN_COMMON and the others: unknown)
 * names no section.
 *   INVALID_FORMAT  the table or a relocation section runs past the file, a
 *                   relocation section is not whole records, or names a
 *                   symbol that is not in its symbol table
 *   IO_ERROR, OUT_OF_MEMORY */
kpack_error_t elf_read_pointers(elf_file* elf, size_t table, size_t record_size,
                                size_t field, size_t count, elf_pointer* out);

/* True, with *offset, when the pointer lands inside section `target`. */
bool elf_pointer_in(const elf_file* elf, const elf_pointer* ptr, size_t target,
                    uint64_t* offset);

/* The allocated section the pointer lands in, or 0 when none holds it. */
size_t elf_pointer_section(const elf_file* elf, const elf_pointer* ptr);

/* One 24-byte record of .hipFatBinSegment, the __CudaFatBinaryWrapper HIP's
 * host code registers: magic ("HIPF" or "HIPK"), version, the pointer at
 * byte 8 as elf_read_pointers() finds it, and the u64 at byte 16 (a HIPK
 * record's code object index). */
typedef struct elf_wrapper {
  uint32_t magic;
  uint32_t version;
  elf_pointer pointer;
  uint64_t reserved;
} elf_wrapper;

/* The records of section `seg`, in order: *records is malloc'ed (free() it;
 * never NULL on success, even for none) and holds *count of them.
 *   INVALID_FORMAT  the section lies outside the file or is not whole
 *                   records; as elf_read_pointers()
 *   IO_ERROR, OUT_OF_MEMORY */
kpack_error_t elf_read_wrappers(elf_file* elf, size_t seg,
                                elf_wrapper** records, size_t* count);

#endif /* KPACK_ELF_FILE_H */
