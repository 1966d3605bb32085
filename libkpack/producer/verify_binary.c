/* SPDX-License-Identifier: MIT
 *
 * Checking split binaries (kpack_verify_binary.h): each HIPK record of a
 * kpack-ified binary searched for by the loader, for every agent, and each
 * failure explained from the search's own trace (kpack_trace.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/report.h"
#include "rocm_kpack/kpack_ext.h"

KPACK_API const char* kpack_verify_reason_name(kpack_verify_reason_t reason) {
  switch (reason) {
    case KPACK_VERIFY_OK:
      return "ok";
    case KPACK_VERIFY_NO_ARCHIVE:
      return "no-archive";
    case KPACK_VERIFY_ARCHIVE_UNREADABLE:
      return "archive-unreadable";
    case KPACK_VERIFY_NOT_DECLARED:
      return "not-declared";
    case KPACK_VERIFY_KERNEL_MISSING:
      return "kernel-missing";
    case KPACK_VERIFY_KERNEL_UNREADABLE:
      return "kernel-unreadable";
    case KPACK_VERIFY_ERROR:
      break;
  }
  return "error";
}

KPACK_API void kpack_verify_options_init(kpack_verify_options_t* options,
                                         size_t size) {
  if (options == NULL)
    return;
  kpack_verify_options_t defaults = {.size = size};
  memcpy(options, &defaults, size < sizeof(defaults) ? size : sizeof(defaults));
}

/* ---- archives a record can reach ----------------------------------------- */

/* A set of strings (archive paths, arches), in order of first addition. */
typedef struct vb_set {
  char** items;
  size_t count, cap;
} vb_set;

static bool set_add(vb_set* set, const char* item) {
  for (size_t i = 0; i < set->count; i++)
    if (strcmp(set->items[i], item) == 0)
      return true;
  char** p = kp_grow(set->items, set->count, &set->cap, sizeof(*p), 4);
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
  vb_event* p = kp_grow(t->events, t->count, &t->cap, sizeof(*p), 16);
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

typedef struct vb_outcome {
  kpack_verify_reason_t reason;
  char why[1024];
  const char* archive; /* the archive it concerns, in the trace; or NULL */
  vb_set paths;        /* the paths the failure involves */
  bool failed;         /* out of memory while collecting them */
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
    if (!set_add(&o->paths, e->path))
      o->failed = true;
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
    o->reason = KPACK_VERIFY_OK;
    for (size_t i = 0; i < t->count; i++)
      if (t->events[i].kind == KPACK_TRACE_RESULT)
        o->archive = t->events[i].path;
    return;
  }
  if (broken != NULL && (status == KPACK_ERROR_ARCHIVE_NOT_FOUND ||
                         status == KPACK_ERROR_ARCH_NOT_FOUND)) {
    /* The archive the agent needs may be this one: say why it is lost. */
    o->reason = KPACK_VERIFY_ARCHIVE_UNREADABLE;
    o->archive = broken->path;
    o->failed |= !set_add(&o->paths, broken->path);
    if (broken->error_number != 0)
      why_add(o, "archive unreadable: %s: %s", broken->path,
              strerror(broken->error_number));
    else
      why_add(o, "archive unreadable: %s: %s (%s)", broken->path,
              kpack_error_string(broken->status),
              kpack_error_text(broken->status));
    return;
  }
  switch (status) {
    case KPACK_ERROR_ARCHIVE_NOT_FOUND:
      o->reason = KPACK_VERIFY_NO_ARCHIVE;
      why_add(o, "no archive for this arch is installed (looked for ");
      why_list(o, t, KPACK_TRACE_PATH, KPACK_SUCCESS, false);
      why_add(o, ")");
      break;
    case KPACK_ERROR_ARCH_NOT_FOUND:
      o->reason = KPACK_VERIFY_NOT_DECLARED;
      why_add(o, "the archives found do not declare this arch (");
      why_list(o, t, KPACK_TRACE_ARCHIVE, KPACK_SUCCESS, true);
      why_add(o, ")");
      break;
    case KPACK_ERROR_KERNEL_NOT_FOUND:
      o->reason = KPACK_VERIFY_KERNEL_MISSING;
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
        o->reason = KPACK_VERIFY_KERNEL_UNREADABLE;
        o->archive = read->path;
        o->failed |= !set_add(&o->paths, read->path);
        why_add(o, "kernel unreadable in %s (%s)", read->path,
                kpack_error_text(status));
      } else {
        o->reason = KPACK_VERIFY_ERROR;
        why_add(o, "%s", kpack_error_text(status));
      }
    }
  }
}

