/* SPDX-License-Identifier: MIT
 *
 * Writes the fuzzers' seed corpora (make fuzz-corpus): archives from the
 * project's writer and TOC variants re-encoded from them, HIPK metadata for
 * the loader fixture of fuzz_drivers.h, and offload bundles, CCOB envelopes
 * and host ELF images from the fixture builder the test suites use
 * (tests/fixture_fatbin.h), and AMDGPU code objects from theirs
 * (tests/fixture_code_object.h), and rule files of `kpack split --per-arch`
 * (the shipped contrib/split-rules.conf, read from the current directory,
 * and small ones of each pattern feature), and wheels packed by the
 * project's wheel writer. Output is deterministic; every seed is a few KB.
 */
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_code_object.h"
#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "fixture_toc.h"
#include "common/zip.h"
#include "fuzz_drivers.h"
#include "producer/wheel.h"
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
  if (p == NULL)
    die("out of memory");
  fx_fill_pattern(p, size, seed);
  if (size >= 4)
    memcpy(p, "\177ELF", 4);
  return p;
}

/* ---- archives ------------------------------------------------------------ */

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

/* A seed archive with its TOC decoded by msgpack-c (fixture_toc.h), to be
 * edited and put back by toc_save(). */
typedef struct toc_image {
  uint8_t* data;
  size_t size;
  uint64_t toc_offset;
  fx_toc toc;
} toc_image;

static void toc_load(toc_image* t, const char* name) {
  char* path = seed_path("archive", name);
  t->data = load(path, &t->size);
  free(path);
  t->toc_offset = fx_toc_offset(t->data, t->size);
  fx_toc_decode(&t->toc, t->data, t->size, t->toc_offset);
}

static void toc_save(toc_image* t, const char* name) {
  fx_toc_encode(&t->toc, &t->data, &t->size, t->toc_offset);
  save("archive", name, t->data, t->size);
  free(t->data);
}

/* Applies fn to every {type, ordinal, original_size} entry. */
static void for_each_entry(toc_image* t, void (*fn)(fx_toc*, msgpack_object*)) {
  msgpack_object* toc = fx_toc_get(&t->toc.root, "toc", NULL);
  if (toc == NULL)
    die("seed without toc");
  for (uint32_t i = 0; i < toc->via.map.size; i++) {
    msgpack_object* arches = &toc->via.map.ptr[i].val;
    for (uint32_t j = 0; j < arches->via.map.size; j++)
      fn(&t->toc, &arches->via.map.ptr[j].val);
  }
}

static void drop_original_size(fx_toc* t, msgpack_object* entry) {
  (void)t;
  fx_toc_drop(entry, "original_size");
}

/* A metadata map holding one value of most msgpack types. */
static msgpack_object metadata_object(fx_toc* t) {
  msgpack_object* items = msgpack_zone_malloc(&t->zone, sizeof(*items) * 6);
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
  items[5] = fx_toc_str("amdhsa.kernels");
  msgpack_object array;
  array.type = MSGPACK_OBJECT_ARRAY;
  array.via.array.ptr = items;
  array.via.array.size = 6;
  msgpack_object map;
  map.type = MSGPACK_OBJECT_MAP;
  map.via.map.ptr = NULL;
  map.via.map.size = 0;
  fx_toc_add(t, &map, "notes", array);
  return map;
}

