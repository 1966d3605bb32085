/* SPDX-License-Identifier: MIT
 *
 * The loader (docs/loader.md): finds the code object HIPK metadata names in the
 * archives its search paths lead to, for the best architecture a device
 * accepts. A cache keeps every archive it opened until it is destroyed.
 * Each search step is reported as a trace event; ROCM_KPACK_DEBUG logging
 * is one consumer of those events, a kpack_cache_set_trace() hook another.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive/archive.h"
#include "loader/hipk.h"
#include "loader/search_path.h"
#include "loader/target.h"
#include "common/grow.h"

/* An archive the cache has tried to open, under its canonical path. While
 * `opening` (read and written under the cache's lock) one thread opens it
 * and others wait; after that the slot never changes. A failure that may
 * pass (too many open files, out of memory, interrupted) is never stored:
 * its slot leaves the table, and the next search opens the archive again. */
typedef struct archive_slot {
  char* canonical;
  kpack_archive_t archive; /* NULL when the open failed */
  kpack_error_t open_status;
  int open_errno; /* errno of a failed open, 0 if none */
  bool opening;
} archive_slot;

struct kpack_cache {
  /* Fixed at creation (trace: before the cache is shared). */
  kp_strlist override_paths; /* ROCM_KPACK_PATH; replaces all when non-empty */
  kp_strlist prefix_paths;   /* ROCM_KPACK_PATH_PREFIX */
  bool disabled;
  bool debug;
  kpack_trace_fn_t trace;
  void* trace_user;

  /* `lock` protects the archive table (slots, slot_count, slot_cap, and
   * each slot's `opening`). It is never held across a system call: a
   * thread marks a new slot `opening`, opens the archive unlocked, and the
   * threads racing for it wait on `opened` meanwhile, so an archive is
   * opened once, and fork() never has to wait for an open (see the fork
   * handlers below). A slot that is no longer opening is immutable and
   * lives until kpack_cache_destroy(), so it is used without the lock;
   * kernel reads (kpack_get_kernel() is thread-safe) never hold it. */
  pthread_mutex_t lock;
  pthread_cond_t opened; /* broadcast when a slot stops `opening` */
  archive_slot** slots;
  size_t slot_count;
  size_t slot_cap;
  /* Also under `lock`: search paths that led to an archive that opened.
   * A warm search then needs no stat() or realpath() (seven system calls
   * per load measured); the archive stays open, so an alias never
   * dangles, though a path retargeted later keeps its first archive, as an
   * already opened archive would anyway. */
  struct path_alias* aliases;
  size_t alias_count;
  size_t alias_cap;
  /* Also under `lock`, in the same spirit: how an embedded search path of
   * a binary resolved (kp_path_resolve: a stat() per existing component
   * and a realpath()), once the answer led to an archive that opened. */
  struct resolution* resolutions;
  size_t resolution_count;
  size_t resolution_cap;

  /* Every live cache is on one list, under registry_lock, for fork. */
  struct kpack_cache* next;
  struct kpack_cache* prev;
};

typedef struct path_alias {
  char* path;
  const archive_slot* slot;
} path_alias;

typedef struct resolution {
  char* binary_path;
  char* search_path; /* as embedded */
  char* resolved;
} resolution;

/* A concrete archive path of one search, in search order. */
typedef struct candidate {
  char* path;
  const char* source;
  bool exists;
  bool visited;             /* the table was consulted during this search */
  const archive_slot* slot; /* usable archive, NULL if none or a duplicate */
} candidate;

/* The state of one kpack_load_code_object() / kpack_resolve_code_object(). */
typedef struct search {
  kpack_cache_t cache;
  const char* binary_path;
  const char* const* arch_list;
  size_t arch_count;
  char* kernel;            /* "kernel_name#co_index" */
  kp_target_list* targets; /* compatible targets of each arch_list entry, */
  size_t target_lists;     /* then of KP_SPIRV_TARGET when not listed */
  candidate* cands;
  size_t cand_count;
  size_t cand_cap;
  bool any_open;
} search;

static const char src_override[] = "ROCM_KPACK_PATH";
static const char src_prefix[] = "ROCM_KPACK_PATH_PREFIX";
static const char src_embedded[] = "embedded";

/* ---- events -------------------------------------------------------------- */

