/* SPDX-License-Identifier: MIT
 *
 * Builders of HIP host-binary inputs (see fixture_fatbin.h). One ELF layout
 * routine writes through a sink that is either a memory buffer or a file, so
 * the small fixtures of the unit tests and the gigabyte inputs of the
 * benchmark come out of the same code.
 */
#include "fixture_fatbin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

static void die(const char* what, const char* detail) {
  fprintf(stderr, "fixture: %s%s%s\n", what, detail ? ": " : "",
          detail ? detail : "");
  exit(1);
}

static void* xmalloc(size_t size) {
  void* p = malloc(size ? size : 1);
  if (p == NULL)
    die("out of memory", NULL);
  return p;
}

/* ---- buffers ------------------------------------------------------------- */

void fx_put(fx_buf* b, const void* data, size_t size) {
  if (b->cap < b->size || size > b->cap - b->size) {
    size_t need = b->size + size;
    size_t cap = b->cap > b->size ? b->cap : b->size;
    while (cap < need)
      cap = cap < 64 ? 64 : cap * 2;
    uint8_t* p = realloc(b->data, cap);
    if (p == NULL)
      die("out of memory", NULL);
    b->data = p;
    b->cap = cap;
  }
  if (size > 0)
    memcpy(b->data + b->size, data, size);
  b->size += size;
}

void fx_le(fx_buf* b, uint64_t v, unsigned n) {
  uint8_t bytes[8];
  for (unsigned i = 0; i < n; i++)
    bytes[i] = (uint8_t)(v >> (8 * i));
  fx_put(b, bytes, n);
}

void fx_align(fx_buf* b, size_t align) {
  static const uint8_t zero[4096];
  while (b->size % align != 0) {
    size_t n = align - b->size % align;
    fx_put(b, zero, n < sizeof(zero) ? n : sizeof(zero));
  }
}

void fx_store_le(uint8_t* p, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t fx_load_le(const uint8_t* p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = n; i-- > 0;)
    v = (v << 8) | p[i];
  return v;
}

void fx_set_le(fx_buf* b, size_t at, uint64_t v, unsigned n) {
  fx_store_le(b->data + at, v, n);
}

uint64_t fx_get_le(const fx_buf* b, size_t at, unsigned n) {
  return fx_load_le(b->data + at, n);
}

uint8_t* fx_section_header(uint8_t* elf, const char* name) {
  uint64_t shoff = fx_load_le(elf + 40, 8), n = fx_load_le(elf + 60, 2);
  uint64_t strndx = fx_load_le(elf + 62, 2);
  uint8_t* names = elf + fx_load_le(elf + shoff + strndx * 64 + 24, 8);
  for (uint64_t i = 1; i < n; i++) {
    uint8_t* sh = elf + shoff + i * 64;
    if (strcmp((char*)names + fx_load_le(sh, 4), name) == 0)
      return sh;
  }
  die("no such section", name);
  return NULL;
}

void fx_free(fx_buf* b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

/* ---- kernel bytes -------------------------------------------------------- */

void fx_fill_pattern(uint8_t* p, size_t size, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size;) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    size_t run = 1 + (x & 7);
    uint8_t value = (uint8_t)((x >> 8) % 23 + seed);
    for (size_t j = 0; j < run && i < size; j++)
      p[i++] = value;
  }
}

void fx_fill_code(uint8_t* p, size_t size, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 7;
  size_t i = 0;
  while (i + 32 <= size) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    size_t back = 32 + ((x >> 8) % 2048) * 4;
    if ((x & 7) < 4 && i >= back) {
      memmove(p + i, p + i - back, 32);
      i += 32;
    } else {
      uint32_t word =
          (x & 0x10000) ? x : (0xbf8c0000u | ((x >> 12) & 0x3f) << 4);
      memcpy(p + i, &word, 4);
      i += 4;
    }
  }
  memset(p + i, 0, size - i);
}

/* ---- bundles and envelopes ----------------------------------------------- */