static void add_metadata(fx_toc* t, msgpack_object* entry) {
  fx_toc_add(t, entry, "metadata", metadata_object(t));
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
  fx_toc_drop(&t.toc.root, "compression_scheme");
  toc_save(&t, "none-implicit-scheme.kpack");

  /* As ROCm writes zstd archives: no frame-size table. */
  toc_load(&t, "zstd-basic.kpack");
  fx_toc_drop(&t.toc.root, "zstd_frame_sizes");
  toc_save(&t, "zstd-no-frame-sizes.kpack");

  /* A table that passes the open-time check but is wrong: rotated. */
  toc_load(&t, "zstd-basic.kpack");
  msgpack_object* sizes = fx_toc_get(&t.toc.root, "zstd_frame_sizes", NULL);
  if (sizes == NULL || sizes->type != MSGPACK_OBJECT_BIN ||
      sizes->via.bin.size < 8)
    die("zstd-basic.kpack has no frame-size table");
  char* rotated = msgpack_zone_malloc(&t.toc.zone, sizes->via.bin.size);
  memcpy(rotated, sizes->via.bin.ptr + 4, sizes->via.bin.size - 4);
  memcpy(rotated + sizes->via.bin.size - 4, sizes->via.bin.ptr, 4);
  sizes->via.bin.ptr = rotated;
  toc_save(&t, "zstd-stale-frame-sizes.kpack");

  toc_load(&t, "zstd-features.kpack");
  for_each_entry(&t, add_metadata);
  fx_toc_add(&t.toc, &t.toc.root, "x-future-key", metadata_object(&t.toc));
  toc_save(&t, "zstd-metadata.kpack");
}

/* ---- HIPK metadata ------------------------------------------------------- */

static void pack_str(msgpack_packer* pk, const char* s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

static void hipk_seed(const char* name, const char* kernel,
                      const char* const* paths, size_t count, bool extra) {
  if (!extra) {
    fx_buf meta = fx_hipk_metadata(kernel, paths, count);
    save("hipk", name, meta.data, meta.size);
    fx_free(&meta);
    return;
  }
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  /* An unknown key first, with a nested value to skip. */
  msgpack_pack_map(&pk, 3);
  pack_str(&pk, "kpack_version");
  msgpack_pack_array(&pk, 3);
  msgpack_pack_uint8(&pk, 1);
  msgpack_pack_nil(&pk);
  pack_str(&pk, "x");
  pack_str(&pk, "kernel_name");
  pack_str(&pk, kernel);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, count);
  for (size_t i = 0; i < count; i++)
    pack_str(&pk, paths[i]);
  save("hipk", name, buf.data, buf.size);
  msgpack_sbuffer_destroy(&buf);
}

/* The map `kpack split` writes, with kpack_arches after the loader's keys;
 * `valid` false gives a list the reader must refuse (an entry that is no
 * string). */
static void hipk_arches_seed(const char* name, bool valid) {
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, KF_KERNEL_NAME);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, KF_ARCHIVE_PATTERN);
  pack_str(&pk, "kpack_arches");
  msgpack_pack_array(&pk, 3);
  pack_str(&pk, "gfx90a");
  pack_str(&pk, "gfx90a:xnack-");
  if (valid)
    pack_str(&pk, "gfx942");
  else
    msgpack_pack_uint16(&pk, 942);
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
  hipk_arches_seed("arches.msgpack", true);
  hipk_arches_seed("bad-arches.msgpack", false);
}

/* ---- offload bundles and host ELF images --------------------------------- */

static void save_buf(const char* harness, const char* name, fx_buf* b) {
  save(harness, name, b->data, b->size);
  fx_free(b);
}

/* A bundle as clang writes it: an empty host entry, then two device code
 * objects. */
static fx_buf sample_bundle(unsigned seed) {
  uint8_t* a = kernel_bytes(240, seed);
  uint8_t* b = kernel_bytes(180, seed + 1);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", a, 240},
                  {"hipv4-amdgcn-amd-amdhsa--gfx942", b, 180}};
  fx_buf plain = fx_bundle(e, 3);
  free(a);
  free(b);
  return plain;
}