/* With per-arch archives, a missing archive for an agent the split never
 * had code for is no broken install: says so when none of the `count`
 * arches the split recorded may serve `agent`. Portable SPIR-V, when
 * recorded, serves every agent the native arches do not: its archive
 * missing is a broken install, said as the search found it. */
static void why_not_built(vb_outcome* o, const char* agent,
                          const char* const* recorded, size_t count) {
  size_t served = 0;
  for (size_t i = 0; i < count; i++)
    if (strcmp(recorded[i], "amdgcnspirv") == 0)
      return;
  for (size_t i = 0; i < count; i++)
    served += kpack_target_may_serve(recorded[i], agent);
  if (served > 0) {
    /* Built for settings this agent leaves open (gfx90a against
     * gfx90a:xnack-): the loader looks for the agent's own settings, so
     * say which agents the build serves. */
    const char* first = NULL;
    why_add(o, "; the split recorded");
    for (size_t i = 0; i < count; i++)
      if (kpack_target_may_serve(recorded[i], agent)) {
        why_add(o, "%s %s", first != NULL ? "," : "", recorded[i]);
        first = first != NULL ? first : recorded[i];
      }
    why_add(o,
            ", which serve%s an agent with %s settings (--arch %s), not a "
            "%s agent, for which the loader looks for %s itself",
            served == 1 ? "s" : "", served == 1 ? "those" : "their", first,
            agent, agent);
    return;
  }
  char looked[sizeof(o->why)];
  const char* paths = strstr(o->why, " (looked for ");
  snprintf(looked, sizeof(looked), "%s", paths != NULL ? paths : "");
  o->why[0] = '\0';
  why_add(o, "no code for this GPU in this build: the split recorded");
  for (size_t i = 0; i < count; i++)
    why_add(o, "%s %s", i > 0 ? "," : "", recorded[i]);
  why_add(o, "%s", looked);
}

/* ---- the run ------------------------------------------------------------- */

/* What one binary's report holds besides the host's strings: freed after
 * the report is handed over. */
typedef struct vb_pool {
  void** items;
  size_t count, cap;
} vb_pool;

typedef struct vb_run {
  kpack_verify_options_t o;
  kp_report report;
  kpack_cache_t cache;
  vb_trace trace;
  kpack_verify_summary_t sum;
  bool cancelled, failed;
  vb_pool pool;
} vb_run;

/* Keeps `p` (malloc'ed, or NULL) until the report is handed over; false,
 * with p freed, when out of memory. */
static bool pool_keep(vb_run* r, void* p) {
  void** grown =
      kp_grow(r->pool.items, r->pool.count, &r->pool.cap, sizeof(*grown), 32);
  if (grown == NULL) {
    free(p);
    r->failed = true;
    return false;
  }
  r->pool.items = grown;
  r->pool.items[r->pool.count++] = p;
  return true;
}

static void pool_clear(vb_run* r) {
  for (size_t i = 0; i < r->pool.count; i++)
    free(r->pool.items[i]);
  r->pool.count = 0;
}

/* A copy of `s` kept in the pool; NULL for NULL or out of memory. */
static const char* pool_strdup(vb_run* r, const char* s) {
  char* copy = s != NULL ? strdup(s) : NULL;
  if (s != NULL && copy == NULL)
    r->failed = true;
  return copy != NULL && pool_keep(r, copy) ? copy : NULL;
}

/* A formatted string kept in the pool. */
static const char* pool_printf(vb_run* r, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char* pool_printf(vb_run* r, const char* fmt, ...) {
  char* text = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&text, fmt, ap) < 0)
    text = NULL;
  va_end(ap);
  if (text == NULL)
    r->failed = true;
  return text != NULL && pool_keep(r, text) ? text : NULL;
}

