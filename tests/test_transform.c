/* SPDX-License-Identifier: MIT
 *
 * The host-ELF transform (kpack_transform.h) on real programs: a shared
 * object, a PIE and a non-PIE executable linked by the system compiler
 * (fixture_program.h), with .rela.dyn, .relr.dyn and --emit-relocs. After
 * the transform each still loads and its constructor's relocated pointer
 * reaches the HIPK map; strip and objcopy keep it so; readelf and elflint
 * find nothing new; the loader finds every original code object through the
 * metadata. Then librocrand, and bad input refused with a message and the
 * input untouched.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "rocm_kpack/kpack_bundle.h"
#include "rocm_kpack/kpack_host.h"
#include "rocm_kpack/kpack_transform.h"
#include "rocm_kpack/kpack_writer.h"
#include "support.h"

#define BUNDLES 3
#define PATTERN "../.kpack/fx_@GFXARCH@.kpack"

static const char* const arches[] = {"gfx906", "gfx90a"};

/* Bundle b: a host entry and one code object per arch, distinct bytes. */
static fx_buf make_bundle(size_t b) {
  uint8_t data[2][3000];
  fx_entry e[3] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  for (size_t a = 0; a < 2; a++) {
    fx_fill_pattern(data[a], sizeof(data[a]) - 100 * b, (uint32_t)(b * 7 + a));
    e[a + 1] = (fx_entry){a == 0 ? "hipv4-amdgcn-amd-amdhsa--gfx906"
                                 : "hipv4-amdgcn-amd-amdhsa--gfx90a",
                          data[a], sizeof(data[a]) - 100 * b};
  }
  return fx_bundle(e, 3);
}

typedef struct program {
  char* dir;  /* the tree: lib/ or bin/ holds the program, .kpack/ */
  char* in;   /* the linked program */
  char* out;  /* its transformed form */
  char* name; /* kernel_name: the path relative to dir */
  fx_program_kind kind;
  fx_buf bundles[BUNDLES];
} program;

static bool build(program* p, fx_program_kind kind, bool relr,
                  bool emit_relocs) {
  memset(p, 0, sizeof(*p));
  p->kind = kind;
  p->dir = kt_tmpdir();
  for (size_t b = 0; b < BUNDLES; b++)
    p->bundles[b] = make_bundle(b);
  const char* rel = kind == FX_PROGRAM_SHARED ? "lib/libfx.so" : "bin/fx";
  char* sub = kt_path(p->dir, kind == FX_PROGRAM_SHARED ? "lib" : "bin");
  assert_int_equal(mkdir(sub, 0755), 0);
  free(sub);
  p->name = strdup(rel);
  p->in = kt_path(p->dir, "input");
  p->out = kt_path(p->dir, rel);
  fx_program_opts o = {.kind = kind,
                       .bundles = p->bundles,
                       .bundle_count = BUNDLES,
                       .relr = relr,
                       .emit_relocs = emit_relocs};
  return fx_build_program(p->dir, &o, p->in);
}

static void release(program* p) {
  kt_rmtree(p->dir);
  free(p->dir);
  free(p->in);
  free(p->out);
  free(p->name);
  for (size_t b = 0; b < BUNDLES; b++)
    fx_free(&p->bundles[b]);
}

static kpack_error_t transform(const char* in, const char* out,
                               const char* name,
                               kpack_transform_result_t* result,
                               kpack_transform_message_t* msg) {
  const char* paths[] = {PATTERN};
  kpack_transform_options_t o = {
      .kernel_name = name, .search_paths = paths, .search_path_count = 1};
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  assert_true(fd >= 0);
  kpack_error_t err = kpack_transform_write(in, fd, &o, result, msg);
  close(fd);
  return err;
}

/* The code object of `arch` in bundle b. */
static void bundle_entry(const fx_buf* bundle, const char* arch, void** data,
                         size_t* size) {
  kpack_bundle_t* b;
  kpack_bundle_info_t info;
  assert_int_equal(kpack_bundle_parse(bundle->data, bundle->size, &b),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_bundle_get_info(b, &info), KPACK_SUCCESS);
  *data = NULL;
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    assert_int_equal(kpack_bundle_get_entry(b, i, &e), KPACK_SUCCESS);
    if (e.arch != NULL && strcmp(e.arch, arch) == 0) {
      *size = (size_t)e.size;
      *data = malloc(*size ? *size : 1);
      assert_int_equal(kpack_bundle_read_entry(b, i, *data, *size),
                       KPACK_SUCCESS);
    }
  }
  kpack_bundle_free(b);
  assert_non_null(*data);
}