static void bundle_seeds(void) {
  fx_buf plain = sample_bundle(11);
  save("bundle", "plain.bundle", plain.data, plain.size);
  for (unsigned v = 1; v <= 3; v++) {
    for (unsigned method = FX_ZLIB; method <= FX_ZSTD; method++) {
      char name[64];
      snprintf(name, sizeof name, "ccob-v%u-%s.bundle", v,
               method == FX_ZSTD ? "zstd" : "zlib");
      fx_buf c = fx_ccob(v, method, &plain);
      save_buf("bundle", name, &c);
    }
  }

  /* Host binaries: a plain and a compressed bundle 64-byte aligned in
   * .hip_fatbin (small seeds), wrappers pointing at them in reverse order
   * through each way a linker fills the pointer. */
  fx_buf second = sample_bundle(23);
  fx_buf bundles[2] = {plain, fx_ccob(3, FX_ZSTD, &second)};
  fx_free(&second);
  static const struct {
    const char* name;
    uint16_t type, machine;
    fx_ptr how;
    size_t wrappers; /* 0: no .hipFatBinSegment, bundles are walked */
  } images[] = {
      {"elf-wrappers.so", FX_ET_DYN, FX_EM_X86_64, FX_PTR_FILE, 2},
      {"elf-exec", FX_ET_EXEC, FX_EM_X86_64, FX_PTR_FILE, 2},
      {"elf-walk.so", FX_ET_DYN, FX_EM_X86_64, FX_PTR_FILE, 0},
      {"elf-relative.so", FX_ET_DYN, FX_EM_X86_64, FX_PTR_RELATIVE, 2},
      {"elf-abs64.so", FX_ET_DYN, FX_EM_X86_64, FX_PTR_ABS64, 2},
      {"elf-aarch64-relative.so", FX_ET_DYN, FX_EM_AARCH64, FX_PTR_RELATIVE, 2},
      {"elf-aarch64-abs64-section.so", FX_ET_DYN, FX_EM_AARCH64,
       FX_PTR_ABS64_SECTION, 2},
      /* Relocatable objects: not "*.o", which .gitignore drops. */
      {"elf-object-abs64.rel", FX_ET_REL, FX_EM_X86_64, FX_PTR_ABS64, 2},
      {"elf-object-section.rel", FX_ET_REL, FX_EM_X86_64, FX_PTR_ABS64_SECTION,
       2},
  };
  for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
    fx_wrapper w[2] = {{FX_HIPF_MAGIC, 1, 1, images[i].how, 0},
                       {FX_HIPF_MAGIC, 1, 0, images[i].how, 0}};
    fx_elf_opts o = {.type = images[i].type,
                     .machine = images[i].machine,
                     .bundles = bundles,
                     .bundle_count = 2,
                     .bundle_align = 64,
                     .wrappers = w,
                     .wrapper_count = images[i].wrappers};
    fx_buf elf = fx_elf(&o);
    save_buf("bundle", images[i].name, &elf);
  }
  fx_free(&bundles[0]);
  fx_free(&bundles[1]);
}

/* ---- code objects -------------------------------------------------------- */

static void code_object_seeds(void) {
  static const fx_co_kernel kernels[] = {
      {"gemm_f32", 128, 96, 64, 16384, 272, 96, 64, 256, 3, 1, 0},
      {"_Z6reducePfi", 24, 18, 0, 0, 0, 16, 32, 1024, 0, 0,
       KPACK_CO_AGPR_COUNT | KPACK_CO_VGPR_SPILL_COUNT |
           KPACK_CO_SGPR_SPILL_COUNT},
  };
  fx_buf meta =
      fx_co_metadata("amdgcn-amd-amdhsa--gfx90a:xnack-", 5, kernels, 2);
  static const uint8_t build_id[8] = {0xde, 0xad, 0xbe, 0xef};
  fx_co_note one = {NULL, 0, meta.data, meta.size};
  fx_co_note several[] = {{"GNU", 3, build_id, sizeof(build_id)},
                          {"AMDGPU", 33, "x", 1},
                          {NULL, 0, meta.data, meta.size}};
  uint32_t flags =
      fx_co_flags(FX_MACH_GFX90A, KPACK_FEATURE_OFF, KPACK_FEATURE_ANY);
  const struct {
    const char* name;
    fx_co_spec spec;
  } images[] = {
      {"basic.co", {.e_flags = flags, .notes = &one, .note_count = 1}},
      {"several-notes.co",
       {.e_flags = flags, .notes = several, .note_count = 3}},
      {"aligned-8.co",
       {.e_flags = flags, .notes = several, .note_count = 3, .align = 8}},
      {"notes-at-end.co",
       {.e_flags = flags,
        .notes = &one,
        .note_count = 1,
        .notes_at_end = true}},
      {"section-only.co",
       {.e_flags = flags, .notes = &one, .note_count = 1, .no_segment = true}},
      {"segment-only.co",
       {.e_flags = flags, .notes = &one, .note_count = 1, .no_section = true}},
      {"v3.co",
       {.e_flags = 0x13f, .version = 3, .notes = &one, .note_count = 1}},
      {"generic-v6.co",
       {.e_flags = 0x01000251, .version = 6, .notes = &one, .note_count = 1}},
      {"no-note.co", {.e_flags = flags}},
  };
  for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
    fx_buf image = fx_code_object(&images[i].spec);
    save_buf("code_object", images[i].name, &image);
  }
  fx_free(&meta);
}

