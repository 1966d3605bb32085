/* SPDX-License-Identifier: MIT
 *
 * Writes the fuzzers' seed corpora (make fuzz-corpus): archives from the
 * project's writer and TOC variants re-encoded from them, HIPK metadata for
 * the loader fixture of fuzz_drivers.h, and offload bundles, CCOB envelopes
 * and host ELF images. Output is deterministic; every seed is a few KB.
 */
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include "fuzz_drivers.h"
#include "rocm_kpack/kpack_ext.h"

static const char* out_dir;

static void die(const char* what) {
  fprintf(stderr, "make_corpus: %s\n", what);
  exit(1);
}

static char* seed_path(const char* harness, const char* name) {
  char* path;
  if (asprintf(&path, "%s/%s", out_dir, harness) < 0)
    die("out of memory");
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    die("cannot create a corpus directory");
  free(path);
  if (asprintf(&path, "%s/%s/%s", out_dir, harness, name) < 0)
    die("out of memory");
  return path;
}

static void save(const char* harness, const char* name, const void* data,
                 size_t size) {
  char* path = seed_path(harness, name);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    die(path);
  free(path);
}

static void* load(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    die(path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc(n > 0 ? (size_t)n : 1);
  if (data == NULL || fread(data, 1, (size_t)n, f) != (size_t)n)
    die(path);
  fclose(f);
  *size = (size_t)n;
  return data;
}

/* Compressible bytes that differ per seed, starting like an ELF file. */
static uint8_t* kernel_bytes(size_t size, unsigned seed) {
  uint8_t* p = malloc(size ? size : 1);
  uint32_t x = seed * 2654435761u + 3;
  if (p == NULL)
    die("out of memory");
  for (size_t i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)(x % 7 + seed);
  }
  if (size >= 4)
    memcpy(p, "\177ELF", 4);
  return p;
}

/* ---- archives -------------------------------------------------------------
 */

typedef struct seed_kernel {
  const char* binary;
  const char* arch;
  size_t size;
} seed_kernel;

static void write_archive(const char* name, kpack_compression_scheme_t scheme,
                          const char* const* arches, size_t arch_count,
                          const seed_kernel* kernels, size_t count) {
  char* path = seed_path("archive", name);
  kpack_writer_t* w;
  kpack_writer_options_t opts = {.scheme = scheme,
                                 .group_name = "foo",
                                 .gfx_arch_family = "gfx9",
                                 .gfx_arches = arches,
                                 .gfx_arch_count = arch_count};
  if (kpack_writer_create(path, &opts, &w) != KPACK_SUCCESS)
    die("kpack_writer_create");
  for (size_t i = 0; i < count; i++) {
    uint8_t* data = kernel_bytes(kernels[i].size, (unsigned)i + 1);
    if (kpack_writer_add_kernel(w, kernels[i].binary, kernels[i].arch, data,
                                kernels[i].size) != KPACK_SUCCESS)
      die("kpack_writer_add_kernel");
    free(data);
  }
  if (kpack_writer_finish(w) != KPACK_SUCCESS)
    die("kpack_writer_finish");
  free(path);
}

/* The TOC of a seed archive as a msgpack-c object, to be edited and put
 * back by retoc(). */
typedef struct toc_image {
  uint8_t* data;
  size_t size;
  size_t toc_offset;
  msgpack_zone zone;
  msgpack_object root;
} toc_image;

static void toc_load(toc_image* t, const char* name) {
  char* path = seed_path("archive", name);
  t->data = load(path, &t->size);
  free(path);
  t->toc_offset = 0;
  for (int i = 7; i >= 0; i--)
    t->toc_offset = t->toc_offset << 8 | t->data[8 + i];
  msgpack_zone_init(&t->zone, 4096);
  size_t off = 0;
  if (msgpack_unpack((const char*)t->data + t->toc_offset,
                     t->size - t->toc_offset, &off, &t->zone,
                     &t->root) != MSGPACK_UNPACK_SUCCESS)
    die("seed TOC does not decode");
}

static void toc_save(toc_image* t, const char* name) {
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  if (msgpack_pack_object(&pk, t->root) != 0)
    die("msgpack_pack_object");
  uint8_t* out = malloc(t->toc_offset + buf.size);
  if (out == NULL)
    die("out of memory");
  memcpy(out, t->data, t->toc_offset);
  memcpy(out + t->toc_offset, buf.data, buf.size);
  save("archive", name, out, t->toc_offset + buf.size);
  free(out);
  msgpack_sbuffer_destroy(&buf);
  msgpack_zone_destroy(&t->zone);
  free(t->data);
}

