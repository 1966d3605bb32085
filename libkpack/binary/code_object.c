/* SPDX-License-Identifier: MIT
 *
 * AMDGPU code objects (kpack_code_object.h): the target from the ELF header's
 * e_flags and the kernels of the NT_AMDGPU_METADATA note, read straight from
 * the bytes with the bounded MessagePack reader. The note is validated as a
 * whole before it is walked, so the walk only meets values of the wrong
 * type, never truncation.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binary/elf_file.h"
#include "binary/processor.h"
#include "common/byteorder.h"
#include "common/msgpack_json.h"
#include "common/msgpack_reader.h"
#include "rocm_kpack/kpack_code_object.h"
#include "common/grow.h"
#include "loader/target.h"
#include "rocm_kpack/kpack_prefix.h"

#define CO_ELFOSABI_AMDGPU_HSA 64u
#define CO_NOTE_HEADER 12u
/* e_phnum saying section 0 holds the count (as elf_file.c reads it). */
#define CO_PN_XNUM 0xffffu
#define CO_NT_AMDGPU_METADATA 32u

/* e_flags fields (LLVM's EF_AMDGPU_*). */
#define CO_EF_MACH 0xffu
#define CO_EF_XNACK_V2 0x01u
#define CO_EF_XNACK_V3 0x100u
#define CO_EF_SRAMECC_V3 0x200u
#define CO_EF_XNACK_V4_SHIFT 8
#define CO_EF_SRAMECC_V4_SHIFT 10
#define CO_EF_GENERIC_SHIFT 24

struct kpack_code_object {
  kpack_code_object_info_t info;
  kpack_co_kernel_t* kernels;
  size_t kernel_cap;
  uint8_t* note; /* a copy of the metadata note's description */
  size_t note_size;
  char* strings; /* every string reported, NUL-terminated */
  size_t strings_used;
  size_t strings_cap;
};

/* Copies n bytes into the string arena, which was sized for every string
 * the code object can report. */
static const char* keep_string(kpack_code_object_t* co, const char* s,
                               size_t n) {
  if (n >= co->strings_cap - co->strings_used)
    return NULL; /* cannot happen: see kpack_code_object_parse() */
  char* p = co->strings + co->strings_used;
  memcpy(p, s, n);
  p[n] = '\0';
  co->strings_used += n + 1;
  return p;
}

/* ---- ELF ----------------------------------------------------------------- */

/* Where the metadata note's description is, once found. */
typedef struct co_note {
  const uint8_t* desc;
  uint32_t size;
  bool found;
} co_note;

static bool is_metadata_note(const uint8_t* name, uint64_t namesz,
                             uint64_t type) {
  /* "AMDGPU" with its terminating NUL, as LLVM writes it, or without. */
  return type == CO_NT_AMDGPU_METADATA &&
         ((namesz == 7 && memcmp(name, "AMDGPU", 7) == 0) ||
          (namesz == 6 && memcmp(name, "AMDGPU", 6) == 0));
}

/* Walks the notes of data[offset, offset + len), `align`-byte aligned, and
 * records the first metadata note. A note that overruns the region is
 * INVALID_FORMAT; fewer than 12 bytes left over at the end are padding. */
static kpack_error_t scan_notes(const uint8_t* data, uint64_t size,
                                uint64_t offset, uint64_t len, uint64_t align,
                                co_note* note) {
  if (offset > size || len > size - offset)
    return KPACK_ERROR_INVALID_FORMAT;
  const uint8_t* region = data + offset;
  uint64_t pos = 0;
  while (!note->found && len - pos >= CO_NOTE_HEADER) {
    uint64_t namesz = kp_load_le(region + pos, 4);
    uint64_t descsz = kp_load_le(region + pos + 4, 4);
    uint64_t type = kp_load_le(region + pos + 8, 4);
    pos += CO_NOTE_HEADER;
    if (namesz > len - pos)
      return KPACK_ERROR_INVALID_FORMAT;
    const uint8_t* name = region + pos;
    /* Name and description each start `align`-aligned in the region. */
    uint64_t desc_at = (pos + namesz + align - 1) & ~(align - 1);
    if (descsz > 0 && (desc_at > len || descsz > len - desc_at))
      return KPACK_ERROR_INVALID_FORMAT;
    if (is_metadata_note(name, namesz, type)) {
      note->desc = region + desc_at;
      note->size = (uint32_t)descsz;
      note->found = true;
    }
    /* The last note's padding may be cut off by the end of the region. */
    pos = (desc_at + descsz + align - 1) & ~(align - 1);
    if (pos > len)
      pos = len;
  }
  return KPACK_SUCCESS;
}

