/* SPDX-License-Identifier: MIT
 *
 * The host-ELF transform (kpack_transform.h): a fat HIP binary in, the same
 * binary without its device code out, each .hipFatBinSegment record turned
 * into a HIPK record pointing at msgpack metadata in .rocm_kpack_ref. The
 * layout of the result is described in docs/split.md ("The transformed
 * ELF"). The input is read through elf_file.c; the output is copied range by
 * range (copy_file_range, else a fixed buffer), then the few changed bytes
 * (records, relocations, headers) are written over it, so memory does not
 * grow with the file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/grow.h"
#include "common/input.h"
#include "binary/elf_file.h"
#include "loader/hipk.h"
#include "rocm_kpack/kpack_host.h"
#include "rocm_kpack/kpack_transform.h"

#define TF_COPY_BUFFER ((size_t)1 << 20)
#define TF_PF_X 1u
#define TF_PF_W 2u
#define TF_PF_R 4u
#define TF_SHF_WRITE 1u
#define TF_SHF_EXECINSTR 4u
#define TF_SHT_SYMTAB 2u
#define TF_SHT_DYNSYM 11u
#define TF_SHN_XINDEX 0xffffu
#define TF_NEW_NAME ".rocm_kpack_ref"
/* The allocated section that covers the moved program header table, so
 * that tools rebuilding a file from its sections keep the table. */
#define TF_PHDR_NAME ".rocm_kpack_phdrs"
/* The most an executable's file may grow by a hole before its program
 * header table (see plan()). */
#define TF_MAX_HOLE ((uint64_t)256 << 20)
/* The smallest page a loader maps (a machine's page may be any multiple of
 * it at run time: AArch64 kernels use 4, 16 or 64 KiB). */
#define TF_MIN_PAGE 4096u

/* What the transform needs to know of a machine. */
typedef struct tf_machine {
  uint16_t machine;
  uint64_t page;     /* the largest page the machine's loaders use */
  uint32_t relative; /* R_*_RELATIVE */
  uint32_t abs64;    /* R_*_64 */
  uint32_t glob_dat; /* R_*_GLOB_DAT */
  const char* relative_name;
} tf_machine;

static const tf_machine tf_machines[] = {
    {ELF_EM_X86_64, 4096, 8, 1, 6, "R_X86_64_RELATIVE"},
    {ELF_EM_AARCH64, 65536, 1027, 257, 1025, "R_AARCH64_RELATIVE"},
};

/* A few bytes of the input file replaced in the output. */
typedef struct tf_patch {
  uint64_t at; /* input file offset */
  uint8_t bytes[ELF_WRAPPER_SIZE];
  size_t size;
} tf_patch;

typedef struct tf_state {
  const char* path;
  kp_input in; /* the input file; elf.in is the same */
  elf_file elf;
  const tf_machine* mach;
  kpack_transform_message_t* msg;
  size_t fat, seg;
  elf_wrapper* wrappers;
  size_t wrapper_count;
  bool* relocated; /* per wrapper: a dynamic relocation sets its pointer */
  tf_patch* patches;
  size_t patch_count, patch_cap;
  /* The removed file range [cut_at, cut_at + removed) inside .hip_fatbin;
   * the rest of .hip_fatbin's bytes stay in the file as zeros. */
  uint64_t cut_at, removed;
  /* Room made for the program header table (place_table_after()): the
   * non-allocated sections from input offset insert_at on move up by
   * `inserted` bytes; 0 when none do. */
  uint64_t insert_at, inserted;
  uint64_t meta_addr;
  const kpack_transform_record_t* records; /* kpack_transform_write_records */
  size_t record_count;
} tf_state;

static kpack_error_t tf_fail(tf_state* st, kpack_error_t err, const char* fmt,
                             ...) {
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  snprintf(st->msg->text, sizeof(st->msg->text), "%s: %s", st->path, what);
  return err;
}

/* The output offset of input offset x: bytes past the removed range move
 * down by its size. */
static uint64_t tf_out(const tf_state* st, uint64_t x) {
  if (x <= st->cut_at)
    return x;
  if (x - st->cut_at < st->removed)
    return st->cut_at;
  return x - st->removed;
}

/* The output offset of input offset x in a non-allocated section, or of
 * the end of the bytes copied: past the room made for the table, if any. */
static uint64_t tf_out_unloaded(const tf_state* st, uint64_t x) {
  uint64_t out = tf_out(st, x);
  return st->inserted != 0 && x >= st->insert_at ? out + st->inserted : out;
}

static uint64_t tf_out_section(const tf_state* st, const elf_section* s) {
  return (s->flags & ELF_SHF_ALLOC) != 0 ? tf_out(st, s->offset)
                                         : tf_out_unloaded(st, s->offset);
}

static kpack_error_t tf_add_patch(tf_state* st, uint64_t at, const void* bytes,
                                  size_t size) {
  tf_patch* grown =
      kp_grow(st->patches, st->patch_count, &st->patch_cap, sizeof(*grown), 16);
  if (grown == NULL)
    return tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
  st->patches = grown;
  tf_patch* p = &st->patches[st->patch_count++];
  p->at = at;
  p->size = size;
  memcpy(p->bytes, bytes, size);
  return KPACK_SUCCESS;
}

/* ---- the metadata -------------------------------------------------------- */

static void mp_str(uint8_t* out, size_t* n, const char* s) {
  size_t len = strlen(s);
  if (len < 32) {
    out[(*n)++] = (uint8_t)(0xa0 | len);
  } else if (len < 256) {
    out[(*n)++] = 0xd9;
    out[(*n)++] = (uint8_t)len;
  } else if (len < 65536) {
    out[(*n)++] = 0xda;
    out[(*n)++] = (uint8_t)(len >> 8);
    out[(*n)++] = (uint8_t)len;
  } else {
    out[(*n)++] = 0xdb;
    for (int i = 3; i >= 0; i--)
      out[(*n)++] = (uint8_t)(len >> (8 * i));
  }
  memcpy(out + *n, s, len);
  *n += len;
}

/* A msgpack array header for n entries (n < 65536), shortest form. */
static void mp_array(uint8_t* out, size_t* n, size_t count) {
  if (count < 16) {
    out[(*n)++] = (uint8_t)(0x90 | count);
  } else {
    out[(*n)++] = 0xdc;
    out[(*n)++] = (uint8_t)(count >> 8);
    out[(*n)++] = (uint8_t)count;
  }
}

static int compare_strings(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Which of the sorted, distinct `arches` each record has, from
 * st->records: a wrapper_count x arch_count matrix of flags into *out
 * (NULL when every record has every arch: no fourth key); *bytes, the
 * key's size at most. */
static kpack_error_t record_matrix(tf_state* st, const char** arches,
                                   size_t arch_count, uint8_t** out,
                                   size_t* bytes) {
  size_t n = st->wrapper_count;
  uint8_t* has;
  bool differs = false;
  *out = NULL;
  *bytes = 0;
  if (st->record_count == 0)
    return KPACK_SUCCESS;
  if (arch_count == 0)
    return tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                   "per-record arches without the binary's arches");
  if ((has = malloc(n * arch_count + n)) == NULL)
    return tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
  uint8_t* given = has + n * arch_count; /* per record: listed already */
  memset(has, 0, n * arch_count + n);    /* a record left out has none */
  for (size_t r = 0; r < st->record_count; r++) {
    const kpack_transform_record_t* rec = &st->records[r];
    if (rec->co_index >= n || given[rec->co_index] ||
        (rec->arch_count > 0 && rec->arches == NULL)) {
      free(has);
      return tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                     "per-record arches %zu: code object index %" PRIu64
                     " is repeated or not one of the %zu records",
                     r, rec->co_index, n);
    }
    given[rec->co_index] = 1;
    uint8_t* row = has + rec->co_index * arch_count;
    for (size_t a = 0; a < rec->arch_count; a++) {
      const char* key = rec->arches[a];
      const char** at = key == NULL ? NULL
                                    : bsearch(&key, arches, arch_count,
                                              sizeof(*arches), compare_strings);
      if (at == NULL) {
        free(has);
        return tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                       "per-record arches %zu: %s is not one of the "
                       "binary's arches",
                       r, key != NULL ? key : "(null)");
      }
      row[at - arches] = 1;
    }
  }
  for (size_t i = 0; i < n * arch_count; i++)
    differs |= has[i] == 0;
  if (!differs) {
    free(has);
    return KPACK_SUCCESS;
  }
  *out = has;
  *bytes = 24 + n * (3 + 2 * arch_count);
  return KPACK_SUCCESS;
}

/* The map {"kernel_name": NAME, "kpack_search_paths": [PATTERN...]}, keys
 * in that order, in the shortest encodings, then "kpack_arches": [ARCH...]
 * (sorted, without duplicates) when arches are given, then, when records
 * differ, "kpack_record_arches": [[POSITION...]...], one array per record
 * of the positions of its arches in kpack_arches; malloc'ed. Without
 * arches the bytes are exactly those of a two-key map. */
