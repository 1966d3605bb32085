/* SPDX-License-Identifier: MIT
 *
 * `kpack split`, carrying out the plan (split_write.h): the transformed
 * binaries, the archives, the output trees and, last, each file into
 * place. Every file of the user's this run writes is written here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fatbin_stream.h"
#include "file_replace.h"
#include "host_view.h"
#include "split_write.h"

/* "../" per directory of `rel`, then ARCHIVE_DIR/PREFIX_@GFXARCH@.kpack. */
static char* search_path(const char* rel, const char* archive_dir,
                         const char* prefix) {
  size_t depth = 0;
  for (const char* p = rel; *p; p++)
    depth += *p == '/';
  size_t len = 3 * depth + strlen(archive_dir) + strlen(prefix) + 32;
  char* out = malloc(len);
  if (out == NULL)
    return NULL;
  out[0] = '\0';
  for (size_t i = 0; i < depth; i++)
    strcat(out, "../");
  snprintf(out + 3 * depth, len - 3 * depth, "%s/%s_@GFXARCH@.kpack",
           archive_dir, prefix);
  return out;
}

/* The distinct arches of file `file`'s code objects this run writes (after
 * --arch), for its metadata's kpack_arches; the strings are the kernels'.
 * Before sp_write_archives() sorts them, s->kernels are in listing order, file
 * by file: `*cursor` carries the first kernel not yet looked at from one
 * file to the next, so a tree of many binaries is read once. False when
 * out of memory. */
static bool binary_arches(const sp_state* s, size_t file, size_t* cursor,
                          const char*** out, size_t* count) {
  const char** arches = NULL;
  size_t n = 0, cap = 0, k = *cursor;
  while (k < s->kernel_count && s->kernels[k].file < file)
    k++;
  for (; k < s->kernel_count && s->kernels[k].file == file; k++) {
    const char* arch = s->kernels[k].arch;
    bool seen = false;
    for (size_t j = 0; !seen && j < n; j++)
      seen = strcmp(arches[j], arch) == 0;
    if (seen)
      continue;
    const char** grown = cli_grow(arches, n, &cap, sizeof(*grown), 8);
    if (grown == NULL) {
      free(arches);
      return false;
    }
    arches = grown;
    arches[n++] = arch;
  }
  *cursor = k;
  *out = arches;
  *count = n;
  return true;
}

bool sp_transform_all(sp_state* s) {
  size_t total = 0, kernel_cursor = 0;
  for (size_t i = 0; i < s->file_count; i++)
    total +=
        s->files[i].type == SP_FILE && s->files[i].kind == KPACK_TRANSFORM_FAT;
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    if (f->type != SP_FILE || f->kind != KPACK_TRANSFORM_FAT)
      continue;
    if (cli_interrupted())
      return false;
    /* One search path per directory that holds a name of the file (hard
     * links; the first eight directories), each relative to that
     * directory, first name first. */
    char* paths[8];
    size_t path_count = 0;
    bool ok = true;
    for (size_t j = i; ok && j < s->file_count && path_count < 8; j++) {
      const sp_file* name = &s->files[j];
      if (j != i && (name->type != SP_HARDLINK || name->link_of != i))
        continue;
      char* p =
          search_path(name->rel, s->archive_dir, s->trees[f->tree].prefix);
      bool seen = p == NULL;
      for (size_t k = 0; !seen && k < path_count; k++)
        seen = strcmp(paths[k], p) == 0;
      if (p == NULL) {
        cli_error("out of memory");
        ok = false;
      } else if (seen) {
        free(p);
      } else {
        paths[path_count++] = p;
      }
    }
    const char** arches = NULL;
    size_t arch_count = 0;
    if (ok && !binary_arches(s, i, &kernel_cursor, &arches, &arch_count)) {
      cli_error("out of memory");
      ok = false;
    }
    kpack_transform_options_t o = {.kernel_name = f->rel,
                                   .search_paths = (const char* const*)paths,
                                   .search_path_count = path_count,
                                   .arches = arches,
                                   .arch_count = arch_count};
    kpack_transform_message_t msg = {{0}};
    int fd = -1;
    ok = ok && fr_create_temp(f->dst, &f->tmp, &fd);
    if (ok) {
      kpack_error_t err =
          kpack_transform_write(f->src, fd, &o, &f->result, &msg);
      /* The output's failure (whatever errno, EIO too), not the input's. */
      bool output_failed = err == KPACK_ERROR_IO_ERROR &&
                           (cli_is_write_errno(errno) ||
                            strncmp(msg.text, KPACK_TRANSFORM_WRITE_FAILED,
                                    strlen(KPACK_TRANSFORM_WRITE_FAILED)) == 0);
      if (output_failed) {
        cli_output_error(f->dst, err, errno);
        close(fd);
        ok = false;
      } else if (err != KPACK_SUCCESS) {
        sp_transform_error(f->src, err, &msg);
        close(fd);
        ok = false;
      } else {
        ok = fr_finish_temp(fd, f->dst, &f->st, true);
      }
      if (ok)
        fr_step();
    }
    for (size_t k = 0; k < path_count; k++)
      free(paths[k]);
    free(arches);
    if (!ok)
      return false;
    s->transformed++;
    s->host_before += f->result.input_size;
    s->host_after += f->result.output_size;
    cli_progress_show(&s->progress, false,
                      "kpack: split: transformed %zu/%zu binaries",
                      s->transformed, total);
  }
  return true;
}

