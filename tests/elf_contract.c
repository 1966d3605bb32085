/* SPDX-License-Identifier: MIT
 *
 * The layout contract of a transformed ELF, its eu-elflint findings and
 * the packaging tools (elf_contract.h), shared by the suites that
 * transform programs.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "elf_contract.h"
#include "fixture_fatbin.h"
#include "support.h"

#define PAGE 4096u

/* ---- the layout contract ------------------------------------------------
 * The structural checks of ROCm's ELF verifier, and the rules the
 * transform adds for its own tables (docs/split.md). */

static uint64_t ld(const uint8_t* p, size_t n) {
  return fx_load_le(p, n);
}

/* Kernels before 5.18 (RHEL 8's 4.18, RHEL 9's 5.14) hand a program with
 * PT_INTERP its program header table's address as AT_PHDR = the first
 * PT_LOAD's p_vaddr - p_offset (the load base) plus e_phoff, whichever
 * segment holds the table. The table must be there: in a PT_LOAD loaded
 * at that base, and PT_PHDR, which the dynamic loader takes the load
 * bias from, must name that address. */
static void check_phdr_at_load_base(const char* path, const uint8_t* e,
                                    uint64_t phoff, uint64_t phnum) {
  const uint8_t* ph = e + phoff;
  bool interp = false, base_set = false, mapped = false;
  uint64_t base = 0;
  for (uint64_t i = 0; i < phnum; i++)
    interp |= ld(ph + i * 56, 4) == 3;
  if (!interp)
    return;
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* a = ph + i * 56;
    uint64_t off = ld(a + 8, 8), va = ld(a + 16, 8), fsz = ld(a + 32, 8);
    if (ld(a, 4) != 1)
      continue;
    if (!base_set) {
      base = va - off;
      base_set = true;
    }
    if (va - off == base && off <= phoff && phoff - off <= fsz &&
        phnum * 56 <= fsz - (phoff - off))
      mapped = true;
  }
  if (!mapped)
    fail_msg(
        "%s: the program header table (0x%llx) is not mapped at the load "
        "base plus its offset, where kernels before 5.18 say it is",
        path, (unsigned long long)phoff);
  for (uint64_t i = 0; i < phnum; i++) {
    const uint8_t* a = ph + i * 56;
    if (ld(a, 4) == 6 && ld(a + 16, 8) != base + phoff)
      fail_msg("%s: PT_PHDR says 0x%llx, the kernel's AT_PHDR is 0x%llx", path,
               (unsigned long long)ld(a + 16, 8),
               (unsigned long long)(base + phoff));
  }
}

void kt_check_phdr_at_load_base(const char* path) {
  size_t size;
  uint8_t* e = kt_read_file(path, &size);
  assert_non_null(e);
  if (size < 64)
    fail_msg("%s: shorter than an ELF header", path);
  uint64_t phoff = ld(e + 32, 8), phnum = ld(e + 56, 2);
  if (phoff > size || phnum * 56 > size - phoff)
    fail_msg("%s: the program header table lies outside the file", path);
  check_phdr_at_load_base(path, e, phoff, phnum);
  free(e);
}

void kt_check_layout(const char* path, const void* metadata,
                     size_t metadata_size) {
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
    if (strcmp(n, ".rocm_kpack_ref") == 0)
      have_ref = metadata != NULL ? ssz == metadata_size &&
                                        memcmp(e + off, metadata, ssz) == 0
                                  : ssz > 0;
  }
  if (!covered)
    fail_msg("%s: no allocated section covers the program header table", path);
  if (!have_ref)
    fail_msg("%s: .rocm_kpack_ref does not hold exactly the metadata", path);
  check_phdr_at_load_base(path, e, phoff, phnum);
  free(e);
}

/* ---- eu-elflint --------------------------------------------------------- */

void kt_check_elflint(const char* input, const char* output, const char* what) {
  char* before = kt_elflint(input);
  char* after = kt_elflint(output);
  const char* line = after;
  while (*line != '\0') {
    const char* end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char* l = strndup(line, len);
    if (strstr(before, l) == NULL && strcmp(l, "No errors") != 0)
      fail_msg(
          "eu-elflint --gnu-ld on %s (%s) finds what it did not find "
          "before:\n%s\nbefore:\n%s",
          output, what, l, before);
    free(l);
    line += len + (end != NULL);
  }
  free(before);
  free(after);
}