static bool vb_cancelled(vb_run* r) {
  if (!r->cancelled && r->o.cancel != NULL && *r->o.cancel != 0)
    r->cancelled = true;
  return r->cancelled;
}

/* A record that cannot be checked: its problem, a failure. */
static void record_problem(vb_run* r, kpack_verify_record_t* rec,
                           const char* problem) {
  rec->problem = problem != NULL ? problem : "out of memory";
  r->sum.failures++;
}

/* A kernel missing from an archive for `agent` is no broken install when
 * the record was built without code for that agent (a library linked from
 * objects built for different arches): says so. */
static void why_not_in_record(vb_outcome* o, const char* agent,
                              const char* const* recorded, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (strcmp(recorded[i], "amdgcnspirv") == 0 ||
        kpack_target_may_serve(recorded[i], agent))
      return;
  why_add(o, "; no code for this GPU in this record: the split recorded");
  for (size_t i = 0; i < count; i++)
    why_add(o, "%s %s", i > 0 ? "," : "", recorded[i]);
  why_add(o, " for it");
}

/* One record against every agent: the loader's search must return its
 * code object. */
static bool check_record(vb_run* r, const char* path,
                         const kpack_host_wrapper_t* w, const vb_set* agents,
                         const char* const* recorded, size_t recorded_count,
                         kpack_verify_record_t* rec, size_t* failures) {
  kpack_verify_load_t* loads =
      calloc(agents->count ? agents->count : 1, sizeof(*loads));
  if (loads == NULL || !pool_keep(r, loads))
    return false;
  rec->loads = loads;
  for (size_t a = 0; a < agents->count; a++) {
    const char* agent = agents->items[a];
    void* code = NULL;
    size_t size = 0;
    vb_outcome o = {0};
    trace_clear(&r->trace);
    kpack_error_t err = kpack_resolve_code_object(
        r->cache, w->kernel_name, w->search_paths, w->search_path_count, path,
        (uint32_t)w->reserved, &agent, 1, &code, &size);
    kpack_free_code_object(code);
    if (r->trace.failed && err == KPACK_SUCCESS)
      err = KPACK_ERROR_OUT_OF_MEMORY;
    explain(&r->trace, err, &o);
    if (o.reason == KPACK_VERIFY_NO_ARCHIVE && recorded_count > 0)
      why_not_built(&o, agent, recorded, recorded_count);
    else if (o.reason == KPACK_VERIFY_KERNEL_MISSING && recorded_count > 0)
      why_not_in_record(&o, agent, recorded, recorded_count);
    r->sum.loads++;
    *failures += err != KPACK_SUCCESS;
    kpack_verify_load_t* l = &loads[rec->load_count++];
    *l = (kpack_verify_load_t){
        .agent = pool_strdup(r, agent),
        .status = err,
        .reason = err == KPACK_SUCCESS ? KPACK_VERIFY_OK : o.reason,
        .message = err == KPACK_SUCCESS ? NULL : pool_strdup(r, o.why),
        .archive = pool_strdup(r, o.archive),
        .size = err == KPACK_SUCCESS ? size : 0,
        .paths = (const char* const*)o.paths.items,
        .path_count = o.paths.count};
    /* The paths' strings and array go with the report. */
    for (size_t i = 0; i < o.paths.count; i++)
      pool_keep(r, o.paths.items[i]);
    pool_keep(r, o.paths.items);
    if (o.failed || r->failed)
      return false;
  }
  return true;
}

/* The agents a record is checked for: the options', else the arches the
 * split recorded, else those the archives found declare. False (a
 * problem of the record) when there are none or memory ran out. */