/* Kernels of a group in byte order of their keys (entries of one code
 * object in stored order): each archive then gets its keys in byte order,
 * and each code object of a fat binary is read once, all its arches
 * together. */
static int compare_kernels(const void* a, const void* b) {
  const sp_kernel* x = a;
  const sp_kernel* y = b;
  if (x->group != y->group)
    return x->group < y->group ? -1 : 1;
  int c = strcmp(x->key, y->key);
  if (c != 0)
    return c;
  return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* One archive of a group: written with this run's code objects for its
 * arch and the kernels its earlier version holds for binaries this run
 * does not write; rewritten without the latter's stale keys; or deleted
 * when nothing is left. */
typedef struct sp_archive {
  char* arch;
  char* path;          /* OUT_ROOT/.kpack/PREFIX_ARCH.kpack */
  sp_file* input;      /* the input path that is this archive, or NULL */
  kpack_archive_t old; /* its earlier version, or NULL */
  const char* old_path;
  const char** carried; /* keys of `old` kept, in byte order */
  size_t carried_count, next_carried;
  const char** stale; /* keys of `old` for binaries written anew: dropped */
  size_t stale_count;
  size_t fresh; /* code objects of this run */
  kpack_writer_t* writer;
} sp_archive;

typedef struct sp_archive_set {
  sp_archive* items;
  size_t count, cap;
} sp_archive_set;

static sp_archive* archive_for(sp_archive_set* set, const char* arch) {
  for (size_t i = 0; i < set->count; i++)
    if (strcmp(set->items[i].arch, arch) == 0)
      return &set->items[i];
  return NULL;
}

/* The directory of group g's archive for `arch`: OUT_ROOT/ARCHIVE_DIR,
 * with --per-arch OUTDIR/TREE/ARCHIVE_DIR, TREE the arch's processor or
 * its --group. */
static char* archive_dir_of(const sp_state* s, const sp_group* g,
                            const char* arch) {
  char* dir;
  int n = s->per_arch ? asprintf(&dir, "%s/%s/%s", g->out_root,
                                 sp_tree_of_arch(s, arch), s->archive_dir)
                      : asprintf(&dir, "%s/%s", g->out_root, s->archive_dir);
  return n < 0 ? NULL : dir;
}

/* ARCHIVE_DIR/PREFIX_ARCH.kpack of group g, below its output root. */
static char* archive_path(const sp_state* s, const sp_group* g,
                          const char* arch) {
  char* dir = archive_dir_of(s, g, arch);
  char* path;
  if (dir == NULL ||
      asprintf(&path, "%s/%s_%s.kpack", dir, g->prefix, arch) < 0)
    path = NULL;
  free(dir);
  return path;
}

static sp_archive* add_archive(sp_archive_set* set, const sp_state* s,
                               const sp_group* g, const char* arch) {
  sp_archive* items =
      cli_grow(set->items, set->count, &set->cap, sizeof(*items), 8);
  if (items == NULL)
    return NULL;
  set->items = items;
  sp_archive* a = &set->items[set->count];
  *a = (sp_archive){.arch = strdup(arch)};
  if (a->arch == NULL || (a->path = archive_path(s, g, arch)) == NULL) {
    free(a->arch);
    return NULL;
  }
  set->count++;
  return a;
}

static void free_archives(sp_archive_set* set) {
  for (size_t i = 0; i < set->count; i++) {
    sp_archive* a = &set->items[i];
    kpack_writer_abort(a->writer);
    kpack_close(a->old);
    free(a->carried);
    free(a->stale);
    free(a->arch);
    free(a->path);
  }
  free(set->items);
  *set = (sp_archive_set){0};
}

static int compare_strings(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Whether `key` ("REL#N") belongs to one of the binaries `written` (their
 * names, sorted). */
static bool key_of_written(const char* key, const char* const* written,
                           size_t count) {
  const char* hash = strrchr(key, '#');
  if (hash == NULL || count == 0)
    return false;
  char* rel = strndup(key, (size_t)(hash - key));
  bool found = rel != NULL && bsearch(&rel, written, count, sizeof(*written),
                                      compare_strings) != NULL;
  free(rel);
  return found;
}

/* Opens the earlier version of `a` at `src` when it is an archive of group
 * `g` for a->arch alone, and sorts its keys into carried and stale. An
 * archive that does not open, or is another group's, is left alone
 * (false, nothing reported), unless `must_read` (an input archive whose
 * kernels the new one carries over). */
static bool read_old_archive(sp_archive* a, const sp_group* g, const char* src,
                             const char* const* written, size_t written_count,
                             bool must_read, bool* failed) {
  kpack_archive_t old = NULL;
  size_t binaries = 0, arches = 0;
  const char* group = NULL;
  const char* arch = NULL;
  kpack_error_t err = kpack_open(src, &old);
  if (err == KPACK_SUCCESS)
    err = kpack_get_group_name(old, &group);
  if (err == KPACK_SUCCESS)
    err = kpack_get_architecture_count(old, &arches);
  if (err == KPACK_SUCCESS && arches == 1)
    err = kpack_get_architecture(old, 0, &arch);
  if (err == KPACK_SUCCESS)
    err = kpack_get_binary_count(old, &binaries);
  if (err != KPACK_SUCCESS || arch == NULL || strcmp(group, g->prefix) != 0 ||
      strcmp(arch, a->arch) != 0) {
    if (must_read && err != KPACK_SUCCESS) {
      cli_input_error(src, err, errno); /* from kpack_open() */
      *failed = true;
    }
    kpack_close(old);
    return false;
  }
  a->carried = calloc(binaries ? binaries : 1, sizeof(*a->carried));
  a->stale = calloc(binaries ? binaries : 1, sizeof(*a->stale));
  if (a->carried == NULL || a->stale == NULL) {
    cli_error("out of memory");
    kpack_close(old);
    *failed = true;
    return false;
  }
  /* An archive lists its binaries byte-wise (kpack.h): carried stays
   * sorted. */
  for (size_t b = 0; err == KPACK_SUCCESS && b < binaries; b++) {
    const char* key;
    kpack_kernel_info_t info;
    err = kpack_get_binary(old, b, &key);
    if (err != KPACK_SUCCESS ||
        kpack_get_kernel_info(old, key, a->arch, &info) != KPACK_SUCCESS)
      continue;
    if (key_of_written(key, written, written_count))
      a->stale[a->stale_count++] = key;
    else
      a->carried[a->carried_count++] = key;
  }
  if (err != KPACK_SUCCESS) {
    cli_kerror(src, err);
    kpack_close(old);
    *failed = true;
    return false;
  }
  a->old = old;
  a->old_path = src;
  return true;
}

/* The archives of group `g`: one per arch of its kernels [first, end), and
 * every earlier archive of the group (in the input, or in OUTDIR from an
 * earlier run), with the keys of binaries this run writes (`written`)
 * marked stale. */
static bool plan_archives(sp_state* s, size_t g, size_t first, size_t end,
                          const char* const* written, size_t written_count,
                          sp_archive_set* set) {
  const sp_group* group = &s->groups[g];
  for (size_t i = first; i < end; i++) {
    sp_archive* a = archive_for(set, s->kernels[i].arch);
    if (a == NULL &&
        (a = add_archive(set, s, group, s->kernels[i].arch)) == NULL) {
      cli_error("out of memory");
      return false;
    }
    a->fresh++;
  }
  /* Earlier archives: PREFIX_ARCH.kpack among the inputs that go to
   * OUT_ROOT/ARCHIVE_DIR, then those already there (OUTDIR's, or beside a
   * single-file input, which the walk does not see). */
  char* dir = NULL;
  bool ok = true, failed = false;
  if ((dir = archive_dir_of(s, group, "")) == NULL) {
    cli_error("out of memory");
    return false;
  }
  size_t prefix_len = strlen(group->prefix);
  /* Pass 0: the inputs; then one pass per directory that may hold the
   * group's archives: OUT_ROOT/ARCHIVE_DIR, with --per-arch
   * OUTDIR/TREE/ARCHIVE_DIR for each TREE already there. */
  DIR* trees = s->per_arch ? opendir(group->out_root) : NULL;
  for (int pass = 0; ok; pass++) {
    DIR* d = NULL;
    size_t i = 0;
    char* found_dir = NULL;
    if (pass == 1 && !s->per_arch) {
      if ((d = opendir(dir)) == NULL)
        break;
    } else if (pass >= 1) {
      struct dirent* e = trees != NULL ? readdir(trees) : NULL;
      if (e == NULL)
        break;
      if (e->d_name[0] == '.' ||
          asprintf(&found_dir, "%s/%s/%s", group->out_root, e->d_name,
                   s->archive_dir) < 0 ||
          (d = opendir(found_dir)) == NULL) {
        free(found_dir);
        continue;
      }
    }
    for (;;) {
      const char* name;
      sp_file* input = NULL;
      if (pass == 0) {
        if (i == s->file_count)
          break;
        input = &s->files[i++];
        if (input->type == SP_DIR)
          continue;
        const char* slash = strrchr(input->dst, '/');
        name = slash != NULL ? slash + 1 : input->dst;
      } else {
        struct dirent* e = readdir(d);
        bool stale = false;
        if (e == NULL)
          break;
        name = e->d_name;
        if (sp_is_writer_temp(name, &stale) && stale)
          unlinkat(dirfd(d), name, 0); /* left by a killed run */
      }
      size_t len = strlen(name);
      if (strchr(name, '/') != NULL || len <= prefix_len + 7 ||
          strncmp(name, group->prefix, prefix_len) != 0 ||
          name[prefix_len] != '_' || strcmp(name + len - 6, ".kpack") != 0)
        continue;
      char* arch = strndup(name + prefix_len + 1, len - prefix_len - 7);
      if (arch == NULL) {
        cli_error("out of memory");
        ok = false;
        break;
      }
      sp_archive* a = archive_for(set, arch);
      bool added = a == NULL;
      if (added)
        a = add_archive(set, s, group, arch);
      free(arch);
      if (a == NULL) {
        cli_error("out of memory");
        ok = false;
        break;
      }
      /* Only the file at the archive's own path is its earlier version. */
      char* path = NULL;
      if (found_dir != NULL && asprintf(&path, "%s/%s", found_dir, name) < 0) {
        cli_error("out of memory");
        ok = false;
        break;
      }
      bool elsewhere = pass == 0 ? strcmp(input->dst, a->path) != 0
                                 : path != NULL && strcmp(path, a->path) != 0;
      free(path);
      if (elsewhere) {
        if (added) {
          free(set->items[set->count - 1].arch);
          free(set->items[set->count - 1].path);
          set->count--;
        }
        continue;
      }
      if (pass >= 1 && (a->input != NULL || a->old != NULL))
        continue; /* the input's archive of that name is mirrored over it */
      if (pass == 0)
        a->input = input;
      if (!read_old_archive(a, group, pass == 0 ? input->src : a->path, written,
                            written_count, pass == 0 && a->fresh > 0,
                            &failed) &&
          added && !failed) {
        /* Not an archive of this group: not ours to rewrite. */
        free(set->items[set->count - 1].arch);
        free(set->items[set->count - 1].path);
        set->count--;
      }
      if (failed) {
        ok = false;
        break;
      }
    }
    if (d != NULL)
      closedir(d);
    free(found_dir);
  }
  if (trees != NULL)
    closedir(trees);
  free(dir);
  return ok;
}

/* Carries the old keys of `a` that sort before `key` (all when NULL) into
 * its new version. */
static bool carry_before(sp_archive* a, const char* key) {
  for (; a->next_carried < a->carried_count; a->next_carried++) {
    const char* old_key = a->carried[a->next_carried];
    if (key != NULL && strcmp(old_key, key) >= 0)
      break;
    kpack_error_t err =
        kpack_writer_copy_kernel(a->writer, a->old, old_key, a->arch, 0);
    if (err != KPACK_SUCCESS) {
      cli_writer_error(a->writer, err, a->path, a->old_path, old_key, a->arch);
      return false;
    }
  }
  return true;
}

/* Streams kernels [first, end) of one group into the writers of `set`:
 * each fat binary opened once, each of its code objects read once (a
 * compressed one decompressed once) and handed to the writer of its arch,
 * the old keys merged in. */
static bool stream_kernels(sp_state* s, size_t first, size_t end,
                           sp_archive_set* set) {
  fbs_reader reader = {0};
  kpack_fatbin_t* fatbin = NULL; /* of fatbin_file */
  const sp_file* fatbin_file = NULL;
  bool ok = false;
  for (size_t i = first; i < end; i++) {
    const sp_kernel* k = &s->kernels[i];
    const sp_file* f = &s->files[k->file];
    sp_archive* a = archive_for(set, k->arch);
    const void* data;
    size_t size;
    if (cli_interrupted())
      goto done;
    if (i > first && strcmp(k->key, s->kernels[i - 1].key) != 0)
      fbs_reader_release(&reader); /* that code object is done */
    if (fatbin_file != f) {
      kpack_fatbin_close(fatbin);
      fatbin = NULL;
      fatbin_file = f;
      kpack_error_t err = kpack_fatbin_open(f->src, &fatbin);
      if (err != KPACK_SUCCESS) {
        cli_host_error(f->src, err);
        goto done;
      }
    }
    if (!carry_before(a, k->key))
      goto done;
    if (!fbs_read(&reader, f->src, fatbin, k->bundle, k->entry, k->compressed,
                  &data, &size))
      goto done;
    kpack_error_t err =
        kpack_writer_add_kernel(a->writer, k->key, a->arch, data, size);
    if (err != KPACK_SUCCESS) {
      cli_writer_error(a->writer, err, a->path, NULL, k->key, a->arch);
      goto done;
    }
    s->packed++;
    s->code_bytes += size;
    cli_progress_show(&s->progress, false,
                      "kpack: split: packing %zu/%zu code objects", s->packed,
                      s->kernel_count);
  }
  for (size_t i = 0; i < set->count; i++)
    if (set->items[i].writer != NULL && !carry_before(&set->items[i], NULL))
      goto done;
  ok = true;
done:
  fbs_reader_free(&reader);
  kpack_fatbin_close(fatbin);
  return ok;
}

/* The stale keys of `a` that no kernel of [first, end) (sorted by key)
 * writes again: code objects the new archive no longer has. */
static size_t removed_keys(const sp_state* s, size_t first, size_t end,
                           const sp_archive* a) {
  size_t removed = 0, i = first;
  for (size_t k = 0; k < a->stale_count; k++) {
    int c = 1;
    for (; i < end && c > 0; i++)
      if (strcmp(s->kernels[i].arch, a->arch) == 0)
        c = strcmp(a->stale[k], s->kernels[i].key);
    if (c != 0)
      removed++;
    if (c < 0)
      i--; /* that kernel is compared again with the next stale key */
  }
  return removed;
}

/* Writes the archives of group g, whose kernels are [first, end). */
static bool write_group(sp_state* s, size_t g, size_t first, size_t end,
                        kpack_writer_pool_t* pool) {
  const sp_group* group = &s->groups[g];
  sp_archive_set set = {0};
  const char** written = NULL;
  size_t written_count = 0;
  bool ok = false;
  char* dir = NULL;
  /* The binaries this run writes: their keys in earlier archives go. */
  written = calloc(s->file_count ? s->file_count : 1, sizeof(*written));
  if (written == NULL) {
    cli_error("out of memory");
    goto done;
  }
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].type == SP_FILE &&
        s->files[i].kind == KPACK_TRANSFORM_FAT && s->files[i].group == g)
      written[written_count++] = s->files[i].rel;
  if (written_count > 1)
    qsort(written, written_count, sizeof(*written), compare_strings);
  if (!plan_archives(s, g, first, end, written, written_count, &set))
    goto done;
  /* Open a writer for every archive that changes and keeps something. */
  for (size_t i = 0; i < set.count; i++) {
    sp_archive* a = &set.items[i];
    if ((a->fresh == 0 && a->stale_count == 0) ||
        a->fresh + a->carried_count == 0)
      continue;
    const char* const arches[1] = {a->arch};
    kpack_writer_options_t wo = s->wo;
    wo.group_name = group->prefix;
    wo.gfx_arches = arches;
    wo.gfx_arch_count = 1;
    wo.pool = pool;
    free(dir);
    if ((dir = archive_dir_of(s, group, a->arch)) == NULL) {
      cli_error("out of memory");
      goto done;
    }
    if (!cli_mkdirs(dir, 0755)) {
      cli_error("%s: cannot create: %s", dir, strerror(errno));
      goto done;
    }
    kpack_error_t err = kpack_writer_create(a->path, &wo, &a->writer);
    if (err != KPACK_SUCCESS) {
      cli_output_error(a->path, err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
      goto done;
    }
  }
  if (!stream_kernels(s, first, end, &set))
    goto done;
  for (size_t i = 0; i < set.count; i++) {
    sp_archive* a = &set.items[i];
    if (a->fresh == 0 && a->stale_count == 0)
      continue; /* unchanged */
    s->removed += removed_keys(s, first, end, a);
    if (a->input != NULL)
      a->input->archive_rewritten = true; /* not mirrored over the new one */
    if (a->writer == NULL) {
      /* Nothing left in it. Removed now, as other archives are rewritten
       * now: a run killed later must not leave it to the next, which
       * would take its keys for those of binaries it does not write. */
      if (unlink(a->path) != 0 && errno != ENOENT) {
        cli_error("%s: cannot remove: %s", a->path, strerror(errno));
        goto done;
      }
      s->deleted++;
      fr_step();
      continue;
    }
    kpack_error_t err = kpack_writer_finish(a->writer);
    a->writer = NULL;
    if (err != KPACK_SUCCESS) {
      cli_output_error(a->path, err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
      goto done;
    }
    struct stat st;
    if (stat(a->path, &st) == 0)
      s->stored_bytes += (uint64_t)st.st_size;
    s->archives++;
    fr_step();
  }
  ok = true;
done:
  free_archives(&set);
  free(written);
  free(dir);
  return ok;
}

bool sp_write_archives(sp_state* s) {
  kpack_writer_pool_t* pool = NULL;
  bool ok = true;
  if (s->kernel_count > 1)
    qsort(s->kernels, s->kernel_count, sizeof(*s->kernels), compare_kernels);
  if (s->wo.threads > 1 && s->wo.scheme != KPACK_COMPRESSION_NOOP) {
    kpack_error_t err = kpack_writer_pool_create(s->wo.threads, &pool);
    if (err != KPACK_SUCCESS) {
      cli_kerror("split", err);
      return false;
    }
  }
  for (size_t g = 0, i = 0; ok && g < s->group_count; g++) {
    size_t end = i;
    while (end < s->kernel_count && s->kernels[end].group == g)
      end++;
    ok = write_group(s, g, i, end, pool);
    i = end;
  }
  kpack_writer_pool_destroy(pool);
  return ok;
}

/* A symbolic link or a hard link made under a temporary name, then renamed
 * over dst, so an existing file there is replaced in one step. */
static bool install_link(sp_state* s, const sp_file* f) {
  char* tmp = NULL;
  int fd;
  bool ok = false;
  if (!fr_create_temp(f->dst, &tmp, &fd))
    return false;
  close(fd);
  unlink(tmp);
  if (f->type == SP_HARDLINK) {
    if (link(s->files[f->link_of].dst, tmp) != 0) {
      cli_error("%s: cannot link to %s: %s", f->dst, s->files[f->link_of].dst,
                strerror(errno));
      goto done;
    }
    s->links++;
  } else {
    char target[PATH_MAX];
    ssize_t n = readlink(f->src, target, sizeof(target) - 1);
    if (n < 0) {
      cli_error("%s: %s", f->src, strerror(errno));
      goto done;
    }
    target[n] = '\0';
    const struct timespec times[2] = {f->st.st_atim, f->st.st_mtim};
    if (symlink(target, tmp) != 0 ||
        (geteuid() == 0 && lchown(tmp, f->st.st_uid, f->st.st_gid) != 0) ||
        utimensat(AT_FDCWD, tmp, times, AT_SYMLINK_NOFOLLOW) != 0) {
      cli_error("%s: cannot make the symbolic link: %s", f->dst,
                strerror(errno));
      unlink(tmp);
      goto done;
    }
    s->symlinks++;
  }
  ok = fr_install(tmp, f->dst, false);
  if (!ok)
    unlink(tmp);
done:
  free(tmp);
  return ok;
}

bool sp_install_mirror(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    bool ok = true;
    if (cli_interrupted())
      return false;
    if (f->archive_rewritten) {
      /* written anew, its old kernels carried over */
    } else if (f->type == SP_HARDLINK || f->type == SP_SYMLINK) {
      ok = install_link(s, f);
    } else if (f->type == SP_FILE && f->tmp != NULL) {
      ok = fr_install(f->tmp, f->dst, false);
      if (ok) {
        free(f->tmp);
        f->tmp = NULL;
      }
    } else if (f->type == SP_FILE) {
      char* tmp = NULL;
      int fd;
      if (fr_create_temp(f->dst, &tmp, &fd)) {
        /* fr_finish_temp() closes the file, also on failure. */
        ok = fr_copy_into(f->src, fd, f->dst);
        if (!ok)
          close(fd);
        ok = ok && fr_finish_temp(fd, f->dst, &f->st, false) &&
             fr_install(tmp, f->dst, false);
        if (!ok)
          unlink(tmp);
      } else {
        ok = false;
      }
      free(tmp);
      s->copied += ok;
    }
    if (!ok)
      return false;
    cli_progress_show(&s->progress, false,
                      "kpack: split: writing %zu/%zu files", i + 1,
                      s->file_count);
  }
  for (size_t i = s->file_count; i-- > 0;) {
    const sp_file* f = &s->files[i];
    const struct timespec times[2] = {f->st.st_atim, f->st.st_mtim};
    if (f->type != SP_DIR)
      continue;
    if ((geteuid() == 0 && lchown(f->dst, f->st.st_uid, f->st.st_gid) != 0) ||
        chmod(f->dst, f->st.st_mode & 07777) != 0 ||
        utimensat(AT_FDCWD, f->dst, times, 0) != 0) {
      cli_error("%s: %s", f->dst, strerror(errno));
      return false;
    }
  }
  return true;
}

bool sp_install_in_place(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    if (f->tmp == NULL)
      continue;
    if (cli_interrupted())
      return false;
    bool ok = f->st.st_nlink > 1 ? fr_rewrite_in_place(f->tmp, f->dst)
                                 : fr_install(f->tmp, f->dst, true);
    if (!ok)
      return false;
    free(f->tmp);
    f->tmp = NULL;
  }
  return true;
}

