/* SPDX-License-Identifier: MIT
 *
 * kpack_wheel_split() (rocm_kpack/kpack_wheel.h): a fat wheel unpacked into
 * a scratch directory inside the output directory, its tree split per arch
 * by the caller, the generic tree packed as the host wheel and each other
 * tree as a device wheel, and the wheels moved into the output directory
 * once all of them are written. Layout of the scratch directory:
 *   in/     the wheel's files but its .dist-info and .data (the split input)
 *   keep/   its .dist-info and .data, put back into the host tree after
 *   split/  the tree split's output: generic/ and one tree per processor
 *   wheels/ the wheels, renamed into the output directory at the end
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/thread.h"
#include "producer/file_replace.h"
#include "producer/wheel.h"
#include "rocm_kpack/kpack_archive.h"
#include "rocm_kpack/kpack_wheel.h"

/* Where the device wheels put the archives, below the install root
 * (site-packages): one directory per distribution. */
#define WS_ARCHIVE_ROOT "_kpack"

typedef struct ws_state {
  const char* wheel;
  const char* outdir;
  const kpack_wheel_split_options_t* options;
  char* why;
  size_t why_size;
  char* scratch; /* outdir/.kpack-wheel-XXXXXX */
  kp_wheel* fat;
  char* prefix;      /* the distribution's escaped name */
  char* archive_dir; /* _kpack/<prefix> */
  char** trees;      /* device trees, sorted */
  size_t tree_count;
  char** packed; /* wheel paths in the scratch directory: host, devices */
  size_t packed_count;
} ws_state;

static kpack_error_t ws_fail(ws_state* s, kpack_error_t err, const char* fmt,
                             ...) __attribute__((format(printf, 3, 4)));

/* Records why (the first reason only) and returns err. */
static kpack_error_t ws_fail(ws_state* s, kpack_error_t err, const char* fmt,
                             ...) {
  if (s->why != NULL && s->why_size > 0 && s->why[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, s->why_size, fmt, ap);
    va_end(ap);
  }
  return err;
}

static kpack_error_t ws_sys(ws_state* s, const char* what, const char* path) {
  int e = errno;
  kpack_error_t err =
      e == ENOENT ? KPACK_ERROR_FILE_NOT_FOUND : KPACK_ERROR_IO_ERROR;
  if (e == ENOMEM)
    err = KPACK_ERROR_OUT_OF_MEMORY;
  return ws_fail(s, err, "%s %s: %s", what, path, strerror(e));
}

static char* ws_printf(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* asprintf() that returns the string, or NULL when out of memory. */
static char* ws_printf(const char* fmt, ...) {
  char* p;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&p, fmt, ap);
  va_end(ap);
  return n < 0 ? NULL : p;
}