/* The ELF header checks, code object version and target fields. */
static kpack_error_t read_header(const uint8_t* h, size_t size,
                                 kpack_code_object_info_t* info) {
  if (!kpack_is_code_object(h, size))
    return KPACK_ERROR_INVALID_FORMAT;
  info->version = h[7] == CO_ELFOSABI_AMDGPU_HSA ? (unsigned)h[8] + 2 : 0;
  info->e_flags = (uint32_t)kp_load_le(h + 48, 4);
  info->mach = info->e_flags & CO_EF_MACH;
  info->generic_version = info->e_flags >> CO_EF_GENERIC_SHIFT;
  return KPACK_SUCCESS;
}

/* Finds the metadata note: in the PT_NOTE segments, else in the SHT_NOTE
 * sections. Every header table must fit (elf_file.c bounds them), and so must
 * every note region walked. */
static kpack_error_t find_note(const uint8_t* data, uint64_t size,
                               co_note* note) {
  kp_input in = {.mem = data, .fd = -1, .size = size};
  elf_file elf;
  kpack_error_t err = elf_open(&in, &elf);
  if (err != KPACK_SUCCESS)
    return err;
  for (size_t i = 0; i < elf.segment_count && !note->found; i++) {
    const elf_segment* ph = &elf.segments[i];
    if (ph->type != ELF_PT_NOTE)
      continue;
    err = scan_notes(data, size, ph->offset, ph->filesz, ph->align == 8 ? 8 : 4,
                     note);
    if (err != KPACK_SUCCESS)
      goto done;
  }
  for (size_t i = 0; i < elf.section_count && !note->found; i++) {
    const elf_section* sh = &elf.sections[i];
    if (sh->type != ELF_SHT_NOTE)
      continue;
    err = scan_notes(data, size, sh->offset, sh->size, sh->align == 8 ? 8 : 4,
                     note);
    if (err != KPACK_SUCCESS)
      goto done;
  }
  err = KPACK_SUCCESS;
done:
  elf_close(&elf);
  return err;
}

/* ---- metadata ------------------------------------------------------------ */

/* A value of the wrong type is a wrong shape; anything else a broken
 * encoding (cannot happen after the note was validated, but never trusted). */
static kpack_error_t shape_error(mp_status st) {
  return st == MP_WRONG_TYPE ? KPACK_ERROR_INVALID_METADATA
                             : KPACK_ERROR_MSGPACK_PARSE_FAILED;
}

static const struct {
  const char* key;
  uint32_t bit;
  size_t offset;
} kernel_counts[] = {
    {".vgpr_count", KPACK_CO_VGPR_COUNT,
     offsetof(kpack_co_kernel_t, vgpr_count)},
    {".sgpr_count", KPACK_CO_SGPR_COUNT,
     offsetof(kpack_co_kernel_t, sgpr_count)},
    {".agpr_count", KPACK_CO_AGPR_COUNT,
     offsetof(kpack_co_kernel_t, agpr_count)},
    {".group_segment_fixed_size", KPACK_CO_GROUP_SEGMENT_FIXED_SIZE,
     offsetof(kpack_co_kernel_t, group_segment_fixed_size)},
    {".private_segment_fixed_size", KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE,
     offsetof(kpack_co_kernel_t, private_segment_fixed_size)},
    {".kernarg_segment_size", KPACK_CO_KERNARG_SEGMENT_SIZE,
     offsetof(kpack_co_kernel_t, kernarg_segment_size)},
    {".wavefront_size", KPACK_CO_WAVEFRONT_SIZE,
     offsetof(kpack_co_kernel_t, wavefront_size)},
    {".max_flat_workgroup_size", KPACK_CO_MAX_FLAT_WORKGROUP_SIZE,
     offsetof(kpack_co_kernel_t, max_flat_workgroup_size)},
    {".vgpr_spill_count", KPACK_CO_VGPR_SPILL_COUNT,
     offsetof(kpack_co_kernel_t, vgpr_spill_count)},
    {".sgpr_spill_count", KPACK_CO_SGPR_SPILL_COUNT,
     offsetof(kpack_co_kernel_t, sgpr_spill_count)},
};
#define KERNEL_COUNTS (sizeof(kernel_counts) / sizeof(kernel_counts[0]))