/* Per-arch: notes and makes OUTDIR/generic and OUTDIR/TREE for each tree
 * of a file or an archive (a single-file input has no directory entry to
 * make its tree's). */
static bool make_tree_roots(sp_state* s) {
  char** trees;
  size_t count;
  if (!sp_distinct_trees(s, &trees, &count))
    return false;
  bool ok = true;
  for (size_t i = 0; ok && i <= count; i++) {
    const char* t = i == 0 ? "generic" : trees[i - 1];
    char* path = NULL;
    if (asprintf(&path, "%s/%s", s->outdir, t) < 0) {
      cli_error("out of memory");
      ok = false;
      break;
    }
    ok = fr_outputs_note(&s->outputs, path);
    if (ok && !cli_mkdirs(path, 0755)) {
      cli_error("%s: cannot create: %s", path, strerror(errno));
      ok = false;
    }
    free(path);
  }
  sp_free_trees(trees, count);
  return ok;
}

/* Notes each directory from below `root` down to `dir` (a path below it). */
static bool note_directories(sp_state* s, const char* root, const char* dir) {
  size_t root_len = strlen(root);
  char* path = strdup(dir);
  bool ok = path != NULL;
  for (char* p = path != NULL ? path + root_len + 1 : NULL; ok && p != NULL;) {
    char* slash = strchr(p, '/');
    if (slash != NULL)
      *slash = '\0';
    ok = fr_outputs_note(&s->outputs, path);
    if (slash != NULL)
      *slash = '/';
    p = slash != NULL ? slash + 1 : NULL;
  }
  if (path == NULL)
    cli_error("out of memory");
  free(path);
  return ok;
}