/* The archives the metadata points at: .kpack/fx_<arch>.kpack with kernel
 * NAME#i = record i's bundle (records point at bundles in reverse). */
static void write_archives(const program* p) {
  char* kdir = kt_path(p->dir, ".kpack");
  mkdir(kdir, 0755);
  for (size_t a = 0; a < 2; a++) {
    char file[64], key[256];
    snprintf(file, sizeof(file), "fx_%s.kpack", arches[a]);
    char* path = kt_path(kdir, file);
    kpack_writer_options_t wo = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                                 .group_name = "fx",
                                 .gfx_arch_family = "gfx9",
                                 .gfx_arches = &arches[a],
                                 .gfx_arch_count = 1};
    kpack_writer_t* w;
    assert_int_equal(kpack_writer_create(path, &wo, &w), KPACK_SUCCESS);
    for (size_t i = 0; i < BUNDLES; i++) {
      void* data;
      size_t size;
      bundle_entry(&p->bundles[BUNDLES - 1 - i], arches[a], &data, &size);
      snprintf(key, sizeof(key), "%s#%zu", p->name, i);
      assert_int_equal(kpack_writer_add_kernel(w, key, arches[a], data, size),
                       KPACK_SUCCESS);
      free(data);
    }
    assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
    free(path);
  }
  free(kdir);
}

/* Checks a report from the program's constructor: every record HIPK with
 * its index, its pointer at the metadata naming the program, and the
 * loader finds, through those very bytes, each original code object. */
static void check_report(const program* p, const char* binary,
                         const char* report) {
  kpack_cache_t cache;
  const char* line = report;
  size_t records = 0;
  assert_int_equal(kpack_cache_create(&cache), KPACK_SUCCESS);
  for (;;) {
    unsigned magic, version;
    unsigned long long reserved;
    unsigned char bytes[256];
    size_t n;
    line = fx_parse_report(line, &magic, &version, &reserved, bytes,
                           sizeof(bytes), &n);
    if (line == NULL)
      break;
    assert_int_equal(magic, KPACK_HOST_HIPK_MAGIC);
    assert_int_equal(version, 1);
    assert_int_equal(reserved, records);
    const char* paths[] = {PATTERN};
    fx_buf want = fx_hipk_metadata(p->name, paths, 1);
    assert_true(n >= want.size);
    assert_memory_equal(bytes, want.data, want.size);
    fx_free(&want);
    for (size_t a = 0; a < 2; a++) {
      void *got, *orig;
      size_t got_size, orig_size;
      assert_int_equal(
          kpack_load_code_object(cache, bytes, binary, (uint32_t)reserved,
                                 &arches[a], 1, &got, &got_size),
          KPACK_SUCCESS);
      bundle_entry(&p->bundles[BUNDLES - 1 - records], arches[a], &orig,
                   &orig_size);
      assert_int_equal(got_size, orig_size);
      assert_memory_equal(got, orig, orig_size);
      kpack_free_code_object(got);
      free(orig);
    }
    records++;
  }
  assert_int_equal(records, BUNDLES);
  kpack_cache_destroy(cache);
}

