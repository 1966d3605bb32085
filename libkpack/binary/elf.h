/* SPDX-License-Identifier: MIT
 *
 * The little ELF reading the host-binary readers share (fatbin.c for HIPF
 * wrappers, host.c for HIPK wrappers): the section table of a 64-bit
 * little-endian file, sections by name, the final value of pointer fields
 * in a table of records once the linker's relocations are applied, and the
 * wrapper records of .hipFatBinSegment read that way.
 * Reads go through kp_input in small pieces; nothing but the section table
 * is kept. Owned by elf.c; an elf_file belongs to its caller.
 */
#ifndef KPACK_ELF_H
#define KPACK_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/input.h"

#define ELF_ET_REL 1u
#define ELF_ET_EXEC 2u
#define ELF_ET_DYN 3u
#define ELF_EM_X86_64 62u
#define ELF_EM_AARCH64 183u
#define ELF_SHT_NOBITS 8u
#define ELF_SHF_ALLOC 2u

typedef struct elf_section {
  uint32_t name; /* offset in the section name table */
  uint32_t type;
  uint64_t flags;
  uint64_t addr;
  uint64_t offset;
  uint64_t size;
  uint32_t link;
  uint32_t info;
} elf_section;

typedef struct elf_file {
  kp_input in;
  uint16_t type;
  uint16_t machine;
  elf_section* sections; /* [0] is the null section */
  size_t section_count;  /* 0 when the file has no section table */
  size_t names;          /* index of the section name table */
} elf_file;

/* Reads the ELF header and the section table.
 *   INVALID_FORMAT  not a 64-bit little-endian ELF, a section table or name
 *                   table outside the file, or entries too small
 *   IO_ERROR        the read failed
 *   OUT_OF_MEMORY   allocation failed */
kpack_error_t elf_open(const kp_input* in, elf_file* elf);
void elf_close(elf_file* elf);

/* *index is the section called `name`, or 0 when there is none.
 *   IO_ERROR  a read failed */
kpack_error_t elf_find_section(const elf_file* elf, const char* name,
                               size_t* index);

/* The file bytes of section `index`.
 *   INVALID_FORMAT  a NOBITS section, or one that runs past the file */
kpack_error_t elf_section_input(const elf_file* elf, size_t index,
                                kp_input* out);

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
 * stored there. In a relocatable object only relocation sections that apply
 * to `table` count, and their offsets are section-relative.
 *   INVALID_FORMAT  the table or a relocation section runs past the file, a
 *                   relocation section is not whole records, or names a
 *                   symbol that is not in its symbol table
 *   IO_ERROR, OUT_OF_MEMORY */
kpack_error_t elf_read_pointers(const elf_file* elf, size_t table,
                                size_t record_size, size_t field, size_t count,
                                elf_pointer* out);

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
kpack_error_t elf_read_wrappers(const elf_file* elf, size_t seg,
                                elf_wrapper** records, size_t* count);

#endif /* KPACK_ELF_H */
