/* SPDX-License-Identifier: MIT
 *
 * `kpack verify`: decompresses every kernel of each archive and checks it
 * against its table of contents, one line per problem; with --binary, checks
 * that every record of a kpack-ified binary finds its code objects through
 * the loader's own search.
 */
#include <getopt.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "code_object_view.h"

// clang-format off
static const char verify_manual[] =
    "NAME\n"
    "    kpack verify - check that every kernel of archives reads back\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack verify [-q] [--strict] ARCHIVE...\n"
    "    kpack verify --binary [-q] BINARY...\n"
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
    "        ARCHIVE: BINARY ARCH: code object built for T is filed under A...\n"
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
    "    With --binary, each argument is a host binary that `kpack split`\n"
    "    (or ROCm's tooling) kpack-ified. For every HIPK record of it, the\n"
    "    archives its search paths name are found (@GFXARCH@ matched against\n"
    "    the files there; with ROCM_KPACK_PATH set, the archives it names\n"
    "    instead, as the loader does), and for every architecture those\n"
    "    archives declare, the loader's search (kpack_load_code_object, run\n"
    "    as the HIP runtime runs it for an agent of that architecture) must\n"
    "    return the record's code object. Each failure is one line:\n"
    "\n"
    "        BINARY: record N (KERNEL#N) ARCH: KPACK_ERROR_NAME (meaning)\n"
    "\n"
    "    A record whose search finds no archive at all, or that cannot be\n"
    "    read, is a problem too. A binary that is not kpack-ified (fat, or\n"
    "    without HIP device code) is reported and skipped.\n"
    "\n"
    "OPTIONS\n"
    "    -q, --quiet     print problems and warnings only, no summaries\n"
    "        --strict    an architecture missing from gfx_arches is a\n"
    "                    problem, not a warning\n"
    "        --binary    the arguments are kpack-ified host binaries\n"
    "    -h, --help      print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack verify .kpack/*.kpack\n"
    "    kpack verify --binary lib/librocrand.so.1.1\n"
    "\n"
    "EXIT STATUS\n"
    "    0 no problem (warnings allowed); 1 at least one problem; 2 bad\n"
    "    command line; 130 interrupted.\n";
// clang-format on

static int verify_run(int argc, char** argv);

const cli_command cli_verify_command = {
    "verify", "check archives' kernels, or split binaries' loads (--binary)",
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
  } else if (!kpack_code_object_serves(&info, arch)) {
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
  kpack_error_t err;
  if (info->size > s->capacity) {
    /* The library allocates a larger buffer itself, only once the stored
     * bytes are known to hold that size: a lying TOC is a format error,
     * not an allocation of its size. */
    void* data = NULL;
    err = kpack_get_kernel(archive, binary, arch, &data, &size);
    if (err == KPACK_SUCCESS) {
      kpack_free_kernel(s->buffer);
      s->buffer = data;
      s->capacity = size;
    }
  } else {
    err =
        kpack_read_kernel(archive, binary, arch, s->buffer, s->capacity, &size);
  }
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
  kpack_free_kernel(s.buffer);
  kpack_close(archive);
  return !s.interrupted;
}

/* ---- kpack-ified binaries --------------------------------------------------
 */

/* A set of strings (archive paths, arches), in order of first addition. */
typedef struct vb_set {
  char** items;
  size_t count, cap;
} vb_set;

static bool set_add(vb_set* set, const char* item) {
  for (size_t i = 0; i < set->count; i++)
    if (strcmp(set->items[i], item) == 0)
      return true;
  char** p = cli_grow(set->items, set->count, &set->cap, sizeof(*p), 4);
  if (p == NULL)
    return false;
  set->items = p;
  if ((set->items[set->count] = strdup(item)) == NULL)
    return false;
  set->count++;
  return true;
}

static void set_free(vb_set* set) {
  for (size_t i = 0; i < set->count; i++)
    free(set->items[i]);
  free(set->items);
  *set = (vb_set){0};
}

/* The archives a path of the loader's list can name: a file as it is, a
 * directory's *.kpack, and with @GFXARCH@ every file its other characters
 * match (the loader expands it per agent target; here it matches any). */