static bool record_agents(vb_run* r, const char* path, const kpack_host_t* host,
                          const kpack_host_wrapper_t* w, const char* key,
                          kpack_verify_record_t* rec, vb_set* agents) {
  const char* const* recorded;
  size_t count;
  bool ok = true;
  const char* const* whole;
  size_t whole_count;
  kpack_host_get_arches(host, rec->index, &recorded, &count);
  kpack_host_get_binary_arches(host, rec->index, &whole, &whole_count);
  if (r->o.agent_count > 0) {
    rec->checked = KPACK_VERIFY_AGENTS;
    for (size_t i = 0; ok && i < r->o.agent_count; i++)
      ok = set_add(agents, r->o.agents[i]);
  } else if (count > 0 || whole_count > 0) {
    /* A record the split wrote no code object for (count 0 of a binary
     * with arches) has nothing to load. */
    rec->checked = KPACK_VERIFY_RECORDED;
    for (size_t i = 0; ok && i < count; i++)
      ok = set_add(agents, recorded[i]);
  } else {
    vb_set archives = {0};
    rec->checked = KPACK_VERIFY_ARCHIVES;
    ok = record_archives(path, w, &archives) &&
         declared_arches(&archives, agents);
    set_free(&archives);
    if (ok && agents->count == 0) {
      record_problem(r, rec,
                     pool_printf(r,
                                 "record %zu (%s%s): no archive found through "
                                 "its search paths",
                                 rec->index, w->kernel_name, key));
      return false;
    }
  }
  if (!ok)
    record_problem(r, rec,
                   pool_printf(r, "record %zu: %s (%s)", rec->index,
                               kpack_error_string(KPACK_ERROR_OUT_OF_MEMORY),
                               kpack_error_text(KPACK_ERROR_OUT_OF_MEMORY)));
  return ok;
}

/* Every record of one kpack-ified binary. False when out of memory. */
static bool check_records(vb_run* r, const char* path, const kpack_host_t* host,
                          kpack_verify_binary_t* b) {
  kpack_verify_record_t* records =
      calloc(b->record_count ? b->record_count : 1, sizeof(*records));
  if (records == NULL || !pool_keep(r, records))
    return false;
  b->records = records;
  for (size_t i = 0; i < b->record_count && !vb_cancelled(r); i++) {
    kpack_host_wrapper_t w;
    vb_set agents = {0};
    char key[32];
    kpack_verify_record_t* rec = &records[i];
    kpack_host_get_wrapper(host, i, &w);
    snprintf(key, sizeof(key), "#%llu", (unsigned long long)w.reserved);
    *rec = (kpack_verify_record_t){.index = i,
                                   .kernel = w.kernel_name,
                                   .co_index = w.reserved,
                                   .checked = KPACK_VERIFY_ARCHIVES};
    r->sum.records++;
    if (w.status != KPACK_SUCCESS) {
      record_problem(r, rec,
                     pool_printf(r, "record %zu: %s (%s)", i,
                                 kpack_host_problem_string(w.problem),
                                 kpack_error_string(w.status)));
    } else if (w.reserved > UINT32_MAX) {
      record_problem(r, rec,
                     pool_printf(r,
                                 "record %zu (%s%s): the code object index "
                                 "does not fit the loader's u32",
                                 i, w.kernel_name, key));
    } else if (record_agents(r, path, host, &w, key, rec, &agents)) {
      const char* const* recorded = NULL;
      size_t recorded_count = 0;
      b->checked = rec->checked;
      if (kpack_host_get_arches(host, i, &recorded, &recorded_count) !=
          KPACK_SUCCESS)
        recorded_count = 0;
      size_t failures = 0;
      bool ok = check_record(r, path, &w, &agents, recorded, recorded_count,
                             rec, &failures);
      r->sum.failures += failures;
      b->loads += rec->load_count;
      b->failures += failures;
      if (!ok) {
        set_free(&agents);
        return false;
      }
    } else {
      b->checked = rec->checked;
    }
    b->failures += rec->problem != NULL;
    set_free(&agents);
  }
  return !r->failed;
}

/* One binary. `named`: given as an input (a file that is not a kpack-ified
 * binary is reported) rather than found by a walk (passed over). False
 * when the check is to stop. */