/* Reads a str value into the arena; a second one for the same key is a
 * wrong shape. */
static kpack_error_t read_string(kpack_code_object_t* co, mp_cursor* c,
                                 const char** out) {
  const char* s;
  uint32_t len;
  mp_status st = mp_read_str(c, &s, &len);
  if (st != MP_OK)
    return shape_error(st);
  if (*out != NULL)
    return KPACK_ERROR_INVALID_METADATA;
  *out = keep_string(co, s, len);
  return *out != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
}

static kpack_error_t read_kernel(kpack_code_object_t* co, mp_cursor* c,
                                 kpack_co_kernel_t* k) {
  uint32_t pairs;
  mp_status st = mp_read_map(c, &pairs);
  if (st != MP_OK)
    return shape_error(st);
  memset(k, 0, sizeof(*k));
  for (uint32_t i = 0; i < pairs; i++) {
    const char* key;
    uint32_t len;
    kpack_error_t err = KPACK_SUCCESS;
    if (mp_read_str(c, &key, &len) != MP_OK) {
      /* Not a str key: not one of ours. */
      if ((st = mp_skip(c)) != MP_OK || (st = mp_skip(c)) != MP_OK)
        return shape_error(st);
      continue;
    }
    if (mp_str_eq(key, len, ".name")) {
      err = read_string(co, c, &k->name);
    } else if (mp_str_eq(key, len, ".symbol")) {
      err = read_string(co, c, &k->symbol);
      k->present |= KPACK_CO_SYMBOL;
    } else {
      size_t f = 0;
      while (f < KERNEL_COUNTS && !mp_str_eq(key, len, kernel_counts[f].key))
        f++;
      if (f == KERNEL_COUNTS) {
        st = mp_skip(c); /* an unknown key */
      } else if (k->present & kernel_counts[f].bit) {
        err = KPACK_ERROR_INVALID_METADATA; /* given twice */
      } else {
        uint64_t v;
        st = mp_read_uint(c, &v);
        memcpy((char*)k + kernel_counts[f].offset, &v, sizeof(v));
        k->present |= kernel_counts[f].bit;
      }
      if (st != MP_OK)
        err = shape_error(st);
    }
    if (err != KPACK_SUCCESS)
      return err;
  }
  if (k->name == NULL)
    return KPACK_ERROR_INVALID_METADATA;
  if (k->symbol == NULL)
    k->symbol = "";
  return KPACK_SUCCESS;
}