bool sp_first_of_archive(const sp_state* s, size_t i) {
  const sp_kernel* k = &s->kernels[i];
  for (size_t j = i; j-- > 0;)
    if (s->kernels[j].group == k->group &&
        strcmp(s->kernels[j].arch, k->arch) == 0)
      return false;
  return true;
}

/* Mirror: notes every path the run may write as it is now, so that a
 * failed run can take back what it made (undo_outputs), then makes the
 * directories. The archives and their directory are noted first, the tree
 * in walk order after: a directory is always noted before what it holds. */
static bool note_outputs(sp_state* s) {
  for (size_t i = 0; i < s->tree_count; i++)
    if (!fr_outputs_note_parents(&s->outputs, s->trees[i].out_root))
      return false;
  if (s->per_arch && !make_tree_roots(s))
    return false;
  for (size_t i = 0; i < s->kernel_count; i++) {
    const sp_kernel* k = &s->kernels[i];
    const sp_group* g = &s->groups[k->group];
    char *dir = NULL, *path = NULL;
    if (!sp_first_of_archive(s, i))
      continue; /* its archive is noted */
    dir = archive_dir_of(s, g, k->arch);
    path = archive_path(s, g, k->arch);
    bool ok = path != NULL && dir != NULL &&
              note_directories(s, g->out_root, dir) &&
              fr_outputs_note(&s->outputs, path);
    if (path == NULL)
      cli_error("out of memory");
    free(dir);
    free(path);
    if (!ok)
      return false;
  }
  for (size_t i = 0; i < s->file_count; i++)
    if (!fr_outputs_note(&s->outputs, s->files[i].dst))
      return false;
  return true;
}

