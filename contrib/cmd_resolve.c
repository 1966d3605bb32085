/* SPDX-License-Identifier: MIT
 *
 * `kpack resolve`: runs the loader's search (libkpack's, through its trace
 * hook, so it is the real one, environment included) and shows every path,
 * archive and target it considered, and why it ended as it did.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "host_view.h"
#include "json.h"

// clang-format off
static const char resolve_manual[] =
    "NAME\n"
    "    kpack resolve - explain how the loader finds (or fails to find) a\n"
    "    code object\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack resolve [--json] [-o FILE] [--binary PATH] --kernel NAME[#N]\n"
    "                  [--co-index N] [--search-path PATH]... --arch ARCH...\n"
    "    kpack resolve [--json | --summary] [--co-index N [-o FILE]]\n"
    "                  --binary PATH --arch ARCH...\n"
    "\n"
    "DESCRIPTION\n"
    "    Runs the search kpack_load_code_object() runs for a HIP binary whose\n"
    "    HIPK metadata names kernel NAME and the given search paths, for code\n"
    "    object index N and a device whose ISA names are the --arch values in\n"
    "    priority order. ROCM_KPACK_PATH, ROCM_KPACK_PATH_PREFIX,\n"
    "    ROCM_KPACK_DISABLE and ROCM_KPACK_DEBUG apply as in the HIP runtime\n"
    "    ('\\:' is a ':' inside a name in the path lists; when an item is\n"
    "    missing but it and its neighbour joined by ':' name a file, a note\n"
    "    and the why: line say so).\n"
    "    It prints:\n"
    "      - every candidate archive path, where it came from (an embedded\n"
    "        search path, ROCM_KPACK_PATH or ROCM_KPACK_PATH_PREFIX) and\n"
    "        whether it exists; @GFXARCH@ is expanded for every compatible\n"
    "        target, directories stand for the *.kpack inside them;\n"
    "      - every archive opened, its status and the architectures it\n"
    "        declares;\n"
    "      - every compatible target tried for each arch, most specific first\n"
    "        (gfx90a:sramecc+:xnack- -> gfx90a:sramecc+, gfx90a:xnack-,\n"
    "        gfx90a), and each archive declaring it that was asked for the\n"
    "        kernel;\n"
    "      - the outcome, by status name (what kpack_load_code_object()\n"
    "        returns), with a hint when it failed. When no archive was\n"
    "        found, a why: line tells the two cases apart from the\n"
    "        archives beside the missing candidates: some are there, for\n"
    "        other arches (no code for this GPU in this build, and which\n"
    "        arches it has), or none is (the archives are not installed).\n"
    "\n"
    "    Given --binary alone (no --kernel, no --search-path), the request\n"
    "    comes from the binary itself, as when the HIP runtime loads it: each\n"
    "    HIPK record of its .hipFatBinSegment names a kernel, search paths\n"
    "    (msgpack metadata in .rocm_kpack_ref) and a code object index. The\n"
    "    search runs for every record, or for the one whose index is\n"
    "    --co-index N, through one loader cache, with relative search paths\n"
    "    resolved against the directory of PATH as given (symlinks followed,\n"
    "    as ROCm's loader does). Each record gets its search paths, as\n"
    "    written and as resolved, and the explanation above; a summary\n"
    "    table ends the output (RECORD, KERNEL, RESULT, CODE OBJECT). A\n"
    "    record the runtime could not use (an unknown magic, a pointer that\n"
    "    is 0 without a relocation or lies outside .rocm_kpack_ref, metadata\n"
    "    that does not parse) is reported with its reason. A binary that\n"
    "    still carries its device code (HIPF records and .hip_fatbin) never\n"
    "    reaches the kpack loader: resolve says so, lists the architectures\n"
    "    each of its bundles holds and which of them the agent can run\n"
    "    (LOADABLE: the same processor, and each feature the entry states\n"
    "    set the same way by an --arch, as kpack_target_serves() decides).\n"
    "\n"
    "OPTIONS\n"
    "    --kernel NAME[#N]   the HIPK kernel_name; a #N suffix sets the code\n"
    "                        object index unless --co-index is given\n"
    "    --co-index N        code object index (default 0); with --binary\n"
    "                        alone, only the record with this index\n"
    "    --search-path PATH  a HIPK kpack_search_paths entry, relative to the\n"
    "                        binary's directory (repeatable, in order)\n"
    "    --binary PATH       the host binary (default: none; relative search\n"
    "                        paths then start from the current directory);\n"
    "                        alone, the binary's own HIPK records are used\n"
    "    --arch ARCH         an agent ISA name, e.g. gfx942:sramecc+:xnack-\n"
    "                        or amdgcn-amd-amdhsa--gfx1100 (repeatable, in\n"
    "                        priority order); a name that is no GPU target\n"
    "                        (gfx9000, gfx90a:xnak-) is a bad command line\n"
    "    -o, --output FILE   write the code object found to FILE (with\n"
    "                        --binary alone, needs --co-index)\n"
    "    --json              print one JSON object {kernel, binary, arches,\n"
    "                        paths, archives, search, result}; with --binary\n"
    "                        alone {binary, kind, arches, records: [{record,\n"
    "                        kernel, co_index, search_paths, paths, archives,\n"
    "                        search, result} or {record, status, problem}]},\n"
    "                        or for a fat binary {binary, kind, arches,\n"
    "                        bundles: [{co_index, arches, loadable}]};\n"
    "                        result is {status}, plus {archive, arch,\n"
    "                        target, size} when found or {why} when no\n"
    "                        archive was found\n"
    "    --summary           with --binary alone, print the summary table\n"
    "                        only\n"
    "    -h, --help          print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack resolve --binary /opt/rocm/lib/librocblas.so.5 \\\n"
    "        --arch gfx942:sramecc+:xnack- --summary\n"
    "    kpack resolve --binary /opt/rocm/lib/librocblas.so.5 --co-index 3 \\\n"
    "        --arch gfx90a:sramecc+:xnack-\n"
    "    kpack resolve --binary /opt/rocm/lib/librocrand.so.1 \\\n"
    "        --kernel lib/librocrand.so.1 --search-path ../.kpack/rand_lib_@GFXARCH@.kpack \\\n"
    "        --arch gfx90a:sramecc+:xnack-\n"
    "    ROCM_KPACK_PATH=/opt/x/.kpack kpack resolve --kernel 'lib/libfoo.so#2' --arch gfx1100\n"
    "\n"
    "EXIT STATUS\n"
    "    0 a code object was found (with --binary alone: for every record\n"
    "    explained or, in a fat binary, for every bundle); 1 a search failed\n"
    "    (the status name is printed), a fat binary has a bundle with nothing\n"
    "    the agent runs, a record is unusable, or the binary cannot be read\n"
    "    or holds no HIP device code; 2 bad command line.\n";
// clang-format on

static int resolve_run(int argc, char** argv);

const cli_command cli_resolve_command = {
    "resolve",
    "explain the loader's search for a kernel (paths, arches, "
    "outcome)",
    resolve_manual, resolve_run};

/* A trace event, copied: the loader's pointers die with the callback. */
typedef struct rs_event {
  kpack_trace_kind_t kind;
  kpack_error_t status;
  char* path;
  char* source;
  char* arch;
  char* target;
  char** arches;
  size_t arch_count;
  size_t size;
  int error_number;
  bool exists, is_directory, opened, transient;
} rs_event;