static bool verify_binary(vb_run* r, const char* path, bool named) {
  kpack_host_t* host = NULL;
  kpack_host_info_t info;
  bool go_on = true;
  kpack_verify_binary_t b = {.path = path, .checked = KPACK_VERIFY_ARCHIVES};
  kpack_error_t err = kpack_host_open(path, &host);
  if (err == KPACK_SUCCESS)
    err = kpack_host_get_info(host, &info);
  if (!named && (err == KPACK_ERROR_INVALID_FORMAT ||
                 (err == KPACK_SUCCESS && info.kind != KPACK_HOST_KPACKIFIED)))
    goto done; /* no kpack-ified binary: nothing to check here */
  r->sum.binaries++;
  if (err != KPACK_SUCCESS) {
    char why[512] = "";
    if (err == KPACK_ERROR_INVALID_FORMAT)
      kpack_host_diagnose(path, why, sizeof(why));
    b.kind = KPACK_VERIFY_UNREADABLE;
    b.status = err;
    b.problem = pool_printf(r, "%s (%s)", kpack_error_string(err),
                            *why ? why : kpack_error_text(err));
    if (b.problem == NULL)
      b.problem = "out of memory";
    b.failures = 1;
    r->sum.failures++;
  } else if (info.kind != KPACK_HOST_KPACKIFIED) {
    b.kind = info.kind == KPACK_HOST_FAT ? KPACK_VERIFY_FAT : KPACK_VERIFY_NONE;
    r->sum.skipped++;
  } else {
    /* One map serves every record: the first usable one's whole list is
     * the binary's (each record is checked for its own). */
    b.kind = KPACK_VERIFY_KPACKIFIED;
    for (size_t i = 0; i < info.wrapper_count && b.recorded_arch_count == 0;
         i++)
      kpack_host_get_binary_arches(host, i, &b.recorded_arches,
                                   &b.recorded_arch_count);
    b.record_count = info.wrapper_count;
    if (!check_records(r, path, host, &b)) {
      kp_out_of_memory(&r->report);
      go_on = false;
    }
  }
  if (go_on && r->o.binary != NULL && !r->o.binary(&b, r->o.user))
    r->cancelled = true;
done:
  pool_clear(r);
  kpack_host_close(host);
  return go_on && !vb_cancelled(r);
}

/* ---- the walk ------------------------------------------------------------ */

typedef struct vb_list {
  char** items;
  size_t count, cap;
} vb_list;

static void list_free(vb_list* l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i]);
  free(l->items);
  *l = (vb_list){0};
}

/* Whether the regular file `path` starts like a host binary. A file that
 * cannot be read is no binary it can tell, like any other. */
static bool looks_like_host_binary(const char* path) {
  uint8_t head[64];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  bool host = fd >= 0 &&
              read(fd, head, sizeof(head)) == (ssize_t)sizeof(head) &&
              kpack_is_host_binary(head, sizeof(head));
  if (fd >= 0)
    close(fd);
  return host;
}

/* Adds the regular files below `dir` that start like a host binary;
 * symbolic links are not followed, so a tree is walked once whatever it
 * links to; directories that cannot be read are passed over. False when
 * out of memory, or (`top`) when `dir` itself cannot be read. */
static bool walk(vb_run* r, const char* dir, bool top, unsigned depth,
                 vb_list* found) {
  DIR* d = opendir(dir);
  bool ok = true;
  if (d == NULL) {
    if (top)
      kp_error(&r->report, dir, KPACK_ERROR_IO_ERROR, errno, "%s: %s", dir,
               strerror(errno));
    return !top;
  }
  for (struct dirent* e; ok && (e = readdir(d)) != NULL;) {
    struct stat st;
    char* child = NULL;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (asprintf(&child, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
                 e->d_name) < 0) {
      kp_out_of_memory(&r->report);
      ok = false;
      break;
    }
    if (lstat(child, &st) != 0) {
      free(child);
    } else if (S_ISDIR(st.st_mode)) {
      ok = depth > 256 || walk(r, child, false, depth + 1, found);
      free(child);
    } else if (S_ISREG(st.st_mode) && st.st_size >= 64 &&
               looks_like_host_binary(child)) {
      char** grown =
          kp_grow(found->items, found->count, &found->cap, sizeof(*grown), 64);
      if (grown == NULL) {
        free(child);
        kp_out_of_memory(&r->report);
        ok = false;
      } else {
        found->items = grown;
        found->items[found->count++] = child;
      }
    } else {
      free(child);
    }
  }
  closedir(d);
  return ok;
}