/* Runs the program (or dlopens the library) and checks its report. */
static void check_loads(const program* p, const char* binary) {
  if (p->kind == FX_PROGRAM_SHARED) {
    void* h = dlopen(binary, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    const char* (*report)(void) =
        (const char* (*)(void))dlsym(h, "fx_program_report");
    assert_non_null(report);
    check_report(p, binary, report());
    dlclose(h);
  } else {
    char* out = NULL;
    char* argv[] = {(char*)binary, NULL};
    assert_int_equal(kt_run(argv, 30, &out, NULL), 0);
    check_report(p, binary, out);
    free(out);
  }
}

static bool have_elflint(void) {
  return access("/usr/bin/eu-elflint", X_OK) == 0;
}

static void run_tool(const char* tool, const char* opt, const char* in,
                     const char* out) {
  char *o = NULL, *e = NULL;
  char* argv[] = {(char*)tool, (char*)opt, (char*)in, "-o", (char*)out, NULL};
  if (strcmp(tool, "objcopy") == 0) {
    argv[3] = (char*)out;
    argv[4] = NULL;
  }
  int status = kt_run(argv, 60, &o, &e);
  if (status != 0)
    fail_msg("%s %s %s: %s", tool, opt, in, e);
  free(o);
  free(e);
}

static void check_phdr_address(const char* path) {
  size_t size;
  uint8_t* elf = kt_read_file(path, &size);
  uint64_t phoff = fx_load_le(elf + 32, 8), n = fx_load_le(elf + 56, 2),
           base = 0, phdr = 0;
  bool have_base = false;
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t* ph = elf + phoff + i * 56;
    if (fx_load_le(ph, 4) == 1 && !have_base) {
      base = fx_load_le(ph + 16, 8) - fx_load_le(ph + 8, 8);
      have_base = true;
    }
    if (fx_load_le(ph, 4) == 6) { /* PT_PHDR */
      assert_int_equal(fx_load_le(ph + 8, 8), phoff);
      phdr = fx_load_le(ph + 16, 8);
    }
  }
  assert_true(have_base);
  assert_int_not_equal(phdr, 0);
  assert_int_equal(base + phoff, phdr);
  free(elf);
}