static kpack_error_t encode_metadata(tf_state* st,
                                     const kpack_transform_options_t* o,
                                     uint8_t** out, size_t* size) {
  kpack_error_t err = KPACK_SUCCESS;
  const char** arches = NULL;
  size_t arch_count = 0; /* distinct */
  uint8_t* b = NULL;
  uint8_t* has = NULL; /* record_matrix() */
  size_t has_bytes = 0;
  size_t n = 0;
  size_t cap = 64 + strlen(o->kernel_name);
  for (size_t i = 0; i < o->search_path_count; i++) {
    if (o->search_paths[i] == NULL || o->search_paths[i][0] == '\0')
      return tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                     "search path %zu is empty", i);
    cap += 5 + strlen(o->search_paths[i]);
  }
  if (o->arch_count > KP_HIPK_MAX_ARCHES)
    return tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                   "%zu arches, more than the %d a reader accepts",
                   o->arch_count, KP_HIPK_MAX_ARCHES);
  if (o->arch_count > 0) {
    if ((arches = malloc(o->arch_count * sizeof(*arches))) == NULL)
      return tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < o->arch_count; i++) {
      size_t len = o->arches[i] != NULL ? strlen(o->arches[i]) : 0;
      if (len == 0 || len > KP_HIPK_MAX_ARCH_LEN) {
        err = tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                      "arch %zu is empty or longer than %d bytes", i,
                      KP_HIPK_MAX_ARCH_LEN);
        goto done;
      }
      arches[i] = o->arches[i];
    }
    qsort(arches, o->arch_count, sizeof(*arches), compare_strings);
    for (size_t i = 0; i < o->arch_count; i++)
      if (i == 0 || strcmp(arches[i], arches[arch_count - 1]) != 0)
        arches[arch_count++] = arches[i];
    cap += 16;
    for (size_t i = 0; i < arch_count; i++)
      cap += 2 + strlen(arches[i]);
  }
  if ((err = record_matrix(st, arches, arch_count, &has, &has_bytes)) !=
      KPACK_SUCCESS)
    goto done;
  cap += has_bytes;
  if (cap > KP_HIPK_MAX_SIZE) {
    err = tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT,
                  "metadata of about %zu bytes exceeds the %zu a loader "
                  "reads",
                  cap, KP_HIPK_MAX_SIZE);
    goto done;
  }
  if ((b = malloc(cap)) == NULL) {
    err = tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  b[n++] = has != NULL ? 0x84 : arch_count > 0 ? 0x83 : 0x82; /* fixmap */
  mp_str(b, &n, "kernel_name");
  mp_str(b, &n, o->kernel_name);
  mp_str(b, &n, "kpack_search_paths");
  mp_array(b, &n, o->search_path_count);
  for (size_t i = 0; i < o->search_path_count; i++)
    mp_str(b, &n, o->search_paths[i]);
  if (arch_count > 0) {
    mp_str(b, &n, "kpack_arches");
    mp_array(b, &n, arch_count);
    for (size_t i = 0; i < arch_count; i++)
      mp_str(b, &n, arches[i]);
  }
  if (has != NULL) {
    mp_str(b, &n, "kpack_record_arches");
    mp_array(b, &n, st->wrapper_count);
    for (size_t r = 0; r < st->wrapper_count; r++) {
      const uint8_t* row = has + r * arch_count;
      size_t count = 0;
      for (size_t a = 0; a < arch_count; a++)
        count += row[a];
      mp_array(b, &n, count);
      for (size_t a = 0; a < arch_count; a++) {
        if (!row[a])
          continue;
        if (a >= 128)
          b[n++] = 0xcc; /* uint 8 */
        b[n++] = (uint8_t)a;
      }
    }
  }
  *out = b;
  *size = n;
done:
  free(has);
  free(arches);
  return err;
}

/* ---- reading the input --------------------------------------------------- */

static kpack_error_t tf_elf_fail(tf_state* st, kpack_error_t err) {
  if (err == KPACK_ERROR_INVALID_FORMAT && st->elf.why[0] != '\0')
    return tf_fail(st, err, "%s", st->elf.why);
  if (err == KPACK_ERROR_INVALID_FORMAT)
    return tf_fail(st, err, "malformed ELF");
  if (err == KPACK_ERROR_OUT_OF_MEMORY)
    return tf_fail(st, err, "out of memory");
  return tf_fail(st, err, "cannot read the file (%s)", strerror(errno));
}

/* Opens the ELF and finds what the transform needs; *kind says what the file
 * is. Only a FAT file has its wrappers checked in full. */
static kpack_error_t tf_open(tf_state* st, kpack_transform_kind_t* kind) {
  const kp_input* in = &st->in;
  uint8_t ident[6];
  *kind = KPACK_TRANSFORM_NOT_ELF;
  if (in->size < sizeof(ident))
    return KPACK_SUCCESS;
  kpack_error_t err = kp_input_read(in, 0, ident, sizeof(ident));
  if (err != KPACK_SUCCESS)
    return tf_fail(st, err, "cannot read the file (%s)", strerror(errno));
  elf_ident_kind id = elf_ident(ident, sizeof(ident));
  if (id == ELF_IDENT_NONE)
    return KPACK_SUCCESS;
  /* HIP host code is 64-bit little-endian: any other ELF (firmware, a
   * 32-bit tool) holds no device code for the runtime. */
  *kind = KPACK_TRANSFORM_NO_DEVICE_CODE;
  if (id != ELF_IDENT_64LE)
    return KPACK_SUCCESS;
  if ((err = elf_open(in, &st->elf)) != KPACK_SUCCESS)
    return tf_elf_fail(st, err);
  if ((err = elf_find_section(&st->elf, ".hip_fatbin", &st->fat)) ||
      (err = elf_find_section(&st->elf, ".hipFatBinSegment", &st->seg)))
    return tf_elf_fail(st, err);
  if (st->seg != 0 && st->elf.sections[st->seg].type != ELF_SHT_NOBITS) {
    err =
        elf_read_wrappers(&st->elf, st->seg, &st->wrappers, &st->wrapper_count);
    if (err != KPACK_SUCCESS)
      return tf_elf_fail(st, err);
  }
  size_t hipf = 0, hipk = 0;
  for (size_t i = 0; i < st->wrapper_count; i++) {
    uint32_t m = st->wrappers[i].magic;
    if (m == KPACK_HOST_HIPF_MAGIC)
      hipf++;
    else if (m == KPACK_HOST_HIPK_MAGIC)
      hipk++;
    else
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     ".hipFatBinSegment record %zu has magic 0x%08" PRIx32
                     ", neither HIPF nor HIPK",
                     i, m);
  }
  if (hipf > 0 && hipk > 0)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   ".hipFatBinSegment mixes %zu HIPF and %zu HIPK records",
                   hipf, hipk);
  if (hipk > 0) {
    *kind = KPACK_TRANSFORM_KPACKIFIED;
  } else if (st->fat != 0 && st->elf.sections[st->fat].type == ELF_SHT_NOBITS) {
    *kind = KPACK_TRANSFORM_DEBUG_ONLY;
  } else if (st->fat != 0) {
    if (hipf == 0)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     ".hip_fatbin has no .hipFatBinSegment record pointing "
                     "at it");
    *kind = KPACK_TRANSFORM_FAT;
  }
  return KPACK_SUCCESS;
}

static void tf_close(tf_state* st) {
  elf_close(&st->elf);
  free(st->wrappers);
  free(st->relocated);
  free(st->patches);
}

/* ---- relocations --------------------------------------------------------- */

/* The wrapper whose pointer field is at address `where`, or SIZE_MAX. */
static size_t wrapper_at(const tf_state* st, uint64_t where) {
  const elf_section* s = &st->elf.sections[st->seg];
  if (where < s->addr || where - s->addr >= s->size)
    return SIZE_MAX;
  uint64_t slot = where - s->addr;
  if (slot % ELF_WRAPPER_SIZE != 8)
    return SIZE_MAX;
  return (size_t)(slot / ELF_WRAPPER_SIZE);
}

static bool in_fatbin(const tf_state* st, uint64_t addr) {
  const elf_section* f = &st->elf.sections[st->fat];
  return addr >= f->addr && addr - f->addr < f->size;
}

/* The value of symbol `sym` of symbol table `symtab` when it is defined. */
static bool symbol_value(tf_state* st, uint32_t symtab, uint64_t sym,
                         uint64_t* value) {
  kp_input syms;
  uint8_t s[24];
  if (sym == 0 || symtab == 0 || symtab >= st->elf.section_count ||
      elf_section_input(&st->elf, symtab, &syms) != KPACK_SUCCESS ||
      sym >= syms.size / 24 ||
      kp_input_read(&syms, sym * 24, s, sizeof(s)) != KPACK_SUCCESS)
    return false;
  if (kp_load_le(s + 6, 2) == 0)
    return false;
  *value = kp_load_le(s + 8, 8);
  return true;
}

/* The bytes of relocation section `rsec`, with its name in `name` (64
 * bytes), refused unless they are whole `size`-byte `units`. */
static kpack_error_t reloc_section(tf_state* st, size_t rsec, char* name,
                                   unsigned size, const char* units,
                                   kp_input* relocs) {
  kpack_error_t err = elf_section_input(&st->elf, rsec, relocs);
  if (err != KPACK_SUCCESS)
    return tf_elf_fail(st, err);
  if ((err = elf_section_name(&st->elf, rsec, name, 64)) != KPACK_SUCCESS)
    return tf_elf_fail(st, err);
  if (relocs->size % size != 0)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   "%s is %" PRIu64 " bytes, not whole %u-byte %s", name,
                   relocs->size, size, units);
  return KPACK_SUCCESS;
}