typedef struct rs_trace {
  rs_event* events;
  size_t count, cap;
  bool failed; /* out of memory while recording */
} rs_trace;

static char* dup_or_null(const char* s, bool* failed) {
  if (s == NULL)
    return NULL;
  char* copy = strdup(s);
  if (copy == NULL)
    *failed = true;
  return copy;
}

static void record(const kpack_trace_event_t* ev, void* user) {
  rs_trace* t = user;
  rs_event* p = cli_grow(t->events, t->count, &t->cap, sizeof(*p), 32);
  if (p == NULL) {
    t->failed = true;
    return;
  }
  t->events = p;
  rs_event* e = &t->events[t->count++];
  memset(e, 0, sizeof(*e));
  e->kind = ev->kind;
  e->status = ev->status;
  e->path = dup_or_null(ev->path, &t->failed);
  e->source = dup_or_null(ev->source, &t->failed);
  e->arch = dup_or_null(ev->arch, &t->failed);
  e->target = dup_or_null(ev->target, &t->failed);
  e->size = ev->size;
  e->exists = ev->exists;
  e->is_directory = ev->is_directory;
  e->opened = ev->opened;
  e->error_number = ev->error_number;
  e->transient = ev->transient;
  if (ev->arch_count > 0 &&
      (e->arches = calloc(ev->arch_count, sizeof(*e->arches))) != NULL) {
    e->arch_count = ev->arch_count;
    for (size_t i = 0; i < ev->arch_count; i++)
      e->arches[i] = dup_or_null(ev->arches[i], &t->failed);
  } else if (ev->arch_count > 0) {
    t->failed = true;
  }
}

static void free_trace(rs_trace* t) {
  for (size_t i = 0; i < t->count; i++) {
    rs_event* e = &t->events[i];
    free(e->path);
    free(e->source);
    free(e->arch);
    free(e->target);
    for (size_t j = 0; j < e->arch_count; j++)
      free(e->arches[j]);
    free(e->arches);
  }
  free(t->events);
}

/* A loader cache whose searches are recorded in `trace`; false (reported)
 * if it cannot be had. */
static bool traced_cache(kpack_cache_t* cache, rs_trace* trace) {
  kpack_error_t err = kpack_cache_create(cache);
  if (err == KPACK_SUCCESS)
    err = kpack_cache_set_trace(*cache, record, trace);
  if (err != KPACK_SUCCESS)
    cli_kerror("loader cache", err);
  return err == KPACK_SUCCESS;
}

/* -o FILE: the code object found; false (reported) if it cannot be
 * written whole. */
static bool write_code_object(const char* output, const void* code,
                              size_t size) {
  FILE* f = fopen(output, "wb");
  bool ok = f != NULL && fwrite(code, 1, size, f) == size;
  int saved = errno;
  if (f != NULL && fclose(f) != 0 && ok) {
    saved = errno;
    ok = false;
  }
  if (!ok) /* the system's reason: "Permission denied", "No space left..." */
    cli_output_error(output, KPACK_ERROR_IO_ERROR, saved);
  return ok;
}