/* ---- kpack-ified host binaries ------------------------------------------- */

/* HIPK records pointing into .rocm_kpack_ref, in each linked form, plus a
 * few broken ones so the fuzzer starts next to every problem. */
static void host_seeds(void) {
  const char* pattern[] = {KF_ARCHIVE_PATTERN};
  const char* several[] = {"../.kpack/other_@GFXARCH@.kpack",
                           "/opt/rocm/.kpack/foo_gfx942.kpack"};
  fx_buf refs[2] = {fx_hipk_metadata(KF_KERNEL_NAME, pattern, 1),
                    fx_hipk_metadata("lib/libbar.so", several, 2)};
  static const struct {
    const char* name;
    uint16_t type, machine;
    fx_ptr how;
  } forms[] = {
      {"kpackified-relative.so", FX_ET_DYN, FX_EM_X86_64, FX_PTR_RELATIVE},
      {"kpackified-exec", FX_ET_EXEC, FX_EM_X86_64, FX_PTR_FILE},
      {"kpackified-abs64.so", FX_ET_DYN, FX_EM_X86_64, FX_PTR_ABS64},
      {"kpackified-aarch64.so", FX_ET_DYN, FX_EM_AARCH64, FX_PTR_ABS64_SECTION},
      {"kpackified-object.rel", FX_ET_REL, FX_EM_X86_64, FX_PTR_ABS64},
  };
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
    fx_wrapper w[3] = {{FX_HIPK_MAGIC, 1, 0, forms[i].how, 0},
                       {FX_HIPK_MAGIC, 1, 1, forms[i].how, 1},
                       {FX_HIPK_MAGIC, 1, 0, forms[i].how, 2}};
    fx_elf_opts o = {.type = forms[i].type,
                     .machine = forms[i].machine,
                     .no_fatbin = true,
                     .refs = refs,
                     .ref_count = 2,
                     .wrappers = w,
                     .wrapper_count = 3};
    fx_buf elf = fx_elf(&o);
    save_buf("host", forms[i].name, &elf);
  }

  /* Broken: a zero pointer nothing relocates, a pointer outside
   * .rocm_kpack_ref, metadata cut short, a bad magic. */
  fx_elf_layout L;
  fx_wrapper w[2] = {{FX_HIPK_MAGIC, 1, 0, FX_PTR_RELATIVE, 0},
                     {FX_HIPK_MAGIC, 1, 1, FX_PTR_RELATIVE, 1}};
  fx_elf_opts o = {.no_fatbin = true,
                   .refs = refs,
                   .ref_count = 2,
                   .wrappers = w,
                   .wrapper_count = 2,
                   .layout = &L};
  fx_buf elf = fx_elf(&o);
  fx_set_le(&elf, L.rela_offset + 8, 0, 8); /* R_X86_64_NONE */
  save_buf("host", "bad-null-pointer.so", &elf);
  elf = fx_elf(&o);
  fx_set_le(&elf, L.rela_offset + 16, FX_VADDR + L.segment_offset, 8);
  save_buf("host", "bad-outside-kpack-ref.so", &elf);
  elf = fx_elf(&o);
  fx_set_le(&elf, L.shoff + L.refs_index * 64 + 32, L.refs_size - 4, 8);
  save_buf("host", "bad-truncated-metadata.so", &elf);
  elf = fx_elf(&o);
  fx_set_le(&elf, L.segment_offset, 0x46495048, 4);
  save_buf("host", "bad-magic.so", &elf);

  /* A fat binary's HIPF records, for the reader's other kind. */
  uint8_t* code = kernel_bytes(200, 5);
  fx_entry e[] = {{"hipv4-amdgcn-amd-amdhsa--gfx90a", code, 200}};
  fx_buf bundle = fx_bundle(e, 1);
  fx_wrapper f = {FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0};
  fx_elf_opts fat = {.bundles = &bundle,
                     .bundle_count = 1,
                     .bundle_align = 64,
                     .wrappers = &f,
                     .wrapper_count = 1};
  elf = fx_elf(&fat);
  save_buf("host", "fat-hipf.so", &elf);
  fx_free(&bundle);
  free(code);
  fx_free(&refs[0]);
  fx_free(&refs[1]);
}