static kpack_error_t read_kernels(kpack_code_object_t* co, mp_cursor* c) {
  uint32_t count;
  mp_status st = mp_read_array(c, &count);
  if (st != MP_OK)
    return shape_error(st);
  for (uint32_t i = 0; i < count; i++) {
    /* Grown as kernels parse, so a count that lies costs nothing. */
    kpack_co_kernel_t* grown = kp_grow(co->kernels, co->info.kernel_count,
                                       &co->kernel_cap, sizeof(*grown), 16);
    if (grown == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    co->kernels = grown;
    kpack_error_t err = read_kernel(co, c, &co->kernels[co->info.kernel_count]);
    if (err != KPACK_SUCCESS)
      return err;
    co->info.kernel_count++;
  }
  return KPACK_SUCCESS;
}

static kpack_error_t read_metadata(kpack_code_object_t* co) {
  mp_cursor c = mp_cursor_make(co->note, co->note_size);
  uint32_t pairs;
  bool seen_kernels = false;
  const char* target = NULL;
  kpack_error_t err;
  mp_status st = mp_read_map(&c, &pairs);
  if (st != MP_OK)
    return shape_error(st);
  for (uint32_t i = 0; i < pairs; i++) {
    const char* key;
    uint32_t len;
    if (mp_read_str(&c, &key, &len) != MP_OK) {
      if ((st = mp_skip(&c)) != MP_OK || (st = mp_skip(&c)) != MP_OK)
        return shape_error(st);
      continue;
    }
    if (mp_str_eq(key, len, "amdhsa.kernels")) {
      if (seen_kernels)
        return KPACK_ERROR_INVALID_METADATA;
      seen_kernels = true;
      err = read_kernels(co, &c);
    } else if (mp_str_eq(key, len, "amdhsa.target")) {
      err = read_string(co, &c, &target);
    } else {
      st = mp_skip(&c);
      err = st == MP_OK ? KPACK_SUCCESS : shape_error(st);
    }
    if (err != KPACK_SUCCESS)
      return err;
  }
  if (target != NULL)
    co->info.metadata_target = target;
  return KPACK_SUCCESS;
}

/* ---- target -------------------------------------------------------------- */

/* v2 and v3 store one bit per feature: set is on, clear is off, for a
 * processor that has the feature. */
static kpack_feature_t feature_bit(const kp_processor* p, unsigned feature,
                                   uint32_t flags, uint32_t bit) {
  if (p == NULL || !(p->features & feature))
    return KPACK_FEATURE_UNSUPPORTED;
  return (flags & bit) ? KPACK_FEATURE_ON : KPACK_FEATURE_OFF;
}

static kpack_error_t derive_target(kpack_code_object_t* co) {
  kpack_code_object_info_t* info = &co->info;
  /* Before v3, e_flags held no processor (a separate note named it). */
  const kp_processor* p =
      info->version == 2 ? NULL : kp_processor_by_mach(info->mach);
  uint32_t flags = info->e_flags;
  if (info->version >= 4) {
    info->xnack = (kpack_feature_t)((flags >> CO_EF_XNACK_V4_SHIFT) & 3);
    info->sramecc = (kpack_feature_t)((flags >> CO_EF_SRAMECC_V4_SHIFT) & 3);
  } else if (info->version == 3) {
    info->xnack = feature_bit(p, KP_XNACK, flags, CO_EF_XNACK_V3);
    info->sramecc = feature_bit(p, KP_SRAMECC, flags, CO_EF_SRAMECC_V3);
  } else if (info->version == 2) {
    info->xnack =
        (flags & CO_EF_XNACK_V2) ? KPACK_FEATURE_ON : KPACK_FEATURE_OFF;
  }
  if (p == NULL) {
    /* An unknown processor: believe the note, which names it. */
    const char* t = kp_target_strip_prefix(info->metadata_target);
    info->target = t;
    info->processor = keep_string(co, t, strcspn(t, ":"));
    return info->processor != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
  }
  char buf[64];
  size_t n = (size_t)snprintf(buf, sizeof(buf), "%s", p->name);
  if (info->sramecc == KPACK_FEATURE_ON || info->sramecc == KPACK_FEATURE_OFF)
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, ":sramecc%c",
                          info->sramecc == KPACK_FEATURE_ON ? '+' : '-');
  if (info->xnack == KPACK_FEATURE_ON || info->xnack == KPACK_FEATURE_OFF)
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, ":xnack%c",
                          info->xnack == KPACK_FEATURE_ON ? '+' : '-');
  info->processor = p->name;
  info->target = keep_string(co, buf, n);
  return info->target != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
}

/* ---- public API ---------------------------------------------------------- */

KPACK_API bool kpack_is_code_object(const void* data, size_t size) {
  const uint8_t* h = data;
  return elf_is_elf64le(h, size) && kp_load_le(h + 18, 2) == ELF_EM_AMDGPU;
}

/* Parses a code object of `size` bytes from `data`. With `located` NULL,
 * data holds all of it and the note is looked for; otherwise the note was
 * found in a segment of the prefix at data (walk_prefix()), which holds the
 * ELF header the parse reads too. */
