/* SPDX-License-Identifier: MIT
 *
 * The transformed ELF across the ways programs are linked, and through the
 * tools that rewrite them on their way into packages: shared objects, PIEs
 * and executables linked by GNU ld and by lld (fixture_program.h), each
 * transformed, checked by readelf, eu-elflint and the layout rules of
 * docs/split.md ("The layout contract"), loaded, then stripped, split for
 * debugging and patched, and loaded again; every load must reach each HIPK
 * record's metadata through the relocated pointer.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
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
#include "support.h"

#define RECORDS 2
#define PATTERN ".kpack/fx_@GFXARCH@.kpack"
#define NAME "lib/libfx.so"
#define LLD "/usr/bin/ld.lld-14"
#define PAGE 4096u

/* One way of linking a program. */
typedef struct cell {
  const char* what;
  const char* flags; /* linker options */
  bool relr;
  fx_fatbin_place place;
  size_t bundle_size; /* each of the RECORDS bundles */
  unsigned align_log2;
  bool tls, big_bss;
} cell;

/* Each row is linked as a shared object, a PIE and an executable, by GNU
 * ld and by lld: together they take every value of every axis (separate
 * code or not; 4 KiB, 64 KiB and 2 MiB pages; RELA and RELR; RELRO or
 * not; TLS; a 200 MiB .bss; .hip_fatbin at the start, middle and end of
 * its segment, smaller than a page or whole pages, on a page boundary or
 * off one). */
static const cell rows[] = {
    {"separate code, 4 KiB pages, RELRO, .hip_fatbin starting its segment",
     "-Wl,-z,separate-code -Wl,-z,max-page-size=0x1000 -Wl,-z,relro", false,
     FX_FATBIN_START, 20000, 12, false, false},
    {"no separate code, RELRO, .hip_fatbin under a page ending its segment",
     "-Wl,-z,noseparate-code -Wl,-z,relro", false, FX_FATBIN_END, 700, 4, false,
     false},
    {"64 KiB pages, no separate code, RELR, no RELRO",
     "-Wl,-z,max-page-size=0x10000 -Wl,-z,noseparate-code -Wl,-z,norelro", true,
     FX_FATBIN_DEFAULT, 150000, 12, false, false},
    {"2 MiB pages, .hip_fatbin starting its segment, whole pages",
     "-Wl,-z,max-page-size=0x200000 -Wl,-z,separate-code", false,
     FX_FATBIN_START, (2u << 20) + PAGE, 12, false, false},
    {"no separate code, TLS, a 200 MiB .bss", "-Wl,-z,noseparate-code", false,
     FX_FATBIN_DEFAULT, 20000, 12, true, true},
    {"separate code, a .hip_fatbin of several pages off a page boundary",
     "-Wl,-z,separate-code", false, FX_FATBIN_DEFAULT, 20000, 4, false, false},
};

static const char* const kind_names[] = {"shared object", "PIE", "executable"};

typedef struct program {
  char* dir;
  char* in;
  char* out;
  fx_program_kind kind;
  const cell* c;
  bool lld;
  size_t records; /* librocrand's */
  bool real;      /* librocrand: loaded for its own sake, records read from the
                     file */
} program;

static char* in_dir(const program* p, const char* name) {
  return kt_path(p->dir, name);
}

/* ---- loading ------------------------------------------------------------- */

/* Every record of the report is HIPK with its index, and its pointer
 * reaches the metadata map naming the program. */
static void check_report(const program* p, const char* binary,
                         const char* report) {
  const char* paths[] = {PATTERN};
  fx_buf want = fx_hipk_metadata(NAME, paths, 1);
  const char* line = report;
  size_t records = 0;
  for (;;) {
    unsigned magic, version;
    unsigned long long reserved;
    unsigned char bytes[256];
    size_t n;
    line = fx_parse_report(line, &magic, &version, &reserved, bytes,
                           sizeof(bytes), &n);
    if (line == NULL)
      break;
    if (magic != KPACK_HOST_HIPK_MAGIC || reserved != records ||
        n < want.size || memcmp(bytes, want.data, want.size) != 0)
      fail_msg(
          "%s (%s, %s, %s): record %zu is %08x, index %llu, and does "
          "not reach the metadata",
          binary, p->c->what, kind_names[p->kind], p->lld ? "lld" : "GNU ld",
          records, magic, reserved);
    records++;
  }
  if (records != RECORDS)
    fail_msg("%s: %zu records reported, not %d: \"%s\"", binary, records,
             RECORDS, report);
  fx_free(&want);
}