/* The request, as given on the command line. */
typedef struct rs_request {
  char* kernel; /* without #N */
  uint32_t co_index;
  const char* binary;
  const char** search_paths;
  size_t search_count;
  const char** arches;
  size_t arch_count;
} rs_request;

static const char* path_state(const rs_event* e) {
  return e->is_directory ? "directory (its *.kpack follow)"
         : e->exists     ? "exists"
                         : "missing";
}

static const char* hint_for(kpack_error_t status) {
  switch (status) {
    case KPACK_ERROR_ARCHIVE_NOT_FOUND:
      return "no candidate path led to an archive that opens: check the\n"
             "      search paths against the binary's location, or set\n"
             "      ROCM_KPACK_PATH";
    case KPACK_ERROR_ARCH_NOT_FOUND:
      return "archives opened, but none declares a target compatible with\n"
             "      the agent: the device's ISA is missing from this build";
    case KPACK_ERROR_KERNEL_NOT_FOUND:
      return "an archive declares a compatible target but holds no kernel\n"
             "      of this name and index: check the name (kpack list) and\n"
             "      the code object index";
    case KPACK_ERROR_NOT_IMPLEMENTED:
      return "ROCM_KPACK_DISABLE is set";
    default:
      return NULL;
  }
}

/* The agent and the loader's environment variables that are set. */
static void print_agent(const rs_request* r) {
  printf("agent   ");
  for (size_t i = 0; i < r->arch_count; i++)
    printf(" %s", r->arches[i]);
  putchar('\n');
  static const char* const env[] = {"ROCM_KPACK_PATH", "ROCM_KPACK_PATH_PREFIX",
                                    "ROCM_KPACK_DISABLE"};
  for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
    const char* value = getenv(env[i]);
    char** items = NULL;
    size_t count = 0;
    if (value == NULL)
      continue;
    printf("env      %s=%s\n", env[i], value);
    if (i == 2 || kpack_path_list_split(value, &items, &count) != KPACK_SUCCESS)
      continue;
    /* An archive name with its arch (x_gfx90a:xnack-.kpack) split in two
     * by the list's ':' is the likeliest mistake in these lists. */
    for (size_t k = 0; k < count; k++) {
      char* joined = kpack_path_list_joined(items, count, k);
      if (joined == NULL)
        continue;
      printf(
          "note     %s: '%s' does not exist, but '%s' does: write a ':' "
          "inside a name as '\\:'\n",
          env[i], items[k], joined);
      free(joined);
      k++; /* the neighbour is the other half of the same name */
    }
    kpack_path_list_free(items, count);
  }
}

/* A titled table of the explanation, or what its emptiness means. */
static void print_section(const char* title, const cli_table* t,
                          const char* empty) {
  printf("\n%s\n", title);
  if (t->rows > 0)
    cli_table_print(t, stdout);
  else
    printf("%s\n", empty);
}

/* The first archive name that ROCM_KPACK_PATH or ROCM_KPACK_PATH_PREFIX
 * splits at a ':' (two missing items that name a file when joined, as
 * print_agent()'s note says), malloc'ed, with the variable's name in
 * *variable; NULL when there is none. */
static char* split_name(const char** variable) {
  static const char* const lists[] = {"ROCM_KPACK_PATH",
                                      "ROCM_KPACK_PATH_PREFIX"};
  char* joined = NULL;
  for (size_t i = 0; joined == NULL && i < 2; i++) {
    const char* value = getenv(lists[i]);
    char** items = NULL;
    size_t count = 0;
    if (value == NULL ||
        kpack_path_list_split(value, &items, &count) != KPACK_SUCCESS)
      continue;
    for (size_t k = 0; joined == NULL && k < count; k++)
      joined = kpack_path_list_joined(items, count, k);
    kpack_path_list_free(items, count);
    *variable = lists[i];
  }
  return joined;
}

/* Why a search that found no archive did not, malloc'ed: an archive name
 * a path list split at its ':', else cli_why_not_found() from the
 * candidate paths that led to no file; NULL when the status is another or
 * nothing can be said. */
static char* why_not_found(const rs_trace* t, kpack_error_t status) {
  if (status != KPACK_ERROR_ARCHIVE_NOT_FOUND)
    return NULL;
  const char* variable;
  char* joined = split_name(&variable);
  if (joined != NULL) {
    char* why = NULL;
    if (asprintf(&why,
                 "'%s' is there, but %s split its name at the ':': write "
                 "that ':' as '\\:'",
                 joined, variable) < 0)
      why = NULL;
    free(joined);
    return why;
  }
  const char** missing = calloc(t->count ? t->count : 1, sizeof(*missing));
  size_t count = 0;
  if (missing == NULL)
    return NULL;
  for (size_t i = 0; i < t->count; i++)
    if (t->events[i].kind == KPACK_TRACE_PATH && !t->events[i].exists)
      missing[count++] = t->events[i].path;
  char* why = cli_why_not_found(missing, count);
  free(missing);
  return why;
}