/* ---- the tools ----------------------------------------------------------- */

typedef struct tool_run {
  const char* dir;
  const char* out;
  const char* what;
} tool_run;

static void tool(const tool_run* p, const char* const* args) {
  char* argv[16];
  size_t n = 0;
  char *out = NULL, *err = NULL;
  for (; args[n] != NULL; n++)
    argv[n] = (char*)args[n];
  argv[n] = NULL;
  if (kt_run(argv, 120, &out, &err) != 0)
    fail_msg("%s on %s (%s): %s", args[0], p->out, p->what, err);
  free(out);
  free(err);
}

static void in_buf(const tool_run* p, const char* name, char out[PATH_MAX]) {
  assert_true((size_t)snprintf(out, PATH_MAX, "%s/%s", p->dir, name) <
              PATH_MAX);
}

static void copy_to(const tool_run* p, const char* to) {
  size_t size;
  void* bytes = kt_read_file(p->out, &size);
  kt_write_file(to, bytes, size);
  chmod(to, 0755);
  free(bytes);
}

/* Each tool writes a file of its own: valgrind (3.19) aborts when a
 * process loads a second file at one path and address after it could not
 * read the first one's symbols (docs/split.md, "After the transform"). */
void kt_check_tools(const char* dir, const char* output, bool shared_object,
                    void (*loads)(const char* file, void* ctx), void* ctx,
                    const char* what) {
  const tool_run run = {dir, output, what}, *p = &run;
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
  loads(all, ctx);
  const char* strip_debug[] = {"strip", "--strip-debug", p->out,
                               "-o",    debug_only,      NULL};
  tool(p, strip_debug);
  loads(debug_only, ctx);
  const char* eu_strip[] = {"eu-strip", "-o", eu, p->out, NULL};
  tool(p, eu_strip);
  loads(eu, ctx);
  const char* eu_strip_f[] = {"eu-strip", "-f",   debug, "-o",
                              eu_f,       p->out, NULL};
  tool(p, eu_strip_f);
  loads(eu_f, ctx);

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
  loads(linked, ctx);

  copy_to(p, rpath_out);
  const char* rpath[] = {"patchelf", "--set-rpath", "/opt/kpack/lib", rpath_out,
                         NULL};
  tool(p, rpath);
  loads(rpath_out, ctx);
  if (shared_object) {
    copy_to(p, soname_out);
    const char* soname[] = {"patchelf", "--set-soname", "libfx-renamed.so.1",
                            soname_out, NULL};
    tool(p, soname);
    loads(soname_out, ctx);
  }
}

unsigned long long kt_fatbin_bytes_in_file(const char* path) {
  size_t size;
  uint8_t* e = kt_read_file(path, &size);
  assert_non_null(e);
  const uint8_t* f = fx_section_header(e, ".hip_fatbin");
  assert_non_null(f);
  uint64_t fa = ld(f + 16, 8), fs = ld(f + 32, 8);
  uint64_t phoff = ld(e + 32, 8), phnum = ld(e + 56, 2), kept = 0;
  /* A loader maps whole pages: the bytes of a PT_LOAD's first and last
   * pages around its file bytes are in the file too. */
  for (uint64_t at = fa / PAGE * PAGE; at < fa + fs; at += PAGE) {
    bool mapped = false;
    for (uint64_t i = 0; i < phnum && !mapped; i++) {
      const uint8_t* a = e + phoff + i * 56;
      uint64_t va = ld(a + 16, 8), fsz = ld(a + 32, 8);
      mapped =
          ld(a, 4) == 1 && fsz > 0 && va / PAGE * PAGE <= at && at < va + fsz;
    }
    if (mapped) {
      uint64_t lo = at > fa ? at : fa;
      uint64_t hi = at + PAGE < fa + fs ? at + PAGE : fa + fs;
      kept += hi - lo;
    }
  }
  free(e);
  return kept;
}