/* The records as kpack's host reader finds them in the file. */
static void check_records_in_file(const char* binary, size_t count) {
  kpack_host_t* host;
  kpack_host_info_t info;
  if (kpack_host_open(binary, &host) != KPACK_SUCCESS)
    fail_msg("%s: the host reader cannot open it", binary);
  assert_int_equal(kpack_host_get_info(host, &info), KPACK_SUCCESS);
  assert_int_equal(info.wrapper_count, count);
  for (size_t i = 0; i < count; i++) {
    kpack_host_wrapper_t w;
    assert_int_equal(kpack_host_get_wrapper(host, i, &w), KPACK_SUCCESS);
    assert_string_equal(w.kernel_name, NAME);
    assert_int_equal(w.reserved, i);
  }
  kpack_host_close(host);
}

/* dlopen()s the shared object or runs the program, and checks what its
 * constructor saw. */
static void check_loads(const program* p, const char* binary) {
  if (p->real) {
    if (!kt_loads_in_child(binary, "rocrand_create_generator"))
      fail_msg("%s does not load (its dlopen error is above)", binary);
    check_records_in_file(binary, p->records);
  } else if (p->kind == FX_PROGRAM_SHARED) {
    void* h = dlopen(binary, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
      fail_msg("dlopen %s (%s): %s", binary, p->c->what, dlerror());
    const char* (*report)(void) =
        (const char* (*)(void))dlsym(h, "fx_program_report");
    assert_non_null(report);
    check_report(p, binary, report());
    dlclose(h);
  } else {
    char* out = NULL;
    char* argv[] = {(char*)binary, NULL};
    int status = kt_run(argv, 60, &out, NULL);
    if (status != 0)
      fail_msg("%s (%s) exited with %d", binary, p->c->what, status);
    check_report(p, binary, out);
    free(out);
  }
}

/* ---- the layout contract ------------------------------------------------
 * The structural checks of ROCm's ELF verifier, and the rules the
 * transform adds for its own tables (docs/split.md). */

static uint64_t ld(const uint8_t* p, size_t n) {
  return fx_load_le(p, n);
}

static void check_layout(const program* p, const char* path) {
  size_t size;
  uint8_t* e = kt_read_file(path, &size);
  assert_non_null(e);
  assert_true(size >= 64);
  uint64_t phoff = ld(e + 32, 8), shoff = ld(e + 40, 8);
  uint64_t phnum = ld(e + 56, 2), shnum = ld(e + 60, 2),
           shstrndx = ld(e + 62, 2);
  if (phoff > size || phnum * 56 > size - phoff || shoff > size ||
      shnum * 64 > size - shoff)
    fail_msg("%s: a header table lies outside the file", path);
  const uint8_t* ph = e + phoff;
  const uint8_t* sh = e + shoff;

  /* Program headers: PT_LOADs aligned, not overlapping in the file; one
   * without file bytes is .hip_fatbin's memory, starts a page, and lies in
   * the first page of a read-only PT_LOAD, past every other's bytes;
   * PT_PHDR is the table and lies in a PT_LOAD. */
  bool phdr_loaded = false, have_phdr = false;
  uint64_t empty_va = 0, empty_size = 0, empty_off = 0;
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* a = ph + i * 56;
    uint64_t type = ld(a, 4), off = ld(a + 8, 8), va = ld(a + 16, 8),
             fsz = ld(a + 32, 8), align = ld(a + 48, 8);
    if (type == 6) {
      have_phdr = true;
      if (off != phoff || fsz != phnum * 56)
        fail_msg("%s: PT_PHDR (0x%llx, %llu bytes) is not the table", path,
                 (unsigned long long)off, (unsigned long long)fsz);
    }
    if (type != 1)
      continue;
    if (fsz == 0) {
      if (empty_size != 0 || va % PAGE != 0)
        fail_msg(
            "%s: PT_LOAD %llu has no file bytes and is not .hip_fatbin's "
            "one page-aligned piece",
            path, (unsigned long long)i);
      empty_va = va;
      empty_size = ld(a + 40, 8);
      empty_off = off;
    }
    if (align > 1 && ((align & (align - 1)) != 0 || off % align != va % align))
      fail_msg(
          "%s: PT_LOAD %llu: offset 0x%llx and address 0x%llx differ "
          "modulo its alignment 0x%llx",
          path, (unsigned long long)i, (unsigned long long)off,
          (unsigned long long)va, (unsigned long long)align);
    if (off % PAGE != va % PAGE)
      fail_msg("%s: PT_LOAD %llu is not page-aligned", path,
               (unsigned long long)i);
    if (fsz > 0 && (off > size || fsz > size - off))
      fail_msg("%s: PT_LOAD %llu runs past the file", path,
               (unsigned long long)i);
    if (phoff >= off && phoff + phnum * 56 <= off + fsz)
      phdr_loaded = true;
    for (uint64_t j = 0; j < i; j++) {
      const uint8_t* b = ph + j * 56;
      uint64_t boff = ld(b + 8, 8), bfsz = ld(b + 32, 8);
      if (ld(b, 4) != 1)
        continue;
      if (boff == off || (boff < off + fsz && off < boff + bfsz))
        fail_msg("%s: PT_LOADs %llu and %llu share file bytes", path,
                 (unsigned long long)j, (unsigned long long)i);
    }
  }
  if (have_phdr && !phdr_loaded)
    fail_msg("%s: no PT_LOAD holds the program header table", path);
  if (empty_size != 0) {
    /* valgrind reads a library's symbols only when each PT_LOAD's offset
     * lies in a page mapped from the file with the same permissions. */
    bool in_page = false;
    uint64_t other_end = 0;
    for (uint64_t j = 0; j < phnum; j++) {
      const uint8_t* b = ph + j * 56;
      uint64_t boff = ld(b + 8, 8), bfsz = ld(b + 32, 8), flags = ld(b + 4, 4);
      if (ld(b, 4) != 1 || bfsz == 0)
        continue;
      if (flags == 4 /* PF_R */ && boff / PAGE * PAGE <= empty_off &&
          empty_off < boff)
        in_page = true;
      else if (boff + bfsz > other_end)
        other_end = boff + bfsz;
    }
    if (!in_page)
      fail_msg(
          "%s: .hip_fatbin's PT_LOAD (0x%llx) is not in the first page "
          "of a read-only PT_LOAD, ahead of its file bytes",
          path, (unsigned long long)empty_off);
    if (empty_off < other_end)
      fail_msg(
          "%s: .hip_fatbin's PT_LOAD lies at 0x%llx, before the end of "
          "another's file bytes (0x%llx)",
          path, (unsigned long long)empty_off, (unsigned long long)other_end);
  }

  /* Sections: inside the file, aligned, named inside the name table; the
   * moved program header table is covered by an allocated section, and
   * .rocm_kpack_ref holds exactly the metadata. */
  if (shstrndx >= shnum)
    fail_msg("%s: e_shstrndx %llu names no section", path,
             (unsigned long long)shstrndx);
  const uint8_t* names = sh + shstrndx * 64;
  uint64_t names_off = ld(names + 24, 8), names_size = ld(names + 32, 8);
  if (names_off > size || names_size > size - names_off || names_size == 0 ||
      e[names_off + names_size - 1] != 0)
    fail_msg("%s: the section name table is not inside the file", path);
  bool covered = phoff == 64, have_ref = false;
  for (uint64_t i = 1; i < shnum; i++) {
    const uint8_t* s = sh + i * 64;
    uint64_t name = ld(s, 4), type = ld(s + 4, 4), flags = ld(s + 8, 8),
             addr = ld(s + 16, 8), off = ld(s + 24, 8), ssz = ld(s + 32, 8),
             align = ld(s + 48, 8);
    if (name >= names_size)
      fail_msg("%s: section %llu's name is outside the name table", path,
               (unsigned long long)i);
    const char* n = (const char*)e + names_off + name;
    if (empty_size != 0 && strcmp(n, ".hip_fatbin") == 0 &&
        (addr != empty_va || ssz != empty_size || off != empty_off))
      fail_msg("%s: .hip_fatbin is not exactly its PT_LOAD without file bytes",
               path);
    /* eu-elflint would give such a section to the piece, not its own
     * segment. */
    if (type == 8 /* NOBITS */ && (flags & 2) != 0 && empty_size != 0 &&
        strcmp(n, ".hip_fatbin") != 0 && off >= empty_off &&
        off - empty_off < empty_size)
      fail_msg("%s: NOBITS section %s lies in .hip_fatbin's offsets", path, n);
    if (type == 8 /* NOBITS */)
      continue;
    if (off > size || ssz > size - off)
      fail_msg("%s: section %s runs past the file", path, n);
    if ((flags & 2) != 0 && ssz > 0 && align > 1 && off % align != addr % align)
      fail_msg("%s: section %s: offset and address differ modulo 0x%llx", path,
               n, (unsigned long long)align);
    if ((flags & 2) != 0 && off <= phoff && phoff + phnum * 56 <= off + ssz)
      covered = true;
    if (strcmp(n, ".rocm_kpack_ref") == 0) {
      const char* paths[] = {PATTERN};
      fx_buf want = fx_hipk_metadata(NAME, paths, 1);
      have_ref = ssz == want.size && memcmp(e + off, want.data, ssz) == 0;
      fx_free(&want);
    }
  }
  if (!covered)
    fail_msg("%s: no allocated section covers the program header table", path);
  if (!have_ref)
    fail_msg("%s: .rocm_kpack_ref does not hold exactly the metadata", path);
  (void)p;
  free(e);
}

