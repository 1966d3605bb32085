/* SPDX-License-Identifier: MIT
 *
 * `kpack verify`: decompresses every kernel of each archive and checks it
 * against its table of contents, one line per problem; with --binary, checks
 * that every record of each kpack-ified binary (named, or under a directory)
 * finds its code object through the loader's own search, for the agents
 * given, the arches the split recorded, or those of the archives found.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "code_object_view.h"
#include "json.h"

// clang-format off
static const char verify_manual[] =
    "NAME\n"
    "    kpack verify - check that every kernel of archives reads back\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack verify [-q] [--strict] [--json] ARCHIVE|DIR...\n"
    "    kpack verify --binary [-q] [--json] [--arch TARGET[,TARGET]...]...\n"
    "                 BINARY|DIR...\n"
    "\n"
    "DESCRIPTION\n"
    "    Opens each archive (which validates its header, table of contents\n"
    "    and frame table), decompresses every kernel and checks its size\n"
    "    against the table of contents; a zstd frame's checksum, when it has\n"
    "    one, is checked by the decompressor.\n"
    "\n"
    "    A directory DIR given as an ARCHIVE stands for the *.kpack\n"
    "    archives below it (sub-directories included, in name order), as in\n"
    "    kpackfs; one that holds none is an error.\n"
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
    "    With --binary, the arguments are host binaries that `kpack split`\n"
    "    (or ROCm's tooling) kpack-ified, or directories: every kpack-ified\n"
    "    binary under a directory is checked (the tree walked in byte order\n"
    "    of the paths, symbolic links not followed; other files, and files\n"
    "    the walk cannot read, are skipped without a word, and a directory\n"
    "    without any kpack-ified binary gets a line saying so; a file named\n"
    "    on the command line that is not a kpack-ified binary is\n"
    "    reported). For every HIPK record of a binary and every agent, the\n"
    "    loader's own search (kpack_load_code_object, as the HIP runtime\n"
    "    runs it, ROCM_KPACK_PATH and ROCM_KPACK_PATH_PREFIX included) must\n"
    "    return the record's code object. The agents are:\n"
    "      - with --arch, the targets given, as the HIP runtime names a\n"
    "        device (gfx90a:sramecc+:xnack-, amdgcn-amd-amdhsa--gfx1151);\n"
    "      - else the arches `kpack split` recorded in the binary's metadata\n"
    "        (kpack_arches): every archive the split wrote must be there;\n"
    "      - else (a binary kpack-ified without that list) the arches the\n"
    "        archives found through its search paths declare.\n"
    "    Each failure is one line naming binary, record, agent and why:\n"
    "\n"
    "        BINARY: record N (KERNEL#N) AGENT: KPACK_ERROR_NAME: WHY\n"
    "\n"
    "    WHY is one of: no archive for this arch is installed (the paths\n"
    "    looked for); no code for this GPU in this build (an --arch agent\n"
    "    none of the arches the split recorded may serve: the archive is\n"
    "    not missing, the build never had one); archive unreadable (its path and the system's error,\n"
    "    e.g. Permission denied, or the kpack status of a corrupt file);\n"
    "    the archives found do not declare this arch (each with what it\n"
    "    declares); kernel missing from the archive; kernel unreadable.\n"
    "    A record that cannot be used (bad metadata), or whose search finds\n"
    "    no archive at all when there is nothing else to check, is a\n"
    "    problem too. A binary that is not kpack-ified (fat, or without HIP\n"
    "    device code) is reported and skipped.\n"
    "\n"
    "OPTIONS\n"
    "    -q, --quiet     print problems and warnings only, no summaries\n"
    "        --strict    an architecture missing from gfx_arches is a\n"
    "                    problem, not a warning\n"
    "        --binary    the arguments are kpack-ified host binaries, or\n"
    "                    directories holding them\n"
    "        --arch TARGET[,TARGET]...\n"
    "                    with --binary: check loads for these agents\n"
    "                    (repeatable, or comma-separated); a TARGET is a\n"
    "                    processor gfxNNN, then optionally :sramecc+ or\n"
    "                    :sramecc- and :xnack+ or :xnack-, after an\n"
    "                    optional amdgcn-amd-amdhsa-- triple; anything\n"
    "                    else is a bad command line\n"
    "        --json      print one JSON document instead; of archives:\n"
    "                    {archives: [{archive, findings: [{binary, arch,\n"
    "                    severity, message}], status, reason, kernels,\n"
    "                    problems, warnings, ok}], summary: {archives,\n"
    "                    failed, problems, ok, interrupted}}, status and\n"
    "                    reason being null unless the archive could not be\n"
    "                    opened or walked; with --binary:\n"
    "                    {binaries: [{path, kind, recorded_arches, records:\n"
    "                    [{record, kernel, co_index, checked, agents:\n"
    "                    [{agent, ok, status, reason, message, archive,\n"
    "                    size}]}], ok}], summary: {binaries, skipped,\n"
    "                    records, loads, failures, ok, interrupted}}; reason\n"
    "                    is no-archive, archive-unreadable, not-declared,\n"
    "                    kernel-missing, kernel-unreadable or error; a\n"
    "                    binary or record that cannot be checked has a\n"
    "                    problem member instead\n"
    "    -h, --help      print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack verify .kpack/*.kpack\n"
    "    kpack verify --binary lib/librocrand.so.1.1\n"
    "    kpack verify --binary /opt/rocm\n"
    "    kpack verify --binary --arch gfx90a:sramecc+:xnack- --json /opt/rocm\n"
    "\n"
    "EXIT STATUS\n"
    "    0 no problem (warnings allowed; with --binary, every load\n"
    "    checked succeeded); 1 at least one problem; 2 bad command line\n"
    "    (an --arch that is no target, --arch or --json without --binary);\n"
    "    130 interrupted.\n";
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
  /* --json: findings go into the archive's "findings" array instead. */
  cli_json* json;
  bool interrupted;
  cli_progress* progress;
} verify_state;

