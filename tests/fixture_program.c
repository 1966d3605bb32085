/* SPDX-License-Identifier: MIT
 *
 * Host programs linked by the system compiler (see fixture_program.h). The
 * bundles reach .hip_fatbin through the assembler's .incbin; the records
 * are an array of structs initialised with the bundles' addresses, so the
 * linker emits exactly the relocations it emits for HIP's own records.
 */
#include "fixture_program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool write_bytes(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, size, f) != size) {
    fprintf(stderr, "fixture_program: cannot write %s\n", path);
    if (f != NULL)
      fclose(f);
    return false;
  }
  return fclose(f) == 0;
}

static const char report_source[] =
    "struct fx_record {\n"
    "  unsigned magic, version;\n"
    "  const unsigned char* ptr;\n"
    "  unsigned long long reserved;\n"
    "};\n"
    "__attribute__((section(\".hipFatBinSegment\"), used, aligned(8)))\n"
    "struct fx_record fx_records[FX_RECORDS] = {FX_INIT};\n"
    "static char fx_report[FX_RECORDS * 600 + 1];\n"
    "#ifdef FX_TLS\n"
    "__thread int fx_tls_data = 7;\n"
    "__thread int fx_tls_zero;\n"
    "#endif\n"
    "#ifdef FX_BIG_BSS\n"
    "static char fx_big_bss[200 << 20];\n"
    "#endif\n"
    "#ifdef FX_DT_RELR_VERSION\n"
    "__asm__(\".symver fx_dt_relr, GLIBC_ABI_DT_RELR@GLIBC_ABI_DT_RELR\");\n"
    "extern char fx_dt_relr[] __attribute__((weak));\n"
    "__attribute__((used)) const void* fx_dt_relr_use = fx_dt_relr;\n"
    "#endif\n"
    "__attribute__((visibility(\"default\")))\n"
    "const char* fx_program_report(void) { return fx_report; }\n"
    "__attribute__((constructor)) static void fx_read_records(void) {\n"
    "  static const char hex[] = \"0123456789abcdef\";\n"
    "  char* out = fx_report;\n"
    "#ifdef FX_TLS\n"
    "  fx_tls_zero += fx_tls_data;\n"
    "  if (fx_tls_zero != 7) return;\n"
    "#endif\n"
    "#ifdef FX_BIG_BSS\n"
    "  fx_big_bss[sizeof(fx_big_bss) - 1] = 1;\n"
    "  if (fx_big_bss[0] != 0) return;\n"
    "#endif\n"
    "  for (int i = 0; i < FX_RECORDS; i++) {\n"
    "    const struct fx_record* r = &fx_records[i];\n"
    "    unsigned long page = 4096 - ((unsigned long)r->ptr & 4095);\n"
    "    unsigned long n = page < 256 ? page : 256;\n"
    "    out += sprintf(out, \"%08x %u %llu \", r->magic, r->version,\n"
    "                   r->reserved);\n"
    "    for (unsigned long k = 0; k < n; k++) {\n"
    "      *out++ = hex[r->ptr[k] >> 4];\n"
    "      *out++ = hex[r->ptr[k] & 15];\n"
    "    }\n"
    "    *out++ = '\\n';\n"
    "  }\n"
    "  *out = 0;\n"
    "}\n"
    "#ifdef FX_MAIN\n"
    "int main(void) { fputs(fx_report, stdout); return 0; }\n"
    "#endif\n";