/* The input has .hip_fatbin where the cell asks: first in its segment,
 * last, or between other sections. */
static void check_placement(const program* p) {
  size_t size;
  uint8_t* e = kt_read_file(p->in, &size);
  const uint8_t* f = fx_section_header(e, ".hip_fatbin");
  assert_non_null(f);
  uint64_t fo = ld(f + 24, 8), fs = ld(f + 32, 8);
  uint64_t phoff = ld(e + 32, 8), phnum = ld(e + 56, 2);
  bool found = false;
  for (uint64_t i = 0; i < phnum && !found; i++) {
    const uint8_t* a = e + phoff + i * 56;
    uint64_t off = ld(a + 8, 8), fsz = ld(a + 32, 8);
    if (ld(a, 4) != 1 || fo < off || fo + fs > off + fsz)
      continue;
    found = true;
    bool first = fo == off, last = fo + fs == off + fsz;
    if ((p->c->place == FX_FATBIN_START && !first) ||
        (p->c->place == FX_FATBIN_END && !last) ||
        (p->c->place == FX_FATBIN_DEFAULT && (first || last)))
      fail_msg("%s (%s, %s): .hip_fatbin is not where the cell puts it",
               p->c->what, kind_names[p->kind], p->lld ? "lld" : "GNU ld");
  }
  assert_true(found);
  free(e);
}

