/* SPDX-License-Identifier: MIT
 *
 * HIP fat binaries: finds .hip_fatbin and .hipFatBinSegment in a 64-bit
 * little-endian ELF, resolves each __CudaFatBinaryWrapper's bundle address
 * (applying its relocation when the linker left the field zero) and records
 * where each code object's bundle starts. Parsing a bundle is left to
 * offload_bundle.c, one at a time, so that a large library is never held
 * decompressed in full.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive.h"
#include "offload_bundle.h"

#define FB_EHDR_SIZE 64u
#define FB_SHDR_SIZE 64u
#define FB_RELA_SIZE 24u
#define FB_SYM_SIZE 24u
#define FB_WRAPPER_SIZE 24u
#define FB_WRAPPER_MAGIC 0x48495046u /* "HIPF" */

#define FB_ET_REL 1u
#define FB_SHT_PROGBITS 1u
#define FB_SHT_RELA 4u
#define FB_SHT_NOBITS 8u
#define FB_SHN_UNDEF 0u
#define FB_SHN_XINDEX 0xffffu
#define FB_EM_X86_64 62u
#define FB_EM_AARCH64 183u

typedef struct fb_section {
  uint32_t name;
  uint32_t type;
  uint64_t addr;
  uint64_t offset;
  uint64_t size;
  uint32_t link;
  uint32_t info;
} fb_section;

/* Where ELF bytes come from: a caller's buffer, or a file read with pread so
 * that a file changing underneath is an IO_ERROR rather than a SIGBUS. */
typedef struct fb_source {
  const uint8_t* mem;
  int fd;
  uint64_t size;
} fb_source;

/* One loaded range; `owned` is set when it had to be read from a file. */
typedef struct fb_range {
  const uint8_t* data;
  uint8_t* owned;
  uint64_t size;
} fb_range;

/* The ELF being read, while kpack_fatbin_open runs. */
typedef struct fb_elf {
  const fb_source* src;
  uint16_t type;
  uint16_t machine;
  fb_section* sections;
  size_t section_count;
} fb_elf;

struct kpack_fatbin {
  kpack_fatbin_info_t info;
  fb_range fatbin;   /* the .hip_fatbin bytes */
  uint64_t* offsets; /* bundle start in .hip_fatbin, by co_index */
};