bool fx_build_program(const char* dir, const fx_program_opts* o,
                      const char* out) {
  size_t records = o->record_count ? o->record_count : o->bundle_count;
  char path[4096], *cmd = NULL;
  FILE* src;
  bool ok = false;

  snprintf(path, sizeof(path), "%s/program.c", dir);
  if ((src = fopen(path, "w")) == NULL) {
    fprintf(stderr, "fixture_program: cannot write %s\n", path);
    return false;
  }
  fprintf(src,
          "#include <stdio.h>\n__asm__(\".section .hip_fatbin,\\\"a\\\","
          "@progbits\\n\"\n");
  for (size_t i = 0; i < o->bundle_count; i++) {
    char bin[4096];
    snprintf(bin, sizeof(bin), "%s/bundle%zu.bin", dir, i);
    if (!write_bytes(bin, o->bundles[i].data, o->bundles[i].size)) {
      fclose(src);
      return false;
    }
    fprintf(src,
            "    \".p2align %u\\n.globl fx_bundle%zu\\n.hidden fx_bundle%zu\\n"
            "fx_bundle%zu:\\n.incbin \\\"%s\\\"\\n\"\n",
            o->align_log2 ? o->align_log2 : 12, i, i, i, bin);
  }
  fprintf(src, "    \".previous\\n\");\n");
  for (size_t i = 0; i < o->bundle_count; i++)
    fprintf(src,
            "extern const unsigned char fx_bundle%zu[] "
            "__attribute__((visibility(\"hidden\")));\n",
            i);
  fprintf(src, "#define FX_RECORDS %zu\n#define FX_INIT ", records);
  for (size_t i = 0; i < records; i++) {
    size_t t = o->target != NULL ? o->target[i] : o->bundle_count - 1 - i;
    fprintf(src, "{0x48495046u, 1, fx_bundle%zu, 0},", t);
  }
  fprintf(src, "\n%s", report_source);
  fclose(src);

  /* .hip_fatbin placed by a script the default one takes in. */
  char script[4200] = "", lld[4200] = "";
  if (o->place != FX_FATBIN_DEFAULT) {
    snprintf(path, sizeof(path), "%s/place.ld", dir);
    if ((src = fopen(path, "w")) == NULL) {
      fprintf(stderr, "fixture_program: cannot write %s\n", path);
      return false;
    }
    /* After the code, on a boundary of the largest page: the linkers
     * start a segment there (flags change). */
    fprintf(src, "%s\n",
            o->place == FX_FATBIN_END
                ? "SECTIONS { .hip_fatbin : { *(.hip_fatbin) } } "
                  "INSERT AFTER .eh_frame;"
                : "SECTIONS { .hip_fatbin ALIGN(CONSTANT(MAXPAGESIZE)) : "
                  "{ *(.hip_fatbin) } } INSERT AFTER .fini;");
    fclose(src);
    snprintf(script, sizeof(script), " -Wl,-T,'%s'", path);
  }
  /* The compiler finds "ld.lld" through -B: a link to the one asked for. */
  if (o->lld != NULL) {
    snprintf(path, sizeof(path), "%s/ld.lld", dir);
    unlink(path);
    if (symlink(o->lld, path) != 0) {
      fprintf(stderr, "fixture_program: cannot link %s\n", path);
      return false;
    }
    snprintf(lld, sizeof(lld), " -B'%s/' -fuse-ld=lld", dir);
  }
  /* lld 14 packs relocations without asking for the symbol version glibc
   * requires of a DT_RELR user (GNU ld and lld 15 add it): a reference to
   * glibc's marker symbol adds it. An executable has nothing to pack. */
  const char* relr_lld =
      o->kind == FX_PROGRAM_EXEC
          ? " -Wl,--pack-dyn-relocs=relr"
          : " -Wl,--pack-dyn-relocs=relr -DFX_DT_RELR_VERSION";
  snprintf(path, sizeof(path), "%s/program.c", dir);
  const char* cc = getenv("CC_FIXTURE");
  const char* kind = o->kind == FX_PROGRAM_SHARED ? "-shared -fPIC"
                     : o->kind == FX_PROGRAM_PIE  ? "-DFX_MAIN -pie -fPIE"
                                                 : "-DFX_MAIN -no-pie -fno-pie";
  if (asprintf(
          &cmd, "%s -O1 %s%s%s%s%s%s%s %s -o '%s' '%s' 2>&1",
          cc && *cc ? cc : "cc", kind,
          o->relr ? (o->lld ? relr_lld : " -Wl,-z,pack-relative-relocs") : "",
          o->emit_relocs ? " -g -Wl,--emit-relocs" : "",
          o->tls ? " -DFX_TLS" : "", o->big_bss ? " -DFX_BIG_BSS" : "", script,
          lld, o->flags ? o->flags : "", out, path) < 0)
    return false;
  int status = system(cmd);
  if (status != 0 || !WIFEXITED(status))
    fprintf(stderr, "fixture_program: '%s' failed (%d)\n", cmd, status);
  else
    ok = true;
  free(cmd);
  return ok;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

const char* fx_parse_report(const char* line, unsigned* magic,
                            unsigned* version, unsigned long long* reserved,
                            unsigned char* bytes, size_t cap, size_t* size) {
  int used = 0;
  if (line == NULL ||
      sscanf(line, "%x %u %llu %n", magic, version, reserved, &used) < 3)
    return NULL;
  const char* p = line + used;
  *size = 0;
  while (hexval(p[0]) >= 0 && hexval(p[1]) >= 0 && *size < cap) {
    bytes[(*size)++] = (unsigned char)(hexval(p[0]) << 4 | hexval(p[1]));
    p += 2;
  }
  while (*p != '\0' && *p != '\n')
    p++;
  return *p == '\n' ? p + 1 : p;
}

bool fx_build_library(const char* dir, const fx_entry* e, size_t count,
                      const char* out) {
  fx_buf bundle = fx_bundle(e, count);
  fx_program_opts o = {
      .kind = FX_PROGRAM_SHARED, .bundles = &bundle, .bundle_count = 1};
  bool ok = fx_build_program(dir, &o, out);
  fx_free(&bundle);
  return ok;
}