fx_buf fx_bundle(const fx_entry* e, size_t n) {
  fx_buf b = {0};
  size_t table = 32;
  for (size_t i = 0; i < n; i++)
    table += 24 + strlen(e[i].id);
  size_t at = (table + 15) & ~(size_t)15;
  fx_put(&b, "__CLANG_OFFLOAD_BUNDLE__", 24);
  fx_le(&b, n, 8);
  for (size_t i = 0; i < n; i++) {
    fx_le(&b, e[i].size ? at : 0, 8);
    fx_le(&b, e[i].size, 8);
    fx_le(&b, strlen(e[i].id), 8);
    fx_put(&b, e[i].id, strlen(e[i].id));
    if (e[i].size)
      at = (at + e[i].size + 15) & ~(size_t)15;
  }
  for (size_t i = 0; i < n; i++) {
    if (e[i].size == 0)
      continue;
    fx_align(&b, 16);
    fx_put(&b, e[i].data, e[i].size);
  }
  return b;
}

fx_buf fx_ccob(unsigned version, unsigned method, const fx_buf* plain) {
  fx_buf b = {0};
  size_t bound = method == FX_ZSTD ? ZSTD_compressBound(plain->size)
                                   : (size_t)compressBound(plain->size);
  uint8_t* z = xmalloc(bound);
  size_t zsize;
  if (version < 1 || version > 3)
    die("fx_ccob: CCOB versions are 1 to 3", NULL);
  if (method == FX_ZSTD) {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    if (cctx == NULL)
      die("out of memory", NULL);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    zsize = ZSTD_compress2(cctx, z, bound, plain->data, plain->size);
    ZSTD_freeCCtx(cctx);
    if (ZSTD_isError(zsize))
      die("ZSTD_compress2", ZSTD_getErrorName(zsize));
  } else {
    uLongf n = bound;
    if (compress2(z, &n, plain->data, plain->size, 6) != Z_OK)
      die("compress2 failed", NULL);
    zsize = n;
  }
  size_t header = version == 1 ? 20 : version == 2 ? 24 : 32;
  fx_put(&b, "CCOB", 4);
  fx_le(&b, version, 2);
  fx_le(&b, method, 2);
  if (version == 1) {
    fx_le(&b, plain->size, 4);
  } else if (version == 2) {
    fx_le(&b, header + zsize, 4);
    fx_le(&b, plain->size, 4);
  } else {
    fx_le(&b, header + zsize, 8);
    fx_le(&b, plain->size, 8);
  }
  fx_le(&b, 0x0123456789abcdefull, 8); /* hash: not checked by readers */
  fx_put(&b, z, zsize);
  free(z);
  return b;
}

/* ---- HIPK metadata ------------------------------------------------------- */

static void mp_str(fx_buf* b, const char* s) {
  size_t n = strlen(s);
  if (n < 32) {
    fx_le(b, 0xa0 | n, 1);
  } else if (n < 256) {
    fx_le(b, 0xd9, 1);
    fx_le(b, n, 1);
  } else {
    fx_le(b, 0xda, 1);
    fx_le(b, (n >> 8) & 0xff, 1);
    fx_le(b, n & 0xff, 1);
  }
  fx_put(b, s, n);
}

fx_buf fx_hipk_metadata(const char* kernel_name, const char* const* paths,
                        size_t path_count) {
  fx_buf b = {0};
  fx_le(&b, 0x82, 1); /* fixmap, 2 pairs */
  mp_str(&b, "kernel_name");
  mp_str(&b, kernel_name);
  mp_str(&b, "kpack_search_paths");
  if (path_count < 16) {
    fx_le(&b, 0x90 | path_count, 1);
  } else {
    fx_le(&b, 0xdc, 1);
    fx_le(&b, (path_count >> 8) & 0xff, 1);
    fx_le(&b, path_count & 0xff, 1);
  }
  for (size_t i = 0; i < path_count; i++)
    mp_str(&b, paths[i]);
  return b;
}

/* ---- ELF files ----------------------------------------------------------- */

/* Where ELF bytes go: a memory buffer, or a file written front to back with
 * the header patched in at the end. */
typedef struct fx_sink {
  fx_buf* mem;
  int fd;
  const char* path;
  uint64_t size;
} fx_sink;