/* Rewrites or checks every record of relocation section `rsec`. A dynamic
 * relocation of a wrapper pointer becomes RELATIVE to the metadata; the
 * static copy --emit-relocs keeps of one becomes R_*_64 without a symbol
 * (the same value for a tool that reads it); any other dynamic relocation
 * whose target lies in .hip_fatbin is refused. */
static kpack_error_t scan_rela(tf_state* st, size_t rsec, char* name,
                               kp_scratch* scratch) {
  const elf_section* rs = &st->elf.sections[rsec];
  bool dynamic = (rs->flags & ELF_SHF_ALLOC) != 0;
  kp_input relocs;
  kpack_error_t err =
      reloc_section(st, rsec, name, ELF_RELA_SIZE, "records", &relocs);
  if (err != KPACK_SUCCESS)
    return err;
  uint64_t total = relocs.size / ELF_RELA_SIZE;
  const uint64_t chunk = 4096;
  for (uint64_t first = 0; first < total; first += chunk) {
    uint64_t n = total - first < chunk ? total - first : chunk;
    const uint8_t* view;
    err = kp_input_view(&relocs, first * ELF_RELA_SIZE,
                        (size_t)(n * ELF_RELA_SIZE), scratch, &view);
    if (err != KPACK_SUCCESS)
      return tf_elf_fail(st, err);
    for (uint64_t r = 0; r < n; r++) {
      const uint8_t* p = view + r * ELF_RELA_SIZE;
      elf_rela rec = elf_rela_parse(p);
      uint64_t at = rs->offset + (first + r) * ELF_RELA_SIZE;
      size_t w = wrapper_at(st, rec.offset);
      uint8_t out[ELF_RELA_SIZE];
      if (w != SIZE_MAX &&
          (rec.type == st->mach->relative || rec.type == st->mach->abs64)) {
        memcpy(out, p, sizeof(out));
        kp_store_le(out + 8, dynamic ? st->mach->relative : st->mach->abs64, 8);
        kp_store_le(out + 16, st->meta_addr, 8);
        if ((err = tf_add_patch(st, at, out, sizeof(out))) != KPACK_SUCCESS)
          return err;
        if (dynamic)
          st->relocated[w] = true;
        continue;
      }
      if (!dynamic || rec.type == 0)
        continue; /* link-time records (offsets in their own sections), or
                     R_*_NONE */
      uint64_t target = rec.addend, value;
      bool known = rec.type == st->mach->relative;
      if ((rec.type == st->mach->abs64 || rec.type == st->mach->glob_dat) &&
          symbol_value(st, rs->link, rec.symbol, &value)) {
        target = value + (rec.type == st->mach->abs64 ? rec.addend : 0);
        known = true;
      }
      if (w != SIZE_MAX || (known && in_fatbin(st, target)))
        return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                       "relocation %" PRIu64 " in %s (type %" PRIu32
                       " at 0x%" PRIx64 ") %s .hip_fatbin",
                       first + r, name, rec.type, rec.offset,
                       w != SIZE_MAX ? "sets a wrapper pointer, not RELATIVE, "
                                       "into"
                                     : "points into");
    }
  }
  return KPACK_SUCCESS;
}

/* Checks a packed .relr.dyn: the wrapper pointers it relocates keep their
 * value in place (rewritten with the record), and no other location it
 * relocates may hold an address in .hip_fatbin. */
static kpack_error_t scan_relr(tf_state* st, size_t rsec, char* name,
                               kp_scratch* scratch) {
  kp_input relocs;
  kpack_error_t err = reloc_section(st, rsec, name, 8, "entries", &relocs);
  if (err != KPACK_SUCCESS)
    return err;
  uint64_t total = relocs.size / 8, base = 0;
  const uint64_t chunk = 8192;
  for (uint64_t first = 0; first < total; first += chunk) {
    uint64_t n = total - first < chunk ? total - first : chunk;
    const uint8_t* view;
    err = kp_input_view(&relocs, first * 8, (size_t)(n * 8), scratch, &view);
    if (err != KPACK_SUCCESS)
      return tf_elf_fail(st, err);
    for (uint64_t r = 0; r < n; r++) {
      uint64_t e = kp_load_le(view + r * 8, 8);
      uint64_t where[64];
      unsigned count = 0;
      if ((e & 1) == 0) {
        where[count++] = e;
        base = e + 8;
      } else {
        for (unsigned i = 1; i < 64; i++)
          if ((e >> i) & 1)
            where[count++] = base + (uint64_t)(i - 1) * 8;
        base += 63 * 8;
      }
      for (unsigned i = 0; i < count; i++) {
        size_t w = wrapper_at(st, where[i]);
        uint64_t off;
        uint8_t v[8];
        if (w != SIZE_MAX) {
          st->relocated[w] = true;
          continue;
        }
        if (!elf_address_offset(&st->elf, where[i], &off) ||
            off > st->elf.in.size - 8)
          continue;
        if ((err = kp_input_read(&st->elf.in, off, v, 8)) != KPACK_SUCCESS)
          return tf_elf_fail(st, err);
        if (in_fatbin(st, kp_load_le(v, 8)))
          return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                         "relocation in %s (%s at 0x%" PRIx64
                         ") points into .hip_fatbin",
                         name, st->mach->relative_name, where[i]);
      }
    }
  }
  return KPACK_SUCCESS;
}

static kpack_error_t scan_relocations(tf_state* st) {
  kp_scratch scratch = {0};
  char name[64];
  kpack_error_t err = KPACK_SUCCESS;
  for (size_t i = 1; i < st->elf.section_count && err == KPACK_SUCCESS; i++) {
    const elf_section* s = &st->elf.sections[i];
    /* The relocations the loader applies (ET_EXEC and ET_DYN only here),
     * and any aimed at the records. */
    if (s->type == ELF_SHT_RELA && elf_relocation_applies(&st->elf, i, st->seg))
      err = scan_rela(st, i, name, &scratch);
    else if (s->type == ELF_SHT_RELR && (s->flags & ELF_SHF_ALLOC) != 0)
      err = scan_relr(st, i, name, &scratch);
  }
  kp_scratch_free(&scratch);
  return err;
}

/* ---- layout -------------------------------------------------------------- */

typedef struct tf_layout {
  size_t load; /* the PT_LOAD that holds .hip_fatbin */
  /* When bytes leave the file, that PT_LOAD is split: a head (what
   * precedes .hip_fatbin), .hip_fatbin's memory, and unless .hip_fatbin
   * ends it, a tail (what follows), each with the flags its sections need.
   * A page-aligned .hip_fatbin is a piece of its own without file bytes
   * (`fat_piece`), its file offset in the first page of the new segment
   * (place_fat_piece()); otherwise the head holds it as memory only. When
   * nothing leaves the file the segment stays whole, .hip_fatbin's bytes
   * zeroed. */
  bool split, tail, fat_piece;
  uint64_t head_filesz, head_memsz;
  uint64_t fat_off; /* the p_offset of .hip_fatbin's piece */
  uint32_t head_flags, tail_flags;
  uint64_t unit;     /* the removal unit: the largest PT_LOAD p_align, at least
                        the machine's page */
  bool drop_phdr;    /* a shared object's PT_PHDR is left out (see plan()) */
  uint64_t cut;      /* input bytes copied: [0, cut), the rest is the old
                        section name and header tables */
  uint64_t block;    /* output offset of the new PT_LOAD: room for a table,
                        the program headers, then the metadata; or only
                        the metadata when the table is `apart` */
  uint64_t vaddr;    /* its address */
  size_t phnum;      /* program headers in the output */
  uint64_t ph_file;  /* the program header table's file offset */
  uint64_t ph_vaddr; /* and address */
  uint64_t meta_off; /* metadata offset in the block */
  uint64_t meta_size;
  uint64_t block_size;
  /* An executable's table in a PT_LOAD of its own (place_table()): room
   * for a table, then the table, at its address less the load base. */
  bool apart;
  uint64_t apart_off, apart_vaddr, apart_size, apart_align;
  /* When the table's segment takes .hip_fatbin's first units
   * (place_table_after(), place_table_in_fat()), .hip_fatbin and its piece
   * start that much later; else 0. */
  uint64_t fat_shift;
  uint64_t names_off; /* the section name table, rewritten */
  uint64_t names_size;
  uint64_t shoff; /* the section header table */
  size_t shnum;
} tf_layout;

static uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

static const char* segment_name(uint32_t type) {
  switch (type) {
    case 1:
      return "PT_LOAD";
    case 2:
      return "PT_DYNAMIC";
    case 3:
      return "PT_INTERP";
    case 4:
      return "PT_NOTE";
    case 6:
      return "PT_PHDR";
    case 7:
      return "PT_TLS";
    case 0x6474e550:
      return "PT_GNU_EH_FRAME";
    case 0x6474e552:
      return "PT_GNU_RELRO";
  }
  return "segment";
}

/* The flags a piece [lo, hi) of segment `s` needs: readable, and writable
 * or executable only when a section it holds is, never more than `s`. */
static uint32_t piece_flags(const tf_state* st, const elf_segment* s,
                            uint64_t lo, uint64_t hi) {
  uint32_t flags = TF_PF_R;
  for (size_t i = 1; i < st->elf.section_count; i++) {
    const elf_section* c = &st->elf.sections[i];
    if (i == st->fat || (c->flags & ELF_SHF_ALLOC) == 0 || c->size == 0 ||
        c->addr < lo || c->addr >= hi)
      continue;
    if (c->flags & TF_SHF_WRITE)
      flags |= TF_PF_W;
    if (c->flags & TF_SHF_EXECINSTR)
      flags |= TF_PF_X;
  }
  return flags & s->flags;
}