static bool key_is(const msgpack_object* k, const char* s) {
  return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
         memcmp(k->via.str.ptr, s, k->via.str.size) == 0;
}

static msgpack_object str_object(const char* s) {
  msgpack_object o;
  o.type = MSGPACK_OBJECT_STR;
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)strlen(s);
  return o;
}

/* Removes `key` from a map, in place. */
static void map_drop(msgpack_object* map, const char* key) {
  msgpack_object_map* m = &map->via.map;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < m->size; i++)
    if (!key_is(&m->ptr[i].key, key))
      m->ptr[kept++] = m->ptr[i];
  m->size = kept;
}

/* Appends key: value to a map, reallocating its pairs in the zone. */
static void map_add(msgpack_zone* z, msgpack_object* map, const char* key,
                    msgpack_object value) {
  msgpack_object_map* m = &map->via.map;
  msgpack_object_kv* kv = msgpack_zone_malloc(z, sizeof(*kv) * (m->size + 1));
  if (kv == NULL)
    die("out of memory");
  if (m->size > 0)
    memcpy(kv, m->ptr, sizeof(*kv) * m->size);
  kv[m->size].key = str_object(key);
  kv[m->size].val = value;
  m->ptr = kv;
  m->size++;
}

static msgpack_object* map_get(msgpack_object* map, const char* key) {
  for (uint32_t i = 0; i < map->via.map.size; i++)
    if (key_is(&map->via.map.ptr[i].key, key))
      return &map->via.map.ptr[i].val;
  return NULL;
}

/* Applies fn to every {type, ordinal, original_size} entry. */
static void for_each_entry(toc_image* t,
                           void (*fn)(msgpack_zone*, msgpack_object*)) {
  msgpack_object* toc = map_get(&t->root, "toc");
  if (toc == NULL)
    die("seed without toc");
  for (uint32_t i = 0; i < toc->via.map.size; i++) {
    msgpack_object* arches = &toc->via.map.ptr[i].val;
    for (uint32_t j = 0; j < arches->via.map.size; j++)
      fn(&t->zone, &arches->via.map.ptr[j].val);
  }
}

static void drop_original_size(msgpack_zone* z, msgpack_object* entry) {
  (void)z;
  map_drop(entry, "original_size");
}

/* A metadata map holding one value of most msgpack types. */
static msgpack_object metadata_object(msgpack_zone* z) {
  msgpack_object* items = msgpack_zone_malloc(z, sizeof(*items) * 6);
  if (items == NULL)
    die("out of memory");
  items[0].type = MSGPACK_OBJECT_NIL;
  items[1].type = MSGPACK_OBJECT_BOOLEAN;
  items[1].via.boolean = true;
  items[2].type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
  items[2].via.i64 = -5;
  items[3].type = MSGPACK_OBJECT_FLOAT64;
  items[3].via.f64 = 1.5;
  items[4].type = MSGPACK_OBJECT_BIN;
  items[4].via.bin.ptr = "\x00\x01\x02";
  items[4].via.bin.size = 3;
  items[5] = str_object("amdhsa.kernels");
  msgpack_object array;
  array.type = MSGPACK_OBJECT_ARRAY;
  array.via.array.ptr = items;
  array.via.array.size = 6;
  msgpack_object map;
  map.type = MSGPACK_OBJECT_MAP;
  map.via.map.ptr = NULL;
  map.via.map.size = 0;
  map_add(z, &map, "notes", array);
  return map;
}

static void add_metadata(msgpack_zone* z, msgpack_object* entry) {
  map_add(z, entry, "metadata", metadata_object(z));
}