/* ---- fat host binaries for the transform --------------------------------- */

/* Programs the system compiler links (fixture_program.h), made small
 * (16-byte bundle alignment, one page per segment, no symbols), in each
 * form the transform rewrites: RELATIVE in .rela.dyn, in .relr.dyn, and
 * stored pointers; then the fixture builder's fat ELF, which has no
 * program headers. */
static void transform_seeds(void) {
  static const struct {
    const char* name;
    fx_program_kind kind;
    bool relr;
  } forms[] = {
      {"fat-shared.so", FX_PROGRAM_SHARED, false},
      {"fat-relr.so", FX_PROGRAM_SHARED, true},
      {"fat-pie", FX_PROGRAM_PIE, false},
      {"fat-exec", FX_PROGRAM_EXEC, false},
  };
  fx_buf bundles[2] = {sample_bundle(21), sample_bundle(22)};
  char tmp[] = "/tmp/kpack-corpus.XXXXXX";
  if (mkdtemp(tmp) == NULL)
    die("mkdtemp");
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
    char out[64];
    size_t size;
    snprintf(out, sizeof(out), "%s/program", tmp);
    fx_program_opts o = {.kind = forms[i].kind,
                         .bundles = bundles,
                         .bundle_count = 2,
                         .relr = forms[i].relr,
                         .align_log2 = 4,
                         .flags = "-s -Wl,-z,noseparate-code"};
    if (!fx_build_program(tmp, &o, out))
      die("linking a transform seed");
    void* data = load(out, &size);
    save("transform", forms[i].name, data, size);
    free(data);
  }
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0)
    die(cmd);
  fx_wrapper f = {FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0};
  fx_elf_opts fat = {.bundles = bundles,
                     .bundle_count = 1,
                     .bundle_align = 64,
                     .wrappers = &f,
                     .wrapper_count = 1};
  fx_buf elf = fx_elf(&fat);
  save_buf("transform", "no-program-headers.so", &elf);
  fx_free(&bundles[0]);
  fx_free(&bundles[1]);
}

/* ---- rule files of kpack split --per-arch ------------------------------ */

/* A rules_driver.c input: the rule file, a NUL, then one path a line. */
static void rules_seed(const char* name, const char* rules, size_t rules_size,
                       const char* const* paths, size_t count) {
  size_t size = rules_size + 1;
  for (size_t i = 0; i < count; i++)
    size += strlen(paths[i]) + 1;
  char* seed = malloc(size);
  if (seed == NULL)
    die("out of memory");
  memcpy(seed, rules, rules_size);
  char* p = seed + rules_size;
  *p++ = '\0';
  for (size_t i = 0; i < count; i++) {
    size_t len = strlen(paths[i]);
    memcpy(p, paths[i], len);
    p[len] = '\n';
    p += len + 1;
  }
  save("rules", name, seed, size);
  free(seed);
}

#define RULES_SEED(name, rules, paths)          \
  rules_seed(name, rules, strlen(rules), paths, \
             sizeof(paths) / sizeof(paths[0]))

