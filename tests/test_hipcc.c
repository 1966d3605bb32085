/* SPDX-License-Identifier: MIT
 *
 * kpack split over real compiler output. Debian's hipcc (clang-15 with
 * rocm-device-libs) builds the programs of tests/hipcc/ once, every way
 * ROCm software is linked (tests/hipcc/cells.mk; cached by build.sh), and
 * each cell is split and checked against an oracle that shares no code
 * with kpack: llvm-15's clang-offload-bundler unbundles each record's
 * bundle from the original file (found with binutils-level reading of the
 * section table and relocations), and every code object it gives must be
 * what the split's archive serves for that record and arch, and what
 * `kpack create --fatbin` packs. Then: the programs print what they
 * printed, the output keeps the layout contract through strip, eu-strip,
 * objcopy and patchelf (elf_contract.h), `kpack verify --binary` passes,
 * a second split changes nothing, the output is no larger than the input
 * less the device code that left it (4 KiB of headers allowed) and uses
 * no more disk blocks, and identical code objects are stored once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_contract.h"
#include "fixture_fatbin.h"
#include "rocm_kpack/kpack.h"
#include "rocm_kpack/kpack_archive.h"
#include "support.h"

#define BUNDLER "/usr/lib/llvm-15/bin/clang-offload-bundler"
#define PREFIX "cell"
#define MAX_COS 64

static char* cells; /* the build's directory (build.sh) */

static int setup(void** state) {
  kt_kpack_setup(state);
  const char* src = getenv("KPACK_SOURCE_DIR");
  char* script = kt_path(src != NULL ? src : ".", "tests/hipcc/build.sh");
  /* Under the default build directory of the source tree, whatever
   * build runs the suite: the plain, sanitizer and valgrind runs share it. */
  char* cache = kt_path(src != NULL ? src : ".", "build/hipcc");
  char* out = NULL;
  char* err = NULL;
  char* argv[] = {script, cache, NULL};
  /* The first run compiles every cell (a few minutes on two cores). */
  int status = kt_run(argv, 3600, &out, &err);
  if (status != 0)
    fprintf(stderr, "tests/hipcc/build.sh failed:\n%s\n", err);
  free(script);
  free(cache);
  free(err);
  if (status != 0) {
    free(out);
    return -1;
  }
  out[strcspn(out, "\n")] = '\0';
  cells = out;
  return 0;
}

static int teardown(void** state) {
  free(cells);
  cells = NULL;
  return kt_kpack_teardown(state);
}

static char* join(const char* a, const char* b) {
  return kt_path(a, b);
}

static uint64_t ld(const uint8_t* p, size_t n) {
  return fx_load_le(p, n);
}

/* ---- the oracle ---------------------------------------------------------- */

/* One code object of a fat binary: record `record`'s bundle, for `arch`. */
typedef struct code_object {
  const char* binary; /* its install path in the cell */
  unsigned record;
  char arch[96];
  uint8_t* data;
  size_t size;
} code_object;

typedef struct oracle {
  code_object cos[MAX_COS];
  size_t count;
  size_t records;
} oracle;

static void oracle_free(oracle* o) {
  for (size_t i = 0; i < o->count; i++)
    free(o->cos[i].data);
  o->count = 0;
}

/* The address record `i`'s pointer holds at run time: a RELATIVE
 * relocation's addend in .rela.dyn, else the value in the file. */
static uint64_t record_pointer(const uint8_t* e, uint64_t where,
                               uint64_t stored) {
  uint64_t shoff = ld(e + 40, 8), shnum = ld(e + 60, 2);
  for (uint64_t i = 1; i < shnum; i++) {
    const uint8_t* s = e + shoff + i * 64;
    if (ld(s + 4, 4) != 4 /* SHT_RELA */ || (ld(s + 8, 8) & 2) == 0)
      continue;
    uint64_t off = ld(s + 24, 8), size = ld(s + 32, 8);
    for (uint64_t r = 0; r + 24 <= size; r += 24)
      if (ld(e + off + r, 8) == where && ld(e + off + r + 8, 4) == 8)
        return ld(e + off + r + 16, 8);
  }
  return stored;
}

/* The code objects of every record of `binary` (a path in `tree`), by
 * clang-offload-bundler, whose input is each record's bundle cut out of
 * .hip_fatbin. */
