/* SPDX-License-Identifier: MIT
 *
 * The split as a library call (kpack_split.h): the options checked and
 * taken in, the plan (split_plan.c) read back as data, its execution
 * (split_write.c) in order, and the result.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "producer/split.h"

KPACK_API void kpack_split_options_init(kpack_split_options_t* options,
                                        size_t size) {
  if (options == NULL)
    return;
  kpack_split_options_t defaults = {.size = size};
  memcpy(options, &defaults, size < sizeof(defaults) ? size : sizeof(defaults));
}

/* ---- groups -------------------------------------------------------------- */

/* Whether `processor` (of `len` bytes) is among the processors of group
 * spec `group` ("NAME=A,B"), the first `before` of them when `before` is
 * not SIZE_MAX. */
static bool group_names(const char* group, const char* processor, size_t len,
                        size_t before) {
  const char* p = strchr(group, '=');
  for (size_t i = 0; p != NULL && i < before;) {
    p++;
    size_t n = strcspn(p, ",");
    if (n == len && memcmp(p, processor, len) == 0)
      return true;
    p = p[n] == ',' ? p + n : NULL;
    i++;
  }
  return false;
}

KPACK_API bool kpack_split_check_group(const char* const* groups, size_t count,
                                       char* why, size_t why_size) {
  char scratch[1];
  if (why == NULL || why_size == 0) {
    why = scratch;
    why_size = sizeof(scratch);
  }
  why[0] = '\0';
  if (groups == NULL || count == 0 || groups[count - 1] == NULL)
    return false;
  const char* group = groups[count - 1];
  const char* eq = strchr(group, '=');
  if (eq == NULL || eq == group || eq[1] == '\0') {
    snprintf(why, why_size, "give NAME=ARCH,ARCH...");
    return false;
  }
  size_t name_len = (size_t)(eq - group);
  if (memchr(group, '/', name_len) != NULL ||
      (name_len == 7 && memcmp(group, "generic", 7) == 0) ||
      (name_len <= 2 && group[0] == '.' && group[name_len - 1] == '.')) {
    snprintf(why, why_size, "'%.*s' cannot name a tree", (int)name_len, group);
    return false;
  }
  /* A group named after a processor it does not hold would share that
   * processor's own tree: its files and theirs in one folder. */
  bool own_name = !kpack_processor_is_known(group, name_len);
  for (const char* p = eq + 1; !own_name;) {
    size_t n = strcspn(p, ",");
    own_name = n == name_len && memcmp(p, group, n) == 0;
    if (p[n] == '\0')
      break;
    p += n + 1;
  }
  if (!own_name) {
    snprintf(why, why_size,
             "%.*s is a GPU processor that the group does not hold: its "
             "files and the group's would share one tree; name the group "
             "otherwise (e.g. %.*s-group)",
             (int)name_len, group, (int)name_len, group);
    return false;
  }
  size_t index = 0;
  for (const char* p = eq + 1;; index++) {
    size_t n = strcspn(p, ",");
    bool twice = group_names(group, p, n, index);
    for (size_t o = 0; !twice && o + 1 < count; o++)
      twice = groups[o] != NULL && group_names(groups[o], p, n, SIZE_MAX);
    if (!kpack_processor_is_known(p, n)) {
      snprintf(why, why_size, "'%.*s' is not a GPU processor (such as gfx90a)",
               (int)n, p);
      return false;
    }
    if (twice) {
      snprintf(why, why_size, "%.*s is named twice", (int)n, p);
      return false;
    }
    if (p[n] == '\0')
      return true;
    p += n + 1;
  }
}