static bool add_archives(vb_set* archives, const char* path) {
  static const char placeholder[] = "@GFXARCH@";
  struct stat st;
  char* pattern = NULL;
  glob_t g = {0};
  bool ok = true;
  if (strstr(path, placeholder) == NULL) {
    if (stat(path, &st) != 0)
      return true;
    if (!S_ISDIR(st.st_mode))
      return set_add(archives, path);
    if (asprintf(&pattern, "%s/*.kpack", path) < 0)
      return false;
  } else {
    /* Every glob character of the path escaped, @GFXARCH@ as '*'. */
    size_t n = strlen(path);
    if ((pattern = malloc(2 * n + 1)) == NULL)
      return false;
    char* q = pattern;
    for (const char* p = path; *p;) {
      if (strncmp(p, placeholder, sizeof(placeholder) - 1) == 0) {
        *q++ = '*';
        p += sizeof(placeholder) - 1;
        continue;
      }
      if (strchr("*?[]\\", *p) != NULL)
        *q++ = '\\';
      *q++ = *p++;
    }
    *q = '\0';
  }
  if (glob(pattern, 0, NULL, &g) == 0)
    for (size_t i = 0; ok && i < g.gl_pathc; i++)
      ok = set_add(archives, g.gl_pathv[i]);
  globfree(&g);
  free(pattern);
  return ok;
}

/* The archives the loader would consult for this record: those of
 * ROCM_KPACK_PATH when it is set (it replaces every other path), else
 * those of ROCM_KPACK_PATH_PREFIX and of the record's search paths,
 * resolved against the binary as the loader resolves them. */
static bool record_archives(const char* binary, const kpack_host_wrapper_t* w,
                            vb_set* archives) {
  const char* only = getenv("ROCM_KPACK_PATH");
  const char* list =
      only != NULL && *only ? only : getenv("ROCM_KPACK_PATH_PREFIX");
  char* copy = list != NULL ? strdup(list) : NULL;
  char* save = NULL;
  bool ok = list == NULL || copy != NULL;
  for (char* item = copy ? strtok_r(copy, ":", &save) : NULL;
       ok && item != NULL; item = strtok_r(NULL, ":", &save))
    ok = add_archives(archives, item);
  free(copy);
  if (only != NULL && *only)
    return ok;
  for (size_t i = 0; ok && i < w->search_path_count; i++) {
    char* resolved = NULL;
    if (w->search_paths[i][0] == '\0')
      continue; /* the loader drops empty paths */
    ok = kpack_resolve_search_path(binary, w->search_paths[i], &resolved) ==
             KPACK_SUCCESS &&
         add_archives(archives, resolved);
    free(resolved);
  }
  return ok;
}

/* Every record of one binary, every arch its archives declare, through
 * the loader's search. Problems are counted into *problems. */