/* The search a trace recorded: candidate paths, archives, targets tried and
 * the outcome. */
static void print_search(const rs_trace* t, kpack_error_t status) {
  static const char* const path_headers[] = {"SOURCE", "PATH", "STATE"};
  static const char* const archive_headers[] = {"ARCHIVE", "STATUS",
                                                "DECLARES"};
  static const char* const search_headers[] = {"ARCH", "TARGET", "ARCHIVE",
                                               "RESULT"};
  cli_table paths = {.cols = 3, .headers = path_headers};
  cli_table archives = {.cols = 3, .headers = archive_headers};
  cli_table search = {.cols = 4, .headers = search_headers};
  const rs_event* result = NULL;

  for (size_t i = 0; i < t->count; i++) {
    const rs_event* e = &t->events[i];
    switch (e->kind) {
      case KPACK_TRACE_PATH:
        cli_table_row(&paths, "%s\t%s\t%s", e->source, e->path, path_state(e));
        break;
      case KPACK_TRACE_ARCHIVE: {
        char* declares = NULL;
        size_t len = 0;
        FILE* f = open_memstream(&declares, &len);
        if (f != NULL) {
          for (size_t j = 0; j < e->arch_count; j++)
            fprintf(f, "%s%s", j ? " " : "", e->arches[j]);
          fclose(f);
        }
        char reason[160] = "";
        if (e->error_number != 0 || e->transient)
          snprintf(reason, sizeof(reason), " (%s%s%s)",
                   e->error_number ? strerror(e->error_number) : "",
                   e->error_number && e->transient ? ", " : "",
                   e->transient ? "transient: tried again next load" : "");
        cli_table_row(&archives, "%s\t%s%s\t%s", e->path,
                      kpack_error_string(e->status), reason,
                      declares && *declares ? declares : "-");
        free(declares);
        break;
      }
      case KPACK_TRACE_TARGET: {
        /* The archives asked for this target follow as KERNEL events,
         * possibly after the ARCHIVE events of archives opened for it. */
        bool tried = false;
        for (size_t j = i + 1; j < t->count && !tried; j++) {
          if (t->events[j].kind == KPACK_TRACE_TARGET ||
              t->events[j].kind == KPACK_TRACE_RESULT)
            break;
          tried = t->events[j].kind == KPACK_TRACE_KERNEL;
        }
        if (!tried)
          cli_table_row(&search, "%s\t%s\t-\tno archive declares it", e->arch,
                        e->target);
        break;
      }
      case KPACK_TRACE_KERNEL:
        cli_table_row(&search, "%s\t%s\t%s\t%s", e->arch, e->target, e->path,
                      e->status == KPACK_SUCCESS ? "found"
                      : e->status == KPACK_ERROR_KERNEL_NOT_FOUND
                          ? "declared, kernel not in it"
                          : kpack_error_string(e->status));
        break;
      case KPACK_TRACE_RESULT:
        result = e;
        break;
      case KPACK_TRACE_LOAD:
        break;
    }
  }
  print_section("CANDIDATE PATHS", &paths,
                "(none: no search path and no ROCM_KPACK_PATH)");
  print_section("ARCHIVES", &archives, "(none: no candidate path exists)");
  print_section("SEARCH", &search, "(not run)");
  printf("\nRESULT   %s", kpack_error_string(status));
  if (status == KPACK_SUCCESS && result != NULL)
    printf(": %s code object, %zu bytes, from %s\n", result->target,
           result->size, result->path);
  else
    printf(" (%s)\n", cli_error_text(status));
  char* why = why_not_found(t, status);
  const char* variable;
  char* joined = split_name(&variable);
  if (why != NULL)
    printf("why:     %s\n", why);
  /* The why of a split name says what to do; the hint would not. */
  const char* hint = joined == NULL || why == NULL ? hint_for(status) : NULL;
  if (hint != NULL)
    printf("hint: %s\n", hint);
  free(why);
  free(joined);
  cli_table_free(&paths);
  cli_table_free(&archives);
  cli_table_free(&search);
}

static void print_human(const rs_request* r, const rs_trace* t,
                        const char* kernel, kpack_error_t status) {
  printf("kernel   %s\n", kernel);
  printf("binary   %s\n", r->binary ? r->binary : "(none)");
  print_agent(r);
  print_search(t, status);
}

static void json_string_array(cli_json* w, char* const* items, size_t count) {
  cli_json_array(w, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < count; i++)
    cli_json_str(w, items[i]);
  cli_json_end(w);
}

/* The members "paths", "archives", "search" and "result" of a search, each
 * on a line of its own. */
