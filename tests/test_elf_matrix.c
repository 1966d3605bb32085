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

#include "elf_contract.h"
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

/* The input has .hip_fatbin where the cell asks: first in its segment,
 * last, or between other sections. */
static void check_placement(const program* p) {
  size_t size;
  uint8_t* e = kt_read_file(p->in, &size);
  const uint8_t* f = fx_section_header(e, ".hip_fatbin");
  assert_non_null(f);
  uint64_t fo = fx_load_le(f + 24, 8), fs = fx_load_le(f + 32, 8);
  uint64_t phoff = fx_load_le(e + 32, 8), phnum = fx_load_le(e + 56, 2);
  bool found = false;
  for (uint64_t i = 0; i < phnum && !found; i++) {
    const uint8_t* a = e + phoff + i * 56;
    uint64_t off = fx_load_le(a + 8, 8), fsz = fx_load_le(a + 32, 8);
    if (fx_load_le(a, 4) != 1 || fo < off || fo + fs > off + fsz)
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

static void loads_of(const char* binary, void* ctx) {
  check_loads(ctx, binary);
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

  char what[200];
  snprintf(what, sizeof(what), "%s, %s, %s", p->c->what, kind_names[p->kind],
           p->lld ? "lld" : "GNU ld");
  kt_check_readelf(p->out);
  kt_check_elflint(p->in, p->out, what);
  fx_buf want = fx_hipk_metadata(NAME, paths, 1);
  if (p->real)
    kt_check_layout(p->out, NULL, 0);
  else
    kt_check_layout(p->out, want.data, want.size);
  fx_free(&want);
  check_loads(p, p->out);
  kt_check_tools(p->dir, p->out, p->kind == FX_PROGRAM_SHARED, loads_of,
                 (void*)p, what);
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