/* Places .hip_fatbin's piece, which has no file bytes, and moves the block
 * up to suit it. Each tool has a rule for such a segment's p_offset:
 * - ROCm's verifier: not another PT_LOAD's p_offset, nor inside its file
 *   bytes;
 * - eu-elflint, which gives a section to the first segment whose
 *   [p_offset, p_offset + p_memsz) holds the section's offset: past every
 *   other NOBITS section's offset, or the piece would claim it;
 * - valgrind, which reads symbols only when each PT_LOAD's p_offset lies in
 *   a page the loader mapped from the file with the segment's permissions:
 *   inside a read-only segment's pages.
 * The piece goes past every segment's file bytes and every NOBITS offset,
 * congruent to its address modulo its alignment, in the first page of the
 * block's read-only segment (the smallest page, whatever the machine runs
 * with), which starts a little above it. The block and its address move up
 * together, by less than the piece's alignment. */
static void place_fat_piece(const tf_state* st, tf_layout* L) {
  const elf_file* elf = &st->elf;
  const elf_segment* ld = &elf->segments[L->load];
  uint64_t P = st->mach->page;
  uint64_t low = L->block >= TF_MIN_PAGE ? L->block - TF_MIN_PAGE + 1 : 0;
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* s = &elf->segments[i];
    if (s->type == ELF_PT_LOAD && s->filesz > 0 &&
        tf_out(st, s->offset + s->filesz) > low)
      low = tf_out(st, s->offset + s->filesz);
  }
  if (L->apart && L->apart_off + L->apart_size > low)
    low = L->apart_off + L->apart_size;
  for (size_t i = 1; i < elf->section_count; i++) {
    const elf_section* s = &elf->sections[i];
    if (i != st->fat && s->type == ELF_SHT_NOBITS &&
        (s->flags & ELF_SHF_ALLOC) != 0 && tf_out(st, s->offset) >= low)
      low = tf_out(st, s->offset) + 1;
  }
  uint64_t a = ld->align > P ? ld->align : P;
  uint64_t fa = elf->sections[st->fat].addr + L->fat_shift;
  L->fat_off = low + (fa % a + a - low % a) % a;
  /* The block stays 8-aligned, at least 8 bytes above the piece. */
  if (L->block < L->fat_off + 8) {
    uint64_t up = L->fat_off + 8 - L->block;
    L->block += up;
    L->vaddr += up;
  }
}

/* Whether the table's own read-only segment can take input bytes [at,
 * at + size), before the removed range, and addresses `base` + those: no
 * section and no segment but `owner` has bytes there, and the segments
 * whose memory lies in the same machine pages are read-only ones loaded
 * at `base` too (they map the same file pages there, with the same
 * protection) without a zero-filled end. */
static bool table_fits(const tf_state* st, size_t owner, uint64_t at,
                       uint64_t size, uint64_t base) {
  const elf_file* elf = &st->elf;
  uint64_t P = st->mach->page, lo = base + at, hi = base + at + size;
  if (at < ELF_EHDR_SIZE || (at < st->cut_at && at + size > st->cut_at))
    return false;
  for (size_t i = 1; i < elf->section_count; i++) {
    const elf_section* c = &elf->sections[i];
    if (c->type != ELF_SHT_NOBITS && c->size > 0 && c->offset < at + size &&
        at < c->offset + c->size)
      return false;
  }
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* t = &elf->segments[i];
    if (i != owner && t->filesz > 0 && t->offset < at + size &&
        at < t->offset + t->filesz)
      return false;
    if (t->type != ELF_PT_LOAD || t->memsz == 0 ||
        t->vaddr >= align_up(hi, P) ||
        lo / P * P >= align_up(t->vaddr + t->memsz, P))
      continue;
    if (i != owner && (t->vaddr - t->offset != base || t->memsz != t->filesz ||
                       t->flags != TF_PF_R))
      return false;
  }
  return true;
}

/* The table's own segment at file offset `off`, address `base` + `off`,
 * `size` bytes (room, then the table), .hip_fatbin starting `fat_shift`
 * later. Its alignment is the first PT_LOAD's, of which `base` is a
 * multiple. True, for the placers' returns. */
static bool take_apart(const elf_file* elf, tf_layout* L, uint64_t base,
                       uint64_t off, uint64_t size, uint64_t fat_shift) {
  for (size_t i = 0; i < elf->segment_count && L->apart_align == 0; i++)
    if (elf->segments[i].type == ELF_PT_LOAD)
      L->apart_align = elf->segments[i].align;
  L->apart = true;
  L->apart_off = off;
  L->apart_vaddr = base + off;
  L->apart_size = size;
  L->fat_shift = fat_shift;
  return true;
}

/* Finds a place for an executable's program header table that kernels
 * before 5.18 find: they pass AT_PHDR as the first PT_LOAD's p_vaddr -
 * p_offset (`base`) plus e_phoff, so the table's address less its file
 * offset must be `base`. Room for a table (GNU objcopy writes the one it
 * makes there, at the start of the segment) and the table take
 * 2 * `table` bytes, a read-only PT_LOAD of their own, which adds
 * nothing to the file's size when it lies in the zero bytes that end the
 * last page of a read-only segment loaded at `base`, after its last
 * section: separate-code links leave them after their first segment, and
 * a page-aligned .hip_fatbin after the last section of its head. Else the
 * table goes at the end of the file (`end`) when the pages at that offset
 * plus `base` are free (the gaps lld leaves between segments of 64 KiB
 * pages). False when neither is: plan() then tries .hip_fatbin's own
 * addresses (place_table_after(), then place_table_in_fat()), else puts
 * the table above the program at its address less `base`, the file
 * growing to that offset. */
static bool place_table(const tf_state* st, tf_layout* L, uint64_t base,
                        uint64_t end, uint64_t table) {
  const elf_file* elf = &st->elf;
  uint64_t P = st->mach->page, size = 2 * align_up(table, 8);
  size_t best = SIZE_MAX;
  uint64_t best_at = 0;
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* s = &elf->segments[i];
    uint64_t last = s->offset + s->filesz; /* its bytes end */
    bool head = i == L->load;
    if (s->type != ELF_PT_LOAD || s->filesz == 0 ||
        s->vaddr - s->offset != base ||
        (head ? L->head_flags : s->flags) != TF_PF_R)
      continue;
    if (head) {
      /* Only the head of a split .hip_fatbin starting a page ends in
       * free bytes: those after its last section. */
      if (!L->fat_piece || L->head_filesz == 0)
        continue;
      const elf_section* f = &elf->sections[st->fat];
      last = s->offset;
      for (size_t c = 1; c < elf->section_count; c++) {
        const elf_section* x = &elf->sections[c];
        if (c != st->fat && (x->flags & ELF_SHF_ALLOC) != 0 && x->size > 0 &&
            x->addr >= s->vaddr && x->addr < f->addr)
          last = x->type == ELF_SHT_NOBITS    ? f->offset
                 : x->offset + x->size > last ? x->offset + x->size
                                              : last;
      }
    } else if (s->memsz != s->filesz || last > st->cut_at) {
      continue; /* zero-filled to its page's end, or moved down */
    }
    uint64_t at = align_up(last, 8);
    uint64_t limit = head ? elf->sections[st->fat].offset : align_up(last, P);
    if (last == s->offset || at + size > limit ||
        !table_fits(st, i, at, size, base))
      continue;
    best = i;
    best_at = at;
    break;
  }
  if (best != SIZE_MAX) {
    if (best == L->load) { /* the head ends with its last section */
      L->head_filesz = best_at - elf->segments[best].offset;
      L->head_memsz = L->head_filesz;
    }
    return take_apart(elf, L, base, best_at, size, 0);
  }
  return table_fits(st, SIZE_MAX, end, size, base) &&
         take_apart(elf, L, base, end, size, 0);
}

/* Whether a symbol of any symbol table lies in .hip_fatbin below `end`:
 * such a symbol keeps .hip_fatbin's start where it is. */
static bool fat_symbol_below(tf_state* st, uint64_t end) {
  const elf_file* elf = &st->elf;
  const elf_section* f = &elf->sections[st->fat];
  for (size_t i = 1; i < elf->section_count; i++) {
    uint32_t type = elf->sections[i].type;
    kp_input syms;
    if (type != TF_SHT_SYMTAB && type != TF_SHT_DYNSYM)
      continue;
    if (elf_section_input(&st->elf, i, &syms) != KPACK_SUCCESS)
      return true;
    for (uint64_t at = 0; at + 24 <= syms.size; at += 24) {
      uint8_t sym[24];
      if (kp_input_read(&syms, at, sym, sizeof(sym)) != KPACK_SUCCESS)
        return true;
      uint64_t shndx = kp_load_le(sym + 6, 2), value = kp_load_le(sym + 8, 8);
      if (shndx == TF_SHN_XINDEX ||
          (shndx == st->fat && value >= f->addr && value < end))
        return true;
    }
  }
  return false;
}

/* Whether .hip_fatbin's own addresses may take the table: it starts a page
 * and was split off (only its memory lies there), in a segment loaded at
 * `base` (its address less `base` is its offset), aligned within a unit. */