static void print_json_search(cli_json* w, const rs_trace* t,
                              kpack_error_t status) {
  const rs_event* result = NULL;
  cli_json_break(w, 1);
  cli_json_key(w, "paths");
  cli_json_array(w, 2, false);
  for (size_t i = 0; i < t->count; i++) {
    const rs_event* e = &t->events[i];
    if (e->kind != KPACK_TRACE_PATH)
      continue;
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_json_key_str(w, "path", e->path);
    cli_json_key_str(w, "source", e->source);
    cli_json_key_bool(w, "exists", e->exists);
    cli_json_key_bool(w, "is_directory", e->is_directory);
    cli_json_end(w);
  }
  cli_json_end(w);
  cli_json_break(w, 1);
  cli_json_key(w, "archives");
  cli_json_array(w, 2, false);
  for (size_t i = 0; i < t->count; i++) {
    const rs_event* e = &t->events[i];
    if (e->kind != KPACK_TRACE_ARCHIVE)
      continue;
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_json_key_str(w, "path", e->path);
    cli_json_key_str(w, "status", kpack_error_string(e->status));
    cli_json_key_str(w, "error",
                     e->error_number ? strerror(e->error_number) : NULL);
    cli_json_key_bool(w, "transient", e->transient);
    cli_json_key_bool(w, "opened", e->opened);
    cli_json_key(w, "arches");
    json_string_array(w, e->arches, e->arch_count);
    cli_json_end(w);
  }
  cli_json_end(w);
  cli_json_break(w, 1);
  cli_json_key(w, "search");
  cli_json_array(w, 2, false);
  size_t in_search = cli_json_depth(w);
  for (size_t i = 0; i < t->count; i++) {
    const rs_event* e = &t->events[i];
    if (e->kind == KPACK_TRACE_TARGET) {
      cli_json_close_to(w, in_search); /* the previous target's */
      cli_json_object(w, CLI_JSON_INLINE, false);
      cli_json_key_str(w, "arch", e->arch);
      cli_json_key_str(w, "target", e->target);
      cli_json_key(w, "tried");
      cli_json_array(w, CLI_JSON_INLINE, false);
    } else if (e->kind == KPACK_TRACE_KERNEL && cli_json_depth(w) > in_search) {
      cli_json_object(w, CLI_JSON_INLINE, false);
      cli_json_key_str(w, "archive", e->path);
      cli_json_key_str(w, "status", kpack_error_string(e->status));
      cli_json_end(w);
    } else if (e->kind == KPACK_TRACE_RESULT) {
      result = e;
    }
  }
  cli_json_close_to(w, in_search);
  cli_json_end(w);
  cli_json_break(w, 1);
  cli_json_key(w, "result");
  cli_json_object(w, CLI_JSON_INLINE, false);
  cli_json_key_str(w, "status", kpack_error_string(status));
  if (status == KPACK_SUCCESS && result != NULL) {
    cli_json_key_str(w, "archive", result->path);
    cli_json_key_str(w, "arch", result->arch);
    cli_json_key_str(w, "target", result->target);
    cli_json_key_uint(w, "size", result->size);
  }
  char* why = why_not_found(t, status);
  if (why != NULL)
    cli_json_key_str(w, "why", why);
  free(why);
  cli_json_end(w);
}

static void print_json(const rs_request* r, const rs_trace* t,
                       const char* kernel, kpack_error_t status) {
  cli_json w;
  cli_json_init(&w, stdout);
  cli_json_object(&w, CLI_JSON_INLINE, false);
  cli_json_key_str(&w, "kernel", kernel);
  cli_json_key_str(&w, "binary", r->binary);
  cli_json_key(&w, "arches");
  json_string_array(&w, (char* const*)r->arches, r->arch_count);
  print_json_search(&w, t, status);
  cli_json_finish(&w);
}

/* ---- the binary's own records -------------------------------------------- */

typedef struct fat_explain {
  const rs_request* r;
  cli_json* json; /* NULL for the table */
  cli_table table;
  size_t loadable; /* bundles with an entry the agent can load */
} fat_explain;

static bool explain_bundle(const char* path, size_t co, const kpack_bundle_t* b,
                           void* user) {
  fat_explain* s = user;
  const rs_request* r = s->r;
  kpack_bundle_info_t info;
  char comp[32];
  (void)path;
  kpack_bundle_get_info(b, &info);
  size_t n;
  if (s->json != NULL) {
    cli_json_object(s->json, CLI_JSON_INLINE, false);
    cli_json_key_uint(s->json, "co_index", co);
    cli_json_key(s->json, "arches");
    cli_bundle_arches_json(s->json, b, NULL, 0);
    cli_json_key(s->json, "loadable");
    n = cli_bundle_arches_json(s->json, b, r->arches, r->arch_count);
    cli_json_end(s->json);
    s->loadable += n > 0;
    return true;
  }
  char* arches = cli_bundle_arches(b, NULL, 0, NULL);
  char* loadable = cli_bundle_arches(b, r->arches, r->arch_count, &n);
  s->loadable += n > 0;
  cli_table_row(&s->table, "%zu\t%s\t%s\t%s", co,
                cli_bundle_compression(&info, comp),
                arches && *arches ? arches : "(no GPU code)",
                n > 0 && loadable ? loadable : "none");
  free(arches);
  free(loadable);
  return true;
}

/* A fat binary never reaches the kpack loader: say so, show what it
 * carries and which of it the agent can run (cli_agent_loads(): the
 * library's kpack_target_serves(), as verify checks a code object). */