static char* ws_join(const char* a, const char* b) {
  char* p;
  return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

static int ws_remove_entry(const char* path, const struct stat* st, int flag,
                           struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes `dir` and everything below it (links are not followed). */
static int ws_remove_tree(const char* dir) {
  return nftw(dir, ws_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Why kp_wheel_unpack() failed, in words. */
static const char* ws_unpack_reason(kpack_error_t err, int sys_errno) {
  switch (err) {
    case KPACK_ERROR_INVALID_FORMAT:
      return "not a valid wheel (not a zip archive, a bad file name or "
             "entry name, no .dist-info of its name and version, or a file "
             "whose hash or size differs from its RECORD)";
    case KPACK_ERROR_INVALID_METADATA:
      return "its METADATA, WHEEL or RECORD is missing or malformed";
    case KPACK_ERROR_UNSUPPORTED_VERSION:
      return "a Wheel-Version other than 1.x, or a compression method other "
             "than stored or deflate";
    case KPACK_ERROR_DECOMPRESSION_FAILED:
      return "an entry's compressed data is corrupt";
    case KPACK_ERROR_IO_ERROR:
    case KPACK_ERROR_FILE_NOT_FOUND:
      return sys_errno != 0 ? strerror(sys_errno) : kpack_error_string(err);
    default:
      return kpack_error_string(err);
  }
}

/* An extra as pip compares them (PEP 685): lower case, each run of '-',
 * '_' and '.' one '-'. */
static char* ws_extra(const char* tree) {
  char* out;
  if (asprintf(&out, "device-%s", tree) < 0)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; out[i] != '\0'; i++) {
    char c = out[i];
    if (c == '-' || c == '_' || c == '.') {
      if (o > 0 && out[o - 1] == '-')
        continue;
      c = '-';
    } else if (c >= 'A' && c <= 'Z') {
      c = (char)(c - 'A' + 'a');
    }
    out[o++] = c;
  }
  out[o] = '\0';
  return out;
}

static int ws_compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* Moves the top-level .dist-info and .data directories of in/ to keep/. */
static kpack_error_t ws_set_aside(ws_state* s, const char* in,
                                  const char* keep) {
  kpack_error_t err = KPACK_SUCCESS;
  DIR* d = opendir(in);
  if (d == NULL)
    return ws_sys(s, "cannot read", in);
  if (mkdir(keep, 0755) != 0) {
    closedir(d);
    return ws_sys(s, "cannot make", keep);
  }
  struct dirent* e;
  while (err == KPACK_SUCCESS && (errno = 0, e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    bool dist_info = n > 10 && strcmp(e->d_name + n - 10, ".dist-info") == 0;
    bool data = n > 5 && strcmp(e->d_name + n - 5, ".data") == 0;
    if (!dist_info && !data)
      continue;
    char* from = ws_join(in, e->d_name);
    char* to = ws_join(keep, e->d_name);
    if (from == NULL || to == NULL)
      err = KPACK_ERROR_OUT_OF_MEMORY;
    else if (rename(from, to) != 0)
      err = ws_sys(s, "cannot move", from);
    free(from);
    free(to);
  }
  if (err == KPACK_SUCCESS && errno != 0)
    err = ws_sys(s, "cannot read", in);
  closedir(d);
  return err;
}

/* Moves every entry of `from` into `to`. */
static kpack_error_t ws_move_all(ws_state* s, const char* from,
                                 const char* to) {
  kpack_error_t err = KPACK_SUCCESS;
  DIR* d = opendir(from);
  if (d == NULL)
    return ws_sys(s, "cannot read", from);
  struct dirent* e;
  while (err == KPACK_SUCCESS && (errno = 0, e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char* a = ws_join(from, e->d_name);
    char* b = ws_join(to, e->d_name);
    if (a == NULL || b == NULL)
      err = KPACK_ERROR_OUT_OF_MEMORY;
    else if (rename(a, b) != 0)
      err = ws_sys(s, "cannot move", a);
    free(a);
    free(b);
  }
  if (err == KPACK_SUCCESS && errno != 0)
    err = ws_sys(s, "cannot read", from);
  closedir(d);
  return err;
}

/* The trees of split/ but generic, sorted. */
static kpack_error_t ws_list_trees(ws_state* s, const char* split) {
  kpack_error_t err = KPACK_SUCCESS;
  size_t cap = 0;
  DIR* d = opendir(split);
  if (d == NULL)
    return ws_sys(s, "cannot read", split);
  struct dirent* e;
  while (err == KPACK_SUCCESS && (errno = 0, e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "generic") == 0)
      continue;
    char** grown = kp_grow(s->trees, s->tree_count, &cap, sizeof(*s->trees), 8);
    char* name = strdup(e->d_name);
    if (grown == NULL || name == NULL) {
      free(name);
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    s->trees = grown;
    s->trees[s->tree_count++] = name;
  }
  if (err == KPACK_SUCCESS && errno != 0)
    err = ws_sys(s, "cannot read", split);
  closedir(d);
  if (s->tree_count > 1)
    qsort(s->trees, s->tree_count, sizeof(*s->trees), ws_compare_names);
  return err;
}

/* One wheel to pack: a tree and what to call it. */
typedef struct ws_job {
  char* dir;
  kp_wheel_pack_options options;
  char* project; /* device wheels: the options' project */
  char* summary; /* and their one extra line */
  const char* extra[1];
  char* path; /* the packed wheel */
  kpack_error_t err;
} ws_job;

/* Packs jobs[next...] until none is left; wheels are independent, so two
 * threads pack two at once. */
typedef struct ws_pool {
  ws_job* jobs;
  size_t count;
  const char* wheels;
  _Atomic size_t next;
} ws_pool;

static void* ws_pack_jobs(void* arg) {
  ws_pool* pool = arg;
  size_t i;
  while ((i = atomic_fetch_add(&pool->next, 1)) < pool->count) {
    ws_job* j = &pool->jobs[i];
    j->err = kp_wheel_pack(j->dir, pool->wheels, &j->options, &j->path);
  }
  return NULL;
}

/* Packs every job, two at a time when a second thread can be had; then
 * reports the first failure in job order, else records the wheels in it. */
static kpack_error_t ws_pack_jobs_all(ws_state* s, ws_job* jobs, size_t count,
                                      const char* wheels) {
  ws_pool pool = {.jobs = jobs, .count = count, .wheels = wheels};
  atomic_init(&pool.next, 0);
  pthread_t helper;
  bool helped = count > 1 && kp_thread_start(&helper, ws_pack_jobs, &pool) == 0;
  ws_pack_jobs(&pool);
  if (helped)
    pthread_join(helper, NULL);
  for (size_t i = 0; i < count; i++)
    if (jobs[i].err != KPACK_SUCCESS)
      return ws_fail(s, jobs[i].err, "cannot pack %s %s as a wheel: %s",
                     jobs[i].options.project, jobs[i].options.version,
                     kpack_error_string(jobs[i].err));
  for (size_t i = 0; i < count; i++) {
    s->packed[s->packed_count++] = jobs[i].path;
    jobs[i].path = NULL;
  }
  return KPACK_SUCCESS;
}

/* The device project of a tree: "<Name>-device-<tree>". */
static char* ws_device_project(const char* name, const char* tree) {
  char* p;
  return asprintf(&p, "%s-device-%s", name, tree) < 0 ? NULL : p;
}

static kpack_error_t ws_pack_all(ws_state* s, const char* split,
                                 const char* wheels) {
  kpack_error_t err = KPACK_SUCCESS;
  ws_job* jobs = NULL;
  const kp_metadata* md = &s->fat->metadata;
  const char* name = kp_metadata_get(md, "Name");
  const char* version = kp_metadata_get(md, "Version");
  /* Host lines: per tree, Provides-Extra and Requires-Dist; then "all". */
  size_t line_count =
      s->tree_count > 0 ? 2 * s->tree_count + 1 + s->tree_count : 0;
  char** lines = calloc(line_count + 1, sizeof(*lines));
  s->packed = calloc(s->tree_count + 1, sizeof(*s->packed));
  if (lines == NULL || s->packed == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }
  size_t n = 0;
  for (size_t t = 0; t < s->tree_count; t++) {
    char* project = ws_device_project(name, s->trees[t]);
    char* extra = ws_extra(s->trees[t]);
    if (project != NULL && extra != NULL) {
      lines[n++] = ws_printf("Provides-Extra: %s", extra);
      lines[n++] = ws_printf("Requires-Dist: %s==%s; extra == \"%s\"", project,
                             version, extra);
    }
    free(project);
    free(extra);
    if (n < 2 * (t + 1) || lines[n - 1] == NULL || lines[n - 2] == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto cleanup;
    }
  }
  if (s->tree_count > 0)
    lines[n++] = ws_printf("Provides-Extra: device-all");
  for (size_t t = 0; t < s->tree_count; t++) {
    char* project = ws_device_project(name, s->trees[t]);
    if (project != NULL)
      lines[n++] = ws_printf("Requires-Dist: %s==%s; extra == \"device-all\"",
                             project, version);
    free(project);
  }
  for (size_t i = 0; i < n; i++)
    if (lines[i] == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto cleanup;
    }
  if (n != line_count) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }

  /* The host wheel, then one per tree. */
  jobs = calloc(s->tree_count + 1, sizeof(*jobs));
  if (jobs == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }
  jobs[0].dir = ws_join(split, "generic");
  jobs[0].options =
      (kp_wheel_pack_options){.project = name,
                              .version = version,
                              .build = s->fat->name.build,
                              .tags = s->fat->name.tags,
                              .extra_metadata = (const char* const*)lines,
                              .extra_metadata_count = n,
                              .root_is_purelib = s->fat->root_is_purelib,
                              .level = s->options->level,
                              .stored_suffix = ".kpack"};
  if (jobs[0].dir == NULL)
    err = KPACK_ERROR_OUT_OF_MEMORY;
  for (size_t t = 0; err == KPACK_SUCCESS && t < s->tree_count; t++) {
    ws_job* j = &jobs[t + 1];
    j->dir = ws_join(split, s->trees[t]);
    j->project = ws_device_project(name, s->trees[t]);
    if (j->dir == NULL || j->project == NULL ||
        asprintf(&j->summary, "Summary: GPU code of %s %s for %s", name,
                 version, s->trees[t]) < 0) {
      j->summary = NULL;
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    j->extra[0] = j->summary;
    j->options = (kp_wheel_pack_options){
        .project = j->project,
        .version = version,
        .build = s->fat->name.build,
        .tags = s->fat->name.tags,
        .extra_metadata = j->extra,
        .extra_metadata_count = 1,
        /* Installed beside the host's files, whatever the scheme. */
        .root_is_purelib = s->fat->root_is_purelib,
        .level = s->options->level,
        /* Archives are compressed already (or stored on purpose). */
        .stored_suffix = ".kpack"};
  }
  if (err == KPACK_SUCCESS)
    err = ws_pack_jobs_all(s, jobs, s->tree_count + 1, wheels);

cleanup:
  for (size_t i = 0; jobs != NULL && i < s->tree_count + 1; i++) {
    free(jobs[i].dir);
    free(jobs[i].project);
    free(jobs[i].summary);
    free(jobs[i].path);
  }
  free(jobs);
  if (lines != NULL)
    for (size_t i = 0; i < line_count; i++)
      free(lines[i]);
  free(lines);
  return err;
}

/* Records the first error of the moves into the output directory as the
 * run's reason. */
static void ws_on_message(const kpack_message_t* m, void* user) {
  if (m->severity == KPACK_SEVERITY_ERROR)
    ws_fail(user, m->status, "%s", m->text);
}

/* Moves each packed wheel to its final path as a split puts files in place
 * (fr_outputs_swap()): a wheel of that name already there is kept beside
 * it until every one is in place, and after a failed move each final path
 * gets back what it held. The run has no test hooks of its own: those
 * belong to the tree split's. */
static kpack_error_t ws_move_in(ws_state* s, char* const* finals) {
  pr_run run = {.report = {ws_on_message, s, KPACK_SUCCESS}};
  fr_outputs out = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < s->packed_count; i++)
    ok = fr_outputs_note(&run, &out, finals[i]);
  for (size_t i = 0; ok && i < s->packed_count; i++)
    ok = fr_outputs_swap(&run, &out, s->packed[i], finals[i], false);
  if (ok)
    fr_outputs_commit(&run, &out);
  else
    fr_outputs_undo(&run, &out, s->outdir);
  fr_outputs_free(&out);
  return ok ? KPACK_SUCCESS : pr_status(&run, KPACK_ERROR_IO_ERROR);
}

/* Moves the packed wheels into the output directory; fills the result. */
static kpack_error_t ws_publish(ws_state* s,
                                kpack_wheel_split_result_t** result) {
  kpack_wheel_split_result_t* r = calloc(1, sizeof(*r));
  if (r == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  r->devices = calloc(s->tree_count + 1, sizeof(char*));
  r->trees = calloc(s->tree_count + 1, sizeof(char*));
  r->extras = calloc(s->tree_count + 1, sizeof(char*));
  char** finals = calloc(s->packed_count + 1, sizeof(char*));
  kpack_error_t err = KPACK_SUCCESS;
  if (r->devices == NULL || r->trees == NULL || r->extras == NULL ||
      finals == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }
  for (size_t i = 0; i < s->packed_count; i++) {
    const char* base = strrchr(s->packed[i], '/');
    finals[i] = ws_join(s->outdir, base != NULL ? base + 1 : s->packed[i]);
    if (finals[i] == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto cleanup;
    }
  }
  for (size_t t = 0; t < s->tree_count; t++) {
    r->trees[t] = strdup(s->trees[t]);
    r->extras[t] = ws_extra(s->trees[t]);
    if (r->trees[t] == NULL || r->extras[t] == NULL) {
      r->device_count = t + 1;
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto cleanup;
    }
  }
  r->device_count = s->tree_count;
  /* Nothing can fail but the renames from here on. */
  if ((err = ws_move_in(s, finals)) != KPACK_SUCCESS)
    goto cleanup;
  r->host = finals[0];
  for (size_t t = 0; t < s->tree_count; t++)
    r->devices[t] = finals[t + 1];
  free(finals);
  *result = r;
  return KPACK_SUCCESS;

cleanup:
  if (finals != NULL)
    for (size_t i = 0; i < s->packed_count; i++)
      free(finals[i]);
  free(finals);
  kpack_wheel_split_result_free(r);
  return err;
}

kpack_error_t kpack_wheel_split(const char* wheel, const char* output_dir,
                                const kpack_wheel_split_options_t* options,
                                kpack_wheel_split_result_t** result, char* why,
                                size_t why_size) {
  if (why != NULL && why_size > 0)
    why[0] = '\0';
  if (result != NULL)
    *result = NULL;
  if (wheel == NULL || output_dir == NULL || options == NULL ||
      result == NULL || options->split_tree == NULL || options->level < 0 ||
      options->level > 9) {
    if (why != NULL && why_size > 0)
      snprintf(why, why_size, "kpack_wheel_split: a bad argument");
    return KPACK_ERROR_INVALID_ARGUMENT;
  }
  ws_state s = {.wheel = wheel,
                .outdir = output_dir,
                .options = options,
                .why = why,
                .why_size = why_size};
  kpack_error_t err = KPACK_SUCCESS;
  bool made_outdir = false;
  char *in = NULL, *keep = NULL, *split = NULL, *wheels = NULL;
  char* generic = NULL;

  struct stat st;
  if (stat(wheel, &st) != 0) {
    err = ws_sys(&s, "cannot read", wheel);
    goto cleanup;
  }
  if (mkdir(output_dir, 0755) == 0) {
    made_outdir = true;
  } else if (errno != EEXIST) {
    err = ws_sys(&s, "cannot make", output_dir);
    goto cleanup;
  } else if (stat(output_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    err = ws_fail(&s, KPACK_ERROR_INVALID_ARGUMENT, "%s: not a directory",
                  output_dir);
    goto cleanup;
  }
  if (asprintf(&s.scratch, "%s/.kpack-wheel-XXXXXX", output_dir) < 0) {
    s.scratch = NULL;
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }
  if (mkdtemp(s.scratch) == NULL) {
    err = ws_sys(&s, "cannot make a directory in", output_dir);
    free(s.scratch);
    s.scratch = NULL;
    goto cleanup;
  }
  in = ws_join(s.scratch, "in");
  keep = ws_join(s.scratch, "keep");
  split = ws_join(s.scratch, "split");
  wheels = ws_join(s.scratch, "wheels");
  generic = ws_join(s.scratch, "split/generic");
  if (in == NULL || keep == NULL || split == NULL || wheels == NULL ||
      generic == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }

  errno = 0;
  err = kp_wheel_unpack(wheel, in, &s.fat);
  if (err != KPACK_SUCCESS) {
    err = ws_fail(&s, err, "%s: %s", wheel, ws_unpack_reason(err, errno));
    goto cleanup;
  }
  const char* name = kp_metadata_get(&s.fat->metadata, "Name");
  if (name == NULL || kp_metadata_get(&s.fat->metadata, "Version") == NULL) {
    err = ws_fail(&s, KPACK_ERROR_INVALID_METADATA,
                  "%s: METADATA has no Name or Version", wheel);
    goto cleanup;
  }
  s.prefix = kp_wheel_escape_name(name);
  if (s.prefix == NULL ||
      asprintf(&s.archive_dir, "%s/%s", WS_ARCHIVE_ROOT, s.prefix) < 0) {
    s.archive_dir = NULL;
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto cleanup;
  }
  err = ws_set_aside(&s, in, keep);
  if (err != KPACK_SUCCESS)
    goto cleanup;
  err = options->split_tree(options->user, in, split, s.prefix, s.archive_dir);
  if (err != KPACK_SUCCESS) {
    err = ws_fail(&s, err, "%s: the split of its files failed: %s", wheel,
                  kpack_error_string(err));
    goto cleanup;
  }
  /* A tree without any file leaves no generic tree behind. */
  if (mkdir(generic, 0755) != 0 && errno != EEXIST) {
    err = ws_sys(&s, "cannot make", generic);
    goto cleanup;
  }
  if ((err = ws_move_all(&s, keep, generic)) != KPACK_SUCCESS ||
      (err = ws_list_trees(&s, split)) != KPACK_SUCCESS)
    goto cleanup;
  if (mkdir(wheels, 0755) != 0) {
    err = ws_sys(&s, "cannot make", wheels);
    goto cleanup;
  }
  err = ws_pack_all(&s, split, wheels);
  if (err != KPACK_SUCCESS) {
    err = ws_fail(&s, err, "%s: %s", wheel, kpack_error_string(err));
    goto cleanup;
  }
  err = ws_publish(&s, result);

cleanup:
  if (s.scratch != NULL && ws_remove_tree(s.scratch) != 0 &&
      err == KPACK_SUCCESS) {
    /* The wheels are in place; only the scratch directory stays. */
    err = KPACK_SUCCESS;
  }
  if (made_outdir && err != KPACK_SUCCESS)
    rmdir(output_dir);
  if (err == KPACK_ERROR_OUT_OF_MEMORY)
    ws_fail(&s, err, "%s: out of memory", wheel);
  free(s.scratch);
  free(in);
  free(keep);
  free(split);
  free(wheels);
  free(generic);
  kp_wheel_free(s.fat);
  free(s.prefix);
  free(s.archive_dir);
  for (size_t t = 0; t < s.tree_count; t++)
    free(s.trees[t]);
  free(s.trees);
  for (size_t i = 0; i < s.packed_count; i++)
    free(s.packed[i]);
  free(s.packed);
  return err;
}

void kpack_wheel_split_result_free(kpack_wheel_split_result_t* result) {
  if (result == NULL)
    return;
  free(result->host);
  for (size_t t = 0; t < result->device_count; t++) {
    free(result->devices[t]);
    free(result->trees[t]);
    free(result->extras[t]);
  }
  free(result->devices);
  free(result->trees);
  free(result->extras);
  free(result);
}