static void oracle_of(const char* tree, const char* binary, const char* scratch,
                      oracle* o) {
  char* path = join(tree, binary);
  size_t size;
  uint8_t* e = kt_read_file(path, &size);
  assert_non_null(e);
  const uint8_t* fat = fx_section_header(e, ".hip_fatbin");
  const uint8_t* seg = fx_section_header(e, ".hipFatBinSegment");
  if (fat == NULL || seg == NULL)
    fail_msg("%s has no .hip_fatbin or .hipFatBinSegment", path);
  uint64_t fa = ld(fat + 16, 8), fo = ld(fat + 24, 8), fs = ld(fat + 32, 8);
  uint64_t sa = ld(seg + 16, 8), so = ld(seg + 24, 8);
  o->records = (size_t)(ld(seg + 32, 8) / 24);
  for (size_t i = 0; i < o->records; i++) {
    uint64_t at =
        record_pointer(e, sa + i * 24 + 8, ld(e + so + i * 24 + 8, 8));
    if (at < fa || at - fa >= fs)
      fail_msg("%s: record %zu points at 0x%llx, outside .hip_fatbin", path, i,
               (unsigned long long)at);
    char* bundle = join(scratch, "bundle");
    kt_write_file(bundle, e + fo + (at - fa), (size_t)(fs - (at - fa)));
    char* list = NULL;
    char input[4200];
    snprintf(input, sizeof(input), "--input=%s", bundle);
    char* lv[] = {BUNDLER, "--list", "--type=o", input, NULL};
    if (kt_run(lv, 60, &list, NULL) != 0)
      fail_msg("clang-offload-bundler --list refuses record %zu of %s", i,
               path);
    for (char* line = strtok(list, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
      /* hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-: the arch after the
       * triple and its empty environment. */
      const char* arch = strstr(line, "-amdhsa-");
      if (strncmp(line, "hip", 3) != 0 || arch == NULL)
        continue; /* the host entry */
      arch += strlen("-amdhsa-");
      arch += *arch == '-';
      assert_true(o->count < MAX_COS);
      code_object* c = &o->cos[o->count++];
      char* co = join(scratch, "co");
      char targets[256], output[4200];
      snprintf(targets, sizeof(targets), "--targets=%s", line);
      snprintf(output, sizeof(output), "--output=%s", co);
      char* uv[] = {BUNDLER, "--unbundle", "--type=o", input,
                    targets, output,       NULL};
      if (kt_run(uv, 60, NULL, NULL) != 0)
        fail_msg("clang-offload-bundler cannot unbundle %s of record %zu of %s",
                 line, i, path);
      c->binary = binary;
      c->record = (unsigned)i;
      snprintf(c->arch, sizeof(c->arch), "%s", arch);
      c->data = kt_read_file(co, &c->size);
      assert_non_null(c->data);
      unlink(co);
      free(co);
    }
    free(list);
    unlink(bundle);
    free(bundle);
  }
  free(e);
  free(path);
}

/* The kernel `key` for `arch` of the archive at `path` equals `c`. */
static void assert_serves(const char* path, const char* key,
                          const code_object* c) {
  kpack_archive_t a;
  void* data;
  size_t size;
  if (kpack_open(path, &a) != KPACK_SUCCESS)
    fail_msg("%s does not open", path);
  if (kpack_get_kernel(a, key, c->arch, &data, &size) != KPACK_SUCCESS)
    fail_msg("%s has no %s for %s", path, key, c->arch);
  if (size != c->size || memcmp(data, c->data, size) != 0)
    fail_msg(
        "%s serves other bytes for %s %s than clang-offload-bundler "
        "extracts (%zu and %zu bytes)",
        path, key, c->arch, size, c->size);
  kpack_free_kernel(data);
  kpack_close(a);
}

/* ---- one cell ------------------------------------------------------------ */

typedef struct binary_kind {
  const char* path;   /* in the cell's tree */
  const char* runner; /* the program that loads a shared object */
  /* An executable whose first segment is R X (-z noseparate-code): no
   * read-only zeros at the load base take the moved table, which goes
   * into .hip_fatbin's freed addresses, at its address less the base
   * (docs/split.md). GNU strip and objcopy, rebuilding the file, write it
   * at a lower offset but the same address. */
  bool gnu_moves_table;
  /* Its loaded bytes after .hip_fatbin reach past .hip_fatbin's
   * addresses less the base: the table keeps two of .hip_fatbin's pages
   * in the file, as a hole, the free one below the table and the
   * table's. */
  bool table_in_fat;
} binary_kind;

typedef struct cell_run {
  const char* name;
  char* tree; /* the cell's input */
  char* dir;  /* scratch */
  char* out;  /* the split */
  const binary_kind* bin;
  char* expect; /* the host output of the program that loads it */
  char* lib_dir;
} cell_run;

static char* run_program(const char* program, const char* lib_dir) {
  char* out = NULL;
  char* argv[] = {(char*)program, NULL};
  if (lib_dir != NULL)
    setenv("LD_LIBRARY_PATH", lib_dir, 1);
  int status = kt_run(argv, 60, &out, NULL);
  if (lib_dir != NULL)
    unsetenv("LD_LIBRARY_PATH");
  if (status != 0)
    fail_msg("%s exited with %d", program, status);
  return out;
}

/* What a tool made of the binary runs and prints what the original did:
 * an executable itself, a shared object under the program linking it. */
static void loads(const char* file, void* ctx) {
  cell_run* r = ctx;
  char* got;
  /* A 4.18 kernel finds the table after every tool, but GNU strip's and
   * objcopy's rewrite of a table they move (docs/split.md). */
  const char* tool = strrchr(file, '/');
  tool = tool != NULL ? tool + 1 : file;
  if (!r->bin->gnu_moves_table ||
      (strcmp(tool, "strip-all") != 0 && strcmp(tool, "strip-debug") != 0 &&
       strcmp(tool, "debuglink") != 0))
    kt_check_phdr_at_load_base(file);
  if (r->bin->runner == NULL) {
    got = run_program(file, r->lib_dir);
  } else {
    char* lib = join(r->dir, "libs");
    kt_mkdirs(lib);
    const char* base = strrchr(r->bin->path, '/');
    char* copy = join(lib, base != NULL ? base + 1 : r->bin->path);
    kt_copy_file(file, copy);
    char* runner = join(r->out, r->bin->runner);
    got = run_program(runner, lib);
    unlink(copy);
    free(copy);
    free(runner);
    free(lib);
  }
  if (strcmp(got, r->expect) != 0)
    fail_msg("%s (%s) prints \"%s\", the original \"%s\"", file, r->name, got,
             r->expect);
  free(got);
}

static uint64_t blocks_of(const char* path, uint64_t* size) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  *size = (uint64_t)st.st_size;
  return (uint64_t)st.st_blocks;
}