static int explain_fat(const char* path, const rs_request* r, bool json) {
  cli_json w;
  static const char* const headers[] = {"CO", "BUNDLE", "ARCHES", "LOADABLE"};
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  kpack_error_t err = kpack_fatbin_open(path, &fb);
  if (err != KPACK_SUCCESS) {
    cli_host_error(path, err);
    return CLI_FAIL;
  }
  kpack_fatbin_get_info(fb, &info);
  fat_explain s = {.r = r, .json = json ? &w : NULL};
  s.table = (cli_table){.cols = 4, .headers = headers};
  if (json) {
    cli_json_init(&w, stdout);
    cli_json_object(&w, CLI_JSON_INLINE, false);
    cli_json_key_str(&w, "binary", path);
    cli_json_key_str(&w, "kind", "fat");
    cli_json_key(&w, "arches");
    json_string_array(&w, (char* const*)r->arches, r->arch_count);
    cli_json_key(&w, "bundles");
    cli_json_array(&w, CLI_JSON_INLINE, false);
  } else {
    printf("binary   %s\n", path);
    print_agent(r);
    printf(
        "\nThis is a fat binary: its device code is inside it (%zu code "
        "object%s in\n.hip_fatbin, HIPF records), so the HIP runtime loads "
        "it from there and\nnever asks the kpack loader. Its bundles hold:\n\n",
        info.bundle_count, info.bundle_count == 1 ? "" : "s");
  }
  bool ok = cli_for_each_bundle(path, fb, explain_bundle, &s);
  if (json) {
    cli_json_finish(&w);
  } else {
    cli_table_print(&s.table, stdout);
    printf(
        "\nLOADABLE: the entries the agent can run (the same processor, and "
        "each\nfeature the entry states set the same way by an --arch). "
        "%zu of %zu code\nobject%s %s one%s\n",
        s.loadable, info.bundle_count, info.bundle_count == 1 ? "" : "s",
        info.bundle_count == 1 ? "has" : "have",
        s.loadable < info.bundle_count
            ? "; where LOADABLE is none, the HIP runtime has\nnothing to "
              "load on this agent."
            : ".");
  }
  cli_table_free(&s.table);
  kpack_fatbin_close(fb);
  /* A bundle with nothing the agent runs is a module the runtime cannot
   * load (hipErrorNoBinaryForGpu): a failed search, like a kpack miss; so
   * is a fat binary with no code object at all, which has nothing to
   * load on any agent. */
  if (ok && info.bundle_count == 0)
    cli_error("%s: .hip_fatbin holds no code object: nothing to load", path);
  return ok && info.bundle_count > 0 && s.loadable == info.bundle_count
             ? CLI_OK
             : CLI_FAIL;
}

/* One row of the closing summary. */
static void summary_row(cli_table* sum, size_t index, const char* kernel,
                        kpack_error_t status, const rs_trace* t) {
  const rs_event* result = NULL;
  for (size_t i = 0; t != NULL && i < t->count; i++)
    if (t->events[i].kind == KPACK_TRACE_RESULT)
      result = &t->events[i];
  /* Names are escaped: a tab or newline in one must not shift columns. */
  kernel = cli_table_text(sum, kernel);
  if (status == KPACK_SUCCESS && result != NULL)
    cli_table_row(sum, "%zu\t%s\t%s\t%s from %s", index, kernel,
                  kpack_error_string(status),
                  cli_table_text(sum, result->target),
                  cli_table_text(sum, result->path));
  else
    cli_table_row(sum, "%zu\t%s\t%s\t%s", index, kernel,
                  kpack_error_string(status), cli_error_text(status));
}

/* Runs the loader's search for every HIPK record of a kpack-ified binary
 * (those whose co_index is `only`, when given), as the HIP runtime would:
 * one loader cache for the process, the binary as opened, the record's own
 * kernel name, search paths and index. */