/* Writes one event as one "kpack: " line. The line is built first and
 * written with one call, so lines from concurrent loads never interleave. */
static void debug_log(const kpack_trace_event_t* ev) {
  char* line = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&line, &len);
  if (f == NULL)
    return; /* logging must never fail a load */
  fputs("kpack: ", f);
  switch (ev->kind) {
    case KPACK_TRACE_LOAD:
      fprintf(f, "load %s (binary %s)", ev->kernel, ev->path);
      break;
    case KPACK_TRACE_PATH:
      fprintf(f, "path %s (%s): %s", ev->path, ev->source,
              ev->is_directory ? "directory"
              : ev->exists     ? "exists"
                               : "missing");
      break;
    case KPACK_TRACE_ARCHIVE:
      fprintf(f, "archive %s: %s%s", ev->path, kpack_error_string(ev->status),
              ev->opened ? " (opened)" : " (cached)");
      if (ev->status == KPACK_SUCCESS) {
        fputs(", arches", f);
        for (size_t i = 0; i < ev->arch_count; i++)
          fprintf(f, " %s", ev->arches[i]);
      } else {
        if (ev->error_number != 0)
          fprintf(f, ", %s", strerror(ev->error_number));
        if (ev->transient)
          fputs(": transient, not remembered (tried again next load)", f);
        else if (ev->opened)
          fputs(": remembered, not tried again", f);
      }
      break;
    case KPACK_TRACE_TARGET:
      fprintf(f, "target %s for %s", ev->target, ev->arch);
      break;
    case KPACK_TRACE_KERNEL:
      fprintf(f, "kernel %s %s in %s: %s", ev->kernel, ev->target, ev->path,
              kpack_error_string(ev->status));
      break;
    case KPACK_TRACE_RESULT:
      fprintf(f, "result %s: %s", ev->kernel ? ev->kernel : "(none)",
              kpack_error_string(ev->status));
      if (ev->status == KPACK_SUCCESS)
        fprintf(f, ", %zu bytes, %s for %s from %s", ev->size, ev->target,
                ev->arch, ev->path);
      break;
  }
  fputc('\n', f);
  if (fclose(f) == 0)
    fputs(line, stderr);
  free(line);
}

static void emit(kpack_cache_t cache, const kpack_trace_event_t* ev) {
  if (cache->trace != NULL)
    cache->trace(ev, cache->trace_user);
  if (cache->debug)
    debug_log(ev);
}

/* Reports the outcome of a call and returns it. */
static kpack_error_t finish(kpack_cache_t cache, const char* kernel,
                            kpack_error_t status) {
  kpack_trace_event_t ev = {
      .kind = KPACK_TRACE_RESULT, .status = status, .kernel = kernel};
  if (cache != NULL)
    emit(cache, &ev);
  return status;
}

/* ---- archive table ------------------------------------------------------- */

/* A failed open that may succeed later: the process ran out of file
 * descriptors or memory, or a signal interrupted it. Anything else (no such
 * file, not an archive, no permission...) stays as it is. */
static bool is_transient(kpack_error_t status, int sys_errno) {
  if (status == KPACK_ERROR_OUT_OF_MEMORY)
    return true;
  if (status != KPACK_ERROR_IO_ERROR)
    return false;
  switch (sys_errno) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
    case EINTR:
    case EAGAIN:
      return true;
    default:
      return false;
  }
}

/* What table_get() found or did. */
typedef struct table_result {
  const archive_slot* slot; /* NULL after a transient failure */
  kpack_error_t status;     /* of the open (or the cached one) */
  int sys_errno;            /* errno of a failed open, 0 if none */
  bool opened;              /* this call opened it */
} table_result;

static archive_slot* table_find(kpack_cache_t cache, const char* canonical) {
  for (size_t i = 0; i < cache->slot_count; i++)
    if (strcmp(cache->slots[i]->canonical, canonical) == 0)
      return cache->slots[i];
  return NULL;
}

static void table_remove(kpack_cache_t cache, const archive_slot* slot) {
  for (size_t i = 0; i < cache->slot_count; i++) {
    if (cache->slots[i] == slot) {
      memmove(&cache->slots[i], &cache->slots[i + 1],
              (cache->slot_count - i - 1) * sizeof(*cache->slots));
      cache->slot_count--;
      return;
    }
  }
}