/* The split of one HIP binary, against the oracle and the contract. */
static void check_binary(cell_run* r, const binary_kind* b, oracle* o) {
  char* in = join(r->tree, b->path);
  char* out = join(r->out, b->path);
  char* created = join(r->dir, "created.kpack");
  char* fatbin = NULL;
  char key[512];
  assert_true(asprintf(&fatbin, "%s=%s", in, b->path) > 0);
  oracle_of(r->tree, b->path, r->dir, o);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "create", "-q", "-o", created, "--fatbin", fatbin),
      0);
  for (size_t i = 0; i < o->count; i++) {
    const code_object* c = &o->cos[i];
    if (c->binary != b->path)
      continue;
    char archive[4300];
    snprintf(key, sizeof(key), "%s#%u", b->path, c->record);
    snprintf(archive, sizeof(archive), "%s/.kpack/" PREFIX "_%s.kpack", r->out,
             c->arch);
    assert_serves(archive, key, c);
    assert_serves(created, key, c);
  }

  /* The program prints what it printed. A program run from elsewhere
   * (what a tool made of it) finds the split's libraries. */
  r->bin = b;
  r->lib_dir = join(r->out, "lib");
  if (b->runner == NULL) {
    free(r->expect);
    r->expect = run_program(in, NULL);
  } else {
    char* runner = join(r->tree, b->runner);
    free(r->expect);
    r->expect = run_program(runner, NULL);
    free(runner);
  }
  loads(out, r);

  /* Its layout, under the packaging tools. */
  char what[128];
  snprintf(what, sizeof(what), "hipcc cell %s, %s", r->name, b->path);
  kt_check_readelf(out);
  kt_check_elflint(in, out, what);
  kt_check_layout(out, NULL, 0);
  char* tools = join(r->dir, "tools");
  kt_mkdirs(tools);
  kt_check_tools(tools, out, b->runner != NULL, loads, r, what);
  kt_rmtree(tools);
  free(tools);

  /* No larger than the input less the device code that left it, and no
   * more disk blocks. */
  uint64_t in_size, out_size;
  uint64_t in_blocks = blocks_of(in, &in_size);
  uint64_t out_blocks = blocks_of(out, &out_size);
  uint64_t left = kt_fatbin_bytes_in_file(in) - kt_fatbin_bytes_in_file(out);
  fprintf(stderr,
          "hipcc %-9s %-18s %9llu -> %9llu bytes (%.2fx, device code out: "
          "%llu), blocks %llu -> %llu\n",
          r->name, b->path, (unsigned long long)in_size,
          (unsigned long long)out_size, (double)out_size / (double)in_size,
          (unsigned long long)left, (unsigned long long)in_blocks * 512,
          (unsigned long long)out_blocks * 512);
  uint64_t kept = b->table_in_fat ? 2 * 4096 : 0;
  uint64_t bound = in_size - left + kept + 4096;
  if (out_size > bound)
    fail_msg(
        "%s: %llu bytes, more than %llu (the input's %llu less the "
        "%llu of device code that left it, plus %llu kept and 4 KiB)",
        out, (unsigned long long)out_size, (unsigned long long)bound,
        (unsigned long long)in_size, (unsigned long long)left,
        (unsigned long long)kept);
  if (out_blocks > in_blocks)
    fail_msg("%s uses %llu disk blocks, the input %llu", out,
             (unsigned long long)out_blocks, (unsigned long long)in_blocks);
  unlink(created);
  free(r->lib_dir);
  r->lib_dir = NULL;
  free(created);
  free(fatbin);
  free(in);
  free(out);
}