static int explain_records(const char* path, const kpack_host_t* host,
                           const rs_request* r, bool json, bool summary,
                           bool one_index, uint32_t only, const char* output) {
  static const char* const sum_headers[] = {"RECORD", "KERNEL", "RESULT",
                                            "CODE OBJECT"};
  kpack_host_info_t info;
  kpack_cache_t cache = NULL;
  rs_trace trace = {0};
  cli_table sum = {.cols = 4, .headers = sum_headers};
  size_t explained = 0, found = 0;
  int status = CLI_FAIL;
  cli_json jw;
  cli_json_init(&jw, stdout);
  void* code = NULL;
  size_t code_size = 0;

  kpack_host_get_info(host, &info);
  if (!traced_cache(&cache, &trace))
    goto done;
  if (json) {
    cli_json_object(&jw, CLI_JSON_INLINE, false);
    cli_json_key_str(&jw, "binary", path);
    cli_json_key_str(&jw, "kind", "kpack-ified");
    cli_json_key(&jw, "arches");
    json_string_array(&jw, (char* const*)r->arches, r->arch_count);
    cli_json_key(&jw, "records");
    cli_json_array(&jw, 1, false);
  } else {
    printf("binary   %s (kpack-ified: %zu record%s in .hipFatBinSegment)\n",
           path, info.wrapper_count, info.wrapper_count == 1 ? "" : "s");
    print_agent(r);
  }
  for (size_t i = 0; i < info.wrapper_count; i++) {
    kpack_host_wrapper_t w;
    char* kernel = NULL;
    kpack_host_get_wrapper(host, i, &w);
    bool hipk = w.magic == KPACK_HOST_HIPK_MAGIC;
    if (one_index && (!hipk || w.reserved != only))
      continue;
    if (hipk && w.status == KPACK_SUCCESS &&
        asprintf(&kernel, "%s#%llu", w.kernel_name,
                 (unsigned long long)w.reserved) < 0) {
      cli_error("out of memory");
      goto done;
    }
    explained++;
    /* With --summary, the records' sections are not printed. */
    FILE* out = summary ? NULL : stdout;
    if (json) {
      cli_json_object(&jw, CLI_JSON_INLINE, false);
      cli_json_key_uint(&jw, "record", i);
    } else if (out != NULL)
      printf("\n== record %zu%s%s\n", i, kernel ? ": kernel " : "",
             kernel ? kernel : "");

    /* A record the runtime could not use, or one that is not HIPK. */
    kpack_error_t outcome = w.status;
    if (outcome == KPACK_SUCCESS && (!hipk || w.reserved > UINT32_MAX))
      outcome = KPACK_ERROR_INVALID_FORMAT;
    if (outcome != KPACK_SUCCESS) {
      const char* why =
          w.status != KPACK_SUCCESS ? kpack_host_problem_string(w.problem)
          : !hipk ? "a HIPF record: its device code is in .hip_fatbin"
                  : "the code object index does not fit the loader's "
                    "32-bit argument";
      if (json) {
        cli_json_key_str(&jw, "status", kpack_error_string(outcome));
        cli_json_key_str(&jw, "problem", why);
        cli_json_end(&jw);
      } else if (out != NULL) {
        printf("magic 0x%08x, version %u\n", (unsigned)w.magic,
               (unsigned)w.version);
        printf("RESULT   %s: %s\n", kpack_error_string(outcome), why);
      }
      summary_row(&sum, i, kernel ? kernel : "-", outcome, NULL);
      free(kernel);
      continue;
    }

    if (json) {
      cli_json_key_str(&jw, "kernel", kernel);
      cli_json_key_uint(&jw, "co_index", w.reserved);
      cli_json_key(&jw, "search_paths");
      cli_host_json_search_paths(&jw, path, &w);
    } else if (out != NULL) {
      printf("search paths (as written -> as the loader resolves them)\n");
      for (size_t j = 0; j < w.search_path_count; j++) {
        char* resolved = NULL;
        printf("  %s -> %s\n", cli_search_path_written(w.search_paths[j]),
               cli_search_path_shown(path, w.search_paths[j], &resolved));
        free(resolved);
      }
    }

    kpack_free_code_object(code);
    code = NULL;
    kpack_error_t err = kpack_resolve_code_object(
        cache, w.kernel_name, w.search_paths, w.search_path_count, path,
        (uint32_t)w.reserved, r->arches, r->arch_count, &code, &code_size);
    if (trace.failed) {
      cli_error("out of memory while recording the search");
      free(kernel);
      goto done;
    }
    if (json) {
      print_json_search(&jw, &trace, err);
      cli_json_end(&jw);
    } else if (out != NULL) {
      print_search(&trace, err);
    }
    found += err == KPACK_SUCCESS;
    summary_row(&sum, i, kernel, err, &trace);
    free_trace(&trace);
    memset(&trace, 0, sizeof(trace));
    free(kernel);
  }
  if (json) {
    cli_json_finish(&jw);
  } else if (explained == 0) {
    printf("\n(no HIPK record with co_index %u)\n", (unsigned)only);
  } else {
    printf("\nSUMMARY: %zu of %zu found\n", found, explained);
    cli_table_print(&sum, stdout);
  }
  if (explained == 0 || found != explained)
    goto done;
  if (output != NULL && !write_code_object(output, code, code_size))
    goto done;
  status = CLI_OK;
done:
  kpack_free_code_object(code);
  kpack_cache_destroy(cache);
  free_trace(&trace);
  cli_table_free(&sum);
  return status;
}

/* --binary without --kernel: the records of the binary itself. */
static int resolve_binary(const rs_request* r, bool json, bool summary,
                          bool one_index, const char* output) {
  kpack_host_t* host;
  kpack_host_info_t info;
  kpack_error_t err = kpack_host_open(r->binary, &host);
  if (err != KPACK_SUCCESS) {
    cli_host_error(r->binary, err);
    return CLI_FAIL;
  }
  kpack_host_get_info(host, &info);
  int status;
  if (info.kind == KPACK_HOST_KPACKIFIED) {
    status = explain_records(r->binary, host, r, json, summary, one_index,
                             r->co_index, output);
  } else if (info.kind == KPACK_HOST_FAT) {
    status = explain_fat(r->binary, r, json);
  } else {
    cli_error(
        "%s: no HIP device code (no .hipFatBinSegment, no .hip_fatbin): "
        "the HIP runtime registers nothing from it",
        r->binary);
    status = CLI_FAIL;
  }
  kpack_host_close(host);
  return status;
}

