/* SPDX-License-Identifier: MIT
 *
 * `kpack verify`: decompresses every kernel of each archive and checks it
 * against its table of contents, one line per problem; with --binary, checks
 * that every record of each kpack-ified binary (named, or under a directory)
 * finds its code object through the loader's own search, for the agents
 * given, the arches the split recorded, or those of the archives found.
 */
#include <errno.h>
#include <getopt.h>
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
    "    without any kpack-ified binary is a problem that says so, a tree\n"
    "    never split checking nothing; a file named\n"
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
    "    checked succeeded, and each directory held a kpack-ified binary);\n"
    "    1 at least one problem; 2 bad command line\n"
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

/* --arch values: each a comma-separated list of targets (as the HIP
 * runtime lists a machine's agents). */
typedef struct vb_agents {
  char** items;
  size_t count, cap;
} vb_agents;

static void agents_free(vb_agents* a) {
  for (size_t i = 0; i < a->count; i++)
    free(a->items[i]);
  free(a->items);
  *a = (vb_agents){0};
}

/* Adds the agents of one --arch value, each once. False, with *bad the
 * offending item (malloc'ed; NULL when out of memory) and `why` what is
 * wrong with it (kpack_target_check()), when one is empty or no target. */
static bool add_agents(vb_agents* agents, const char* value, char** bad,
                       char why[160]) {
  *bad = NULL;
  for (const char* p = value;;) {
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
    bool seen = false;
    for (size_t i = 0; !seen && i < agents->count; i++)
      seen = strcmp(agents->items[i], item) == 0;
    char** grown = seen ? agents->items
                        : cli_grow(agents->items, agents->count, &agents->cap,
                                   sizeof(*grown), 4);
    if (grown == NULL) {
      free(item);
      return false;
    }
    agents->items = grown;
    if (seen)
      free(item);
    else
      agents->items[agents->count++] = item;
    if (p[len] == '\0')
      return true;
    p += len + 1;
  }
}

static const char* const vb_source_names[] = {"--arch", "recorded", "archives"};
static const char* const vb_source_text[] = {
    "the --arch agents", "the arches recorded by the split",
    "the arches of the archives found"};

/* What the command prints with, while the library checks. */
typedef struct vb_print {
  bool quiet, json;
  cli_progress progress; /* on a terminal, without --json */
  cli_json out;
} vb_print;

static void json_strings(cli_json* w, const char* const* items, size_t n) {
  cli_json_array(w, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < n; i++)
    cli_json_str(w, items[i]);
  cli_json_end(w);
}

/* One record's loads: a line per failure, or the "agents" array. */
static void print_record(vb_print* p, const kpack_verify_binary_t* b,
                         const kpack_verify_record_t* rec) {
  if (p->json) {
    cli_json_object(&p->out, CLI_JSON_INLINE, false);
    cli_json_key_uint(&p->out, "record", rec->index);
    cli_json_key_str(&p->out, "kernel", rec->kernel);
    cli_json_key_uint(&p->out, "co_index", rec->co_index);
  }
  if (rec->problem != NULL) {
    if (p->json)
      cli_json_key_str(&p->out, "problem", rec->problem);
    else
      printf("%s: %s\n", b->path, rec->problem);
  } else if (p->json) {
    cli_json_key_str(&p->out, "checked", vb_source_names[rec->checked]);
    cli_json_key(&p->out, "agents");
    cli_json_array(&p->out, 10, true);
  }
  for (size_t a = 0; a < rec->load_count; a++) {
    const kpack_verify_load_t* l = &rec->loads[a];
    bool ok = l->status == KPACK_SUCCESS;
    if (p->json) {
      cli_json_object(&p->out, CLI_JSON_INLINE, false);
      cli_json_key_str(&p->out, "agent", l->agent);
      cli_json_key_bool(&p->out, "ok", ok);
      cli_json_key_str(&p->out, "status", kpack_error_string(l->status));
      cli_json_key_str(&p->out, "reason",
                       ok ? NULL : kpack_verify_reason_name(l->reason));
      cli_json_key_str(&p->out, "message", l->message);
      cli_json_key_str(&p->out, "archive", l->archive);
      if (ok)
        cli_json_key_uint(&p->out, "size", l->size);
      cli_json_end(&p->out);
    } else if (!ok) {
      printf("%s: record %zu (%s#%llu) %s: %s: %s\n", b->path, rec->index,
             rec->kernel, (unsigned long long)rec->co_index, l->agent,
             kpack_error_string(l->status), l->message);
    }
  }
  if (p->json && rec->problem == NULL)
    cli_json_end(&p->out);
  if (p->json)
    cli_json_end(&p->out);
}