/* eu-elflint --gnu-ld finds nothing in the output that it did not find in
 * the input. */
static void check_elflint(const program* p, const char* before,
                          const char* after) {
  const char* line = after;
  while (*line != '\0') {
    const char* end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char* l = strndup(line, len);
    if (strstr(before, l) == NULL && strcmp(l, "No errors") != 0)
      fail_msg(
          "eu-elflint --gnu-ld on %s (%s, %s, %s) finds what it did "
          "not find before:\n%s\nbefore:\n%s",
          p->out, p->c->what, kind_names[p->kind], p->lld ? "lld" : "GNU ld", l,
          before);
    free(l);
    line += len + (end != NULL);
  }
}

/* ---- the tools ----------------------------------------------------------- */

static void tool(const program* p, const char* const* args) {
  char* argv[16];
  size_t n = 0;
  char *out = NULL, *err = NULL;
  for (; args[n] != NULL; n++)
    argv[n] = (char*)args[n];
  argv[n] = NULL;
  if (kt_run(argv, 120, &out, &err) != 0)
    fail_msg("%s on %s (%s, %s): %s", args[0], p->out, p->c->what,
             kind_names[p->kind], err);
  free(out);
  free(err);
}

static void in_buf(const program* p, const char* name, char out[PATH_MAX]) {
  assert_true((size_t)snprintf(out, PATH_MAX, "%s/%s", p->dir, name) <
              PATH_MAX);
}