static void transformed_program(fx_program_kind kind, bool relr,
                                bool emit_relocs) {
  program p;
  kpack_transform_result_t r;
  kpack_transform_message_t msg;
  if (!build(&p, kind, relr, emit_relocs)) {
    release(&p);
    fail_msg("the system compiler could not link the fixture");
  }
  char* before = NULL;
  size_t in_size;
  void* in_bytes = kt_read_file(p.in, &in_size);
  if (have_elflint())
    before = kt_elflint(p.in);
  kpack_transform_kind_t k;
  assert_int_equal(kpack_transform_classify(p.in, &k, &msg), KPACK_SUCCESS);
  assert_int_equal(k, KPACK_TRANSFORM_FAT);
  kpack_error_t err = transform(p.in, p.out, p.name, &r, &msg);
  if (err != KPACK_SUCCESS)
    fail_msg("transform: %s", msg.text);
  assert_string_equal(msg.text, "");
  assert_int_equal(r.wrapper_count, BUNDLES);
  assert_int_equal(r.input_size, in_size);
  struct stat st;
  assert_int_equal(stat(p.out, &st), 0);
  assert_int_equal((uint64_t)st.st_size, r.output_size);
  assert_int_equal(kpack_transform_classify(p.out, &k, &msg), KPACK_SUCCESS);
  assert_int_equal(k, KPACK_TRANSFORM_KPACKIFIED);

  /* An executable's program header table is at the first PT_LOAD's
   * p_vaddr - p_offset plus e_phoff, where kernels that compute AT_PHDR
   * that way look for it; PT_PHDR says the same. */
  if (kind != FX_PROGRAM_SHARED)
    check_phdr_address(p.out);

  /* The input is as it was. */
  size_t again_size;
  void* again = kt_read_file(p.in, &again_size);
  assert_int_equal(again_size, in_size);
  assert_memory_equal(again, in_bytes, in_size);
  free(again);
  free(in_bytes);

  write_archives(&p);
  check_loads(&p, p.out);
  kt_check_readelf(p.out);
  if (before != NULL) {
    char* after = kt_elflint(p.out);
    assert_string_equal(after, before);
    free(after);
    free(before);
  }

  /* The host reader agrees with what ld.so made of the records. */
  kpack_host_t* host;
  kpack_host_info_t info;
  assert_int_equal(kpack_host_open(p.out, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_info(host, &info), KPACK_SUCCESS);
  assert_int_equal(info.kind, KPACK_HOST_KPACKIFIED);
  assert_int_equal(info.wrapper_count, BUNDLES);
  for (size_t i = 0; i < BUNDLES; i++) {
    kpack_host_wrapper_t w;
    assert_int_equal(kpack_host_get_wrapper(host, i, &w), KPACK_SUCCESS);
    assert_string_equal(w.kernel_name, p.name);
    assert_int_equal(w.reserved, i);
  }
  kpack_host_close(host);

  /* strip, strip --strip-debug and objcopy --only-keep-debug work, and the
   * stripped programs still load and find their metadata. */
  static const char* const forms[][2] = {{"strip", "--strip-all"},
                                         {"strip", "--strip-debug"}};
  for (size_t f = 0; f < 2; f++) {
    char* stripped = kt_path(p.dir, "lib/stripped");
    if (kind != FX_PROGRAM_SHARED) {
      free(stripped);
      stripped = kt_path(p.dir, "bin/stripped");
    }
    run_tool(forms[f][0], forms[f][1], p.out, stripped);
    check_loads(&p, stripped);
    kt_check_readelf(stripped);
    free(stripped);
  }
  char* debug = kt_path(p.dir, "debug");
  run_tool("objcopy", "--only-keep-debug", p.out, debug);
  assert_int_equal(kpack_transform_classify(debug, &k, &msg), KPACK_SUCCESS);
  assert_int_not_equal(k, KPACK_TRANSFORM_FAT);
  free(debug);
  release(&p);
}

static void test_shared_object_loads_and_finds_its_code_objects(void** s) {
  (void)s;
  transformed_program(FX_PROGRAM_SHARED, false, false);
}

static void test_pie_runs_and_finds_its_code_objects(void** s) {
  (void)s;
  transformed_program(FX_PROGRAM_PIE, false, false);
}

static void test_executable_runs_and_finds_its_code_objects(void** s) {
  (void)s;
  transformed_program(FX_PROGRAM_EXEC, false, false);
}

static void test_packed_relr_relocations_are_updated(void** s) {
  (void)s;
  transformed_program(FX_PROGRAM_PIE, true, false);
  transformed_program(FX_PROGRAM_SHARED, true, false);
}

static void test_emit_relocs_shared_object_is_transformed(void** s) {
  (void)s;
  transformed_program(FX_PROGRAM_SHARED, false, true);
  transformed_program(FX_PROGRAM_EXEC, false, true);
}

/* ---- librocrand ---------------------------------------------------------- */

static void test_librocrand_shrinks_and_round_trips(void** s) {
  (void)s;
  char* lib = kt_librocrand();
  char* dir = kt_tmpdir();
  char* libdir = kt_path(dir, "lib");
  char* kdir = kt_path(dir, ".kpack");
  assert_int_equal(mkdir(libdir, 0755), 0);
  assert_int_equal(mkdir(kdir, 0755), 0);
  char* out = kt_path(libdir, "librocrand.so.1.1");
  kpack_transform_result_t r;
  kpack_transform_message_t msg;
  const char* name = "lib/librocrand.so.1.1";
  if (transform(lib, out, name, &r, &msg) != KPACK_SUCCESS)
    fail_msg("transform: %s", msg.text);
  assert_true(r.input_size - r.output_size >= r.fatbin_size / 100 * 95);
  kt_check_readelf(out);

  /* Every code object of every record, written per arch, comes back
   * through the metadata read from the transformed file. */
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t fi;
  kpack_host_t* host;
  kpack_cache_t cache;
  assert_int_equal(kpack_fatbin_open(lib, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &fi), KPACK_SUCCESS);
  assert_int_equal(kpack_host_open(out, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_cache_create(&cache), KPACK_SUCCESS);
  size_t checked = 0;
  for (size_t i = 0; i < fi.bundle_count; i++) {
    kpack_bundle_t* b;
    kpack_bundle_info_t bi;
    kpack_host_wrapper_t w;
    assert_int_equal(kpack_host_get_wrapper(host, i, &w), KPACK_SUCCESS);
    assert_int_equal(w.reserved, i);
    fx_buf meta =
        fx_hipk_metadata(w.kernel_name, w.search_paths, w.search_path_count);
    assert_int_equal(kpack_fatbin_get_bundle(fb, i, &b), KPACK_SUCCESS);
    assert_int_equal(kpack_bundle_get_info(b, &bi), KPACK_SUCCESS);
    for (size_t e = 0; e < bi.entry_count; e++) {
      kpack_bundle_entry_t ent;
      char file[256], key[256];
      assert_int_equal(kpack_bundle_get_entry(b, e, &ent), KPACK_SUCCESS);
      if (ent.arch == NULL)
        continue;
      snprintf(file, sizeof(file), "rand_%s.kpack", ent.arch);
      char* path = kt_path(kdir, file);
      snprintf(key, sizeof(key), "%s#%zu", name, i);
      kt_kernel k = {key, ent.arch, ent.data, (size_t)ent.size};
      kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, &ent.arch, 1,
                       &k, 1);
      free(path);
      const char* paths[] = {"../.kpack/rand_@GFXARCH@.kpack"};
      fx_free(&meta);
      meta = fx_hipk_metadata(name, paths, 1);
      void* got;
      size_t got_size;
      assert_int_equal(
          kpack_load_code_object(cache, meta.data, out, (uint32_t)w.reserved,
                                 &ent.arch, 1, &got, &got_size),
          KPACK_SUCCESS);
      assert_int_equal(got_size, ent.size);
      assert_memory_equal(got, ent.data, got_size);
      kpack_free_code_object(got);
      checked++;
    }
    fx_free(&meta);
    kpack_bundle_free(b);
  }
  assert_true(checked >= 7);
  kpack_cache_destroy(cache);
  kpack_host_close(host);
  kpack_fatbin_close(fb);
  kt_rmtree(dir);
  free(out);
  free(kdir);
  free(libdir);
  free(dir);
  free(lib);
}

/* ---- bad input ----------------------------------------------------------- */

/* Transforms a damaged copy of `p`'s input: refused with `status`, a
 * message holding `what`, and the input unchanged. */
static void refused(const program* p, const void* bytes, size_t size,
                    kpack_error_t status, const char* what) {
  char* bad = kt_path(p->dir, "bad");
  char* out = kt_path(p->dir, "bad.out");
  kpack_transform_result_t r;
  kpack_transform_message_t msg;
  kt_write_file(bad, bytes, size);
  assert_int_equal(transform(bad, out, p->name, &r, &msg), status);
  if (strstr(msg.text, what) == NULL || strstr(msg.text, bad) == NULL)
    fail_msg("message \"%s\" does not name the file and \"%s\"", msg.text,
             what);
  size_t again_size;
  void* again = kt_read_file(bad, &again_size);
  assert_int_equal(again_size, size);
  assert_memory_equal(again, bytes, size);
  free(again);
  free(bad);
  free(out);
}

static void test_bad_input_is_refused_and_left_untouched(void** s) {
  (void)s;
  program so, ex;
  assert_true(build(&so, FX_PROGRAM_SHARED, false, false));
  assert_true(build(&ex, FX_PROGRAM_EXEC, false, false));
  size_t size, ex_size;
  uint8_t* orig = kt_read_file(so.in, &size);
  uint8_t* ex_orig = kt_read_file(ex.in, &ex_size);
  uint8_t* b = malloc(size);

  /* Truncated inside the section header table. */
  uint64_t shoff = fx_load_le(orig + 40, 8);
  refused(&so, orig, (size_t)shoff + 100, KPACK_ERROR_INVALID_FORMAT,
          "extends past end of file");

  /* A .hip_fatbin whose size wraps its offset around: the layout would be
   * computed from sums that wrap, and its records left HIPF. */
  memcpy(b, orig, size);
  fx_store_le(fx_section_header(b, ".hip_fatbin") + 32, ~(uint64_t)0x10b, 8);
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT, "extends past end of file");

  /* A PT_LOAD whose bytes end past the file's. */
  memcpy(b, orig, size);
  uint64_t phoff = fx_load_le(b + 32, 8);
  uint8_t* ph = b + phoff;
  while (fx_load_le(ph, 4) != 1) /* PT_LOAD */
    ph += 56;
  fx_store_le(ph + 32, size + 1, 8); /* p_filesz */
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT, "(PT_LOAD) at 0x0 (");

  /* Unknown machine. */
  memcpy(b, orig, size);
  fx_store_le(b + 18, 0x1234, 2);
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT, "e_machine 4660");

  /* .hipFatBinSegment not whole records. */
  memcpy(b, orig, size);
  fx_store_le(fx_section_header(b, ".hipFatBinSegment") + 32, 40, 8);
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT, "not whole 24-byte");

  /* A pointer with no relocation in a shared object: the RELATIVE that
   * sets record 0 made R_X86_64_NONE, its value stored in place. */
  memcpy(b, orig, size);
  uint8_t* seg = fx_section_header(b, ".hipFatBinSegment");
  uint8_t* rela = fx_section_header(b, ".rela.dyn");
  uint64_t where = fx_load_le(seg + 16, 8) + 8;
  bool found = false;
  for (uint64_t at = 0; at < fx_load_le(rela + 32, 8); at += 24) {
    uint8_t* r = b + fx_load_le(rela + 24, 8) + at;
    if (fx_load_le(r, 8) == where) {
      fx_store_le(b + fx_load_le(seg + 24, 8) + 8, fx_load_le(r + 16, 8), 8);
      fx_store_le(r + 8, 0, 8);
      found = true;
    }
  }
  assert_true(found);
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT,
          "wrapper 0: the pointer at");

  /* A stored pointer outside every section (ET_EXEC). */
  uint8_t* eb = malloc(ex_size);
  memcpy(eb, ex_orig, ex_size);
  seg = fx_section_header(eb, ".hipFatBinSegment");
  fx_store_le(eb + fx_load_le(seg + 24, 8) + 24 + 8, 0x10, 8);
  refused(&ex, eb, ex_size, KPACK_ERROR_INVALID_FORMAT,
          "wrapper 1: the pointer (0x10) is outside .hip_fatbin");

  /* A section name past the name table (the appended name would become
   * its name). */
  memcpy(b, orig, size);
  fx_store_le(fx_section_header(b, ".comment"),
              fx_load_le(fx_section_header(b, ".shstrtab") + 32, 8) + 1, 4);
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT,
          "name lies outside the section name table");

  /* An allocated NOBITS section at an offset far past the file's end:
   * .hip_fatbin's piece, placed past it, made the output that long. */
  memcpy(b, orig, size);
  fx_store_le(fx_section_header(b, ".bss") + 24, (uint64_t)1 << 49, 8);
  refused(&so, b, size, KPACK_ERROR_INVALID_FORMAT,
          "(SHT_NOBITS) lies at offset 0x2000000000000, past the end");

  /* Nothing to do: already transformed. */
  kpack_transform_result_t r;
  kpack_transform_message_t msg;
  assert_int_equal(transform(so.in, so.out, so.name, &r, &msg), KPACK_SUCCESS);
  /* The whole reserved field is the index, whatever it held. */
  memcpy(b, orig, size);
  seg = fx_section_header(b, ".hipFatBinSegment");
  fx_store_le(b + fx_load_le(seg + 24, 8) + 16, 0xffffffff00000000ull, 8);
  char* in2 = kt_path(so.dir, "high");
  char* out2 = kt_path(so.dir, "high.out");
  kt_write_file(in2, b, size);
  assert_int_equal(transform(in2, out2, so.name, &r, &msg), KPACK_SUCCESS);
  kpack_host_t* host;
  kpack_host_wrapper_t hw;
  assert_int_equal(kpack_host_open(out2, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_wrapper(host, 0, &hw), KPACK_SUCCESS);
  assert_int_equal(hw.reserved, 0);
  kpack_host_close(host);
  free(in2);
  free(out2);

  char* twice = kt_path(so.dir, "twice");
  assert_int_equal(transform(so.out, twice, so.name, &r, &msg),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(msg.text, "already kpack-ified"));
  free(twice);

  /* A write to the output that fails is told from a read of the input by
   * its message (kpack split then names the output, whatever the errno). */
  int ro = open(so.in, O_RDONLY);
  assert_true(ro >= 0);
  const char* paths[] = {PATTERN};
  kpack_transform_options_t o = {
      .kernel_name = so.name, .search_paths = paths, .search_path_count = 1};
  kpack_transform_result_t result;
  assert_int_equal(kpack_transform_write(so.in, ro, &o, &result, &msg),
                   KPACK_ERROR_IO_ERROR);
  assert_int_equal(errno, EBADF);
  assert_int_equal(strncmp(msg.text, KPACK_TRANSFORM_WRITE_FAILED,
                           strlen(KPACK_TRANSFORM_WRITE_FAILED)),
                   0);
  close(ro);

  free(eb);
  free(b);
  free(orig);
  free(ex_orig);
  release(&so);
  release(&ex);
}