/* Each arch archive holds as many stored code objects as the oracle
 * found distinct ones for that arch: identical ones are stored once. */
static void check_stored_once(const cell_run* r, const oracle* o) {
  for (size_t i = 0; i < o->count; i++) {
    bool first = true;
    size_t distinct = 0;
    for (size_t j = 0; j < o->count; j++) {
      if (strcmp(o->cos[j].arch, o->cos[i].arch) != 0)
        continue;
      first = first && j >= i;
      bool seen = false;
      for (size_t k = 0; k < j && !seen; k++)
        seen = strcmp(o->cos[k].arch, o->cos[j].arch) == 0 &&
               o->cos[k].size == o->cos[j].size &&
               memcmp(o->cos[k].data, o->cos[j].data, o->cos[j].size) == 0;
      distinct += !seen;
    }
    if (!first)
      continue; /* that arch was counted */
    char archive[4300];
    snprintf(archive, sizeof(archive), "%s/.kpack/" PREFIX "_%s.kpack", r->out,
             o->cos[i].arch);
    kpack_archive_t a;
    assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
    bool ordinals[MAX_COS] = {false};
    size_t stored = 0;
    for (size_t j = 0; j < o->count; j++) {
      kpack_kernel_info_t info;
      char key[512];
      if (strcmp(o->cos[j].arch, o->cos[i].arch) != 0)
        continue;
      snprintf(key, sizeof(key), "%s#%u", o->cos[j].binary, o->cos[j].record);
      assert_int_equal(kpack_get_kernel_info(a, key, o->cos[j].arch, &info),
                       KPACK_SUCCESS);
      assert_true(info.ordinal < MAX_COS);
      stored += !ordinals[info.ordinal];
      ordinals[info.ordinal] = true;
    }
    kpack_close(a);
    if (stored != distinct)
      fail_msg("%s stores %zu code objects for %zu distinct ones", archive,
               stored, distinct);
  }
}

/* Splits cell `name` (its binaries in `bins`, none left without device
 * code) and checks everything the suite promises. */
static void run_cell(const char* name, const binary_kind* bins, size_t count,
                     size_t want_records) {
  cell_run r = {.name = name};
  oracle o = {0};
  r.tree = join(cells, name);
  r.dir = kt_tmpdir();
  r.out = join(r.dir, "out");
  char* again = join(r.dir, "again");
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-q", "--prefix", PREFIX, "-o",
                            r.out, r.tree),
                   0);
  size_t records = 0;
  for (size_t i = 0; i < count; i++) {
    check_binary(&r, &bins[i], &o);
    records += o.records;
  }
  assert_int_equal(records, want_records);
  check_stored_once(&r, &o);
  char* err = NULL;
  if (KT_KPACK(NULL, &err, "verify", "--binary", "-q", r.out) != 0)
    fail_msg("kpack verify --binary %s: %s", r.out, err);
  free(err);
  /* A second split finds every binary kpack-ified: the same tree. */
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-q", "--prefix", PREFIX, "-o",
                            again, r.out),
                   0);
  kt_assert_same_tree(r.out, again);
  oracle_free(&o);
  kt_rmtree(r.dir);
  free(again);
  free(r.expect);
  free(r.out);
  free(r.dir);
  free(r.tree);
}

