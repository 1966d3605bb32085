/* SPDX-License-Identifier: MIT
 *
 * `kpack verify`: decompresses every kernel of each archive and checks it
 * against its table of contents, one line per problem.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "code_object_view.h"

static const char verify_manual[] =
    "NAME\n"
    "    kpack verify - check that every kernel of archives reads back\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack verify [-q] [--strict] ARCHIVE...\n"
    "\n"
    "DESCRIPTION\n"
    "    Opens each archive (which validates its header, table of contents\n"
    "    and frame table), decompresses every kernel and checks its size\n"
    "    against the table of contents; a zstd frame's checksum, when it has\n"
    "    one, is checked by the decompressor.\n"
    "\n"
    "    Each kernel that is an AMDGPU code object is also read and its own\n"
    "    target (from its ELF header) compared with the architecture it is\n"
    "    filed under. The loader hands that code object to every agent whose\n"
    "    search reaches the architecture, so the processors must be equal and\n"
    "    each xnack or sramecc setting the code object requires must be\n"
    "    fixed the same way by the architecture; settings it leaves open\n"
    "    (\"any\") are fine. A gfx908 object under gfx90a:xnack-, or a\n"
    "    gfx90a:xnack- object under plain gfx90a (which xnack+ agents reach),\n"
    "    is a problem naming both targets; a code object whose metadata note\n"
    "    cannot be read is one too.\n"
    "\n"
    "    Each problem is one line on standard output, the kpack status of\n"
    "    a read that failed or a sentence saying what is wrong:\n"
    "\n"
    "        ARCHIVE: BINARY ARCH: KPACK_ERROR_NAME (meaning)\n"
    "        ARCHIVE: BINARY ARCH: code object built for T is filed under "
    "A...\n"
    "\n"
    "    followed by one summary line per archive.\n"
    "\n"
    "    A kernel whose architecture the archive does not declare in\n"
    "    gfx_arches is a warning (ARCHIVE: BINARY ARCH: warning: ...), not a\n"
    "    problem: ROCm's packing tools write such archives and its reader\n"
    "    accepts them, though the loader, which only asks archives that\n"
    "    declare a target, never picks that kernel. --strict makes it a\n"
    "    problem.\n"
    "\n"
    "OPTIONS\n"
    "    -q, --quiet     print problems and warnings only, no summaries\n"
    "        --strict    an architecture missing from gfx_arches is a\n"
    "                    problem, not a warning\n"
    "    -h, --help      print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack verify .kpack/*.kpack\n"
    "\n"
    "EXIT STATUS\n"
    "    0 no problem (warnings allowed); 1 at least one problem; 2 bad\n"
    "    command line; 130 interrupted.\n";

static int verify_run(int argc, char** argv);

const cli_command cli_verify_command = {
    "verify", "decompress every kernel, check its size and its target",
    verify_manual, verify_run};

typedef struct verify_state {
  const char* path;
  const char* const* declared;
  size_t declared_count;
  void* buffer;
  size_t capacity;
  size_t kernels, problems, warnings;
  bool strict; /* undeclared arches are problems, not warnings */
  bool interrupted;
} verify_state;

static bool is_declared(const verify_state* s, const char* arch) {
  for (size_t i = 0; i < s->declared_count; i++)
    if (strcmp(s->declared[i], arch) == 0)
      return true;
  return false;
}

static void problem(verify_state* s, const char* binary, const char* arch,
                    const char* what) {
  printf("%s: %s %s: %s\n", s->path, binary, arch, what);
  s->problems++;
}

/* The loader serves a code object to every agent whose search reaches the
 * arch it is filed under, so it must run on all of them: same processor,
 * and each xnack/sramecc setting it requires fixed the same way by the
 * arch (kpack_target_serves()). Bytes that are not an AMDGPU code object
 * have no target to check. */
static void check_target(verify_state* s, const char* binary, const char* arch,
                         const void* data, size_t size) {
  char what[768];
  kpack_code_object_t* co;
  kpack_code_object_info_t info;
  if (!kpack_is_code_object(data, size))
    return;
  kpack_error_t err = kpack_code_object_parse(data, size, &co);
  if (err != KPACK_SUCCESS) {
    snprintf(what, sizeof(what), "unreadable code object: %s (%s)",
             kpack_error_string(err), cli_code_object_error_text(err));
    problem(s, binary, arch, what);
    return;
  }
  kpack_code_object_get_info(co, &info);
  if (*info.target == '\0') {
    printf(
        "%s: %s %s: warning: cannot tell the code object's target "
        "(EF_AMDGPU_MACH 0x%02x, no amdhsa.target)\n",
        s->path, binary, arch, (unsigned)info.mach);
    s->warnings++;
  } else if (!kpack_target_serves(info.target, arch)) {
    snprintf(what, sizeof(what),
             "code object built for %s is filed under %s (agents the loader "
             "sends to %s cannot all run it)",
             info.target, arch, arch);
    problem(s, binary, arch, what);
  }
  kpack_code_object_free(co);
}