/* "name#N" -> name and N, when N is all digits and fits. */
static bool split_index(const char* kernel, char** name, uint32_t* index) {
  const char* hash = strrchr(kernel, '#');
  unsigned long v;
  if (hash == NULL || !cli_parse_uint(hash + 1, 0, UINT32_MAX, &v))
    return false;
  *name = strndup(kernel, (size_t)(hash - kernel));
  *index = (uint32_t)v;
  return *name != NULL;
}

static int resolve_run(int argc, char** argv) {
  enum {
    OPT_KERNEL = 256,
    OPT_CO_INDEX,
    OPT_SEARCH,
    OPT_BINARY,
    OPT_ARCH,
    OPT_JSON,
    OPT_SUMMARY
  };
  static const struct option options[] = {
      {"kernel", required_argument, NULL, OPT_KERNEL},
      {"co-index", required_argument, NULL, OPT_CO_INDEX},
      {"search-path", required_argument, NULL, OPT_SEARCH},
      {"binary", required_argument, NULL, OPT_BINARY},
      {"arch", required_argument, NULL, OPT_ARCH},
      {"output", required_argument, NULL, 'o'},
      {"json", no_argument, NULL, OPT_JSON},
      {"summary", no_argument, NULL, OPT_SUMMARY},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const cli_command* cmd = &cli_resolve_command;
  rs_request r = {0};
  rs_trace trace = {0};
  const char* kernel_arg = NULL;
  const char* output = NULL;
  bool json = false, index_given = false, summary = false;
  unsigned long value;
  int c, status = CLI_FAIL;
  kpack_cache_t cache = NULL;
  void* code = NULL;
  size_t code_size = 0;
  char* full_name = NULL;

  r.search_paths = calloc((size_t)argc, sizeof(*r.search_paths));
  r.arches = calloc((size_t)argc, sizeof(*r.arches));
  if (r.search_paths == NULL || r.arches == NULL) {
    cli_error("out of memory");
    goto done;
  }
  while ((c = getopt_long(argc, argv, "o:h", options, NULL)) != -1) {
    switch (c) {
      case OPT_KERNEL:
        kernel_arg = optarg;
        break;
      case OPT_CO_INDEX:
        if (!cli_parse_uint(optarg, 0, UINT32_MAX, &value)) {
          status = cli_usage_error(cmd, "--co-index takes an integer");
          goto done;
        }
        r.co_index = (uint32_t)value;
        index_given = true;
        break;
      case OPT_SEARCH:
        r.search_paths[r.search_count++] = optarg;
        break;
      case OPT_BINARY:
        r.binary = optarg;
        break;
      case OPT_ARCH:
        if (!cli_check_target(cmd, "--arch", optarg)) {
          status = CLI_USAGE;
          goto done;
        }
        r.arches[r.arch_count++] = optarg;
        break;
      case 'o':
        output = optarg;
        break;
      case OPT_JSON:
        json = true;
        break;
      case OPT_SUMMARY:
        summary = true;
        break;
      case 'h':
        status = cli_print_manual(cmd);
        goto done;
      default:
        status = cli_option_error(cmd, argv, "o:h");
        goto done;
    }
  }
  if (optind < argc) {
    status = cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    goto done;
  }
  if (r.arch_count == 0) {
    status = cli_usage_error(cmd, "at least one --arch is required");
    goto done;
  }
  bool from_binary =
      kernel_arg == NULL && r.search_count == 0 && r.binary != NULL;
  if (summary && (!from_binary || json)) {
    status = cli_usage_error(cmd,
                             "--summary goes with --binary alone, without "
                             "--json");
    goto done;
  }
  if (from_binary) {
    if (output != NULL && !index_given) {
      status = cli_usage_error(cmd,
                               "-o with --binary alone needs --co-index: "
                               "which record's code object?");
      goto done;
    }
    status = resolve_binary(&r, json, summary, index_given, output);
    goto done;
  }
  if (kernel_arg == NULL) {
    status = cli_usage_error(cmd,
                             "--kernel is required, unless --binary alone "
                             "names a kpack-ified binary to read it from");
    goto done;
  }
  if (index_given || !split_index(kernel_arg, &r.kernel, &r.co_index))
    r.kernel = strdup(kernel_arg);
  if (r.kernel == NULL ||
      asprintf(&full_name, "%s#%u", r.kernel, (unsigned)r.co_index) < 0) {
    full_name = NULL;
    cli_error("out of memory");
    goto done;
  }

  if (!traced_cache(&cache, &trace))
    goto done;
  /* Without a binary, relative search paths start from here. */
  kpack_error_t err =
      kpack_resolve_code_object(cache, r.kernel, r.search_paths, r.search_count,
                                r.binary ? r.binary : "./", r.co_index,
                                r.arches, r.arch_count, &code, &code_size);
  if (trace.failed) {
    cli_error("out of memory while recording the search");
    goto done;
  }
  if (json)
    print_json(&r, &trace, full_name, err);
  else
    print_human(&r, &trace, full_name, err);
  if (err != KPACK_SUCCESS)
    goto done;
  if (output != NULL && !write_code_object(output, code, code_size))
    goto done;
  status = CLI_OK;
done:
  kpack_free_code_object(code);
  kpack_cache_destroy(cache);
  free_trace(&trace);
  free(full_name);
  free(r.kernel);
  free(r.search_paths);
  free(r.arches);
  return status;
}