/* An ELF without program headers (the fixture builder's, like the
 * benchmark's library) gets a table of one PT_LOAD, above its sections,
 * aligned to the machine's page: 4 KiB on x86-64, 64 KiB on AArch64. */
static void test_file_without_program_headers_gets_one_segment(void** s) {
  (void)s;
  static const struct {
    uint16_t machine;
    uint64_t page;
  } machines[] = {{FX_EM_X86_64, 4096}, {FX_EM_AARCH64, 65536}};
  char* dir = kt_tmpdir();
  char* in = kt_path(dir, "in.so");
  char* out = kt_path(dir, "out.so");
  fx_buf bundles[2] = {make_bundle(0), make_bundle(1)};
  for (size_t m = 0; m < 2; m++) {
    fx_wrapper w[2] = {{FX_HIPF_MAGIC, 1, 1, FX_PTR_RELATIVE, 0},
                       {FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0}};
    fx_elf_opts o = {.machine = machines[m].machine,
                     .bundles = bundles,
                     .bundle_count = 2,
                     .bundle_align = machines[m].page,
                     .wrappers = w,
                     .wrapper_count = 2};
    fx_write_elf(in, &o);
    kpack_transform_result_t r;
    kpack_transform_message_t msg;
    if (transform(in, out, "lib/in.so", &r, &msg) != KPACK_SUCCESS)
      fail_msg("transform: %s", msg.text);
    kpack_host_t* host;
    assert_int_equal(kpack_host_open(out, &host), KPACK_SUCCESS);
    for (size_t i = 0; i < 2; i++) {
      kpack_host_wrapper_t hw;
      assert_int_equal(kpack_host_get_wrapper(host, i, &hw), KPACK_SUCCESS);
      assert_string_equal(hw.kernel_name, "lib/in.so");
      assert_int_equal(hw.reserved, i);
    }
    kpack_host_close(host);
    size_t size;
    uint8_t* elf = kt_read_file(out, &size);
    const uint8_t* ph = elf + fx_load_le(elf + 32, 8);
    assert_int_equal(fx_load_le(elf + 56, 2), 1);
    assert_int_equal(fx_load_le(ph, 4), 1); /* PT_LOAD */
    assert_int_equal(fx_load_le(ph + 48, 8), machines[m].page);
    assert_int_equal(fx_load_le(ph + 8, 8) % machines[m].page,
                     fx_load_le(ph + 16, 8) % machines[m].page);
    free(elf);
    kt_check_readelf(out);
  }
  fx_free(&bundles[0]);
  fx_free(&bundles[1]);
  kt_rmtree(dir);
  free(in);
  free(out);
  free(dir);
}