#define CELL(name, records, ...)                                 \
  do {                                                           \
    static const binary_kind bins[] = {__VA_ARGS__};             \
    run_cell(name, bins, sizeof(bins) / sizeof(*bins), records); \
  } while (0)

/* ---- the cells ----------------------------------------------------------- */

static void test_executable_for_three_arches(void** s) {
  (void)s;
  CELL("exe", 1, {"bin/app", NULL, false, false});
}

static void test_shared_library_and_the_program_linking_it(void** s) {
  (void)s;
  CELL("shared", 2, {"lib/libvec.so", "bin/vecapp", false, false},
       {"bin/vecapp", NULL, false, false});
}

static void test_three_translation_units_without_rdc(void** s) {
  (void)s;
  CELL("multi", 3, {"bin/multi", NULL, false, false});
}

/* Every record names the one code object -fgpu-rdc links: stored once. */
static void test_three_translation_units_with_rdc(void** s) {
  (void)s;
  CELL("rdc", 3, {"bin/rdc", NULL, false, false});
}

static void test_static_archive_of_hip_objects(void** s) {
  (void)s;
  CELL("static", 3, {"bin/static", NULL, false, false});
}

static void test_target_id_variants(void** s) {
  (void)s;
  CELL("targetid", 1, {"bin/app", NULL, false, false});
}

static void test_code_object_v5(void** s) {
  (void)s;
  CELL("cov5", 1, {"bin/app", NULL, false, false});
}

static void test_hundreds_of_template_instantiations(void** s) {
  (void)s;
  CELL("templates", 1, {"bin/templates", NULL, false, false});
}

static void test_linked_by_lld_14(void** s) {
  (void)s;
  CELL("lld", 1, {"bin/app", NULL, false, false});
}

/* lld leaves a gap of addresses between segments of 64 KiB pages: the
 * moved program header table fits there without a hole in the file. */
static void test_lld_14_with_64k_pages(void** s) {
  (void)s;
  CELL("lld64k", 1, {"bin/app", NULL, false, false});
}

/* GNU ld pads segments of 64 KiB pages with holes: a sparse input. */
static void test_gnu_ld_with_64k_pages_stays_sparse(void** s) {
  (void)s;
  CELL("bfd64k", 1, {"bin/app", NULL, false, false});
}

static void test_no_separate_code(void** s) {
  (void)s;
  CELL("nosep", 1, {"bin/app", NULL, true, false});
}

/* The table's room in the file moves the symbols and the debug
 * information up. */
static void test_no_separate_code_with_debug_information(void** s) {
  (void)s;
  CELL("nosepdbg", 1, {"bin/app", NULL, true, false});
}

/* 256 KiB of .data after .hip_fatbin: no address past the loaded bytes
 * is free, and the table goes in .hip_fatbin's own pages. */
static void test_no_separate_code_with_large_data(void** s) {
  (void)s;
  CELL("nosepdata", 1, {"bin/app", NULL, true, true});
}

/* `rel` of `tree` is byte for byte `rel` of `from`. */
static void assert_same_file(const char* from, const char* tree,
                             const char* rel, const char* in) {
  char* a = join(from, rel);
  char* b = join(tree, in);
  size_t na, nb;
  uint8_t* da = kt_read_file(a, &na);
  uint8_t* db = kt_read_file(b, &nb);
  if (da == NULL || db == NULL || na != nb || memcmp(da, db, na) != 0)
    fail_msg("%s is not %s byte for byte", b, a);
  free(da);
  free(db);
  free(a);
  free(b);
}

/* hipcc --genco files in a tree: a plain split copies them whole; a
 * per-arch one places each by its content (a bundle for two processors
 * is generic), and one whose name names another processor is reported. */