static bool fat_may_take_table(const tf_state* st, const tf_layout* L,
                               uint64_t base) {
  const elf_section* f = &st->elf.sections[st->fat];
  const elf_segment* ld = &st->elf.segments[L->load];
  return L->fat_piece && ld->vaddr - ld->offset == base && f->align <= L->unit;
}

/* An executable's table where place_table() found no room, after the
 * program's loaded bytes, which end at input offset `loaded`: at that
 * offset, in the output, plus the load base lie .hip_fatbin's own
 * addresses when the bytes loaded after it moved down with the units that
 * left. A page-aligned .hip_fatbin that was split off has only its own
 * memory there. The non-allocated sections that follow (symbols, debug
 * information) move up to make room. At least one removal unit below the
 * table stays free, as below the block (GNU objcopy may move the
 * segment's start down into it): when the loaded bytes end below
 * .hip_fatbin's second unit, the table starts there, after a hole.
 * .hip_fatbin, with its piece, then starts at the first unit above the
 * table. Only when no symbol lies in the units it gives up and it keeps
 * at least one. Unlike place_table_in_fat(), the file keeps none of
 * .hip_fatbin's units. */
static bool place_table_after(tf_state* st, tf_layout* L, uint64_t base,
                              uint64_t table) {
  const elf_file* elf = &st->elf;
  const elf_section* f = &elf->sections[st->fat];
  uint64_t U = L->unit, size = 2 * align_up(table, 8);
  if (!fat_may_take_table(st, L, base))
    return false;
  uint64_t loaded = f->offset + f->size, moved_align = 8;
  for (size_t i = 0; i < elf->segment_count; i++)
    if (elf->segments[i].filesz > 0 &&
        elf->segments[i].offset + elf->segments[i].filesz > loaded)
      loaded = elf->segments[i].offset + elf->segments[i].filesz;
  for (size_t i = 1; i < elf->section_count; i++) {
    const elf_section* c = &elf->sections[i];
    if ((c->flags & ELF_SHF_ALLOC) != 0 && c->type != ELF_SHT_NOBITS &&
        c->offset + c->size > loaded)
      loaded = c->offset + c->size;
  }
  for (size_t i = 1; i < elf->section_count; i++) {
    const elf_section* c = &elf->sections[i];
    if ((c->flags & ELF_SHF_ALLOC) != 0 || c->type == ELF_SHT_NOBITS ||
        c->size == 0 || c->offset + c->size <= f->offset)
      continue;
    if (c->offset < loaded) /* among the loaded bytes: it cannot move */
      return false;
    if (c->align > moved_align)
      moved_align = c->align;
  }
  if (moved_align > U || (moved_align & (moved_align - 1)) != 0)
    return false;
  uint64_t from = tf_out(st, loaded);
  uint64_t at = align_up(from, 8);
  if (at < f->offset + U)
    at = f->offset + U;
  uint64_t shift = align_up(at + size - f->offset, U);
  if (shift >= f->size || fat_symbol_below(st, f->addr + shift))
    return false;
  if (L->cut > loaded) {
    st->insert_at = loaded;
    st->inserted = align_up(at + size - from, moved_align);
  }
  return take_apart(elf, L, base, at, size, shift);
}

/* An executable's table where place_table_after() found no room either
 * (the bytes loaded after .hip_fatbin reach past its addresses less the
 * load base), without growing the file past the program's addresses: in
 * .hip_fatbin's second removal unit, at its address less the load base. A
 * page-aligned .hip_fatbin that was split off has only its own memory there,
 * and its file offset (kept bytes before the tail, zeros) lies inside the file
 * when one unit less leaves it. The first unit stays free, as below the
 * block: GNU objcopy may move the segment's start down into it. The table
 * takes the second, and .hip_fatbin, with its piece, starts at the third.
 * Only when no symbol lies in the two units (it would fall outside its
 * section) and .hip_fatbin reaches past them. */
static bool place_table_in_fat(tf_state* st, tf_layout* L, uint64_t base,
                               uint64_t table) {
  const elf_file* elf = &st->elf;
  const elf_section* f = &elf->sections[st->fat];
  uint64_t U = L->unit, size = 2 * align_up(table, 8);
  if (!fat_may_take_table(st, L, base) || f->size <= 2 * U || size > U ||
      fat_symbol_below(st, f->addr + 2 * U))
    return false;
  /* The kept bytes must hold the unit below the table and the table. */
  uint64_t removed = st->removed;
  while (removed > 0 && f->size - removed < U + size)
    removed -= U;
  if (removed == 0)
    return false;
  st->removed = removed;
  /* In kept bytes, not moved; .hip_fatbin's address less the base is its
   * offset. */
  return take_apart(elf, L, base, f->offset + U, size, 2 * U);
}