/* Takes in group spec `spec`, checked. */
static bool add_arch_group(sp_state* s, const char* spec) {
  const char* eq = strchr(spec, '=');
  sp_arch_group* groups = realloc(
      s->arch_groups, (s->arch_group_count + 1) * sizeof(*s->arch_groups));
  if (groups == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  s->arch_groups = groups;
  sp_arch_group* g = &groups[s->arch_group_count++];
  *g = (sp_arch_group){strndup(spec, (size_t)(eq - spec)), NULL, 0};
  g->processors = calloc(strlen(eq) + 1, sizeof(*g->processors));
  if (g->name == NULL || g->processors == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  for (const char* p = eq + 1; *p;) {
    size_t n = strcspn(p, ",");
    if ((g->processors[g->count] = strndup(p, n)) == NULL) {
      kp_out_of_memory(&s->run.report);
      return false;
    }
    g->count++;
    p += n;
    p += *p == ',';
  }
  return true;
}

/* ---- options ------------------------------------------------------------- */

/* DIR names a directory below a tree's root: relative, with no ".", ".."
 * or empty part. */
static bool is_relative_dir(const char* dir) {
  if (dir[0] == '\0' || dir[0] == '/')
    return false;
  for (const char* p = dir; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 0 || (n == 1 && p[0] == '.') ||
        (n == 2 && p[0] == '.' && p[1] == '.'))
      return false;
    p += n;
    if (*p == '/' && *++p == '\0')
      return false;
  }
  return true;
}

/* Takes in the options, each checked: what the caller's options cannot
 * mean is a USAGE message. */
static bool take_options(sp_state* s, const kpack_split_options_t* o,
                         size_t count) {
  pr_run* r = &s->run;
  char why[160];
  for (size_t i = 0; i < o->arch_count; i++)
    if (!kpack_target_check(o->arches[i], why, sizeof(why))) {
      pr_bad_options(r, true, NULL, "--arch '%s': not a GPU target: %s",
                     o->arches[i] != NULL ? o->arches[i] : "", why);
      return false;
    }
  for (size_t i = 0; i < o->group_count; i++)
    if (!kpack_split_check_group(o->groups, i + 1, why, sizeof(why))) {
      pr_bad_options(r, true, NULL, "--group '%s': %s",
                     o->groups[i] != NULL ? o->groups[i] : "", why);
      return false;
    }
  if (o->prefix != NULL &&
      (o->prefix[0] == '\0' || strchr(o->prefix, '/') != NULL ||
       strcmp(o->prefix, ".") == 0 || strcmp(o->prefix, "..") == 0)) {
    pr_bad_options(r, true, NULL,
                   "--prefix '%s' cannot be part of a file name (no '/'; "
                   "the archives are PREFIX_ARCH.kpack)",
                   o->prefix);
    return false;
  }
  if (o->archive_dir != NULL && !is_relative_dir(o->archive_dir)) {
    pr_bad_options(r, true, NULL,
                   "--archive-dir '%s' must be a relative path without '.', "
                   "'..' or empty parts",
                   o->archive_dir);
    return false;
  }
  if ((o->output_dir == NULL) == !o->in_place) {
    pr_bad_options(r, true, NULL, "%s",
                   o->in_place ? "in place and an output directory exclude "
                                 "each other"
                               : "no output: an output directory, or in place");
    return false;
  }
  if (!o->per_arch && (o->group_count > 0 || o->rules_file_count > 0)) {
    pr_bad_options(r, true, NULL, "groups and rules go with per-arch trees");
    return false;
  }
  if (o->per_arch && o->in_place) {
    pr_bad_options(r, true, NULL,
                   "per-arch trees are new trees: give an output directory");
    return false;
  }
  if (o->zstd_level < 0 || o->zstd_level > 22 ||
      (o->zstd_level > 0 && o->no_compress)) {
    pr_bad_options(r, true, NULL, "%s",
                   o->no_compress ? "a zstd level and no compression exclude "
                                    "each other"
                                  : "the zstd level is from 1 to 22");
    return false;
  }
  if (count == 0) {
    pr_bad_options(r, true, NULL, "no input: give a tree or a file");
    return false;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  s->wo = (kpack_writer_options_t){
      .scheme = o->no_compress ? KPACK_COMPRESSION_NOOP
                               : KPACK_COMPRESSION_ZSTD_PER_KERNEL,
      .zstd_level = o->zstd_level,
      .threads = o->threads > 0 ? o->threads
                 : cpus > 0     ? (unsigned)(cpus < 1024 ? cpus : 1024)
                                : 1};
  s->in_place = o->in_place;
  s->per_arch = o->per_arch;
  s->verbose = o->verbose;
  s->dry_run = o->dry_run;
  s->progress = o->progress;
  s->progress_user = o->progress_user;
  s->outdir = o->output_dir != NULL ? strdup(o->output_dir) : NULL;
  s->archive_dir = strdup(o->archive_dir != NULL ? o->archive_dir : ".kpack");
  s->only_arches = calloc(o->arch_count + 1, sizeof(*s->only_arches));
  s->only_matched = calloc(o->arch_count + 1, sizeof(*s->only_matched));
  if ((o->output_dir != NULL && s->outdir == NULL) || s->archive_dir == NULL ||
      s->only_arches == NULL || s->only_matched == NULL) {
    kp_out_of_memory(&r->report);
    return false;
  }
  for (; s->only_count < o->arch_count; s->only_count++)
    if ((s->only_arches[s->only_count] = strdup(o->arches[s->only_count])) ==
        NULL) {
      kp_out_of_memory(&r->report);
      return false;
    }
  for (size_t i = 0; i < o->group_count; i++)
    if (!add_arch_group(s, o->groups[i]))
      return false;
  /* The caller's rules first: the first rule that matches decides. */
  for (size_t i = 0; s->per_arch && i < o->rules_file_count; i++)
    if (!ar_rules_load(&s->rules, o->rules_files[i], &r->report,
                       KPACK_ERROR_INVALID_ARGUMENT)) {
      r->bad_options = true;
      return false;
    }
  return !s->per_arch || o->shipped_rules == NULL ||
         ar_rules_load(&s->rules, o->shipped_rules, &r->report,
                       KPACK_ERROR_INVALID_FORMAT);
}

/* ---- the split ----------------------------------------------------------- */

static void free_state(sp_state* s) {
  if (s->undo_plan)
    sp_undo_outputs(s);
  for (size_t i = 0; i < s->tree_count; i++) {
    free(s->trees[i].root);
    free(s->trees[i].single);
    free(s->trees[i].out_root);
    free(s->trees[i].prefix);
  }
  free(s->trees);
  for (size_t i = 0; i < s->file_count; i++) {
    if (s->files[i].tmp != NULL)
      unlink(s->files[i].tmp); /* never installed */
    free(s->files[i].tmp);
    free(s->files[i].all_dropped);
    free(s->files[i].rel);
    free(s->files[i].src);
    free(s->files[i].dst);
    free(s->files[i].dest);
    free(s->files[i].why);
  }
  free(s->files);
  for (size_t i = 0; i < s->kernel_count; i++) {
    free(s->kernels[i].key);
    free(s->kernels[i].arch);
  }
  free(s->kernels);
  free(s->order);
  free(s->groups);
  for (size_t i = 0; i < s->archive_count; i++) {
    sp_archive* a = &s->archives[i];
    kpack_writer_abort(a->writer);
    kpack_close(a->old);
    if (a->tmp != NULL)
      unlink(a->tmp); /* never put in place */
    free(a->tmp);
    free(a->carried);
    free(a->stale);
    free(a->arch);
    free(a->path);
    free(a->tree);
  }
  free(s->archives);
  for (size_t i = 0; i < s->dropped_count; i++)
    free((char*)s->dropped[i].arch);
  free(s->dropped);
  for (size_t i = 0; i < s->only_count; i++)
    free(s->only_arches[i]);
  free(s->only_arches);
  free(s->only_matched);
  for (size_t g = 0; g < s->arch_group_count; g++) {
    for (size_t i = 0; i < s->arch_groups[g].count; i++)
      free(s->arch_groups[g].processors[i]);
    free(s->arch_groups[g].processors);
    free((char*)s->arch_groups[g].name);
  }
  free(s->arch_groups);
  ar_rules_free(&s->rules);
  fr_outputs_free(&s->outputs);
  fr_locks_free(&s->locks);
  free(s->outdir);
  free(s->archive_dir);
  free(s);
}

KPACK_API void kpack_split_free(kpack_split_t* split) {
  if (split == NULL)
    return;
  /* Taking back an unexecuted plan's directories is no news to the caller,
   * whose message callback may be gone by now. */
  split->run.report.fn = NULL;
  free_state(split);
}

/* When the run was cancelled, says so (the kpack tool's words). */
static void say_if_cancelled(sp_state* s) {
  if (pr_cancelled(&s->run))
    kp_error(&s->run.report, NULL, KPACK_ERROR_CANCELLED, 0,
             "split: interrupted; no file was left half written");
}

KPACK_API kpack_error_t kpack_split_plan(const kpack_split_options_t* options,
                                         const char* const* inputs,
                                         size_t count, kpack_split_t** split) {
  kpack_split_options_t o;
  if (split != NULL)
    *split = NULL;
  if (options == NULL || split == NULL || (inputs == NULL && count > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  /* Fields past what the caller knows keep their defaults. */
  kpack_split_options_init(&o, sizeof(o));
  memcpy(&o, options, options->size < sizeof(o) ? options->size : sizeof(o));
  sp_state* s = calloc(1, sizeof(*s));
  if (s == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  pr_init(&s->run, o.message, o.message_user, o.cancel);
  bool ok = take_options(s, &o, count) &&
            sp_plan(s, inputs, count, o.prefix, o.archive_dir != NULL);
  if (ok && pr_cancelled(&s->run))
    ok = false;
  if (!ok) {
    say_if_cancelled(s);
    kpack_error_t err = pr_status(&s->run, KPACK_ERROR_INVALID_FORMAT);
    free_state(s);
    return err;
  }
  *split = s;
  return KPACK_SUCCESS;
}

/* ---- the plan, as data --------------------------------------------------- */

KPACK_API kpack_error_t kpack_split_get_counts(const kpack_split_t* s,
                                               kpack_split_counts_t* counts) {
  if (s == NULL || counts == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *counts =
      (kpack_split_counts_t){s->file_count, s->kernel_count, s->archive_count};
  return KPACK_SUCCESS;
}

static const kpack_split_file_type_t file_types[] = {
    [SP_DIR] = KPACK_SPLIT_DIRECTORY,
    [SP_FILE] = KPACK_SPLIT_FILE,
    [SP_HARDLINK] = KPACK_SPLIT_HARD_LINK,
    [SP_SYMLINK] = KPACK_SPLIT_SYMLINK,
};

KPACK_API kpack_error_t kpack_split_get_file(const kpack_split_t* s,
                                             size_t index,
                                             kpack_split_file_t* file) {
  if (s == NULL || file == NULL || index >= s->file_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const sp_file* f = &s->files[index];
  *file = (kpack_split_file_t){
      .source = f->src,
      .destination = f->dst,
      .path = f->rel,
      .type = file_types[f->type],
      .kind = f->type == SP_FILE ? f->kind : KPACK_TRANSFORM_NOT_ELF,
      .link_of = f->type == SP_HARDLINK ? f->link_of : index,
      .tree = f->tree,
      .output_tree =
          s->per_arch ? (f->dest != NULL ? f->dest : "generic") : NULL,
      .why = f->why};
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t
kpack_split_get_code_object(const kpack_split_t* s, size_t index,
                            kpack_split_code_object_t* code_object) {
  if (s == NULL || code_object == NULL || index >= s->kernel_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const sp_kernel* k = &s->kernels[index];
  *code_object = (kpack_split_code_object_t){k->key, k->arch, k->file,
                                             k->archive, k->size};
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_split_get_archive(
    const kpack_split_t* s, size_t index, kpack_split_archive_t* archive) {
  if (s == NULL || archive == NULL || index >= s->archive_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const sp_archive* a = &s->archives[index];
  const sp_group* g = &s->groups[a->group];
  /* The name below the output root (and tree): ARCHIVE_DIR/PREFIX_ARCH. */
  size_t name_len = strlen(s->archive_dir) + 1 + strlen(g->prefix) + 1 +
                    strlen(a->arch) + strlen(".kpack");
  const char* name = a->path + strlen(a->path) - name_len;
  *archive = (kpack_split_archive_t){
      .path = a->path,
      .name = name,
      .prefix = g->prefix,
      .arch = a->arch,
      .output_tree = a->tree,
      .keys_added = a->fresh,
      .keys_carried = a->carried_count,
      .keys_removed = a->removed,
      .existed = a->input != SIZE_MAX || a->old_path != NULL,
      .deleted = a->fresh + a->carried_count == 0};
  return KPACK_SUCCESS;
}

/* ---- execution ----------------------------------------------------------- */

KPACK_API kpack_error_t kpack_split_execute(kpack_split_t* s) {
  if (s == NULL || s->executed)
    return KPACK_ERROR_INVALID_ARGUMENT;
  s->executed = true;
  s->undo_plan = false; /* a failure here takes back the plan's outputs too */
  if (s->dry_run)
    return KPACK_SUCCESS;
  /* Transformed binaries (held back), archives, then into place. */
  bool ok = !pr_cancelled(&s->run) &&
            (s->in_place ? sp_note_in_place(s) : sp_make_directories(s)) &&
            sp_transform_all(s) && sp_write_archives(s) &&
            (s->in_place ? sp_install_in_place(s) : sp_install_mirror(s));
  if (ok)
    return KPACK_SUCCESS;
  say_if_cancelled(s);
  if (s->outputs.count > 0)
    sp_undo_outputs(s);
  return pr_status(&s->run, KPACK_ERROR_IO_ERROR);
}

KPACK_API kpack_error_t kpack_split_get_result(const kpack_split_t* s,
                                               kpack_split_result_t* result) {
  if (s == NULL || result == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *result = (kpack_split_result_t){.transformed = s->transformed,
                                   .kpackified = s->kpackified,
                                   .debug_only = s->debug_only,
                                   .copied = s->copied,
                                   .hard_links = s->links,
                                   .symbolic_links = s->symlinks,
                                   .archives = s->archives_written,
                                   .code_objects = s->packed,
                                   .removed = s->removed,
                                   .deleted = s->deleted,
                                   .by_content = s->by_content,
                                   .by_rule = s->by_rule,
                                   .recovered = s->recovered,
                                   .host_before = s->host_before,
                                   .host_after = s->host_after,
                                   .code_bytes = s->code_bytes,
                                   .stored_bytes = s->stored_bytes,
                                   .threads = s->wo.threads,
                                   .dropped = s->dropped,
                                   .dropped_count = s->dropped_count};
  return KPACK_SUCCESS;
}