/* The slot for `canonical`, opening the archive if the cache has not tried
 * yet, or waiting for the thread that is opening it. Only an allocation
 * failure of the table itself is an error. */
static kpack_error_t table_get(kpack_cache_t cache, const char* canonical,
                               table_result* out) {
  archive_slot* slot;
  *out = (table_result){0};
  pthread_mutex_lock(&cache->lock);
  while ((slot = table_find(cache, canonical)) != NULL && slot->opening)
    pthread_cond_wait(&cache->opened, &cache->lock);
  if (slot != NULL) {
    out->slot = slot;
    out->status = slot->open_status;
    out->sys_errno = slot->open_errno;
    pthread_mutex_unlock(&cache->lock);
    return KPACK_SUCCESS;
  }
  archive_slot** grown = kp_grow(cache->slots, cache->slot_count,
                                 &cache->slot_cap, sizeof(*grown), 8);
  if (grown == NULL) {
    pthread_mutex_unlock(&cache->lock);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  cache->slots = grown;
  if ((slot = calloc(1, sizeof(*slot))) == NULL ||
      (slot->canonical = strdup(canonical)) == NULL) {
    free(slot);
    pthread_mutex_unlock(&cache->lock);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  slot->opening = true;
  cache->slots[cache->slot_count++] = slot;
  pthread_mutex_unlock(&cache->lock);

  kpack_archive_t archive = NULL;
  kpack_error_t status = kpack_open(canonical, &archive);
  /* errno is the system's reason only for a failed system call. */
  int sys_errno =
      status == KPACK_ERROR_IO_ERROR || status == KPACK_ERROR_FILE_NOT_FOUND
          ? errno
          : 0;
  bool transient = is_transient(status, sys_errno);

  pthread_mutex_lock(&cache->lock);
  if (transient) {
    table_remove(cache, slot);
  } else {
    slot->archive = archive;
    slot->open_status = status;
    slot->open_errno = sys_errno;
    slot->opening = false;
  }
  pthread_cond_broadcast(&cache->opened);
  pthread_mutex_unlock(&cache->lock);
  if (transient) {
    free(slot->canonical);
    free(slot);
    slot = NULL;
  }
  out->slot = slot;
  out->status = status;
  out->sys_errno = sys_errno;
  out->opened = true;
  return KPACK_SUCCESS;
}

static const archive_slot* alias_find(kpack_cache_t cache, const char* path) {
  const archive_slot* slot = NULL;
  pthread_mutex_lock(&cache->lock);
  for (size_t i = 0; i < cache->alias_count && slot == NULL; i++)
    if (strcmp(cache->aliases[i].path, path) == 0)
      slot = cache->aliases[i].slot;
  pthread_mutex_unlock(&cache->lock);
  return slot;
}

/* Remembers path -> slot; a failure only costs the shortcut. */
static void alias_add(kpack_cache_t cache, const char* path,
                      const archive_slot* slot) {
  char* copy = strdup(path);
  if (copy == NULL)
    return;
  pthread_mutex_lock(&cache->lock);
  path_alias* grown = kp_grow(cache->aliases, cache->alias_count,
                              &cache->alias_cap, sizeof(*grown), 8);
  if (grown == NULL)
    goto unlock;
  cache->aliases = grown;
  cache->aliases[cache->alias_count++] = (path_alias){copy, slot};
  copy = NULL;
unlock:
  pthread_mutex_unlock(&cache->lock);
  free(copy);
}

/* A copy of what `search_path` of `binary_path` resolved to, if known. */
static char* resolution_find(kpack_cache_t cache, const char* binary_path,
                             const char* search_path) {
  char* resolved = NULL;
  pthread_mutex_lock(&cache->lock);
  for (size_t i = 0; i < cache->resolution_count; i++) {
    const resolution* r = &cache->resolutions[i];
    if (strcmp(r->search_path, search_path) == 0 &&
        strcmp(r->binary_path, binary_path) == 0) {
      resolved = strdup(r->resolved);
      break;
    }
  }
  pthread_mutex_unlock(&cache->lock);
  return resolved;
}

/* Remembers a resolution; a failure only costs the shortcut. */
static void resolution_add(kpack_cache_t cache, const char* binary_path,
                           const char* search_path, const char* resolved) {
  resolution r = {strdup(binary_path), strdup(search_path), strdup(resolved)};
  if (r.binary_path == NULL || r.search_path == NULL || r.resolved == NULL)
    goto fail;
  pthread_mutex_lock(&cache->lock);
  resolution* grown = kp_grow(cache->resolutions, cache->resolution_count,
                              &cache->resolution_cap, sizeof(*grown), 8);
  if (grown == NULL) {
    pthread_mutex_unlock(&cache->lock);
    goto fail;
  }
  cache->resolutions = grown;
  cache->resolutions[cache->resolution_count++] = r;
  pthread_mutex_unlock(&cache->lock);
  return;
fail:
  free(r.binary_path);
  free(r.search_path);
  free(r.resolved);
}

/* ---- candidates ---------------------------------------------------------- */

static bool has_candidate(const search* s, const char* path) {
  for (size_t i = 0; i < s->cand_count; i++)
    if (strcmp(s->cands[i].path, path) == 0)
      return true;
  return false;
}

/* Appends a candidate; takes ownership of `path`. */
static kpack_error_t push_candidate(search* s, char* path, const char* source,
                                    bool exists) {
  candidate* grown =
      kp_grow(s->cands, s->cand_count, &s->cand_cap, sizeof(*grown), 8);
  if (grown == NULL) {
    free(path);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  s->cands = grown;
  candidate c = {.path = path, .source = source, .exists = exists};
  s->cands[s->cand_count++] = c;
  return KPACK_SUCCESS;
}

/* Adds one concrete path: a directory stands for the *.kpack inside it.
 * *known tells whether the path led to an opened archive before. */
static kpack_error_t add_path(search* s, const char* path, const char* source,
                              bool* known_out) {
  kpack_error_t err = KPACK_SUCCESS;
  kp_strlist entries = {0};
  struct stat st;
  if (has_candidate(s, path))
    return KPACK_SUCCESS;
  bool known = alias_find(s->cache, path) != NULL;
  *known_out = *known_out || known;
  bool exists = known || stat(path, &st) == 0;
  bool is_dir = !known && exists && S_ISDIR(st.st_mode);
  kpack_trace_event_t ev = {.kind = KPACK_TRACE_PATH,
                            .kernel = s->kernel,
                            .path = path,
                            .source = source,
                            .exists = exists,
                            .is_directory = is_dir};
  emit(s->cache, &ev);
  if (!is_dir) {
    char* copy = strdup(path);
    return copy ? push_candidate(s, copy, source, exists)
                : KPACK_ERROR_OUT_OF_MEMORY;
  }
  /* An unreadable directory contributes nothing, like a missing path. */
  err = kp_path_list_dir(path, &entries);
  if (err == KPACK_ERROR_IO_ERROR)
    err = KPACK_SUCCESS;
  for (size_t i = 0; err == KPACK_SUCCESS && i < entries.count; i++) {
    if (has_candidate(s, entries.items[i]))
      continue;
    kpack_trace_event_t entry = ev;
    entry.path = entries.items[i];
    entry.exists = true;
    entry.is_directory = false;
    emit(s->cache, &entry);
    err = push_candidate(s, entries.items[i], source, true);
    entries.items[i] = NULL; /* owned by the candidate now (or freed) */
  }
  kp_strlist_free(&entries);
  return err;
}

/* Adds list items: resolved against the binary (embedded) or normalised
 * (environment), then @GFXARCH@-expanded. Empty items are dropped. */
static kpack_error_t add_items(search* s, const char* const* items, size_t n,
                               const char* source, bool relative_to_binary) {
  kpack_error_t err = KPACK_SUCCESS;
  kp_strlist expanded = {0};
  for (size_t i = 0; err == KPACK_SUCCESS && i < n; i++) {
    if (items[i][0] == '\0')
      continue;
    char* base = NULL;
    bool remembered = false, known = false;
    if (relative_to_binary) {
      base = resolution_find(s->cache, s->binary_path, items[i]);
      remembered = base != NULL;
      if (base == NULL)
        base = kp_path_resolve(s->binary_path, items[i]);
    } else {
      base = kp_path_normalize(items[i]);
    }
    if (base == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    err = kp_path_expand_gfxarch(base, s->targets, s->target_lists, &expanded);
    for (size_t j = 0; err == KPACK_SUCCESS && j < expanded.count; j++) {
      /* Substituted targets may hold ".." or "//" again. */
      char* norm = kp_path_normalize(expanded.items[j]);
      err =
          norm ? add_path(s, norm, source, &known) : KPACK_ERROR_OUT_OF_MEMORY;
      free(norm);
    }
    /* Led to an archive that opened: the next search skips the stat()s. */
    if (err == KPACK_SUCCESS && relative_to_binary && known && !remembered)
      resolution_add(s->cache, s->binary_path, items[i], base);
    free(base);
    kp_strlist_free(&expanded);
  }
  kp_strlist_free(&expanded);
  return err;
}

static kpack_error_t build_candidates(search* s, const char* const* embedded,
                                      size_t embedded_count) {
  kpack_cache_t cache = s->cache;
  if (cache->override_paths.count > 0)
    return add_items(s, (const char* const*)cache->override_paths.items,
                     cache->override_paths.count, src_override, false);
  kpack_error_t err =
      add_items(s, (const char* const*)cache->prefix_paths.items,
                cache->prefix_paths.count, src_prefix, false);
  if (err == KPACK_SUCCESS)
    err = add_items(s, embedded, embedded_count, src_embedded, true);
  return err;
}

/* First use of a candidate in this search: find or open its archive. */
static kpack_error_t visit(search* s, candidate* c) {
  table_result found = {0};
  c->visited = true;
  kpack_trace_event_t ev = {
      .kind = KPACK_TRACE_ARCHIVE, .kernel = s->kernel, .path = c->path};
  if ((found.slot = alias_find(s->cache, c->path)) != NULL)
    goto emit;
  char* canonical = realpath(c->path, NULL);
  if (canonical == NULL) {
    if (errno == ENOMEM)
      return KPACK_ERROR_OUT_OF_MEMORY;
    /* Gone since it was listed, or a directory on the way is unreadable:
     * no archive, and nothing to remember. */
    ev.status = errno == ENOENT || errno == ENOTDIR ? KPACK_ERROR_FILE_NOT_FOUND
                                                    : KPACK_ERROR_IO_ERROR;
    ev.error_number = errno;
    emit(s->cache, &ev);
    return KPACK_SUCCESS;
  }
  kpack_error_t err = table_get(s->cache, canonical, &found);
  if (err != KPACK_SUCCESS) {
    free(canonical);
    return err;
  }
  if (found.slot == NULL) {
    /* Not remembered: this search goes on without it, the next tries it
     * again. Out of memory ends the search, as anywhere else. */
    ev.path = canonical;
    ev.status = found.status;
    ev.error_number = found.sys_errno;
    ev.opened = true;
    ev.transient = true;
    emit(s->cache, &ev);
    free(canonical);
    return found.status == KPACK_ERROR_OUT_OF_MEMORY ? found.status
                                                     : KPACK_SUCCESS;
  }
  free(canonical);
  if (found.slot->archive != NULL)
    alias_add(s->cache, c->path, found.slot);
emit:;
  const archive_slot* slot = found.slot;
  ev.status = slot->open_status;
  ev.error_number = slot->open_errno;
  ev.path = slot->canonical;
  ev.opened = found.opened;
  if (slot->archive != NULL) {
    ev.arches = slot->archive->toc.arches;
    ev.arch_count = slot->archive->toc.arch_count;
  }
  emit(s->cache, &ev);
  if (slot->archive == NULL)
    return KPACK_SUCCESS;
  s->any_open = true;
  /* Two paths to one file (a symlink, a directory entry): search it once. */
  for (candidate* other = s->cands; other < c; other++)
    if (other->slot == slot)
      return KPACK_SUCCESS;
  c->slot = slot;
  return KPACK_SUCCESS;
}

static bool declares(kpack_archive_t archive, const char* target) {
  for (size_t i = 0; i < archive->toc.arch_count; i++)
    if (strcmp(archive->toc.arches[i], target) == 0)
      return true;
  return false;
}

static void search_free(search* s) {
  for (size_t i = 0; i < s->cand_count; i++)
    free(s->cands[i].path);
  free(s->cands);
  if (s->targets != NULL)
    for (size_t i = 0; i < s->target_lists; i++)
      kp_target_list_free(&s->targets[i]);
  free(s->targets);
  free(s->kernel);
}

/* The search itself; arguments are checked and the cache is enabled. */
static kpack_error_t run_search(kpack_cache_t cache, const char* kernel_name,
                                const char* const* embedded,
                                size_t embedded_count, const char* binary_path,
                                uint32_t co_index, const char* const* arch_list,
                                size_t arch_count, void** out,
                                size_t* size_out) {
  kpack_error_t err = KPACK_SUCCESS;
  kpack_error_t last_read_error = KPACK_SUCCESS;
  bool any_declared = false;
  search s = {.cache = cache,
              .binary_path = binary_path,
              .arch_list = arch_list,
              .arch_count = arch_count};

  if (asprintf(&s.kernel, "%s#%" PRIu32, kernel_name, co_index) < 0) {
    s.kernel = NULL;
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  kpack_trace_event_t start = {
      .kind = KPACK_TRACE_LOAD, .kernel = s.kernel, .path = binary_path};
  emit(cache, &start);
  /* After every native target of every arch, portable SPIR-V
   * ("amdgcnspirv"), which the HIP runtime compiles for an agent that no
   * native code object serves: one more list, searched last. */
  bool spirv = arch_count > 0;
  for (size_t i = 0; i < arch_count; i++)
    if (strcmp(kp_target_strip_prefix(arch_list[i]), KP_SPIRV_TARGET) == 0)
      spirv = false; /* asked for already, in its place */
  s.target_lists = arch_count + spirv;
  if ((s.targets = calloc(s.target_lists, sizeof(*s.targets))) == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (size_t i = 0; i < s.target_lists; i++)
    if ((err = kp_target_compatible(
             i < arch_count ? arch_list[i] : KP_SPIRV_TARGET, &s.targets[i])))
      goto done;
  if ((err = build_candidates(&s, embedded, embedded_count)))
    goto done;

  for (size_t a = 0; a < s.target_lists; a++) {
    for (size_t t = 0; t < s.targets[a].count; t++) {
      const char* target = s.targets[a].names[t];
      kpack_trace_event_t tev = {.kind = KPACK_TRACE_TARGET,
                                 .kernel = s.kernel,
                                 .arch = arch_list[a < arch_count ? a : 0],
                                 .target = target};
      emit(cache, &tev);
      for (size_t i = 0; i < s.cand_count; i++) {
        candidate* c = &s.cands[i];
        if (!c->exists)
          continue;
        if (!c->visited && (err = visit(&s, c)))
          goto done;
        if (c->slot == NULL || !declares(c->slot->archive, target))
          continue;
        any_declared = true;
        err =
            kpack_get_kernel(c->slot->archive, s.kernel, target, out, size_out);
        kpack_trace_event_t kev = tev;
        kev.kind = KPACK_TRACE_KERNEL;
        kev.status = err;
        kev.path = c->slot->canonical;
        emit(cache, &kev);
        if (err == KPACK_SUCCESS) {
          kpack_trace_event_t hit = kev;
          hit.kind = KPACK_TRACE_RESULT;
          hit.size = *size_out;
          emit(cache, &hit);
          goto done;
        }
        if (err == KPACK_ERROR_OUT_OF_MEMORY)
          goto done;
        if (err != KPACK_ERROR_KERNEL_NOT_FOUND)
          last_read_error = err;
      }
    }
  }
  /* No hit. Archives not yet consulted (no arch had a target) still decide
   * between ARCHIVE_NOT_FOUND and ARCH_NOT_FOUND. */
  for (size_t i = 0; i < s.cand_count; i++)
    if (s.cands[i].exists && !s.cands[i].visited &&
        (err = visit(&s, &s.cands[i])))
      goto done;
  if (any_declared)
    err = last_read_error != KPACK_SUCCESS ? last_read_error
                                           : KPACK_ERROR_KERNEL_NOT_FOUND;
  else
    err =
        s.any_open ? KPACK_ERROR_ARCH_NOT_FOUND : KPACK_ERROR_ARCHIVE_NOT_FOUND;

done:
  if (err != KPACK_SUCCESS)
    finish(cache, s.kernel, err);
  search_free(&s);
  return err;
}

/* ---- fork ---------------------------------------------------------------- */

/* A HIP process may fork while other threads load (a Python worker pool
 * over a GPU library). The child has only the forking thread, so a lock
 * that another thread held, an archive another thread was opening, or a
 * condition variable it waited on would stay that way in the child forever.
 * Before fork() the forking thread takes every cache's lock (held only
 * for table updates, never across an open, so this waits for no I/O); the
 * parent releases them after; the child releases them too, forgets the
 * opens that were in progress (their threads do not exist in the child, so
 * it will open those archives itself) and starts with fresh condition
 * variables, whose waiters did not come along. Archives that were open stay
 * open and usable: their reads share no lock (kernel_read.c). */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kpack_cache* registry; /* every live cache */
static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;
static int fork_handlers_error;

static void before_fork(void) {
  pthread_mutex_lock(&registry_lock);
  for (kpack_cache_t c = registry; c != NULL; c = c->next)
    pthread_mutex_lock(&c->lock);
}

static void after_fork_in_parent(void) {
  for (kpack_cache_t c = registry; c != NULL; c = c->next)
    pthread_mutex_unlock(&c->lock);
  pthread_mutex_unlock(&registry_lock);
}

static void after_fork_in_child(void) {
  for (kpack_cache_t c = registry; c != NULL; c = c->next) {
    size_t kept = 0;
    for (size_t i = 0; i < c->slot_count; i++) {
      archive_slot* slot = c->slots[i];
      if (slot->opening) {
        free(slot->canonical);
        free(slot);
      } else {
        c->slots[kept++] = slot;
      }
    }
    c->slot_count = kept;
    pthread_cond_init(&c->opened, NULL);
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&registry_lock);
}

static void register_fork_handlers(void) {
  fork_handlers_error =
      pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* ---- public API ---------------------------------------------------------- */

/* A flag is on when set, non-empty and not starting with '0'. */
static bool env_flag(const char* name) {
  const char* v = secure_getenv(name);
  return v != NULL && v[0] != '\0' && v[0] != '0';
}

static kpack_error_t env_list(const char* name, kp_strlist* out) {
  /* secure_getenv: a setuid program must not load code objects from
   * archives its caller chose. */
  const char* v = secure_getenv(name);
  return v != NULL ? kp_path_list_parse(v, out) : KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_cache_create(kpack_cache_t* cache) {
  kpack_error_t err;
  struct kpack_cache* c;
  if (cache == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *cache = NULL;
  if ((c = calloc(1, sizeof(*c))) == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  if ((err = env_list("ROCM_KPACK_PATH", &c->override_paths)) ||
      (err = env_list("ROCM_KPACK_PATH_PREFIX", &c->prefix_paths)))
    goto fail;
  c->disabled = env_flag("ROCM_KPACK_DISABLE");
  c->debug = env_flag("ROCM_KPACK_DEBUG");
  pthread_once(&fork_handlers_once, register_fork_handlers);
  if (fork_handlers_error != 0) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  if (pthread_cond_init(&c->opened, NULL) != 0) {
    pthread_mutex_destroy(&c->lock);
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  pthread_mutex_lock(&registry_lock);
  c->next = registry;
  if (registry != NULL)
    registry->prev = c;
  registry = c;
  pthread_mutex_unlock(&registry_lock);
  *cache = c;
  return KPACK_SUCCESS;

fail:
  kp_strlist_free(&c->override_paths);
  kp_strlist_free(&c->prefix_paths);
  free(c);
  return err;
}

KPACK_API void kpack_cache_destroy(kpack_cache_t cache) {
  if (cache == NULL)
    return;
  pthread_mutex_lock(&registry_lock);
  if (cache->prev != NULL)
    cache->prev->next = cache->next;
  else
    registry = cache->next;
  if (cache->next != NULL)
    cache->next->prev = cache->prev;
  pthread_mutex_unlock(&registry_lock);
  for (size_t i = 0; i < cache->slot_count; i++) {
    kpack_close(cache->slots[i]->archive);
    free(cache->slots[i]->canonical);
    free(cache->slots[i]);
  }
  free(cache->slots);
  for (size_t i = 0; i < cache->alias_count; i++)
    free(cache->aliases[i].path);
  free(cache->aliases);
  for (size_t i = 0; i < cache->resolution_count; i++) {
    free(cache->resolutions[i].binary_path);
    free(cache->resolutions[i].search_path);
    free(cache->resolutions[i].resolved);
  }
  free(cache->resolutions);
  pthread_cond_destroy(&cache->opened);
  pthread_mutex_destroy(&cache->lock);
  kp_strlist_free(&cache->override_paths);
  kp_strlist_free(&cache->prefix_paths);
  free(cache);
}

KPACK_API kpack_error_t kpack_cache_set_trace(kpack_cache_t cache,
                                              kpack_trace_fn_t trace,
                                              void* user_data) {
  if (cache == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  cache->trace = trace;
  cache->trace_user = user_data;
  return KPACK_SUCCESS;
}

/* The checks both entry points share; clears the outputs it can. */
static bool valid_request(kpack_cache_t cache, const char* binary_path,
                          const char* const* arch_list, size_t arch_count,
                          void** out, size_t* size_out) {
  if (out != NULL)
    *out = NULL;
  if (size_out != NULL)
    *size_out = 0;
  if (cache == NULL || binary_path == NULL || arch_list == NULL ||
      arch_count == 0 || out == NULL || size_out == NULL)
    return false;
  for (size_t i = 0; i < arch_count; i++)
    if (arch_list[i] == NULL)
      return false;
  return true;
}

KPACK_API kpack_error_t kpack_load_code_object(
    kpack_cache_t cache, const void* hipk_metadata, const char* binary_path,
    uint32_t co_index, const char* const* arch_list, size_t arch_count,
    void** code_object_out, size_t* code_object_size_out) {
  kp_hipk hipk;
  if (hipk_metadata == NULL ||
      !valid_request(cache, binary_path, arch_list, arch_count, code_object_out,
                     code_object_size_out))
    return finish(cache, NULL, KPACK_ERROR_INVALID_ARGUMENT);
  if (cache->disabled)
    return finish(cache, NULL, KPACK_ERROR_NOT_IMPLEMENTED);
  kpack_error_t err = kp_hipk_read(hipk_metadata, &hipk);
  if (err != KPACK_SUCCESS)
    return finish(cache, NULL, err);
  err = run_search(cache, hipk.kernel_name,
                   (const char* const*)hipk.search_paths.items,
                   hipk.search_paths.count, binary_path, co_index, arch_list,
                   arch_count, code_object_out, code_object_size_out);
  kp_hipk_free(&hipk);
  return err;
}

KPACK_API kpack_error_t kpack_resolve_code_object(
    kpack_cache_t cache, const char* kernel_name,
    const char* const* search_paths, size_t search_path_count,
    const char* binary_path, uint32_t co_index, const char* const* arch_list,
    size_t arch_count, void** code_object_out, size_t* code_object_size_out) {
  bool ok = valid_request(cache, binary_path, arch_list, arch_count,
                          code_object_out, code_object_size_out) &&
            kernel_name != NULL &&
            (search_paths != NULL || search_path_count == 0);
  for (size_t i = 0; ok && i < search_path_count; i++)
    ok = search_paths[i] != NULL;
  if (!ok)
    return finish(cache, NULL, KPACK_ERROR_INVALID_ARGUMENT);
  if (cache->disabled)
    return finish(cache, NULL, KPACK_ERROR_NOT_IMPLEMENTED);
  return run_search(cache, kernel_name, search_paths, search_path_count,
                    binary_path, co_index, arch_list, arch_count,
                    code_object_out, code_object_size_out);
}

KPACK_API void kpack_free_code_object(void* code_object) {
  kpack_free_kernel(code_object);
}

KPACK_API kpack_error_t kpack_enumerate_architectures(
    const char* archive_path, kpack_arch_callback_t callback, void* user_data) {
  kpack_archive_t archive;
  if (archive_path == NULL || callback == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kpack_error_t err = kpack_open(archive_path, &archive);
  if (err != KPACK_SUCCESS)
    return err;
  for (size_t i = 0; i < archive->toc.arch_count; i++)
    if (!callback(archive->toc.arches[i], user_data))
      break;
  kpack_close(archive);
  return KPACK_SUCCESS;
}