static kpack_error_t parse_bytes(const uint8_t* data, uint64_t size,
                                 const co_note* located,
                                 kpack_code_object_t** code_object) {
  kpack_error_t err;
  kpack_code_object_t* co = NULL;
  co_note note = {0};

  co = calloc(1, sizeof(*co));
  if (co == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  co->info.metadata_target = "";
  co->info.processor = "";
  co->info.target = "";
  if ((err = read_header(data, size > SIZE_MAX ? SIZE_MAX : (size_t)size,
                         &co->info)) != KPACK_SUCCESS ||
      (located == NULL &&
       (err = find_note(data, size, &note)) != KPACK_SUCCESS))
    goto fail;
  if (located != NULL)
    note = *located;

  /* Every str in the note takes at least one header byte there, so its
   * text and NUL fit in note_size bytes; the target and a processor taken
   * from the note fit in as many again plus the longest composed target. */
  co->strings_cap = 2 * (size_t)note.size + 64;
  co->strings = malloc(co->strings_cap);
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if (co->strings == NULL)
    goto fail;
  if (note.found) {
    co->info.has_metadata = true;
    co->info.metadata_size = note.size;
    co->note_size = note.size;
    co->note = malloc(note.size ? note.size : 1);
    if (co->note == NULL)
      goto fail;
    memcpy(co->note, note.desc, note.size);
    mp_cursor whole = mp_cursor_make(co->note, co->note_size);
    err = KPACK_ERROR_MSGPACK_PARSE_FAILED;
    if (mp_skip_bounded(&whole, KP_JSON_MAX_DEPTH) != MP_OK)
      goto fail;
    if ((err = read_metadata(co)) != KPACK_SUCCESS)
      goto fail;
  }
  if ((err = derive_target(co)) != KPACK_SUCCESS)
    goto fail;
  *code_object = co;
  return KPACK_SUCCESS;

fail:
  kpack_code_object_free(co);
  return err;
}

KPACK_API kpack_error_t kpack_code_object_parse(
    const void* data, size_t size, kpack_code_object_t** code_object) {
  if (code_object == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *code_object = NULL;
  if (data == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  return parse_bytes(data, size, NULL, code_object);
}

/* ---- prefixes (kpack_prefix.h) ------------------------------------------- */

static uint64_t at_least(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}

/* What the bytes seen so far say about the parse of a prefix. */
typedef enum {
  PREFIX_FAILS, /* the whole parse fails (INVALID_FORMAT) on what is here */
  PREFIX_NOTE,  /* the note is in a PT_NOTE segment: the prefix is enough */
  PREFIX_WHOLE, /* the note is in no segment: the sections (last) decide */
} prefix_outcome;

/* A table of `count` entries of `entsize` bytes at `offset` fits in size
 * (as elf_open() checks it). */
static bool fits(uint64_t size, uint64_t offset, uint64_t count,
                 uint64_t entsize) {
  return offset <= size && count <= (size - offset) / entsize;
}

/* How many leading bytes of a code object of `size` bytes parse_bytes()
 * reads before it knows its answer, judged from the `avail` bytes at d. It
 * makes the checks of read_header(), elf_open() and find_note() in their
 * order, stopping at the first read that lies beyond avail (the caller
 * reads that far and asks again; *outcome is then unset) or at the first
 * failure (PREFIX_FAILS: the parse fails the same way). The ELF header, the
 * program headers, section 0 when the header's counts live there, and the
 * PT_NOTE segments up to the one with the metadata note (PREFIX_NOTE, *note
 * set); without one, the section headers at the end of the file and so all
 * of it (PREFIX_WHOLE). Only header fields and section 0 decide whether
 * elf_open() fails, so the rest of the section table is never needed when
 * a segment holds the note. */
static uint64_t walk_prefix(const uint8_t* d, uint64_t avail, uint64_t size,
                            co_note* note, prefix_outcome* outcome) {
  uint64_t need = size < ELF_EHDR_SIZE ? size : ELF_EHDR_SIZE;
  *outcome = PREFIX_FAILS;
  if (avail < need)
    return need;
  if (!kpack_is_code_object(d, (size_t)need))
    return need; /* read_header() */
  uint64_t phoff = kp_load_le(d + 32, 8), shoff = kp_load_le(d + 40, 8);
  uint64_t phentsize = kp_load_le(d + 54, 2), phnum = kp_load_le(d + 56, 2);
  uint64_t shentsize = kp_load_le(d + 58, 2), count = kp_load_le(d + 60, 2);
  if (shoff != 0) {
    if (shentsize < ELF_SHDR_SIZE ||
        !fits(size, shoff, count ? count : 1, shentsize))
      return need;
    if (count == 0 || phnum == CO_PN_XNUM) {
      need = at_least(need, shoff + ELF_SHDR_SIZE);
      if (avail < need)
        return need;
      if (count == 0)
        count = kp_load_le(d + shoff + 32, 8);
      if (phnum == CO_PN_XNUM)
        phnum = kp_load_le(d + shoff + 44, 4);
      if (count == 0)
        return need;
    }
  }
  if (phoff == 0)
    phnum = 0;
  if (phnum > 0) {
    if (phentsize < ELF_PHDR_SIZE || !fits(size, phoff, phnum, phentsize))
      return need;
  }
  if (shoff != 0 && !fits(size, shoff, count, shentsize))
    return need;
  if (phnum > 0) {
    need = at_least(need, phoff + phnum * phentsize);
    if (avail < need)
      return need;
  }
  for (uint64_t i = 0; i < phnum && !note->found; i++) {
    const uint8_t* ph = d + phoff + i * phentsize;
    if (kp_load_le(ph, 4) != ELF_PT_NOTE)
      continue;
    uint64_t offset = kp_load_le(ph + 8, 8), len = kp_load_le(ph + 32, 8);
    if (offset > size || len > size - offset)
      return need; /* scan_notes() refuses it */
    need = at_least(need, offset + len);
    if (avail < need)
      return need;
    if (scan_notes(d, size, offset, len, kp_load_le(ph + 48, 8) == 8 ? 8 : 4,
                   note) != KPACK_SUCCESS)
      return need;
  }
  *outcome = note->found ? PREFIX_NOTE : PREFIX_WHOLE;
  return note->found ? need : size;
}

KPACK_API kpack_error_t kpack_code_object_prefix_needed(const void* data,
                                                        size_t avail,
                                                        uint64_t size,
                                                        uint64_t* needed) {
  co_note note = {0};
  prefix_outcome outcome;
  if (needed != NULL)
    *needed = 0;
  if (needed == NULL || (data == NULL && avail > 0) || avail > size)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *needed = walk_prefix(data, avail, size, &note, &outcome);
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t
kpack_code_object_parse_prefix(const void* data, size_t avail, uint64_t size,
                               kpack_code_object_t** code_object) {
  co_note note = {0};
  prefix_outcome outcome;
  if (code_object == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *code_object = NULL;
  if ((data == NULL && avail > 0) || avail > size ||
      walk_prefix(data, avail, size, &note, &outcome) > avail)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (outcome == PREFIX_FAILS)
    return KPACK_ERROR_INVALID_FORMAT;
  /* With the note in a segment, the section table is not read at all; the
   * whole code object is at hand otherwise. */
  return parse_bytes(data, size, outcome == PREFIX_NOTE ? &note : NULL,
                     code_object);
}

KPACK_API kpack_error_t kpack_code_object_get_info(
    const kpack_code_object_t* code_object, kpack_code_object_info_t* info) {
  if (code_object == NULL || info == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *info = code_object->info;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t
kpack_code_object_get_kernel(const kpack_code_object_t* code_object,
                             size_t index, kpack_co_kernel_t* kernel) {
  if (code_object == NULL || kernel == NULL ||
      index >= code_object->info.kernel_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *kernel = code_object->kernels[index];
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t
kpack_code_object_metadata_json(const kpack_code_object_t* code_object,
                                bool pretty, char** json, size_t* json_len) {
  if (json != NULL)
    *json = NULL;
  if (code_object == NULL || json == NULL || json_len == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (!code_object->info.has_metadata) {
    *json = strdup("null");
    *json_len = 4;
    return *json != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
  }
  return kp_msgpack_to_json(code_object->note, code_object->note_size, pretty,
                            json, json_len, NULL);
}

KPACK_API void kpack_code_object_free(kpack_code_object_t* code_object) {
  if (code_object == NULL)
    return;
  free(code_object->kernels);
  free(code_object->note);
  free(code_object->strings);
  free(code_object);
}

KPACK_API const char* kpack_feature_name(kpack_feature_t feature) {
  switch (feature) {
    case KPACK_FEATURE_UNSUPPORTED:
      return "unsupported";
    case KPACK_FEATURE_ANY:
      return "any";
    case KPACK_FEATURE_OFF:
      return "off";
    case KPACK_FEATURE_ON:
      return "on";
  }
  return NULL;
}

KPACK_API bool kpack_code_object_serves(const kpack_code_object_info_t* info,
                                        const char* arch) {
  if (info == NULL || info->target == NULL || info->processor == NULL ||
      arch == NULL)
    return false;
  /* LLVM always writes a generic version for a generic target; without one
   * the runtime cannot tell which processors the code was made for. */
  if (kp_target_is_generic(info->processor, strlen(info->processor)) &&
      info->generic_version == 0)
    return false;
  return kp_target_serves_version(info->target, info->generic_version, arch);
}