static void copy_to(const program* p, const char* to) {
  size_t size;
  void* bytes = kt_read_file(p->out, &size);
  kt_write_file(to, bytes, size);
  chmod(to, 0755);
  free(bytes);
}

/* Each tool a package build runs on the output; every result still loads
 * and reaches its records. Each tool writes a file of its own: valgrind
 * (3.19) aborts when a process loads a second file at one path and address
 * after it could not read the first one's symbols (docs/split.md, "After
 * the transform"). */
static void check_tools(const program* p) {
  /* In buffers, not on the heap: the loads fork, and memcheck in the child
   * would count the parent's live strings as lost. */
  char all[PATH_MAX];
  char debug_only[PATH_MAX];
  char eu[PATH_MAX];
  char eu_f[PATH_MAX];
  char debug[PATH_MAX];
  char linked[PATH_MAX];
  char keep[PATH_MAX];
  char rpath_out[PATH_MAX];
  char soname_out[PATH_MAX];
  in_buf(p, "strip-all", all);
  in_buf(p, "strip-debug", debug_only);
  in_buf(p, "eu-strip", eu);
  in_buf(p, "eu-strip-f", eu_f);
  in_buf(p, "eu-strip-f.debug", debug);
  in_buf(p, "debuglink", linked);
  in_buf(p, "kept.debug", keep);
  in_buf(p, "set-rpath", rpath_out);
  in_buf(p, "set-soname", soname_out);

  const char* strip_all[] = {"strip", p->out, "-o", all, NULL};
  tool(p, strip_all);
  check_loads(p, all);
  const char* strip_debug[] = {"strip", "--strip-debug", p->out,
                               "-o",    debug_only,      NULL};
  tool(p, strip_debug);
  check_loads(p, debug_only);
  const char* eu_strip[] = {"eu-strip", "-o", eu, p->out, NULL};
  tool(p, eu_strip);
  check_loads(p, eu);
  const char* eu_strip_f[] = {"eu-strip", "-f",   debug, "-o",
                              eu_f,       p->out, NULL};
  tool(p, eu_strip_f);
  check_loads(p, eu_f);

  /* A debug file beside the stripped binary, named by its debuglink. */
  const char* only_debug[] = {"objcopy", "--only-keep-debug", p->out, keep,
                              NULL};
  tool(p, only_debug);
  const char* strip_to_link[] = {"strip", p->out, "-o", linked, NULL};
  tool(p, strip_to_link);
  char* link = NULL;
  assert_true(asprintf(&link, "--add-gnu-debuglink=%s", keep) > 0);
  const char* debuglink[] = {"objcopy", link, linked, NULL};
  tool(p, debuglink);
  free(link);
  check_loads(p, linked);

  copy_to(p, rpath_out);
  const char* rpath[] = {"patchelf", "--set-rpath", "/opt/kpack/lib", rpath_out,
                         NULL};
  tool(p, rpath);
  check_loads(p, rpath_out);
  if (p->kind == FX_PROGRAM_SHARED) {
    copy_to(p, soname_out);
    const char* soname[] = {"patchelf", "--set-soname", "libfx-renamed.so.1",
                            soname_out, NULL};
    tool(p, soname);
    check_loads(p, soname_out);
  }
}

/* ---- the cells ----------------------------------------------------------- */

/* Transforms p->in into p->out and puts the output through every check
 * and every tool. */
static void transform_checked(const program* p) {
  const char* paths[] = {PATTERN};
  kpack_transform_options_t to = {
      .kernel_name = NAME, .search_paths = paths, .search_path_count = 1};
  kpack_transform_message_t msg;
  int fd = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  assert_true(fd >= 0);
  if (kpack_transform_write(p->in, fd, &to, NULL, &msg) != KPACK_SUCCESS)
    fail_msg("transform of %s (%s, %s): %s", p->c->what, kind_names[p->kind],
             p->lld ? "lld" : "GNU ld", msg.text);
  close(fd);

  kt_check_readelf(p->out);
  char* before = kt_elflint(p->in);
  char* after = kt_elflint(p->out);
  check_elflint(p, before, after);
  free(before);
  free(after);
  check_layout(p, p->out);
  check_loads(p, p->out);
  check_tools(p);
}