/* ---- the recorded arches ------------------------------------------------- */

/* The bytes of the metadata map record 0 of the transformed `path` points
 * at, through .rocm_kpack_ref (malloc'ed, *size of them). */
static uint8_t* metadata_of(const char* path, size_t* size) {
  size_t n;
  uint8_t* elf = kt_read_file(path, &n);
  kpack_host_t* host;
  kpack_host_wrapper_t w;
  assert_non_null(elf);
  assert_int_equal(kpack_host_open(path, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_wrapper(host, 0, &w), KPACK_SUCCESS);
  kpack_host_close(host);
  const uint8_t* sh = fx_section_header(elf, ".rocm_kpack_ref");
  assert_non_null(sh);
  uint64_t at = fx_load_le(sh + 24, 8) + w.metadata_offset;
  *size = (size_t)(fx_load_le(sh + 32, 8) - w.metadata_offset);
  assert_true(at <= n && *size <= n - at);
  uint8_t* out = malloc(*size);
  memcpy(out, elf + at, *size);
  free(elf);
  return out;
}

/* Arches given to the transform follow the loader's two keys as a third,
 * kpack_arches, sorted and without duplicates; without arches the map is
 * the two-key one, byte for byte, as before the key existed. */
static void test_arches_are_recorded_after_the_loader_keys(void** s) {
  (void)s;
  static const char* const paths[] = {PATTERN};
  static const char* const given[] = {"gfx90a:xnack-", "gfx1100",
                                      "gfx90a:xnack-", "gfx803"};
  static const char* const sorted[] = {"gfx1100", "gfx803", "gfx90a:xnack-"};
  char* dir = kt_tmpdir();
  char* in = kt_path(dir, "in.so");
  char* out = kt_path(dir, "out.so");
  fx_buf bundle = make_bundle(0);
  fx_wrapper w = {FX_HIPF_MAGIC, 1, 0, FX_PTR_RELATIVE, 0};
  fx_elf_opts eo = {.bundles = &bundle,
                    .bundle_count = 1,
                    .wrappers = &w,
                    .wrapper_count = 1};
  fx_write_elf(in, &eo);
  fx_buf two_keys = fx_hipk_metadata("lib/in.so", paths, 1);
  kpack_transform_result_t r;
  kpack_transform_message_t msg;
  size_t size;

  assert_int_equal(transform(in, out, "lib/in.so", &r, &msg), KPACK_SUCCESS);
  uint8_t* meta = metadata_of(out, &size);
  assert_true(size >= two_keys.size);
  assert_memory_equal(meta, two_keys.data, two_keys.size);
  free(meta);
  kpack_host_t* host;
  const char* const* got;
  size_t count;
  assert_int_equal(kpack_host_open(out, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_arches(host, 0, &got, &count), KPACK_SUCCESS);
  assert_null(got);
  assert_int_equal(count, 0);
  kpack_host_close(host);

  kpack_transform_options_t o = {.kernel_name = "lib/in.so",
                                 .search_paths = paths,
                                 .search_path_count = 1,
                                 .arches = given,
                                 .arch_count = 4};
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  assert_true(fd >= 0);
  assert_int_equal(kpack_transform_write(in, fd, &o, &r, &msg), KPACK_SUCCESS);
  close(fd);
  meta = metadata_of(out, &size);
  fx_buf want = {0};
  fx_put(&want, two_keys.data, two_keys.size);
  want.data[0] = 0x83; /* fixmap, 3 pairs */
  static const uint8_t arches_key[] = {0xac, 'k', 'p', 'a', 'c', 'k', '_',
                                       'a',  'r', 'c', 'h', 'e', 's', 0x93};
  fx_put(&want, arches_key, sizeof(arches_key));
  for (size_t i = 0; i < 3; i++) {
    uint8_t len = (uint8_t)(0xa0 | strlen(sorted[i]));
    fx_put(&want, &len, 1);
    fx_put(&want, sorted[i], strlen(sorted[i]));
  }
  assert_true(size >= want.size);
  assert_memory_equal(meta, want.data, want.size);
  free(meta);
  assert_int_equal(kpack_host_open(out, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_arches(host, 0, &got, &count), KPACK_SUCCESS);
  assert_int_equal(count, 3);
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(got[i], sorted[i]);
  kpack_host_close(host);

  /* An empty arch is refused, the output left for the caller to remove. */
  static const char* const empty[] = {"gfx1100", ""};
  o.arches = empty;
  o.arch_count = 2;
  fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  assert_true(fd >= 0);
  assert_int_equal(kpack_transform_write(in, fd, &o, &r, &msg),
                   KPACK_ERROR_INVALID_ARGUMENT);
  close(fd);
  assert_non_null(strstr(msg.text, "arch 1"));

  fx_free(&want);
  fx_free(&two_keys);
  fx_free(&bundle);
  kt_rmtree(dir);
  free(in);
  free(out);
  free(dir);
}

static void test_classify_names_every_kind(void** s) {
  (void)s;
  char* dir = kt_tmpdir();
  char* text = kt_path(dir, "text");
  kt_write_file(text, "hello", 5);
  kpack_transform_kind_t k;
  kpack_transform_message_t msg;
  assert_int_equal(kpack_transform_classify(text, &k, &msg), KPACK_SUCCESS);
  assert_int_equal(k, KPACK_TRANSFORM_NOT_ELF);
  fx_elf_opts none = {.no_fatbin = true};
  fx_buf elf = fx_elf(&none);
  kt_write_file(text, elf.data, elf.size);
  assert_int_equal(kpack_transform_classify(text, &k, &msg), KPACK_SUCCESS);
  assert_int_equal(k, KPACK_TRANSFORM_NO_DEVICE_CODE);
  fx_free(&elf);
  char* missing = kt_path(dir, "missing");
  assert_int_equal(kpack_transform_classify(missing, &k, &msg),
                   KPACK_ERROR_FILE_NOT_FOUND);
  assert_non_null(strstr(msg.text, missing));
  for (int i = 0; i <= 5; i++)
    assert_non_null(kpack_transform_kind_string((kpack_transform_kind_t)i));
  free(missing);
  free(text);
  kt_rmtree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_object_loads_and_finds_its_code_objects),
      cmocka_unit_test(test_pie_runs_and_finds_its_code_objects),
      cmocka_unit_test(test_executable_runs_and_finds_its_code_objects),
      cmocka_unit_test(test_packed_relr_relocations_are_updated),
      cmocka_unit_test(test_emit_relocs_shared_object_is_transformed),
      cmocka_unit_test(test_librocrand_shrinks_and_round_trips),
      cmocka_unit_test(test_bad_input_is_refused_and_left_untouched),
      cmocka_unit_test(test_file_without_program_headers_gets_one_segment),
      cmocka_unit_test(test_classify_names_every_kind),
      cmocka_unit_test(test_arches_are_recorded_after_the_loader_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