static kpack_error_t plan(tf_state* st, size_t meta_size, tf_layout* L) {
  elf_file* elf = &st->elf;
  const elf_section* f = &elf->sections[st->fat];
  uint64_t fo = f->offset, fs = f->size, fa = f->addr, P = st->mach->page;
  uint64_t maxend = 0, base = 0;
  bool base_set = false, exec_like = elf->type == ELF_ET_EXEC;

  memset(L, 0, sizeof(*L));
  L->load = SIZE_MAX;
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* s = &elf->segments[i];
    if (s->type == ELF_PT_INTERP)
      exec_like = true;
    if (s->type != ELF_PT_LOAD)
      continue;
    if (!base_set) {
      base = s->vaddr - s->offset;
      base_set = true;
    }
    if (s->vaddr + s->memsz > maxend)
      maxend = s->vaddr + s->memsz;
    if (fo >= s->offset && fo - s->offset <= s->filesz &&
        s->filesz - (fo - s->offset) >= fs && s->vaddr + (fo - s->offset) == fa)
      L->load = i;
  }
  if (L->load == SIZE_MAX && elf->segment_count > 0)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   ".hip_fatbin (0x%" PRIx64 " bytes at offset 0x%" PRIx64
                   ") is not loaded by a PT_LOAD",
                   fs, fo);
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* s = &elf->segments[i];
    if (i == L->load || s->filesz == 0)
      continue;
    if (s->offset < fo + fs && fo < s->offset + s->filesz)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "program header %zu (%s) overlaps .hip_fatbin", i,
                     segment_name(s->type));
  }
  for (size_t i = 1; i < elf->section_count; i++) {
    const elf_section* s = &elf->sections[i];
    /* The new name goes at the end of the name table: a name past it
     * would become that name. */
    if (s->name >= elf->sections[elf->names].size)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "section %zu's name lies outside the section name table",
                     i);
    /* A NOBITS section has no bytes, but .hip_fatbin's piece goes past
     * its offset (place_fat_piece()): one past the file's end would make
     * the output that long. */
    if (s->type == ELF_SHT_NOBITS && (s->flags & ELF_SHF_ALLOC) != 0 &&
        s->offset > elf->in.size)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "section %zu (SHT_NOBITS) lies at offset 0x%" PRIx64
                     ", past the end of the file",
                     i, s->offset);
    if (i == st->fat || s->type == ELF_SHT_NOBITS || s->size == 0)
      continue;
    if (s->offset < fo + fs && fo < s->offset + s->size)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "section %zu overlaps .hip_fatbin in the file", i);
  }
  L->unit = P;
  for (size_t i = 0; i < elf->segment_count; i++)
    if (elf->segments[i].type == ELF_PT_LOAD &&
        elf->segments[i].align > L->unit)
      L->unit = elf->segments[i].align;
  if ((L->unit & (L->unit - 1)) != 0)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   "a PT_LOAD alignment of 0x%" PRIx64 " is no power of two",
                   L->unit);
  if (L->load != SIZE_MAX) {
    const elf_segment* ld = &elf->segments[L->load];
    L->tail = fo + fs < ld->offset + ld->filesz || ld->memsz > ld->filesz;
    L->head_flags = piece_flags(st, ld, ld->vaddr, fa);
    L->tail_flags = piece_flags(st, ld, fa + fs, ld->vaddr + ld->memsz);
  } else {
    /* No program headers (an object no loader maps): the new segment goes
     * above every allocated section, and is the table's only entry. */
    exec_like = false;
    for (size_t i = 1; i < elf->section_count; i++) {
      const elf_section* s = &elf->sections[i];
      if ((s->flags & ELF_SHF_ALLOC) != 0 && s->addr + s->size > maxend)
        maxend = s->addr + s->size;
    }
  }

  /* .hip_fatbin's bytes that share a page with what precedes or follows it
   * stay (zeroed), so those pages read no stale device code; of the whole
   * pages between, whole removal units leave the file, so that every later
   * segment keeps p_offset == p_vaddr modulo its own p_align. */
  uint64_t keep_head = align_up(fa, P) - fa, keep_tail = (fa + fs) % P;
  if (L->load != SIZE_MAX) {
    const elf_segment* ld = &elf->segments[L->load];
    L->head_filesz = fo - ld->offset;
    if (fo == ld->offset && keep_head != 0) {
      /* A .hip_fatbin that starts its segment off a page boundary shares
       * that page with nothing of its own segment: the head keeps its
       * bytes there (zeros) rather than be a PT_LOAD without any that
       * starts inside a page, which kernels before 6.7 do not map. */
      L->head_filesz = keep_head < fs ? keep_head : fs;
    }
  }
  if (keep_head > fs)
    keep_head = fs;
  uint64_t middle = fs - keep_head > keep_tail ? fs - keep_head - keep_tail : 0;
  st->cut_at = fo + keep_head;
  st->removed = middle / L->unit * L->unit;
  /* Whole pages between head and tail: neither maps a page of the other,
   * so each can have flags of its own. */
  L->split = L->load != SIZE_MAX && st->removed > 0;
  L->fat_piece = L->split && keep_head == 0;
  if (!L->split)
    L->tail = false;

  /* The old section name and header tables are left behind when they end
   * the file; nothing else may lie there. */
  L->cut = elf->in.size;
  if (elf->shoff != 0 &&
      elf->shoff + elf->section_count * elf->shentsize == elf->in.size) {
    uint64_t cut = elf->shoff;
    const elf_section* names = &elf->sections[elf->names];
    if (names->offset + names->size <= cut &&
        cut - (names->offset + names->size) < 8)
      cut = names->offset;
    bool clear = cut >= fo + fs;
    for (size_t i = 1; i < elf->section_count && clear; i++) {
      const elf_section* s = &elf->sections[i];
      if (i != elf->names && s->type != ELF_SHT_NOBITS && s->size > 0 &&
          s->offset + s->size > cut)
        clear = false;
    }
    for (size_t i = 0; i < elf->segment_count && clear; i++)
      if (elf->segments[i].filesz > 0 &&
          elf->segments[i].offset + elf->segments[i].filesz > cut)
        clear = false;
    if (clear)
      L->cut = cut;
  }

  L->phnum = elf->segment_count + 1;
  if (L->tail)
    L->phnum++;
  if (L->fat_piece && L->head_filesz > 0)
    L->phnum++;
  /* Outside an executable the table no longer lies at the load base plus
   * its offset, which patchelf takes PT_PHDR to say; no loader needs
   * PT_PHDR in a shared object, so it goes. */
  for (size_t i = 0; i < elf->segment_count && !exec_like; i++)
    if (elf->segments[i].type == ELF_PT_PHDR) {
      L->drop_phdr = true;
      L->phnum--;
    }
  /* The block: room for a table, the table (covered by its own section,
   * which eu-strip and patchelf keep), then the metadata. GNU objcopy
   * writes the table it makes at the start of the block's segment, in
   * front of the first section, and may move the segment down by up to a
   * removal unit to do so: the room keeps the sections at their
   * addresses, and a free removal unit between the block and the
   * segments before it keeps that move clear of them. */
  uint64_t end = align_up(tf_out(st, L->cut), 8);
  uint64_t U = L->unit;
  uint64_t top = align_up(maxend, P) + U;
  L->head_memsz = L->split ? fa - elf->segments[L->load].vaddr : 0;
  L->meta_size = meta_size;
  uint64_t ph_off = 0; /* the table's offset in the block */
  uint64_t table = (uint64_t)(L->phnum + 1) * ELF_PHDR_SIZE;
  if (exec_like && L->phnum + 1 < 0xffff &&
      (place_table(st, L, base, end, table) ||
       place_table_after(st, L, base, table) ||
       place_table_in_fat(st, L, base, table))) {
    /* The table apart, the block only the metadata. */
    L->phnum++;
    /* st->removed may be less, st->inserted more */
    end = align_up(tf_out_unloaded(st, L->cut), 8);
    if (L->apart_off >= end)
      end = align_up(L->apart_off + L->apart_size, 8);
    L->meta_off = 0;
    L->block_size = meta_size;
    L->block = end;
    L->vaddr = top + (end % U + U - top % U) % U;
  } else {
    if (L->phnum >= 0xffff)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "too many program headers");
    uint64_t ph_size = (uint64_t)L->phnum * ELF_PHDR_SIZE;
    ph_off = align_up(ph_size, 8);
    L->meta_off = ph_off + ph_size;
    L->block_size = L->meta_off + meta_size;
    if (exec_like) {
      /* No room at the load base plus an offset below the file's end:
       * the table goes above the program, its file offset its address
       * less that base, the file growing to that offset (a hole). */
      if (top - base < end)
        top += align_up(end - (top - base), U);
      if (top - base - end > TF_MAX_HOLE)
        return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                       "the program header table would start at file offset "
                       "0x%" PRIx64 ", %" PRIu64
                       " bytes past the file's end "
                       "(its address less the load base): more than the "
                       "%" PRIu64 "-byte hole allowed",
                       top - base, top - base - end, (uint64_t)TF_MAX_HOLE);
      L->block = top - base;
      L->vaddr = top;
    } else {
      L->block = end;
      L->vaddr = top + (end % U + U - top % U) % U;
    }
  }
  if (L->fat_piece)
    place_fat_piece(st, L);
  L->ph_file = L->apart ? L->apart_off + L->apart_size / 2 : L->block + ph_off;
  L->ph_vaddr =
      L->apart ? L->apart_vaddr + L->apart_size / 2 : L->vaddr + ph_off;
  st->meta_addr = L->vaddr + L->meta_off;
  L->names_off = L->block + L->block_size;
  L->names_size = elf->sections[elf->names].size + sizeof(TF_PHDR_NAME) +
                  sizeof(TF_NEW_NAME);
  L->shoff = align_up(L->names_off + L->names_size, 8);
  L->shnum = elf->section_count + 2;
  return KPACK_SUCCESS;
}

/* ---- writing ------------------------------------------------------------- */

/* A failed write is the output's, not the input's: its message does not
 * start with the input's path (kpack_transform.h). errno is kept. */
static kpack_error_t write_at(tf_state* st, int fd, uint64_t at,
                              const void* data, size_t size) {
  if (kp_pwrite_all(fd, data, size, at) != KPACK_SUCCESS) {
    int sys = errno;
    snprintf(st->msg->text, sizeof(st->msg->text),
             KPACK_TRANSFORM_WRITE_FAILED ": %s",
             sys != 0 ? strerror(sys) : "no progress");
    errno = sys;
    return KPACK_ERROR_IO_ERROR;
  }
  return KPACK_SUCCESS;
}

/* Copies input bytes [from, from + size) to output offset `to`. */
static kpack_error_t copy_bytes(tf_state* st, int fd, uint64_t from,
                                uint64_t to, uint64_t size, uint8_t** buf) {
  int in = st->in.fd;
  while (size > 0 && *buf == NULL) {
    loff_t a = (loff_t)from, b = (loff_t)to;
    size_t want = size > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)size;
    ssize_t n = copy_file_range(in, &a, fd, &b, want, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* unsupported here, or the input shrank: read and write */
    from += (uint64_t)n;
    to += (uint64_t)n;
    size -= (uint64_t)n;
  }
  if (size > 0 && *buf == NULL && (*buf = malloc(TF_COPY_BUFFER)) == NULL)
    return tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
  while (size > 0) {
    size_t n = size > TF_COPY_BUFFER ? TF_COPY_BUFFER : (size_t)size;
    kpack_error_t err = kp_input_read(&st->elf.in, from, *buf, n);
    if (err != KPACK_SUCCESS)
      return tf_fail(st, err, "read of %zu bytes at 0x%" PRIx64 " failed", n,
                     from);
    if ((err = write_at(st, fd, to, *buf, n)) != KPACK_SUCCESS)
      return err;
    from += n;
    to += n;
    size -= n;
  }
  return KPACK_SUCCESS;
}

/* Copies input bytes [from, from + size) to output offset `to`, only the
 * data of a sparse input (SEEK_DATA, SEEK_HOLE): its holes are left
 * unwritten in the output, which starts empty, so they stay holes. */
static kpack_error_t copy_range(tf_state* st, int fd, uint64_t from,
                                uint64_t to, uint64_t size, uint8_t** buf) {
  uint64_t end = from + size;
  while (from < end) {
    off_t data = lseek(st->in.fd, (off_t)from, SEEK_DATA);
    if (data < 0 && errno == ENXIO)
      return KPACK_SUCCESS; /* a hole to the end of the file */
    uint64_t run = end;
    if (data >= 0) {
      if ((uint64_t)data >= end)
        return KPACK_SUCCESS;
      to += (uint64_t)data - from;
      from = (uint64_t)data;
      off_t hole = lseek(st->in.fd, data, SEEK_HOLE);
      if (hole > data && (uint64_t)hole < end)
        run = (uint64_t)hole;
    } /* else no holes known: copied whole */
    kpack_error_t err = copy_bytes(st, fd, from, to, run - from, buf);
    if (err != KPACK_SUCCESS)
      return err;
    to += run - from;
    from = run;
  }
  return KPACK_SUCCESS;
}

static void put_phdr(uint8_t* p, uint32_t type, uint32_t flags, uint64_t offset,
                     uint64_t vaddr, uint64_t paddr, uint64_t filesz,
                     uint64_t memsz, uint64_t align) {
  memset(p, 0, ELF_PHDR_SIZE);
  kp_store_le(p, type, 4);
  kp_store_le(p + 4, flags, 4);
  kp_store_le(p + 8, offset, 8);
  kp_store_le(p + 16, vaddr, 8);
  kp_store_le(p + 24, paddr, 8);
  kp_store_le(p + 32, filesz, 8);
  kp_store_le(p + 40, memsz, 8);
  kp_store_le(p + 48, align, 8);
}

/* Program headers as they are written, PT_LOADs in address order: the
 * table's own PT_LOAD (L->apart) goes before the first one above it. */