static void run_cell(const cell* c, fx_program_kind kind, bool lld) {
  program p = {.dir = kt_tmpdir(), .kind = kind, .c = c, .lld = lld};
  p.in = in_dir(&p, "input");
  p.out = in_dir(&p, "output");
  fx_buf bundles[RECORDS];
  for (size_t b = 0; b < RECORDS; b++) {
    bundles[b].size = c->bundle_size;
    bundles[b].data = kt_pattern(c->bundle_size, (uint32_t)b + 1);
  }
  fx_program_opts o = {.kind = kind,
                       .bundles = bundles,
                       .bundle_count = RECORDS,
                       .relr = c->relr,
                       .align_log2 = c->align_log2,
                       .flags = c->flags,
                       .place = c->place,
                       .lld = lld ? LLD : NULL,
                       .tls = c->tls,
                       .big_bss = c->big_bss};
  if (!fx_build_program(p.dir, &o, p.in))
    fail_msg("could not link %s as a %s with %s", c->what, kind_names[kind],
             lld ? "lld" : "GNU ld");
  for (size_t b = 0; b < RECORDS; b++)
    fx_free(&bundles[b]);
  check_placement(&p);

  transform_checked(&p);
  kt_rmtree(p.dir);
  free(p.dir);
  free(p.in);
  free(p.out);
}

static void run_row(size_t row) {
  for (int kind = FX_PROGRAM_SHARED; kind <= FX_PROGRAM_EXEC; kind++) {
    run_cell(&rows[row], (fx_program_kind)kind, false);
    run_cell(&rows[row], (fx_program_kind)kind, true);
  }
}

static void test_separate_code_4k_pages_relro_fatbin_first(void** s) {
  (void)s;
  run_row(0);
}

static void test_no_separate_code_small_fatbin_at_the_end(void** s) {
  (void)s;
  run_row(1);
}

static void test_64k_pages_no_separate_code_relr_no_relro(void** s) {
  (void)s;
  run_row(2);
}

/* Debian's librocrand (with the HIP runtime it needs): eu-strip of the
 * old layout left it "no loadable segments". */
static void test_librocrand_survives_every_tool(void** s) {
  (void)s;
  static const cell real = {"librocrand", NULL, false, FX_FATBIN_DEFAULT, 0, 0,
                            false,        false};
  program p = {
      .dir = kt_tmpdir(), .kind = FX_PROGRAM_SHARED, .c = &real, .real = true};
  char* lib = kt_librocrand();
  p.in = lib;
  p.out = in_dir(&p, "librocrand.so.1.1");
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t fi;
  assert_int_equal(kpack_fatbin_open(lib, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &fi), KPACK_SUCCESS);
  p.records = fi.bundle_count;
  kpack_fatbin_close(fb);
  transform_checked(&p);
  kt_rmtree(p.dir);
  free(p.dir);
  free(p.out);
  free(lib);
}

static void test_2m_pages_with_fatbin_starting_its_segment(void** s) {
  (void)s;
  run_row(3);
}

static void test_no_separate_code_tls_and_big_bss(void** s) {
  (void)s;
  run_row(4);
}

/* No HIP compiler emits it, but the transform must still work: a
 * .hip_fatbin that does not start a page stays memory of the piece before
 * it (docs/split.md, "The device code leaves the file"). */
static void test_fatbin_off_a_page_boundary(void** s) {
  (void)s;
  run_row(5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_separate_code_4k_pages_relro_fatbin_first),
      cmocka_unit_test(test_no_separate_code_small_fatbin_at_the_end),
      cmocka_unit_test(test_64k_pages_no_separate_code_relr_no_relro),
      cmocka_unit_test(test_2m_pages_with_fatbin_starting_its_segment),
      cmocka_unit_test(test_librocrand_survives_every_tool),
      cmocka_unit_test(test_no_separate_code_tls_and_big_bss),
      cmocka_unit_test(test_fatbin_off_a_page_boundary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