static void sink_put(fx_sink* s, const void* data, size_t size) {
  if (s->mem != NULL) {
    fx_put(s->mem, data, size);
  } else {
    const uint8_t* p = data;
    size_t left = size;
    while (left > 0) {
      ssize_t n = write(s->fd, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        die(s->path, strerror(errno));
      p += n;
      left -= (size_t)n;
    }
  }
  s->size += size;
}

static void sink_le(fx_sink* s, uint64_t v, unsigned n) {
  uint8_t bytes[8];
  for (unsigned i = 0; i < n; i++)
    bytes[i] = (uint8_t)(v >> (8 * i));
  sink_put(s, bytes, n);
}

static void sink_align(fx_sink* s, size_t align) {
  static const uint8_t zero[4096];
  uint64_t pad = (align - s->size % align) % align;
  if (s->mem == NULL && pad > sizeof(zero)) {
    /* A hole: the file stays sparse however far bundles are apart. */
    if (lseek(s->fd, (off_t)pad, SEEK_CUR) < 0)
      die(s->path, strerror(errno));
    s->size += pad;
    return;
  }
  while (s->size % align != 0) {
    uint64_t n = align - s->size % align;
    sink_put(s, zero, n < sizeof(zero) ? (size_t)n : sizeof(zero));
  }
}

static void sink_patch(fx_sink* s, uint64_t at, const void* data, size_t n) {
  if (s->mem != NULL) {
    memcpy(s->mem->data + at, data, n);
  } else if (pwrite(s->fd, data, n, (off_t)at) != (ssize_t)n) {
    die(s->path, strerror(errno));
  }
}

/* Appends bundle `index` to the sink. */
typedef void (*fx_bundle_fn)(void* ctx, size_t index, fx_sink* sink);

typedef struct fx_section {
  const char* name;
  uint32_t type;
  uint64_t flags, offset, size, align, entsize;
  uint32_t link, info;
} fx_section;

#define FX_MAX_SECTIONS 8

static bool wants_symbol(fx_ptr how) {
  return how == FX_PTR_ABS64 || how == FX_PTR_ABS64_SECTION;
}

static void write_elf(fx_sink* s, const fx_elf_opts* o, fx_bundle_fn bundle,
                      void* ctx) {
  fx_section sec[FX_MAX_SECTIONS];
  fx_elf_layout L;
  uint16_t type = o->type ? o->type : FX_ET_DYN;
  uint16_t machine = o->machine ? o->machine : FX_EM_X86_64;
  bool rel = type == FX_ET_REL;
  size_t align = o->bundle_align ? o->bundle_align : 4096;
  size_t n = 0;
  bool any_rela = false, any_sym = false;
  for (size_t w = 0; w < o->wrapper_count; w++) {
    any_rela |= o->wrappers[w].how != FX_PTR_FILE;
    any_sym |= wants_symbol(o->wrappers[w].how);
    if (rel && o->wrappers[w].how == FX_PTR_RELATIVE)
      die("fx_elf: a relocatable object has no RELATIVE relocations", NULL);
  }
  memset(sec, 0, sizeof(sec));
  memset(&L, 0, sizeof(L));

  /* Section indices first: symbols and relocations refer to them. */
  sec[n++] = (fx_section){.name = ""};
  if (!o->no_fatbin)
    L.fatbin_index = n++;
  if (o->ref_count > 0)
    L.refs_index = n++;
  if (o->wrapper_count > 0) {
    L.segment_index = n++;
    if (any_rela)
      L.rela_index = n++;
    if (any_sym)
      L.symtab_index = n++;
  }
  size_t names_index = n++;
  L.shnum = n;
  /* Section i is at file offset sec[i].offset and, in a linked file, at
   * address FX_VADDR + that. */
#define ADDR(i) (rel ? 0 : FX_VADDR + sec[i].offset)

  sink_put(s, (uint8_t[64]){0}, 64); /* the ELF header, written last */

  uint64_t* bundle_at = xmalloc(sizeof(uint64_t) * (o->bundle_count + 1));
  if (L.fatbin_index) {
    sink_align(s, align > 16 ? align : 16);
    uint64_t start = s->size;
    for (size_t i = 0; i < o->bundle_count; i++) {
      sink_align(s, align);
      bundle_at[i] = s->size - start;
      bundle(ctx, i, s);
    }
    sec[L.fatbin_index] = (fx_section){
        ".hip_fatbin", 1, 2, start, s->size - start, align, 0, 0, 0};
    L.fatbin_offset = (size_t)start;
    L.fatbin_size = (size_t)(s->size - start);
  }

  uint64_t* ref_at = xmalloc(sizeof(uint64_t) * (o->ref_count + 1));
  if (L.refs_index) {
    sink_align(s, 16);
    uint64_t start = s->size;
    for (size_t i = 0; i < o->ref_count; i++) {
      sink_align(s, 8);
      ref_at[i] = s->size - start;
      sink_put(s, o->refs[i].data, o->refs[i].size);
    }
    sec[L.refs_index] = (fx_section){
        ".rocm_kpack_ref", 1, 2, start, s->size - start, 8, 0, 0, 0};
    L.refs_offset = (size_t)start;
    L.refs_size = (size_t)(s->size - start);
  }

  if (L.segment_index) {
    /* Each wrapper's target: section index and offset inside it. */
    size_t* target_sec = xmalloc(sizeof(size_t) * o->wrapper_count);
    uint64_t* target_off = xmalloc(sizeof(uint64_t) * o->wrapper_count);
    for (size_t w = 0; w < o->wrapper_count; w++) {
      const fx_wrapper* wr = &o->wrappers[w];
      /* Any other magic (a damaged record) points like a HIPK record when
       * there is metadata, else like a HIPF one. */
      bool hipk =
          wr->magic == FX_HIPK_MAGIC ||
          (wr->magic != FX_HIPF_MAGIC && wr->magic != 0 && o->ref_count > 0);
      size_t count = hipk ? o->ref_count : o->bundle_count;
      if (wr->target >= count || (hipk ? !L.refs_index : !L.fatbin_index))
        die("fx_elf: a wrapper points at nothing", NULL);
      target_sec[w] = hipk ? L.refs_index : L.fatbin_index;
      target_off[w] = hipk ? ref_at[wr->target] : bundle_at[wr->target];
    }

    sink_align(s, 16);
    uint64_t seg = s->size;
    sec[L.segment_index] = (fx_section){
        ".hipFatBinSegment", 1, 3, seg, 24 * o->wrapper_count, 8, 0, 0, 0};
    L.segment_offset = (size_t)seg;
    for (size_t w = 0; w < o->wrapper_count; w++) {
      const fx_wrapper* wr = &o->wrappers[w];
      sink_le(s, wr->magic ? wr->magic : FX_HIPF_MAGIC, 4);
      sink_le(s, wr->version ? wr->version : 1, 4);
      sink_le(s,
              wr->how == FX_PTR_FILE ? ADDR(target_sec[w]) + target_off[w] : 0,
              8);
      sink_le(s, wr->reserved, 8);
    }

    /* Symbols: null; the section symbols of .hip_fatbin and
     * .rocm_kpack_ref; then one object symbol per wrapper at its target
     * (values section-relative in a relocatable object). */
    uint64_t sym_start = 0;
    if (L.symtab_index) {
      sink_align(s, 8);
      sym_start = s->size;
      sink_put(s, (uint8_t[24]){0}, 24);
      size_t section_syms[2] = {L.fatbin_index, L.refs_index};
      for (int i = 0; i < 2; i++) {
        sink_le(s, 0, 4);
        sink_le(s, 0x03, 1); /* STB_LOCAL, STT_SECTION */
        sink_le(s, 0, 1);
        sink_le(s, section_syms[i], 2);
        sink_le(s, section_syms[i] ? ADDR(section_syms[i]) : 0, 8);
        sink_le(s, 0, 8);
      }
      for (size_t w = 0; w < o->wrapper_count; w++) {
        sink_le(s, 0, 4);
        sink_le(s, 0x01, 1); /* STB_LOCAL, STT_OBJECT */
        sink_le(s, 0, 1);
        sink_le(s, target_sec[w], 2);
        sink_le(s, ADDR(target_sec[w]) + target_off[w], 8);
        sink_le(s, 0, 8);
      }
    }
    uint64_t rela_start = s->size;
    if (L.rela_index) {
      sink_align(s, 8);
      rela_start = s->size;
      uint32_t relative = machine == FX_EM_AARCH64 ? 1027 : 8;
      uint32_t abs64 = machine == FX_EM_AARCH64 ? 257 : 1;
      for (size_t w = 0; w < o->wrapper_count; w++) {
        fx_ptr how = o->wrappers[w].how;
        if (how == FX_PTR_FILE)
          continue;
        sink_le(s, (rel ? 0 : ADDR(L.segment_index)) + 24 * w + 8, 8);
        if (how == FX_PTR_RELATIVE) {
          sink_le(s, relative, 8);
          sink_le(s, ADDR(target_sec[w]) + target_off[w], 8);
        } else if (how == FX_PTR_ABS64) {
          sink_le(s, (uint64_t)(3 + w) << 32 | abs64, 8);
          sink_le(s, 0, 8);
        } else {
          uint64_t sym = target_sec[w] == L.fatbin_index ? 1 : 2;
          sink_le(s, sym << 32 | abs64, 8);
          sink_le(s, target_off[w], 8);
        }
      }
      sec[L.rela_index] =
          (fx_section){rel ? ".rela.hipFatBinSegment" : ".rela.dyn",
                       4,
                       rel ? 0 : 2,
                       rela_start,
                       s->size - rela_start,
                       8,
                       24,
                       (uint32_t)L.symtab_index,
                       rel ? (uint32_t)L.segment_index : 0};
      L.rela_offset = (size_t)rela_start;
      L.rela_size = (size_t)(s->size - rela_start);
    }
    if (L.symtab_index) {
      sec[L.symtab_index] = (fx_section){rel ? ".symtab" : ".dynsym",
                                         rel ? 2u : 11u,
                                         rel ? 0 : 2,
                                         sym_start,
                                         24 * (3 + o->wrapper_count),
                                         8,
                                         24,
                                         0,
                                         (uint32_t)(3 + o->wrapper_count)};
      L.symtab_offset = (size_t)sym_start;
    }
    free(target_sec);
    free(target_off);
  }
  free(bundle_at);
  free(ref_at);

  uint64_t names_start = s->size;
  uint64_t name_at[FX_MAX_SECTIONS];
  sec[names_index] =
      (fx_section){".shstrtab", 3, 0, names_start, 0, 1, 0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    name_at[i] = s->size - names_start;
    sink_put(s, sec[i].name, strlen(sec[i].name) + 1);
  }
  sec[names_index].size = s->size - names_start;

  sink_align(s, 8);
  L.shoff = (size_t)s->size;
  for (size_t i = 0; i < n; i++) {
    bool alloc = (sec[i].flags & 2) != 0;
    sink_le(s, name_at[i], 4);
    sink_le(s, sec[i].type, 4);
    sink_le(s, sec[i].flags, 8);
    sink_le(s, alloc ? ADDR(i) : 0, 8);
    sink_le(s, sec[i].offset, 8);
    sink_le(s, sec[i].size, 8);
    sink_le(s, sec[i].link, 4);
    sink_le(s, sec[i].info, 4);
    sink_le(s, sec[i].align, 8);
    sink_le(s, sec[i].entsize, 8);
  }
#undef ADDR

  fx_buf h = {0};
  fx_put(&h, "\177ELF\2\1\1", 7);
  fx_align(&h, 16);
  fx_le(&h, type, 2);
  fx_le(&h, machine, 2);
  fx_le(&h, 1, 4);       /* EV_CURRENT */
  fx_le(&h, 0, 8);       /* entry */
  fx_le(&h, 0, 8);       /* phoff */
  fx_le(&h, L.shoff, 8); /* shoff */
  fx_le(&h, 0, 4);       /* flags */
  fx_le(&h, 64, 2);      /* ehsize */
  fx_le(&h, 56, 2);      /* phentsize */
  fx_le(&h, 0, 2);       /* phnum */
  fx_le(&h, 64, 2);      /* shentsize */
  fx_le(&h, n, 2);
  fx_le(&h, names_index, 2);
  sink_patch(s, 0, h.data, h.size);
  fx_free(&h);
  if (o->layout != NULL)
    *o->layout = L;
}

static void put_given_bundle(void* ctx, size_t index, fx_sink* sink) {
  const fx_elf_opts* o = ctx;
  sink_put(sink, o->bundles[index].data, o->bundles[index].size);
}

fx_buf fx_elf(const fx_elf_opts* o) {
  fx_buf b = {0};
  fx_sink s = {.mem = &b, .fd = -1};
  write_elf(&s, o, put_given_bundle, (void*)o);
  return b;
}

/* ---- large fat binaries -------------------------------------------------- */

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static uint32_t code_object_seed(const fx_fatbin_spec* spec, size_t bundle,
                                 size_t arch) {
  return mix(spec->seed * 0x9e3779b9u + (uint32_t)(bundle * spec->arch_count) +
             (uint32_t)arch);
}

size_t fx_fatbin_code_object_size(const fx_fatbin_spec* spec, size_t bundle,
                                  size_t arch) {
  size_t base = spec->code_object_size;
  size_t spread = base / 16;
  uint32_t r = mix(code_object_seed(spec, bundle, arch) + 1);
  return base - (spread ? r % (spread + 1) : 0);
}

void fx_fatbin_code_object(const fx_fatbin_spec* spec, size_t bundle,
                           size_t arch, uint8_t* out) {
  fx_fill_code(out, fx_fatbin_code_object_size(spec, bundle, arch),
               code_object_seed(spec, bundle, arch));
}

typedef struct fx_stream {
  const fx_fatbin_spec* spec;
  fx_entry* entries;
  char** ids;
  uint8_t** code;
} fx_stream;

static void put_generated_bundle(void* ctx, size_t index, fx_sink* sink) {
  fx_stream* st = ctx;
  const fx_fatbin_spec* spec = st->spec;
  st->entries[0] = (fx_entry){"host-x86_64-unknown-linux-gnu-", NULL, 0};
  for (size_t a = 0; a < spec->arch_count; a++) {
    size_t size = fx_fatbin_code_object_size(spec, index, a);
    fx_fatbin_code_object(spec, index, a, st->code[a]);
    st->entries[a + 1] = (fx_entry){st->ids[a], st->code[a], size};
  }
  fx_buf plain = fx_bundle(st->entries, spec->arch_count + 1);
  if (spec->ccob_version != 0) {
    fx_buf env = fx_ccob(spec->ccob_version, spec->ccob_method, &plain);
    sink_put(sink, env.data, env.size);
    fx_free(&env);
  } else {
    sink_put(sink, plain.data, plain.size);
  }
  fx_free(&plain);
}

/* Writes through a file sink to a temporary name, then renames it. */
static void write_elf_file(const char* path, const fx_elf_opts* o,
                           fx_bundle_fn bundle, void* ctx) {
  char* tmp;
  if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
    die("out of memory", NULL);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    die(tmp, strerror(errno));
  fx_sink s = {.fd = fd, .path = tmp};
  write_elf(&s, o, bundle, ctx);
  if (fsync(fd) != 0 || close(fd) != 0)
    die(tmp, strerror(errno));
  if (rename(tmp, path) != 0)
    die(path, strerror(errno));
  free(tmp);
}

void fx_write_elf(const char* path, const fx_elf_opts* o) {
  write_elf_file(path, o, put_given_bundle, (void*)o);
}

void fx_write_fatbin(const char* path, const fx_fatbin_spec* spec) {
  fx_stream st = {.spec = spec};

  st.entries = xmalloc(sizeof(fx_entry) * (spec->arch_count + 1));
  st.ids = xmalloc(sizeof(char*) * (spec->arch_count + 1));
  st.code = xmalloc(sizeof(uint8_t*) * (spec->arch_count + 1));
  for (size_t a = 0; a < spec->arch_count; a++) {
    if (asprintf(&st.ids[a], "hipv4-amdgcn-amd-amdhsa--%s", spec->arches[a]) <
        0)
      die("out of memory", NULL);
    st.code[a] = xmalloc(spec->code_object_size);
  }
  fx_wrapper* wrappers = xmalloc(sizeof(fx_wrapper) * (spec->bundle_count + 1));
  for (size_t i = 0; i < spec->bundle_count; i++)
    wrappers[i] = (fx_wrapper){FX_HIPF_MAGIC, 1, i, FX_PTR_RELATIVE, 0};
  fx_elf_opts o = {.bundle_count = spec->bundle_count,
                   .wrappers = wrappers,
                   .wrapper_count = spec->bundle_count};
  write_elf_file(path, &o, put_generated_bundle, &st);

  for (size_t a = 0; a < spec->arch_count; a++) {
    free(st.ids[a]);
    free(st.code[a]);
  }
  free(st.entries);
  free(st.ids);
  free(st.code);
  free(wrappers);
}