typedef struct tf_phdrs {
  uint8_t* out;
  size_t n;
  const tf_layout* L;
  bool apart_done;
} tf_phdrs;

static void ph_put(tf_phdrs* t, uint32_t type, uint32_t flags, uint64_t offset,
                   uint64_t vaddr, uint64_t paddr, uint64_t filesz,
                   uint64_t memsz, uint64_t align) {
  const tf_layout* L = t->L;
  if (type == ELF_PT_LOAD && L->apart && !t->apart_done &&
      vaddr > L->apart_vaddr) {
    t->apart_done = true;
    ph_put(t, ELF_PT_LOAD, TF_PF_R, L->apart_off, L->apart_vaddr,
           L->apart_vaddr, L->apart_size, L->apart_size, L->apart_align);
  }
  put_phdr(t->out + t->n++ * ELF_PHDR_SIZE, type, flags, offset, vaddr, paddr,
           filesz, memsz, align);
}

/* The new program header table into `out` (L->phnum entries), from the
 * segments elf_open() parsed: every field of an Elf64_Phdr is rewritten. */
static void build_phdrs(tf_state* st, const tf_layout* L, uint8_t* out) {
  elf_file* elf = &st->elf;
  const elf_section* f = &elf->sections[st->fat];
  size_t last_load = SIZE_MAX;
  tf_phdrs t = {out, 0, L, false};
  for (size_t i = 0; i < elf->segment_count; i++)
    if (elf->segments[i].type == ELF_PT_LOAD)
      last_load = i;
  if (last_load == SIZE_MAX) /* the new segment is the only one */
    ph_put(&t, ELF_PT_LOAD, TF_PF_R, L->block, L->vaddr, L->vaddr,
           L->block_size, L->block_size, L->unit);
  for (size_t i = 0; i < elf->segment_count; i++) {
    const elf_segment* s = &elf->segments[i];
    if (s->type == ELF_PT_PHDR && L->drop_phdr) {
      continue;
    } else if (s->type == ELF_PT_PHDR) {
      uint64_t size = (uint64_t)L->phnum * ELF_PHDR_SIZE;
      ph_put(&t, s->type, s->flags, L->ph_file, L->ph_vaddr, L->ph_vaddr, size,
             size, s->align);
    } else if (i == L->load && L->split) {
      uint64_t lead = f->addr - s->vaddr, skip = lead + f->size;
      if (!L->fat_piece) {
        ph_put(&t, s->type, L->head_flags, s->offset, s->vaddr, s->paddr,
               L->head_filesz, skip, s->align);
      } else {
        if (L->head_filesz > 0)
          ph_put(&t, s->type, L->head_flags, s->offset, s->vaddr, s->paddr,
                 L->head_filesz, L->head_memsz, s->align);
        ph_put(&t, s->type, TF_PF_R & s->flags, L->fat_off,
               f->addr + L->fat_shift, s->paddr + lead + L->fat_shift, 0,
               f->size - L->fat_shift, s->align);
      }
      if (L->tail)
        ph_put(&t, s->type, L->tail_flags, tf_out(st, s->offset + skip),
               s->vaddr + skip, s->paddr + skip, s->filesz - skip,
               s->memsz - skip, s->align);
    } else {
      ph_put(&t, s->type, s->flags, tf_out(st, s->offset), s->vaddr, s->paddr,
             s->filesz, s->memsz, s->align);
    }
    if (i == last_load)
      ph_put(&t, ELF_PT_LOAD, TF_PF_R, L->block, L->vaddr, L->vaddr,
             L->block_size, L->block_size, L->unit);
  }
}

/* A read-only allocated SHT_PROGBITS section header. */
static void put_shdr(uint8_t* p, size_t size, uint64_t name, uint64_t addr,
                     uint64_t offset, uint64_t bytes, uint64_t align) {
  memset(p, 0, size);
  kp_store_le(p, name, 4);
  kp_store_le(p + 4, ELF_SHT_PROGBITS, 4);
  kp_store_le(p + 8, ELF_SHF_ALLOC, 8);
  kp_store_le(p + 16, addr, 8);
  kp_store_le(p + 24, offset, 8);
  kp_store_le(p + 32, bytes, 8);
  kp_store_le(p + 48, align, 8);
}

/* The new section header table into `out` (L->shnum entries of
 * elf->shentsize bytes). */
static kpack_error_t build_shdrs(tf_state* st, const tf_layout* L,
                                 uint8_t* out) {
  elf_file* elf = &st->elf;
  size_t es = (size_t)elf->shentsize;
  kpack_error_t err =
      kp_input_read(&elf->in, elf->shoff, out, elf->section_count * es);
  if (err != KPACK_SUCCESS)
    return tf_elf_fail(st, err);
  for (size_t i = 1; i < elf->section_count; i++) {
    uint8_t* p = out + i * es;
    if (i == st->fat) {
      kp_store_le(p + 4, ELF_SHT_NOBITS, 4);
      kp_store_le(p + 24, L->fat_piece ? L->fat_off : elf->sections[i].offset,
                  8);
      if (L->fat_shift != 0) {
        kp_store_le(p + 16, elf->sections[i].addr + L->fat_shift, 8);
        kp_store_le(p + 32, elf->sections[i].size - L->fat_shift, 8);
      }
    } else if (i == elf->names) {
      kp_store_le(p + 24, L->names_off, 8);
      kp_store_le(p + 32, L->names_size, 8);
    } else {
      kp_store_le(p + 24, tf_out_section(st, &elf->sections[i]), 8);
    }
  }
  uint64_t name = elf->sections[elf->names].size;
  put_shdr(out + elf->section_count * es, es, name, L->ph_vaddr, L->ph_file,
           (uint64_t)L->phnum * ELF_PHDR_SIZE, 8);
  put_shdr(out + (elf->section_count + 1) * es, es, name + sizeof(TF_PHDR_NAME),
           st->meta_addr, L->block + L->meta_off, L->meta_size, 1);
  if (L->shnum >= 0xff00) /* the count lives in section 0 */
    kp_store_le(out + 32, L->shnum, 8);
  return KPACK_SUCCESS;
}

static kpack_error_t write_output(tf_state* st, int fd, const tf_layout* L,
                                  const uint8_t* meta, size_t meta_size) {
  elf_file* elf = &st->elf;
  const elf_section* f = &elf->sections[st->fat];
  uint8_t *buf = NULL, *table = NULL;
  kpack_error_t err;

  /* Everything but .hip_fatbin, whose bytes that stay are left unwritten
   * and read as zeros (a hole where they fill file blocks). */
  uint64_t fat_end = f->offset + f->size;
  uint64_t mid = st->inserted != 0 ? st->insert_at : L->cut;
  if ((err = copy_range(st, fd, 0, 0, f->offset, &buf)) ||
      (err = copy_range(st, fd, fat_end, tf_out(st, fat_end), mid - fat_end,
                        &buf)) ||
      (err = copy_range(st, fd, mid, tf_out_unloaded(st, mid), L->cut - mid,
                        &buf)))
    goto done;
  for (size_t i = 0; i < st->patch_count; i++) {
    const tf_patch* p = &st->patches[i];
    if ((err = write_at(st, fd, tf_out(st, p->at), p->bytes, p->size)))
      goto done;
  }

  /* The new PT_LOAD: program headers, then the metadata. */
  size_t table_size = (size_t)L->block_size;
  size_t sh_size = L->shnum * (size_t)elf->shentsize;
  if (sh_size > table_size)
    table_size = sh_size;
  if (L->apart && L->apart_size > table_size)
    table_size = (size_t)L->apart_size;
  if ((table = calloc(1, table_size)) == NULL) {
    err = tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  if (L->apart) {
    /* Room for a table, then the table, in their own segment. */
    build_phdrs(st, L, table + (L->ph_file - L->apart_off));
    if ((err = write_at(st, fd, L->apart_off, table, (size_t)L->apart_size)))
      goto done;
    memset(table, 0, table_size);
  } else {
    build_phdrs(st, L, table + (L->ph_file - L->block));
  }
  memcpy(table + L->meta_off, meta, meta_size);
  if ((err = write_at(st, fd, L->block, table, (size_t)L->block_size)))
    goto done;

  /* The section name table, with the new name at its end. */
  const elf_section* names = &elf->sections[elf->names];
  memset(table, 0, table_size);
  size_t old = (size_t)names->size;
  if (L->names_size > table_size) {
    uint8_t* bigger = realloc(table, (size_t)L->names_size);
    if (bigger == NULL) {
      err = tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
      goto done;
    }
    table = bigger;
    table_size = (size_t)L->names_size;
  }
  if ((err = kp_input_read(&elf->in, names->offset, table, old))) {
    err = tf_elf_fail(st, err);
    goto done;
  }
  memcpy(table + old, TF_PHDR_NAME, sizeof(TF_PHDR_NAME));
  memcpy(table + old + sizeof(TF_PHDR_NAME), TF_NEW_NAME, sizeof(TF_NEW_NAME));
  if ((err = write_at(st, fd, L->names_off, table, (size_t)L->names_size)))
    goto done;

  if ((err = build_shdrs(st, L, table)) ||
      (err = write_at(st, fd, L->shoff, table, sh_size)))
    goto done;

  /* The ELF header last: the file is an ELF only once all is in place. */
  uint8_t h[ELF_EHDR_SIZE];
  if ((err = kp_input_read(&elf->in, 0, h, sizeof(h)))) {
    err = tf_elf_fail(st, err);
    goto done;
  }
  kp_store_le(h + 32, L->ph_file, 8);
  kp_store_le(h + 40, L->shoff, 8);
  kp_store_le(h + 54, ELF_PHDR_SIZE, 2);
  kp_store_le(h + 56, L->phnum, 2);
  kp_store_le(h + 60, L->shnum < 0xff00 ? L->shnum : 0, 2);
  if ((err = write_at(st, fd, 0, h, sizeof(h))) != KPACK_SUCCESS)
    goto done;
  /* The file ends with the section header table, whatever it held. */
  if (ftruncate(fd, (off_t)(L->shoff + sh_size)) != 0)
    err = tf_fail(st, KPACK_ERROR_IO_ERROR, "cannot set the output's size: %s",
                  strerror(errno));
done:
  free(buf);
  free(table);
  return err;
}

/* The new bytes of every wrapper record: only the version stays. */
static kpack_error_t patch_records(tf_state* st) {
  const elf_section* s = &st->elf.sections[st->seg];
  for (size_t i = 0; i < st->wrapper_count; i++) {
    uint8_t r[ELF_WRAPPER_SIZE];
    kpack_error_t err;
    if (st->elf.type == ELF_ET_DYN && !st->relocated[i])
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "wrapper %zu: the pointer at 0x%" PRIx64
                     " has no RELATIVE relocation in a shared object or PIE",
                     i, s->addr + i * ELF_WRAPPER_SIZE + 8);
    kp_store_le(r, KPACK_HOST_HIPK_MAGIC, 4);
    kp_store_le(r + 4, st->wrappers[i].version, 4);
    kp_store_le(r + 8, st->meta_addr, 8); /* RELR, ET_EXEC: the value */
    kp_store_le(r + 16, i, 8);            /* reserved1 and the u32 after it */
    if ((err = tf_add_patch(st, s->offset + i * ELF_WRAPPER_SIZE, r,
                            sizeof(r))) != KPACK_SUCCESS)
      return err;
  }
  return KPACK_SUCCESS;
}