/* One binary, as the library reports it. */
static bool print_binary(const kpack_verify_binary_t* b, void* user) {
  vb_print* p = user;
  cli_progress_end(&p->progress);
  if (p->json) {
    cli_json_object(&p->out, 6, true);
    cli_json_key_str(&p->out, "path", b->path);
  }
  if (b->kind == KPACK_VERIFY_UNREADABLE) {
    if (p->json) {
      cli_json_key_str(&p->out, "kind", NULL);
      cli_json_key_str(&p->out, "status", kpack_error_string(b->status));
      cli_json_key_str(&p->out, "problem", b->problem);
      cli_json_key_bool(&p->out, "ok", false);
    } else {
      printf("%s: %s\n", b->path, b->problem);
    }
  } else if (b->kind != KPACK_VERIFY_KPACKIFIED) {
    const char* what = b->kind == KPACK_VERIFY_FAT
                           ? "not kpack-ified (device code inside)"
                           : "no HIP device code";
    if (p->json) {
      cli_json_key_str(&p->out, "kind",
                       b->kind == KPACK_VERIFY_FAT ? "fat" : "none");
      cli_json_key_str(&p->out, "skipped", what);
      cli_json_key_bool(&p->out, "ok", true);
    } else if (!p->quiet) {
      printf("%s: %s, skipped\n", b->path, what);
    }
  } else {
    if (p->json) {
      cli_json_key_str(&p->out, "kind", "kpack-ified");
      cli_json_key(&p->out, "recorded_arches");
      if (b->recorded_arch_count > 0)
        json_strings(&p->out, b->recorded_arches, b->recorded_arch_count);
      else
        cli_json_null(&p->out);
      cli_json_key(&p->out, "records");
      cli_json_array(&p->out, 8, true);
    }
    for (size_t i = 0; i < b->record_count; i++)
      print_record(p, b, &b->records[i]);
    if (p->json) {
      cli_json_end(&p->out);
      cli_json_key_bool(&p->out, "ok", b->failures == 0);
    } else if (!p->quiet && b->failures == 0) {
      printf("%s: OK, %zu record%s, %zu load%s (%s)\n", b->path,
             b->record_count, b->record_count == 1 ? "" : "s", b->loads,
             b->loads == 1 ? "" : "s", vb_source_text[b->checked]);
    } else if (!p->quiet) {
      printf("%s: %zu problem%s in %zu record%s\n", b->path, b->failures,
             b->failures == 1 ? "" : "s", b->record_count,
             b->record_count == 1 ? "" : "s");
    }
  }
  if (p->json)
    cli_json_end(&p->out);
  return true;
}

/* After each file: the progress line, drawn again with the counts. */
static bool show_progress(size_t binaries, size_t loads, const char* path,
                          void* user) {
  vb_print* p = user;
  cli_progress_show(&p->progress, false,
                    "kpack: verify: %zu binaries, %zu loads, %s", binaries,
                    loads, path);
  return true; /* an interruption cancels through the flag */
}

static void print_directory(const char* path, size_t binaries, void* user) {
  vb_print* p = user;
  cli_progress_end(&p->progress);
  if (binaries == 0 && !p->json)
    printf(
        "%s: no kpack-ified binary in it: nothing was checked (give a tree "
        "kpack split wrote)\n",
        path);
}

static void print_message(const kpack_message_t* m, void* user) {
  vb_print* p = user;
  cli_progress_end(&p->progress);
  cli_error("%s", m->text);
}

static int verify_binaries(int argc, char** argv, const vb_agents* agents,
                           bool quiet, bool json) {
  vb_print p = {.quiet = quiet,
                .json = json,
                .progress = {.enabled = isatty(STDERR_FILENO) && !json}};
  kpack_verify_options_t o;
  kpack_verify_summary_t sum;
  kpack_verify_options_init(&o, sizeof(o));
  o.agents = (const char* const*)agents->items;
  o.agent_count = agents->count;
  o.binary = print_binary;
  o.progress = show_progress;
  o.directory = print_directory;
  o.user = &p;
  o.message = print_message;
  o.message_user = &p;
  o.cancel = cli_interrupt_flag();
  cli_json_init(&p.out, stdout);
  if (json) {
    cli_json_object(&p.out, 2, true);
    cli_json_key(&p.out, "binaries");
    cli_json_array(&p.out, 4, true);
  }
  size_t in_list = cli_json_depth(&p.out);
  kpack_error_t err =
      kpack_verify_binaries(&o, (const char* const*)argv, (size_t)argc, &sum);
  cli_progress_end(&p.progress);
  cli_json_close_to(&p.out, in_list);
  if (json) {
    cli_json_end(&p.out);
    cli_json_key(&p.out, "summary");
    cli_json_object(&p.out, CLI_JSON_INLINE, false);
    cli_json_key_uint(&p.out, "binaries", sum.binaries);
    cli_json_key_uint(&p.out, "skipped", sum.skipped);
    cli_json_key_uint(&p.out, "records", sum.records);
    cli_json_key_uint(&p.out, "loads", sum.loads);
    cli_json_key_uint(&p.out, "failures", sum.failures);
    cli_json_key_bool(&p.out, "ok", sum.failures == 0);
    cli_json_key_bool(&p.out, "interrupted", err == KPACK_ERROR_CANCELLED);
    cli_json_finish(&p.out);
  }
  if (err == KPACK_ERROR_CANCELLED) {
    cli_error("verify: interrupted");
    return CLI_INTERRUPTED;
  }
  return err == KPACK_SUCCESS && sum.failures == 0 ? CLI_OK : CLI_FAIL;
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
  vb_agents agents = {0};
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
        agents_free(&agents);
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
    agents_free(&agents);
    return status;
  }
  cli_catch_signals();
  if (binaries) {
    status =
        verify_binaries(argc - optind, argv + optind, &agents, quiet, json);
    agents_free(&agents);
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