static void rules_seeds(void) {
  /* The shipped rules and a path of each kind of file they place
   * (docs/split.md, "Rules"): test_fuzz_replay.c checks that every one
   * matches. */
  static const char* const shipped_paths[] = {
      "lib/rocblas/library/TensileLibrary_lazy_gfx90a.dat",
      "lib/rocblas/library/Kernels.so-000-gfx942-xnack-.hsaco",
      "lib/hipblaslt/library/TensileLibrary_HH_Ailk_Bljk_Cijk_gfx1100.co",
      "lib/rocblas/library/TensileLibrary_Type_HH_fallback.dat",
      "lib/hipsparselt/library/gfx950/extop_gfx950.co",
      "lib/aotriton.images/amd-gfx942/flash/attn_fwd/FONLY__^bf16@16.aks2",
      "lib/aotriton/kernels/gfx90a/flash/attn_fwd.hsaco",
      "share/miopen/db/gfx90a68.kdb",
      "share/miopen/db/gfx1030_36.HIP.fdb.txt",
      "share/miopen/db/gfx942130.model",
      "share/miopen/db/gfx908_120.db.txt",
      "lib/libMIOpenCK_convfwd_gfx942.so.1",
      "lib/MIOpenCK_gfx90a.so",
      "lib/libdevice_conv_operations_gfx90a_xnackp.a",
      "lib/libdevice_conv_operations_gfx1100.a",
      "share/hipkernelprovider/engines/arch_content/conv/gfx942/k.bin",
      "share/hipkernelprovider/engines/test_arch_content/gemm/x/gfx1201/k",
      "share/rocjitsu/translations/gfx942/v1/0a1b.obj",
  };
  size_t shipped_size;
  char* shipped = load("contrib/split-rules.conf", &shipped_size);
  rules_seed("shipped.rules", shipped, shipped_size, shipped_paths,
             sizeof(shipped_paths) / sizeof(shipped_paths[0]));
  free(shipped);

  /* Every pattern feature and each KIND; "**" + "/" also matching no
   * folder, the empty alternative of a group, a comment after a rule. */
  static const char* const feature_paths[] = {
      "opt/keep/x_gfx90a_fallback.dat",
      "data/ab/fixed.bin",
      "data/ab/fixed.",
      "x/kernels/gfx942/y/z.co",
      "kernels/gfx9-generic/k",
      "lib/libfoo_gfx1030_bar.co",
      "deep/er/x/y",
      "nothing/here",
  };
  RULES_SEED("features.rules",
             "# each feature\n"
             "\n"
             "generic **/keep/*_fallback.dat\n"
             "gfx90a\tdata/?\?/fixed.{bin,dat,}   # a comment\n"
             "arch    **/kernels/<arch>/**\n"
             "  arch lib/*<arch>*.co\n"
             "gfx1100 **/x/**\n",
             feature_paths);

  /* The first rule that matches decides, generic or not. */
  static const char* const order_paths[] = {
      "lib/x_gfx90a_fallback.dat",
      "lib/x_gfx90a.dat",
      "lib/gfx942/y.dat",
  };
  RULES_SEED("first-match.rules",
             "generic **/*_fallback.dat\n"
             "arch **/*<arch>*.dat\n"
             "gfx1100 **/*.dat\n",
             order_paths);

  /* Refused files: the rules before the bad line are kept (and match
   * the paths), each of the loader's errors once. */
  static const char* const refused_paths[] = {"a/z"};
  static const struct {
    const char* name;
    const char* text;
  } refused[] = {
      {"refused-group.rules", "gfx90a a/*\narch b/{x,y\n"},
      {"refused-processor.rules", "gfx90a a/*\ngfx9999 b/*\n"},
      {"refused-no-arch.rules", "gfx90a a/*\narch b/*\n"},
      {"refused-two-arches.rules", "gfx90a a/*\narch <arch>/<arch>\n"},
      {"refused-extra-text.rules", "gfx90a a/*\ngeneric b/* c\n"},
      {"refused-absolute.rules", "gfx90a a/*\ngeneric /b\n"},
      {"refused-wildcard-in-group.rules", "gfx90a a/*\ngeneric {*,b}\n"},
  };
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
    RULES_SEED(refused[i].name, refused[i].text, refused_paths);
}