static kpack_error_t transform(tf_state* st, int fd,
                               const kpack_transform_options_t* o,
                               kpack_transform_result_t* result) {
  kpack_transform_kind_t kind;
  uint8_t* meta = NULL;
  size_t meta_size = 0;
  tf_layout L;
  kpack_error_t err = tf_open(st, &kind);
  if (err != KPACK_SUCCESS)
    return err;
  if (kind != KPACK_TRANSFORM_FAT)
    return tf_fail(st, KPACK_ERROR_INVALID_ARGUMENT, "nothing to transform: %s",
                   kpack_transform_kind_string(kind));
  if (st->elf.type != ELF_ET_DYN && st->elf.type != ELF_ET_EXEC)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   "ELF type %u is neither ET_EXEC nor ET_DYN",
                   (unsigned)st->elf.type);
  for (size_t i = 0; i < sizeof(tf_machines) / sizeof(tf_machines[0]); i++)
    if (tf_machines[i].machine == st->elf.machine)
      st->mach = &tf_machines[i];
  if (st->mach == NULL)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   "unsupported machine (e_machine %u): its page size and "
                   "relocations are unknown",
                   (unsigned)st->elf.machine);
  /* Every byte the headers place in the file must be in it: a section or
   * segment past its end (a truncated or corrupt file) would have the
   * layout below computed with sums that wrap. */
  for (size_t i = 1; i < st->elf.section_count; i++) {
    kp_input bytes;
    const elf_section* s = &st->elf.sections[i];
    if (s->type != ELF_SHT_NOBITS && s->size > 0 &&
        (err = elf_section_input(&st->elf, i, &bytes)) != KPACK_SUCCESS)
      return tf_elf_fail(st, err);
  }
  for (size_t i = 0; i < st->elf.segment_count; i++) {
    kp_input bytes;
    const elf_segment* s = &st->elf.segments[i];
    if (s->filesz > 0 && kp_input_slice(&st->elf.in, s->offset, s->filesz,
                                        &bytes) != KPACK_SUCCESS)
      return tf_fail(
          st, KPACK_ERROR_INVALID_FORMAT,
          "program header %zu (%s) at 0x%" PRIx64 " (%" PRIu64
          " bytes) extends past end of file (%" PRIu64 " bytes): truncated?",
          i, segment_name(s->type), s->offset, s->filesz, st->elf.in.size);
    if (s->memsz > UINT64_MAX - s->vaddr)
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "program header %zu (%s): its addresses wrap", i,
                     segment_name(s->type));
  }
  size_t ref;
  if ((err = elf_find_section(&st->elf, TF_NEW_NAME, &ref)) != KPACK_SUCCESS)
    return tf_elf_fail(st, err);
  if (ref != 0)
    return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                   "section %zu is already called " TF_NEW_NAME, ref);
  for (size_t i = 0; i < st->wrapper_count; i++) {
    uint64_t off;
    const elf_pointer* p = &st->wrappers[i].pointer;
    if (!elf_pointer_in(&st->elf, p, st->fat, &off))
      return tf_fail(st, KPACK_ERROR_INVALID_FORMAT,
                     "wrapper %zu: the pointer (0x%" PRIx64
                     ") is outside .hip_fatbin",
                     i, p->value);
  }
  st->relocated = calloc(st->wrapper_count, sizeof(*st->relocated));
  if (st->relocated == NULL)
    return tf_fail(st, KPACK_ERROR_OUT_OF_MEMORY, "out of memory");
  if ((err = encode_metadata(st, o, &meta, &meta_size)) ||
      (err = plan(st, meta_size, &L)) || (err = scan_relocations(st)) ||
      (err = patch_records(st)) ||
      (err = write_output(st, fd, &L, meta, meta_size)))
    goto done;
  result->wrapper_count = st->wrapper_count;
  result->input_size = st->elf.in.size;
  result->output_size = L.shoff + L.shnum * st->elf.shentsize;
  result->fatbin_size = st->elf.sections[st->fat].size;
done:
  free(meta);
  return err;
}

KPACK_API kpack_error_t kpack_transform_write(
    const char* input_path, int output_fd,
    const kpack_transform_options_t* options, kpack_transform_result_t* result,
    kpack_transform_message_t* message) {
  return kpack_transform_write_records(input_path, output_fd, options, NULL, 0,
                                       result, message);
}

KPACK_API kpack_error_t kpack_transform_write_records(
    const char* input_path, int output_fd,
    const kpack_transform_options_t* options,
    const kpack_transform_record_t* records, size_t record_count,
    kpack_transform_result_t* result, kpack_transform_message_t* message) {
  tf_state st = {.path = input_path,
                 .msg = message,
                 .records = records,
                 .record_count = record_count};
  kpack_transform_result_t ignored;
  if (message == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  message->text[0] = '\0';
  if (result == NULL)
    result = &ignored;
  memset(result, 0, sizeof(*result));
  if (input_path == NULL || options == NULL || options->kernel_name == NULL ||
      options->search_path_count == 0 || options->search_paths == NULL ||
      (options->arch_count > 0 && options->arches == NULL) ||
      (record_count > 0 && records == NULL) || output_fd < 0) {
    snprintf(message->text, sizeof(message->text),
             "transform: a path, the output, a kernel name, the search "
             "paths or the arches are missing");
    return KPACK_ERROR_INVALID_ARGUMENT;
  }
  kpack_error_t err = kp_input_open(input_path, &st.in);
  if (err != KPACK_SUCCESS)
    return tf_fail(&st, err, "cannot open: %s", strerror(errno));
  err = transform(&st, output_fd, options, result);
  int reason = errno; /* of a failed read or write, for the caller */
  tf_close(&st);
  close(st.in.fd);
  errno = reason;
  return err;
}

KPACK_API kpack_error_t
kpack_transform_classify(const char* path, kpack_transform_kind_t* kind,
                         kpack_transform_message_t* message) {
  tf_state st = {.path = path, .msg = message};
  kpack_transform_message_t ignored;
  if (message == NULL)
    st.msg = message = &ignored;
  message->text[0] = '\0';
  if (path == NULL || kind == NULL) {
    snprintf(message->text, sizeof(message->text),
             "classify: a path or the result is missing");
    return KPACK_ERROR_INVALID_ARGUMENT;
  }
  *kind = KPACK_TRANSFORM_NOT_ELF;
  kpack_error_t err = kp_input_open(path, &st.in);
  if (err != KPACK_SUCCESS)
    return tf_fail(&st, err, "cannot open: %s", strerror(errno));
  err = tf_open(&st, kind);
  tf_close(&st);
  close(st.in.fd);
  return err;
}

KPACK_API const char* kpack_transform_kind_string(kpack_transform_kind_t kind) {
  switch (kind) {
    case KPACK_TRANSFORM_NOT_ELF:
      return "not an ELF file";
    case KPACK_TRANSFORM_NO_DEVICE_CODE:
      return "no device code";
    case KPACK_TRANSFORM_DEBUG_ONLY:
      return "no device code bytes (.hip_fatbin is SHT_NOBITS)";
    case KPACK_TRANSFORM_KPACKIFIED:
      return "already kpack-ified";
    case KPACK_TRANSFORM_FAT:
      return "device code to move";
  }
  return "unknown kind";
}