static void test_genco_code_objects_in_a_tree(void** s) {
  (void)s;
  CELL("genco", 1, {"bin/app", NULL, false, false});
  char* genco = join(cells, "genco");
  char* misnamed = join(cells, "misnamed");
  char* dir = kt_tmpdir();
  char* pa = join(dir, "pa");
  char* pm = join(dir, "pm");
  char* err = NULL;
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-q", "--per-arch", "--prefix",
                            PREFIX, "-o", pa, genco),
                   0);
  if (strstr(err, "its name says") != NULL)
    fail_msg("a rightly named code object is reported: %s", err);
  free(err);
  assert_same_file(genco, pa, "share/kern/kern_gfx906.hsaco",
                   "gfx906/share/kern/kern_gfx906.hsaco");
  assert_same_file(genco, pa, "share/kern/kern_gfx1030.hsaco",
                   "gfx1030/share/kern/kern_gfx1030.hsaco");
  assert_same_file(genco, pa, "share/kern/kern_two.hsaco",
                   "generic/share/kern/kern_two.hsaco");
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-q", "--per-arch", "--prefix",
                            PREFIX, "-o", pm, misnamed),
                   0);
  kt_assert_contains(err,
                     "standalone_gfx1030.hsaco: an offload bundle for "
                     "gfx906, but its name says gfx1030; placed by its "
                     "content");
  free(err);
  assert_same_file(misnamed, pm, "share/kern/standalone_gfx1030.hsaco",
                   "gfx906/share/kern/standalone_gfx1030.hsaco");
  kt_rmtree(dir);
  free(pa);
  free(pm);
  free(dir);
  free(genco);
  free(misnamed);
}

/* The debug files eu-strip -f and objcopy --only-keep-debug make of a
 * hipcc program keep .hip_fatbin as SHT_NOBITS: no device code. A split
 * leaves them alone, copies them whole and writes no archive. */
static void test_debug_files_hold_no_device_code(void** s) {
  (void)s;
  char* app = join(cells, "exe/bin/app");
  char* dir = kt_tmpdir();
  char* tree = join(dir, "in");
  char* out = join(dir, "out");
  char* debug_dir = join(tree, "lib/debug");
  kt_mkdirs(debug_dir);
  char* kept = join(debug_dir, "app.debug");
  char* eu = join(debug_dir, "app.eu.debug");
  char* stripped = join(dir, "stripped");
  char* objcopy[] = {"objcopy", "--only-keep-debug", app, kept, NULL};
  assert_int_equal(kt_run(objcopy, 60, NULL, NULL), 0);
  char* eu_strip[] = {"eu-strip", "-f", eu, "-o", stripped, app, NULL};
  assert_int_equal(kt_run(eu_strip, 60, NULL, NULL), 0);
  char* text = NULL;
  assert_int_equal(
      KT_KPACK(&text, NULL, "split", "--prefix", PREFIX, "-o", out, tree), 0);
  kt_assert_contains(text,
                     "app.debug: no device code bytes (.hip_fatbin is "
                     "SHT_NOBITS), left alone");
  kt_assert_contains(text,
                     "app.eu.debug: no device code bytes (.hip_fatbin "
                     "is SHT_NOBITS), left alone");
  kt_assert_contains(text, "0 archives written");
  free(text);
  assert_same_file(tree, out, "lib/debug/app.debug", "lib/debug/app.debug");
  assert_same_file(tree, out, "lib/debug/app.eu.debug",
                   "lib/debug/app.eu.debug");
  kt_rmtree(dir);
  free(app);
  free(dir);
  free(tree);
  free(out);
  free(debug_dir);
  free(kept);
  free(eu);
  free(stripped);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_executable_for_three_arches),
      cmocka_unit_test(test_shared_library_and_the_program_linking_it),
      cmocka_unit_test(test_three_translation_units_without_rdc),
      cmocka_unit_test(test_three_translation_units_with_rdc),
      cmocka_unit_test(test_static_archive_of_hip_objects),
      cmocka_unit_test(test_target_id_variants),
      cmocka_unit_test(test_code_object_v5),
      cmocka_unit_test(test_hundreds_of_template_instantiations),
      cmocka_unit_test(test_linked_by_lld_14),
      cmocka_unit_test(test_lld_14_with_64k_pages),
      cmocka_unit_test(test_gnu_ld_with_64k_pages_stays_sparse),
      cmocka_unit_test(test_no_separate_code),
      cmocka_unit_test(test_no_separate_code_with_debug_information),
      cmocka_unit_test(test_no_separate_code_with_large_data),
      cmocka_unit_test(test_genco_code_objects_in_a_tree),
      cmocka_unit_test(test_debug_files_hold_no_device_code),
  };
  return cmocka_run_group_tests_name("hipcc", tests, setup, teardown);
}