/* A directory this run made gets the input's mode (and owner) at once, so
 * that no failure can leave it with another. The owner keeps rwx until
 * install_mirror, to write into it; install_mirror then sets the exact
 * mode and the times. */
static bool set_directory_mode(const sp_file* f) {
  if ((geteuid() == 0 && lchown(f->dst, f->st.st_uid, f->st.st_gid) != 0) ||
      chmod(f->dst, (f->st.st_mode & 07777) | S_IRWXU) != 0) {
    cli_error("%s: %s", f->dst, strerror(errno));
    return false;
  }
  return true;
}

bool sp_make_directories(sp_state* s) {
  bool ok = note_outputs(s);
  bool* made_root = calloc(s->tree_count, sizeof(*made_root));
  if (ok && made_root == NULL) {
    cli_error("out of memory");
    ok = false;
  }
  for (size_t i = 0; ok && i < s->tree_count; i++) {
    made_root[i] = access(s->trees[i].out_root, F_OK) != 0;
    if (!cli_mkdirs(s->trees[i].out_root, 0755)) {
      cli_error("%s: cannot create: %s", s->trees[i].out_root, strerror(errno));
      ok = false;
    }
  }
  for (size_t i = 0; ok && i < s->file_count; i++) {
    const sp_file* f = &s->files[i];
    if (f->type != SP_DIR)
      continue;
    bool made = mkdir(f->dst, 0700) == 0;
    if (!made && errno != EEXIST) {
      cli_error("%s: cannot create: %s", f->dst, strerror(errno));
      ok = false;
    } else if (made || (f->rel[0] == '\0' && made_root[f->tree])) {
      ok = set_directory_mode(f);
    }
  }
  free(made_root);
  return ok;
}

void sp_undo_outputs(sp_state* s, const char* outdir) {
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].tmp != NULL) {
      unlink(s->files[i].tmp);
      free(s->files[i].tmp);
      s->files[i].tmp = NULL;
    }
  fr_outputs_undo(&s->outputs, outdir);
}