static void archive_seeds(void) {
  static const char* const arches[] = {"gfx90a", "gfx942"};
  static const seed_kernel basic[] = {
      {"lib/libbar.so#0", "gfx942", 300},
      {"lib/libfoo.so#0", "gfx90a", 400},
      {"lib/libfoo.so#0", "gfx942", 600},
  };
  write_archive("none-basic.kpack", KPACK_COMPRESSION_NOOP, arches, 2, basic,
                3);
  write_archive("zstd-basic.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches,
                2, basic, 3);

  /* Feature-flag arches, an empty kernel, a declared arch with no kernel. */
  static const char* const features[] = {"gfx942:sramecc+:xnack-",
                                         "gfx90a:xnack-", "gfx1100"};
  static const seed_kernel flagged[] = {
      {"lib/librocblas.so.5#0", "gfx942:sramecc+:xnack-", 500},
      {"lib/librocblas.so.5#0", "gfx90a:xnack-", 0},
      {"lib/librocblas.so.5#1", "gfx90a:xnack-", 200},
  };
  write_archive("zstd-features.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                features, 3, flagged, 3);
  write_archive("none-features.kpack", KPACK_COMPRESSION_NOOP, features, 3,
                flagged, 3);
  write_archive("none-empty.kpack", KPACK_COMPRESSION_NOOP, arches, 2, NULL, 0);
  write_archive("zstd-empty.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches,
                2, NULL, 0);

  /* TOC variants ROCm's writer may produce or a reader must tolerate. */
  toc_image t;
  toc_load(&t, "zstd-basic.kpack");
  for_each_entry(&t, drop_original_size);
  toc_save(&t, "zstd-no-original-size.kpack");

  toc_load(&t, "none-basic.kpack");
  for_each_entry(&t, drop_original_size);
  map_drop(&t.root, "compression_scheme");
  toc_save(&t, "none-implicit-scheme.kpack");

  /* As ROCm writes zstd archives: no frame-size table. */
  toc_load(&t, "zstd-basic.kpack");
  map_drop(&t.root, "zstd_frame_sizes");
  toc_save(&t, "zstd-no-frame-sizes.kpack");

  /* A table that passes the open-time check but is wrong: rotated. */
  toc_load(&t, "zstd-basic.kpack");
  msgpack_object* sizes = map_get(&t.root, "zstd_frame_sizes");
  if (sizes == NULL || sizes->type != MSGPACK_OBJECT_BIN ||
      sizes->via.bin.size < 8)
    die("zstd-basic.kpack has no frame-size table");
  char* rotated = msgpack_zone_malloc(&t.zone, sizes->via.bin.size);
  memcpy(rotated, sizes->via.bin.ptr + 4, sizes->via.bin.size - 4);
  memcpy(rotated + sizes->via.bin.size - 4, sizes->via.bin.ptr, 4);
  sizes->via.bin.ptr = rotated;
  toc_save(&t, "zstd-stale-frame-sizes.kpack");

  toc_load(&t, "zstd-features.kpack");
  for_each_entry(&t, add_metadata);
  map_add(&t.zone, &t.root, "x-future-key", metadata_object(&t.zone));
  toc_save(&t, "zstd-metadata.kpack");
}

/* ---- HIPK metadata ----------------------------------------------------------
 */

static void pack_str(msgpack_packer* pk, const char* s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

static void hipk_seed(const char* name, const char* kernel,
                      const char* const* paths, size_t count, bool extra) {
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, extra ? 3 : 2);
  if (extra) { /* an unknown key first, with a nested value to skip */
    pack_str(&pk, "kpack_version");
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_nil(&pk);
    pack_str(&pk, "x");
  }
  pack_str(&pk, "kernel_name");
  pack_str(&pk, kernel);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, count);
  for (size_t i = 0; i < count; i++)
    pack_str(&pk, paths[i]);
  save("hipk", name, buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
}

/* The same map with the widest encodings: map16, str16, array16. */
static void hipk_wide_seed(void) {
  uint8_t out[256];
  size_t n = 0;
  const char* strs[] = {"kernel_name", KF_KERNEL_NAME, "kpack_search_paths",
                        KF_ARCHIVE_PATTERN};
  out[n++] = 0xde;
  out[n++] = 0;
  out[n++] = 2;
  for (int i = 0; i < 4; i++) {
    size_t len = strlen(strs[i]);
    if (i == 3) {
      out[n++] = 0xdc;
      out[n++] = 0;
      out[n++] = 1;
    }
    out[n++] = 0xda;
    out[n++] = (uint8_t)(len >> 8);
    out[n++] = (uint8_t)len;
    memcpy(out + n, strs[i], len);
    n += len;
  }
  save("hipk", "wide-encodings.msgpack", out, n);
}

static void hipk_seeds(void) {
  const char* pattern[] = {KF_ARCHIVE_PATTERN};
  hipk_seed("basic.msgpack", KF_KERNEL_NAME, pattern, 1, false);
  hipk_seed("extra-key.msgpack", KF_KERNEL_NAME, pattern, 1, true);
  hipk_seed("other-kernel.msgpack", "lib/libother.so", pattern, 1, false);
  hipk_seed("unknown-kernel.msgpack", "lib/libnone.so", pattern, 1, false);
  const char* several[] = {"../.kpack/missing_@GFXARCH@.kpack",
                           "../.kpack/foo_gfx90a.kpack", KF_ARCHIVE_PATTERN};
  hipk_seed("several-paths.msgpack", KF_KERNEL_NAME, several, 3, false);
  const char* messy[] = {"./../lib/..//.kpack/./foo_@GFXARCH@.kpack"};
  hipk_seed("unnormalised-path.msgpack", KF_KERNEL_NAME, messy, 1, false);
  const char* absent[] = {"/nonexistent/.kpack/foo_@GFXARCH@.kpack", ""};
  hipk_seed("absent-paths.msgpack", KF_KERNEL_NAME, absent, 2, false);
  const char* fixed[] = {"../.kpack/foo_gfx942.kpack"};
  hipk_seed("fixed-arch-path.msgpack", KF_KERNEL_NAME, fixed, 1, false);
  hipk_wide_seed();
}

/* ---- offload bundles and ELF images
 * ------------------------------------------
 */

typedef struct bytes {
  uint8_t* data;
  size_t size, cap;
} bytes;

static void put(bytes* b, const void* data, size_t size) {
  if (b->size + size > b->cap) {
    b->cap = (b->size + size) * 2;
    b->data = realloc(b->data, b->cap);
    if (b->data == NULL)
      die("out of memory");
  }
  if (size > 0)
    memcpy(b->data + b->size, data, size);
  b->size += size;
}

static void put_le(bytes* b, uint64_t v, unsigned n) {
  uint8_t le[8];
  for (unsigned i = 0; i < n; i++)
    le[i] = (uint8_t)(v >> (8 * i));
  put(b, le, n);
}

static void pad_to(bytes* b, size_t align) {
  static const uint8_t zeros[64];
  while (b->size % align != 0)
    put(b, zeros, 1);
}

static void set_le(bytes* b, size_t at, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    b->data[at + i] = (uint8_t)(v >> (8 * i));
}

/* A plain bundle as clang writes it: header, entry table, aligned code. */
static bytes plain_bundle(unsigned seed) {
  static const char* const ids[] = {
      "host-x86_64-unknown-linux-gnu-",
      "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
      "hipv4-amdgcn-amd-amdhsa--gfx942",
  };
  static const size_t sizes[] = {0, 240, 180};
  bytes b = {0};
  put(&b, "__CLANG_OFFLOAD_BUNDLE__", 24);
  put_le(&b, 3, 8);
  size_t fields[3];
  for (int i = 0; i < 3; i++) {
    fields[i] = b.size;
    put_le(&b, 0, 8); /* offset, patched below */
    put_le(&b, sizes[i], 8);
    put_le(&b, strlen(ids[i]), 8);
    put(&b, ids[i], strlen(ids[i]));
  }
  for (int i = 0; i < 3; i++) {
    pad_to(&b, 16);
    set_le(&b, fields[i], b.size, 8);
    uint8_t* code = kernel_bytes(sizes[i], seed + (unsigned)i);
    put(&b, code, sizes[i]);
    free(code);
  }
  return b;
}

static bytes ccob(const bytes* plain, unsigned version, unsigned method) {
  size_t cap = compressBound(plain->size) + ZSTD_compressBound(plain->size);
  uint8_t* z = malloc(cap);
  size_t zsize;
  if (z == NULL)
    die("out of memory");
  if (method == 1) {
    zsize = ZSTD_compress(z, cap, plain->data, plain->size, 3);
    if (ZSTD_isError(zsize))
      die("ZSTD_compress");
  } else {
    uLongf n = cap;
    if (compress2(z, &n, plain->data, plain->size, 6) != Z_OK)
      die("compress2");
    zsize = n;
  }
  size_t header = version == 1 ? 20 : version == 2 ? 24 : 32;
  bytes b = {0};
  put(&b, "CCOB", 4);
  put_le(&b, version, 2);
  put_le(&b, method, 2);
  if (version == 1) {
    put_le(&b, plain->size, 4);
  } else if (version == 2) {
    put_le(&b, header + zsize, 4);
    put_le(&b, plain->size, 4);
  } else {
    put_le(&b, header + zsize, 8);
    put_le(&b, plain->size, 8);
  }
  put_le(&b, 0x0123456789abcdefull, 8); /* hash: not checked by readers */
  put(&b, z, zsize);
  free(z);
  return b;
}

/* How host_elf() points wrappers at bundles: addresses written in place,
 * or left 0 for a RELATIVE or an ABS64 (symbol + addend) relocation. */
typedef enum { WRAP_DIRECT, WRAP_RELATIVE, WRAP_ABS64 } wrap_mode;

typedef struct elf_options {
  uint16_t type;    /* 3 ET_DYN or 1 ET_REL */
  uint16_t machine; /* 62 x86-64 or 183 AArch64 */
  const size_t* starts;
  size_t wrapper_count; /* 0: no .hipFatBinSegment */
  wrap_mode mode;
} elf_options;

static void put_section(bytes* e, uint32_t name, uint32_t type, uint64_t flags,
                        uint64_t addr, uint64_t offset, uint64_t size,
                        uint32_t link, uint32_t info, uint64_t align,
                        uint64_t entsize) {
  put_le(e, name, 4);
  put_le(e, type, 4);
  put_le(e, flags, 8);
  put_le(e, addr, 8);
  put_le(e, offset, 8);
  put_le(e, size, 8);
  put_le(e, link, 4);
  put_le(e, info, 4);
  put_le(e, align, 8);
  put_le(e, entsize, 8);
}

/* A 64-bit little-endian host object holding `fatbin` as .hip_fatbin and
 * one HIPF wrapper per bundle start in .hipFatBinSegment. Sections: null,
 * .hip_fatbin, [.hipFatBinSegment, [.rela.dyn, [.symtab]]], .shstrtab. */
static bytes host_elf(const bytes* fatbin, const elf_options* o) {
  static const char shstrtab[] =
      "\0.hip_fatbin\0.hipFatBinSegment\0.shstrtab\0.rela.dyn\0.symtab";
  enum {
    N_FATBIN = 1,
    N_SEGMENT = 13,
    N_SHSTRTAB = 31,
    N_RELA = 41,
    N_SYMTAB = 51
  };
  const bool rel = o->type == 1;
  const uint64_t fatbin_addr = rel ? 0 : 0x10000;
  const uint64_t segment_addr = rel ? 0 : 0x20000;
  const bool has_seg = o->wrapper_count > 0;
  const bool has_rela = has_seg && o->mode != WRAP_DIRECT;
  const bool has_sym = has_rela && o->mode == WRAP_ABS64;
  const uint32_t seg_index = 2, sym_index = 4;
  const uint32_t shnum = 2 + has_seg + has_rela + has_sym + 1;
  const uint32_t reloc_type = o->mode == WRAP_RELATIVE
                                  ? (o->machine == 183 ? 1027 : 8)
                                  : (o->machine == 183 ? 257 : 1);

  bytes e = {0};
  uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  put(&e, ident, 16);
  put_le(&e, o->type, 2);
  put_le(&e, o->machine, 2);
  put_le(&e, 1, 4);
  put_le(&e, 0, 8); /* entry */
  put_le(&e, 0, 8); /* phoff */
  size_t shoff_at = e.size;
  put_le(&e, 0, 8); /* shoff, patched */
  put_le(&e, 0, 4); /* flags */
  put_le(&e, 64, 2);
  put_le(&e, 56, 2);
  put_le(&e, 0, 2); /* phnum */
  put_le(&e, 64, 2);
  put_le(&e, shnum, 2);
  put_le(&e, shnum - 1, 2); /* shstrndx: last */

  pad_to(&e, 16);
  size_t fatbin_off = e.size;
  put(&e, fatbin->data, fatbin->size);
  pad_to(&e, 8);
  size_t segment_off = e.size;
  for (size_t i = 0; i < o->wrapper_count; i++) {
    put_le(&e, 0x48495046, 4); /* "HIPF" */
    put_le(&e, 1, 4);
    put_le(&e, o->mode == WRAP_DIRECT ? fatbin_addr + o->starts[i] : 0, 8);
    put_le(&e, 0, 8);
  }
  size_t rela_off = e.size;
  for (size_t i = 0; has_rela && i < o->wrapper_count; i++) {
    put_le(&e, segment_addr + 24 * i + 8, 8); /* the address field */
    put_le(&e, (uint64_t)(has_sym ? 1 : 0) << 32 | reloc_type, 8);
    put_le(&e, has_sym ? o->starts[i] : fatbin_addr + o->starts[i], 8);
  }
  size_t sym_off = e.size;
  if (has_sym) {
    put_le(&e, 0, 8); /* symbol 0 is all zero */
    put_le(&e, 0, 8);
    put_le(&e, 0, 8);
    put_le(&e, 0, 4);            /* st_name */
    put_le(&e, 0x01, 1);         /* st_info: local object */
    put_le(&e, 0, 1);            /* st_other */
    put_le(&e, 1, 2);            /* st_shndx: .hip_fatbin */
    put_le(&e, fatbin_addr, 8);  /* st_value */
    put_le(&e, fatbin->size, 8); /* st_size */
  }
  size_t strtab_off = e.size;
  put(&e, shstrtab, sizeof(shstrtab));
  pad_to(&e, 8);
  set_le(&e, shoff_at, e.size, 8);

  put_section(&e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  put_section(&e, N_FATBIN, 1, 2, fatbin_addr, fatbin_off, fatbin->size, 0, 0,
              16, 0);
  if (has_seg)
    put_section(&e, N_SEGMENT, 1, 3, segment_addr, segment_off,
                24 * o->wrapper_count, 0, 0, 8, 0);
  if (has_rela)
    put_section(&e, N_RELA, 4, 2, 0, rela_off, 24 * o->wrapper_count,
                has_sym ? sym_index : 0, rel ? seg_index : 0, 8, 24);
  if (has_sym)
    put_section(&e, N_SYMTAB, 2, 0, 0, sym_off, 48, shnum - 1, 1, 8, 24);
  put_section(&e, N_SHSTRTAB, 3, 0, 0, strtab_off, sizeof(shstrtab), 0, 0, 1,
              0);
  return e;
}

static void bundle_seeds(void) {
  bytes plain = plain_bundle(11);
  save("bundle", "plain.bundle", plain.data, plain.size);
  static const struct {
    unsigned version, method;
    const char* name;
  } envelopes[] = {{1, 0, "ccob-v1-zlib.bundle"},
                   {2, 0, "ccob-v2-zlib.bundle"},
                   {2, 1, "ccob-v2-zstd.bundle"},
                   {3, 1, "ccob-v3-zstd.bundle"}};
  for (size_t i = 0; i < sizeof(envelopes) / sizeof(envelopes[0]); i++) {
    bytes c = ccob(&plain, envelopes[i].version, envelopes[i].method);
    save("bundle", envelopes[i].name, c.data, c.size);
    free(c.data);
  }

  /* .hip_fatbin with a plain and a compressed bundle, zero-padded apart. */
  bytes second = plain_bundle(23);
  bytes packed = ccob(&second, 3, 1);
  bytes fatbin = {0};
  size_t starts[2];
  starts[0] = 0;
  put(&fatbin, plain.data, plain.size);
  pad_to(&fatbin, 64);
  starts[1] = fatbin.size;
  put(&fatbin, packed.data, packed.size);
  static const struct {
    const char* name;
    elf_options o;
  } images[] = {
      {"elf-wrappers.so", {3, 62, NULL, 2, WRAP_DIRECT}},
      {"elf-walk.so", {3, 62, NULL, 0, WRAP_DIRECT}},
      {"elf-relative.so", {3, 62, NULL, 2, WRAP_RELATIVE}},
      {"elf-abs64.so", {3, 62, NULL, 2, WRAP_ABS64}},
      {"elf-aarch64-relative.so", {3, 183, NULL, 2, WRAP_RELATIVE}},
      {"elf-object.o", {1, 62, NULL, 2, WRAP_ABS64}},
  };
  for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
    elf_options o = images[i].o;
    o.starts = starts;
    bytes elf = host_elf(&fatbin, &o);
    save("bundle", images[i].name, elf.data, elf.size);
    free(elf.data);
  }
  free(fatbin.data);
  free(packed.data);
  free(second.data);
  free(plain.data);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_corpus OUTPUT_DIR\n");
    return 2;
  }
  out_dir = argv[1];
  if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
    die("cannot create the output directory");
  archive_seeds();
  hipk_seeds();
  bundle_seeds();
  return 0;
}