static kpack_error_t load_range(const fb_source* src, uint64_t offset,
                                uint64_t size, fb_range* out) {
  kpack_error_t err;
  memset(out, 0, sizeof(*out));
  if (offset > src->size || size > src->size - offset)
    return KPACK_ERROR_INVALID_FORMAT;
  out->size = size;
  if (src->mem != NULL) {
    out->data = src->mem + offset;
    return KPACK_SUCCESS;
  }
  if (size > SIZE_MAX)
    return KPACK_ERROR_OUT_OF_MEMORY;
  out->owned = malloc(size ? (size_t)size : 1);
  if (out->owned == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  err = kp_pread_all(src->fd, out->owned, (size_t)size, offset);
  if (err != KPACK_SUCCESS) {
    free(out->owned);
    out->owned = NULL;
    return err;
  }
  out->data = out->owned;
  return KPACK_SUCCESS;
}

static void free_range(fb_range* r) {
  free(r->owned);
  memset(r, 0, sizeof(*r));
}

static void parse_section(const uint8_t* p, fb_section* s) {
  s->name = (uint32_t)ob_load_le(p, 4);
  s->type = (uint32_t)ob_load_le(p + 4, 4);
  s->addr = ob_load_le(p + 16, 8);
  s->offset = ob_load_le(p + 24, 8);
  s->size = ob_load_le(p + 32, 8);
  s->link = (uint32_t)ob_load_le(p + 40, 4);
  s->info = (uint32_t)ob_load_le(p + 44, 4);
}

/* Reads the ELF header and the section table into elf->sections. */
static kpack_error_t read_sections(fb_elf* elf, fb_range* names) {
  kpack_error_t err;
  fb_range hdr = {0}, table = {0};
  uint8_t first[FB_SHDR_SIZE];

  err = load_range(elf->src, 0, FB_EHDR_SIZE, &hdr);
  if (err != KPACK_SUCCESS)
    goto done;
  const uint8_t* h = hdr.data;
  err = KPACK_ERROR_INVALID_FORMAT;
  /* ELFCLASS64, ELFDATA2LSB: HIP hosts are 64-bit little-endian. */
  if (memcmp(h, "\177ELF", 4) != 0 || h[4] != 2 || h[5] != 1)
    goto done;
  elf->type = (uint16_t)ob_load_le(h + 16, 2);
  elf->machine = (uint16_t)ob_load_le(h + 18, 2);
  uint64_t shoff = ob_load_le(h + 40, 8);
  uint64_t entsize = ob_load_le(h + 58, 2);
  uint64_t count = ob_load_le(h + 60, 2);
  uint64_t strndx = ob_load_le(h + 62, 2);
  if (shoff == 0)
    goto done_ok; /* no section table: nothing to find */
  if (entsize < FB_SHDR_SIZE)
    goto done;

  /* Section 0 holds the real count and name-table index when they do not
   * fit the header's 16-bit fields. */
  err = load_range(elf->src, shoff, FB_SHDR_SIZE, &table);
  if (err != KPACK_SUCCESS)
    goto done;
  memcpy(first, table.data, FB_SHDR_SIZE);
  free_range(&table);
  if (count == 0)
    count = ob_load_le(first + 32, 8);
  if (strndx == FB_SHN_XINDEX)
    strndx = ob_load_le(first + 40, 4);
  err = KPACK_ERROR_INVALID_FORMAT;
  if (count == 0 || count > (elf->src->size - shoff) / entsize)
    goto done;
  err = load_range(elf->src, shoff, count * entsize, &table);
  if (err != KPACK_SUCCESS)
    goto done;
  elf->sections = calloc((size_t)count, sizeof(*elf->sections));
  if (elf->sections == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  elf->section_count = (size_t)count;
  for (size_t i = 0; i < elf->section_count; i++)
    parse_section(table.data + i * entsize, &elf->sections[i]);

  err = KPACK_ERROR_INVALID_FORMAT;
  if (strndx == 0 || strndx >= count ||
      elf->sections[strndx].type == FB_SHT_NOBITS)
    goto done;
  err = load_range(elf->src, elf->sections[strndx].offset,
                   elf->sections[strndx].size, names);
  if (err != KPACK_SUCCESS)
    goto done;
done_ok:
  err = KPACK_SUCCESS;
done:
  free_range(&hdr);
  free_range(&table);
  return err;
}

/* Index of the section called `name`, or 0 (the null section) if none. */
static size_t find_section(const fb_elf* elf, const fb_range* names,
                           const char* name) {
  size_t len = strlen(name) + 1;
  for (size_t i = 1; i < elf->section_count; i++) {
    uint64_t at = elf->sections[i].name;
    if (at < names->size && names->size - at >= len &&
        memcmp(names->data + at, name, len) == 0)
      return i;
  }
  return 0;
}

static bool is_relative(uint16_t machine, uint32_t type) {
  return (machine == FB_EM_X86_64 && type == 8) ||   /* R_X86_64_RELATIVE */
         (machine == FB_EM_AARCH64 && type == 1027); /* R_AARCH64_RELATIVE */
}

static bool is_abs64(uint16_t machine, uint32_t type) {
  return (machine == FB_EM_X86_64 && type == 1) ||  /* R_X86_64_64 */
         (machine == FB_EM_AARCH64 && type == 257); /* R_AARCH64_ABS64 */
}

/* Applies the relocations that target a wrapper's address field. Resolved
 * targets go to `target` as offsets into .hip_fatbin (or UINT64_MAX when the
 * relocation points outside it); `found` marks the wrappers set this way. In
 * a relocatable object, offsets are section-relative and a symbol's value is
 * relative to its own section. */
static kpack_error_t apply_relocations(const fb_elf* elf, size_t seg_index,
                                       size_t fatbin_index, size_t wrappers,
                                       uint64_t* target, bool* found) {
  kpack_error_t err = KPACK_SUCCESS;
  const fb_section* seg = &elf->sections[seg_index];
  const fb_section* fat = &elf->sections[fatbin_index];
  bool rel = elf->type == FB_ET_REL;
  fb_range relocs = {0}, syms = {0};

  for (size_t s = 1; s < elf->section_count; s++) {
    const fb_section* sec = &elf->sections[s];
    if (sec->type != FB_SHT_RELA || (rel && sec->info != seg_index))
      continue;
    if (sec->size % FB_RELA_SIZE != 0) {
      err = KPACK_ERROR_INVALID_FORMAT;
      goto done;
    }
    err = load_range(elf->src, sec->offset, sec->size, &relocs);
    if (err != KPACK_SUCCESS)
      goto done;
    for (uint64_t r = 0; r < sec->size / FB_RELA_SIZE; r++) {
      const uint8_t* p = relocs.data + r * FB_RELA_SIZE;
      uint64_t where = ob_load_le(p, 8);
      uint64_t info = ob_load_le(p + 8, 8);
      uint64_t addend = ob_load_le(p + 16, 8);
      uint32_t type = (uint32_t)info, sym = (uint32_t)(info >> 32);
      uint64_t slot;
      if (rel) {
        slot = where;
      } else {
        if (where < seg->addr)
          continue;
        slot = where - seg->addr;
      }
      if (slot % FB_WRAPPER_SIZE != 8 || slot / FB_WRAPPER_SIZE >= wrappers)
        continue;
      size_t w = (size_t)(slot / FB_WRAPPER_SIZE);
      uint64_t addr;
      if (is_relative(elf->machine, type)) {
        addr = addend;
      } else if (is_abs64(elf->machine, type)) {
        /* S + A: the symbol table is the one the relocation section links. */
        if (syms.data == NULL) {
          if (sec->link == 0 || sec->link >= elf->section_count) {
            err = KPACK_ERROR_INVALID_FORMAT;
            goto done;
          }
          const fb_section* st = &elf->sections[sec->link];
          err = load_range(elf->src, st->offset, st->size, &syms);
          if (err != KPACK_SUCCESS)
            goto done;
        }
        err = KPACK_ERROR_INVALID_FORMAT;
        if (sym == 0 || sym >= syms.size / FB_SYM_SIZE)
          goto done;
        const uint8_t* sp = syms.data + (size_t)sym * FB_SYM_SIZE;
        uint64_t shndx = ob_load_le(sp + 6, 2);
        uint64_t value = ob_load_le(sp + 8, 8);
        if (shndx == FB_SHN_UNDEF)
          goto done;
        err = KPACK_SUCCESS;
        if (rel && shndx != fatbin_index) {
          target[w] = UINT64_MAX;
          found[w] = true;
          continue;
        }
        addr = value + addend + (rel ? fat->addr : 0);
      } else {
        continue; /* some other relocation: the field keeps its file value */
      }
      target[w] = addr >= fat->addr && addr - fat->addr < fat->size
                      ? addr - fat->addr
                      : UINT64_MAX;
      found[w] = true;
    }
    free_range(&syms);
    free_range(&relocs);
  }
done:
  free_range(&syms);
  free_range(&relocs);
  return err;
}

/* Bundle offsets from the wrapper table, in wrapper order. */
static kpack_error_t locate_by_wrappers(const fb_elf* elf, size_t seg_index,
                                        size_t fatbin_index,
                                        struct kpack_fatbin* fb) {
  kpack_error_t err;
  const fb_section* seg = &elf->sections[seg_index];
  const fb_section* fat = &elf->sections[fatbin_index];
  fb_range table = {0};
  bool* found = NULL;

  if (seg->type == FB_SHT_NOBITS || seg->size % FB_WRAPPER_SIZE != 0)
    return KPACK_ERROR_INVALID_FORMAT;
  size_t count = (size_t)(seg->size / FB_WRAPPER_SIZE);
  err = load_range(elf->src, seg->offset, seg->size, &table);
  if (err != KPACK_SUCCESS)
    goto done;
  fb->offsets = calloc(count ? count : 1, sizeof(*fb->offsets));
  found = calloc(count ? count : 1, sizeof(*found));
  if (fb->offsets == NULL || found == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  err = apply_relocations(elf, seg_index, fatbin_index, count, fb->offsets,
                          found);
  if (err != KPACK_SUCCESS)
    goto done;
  err = KPACK_ERROR_INVALID_FORMAT;
  for (size_t i = 0; i < count; i++) {
    const uint8_t* w = table.data + i * FB_WRAPPER_SIZE;
    if (ob_load_le(w, 4) != FB_WRAPPER_MAGIC)
      goto done;
    if (!found[i]) {
      uint64_t addr = ob_load_le(w + 8, 8);
      fb->offsets[i] = addr >= fat->addr && addr - fat->addr < fat->size
                           ? addr - fat->addr
                           : UINT64_MAX;
    }
    if (fb->offsets[i] == UINT64_MAX)
      goto done;
  }
  fb->info.bundle_count = count;
  fb->info.has_wrappers = true;
  err = KPACK_SUCCESS;
done:
  free(found);
  free_range(&table);
  return err;
}

/* Without wrappers, bundles follow each other in the section, each aligned
 * and zero-padded: step over each one, then over the padding. */
static kpack_error_t locate_by_walking(struct kpack_fatbin* fb) {
  const uint8_t* d = fb->fatbin.data;
  uint64_t size = fb->fatbin.size, pos = 0;
  size_t cap = 0;
  for (;;) {
    while (pos < size && d[pos] == 0)
      pos++;
    if (pos == size)
      return KPACK_SUCCESS;
    uint64_t extent;
    kpack_error_t err = ob_measure(d + pos, (size_t)(size - pos), &extent);
    if (err != KPACK_SUCCESS)
      return err;
    if (fb->info.bundle_count == cap) {
      size_t next = cap ? cap * 2 : 16;
      uint64_t* p = realloc(fb->offsets, next * sizeof(*p));
      if (p == NULL)
        return KPACK_ERROR_OUT_OF_MEMORY;
      fb->offsets = p;
      cap = next;
    }
    fb->offsets[fb->info.bundle_count++] = pos;
    pos += extent; /* extent > 0: the walk always moves on */
  }
}

static kpack_error_t open_source(const fb_source* src, kpack_fatbin_t** out) {
  kpack_error_t err;
  fb_elf elf = {.src = src};
  fb_range names = {0};
  struct kpack_fatbin* fb = calloc(1, sizeof(*fb));
  if (fb == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;

  err = read_sections(&elf, &names);
  if (err != KPACK_SUCCESS)
    goto fail;
  fb->info.machine = elf.machine;
  size_t fat = find_section(&elf, &names, ".hip_fatbin");
  size_t seg = find_section(&elf, &names, ".hipFatBinSegment");
  if (fat != 0) {
    const fb_section* s = &elf.sections[fat];
    err = KPACK_ERROR_INVALID_FORMAT;
    if (s->type == FB_SHT_NOBITS || s->size > SIZE_MAX)
      goto fail;
    err = load_range(src, s->offset, s->size, &fb->fatbin);
    if (err != KPACK_SUCCESS)
      goto fail;
    fb->info.has_fatbin = true;
    fb->info.fatbin_size = s->size;
    if (seg != 0)
      err = locate_by_wrappers(&elf, seg, fat, fb);
    else
      err = locate_by_walking(fb);
    if (err != KPACK_SUCCESS)
      goto fail;
  }
  free(elf.sections);
  free_range(&names);
  *out = fb;
  return KPACK_SUCCESS;

fail:
  free(elf.sections);
  free_range(&names);
  kpack_fatbin_close(fb);
  return err;
}

KPACK_API kpack_error_t kpack_fatbin_open(const char* path,
                                          kpack_fatbin_t** fatbin) {
  kpack_error_t err;
  struct stat st;
  if (fatbin == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *fatbin = NULL;
  if (path == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
   * below like any other file that is not regular. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR ? KPACK_ERROR_FILE_NOT_FOUND
                                               : KPACK_ERROR_IO_ERROR;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    err = KPACK_ERROR_IO_ERROR;
    goto done;
  }
  fb_source src = {.fd = fd, .size = (uint64_t)st.st_size};
  err = open_source(&src, fatbin);
done:
  close(fd);
  return err;
}

KPACK_API kpack_error_t kpack_fatbin_open_memory(const void* data, size_t size,
                                                 kpack_fatbin_t** fatbin) {
  if (fatbin == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *fatbin = NULL;
  if (data == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  fb_source src = {.mem = data, .fd = -1, .size = size};
  return open_source(&src, fatbin);
}

KPACK_API kpack_error_t kpack_fatbin_get_info(const kpack_fatbin_t* fatbin,
                                              kpack_fatbin_info_t* info) {
  if (fatbin == NULL || info == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *info = fatbin->info;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_fatbin_get_bundle(const kpack_fatbin_t* fatbin,
                                                size_t index,
                                                kpack_bundle_t** bundle) {
  if (bundle != NULL)
    *bundle = NULL;
  if (fatbin == NULL || bundle == NULL || index >= fatbin->info.bundle_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  uint64_t at = fatbin->offsets[index];
  return kpack_bundle_parse(fatbin->fatbin.data + at,
                            (size_t)(fatbin->fatbin.size - at), bundle);
}

KPACK_API void kpack_fatbin_close(kpack_fatbin_t* fatbin) {
  if (fatbin == NULL)
    return;
  free_range(&fatbin->fatbin);
  free(fatbin->offsets);
  free(fatbin);
}