static bool verify_kernel(kpack_archive_t archive, const char* binary,
                          const char* arch, const kpack_kernel_info_t* info,
                          void* user) {
  verify_state* s = user;
  char what[256];
  size_t size = 0;
  if (cli_interrupted()) {
    s->interrupted = true;
    return false;
  }
  s->kernels++;
  if (!is_declared(s, arch)) {
    static const char undeclared[] =
        "arch not declared in gfx_arches (the loader never picks it)";
    if (s->strict) {
      problem(s, binary, arch, undeclared);
    } else {
      printf("%s: %s %s: warning: %s\n", s->path, binary, arch, undeclared);
      s->warnings++;
    }
  }
  if (info->size > SIZE_MAX) {
    problem(s, binary, arch, "size does not fit in memory");
    return true;
  }
  if (info->size > s->capacity) {
    void* p = realloc(s->buffer, (size_t)info->size);
    if (p == NULL) {
      snprintf(what, sizeof(what), "%s (%s)",
               kpack_error_string(KPACK_ERROR_OUT_OF_MEMORY),
               cli_error_text(KPACK_ERROR_OUT_OF_MEMORY));
      problem(s, binary, arch, what);
      return true;
    }
    s->buffer = p;
    s->capacity = (size_t)info->size;
  }
  kpack_error_t err =
      kpack_read_kernel(archive, binary, arch, s->buffer, s->capacity, &size);
  if (err != KPACK_SUCCESS) {
    snprintf(what, sizeof(what), "%s (%s)", kpack_error_string(err),
             cli_error_text(err));
    problem(s, binary, arch, what);
  } else if (size != info->size) {
    snprintf(what, sizeof(what),
             "decompressed to %zu bytes, table of contents says %llu", size,
             (unsigned long long)info->size);
    problem(s, binary, arch, what);
  } else {
    check_target(s, binary, arch, s->buffer, size);
  }
  return true;
}

/* Verifies one archive; returns false if the run was interrupted. */
static bool verify_archive(const char* path, bool quiet, bool strict,
                           size_t* problems) {
  kpack_archive_t archive;
  verify_state s = {.path = path, .strict = strict};
  const char** declared = NULL;
  kpack_error_t err = kpack_open(path, &archive);
  if (err != KPACK_SUCCESS) {
    printf("%s: %s (%s)\n", path, kpack_error_string(err), cli_error_text(err));
    (*problems)++;
    return true;
  }
  size_t count = 0;
  err = kpack_get_architecture_count(archive, &count);
  if (err == KPACK_SUCCESS &&
      (declared = calloc(count ? count : 1, sizeof(*declared))) == NULL)
    err = KPACK_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; err == KPACK_SUCCESS && i < count; i++)
    err = kpack_get_architecture(archive, i, &declared[i]);
  s.declared = declared;
  s.declared_count = count;
  if (err == KPACK_SUCCESS)
    err = cli_for_each_kernel(archive, verify_kernel, &s);
  if (err != KPACK_SUCCESS) {
    printf("%s: %s (%s)\n", path, kpack_error_string(err), cli_error_text(err));
    s.problems++;
  }
  if (!quiet && !s.interrupted) {
    if (s.problems == 0 && s.warnings == 0)
      printf("%s: OK, %zu kernel%s\n", path, s.kernels,
             s.kernels == 1 ? "" : "s");
    else if (s.problems == 0)
      printf("%s: OK, %zu kernel%s, %zu warning%s\n", path, s.kernels,
             s.kernels == 1 ? "" : "s", s.warnings, s.warnings == 1 ? "" : "s");
    else
      printf("%s: %zu problem%s in %zu kernel%s\n", path, s.problems,
             s.problems == 1 ? "" : "s", s.kernels, s.kernels == 1 ? "" : "s");
  }
  *problems += s.problems;
  free(declared);
  free(s.buffer);
  kpack_close(archive);
  return !s.interrupted;
}

static int verify_run(int argc, char** argv) {
  enum { OPT_STRICT = 256 };
  static const struct option options[] = {
      {"quiet", no_argument, NULL, 'q'},
      {"strict", no_argument, NULL, OPT_STRICT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  bool quiet = false, strict = false;
  size_t problems = 0;
  int c;
  while ((c = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
    switch (c) {
      case 'q':
        quiet = true;
        break;
      case OPT_STRICT:
        strict = true;
        break;
      case 'h':
        return cli_print_manual(&cli_verify_command);
      default:
        return cli_usage_error(&cli_verify_command, "unknown option");
    }
  }
  if (optind >= argc)
    return cli_usage_error(&cli_verify_command, "no ARCHIVE given");
  cli_catch_signals();
  for (int i = optind; i < argc; i++) {
    if (!verify_archive(argv[i], quiet, strict, &problems)) {
      cli_error("verify: interrupted");
      return CLI_INTERRUPTED;
    }
  }
  return problems == 0 ? CLI_OK : CLI_FAIL;
}