static int compare_paths(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

KPACK_API kpack_error_t kpack_verify_binaries(
    const kpack_verify_options_t* options, const char* const* paths,
    size_t count, kpack_verify_summary_t* summary) {
  vb_run r = {0};
  kpack_error_t err = KPACK_SUCCESS;
  if (summary != NULL)
    *summary = (kpack_verify_summary_t){0};
  if (options == NULL || (paths == NULL && count > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_verify_options_init(&r.o, sizeof(r.o));
  memcpy(&r.o, options,
         options->size < sizeof(r.o) ? options->size : sizeof(r.o));
  r.report = (kp_report){r.o.message, r.o.message_user, KPACK_SUCCESS};
  for (size_t i = 0; i < r.o.agent_count; i++) {
    char why[160];
    if (!kpack_target_check(r.o.agents[i], why, sizeof(why))) {
      kp_say(&r.report, KPACK_SEVERITY_USAGE, NULL,
             KPACK_ERROR_INVALID_ARGUMENT, 0,
             "--arch '%s': not a GPU target: %s",
             r.o.agents[i] != NULL ? r.o.agents[i] : "", why);
      return KPACK_ERROR_INVALID_ARGUMENT;
    }
  }
  err = kpack_cache_create(&r.cache);
  if (err == KPACK_SUCCESS)
    err = kpack_cache_set_trace(r.cache, trace_record, &r.trace);
  if (err != KPACK_SUCCESS) {
    kp_status_error(&r.report, "loader cache", err);
    kpack_cache_destroy(r.cache);
    return err;
  }
  bool go_on = true;
  for (size_t i = 0; go_on && i < count; i++) {
    struct stat st;
    if (stat(paths[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
      go_on = verify_binary(&r, paths[i], true);
      if (go_on && r.o.progress != NULL &&
          !r.o.progress(r.sum.binaries, r.sum.loads, paths[i], r.o.user))
        r.cancelled = true;
      go_on = go_on && !r.cancelled;
      continue;
    }
    vb_list found = {0};
    size_t before = r.sum.binaries;
    /* Found paths join DIR and the names below it as nftw(3) does: DIR
     * without its trailing slashes. */
    char* top = strdup(paths[i]);
    size_t len = top != NULL ? strlen(top) : 0;
    while (len > 1 && top[len - 1] == '/')
      top[--len] = '\0';
    if (top == NULL) {
      kp_out_of_memory(&r.report);
      break;
    }
    bool walked = walk(&r, top, true, 0, &found);
    free(top);
    if (!walked) {
      r.sum.failures++;
      if (r.report.status == KPACK_ERROR_OUT_OF_MEMORY)
        go_on = false;
    }
    if (found.count > 1)
      qsort(found.items, found.count, sizeof(*found.items), compare_paths);
    for (size_t f = 0; go_on && f < found.count; f++) {
      go_on = verify_binary(&r, found.items[f], false);
      if (go_on && r.o.progress != NULL &&
          !r.o.progress(r.sum.binaries, r.sum.loads, found.items[f], r.o.user))
        r.cancelled = true;
      go_on = go_on && !r.cancelled;
    }
    /* A tree that was never split (or the wrong directory) checks
     * nothing: that is no success. */
    if (walked && r.sum.binaries == before)
      r.sum.failures++;
    if (go_on && r.o.directory != NULL)
      r.o.directory(paths[i], r.sum.binaries - before, r.o.user);
    list_free(&found);
  }
  trace_clear(&r.trace);
  free(r.trace.events);
  free(r.pool.items);
  kpack_cache_destroy(r.cache);
  if (summary != NULL)
    *summary = r.sum;
  if (vb_cancelled(&r))
    return KPACK_ERROR_CANCELLED;
  return r.report.status;
}