static bool is_declared(const verify_state* s, const char* arch) {
  for (size_t i = 0; i < s->declared_count; i++)
    if (strcmp(s->declared[i], arch) == 0)
      return true;
  return false;
}

/* One finding about a kernel: a line, or a member of "findings". */
static void finding(verify_state* s, const char* binary, const char* arch,
                    bool warning, const char* what) {
  if (s->progress != NULL)
    cli_progress_end(s->progress);
  if (s->json != NULL) {
    cli_json_object(s->json, CLI_JSON_INLINE, false);
    cli_json_key_str(s->json, "binary", binary);
    cli_json_key_str(s->json, "arch", arch);
    cli_json_key_str(s->json, "severity", warning ? "warning" : "problem");
    cli_json_key_str(s->json, "message", what);
    cli_json_end(s->json);
  } else {
    printf("%s: %s %s: %s%s\n", s->path, binary, arch,
           warning ? "warning: " : "", what);
  }
  if (warning)
    s->warnings++;
  else
    s->problems++;
}

static void problem(verify_state* s, const char* binary, const char* arch,
                    const char* what) {
  finding(s, binary, arch, false, what);
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
    snprintf(what, sizeof(what),
             "cannot tell the code object's target (EF_AMDGPU_MACH 0x%02x, "
             "no amdhsa.target)",
             (unsigned)info.mach);
    finding(s, binary, arch, true, what);
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
  cli_progress_show(s->progress, false, "kpack: verify: %s: %zu kernels",
                    s->path, s->kernels);
  if (!is_declared(s, arch)) {
    static const char undeclared[] =
        "arch not declared in gfx_arches (the loader never picks it)";
    finding(s, binary, arch, !s->strict, undeclared);
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

/* The archive-wide outcome: `err` when it is not KPACK_SUCCESS, then the
 * counts (--json), or the summary line (unless quiet). */
static void archive_outcome(const verify_state* s, kpack_error_t err,
                            const char* reason, bool quiet) {
  if (s->json != NULL) {
    cli_json_end(s->json); /* findings */
    cli_json_key_str(s->json, "status",
                     err == KPACK_SUCCESS ? NULL : kpack_error_string(err));
    cli_json_key_str(s->json, "reason", err == KPACK_SUCCESS ? NULL : reason);
    cli_json_key_uint(s->json, "kernels", s->kernels);
    cli_json_key_uint(s->json, "problems", s->problems);
    cli_json_key_uint(s->json, "warnings", s->warnings);
    cli_json_key_bool(s->json, "ok", s->problems == 0);
    cli_json_end(s->json);
    return;
  }
  if (err != KPACK_SUCCESS)
    printf("%s: %s (%s)\n", s->path, kpack_error_string(err), reason);
  if (quiet || s->interrupted || (err != KPACK_SUCCESS && s->kernels == 0))
    return;
  if (s->problems == 0 && s->warnings == 0)
    printf("%s: OK, %zu kernel%s\n", s->path, s->kernels,
           s->kernels == 1 ? "" : "s");
  else if (s->problems == 0)
    printf("%s: OK, %zu kernel%s, %zu warning%s\n", s->path, s->kernels,
           s->kernels == 1 ? "" : "s", s->warnings,
           s->warnings == 1 ? "" : "s");
  else
    printf("%s: %zu problem%s in %zu kernel%s\n", s->path, s->problems,
           s->problems == 1 ? "" : "s", s->kernels, s->kernels == 1 ? "" : "s");
}

/* Verifies one archive; returns false if the run was interrupted. */
static bool verify_archive(const char* path, bool quiet, bool strict,
                           cli_json* json, size_t* problems) {
  kpack_archive_t archive;
  /* On a terminal, erased before anything is printed (a problem, the
   * archive's summary). */
  cli_progress progress = {.enabled = isatty(STDERR_FILENO) && json == NULL};
  verify_state s = {
      .path = path, .strict = strict, .json = json, .progress = &progress};
  const char** declared = NULL;
  if (json != NULL) {
    cli_json_object(json, 6, true);
    cli_json_key_str(json, "archive", path);
    cli_json_key(json, "findings");
    cli_json_array(json, 8, true);
  }
  kpack_error_t err = kpack_open(path, &archive);
  if (err != KPACK_SUCCESS) { /* kpack_open() keeps errno */
    s.problems = 1;
    archive_outcome(&s, err, cli_input_reason(path, err, errno), quiet);
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
  cli_progress_end(&progress);
  if (err != KPACK_SUCCESS)
    s.problems++;
  archive_outcome(&s, err, cli_error_text(err), quiet);
  *problems += s.problems;
  free(declared);
  kpack_free_kernel(s.buffer);
  kpack_close(archive);
  return !s.interrupted;
}

/* ---- kpack-ified binaries ------------------------------------------------ */

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

/* The arches the archives found for a record declare: what a binary
 * without recorded arches is checked for. False when out of memory. */
static bool declared_arches(const vb_set* archives, vb_set* arches) {
  for (size_t a = 0; a < archives->count; a++) {
    kpack_archive_t archive;
    size_t n = 0;
    if (kpack_open(archives->items[a], &archive) != KPACK_SUCCESS)
      continue; /* the loader's search reports what it meets */
    kpack_get_architecture_count(archive, &n);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
      const char* arch;
      if (kpack_get_architecture(archive, i, &arch) == KPACK_SUCCESS)
        ok = set_add(arches, arch);
    }
    kpack_close(archive);
    if (!ok)
      return false;
  }
  return true;
}

/* ---- agents -------------------------------------------------------------- */

/* Adds the agents of one --arch value (comma-separated targets, as the
 * HIP runtime lists a machine's agents). False, with *bad the offending
 * item (malloc'ed; NULL when out of memory) and `why` what is wrong with
 * it (kpack_target_check()), when one is empty or no target. */
static bool add_agents(vb_set* agents, const char* value, char** bad,
                       char why[160]) {
  bool ok = true;
  *bad = NULL;
  for (const char* p = value; ok;) {
    size_t len = strcspn(p, ",");
    char* item = strndup(p, len);
    if (item == NULL)
      return false;
    if (!kpack_target_check(item, why, 160)) {
      /* An empty item is best shown in the value it is missing from. */
      *bad = len > 0 ? item : strdup(value);
      if (len == 0)
        free(item);
      return false;
    }
    ok = set_add(agents, item);
    free(item);
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  return ok;
}

/* ---- one search, explained ----------------------------------------------- */

/* The events of one search that say why it ended as it did, copied (the
 * loader's pointers live only during its callback). */
typedef struct vb_event {
  kpack_trace_kind_t kind;
  kpack_error_t status;
  char* path;
  char* arches; /* ARCHIVE: declared arches, space-separated */
  int error_number;
  bool exists, is_directory;
} vb_event;

typedef struct vb_trace {
  vb_event* events;
  size_t count, cap;
  bool failed; /* out of memory while recording */
} vb_trace;

static void trace_clear(vb_trace* t) {
  for (size_t i = 0; i < t->count; i++) {
    free(t->events[i].path);
    free(t->events[i].arches);
  }
  t->count = 0;
  t->failed = false;
}

static void trace_record(const kpack_trace_event_t* ev, void* user) {
  vb_trace* t = user;
  if (ev->kind == KPACK_TRACE_LOAD || ev->kind == KPACK_TRACE_TARGET)
    return;
  vb_event* p = cli_grow(t->events, t->count, &t->cap, sizeof(*p), 16);
  if (p == NULL) {
    t->failed = true;
    return;
  }
  t->events = p;
  vb_event* e = &t->events[t->count++];
  *e = (vb_event){.kind = ev->kind,
                  .status = ev->status,
                  .error_number = ev->error_number,
                  .exists = ev->exists,
                  .is_directory = ev->is_directory};
  if (ev->path != NULL && (e->path = strdup(ev->path)) == NULL)
    t->failed = true;
  if (ev->kind == KPACK_TRACE_ARCHIVE) {
    size_t len = 1;
    for (size_t i = 0; i < ev->arch_count; i++)
      len += strlen(ev->arches[i]) + 1;
    if ((e->arches = malloc(len)) == NULL) {
      t->failed = true;
      return;
    }
    e->arches[0] = '\0';
    for (size_t i = 0; i < ev->arch_count; i++) {
      if (i > 0)
        strcat(e->arches, " ");
      strcat(e->arches, ev->arches[i]);
    }
  }
}

/* Why a search for an agent failed, in the words a user with a missing or
 * broken install needs. */
typedef enum vb_reason {
  VB_OK,
  VB_NO_ARCHIVE,        /* no archive at any path the search tried */
  VB_UNREADABLE,        /* an archive is there but does not open */
  VB_NOT_DECLARED,      /* archives opened; none declares the agent's arch */
  VB_KERNEL_MISSING,    /* an archive declares it but lacks the kernel */
  VB_KERNEL_UNREADABLE, /* the kernel is there but does not read */
  VB_OTHER,
} vb_reason;

static const char* const vb_reason_names[] = {
    "ok",           "no-archive",     "archive-unreadable",
    "not-declared", "kernel-missing", "kernel-unreadable",
    "error"};

typedef struct vb_outcome {
  vb_reason reason;
  char why[1024];
  const char* archive; /* the archive it concerns, in the trace; or NULL */
} vb_outcome;

/* Appends to o->why, truncating. */
static void why_add(vb_outcome* o, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void why_add(vb_outcome* o, const char* fmt, ...) {
  size_t used = strlen(o->why);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->why + used, sizeof(o->why) - used, fmt, ap);
  va_end(ap);
}

/* The paths of the events of `kind` whose status is `status`, as
 * "PATH, PATH" (with " declares ARCHES" after each when `declares`); at
 * most four, then how many more. Of the candidate paths, those that lead
 * to no file: missing ones, and directories (which hold no archive, or
 * the search would have found it). */
static void why_list(vb_outcome* o, const vb_trace* t, kpack_trace_kind_t kind,
                     kpack_error_t status, bool declares) {
  size_t n = 0;
  for (size_t i = 0; i < t->count; i++) {
    const vb_event* e = &t->events[i];
    if (e->kind != kind || e->status != status || e->path == NULL ||
        (kind == KPACK_TRACE_PATH && e->exists && !e->is_directory))
      continue;
    if (n++ >= 4)
      continue;
    why_add(o, "%s%s", n > 1 ? ", " : "", e->path);
    if (kind == KPACK_TRACE_PATH && e->is_directory)
      why_add(o, " (a directory without archives)");
    if (declares)
      why_add(o, " declares %s", *e->arches ? e->arches : "nothing");
  }
  if (n > 4)
    why_add(o, " and %zu more", n - 4);
  if (n == 0)
    why_add(o, "nothing");
}

static void explain(const vb_trace* t, kpack_error_t status, vb_outcome* o) {
  const vb_event* broken = NULL;
  o->why[0] = '\0';
  o->archive = NULL;
  for (size_t i = 0; i < t->count && broken == NULL; i++)
    if (t->events[i].kind == KPACK_TRACE_ARCHIVE &&
        t->events[i].status != KPACK_SUCCESS)
      broken = &t->events[i];
  if (status == KPACK_SUCCESS) {
    o->reason = VB_OK;
    for (size_t i = 0; i < t->count; i++)
      if (t->events[i].kind == KPACK_TRACE_RESULT)
        o->archive = t->events[i].path;
    return;
  }
  if (broken != NULL && (status == KPACK_ERROR_ARCHIVE_NOT_FOUND ||
                         status == KPACK_ERROR_ARCH_NOT_FOUND)) {
    /* The archive the agent needs may be this one: say why it is lost. */
    o->reason = VB_UNREADABLE;
    o->archive = broken->path;
    if (broken->error_number != 0)
      why_add(o, "archive unreadable: %s: %s", broken->path,
              strerror(broken->error_number));
    else
      why_add(o, "archive unreadable: %s: %s (%s)", broken->path,
              kpack_error_string(broken->status),
              cli_error_text(broken->status));
    return;
  }
  switch (status) {
    case KPACK_ERROR_ARCHIVE_NOT_FOUND:
      o->reason = VB_NO_ARCHIVE;
      why_add(o, "no archive for this arch is installed (looked for ");
      why_list(o, t, KPACK_TRACE_PATH, KPACK_SUCCESS, false);
      why_add(o, ")");
      break;
    case KPACK_ERROR_ARCH_NOT_FOUND:
      o->reason = VB_NOT_DECLARED;
      why_add(o, "the archives found do not declare this arch (");
      why_list(o, t, KPACK_TRACE_ARCHIVE, KPACK_SUCCESS, true);
      why_add(o, ")");
      break;
    case KPACK_ERROR_KERNEL_NOT_FOUND:
      o->reason = VB_KERNEL_MISSING;
      why_add(o, "kernel missing from ");
      why_list(o, t, KPACK_TRACE_KERNEL, KPACK_ERROR_KERNEL_NOT_FOUND, false);
      for (size_t i = 0; i < t->count && o->archive == NULL; i++)
        if (t->events[i].kind == KPACK_TRACE_KERNEL)
          o->archive = t->events[i].path;
      break;
    default: {
      const vb_event* read = NULL;
      for (size_t i = 0; i < t->count; i++)
        if (t->events[i].kind == KPACK_TRACE_KERNEL &&
            t->events[i].status == status)
          read = &t->events[i];
      if (read != NULL) {
        o->reason = VB_KERNEL_UNREADABLE;
        o->archive = read->path;
        why_add(o, "kernel unreadable in %s (%s)", read->path,
                cli_error_text(status));
      } else {
        o->reason = VB_OTHER;
        why_add(o, "%s", cli_error_text(status));
      }
    }
  }
}

/* ---- the run ------------------------------------------------------------- */

typedef enum vb_source {
  VB_FROM_AGENTS,   /* --arch */
  VB_FROM_RECORDED, /* kpack_arches */
  VB_FROM_ARCHIVES, /* declared by the archives found (no kpack_arches) */
} vb_source;

static const char* const vb_source_names[] = {"--arch", "recorded", "archives"};
static const char* const vb_source_text[] = {
    "the --arch agents", "the arches recorded by the split",
    "the arches of the archives found"};

typedef struct vb_run {
  const vb_set* agents; /* --arch; empty when not given */
  bool quiet, json;
  cli_progress progress; /* on a terminal, without --json */
  kpack_cache_t cache;
  vb_trace trace;
  cli_json out;
  /* summary */
  size_t binaries, skipped, records, loads, failures;
} vb_run;

static void json_strings(cli_json* w, const char* const* items, size_t n) {
  cli_json_array(w, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < n; i++)
    cli_json_str(w, items[i]);
  cli_json_end(w);
}

/* A failure that concerns a whole binary or record (no agent). */
static void binary_problem(vb_run* r, const char* path, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void binary_problem(vb_run* r, const char* path, const char* fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  r->failures++;
  if (r->json)
    cli_json_key_str(&r->out, "problem", what);
  else
    printf("%s: %s\n", path, what);
}

/* One record against every agent: the loader's search must return its
 * code object. */
/* With per-arch archives, a missing archive for an agent the split never
 * had code for is no broken install: says so when none of the `count`
 * arches the split recorded may serve `agent`. */
static void why_not_built(vb_outcome* o, const char* agent,
                          const char* const* recorded, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (kpack_target_may_serve(recorded[i], agent))
      return;
  char looked[sizeof(o->why)];
  const char* paths = strstr(o->why, " (looked for ");
  snprintf(looked, sizeof(looked), "%s", paths != NULL ? paths : "");
  o->why[0] = '\0';
  why_add(o, "no code for this GPU in this build: the split recorded");
  for (size_t i = 0; i < count; i++)
    why_add(o, "%s %s", i > 0 ? "," : "", recorded[i]);
  why_add(o, "%s", looked);
}

static void check_record(vb_run* r, const char* path, size_t index,
                         const kpack_host_wrapper_t* w, const char* key,
                         const vb_set* agents, const char* const* recorded,
                         size_t recorded_count) {
  if (r->json) {
    cli_json_key(&r->out, "agents");
    cli_json_array(&r->out, 10, true);
  }
  for (size_t a = 0; a < agents->count; a++) {
    const char* agent = agents->items[a];
    void* code = NULL;
    size_t size = 0;
    vb_outcome o;
    trace_clear(&r->trace);
    kpack_error_t err = kpack_resolve_code_object(
        r->cache, w->kernel_name, w->search_paths, w->search_path_count, path,
        (uint32_t)w->reserved, &agent, 1, &code, &size);
    kpack_free_code_object(code);
    if (r->trace.failed && err == KPACK_SUCCESS)
      err = KPACK_ERROR_OUT_OF_MEMORY;
    explain(&r->trace, err, &o);
    if (o.reason == VB_NO_ARCHIVE && recorded_count > 0)
      why_not_built(&o, agent, recorded, recorded_count);
    r->loads++;
    r->failures += err != KPACK_SUCCESS;
    if (r->json) {
      cli_json_object(&r->out, CLI_JSON_INLINE, false);
      cli_json_key_str(&r->out, "agent", agent);
      cli_json_key_bool(&r->out, "ok", err == KPACK_SUCCESS);
      cli_json_key_str(&r->out, "status", kpack_error_string(err));
      cli_json_key_str(&r->out, "reason",
                       err == KPACK_SUCCESS ? NULL : vb_reason_names[o.reason]);
      cli_json_key_str(&r->out, "message", err == KPACK_SUCCESS ? NULL : o.why);
      cli_json_key_str(&r->out, "archive", o.archive);
      if (err == KPACK_SUCCESS)
        cli_json_key_uint(&r->out, "size", size);
      cli_json_end(&r->out);
    } else if (err != KPACK_SUCCESS) {
      printf("%s: record %zu (%s%s) %s: %s: %s\n", path, index, w->kernel_name,
             key, agent, kpack_error_string(err), o.why);
    }
  }
  if (r->json)
    cli_json_end(&r->out);
}

/* The agents a record is checked for: --arch, else the arches the split
 * recorded, else those the archives found declare. False (a failure of
 * the record, reported) when there are none or memory ran out. */
static bool record_agents(vb_run* r, const char* path, const kpack_host_t* host,
                          size_t index, const kpack_host_wrapper_t* w,
                          const char* key, vb_set* agents, vb_source* source) {
  const char* const* recorded;
  size_t count;
  bool ok = true;
  kpack_host_get_arches(host, index, &recorded, &count);
  if (r->agents->count > 0) {
    *source = VB_FROM_AGENTS;
    for (size_t i = 0; ok && i < r->agents->count; i++)
      ok = set_add(agents, r->agents->items[i]);
  } else if (count > 0) {
    *source = VB_FROM_RECORDED;
    for (size_t i = 0; ok && i < count; i++)
      ok = set_add(agents, recorded[i]);
  } else {
    vb_set archives = {0};
    *source = VB_FROM_ARCHIVES;
    ok = record_archives(path, w, &archives) &&
         declared_arches(&archives, agents);
    set_free(&archives);
    if (ok && agents->count == 0) {
      char what[512];
      snprintf(what, sizeof(what),
               "record %zu (%s%s): no archive found through its search paths",
               index, w->kernel_name, key);
      binary_problem(r, path, "%s", what);
      return false;
    }
  }
  if (!ok)
    binary_problem(r, path, "record %zu: %s (%s)", index,
                   kpack_error_string(KPACK_ERROR_OUT_OF_MEMORY),
                   cli_error_text(KPACK_ERROR_OUT_OF_MEMORY));
  return ok;
}

/* Every record of one kpack-ified binary; *source says what its agents
 * were (the last record's, all records sharing one metadata map). */
static void check_records(vb_run* r, const char* path, const kpack_host_t* host,
                          size_t record_count, vb_source* source) {
  if (r->json) {
    cli_json_key(&r->out, "records");
    cli_json_array(&r->out, 8, true);
  }
  for (size_t i = 0; i < record_count && !cli_interrupted(); i++) {
    kpack_host_wrapper_t w;
    vb_set agents = {0};
    char key[32];
    kpack_host_get_wrapper(host, i, &w);
    snprintf(key, sizeof(key), "#%llu", (unsigned long long)w.reserved);
    size_t depth = cli_json_depth(&r->out);
    if (r->json) {
      cli_json_object(&r->out, CLI_JSON_INLINE, false);
      cli_json_key_uint(&r->out, "record", i);
      cli_json_key_str(&r->out, "kernel", w.kernel_name);
      cli_json_key_uint(&r->out, "co_index", w.reserved);
    }
    r->records++;
    if (w.status != KPACK_SUCCESS) {
      binary_problem(r, path, "record %zu: %s (%s)", i,
                     kpack_host_problem_string(w.problem),
                     kpack_error_string(w.status));
    } else if (w.reserved > UINT32_MAX) {
      binary_problem(r, path,
                     "record %zu (%s%s): the code object index does not fit "
                     "the loader's u32",
                     i, w.kernel_name, key);
    } else if (record_agents(r, path, host, i, &w, key, &agents, source)) {
      if (r->json)
        cli_json_key_str(&r->out, "checked", vb_source_names[*source]);
      const char* const* recorded = NULL;
      size_t recorded_count = 0;
      if (kpack_host_get_arches(host, i, &recorded, &recorded_count) !=
          KPACK_SUCCESS)
        recorded_count = 0;
      check_record(r, path, i, &w, key, &agents, recorded, recorded_count);
    }
    cli_json_close_to(&r->out, depth);
    set_free(&agents);
  }
  if (r->json)
    cli_json_end(&r->out);
}

/* One binary. `named`: given on the command line (a file that is not a
 * kpack-ified binary is reported) rather than found by a walk (skipped
 * without a word). */
static void verify_binary(vb_run* r, const char* path, bool named) {
  kpack_host_t* host = NULL;
  kpack_host_info_t info;
  vb_source source = VB_FROM_ARCHIVES;
  size_t depth = cli_json_depth(&r->out);
  kpack_error_t err = kpack_host_open(path, &host);
  if (err == KPACK_SUCCESS)
    err = kpack_host_get_info(host, &info);
  if (!named && (err == KPACK_ERROR_INVALID_FORMAT ||
                 (err == KPACK_SUCCESS && info.kind != KPACK_HOST_KPACKIFIED)))
    goto done; /* no kpack-ified binary: nothing to check here */
  r->binaries++;
  if (r->json) {
    cli_json_object(&r->out, 6, true);
    cli_json_key_str(&r->out, "path", path);
  }
  if (err != KPACK_SUCCESS) {
    if (r->json) {
      cli_json_key_str(&r->out, "kind", NULL);
      cli_json_key_str(&r->out, "status", kpack_error_string(err));
    }
    char why[512] = "";
    if (err == KPACK_ERROR_INVALID_FORMAT)
      kpack_host_diagnose(path, why, sizeof(why));
    binary_problem(r, path, "%s (%s)", kpack_error_string(err),
                   *why ? why : cli_error_text(err));
    if (r->json)
      cli_json_key_bool(&r->out, "ok", false);
    goto close;
  }
  if (info.kind != KPACK_HOST_KPACKIFIED) {
    const char* what = info.kind == KPACK_HOST_FAT
                           ? "not kpack-ified (device code inside)"
                           : "no HIP device code";
    r->skipped++;
    if (r->json) {
      cli_json_key_str(&r->out, "kind",
                       info.kind == KPACK_HOST_FAT ? "fat" : "none");
      cli_json_key_str(&r->out, "skipped", what);
      cli_json_key_bool(&r->out, "ok", true);
    } else if (!r->quiet) {
      printf("%s: %s, skipped\n", path, what);
    }
    goto close;
  }
  if (r->json) {
    /* One map serves every record: the first usable one's list is the
     * binary's. */
    const char* const* recorded = NULL;
    size_t count = 0;
    for (size_t i = 0; i < info.wrapper_count && count == 0; i++)
      kpack_host_get_arches(host, i, &recorded, &count);
    cli_json_key_str(&r->out, "kind", "kpack-ified");
    cli_json_key(&r->out, "recorded_arches");
    if (count > 0)
      json_strings(&r->out, recorded, count);
    else
      cli_json_null(&r->out);
  }
  size_t loads = r->loads, failures = r->failures;
  check_records(r, path, host, info.wrapper_count, &source);
  loads = r->loads - loads;
  failures = r->failures - failures;
  if (r->json) {
    cli_json_key_bool(&r->out, "ok", failures == 0);
  } else if (!r->quiet && failures == 0) {
    printf("%s: OK, %zu record%s, %zu load%s (%s)\n", path, info.wrapper_count,
           info.wrapper_count == 1 ? "" : "s", loads, loads == 1 ? "" : "s",
           vb_source_text[source]);
  } else if (!r->quiet) {
    printf("%s: %zu problem%s in %zu record%s\n", path, failures,
           failures == 1 ? "" : "s", info.wrapper_count,
           info.wrapper_count == 1 ? "" : "s");
  }
close:
  cli_json_close_to(&r->out, depth);
done:
  kpack_host_close(host);
}

/* ---- the walk ------------------------------------------------------------ */

static vb_set* walk_found; /* nftw has no user pointer */
static bool walk_failed;

/* Regular files that start like a host binary; symbolic links are not
 * followed (FTW_PHYS), so a tree is walked once whatever it links to. A
 * file the walk cannot read is no binary it can tell, like any other. */
static int walk_entry(const char* path, const struct stat* st, int type,
                      struct FTW* ftw) {
  (void)ftw;
  uint8_t head[64];
  if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size < 64)
    return 0;
  FILE* f = fopen(path, "rb");
  bool host = f != NULL && fread(head, 1, sizeof(head), f) == sizeof(head) &&
              kpack_is_host_binary(head, sizeof(head));
  if (f != NULL)
    fclose(f);
  if (host && !set_add(walk_found, path)) {
    walk_failed = true;
    return 1;
  }
  return 0;
}

static int compare_paths(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* The binaries under directory `dir`, in byte order of their paths. */
static bool walk_tree(const char* dir, vb_set* found) {
  walk_found = found;
  walk_failed = false;
  if (nftw(dir, walk_entry, 16, FTW_PHYS) != 0 && !walk_failed) {
    cli_error("%s: %s", dir, strerror(errno));
    return false;
  }
  if (walk_failed) {
    cli_error("out of memory");
    return false;
  }
  if (found->count > 1)
    qsort(found->items, found->count, sizeof(*found->items), compare_paths);
  return true;
}

/* verify_binary() under a progress line: erased before the binary's own
 * lines, drawn again after with the counts so far. */
static void verify_one(vb_run* r, const char* path, bool named) {
  cli_progress_end(&r->progress);
  verify_binary(r, path, named);
  cli_progress_show(&r->progress, false,
                    "kpack: verify: %zu binaries, %zu loads, %s", r->binaries,
                    r->loads, path);
}

static int verify_binaries(int argc, char** argv, const vb_set* agents,
                           bool quiet, bool json) {
  vb_run r = {.agents = agents,
              .quiet = quiet,
              .json = json,
              .progress = {.enabled = isatty(STDERR_FILENO) && !json}};
  int status = CLI_OK;
  kpack_error_t err = kpack_cache_create(&r.cache);
  if (err == KPACK_SUCCESS)
    err = kpack_cache_set_trace(r.cache, trace_record, &r.trace);
  if (err != KPACK_SUCCESS) {
    cli_kerror("loader cache", err);
    kpack_cache_destroy(r.cache);
    return CLI_FAIL;
  }
  cli_json_init(&r.out, stdout);
  if (json) {
    cli_json_object(&r.out, 2, true);
    cli_json_key(&r.out, "binaries");
    cli_json_array(&r.out, 4, true);
  }
  size_t in_list = cli_json_depth(&r.out);
  for (int i = 0; i < argc && status == CLI_OK; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      vb_set found = {0};
      cli_progress_end(&r.progress);
      if (!walk_tree(argv[i], &found))
        r.failures++;
      size_t before = r.binaries;
      for (size_t f = 0; f < found.count && !cli_interrupted(); f++)
        verify_one(&r, found.items[f], false);
      cli_progress_end(&r.progress);
      if (r.binaries == before && !quiet && !json)
        printf("%s: no kpack-ified binary in it\n", argv[i]);
      set_free(&found);
    } else {
      verify_one(&r, argv[i], true);
    }
    if (cli_interrupted())
      status = CLI_INTERRUPTED;
  }
  cli_progress_end(&r.progress);
  cli_json_close_to(&r.out, in_list);
  if (json) {
    cli_json_end(&r.out);
    cli_json_key(&r.out, "summary");
    cli_json_object(&r.out, CLI_JSON_INLINE, false);
    cli_json_key_uint(&r.out, "binaries", r.binaries);
    cli_json_key_uint(&r.out, "skipped", r.skipped);
    cli_json_key_uint(&r.out, "records", r.records);
    cli_json_key_uint(&r.out, "loads", r.loads);
    cli_json_key_uint(&r.out, "failures", r.failures);
    cli_json_key_bool(&r.out, "ok", r.failures == 0);
    cli_json_key_bool(&r.out, "interrupted", status == CLI_INTERRUPTED);
    cli_json_finish(&r.out);
  }
  trace_clear(&r.trace);
  free(r.trace.events);
  kpack_cache_destroy(r.cache);
  if (status == CLI_INTERRUPTED) {
    cli_error("verify: interrupted");
    return status;
  }
  return r.failures == 0 ? CLI_OK : CLI_FAIL;
}

static int verify_run(int argc, char** argv) {
  enum { OPT_STRICT = 256, OPT_BINARY, OPT_ARCH, OPT_JSON };
  static const struct option options[] = {
      {"quiet", no_argument, NULL, 'q'},
      {"strict", no_argument, NULL, OPT_STRICT},
      {"binary", no_argument, NULL, OPT_BINARY},
      {"arch", required_argument, NULL, OPT_ARCH},
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  bool quiet = false, strict = false, binaries = false, json = false;
  bool archless = true; /* no --arch given */
  vb_set agents = {0};
  size_t problems = 0;
  int c, status = CLI_OK;
  while (status == CLI_OK &&
         (c = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
    char* bad = NULL;
    char why[160];
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
      case OPT_ARCH:
        archless = false;
        if (add_agents(&agents, optarg, &bad, why))
          break;
        if (bad != NULL) {
          status =
              cli_usage_error(&cli_verify_command,
                              "--arch '%s': not a GPU target: %s", bad, why);
        } else {
          cli_error("out of memory");
          status = CLI_FAIL;
        }
        free(bad);
        break;
      case OPT_JSON:
        json = true;
        break;
      case 'h':
        set_free(&agents);
        return cli_print_manual(&cli_verify_command);
      default:
        status = cli_option_error(&cli_verify_command, argv, "qh");
    }
  }
  if (status == CLI_OK && optind >= argc)
    status = cli_usage_error(&cli_verify_command,
                             binaries ? "no BINARY given" : "no ARCHIVE given");
  else if (status == CLI_OK && binaries && strict)
    status = cli_usage_error(&cli_verify_command,
                             "--strict applies to archives, not --binary");
  else if (status == CLI_OK && !binaries && !archless)
    status = cli_usage_error(&cli_verify_command, "--arch applies to --binary");
  if (status != CLI_OK) {
    set_free(&agents);
    return status;
  }
  cli_catch_signals();
  if (binaries) {
    status =
        verify_binaries(argc - optind, argv + optind, &agents, quiet, json);
    set_free(&agents);
    return status;
  }
  if (!cli_expand_archives(argc, argv, optind, &argc, &argv))
    return CLI_FAIL; /* a directory stands for the archives in it */
  cli_json w;
  if (json) {
    cli_json_init(&w, stdout);
    cli_json_object(&w, 2, true);
    cli_json_key(&w, "archives");
    cli_json_array(&w, 4, true);
  }
  size_t bad = 0;
  for (int i = optind; i < argc && status != CLI_INTERRUPTED; i++) {
    size_t before = problems;
    if (!verify_archive(argv[i], quiet, strict, json ? &w : NULL, &problems)) {
      cli_error("verify: interrupted");
      status = CLI_INTERRUPTED;
    }
    bad += problems > before;
  }
  if (json) {
    cli_json_end(&w);
    cli_json_key(&w, "summary");
    cli_json_object(&w, CLI_JSON_INLINE, false);
    cli_json_key_uint(&w, "archives", (uint64_t)(argc - optind));
    cli_json_key_uint(&w, "failed", bad);
    cli_json_key_uint(&w, "problems", problems);
    cli_json_key_bool(&w, "ok", problems == 0 && status != CLI_INTERRUPTED);
    cli_json_key_bool(&w, "interrupted", status == CLI_INTERRUPTED);
    cli_json_finish(&w);
  }
  cli_operands_free(argc, argv);
  if (status == CLI_INTERRUPTED)
    return status;
  return problems == 0 ? CLI_OK : CLI_FAIL;
}