static void verify_binary(const char* path, kpack_cache_t cache, bool quiet,
                          size_t* problems) {
  kpack_host_t* host = NULL;
  kpack_host_info_t info;
  size_t found = 0, checked = 0, own = 0;
  kpack_error_t err = kpack_host_open(path, &host);
  if (err == KPACK_SUCCESS)
    err = kpack_host_get_info(host, &info);
  if (err != KPACK_SUCCESS) {
    printf("%s: %s (%s)\n", path, kpack_error_string(err), cli_error_text(err));
    (*problems)++;
    goto done;
  }
  if (info.kind != KPACK_HOST_KPACKIFIED) {
    if (!quiet)
      printf("%s: %s, skipped\n", path,
             info.kind == KPACK_HOST_FAT ? "not kpack-ified (device code "
                                           "inside)"
                                         : "no HIP device code");
    goto done;
  }
  for (size_t r = 0; r < info.wrapper_count; r++) {
    kpack_host_wrapper_t w;
    vb_set archives = {0}, arches = {0};
    char key[64];
    kpack_host_get_wrapper(host, r, &w);
    if (w.status != KPACK_SUCCESS) {
      printf("%s: record %zu: %s (%s)\n", path, r,
             kpack_host_problem_string(w.problem),
             kpack_error_string(w.status));
      own++;
      continue;
    }
    snprintf(key, sizeof(key), "#%llu", (unsigned long long)w.reserved);
    if (w.reserved > UINT32_MAX) {
      printf(
          "%s: record %zu (%s%s): the code object index does not fit "
          "the loader's u32\n",
          path, r, w.kernel_name, key);
      own++;
      continue;
    }
    if (!record_archives(path, &w, &archives)) {
      printf("%s: record %zu: %s (%s)\n", path, r,
             kpack_error_string(KPACK_ERROR_OUT_OF_MEMORY),
             cli_error_text(KPACK_ERROR_OUT_OF_MEMORY));
      own++;
      set_free(&archives);
      continue;
    }
    for (size_t a = 0; a < archives.count; a++) {
      kpack_archive_t archive;
      size_t n = 0;
      if (kpack_open(archives.items[a], &archive) != KPACK_SUCCESS)
        continue; /* the loader's search below reports what it meets */
      kpack_get_architecture_count(archive, &n);
      for (size_t i = 0; i < n; i++) {
        const char* arch;
        if (kpack_get_architecture(archive, i, &arch) == KPACK_SUCCESS &&
            !set_add(&arches, arch))
          own++;
      }
      kpack_close(archive);
    }
    found += archives.count;
    if (arches.count == 0) {
      printf(
          "%s: record %zu (%s%s): no archive found through its search "
          "paths\n",
          path, r, w.kernel_name, key);
      own++;
    }
    for (size_t a = 0; a < arches.count; a++) {
      const char* arch = arches.items[a];
      void* code = NULL;
      size_t size = 0;
      err = kpack_resolve_code_object(
          cache, w.kernel_name, w.search_paths, w.search_path_count, path,
          (uint32_t)w.reserved, &arch, 1, &code, &size);
      checked++;
      if (err != KPACK_SUCCESS) {
        printf("%s: record %zu (%s%s) %s: %s (%s)\n", path, r, w.kernel_name,
               key, arch, kpack_error_string(err), cli_error_text(err));
        own++;
      }
      kpack_free_code_object(code);
    }
    set_free(&archives);
    set_free(&arches);
  }
  if (!quiet) {
    if (own == 0)
      printf("%s: OK, %zu record%s, %zu load%s through %zu archive path%s\n",
             path, info.wrapper_count, info.wrapper_count == 1 ? "" : "s",
             checked, checked == 1 ? "" : "s", found, found == 1 ? "" : "s");
    else
      printf("%s: %zu problem%s in %zu record%s\n", path, own,
             own == 1 ? "" : "s", info.wrapper_count,
             info.wrapper_count == 1 ? "" : "s");
  }
  *problems += own;
done:
  kpack_host_close(host);
}

static int verify_binaries(int argc, char** argv, bool quiet) {
  kpack_cache_t cache = NULL;
  size_t problems = 0;
  kpack_error_t err = kpack_cache_create(&cache);
  if (err != KPACK_SUCCESS) {
    cli_kerror("loader cache", err);
    return CLI_FAIL;
  }
  for (int i = 0; i < argc; i++) {
    if (cli_interrupted()) {
      kpack_cache_destroy(cache);
      cli_error("verify: interrupted");
      return CLI_INTERRUPTED;
    }
    verify_binary(argv[i], cache, quiet, &problems);
  }
  kpack_cache_destroy(cache);
  return problems == 0 ? CLI_OK : CLI_FAIL;
}

static int verify_run(int argc, char** argv) {
  enum { OPT_STRICT = 256, OPT_BINARY };
  static const struct option options[] = {
      {"quiet", no_argument, NULL, 'q'},
      {"strict", no_argument, NULL, OPT_STRICT},
      {"binary", no_argument, NULL, OPT_BINARY},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  bool quiet = false, strict = false, binaries = false;
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
      case OPT_BINARY:
        binaries = true;
        break;
      case 'h':
        return cli_print_manual(&cli_verify_command);
      default:
        return cli_usage_error(&cli_verify_command, "unknown option");
    }
  }
  if (optind >= argc)
    return cli_usage_error(&cli_verify_command,
                           binaries ? "no BINARY given" : "no ARCHIVE given");
  if (binaries && strict)
    return cli_usage_error(&cli_verify_command,
                           "--strict applies to archives, not --binary");
  cli_catch_signals();
  if (binaries)
    return verify_binaries(argc - optind, argv + optind, quiet);
  for (int i = optind; i < argc; i++) {
    if (!verify_archive(argv[i], quiet, strict, &problems)) {
      cli_error("verify: interrupted");
      return CLI_INTERRUPTED;
    }
  }
  return problems == 0 ? CLI_OK : CLI_FAIL;
}