/* ---- wheels (wheel_driver.c) --------------------------------------------- */

static void put_file(const char* root, const char* rel, const char* text) {
  char* path;
  if (asprintf(&path, "%s/%s", root, rel) < 0)
    die("out of memory");
  if (mkdir(root, 0755) != 0 && errno != EEXIST)
    die(root);
  for (char* slash = strchr(path + strlen(root) + 1, '/'); slash != NULL;
       slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      die(path);
    *slash = '/';
  }
  FILE* f = fopen(path, "wb");
  if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
    die(path);
  free(path);
}

/* Packs `tree` as the driver's fz 1.0 and saves the wheel as seed `name`. */
static void wheel_seed(const char* name, const char* tree, const char* tmp,
                       int level, const char* const* extra, size_t extra_n) {
  kp_wheel_pack_options o = {.project = "fz",
                             .version = "1.0",
                             .tags = "py3-none-any",
                             .extra_metadata = extra,
                             .extra_metadata_count = extra_n,
                             .root_is_purelib = true,
                             .level = level};
  char* path;
  if (kp_wheel_pack(tree, tmp, &o, &path) != KPACK_SUCCESS)
    die("packing a wheel seed");
  size_t size;
  void* data = load(path, &size);
  save("wheel", name, data, size);
  unlink(path);
  free(data);
  free(path);
}

static void wheel_seeds(void) {
  char tmpl[] = "/tmp/kpack-corpus-wheel.XXXXXX";
  if (mkdtemp(tmpl) == NULL)
    die("a temporary directory");
  char *plain, *full;
  if (asprintf(&plain, "%s/plain", tmpl) < 0 ||
      asprintf(&full, "%s/full", tmpl) < 0)
    die("out of memory");
  put_file(plain, "fz/__init__.py", "VALUE = 1\n");
  put_file(plain, "fz/data/table.txt", "a,b,c\n\"quoted, field\"\n");
  wheel_seed("stored.whl", plain, tmpl, 0, NULL, 0);
  static const char* const extra[] = {
      "Provides-Extra: device-gfx90a",
      "Requires-Dist: fz-device-gfx90a==1.0; extra == \"device-gfx90a\""};
  wheel_seed("deflated-extras.whl", plain, tmpl, 6, extra, 2);
  /* A wheel's own .dist-info (carried over) and .data directory. */
  put_file(full, "fz/__init__.py", "VALUE = 2\n");
  put_file(full, "fz-0.9.dist-info/METADATA",
           "Metadata-Version: 2.1\nName: fz\nVersion: 0.9\n"
           "License: MIT\n  continued\nRequires-Dist: numpy\n\n"
           "A description.\n");
  put_file(full, "fz-0.9.dist-info/entry_points.txt",
           "[console_scripts]\nfz = fz:main\n");
  put_file(full, "fz-0.9.dist-info/RECORD", "stale,,\n");
  put_file(full, "fz-0.9.data/scripts/fz-tool", "#!/bin/sh\n");
  wheel_seed("dist-info-and-data.whl", full, tmpl, 6, NULL, 0);
  /* A zip with no entry at all. */
  char* empty;
  if (asprintf(&empty, "%s/empty.zip", tmpl) < 0)
    die("out of memory");
  int fd = open(empty, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  kp_zip_writer* w;
  if (fd < 0 || kp_zip_writer_create(fd, &w) != KPACK_SUCCESS ||
      kp_zip_writer_finish(w) != KPACK_SUCCESS)
    die("an empty zip");
  kp_zip_writer_free(w);
  close(fd);
  size_t size;
  void* data = load(empty, &size);
  save("wheel", "empty.zip", data, size);
  free(data);
  char* rm;
  if (asprintf(&rm, "rm -rf '%s'", tmpl) < 0 || system(rm) != 0)
    die("removing the temporary directory");
  free(rm);
  free(empty);
  free(plain);
  free(full);
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
  code_object_seeds();
  host_seeds();
  transform_seeds();
  rules_seeds();
  wheel_seeds();
  return 0;
}
