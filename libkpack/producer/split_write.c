/* SPDX-License-Identifier: MIT
 *
 * The split, carrying out the plan (split.h): the transformed binaries,
 * the archives, the output trees and, last, each file into place. Every
 * file of the user's this run writes is written here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "producer/split.h"

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

/* What file `file`'s metadata records of the arches this run writes its
 * code objects for (after --arch): `arches`, the distinct ones, for
 * kpack_arches, and `records`, each code object's own (its key's #N), for
 * kpack_record_arches. The strings are the kernels'. */
typedef struct binary_arches {
  const char** arches;
  size_t count, cap;
  kpack_transform_record_t* records;
  size_t record_count, record_cap;
  const char** lists; /* every record's arches, back to back */
  size_t list_count, list_cap;
} binary_arches;

static void binary_arches_free(binary_arches* b) {
  free(b->arches);
  free(b->records);
  free(b->lists);
  memset(b, 0, sizeof(*b));
}

static bool push_arch(const char*** list, size_t* count, size_t* cap,
                      const char* arch) {
  const char** grown = kp_grow(*list, *count, cap, sizeof(*grown), 8);
  if (grown == NULL)
    return false;
  *list = grown;
  (*list)[(*count)++] = arch;
  return true;
}

/* The code object index of key "REL#N". */
static uint64_t key_co_index(const char* key) {
  const char* hash = strrchr(key, '#');
  return hash != NULL ? strtoull(hash + 1, NULL, 10) : 0;
}

/* Fills *b for file `file`. s->kernels are in listing order, file by file,
 * a code object's arches together: `*cursor` carries the first kernel not
 * yet looked at from one file to the next, so a tree of many binaries is
 * read once. False when out of memory. */
static bool collect_arches(const sp_state* s, size_t file, size_t* cursor,
                           binary_arches* b) {
  size_t k = *cursor;
  memset(b, 0, sizeof(*b));
  while (k < s->kernel_count && s->kernels[k].file < file)
    k++;
  size_t first = k;
  for (; k < s->kernel_count && s->kernels[k].file == file; k++) {
    const char* arch = s->kernels[k].arch;
    bool seen = false;
    for (size_t j = 0; !seen && j < b->count; j++)
      seen = strcmp(b->arches[j], arch) == 0;
    if ((!seen && !push_arch(&b->arches, &b->count, &b->cap, arch)) ||
        !push_arch(&b->lists, &b->list_count, &b->list_cap, arch))
      goto oom;
  }
  /* Now that `lists` stays where it is: one record per run of one key. */
  for (size_t j = first; j < k; j++) {
    uint64_t co = key_co_index(s->kernels[j].key);
    kpack_transform_record_t* last =
        b->record_count > 0 ? &b->records[b->record_count - 1] : NULL;
    if (last != NULL && last->co_index == co) {
      last->arch_count++;
      continue;
    }
    kpack_transform_record_t* grown =
        kp_grow(b->records, b->record_count, &b->record_cap, sizeof(*grown), 8);
    if (grown == NULL)
      goto oom;
    b->records = grown;
    b->records[b->record_count++] = (kpack_transform_record_t){
        .co_index = co, .arches = b->lists + (j - first), .arch_count = 1};
  }
  *cursor = k;
  return true;
oom:
  binary_arches_free(b);
  return false;
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
    if (pr_cancelled(&s->run))
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
        kp_out_of_memory(&s->run.report);
        ok = false;
      } else if (seen) {
        free(p);
      } else {
        paths[path_count++] = p;
      }
    }
    binary_arches arches = {0};
    if (ok && !collect_arches(s, i, &kernel_cursor, &arches)) {
      kp_out_of_memory(&s->run.report);
      ok = false;
    }
    kpack_transform_options_t o = {.kernel_name = f->rel,
                                   .search_paths = (const char* const*)paths,
                                   .search_path_count = path_count,
                                   .arches = arches.arches,
                                   .arch_count = arches.count};
    kpack_transform_message_t msg = {{0}};
    int fd = -1;
    ok = ok && fr_create_temp(&s->run, f->dst, &f->tmp, &fd);
    if (ok) {
      kpack_error_t err =
          kpack_transform_write_records(f->src, fd, &o, arches.records,
                                        arches.record_count, &f->result, &msg);
      /* The output's failure (whatever errno, EIO too), not the input's. */
      bool output_failed = err == KPACK_ERROR_IO_ERROR &&
                           (pr_is_write_errno(errno) ||
                            strncmp(msg.text, KPACK_TRANSFORM_WRITE_FAILED,
                                    strlen(KPACK_TRANSFORM_WRITE_FAILED)) == 0);
      if (output_failed) {
        pr_output_error(&s->run, f->dst, err, errno);
        close(fd);
        ok = false;
      } else if (err != KPACK_SUCCESS) {
        pr_transform_error(&s->run, f->src, err, &msg);
        close(fd);
        ok = false;
      } else {
        ok = fr_finish_temp(&s->run, fd, f->dst, &f->st, true) &&
             !pr_fault(&s->run, f->dst);
      }
      if (ok)
        pr_step(&s->run);
    }
    for (size_t k = 0; k < path_count; k++)
      free(paths[k]);
    binary_arches_free(&arches);
    if (!ok)
      return false;
    s->transformed++;
    s->host_before += f->result.input_size;
    s->host_after += f->result.output_size;
    if (!sp_progress(s, KPACK_SPLIT_TRANSFORMING, s->transformed, total))
      return false;
  }
  return true;
}

/* Carries the old keys of `a` that sort before `key` (all when NULL) into
 * its new version. */
static bool carry_before(sp_state* s, sp_archive* a, const char* key) {
  for (; a->next_carried < a->carried_count; a->next_carried++) {
    const char* old_key = a->carried[a->next_carried];
    if (key != NULL && strcmp(old_key, key) >= 0)
      break;
    kpack_error_t err =
        kpack_writer_copy_kernel(a->writer, a->old, old_key, a->arch, 0);
    if (err != KPACK_SUCCESS) {
      pr_writer_error(&s->run, a->writer, err, a->path, a->old_path, old_key,
                      a->arch);
      return false;
    }
  }
  return true;
}

/* Streams the kernels order[first, end) of one group into the writers of
 * its archives [ga, gb): each fat binary opened once, each of its code
 * objects read once (a compressed one decompressed once) and handed to
 * the writer of its arch, the old keys merged in. */
static bool stream_kernels(sp_state* s, size_t first, size_t end, size_t ga,
                           size_t gb) {
  kpack_fatbin_reader_t* reader = NULL;
  kpack_fatbin_t* fatbin = NULL; /* of fatbin_file */
  const sp_file* fatbin_file = NULL;
  bool ok = false;
  if (kpack_fatbin_reader_create(&reader) != KPACK_SUCCESS) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  for (size_t i = first; i < end; i++) {
    const sp_kernel* k = s->order[i];
    const sp_file* f = &s->files[k->file];
    sp_archive* a = &s->archives[k->archive];
    const void* data;
    size_t size;
    if (pr_cancelled(&s->run))
      goto done;
    if (i > first && strcmp(k->key, s->order[i - 1]->key) != 0)
      kpack_fatbin_reader_release(reader); /* that code object is done */
    if (fatbin_file != f) {
      kpack_fatbin_close(fatbin);
      fatbin = NULL;
      fatbin_file = f;
      kpack_error_t err = kpack_fatbin_open(f->src, &fatbin);
      if (err != KPACK_SUCCESS) {
        pr_host_error(&s->run, f->src, err);
        goto done;
      }
    }
    if (!carry_before(s, a, k->key))
      goto done;
    if (kpack_fatbin_reader_read(reader, fatbin, f->src, k->bundle, k->entry,
                                 k->compressed, &data, &size, sp_fatbin_message,
                                 s) != KPACK_SUCCESS)
      goto done;
    kpack_error_t err =
        kpack_writer_add_kernel(a->writer, k->key, a->arch, data, size);
    if (err != KPACK_SUCCESS) {
      pr_writer_error(&s->run, a->writer, err, a->path, NULL, k->key, a->arch);
      goto done;
    }
    s->packed++;
    s->code_bytes += size;
    if (!sp_progress(s, KPACK_SPLIT_PACKING, s->packed, s->kernel_count))
      goto done;
  }
  for (size_t i = ga; i < gb; i++)
    if (s->archives[i].writer != NULL &&
        !carry_before(s, &s->archives[i], NULL))
      goto done;
  ok = true;
done:
  kpack_fatbin_reader_destroy(reader);
  kpack_fatbin_close(fatbin);
  return ok;
}

/* Whether the run changes archive `a`: it gets code objects, or loses
 * keys of earlier builds. */
static bool archive_changes(const sp_archive* a) {
  return a->fresh > 0 || a->stale_count > 0;
}

/* Writes the archives [ga, gb) of group g, whose kernels are order[first,
 * end). */
static bool write_group(sp_state* s, size_t g, size_t first, size_t end,
                        size_t ga, size_t gb, kpack_writer_pool_t* pool) {
  const sp_group* group = &s->groups[g];
  bool ok = false;
  char* dir = NULL;
  /* Open a writer for every archive that changes and keeps something. */
  for (size_t i = ga; i < gb; i++) {
    sp_archive* a = &s->archives[i];
    if (!archive_changes(a) || a->fresh + a->carried_count == 0)
      continue;
    const char* const arches[1] = {a->arch};
    kpack_writer_options_t wo = s->wo;
    wo.group_name = group->prefix;
    wo.gfx_arches = arches;
    wo.gfx_arch_count = 1;
    wo.pool = pool;
    free(dir);
    if ((dir = sp_archive_dir_of(s, group, a->arch)) == NULL) {
      kp_out_of_memory(&s->run.report);
      goto done;
    }
    if (!fr_mkdirs(dir)) {
      kp_error(&s->run.report, dir, KPACK_ERROR_IO_ERROR, errno,
               "%s: cannot create: %s", dir, strerror(errno));
      goto done;
    }
    /* The new version waits beside the old one until the whole tree is
     * ready (sp_install_mirror(), sp_install_in_place()). */
    if ((a->tmp = fr_temp_name(a->path)) == NULL) {
      kp_out_of_memory(&s->run.report);
      goto done;
    }
    kpack_error_t err = kpack_writer_create(a->tmp, &wo, &a->writer);
    if (err != KPACK_SUCCESS) {
      pr_output_error(&s->run, a->path, err,
                      err == KPACK_ERROR_IO_ERROR ? errno : 0);
      goto done;
    }
  }
  if (!stream_kernels(s, first, end, ga, gb))
    goto done;
  for (size_t i = ga; i < gb; i++) {
    sp_archive* a = &s->archives[i];
    if (!archive_changes(a))
      continue; /* unchanged */
    s->removed += a->removed;
    if (a->writer == NULL) {
      a->drop = true; /* removed when the tree is put in place */
      s->deleted++;
      continue;
    }
    if (pr_fault(&s->run, a->path))
      goto done;
    kpack_error_t err = kpack_writer_finish(a->writer);
    a->writer = NULL;
    if (err != KPACK_SUCCESS) {
      pr_output_error(&s->run, a->path, err,
                      err == KPACK_ERROR_IO_ERROR ? errno : 0);
      goto done;
    }
    struct stat st;
    if (stat(a->tmp, &st) == 0)
      s->stored_bytes += (uint64_t)st.st_size;
    s->archives_written++;
    pr_step(&s->run);
  }
  ok = true;
done:
  /* The earlier versions are read: their tables of contents go. */
  for (size_t i = ga; i < gb; i++) {
    kpack_writer_abort(s->archives[i].writer);
    s->archives[i].writer = NULL;
    kpack_close(s->archives[i].old);
    s->archives[i].old = NULL;
  }
  free(dir);
  return ok;
}

bool sp_write_archives(sp_state* s) {
  kpack_writer_pool_t* pool = NULL;
  bool ok = true;
  if (s->wo.threads > 1 && s->wo.scheme != KPACK_COMPRESSION_NOOP) {
    kpack_error_t err = kpack_writer_pool_create(s->wo.threads, &pool);
    if (err != KPACK_SUCCESS) {
      kp_error(&s->run.report, NULL, err, 0, "split: %s (%s)",
               kpack_error_string(err), kpack_error_text(err));
      return false;
    }
  }
  /* The kernels of a group are adjacent in the order, its archives in
   * s->archives. */
  for (size_t g = 0, i = 0, ga = 0; ok && g < s->group_count; g++) {
    size_t end = i, gb = ga;
    while (end < s->kernel_count && s->order[end]->group == g)
      end++;
    while (gb < s->archive_count && s->archives[gb].group == g)
      gb++;
    ok = write_group(s, g, i, end, ga, gb, pool);
    i = end;
    ga = gb;
  }
  kpack_writer_pool_destroy(pool);
  return ok;
}

/* A symbolic link, or a hard link to the file of f->link_of (already in
 * place), made under f's temporary name (f->tmp). */
static bool make_link(sp_state* s, sp_file* f) {
  int fd;
  if (!fr_create_temp(&s->run, f->dst, &f->tmp, &fd))
    return false;
  close(fd);
  unlink(f->tmp);
  if (f->type == SP_HARDLINK) {
    if (link(s->files[f->link_of].dst, f->tmp) != 0) {
      kp_error(&s->run.report, f->dst, KPACK_ERROR_IO_ERROR, errno,
               "%s: cannot link to %s: %s", f->dst, s->files[f->link_of].dst,
               strerror(errno));
      return false;
    }
    return true;
  }
  char target[PATH_MAX];
  ssize_t n = readlink(f->src, target, sizeof(target) - 1);
  if (n < 0) {
    kp_error(&s->run.report, f->src, KPACK_ERROR_IO_ERROR, errno, "%s: %s",
             f->src, strerror(errno));
    return false;
  }
  target[n] = '\0';
  const struct timespec times[2] = {f->st.st_atim, f->st.st_mtim};
  if (symlink(target, f->tmp) != 0 ||
      (geteuid() == 0 && lchown(f->tmp, f->st.st_uid, f->st.st_gid) != 0) ||
      utimensat(AT_FDCWD, f->tmp, times, AT_SYMLINK_NOFOLLOW) != 0) {
    kp_error(&s->run.report, f->dst, KPACK_ERROR_IO_ERROR, errno,
             "%s: cannot make the symbolic link: %s", f->dst, strerror(errno));
    return false;
  }
  return true;
}

/* A copy of the regular file f, under its temporary name (f->tmp). */
static bool make_copy(sp_state* s, sp_file* f) {
  int fd;
  if (!fr_create_temp(&s->run, f->dst, &f->tmp, &fd))
    return false;
  /* fr_finish_temp() closes the file, also on failure. */
  bool ok = fr_copy_into(&s->run, f->src, fd, f->dst);
  if (!ok)
    close(fd);
  return ok && fr_finish_temp(&s->run, fd, f->dst, &f->st, false);
}

/* Puts the temporary file `*tmp` in place of `dst` (NULL: removes dst),
 * keeping what was there until the run commits. */
static bool swap_in(sp_state* s, char** tmp, const char* dst) {
  if (!fr_outputs_swap(&s->run, &s->outputs, *tmp, dst, s->in_place))
    return false;
  free(*tmp);
  *tmp = NULL;
  return true;
}

/* Without --in-place, the tree is made in two passes so that a failure at
 * any point leaves the earlier output as it was: every new file, copy and
 * symbolic link is first made under a temporary name beside its place;
 * then each is renamed into place, the archives first, what it replaces
 * kept aside (fr_outputs_swap()) until the last directory has its mode
 * and times, when the run commits and the kept files go. */
bool sp_install_mirror(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    bool ok = true;
    if (pr_cancelled(&s->run))
      return false;
    if (f->archive_rewritten) {
      /* written anew, its old kernels carried over */
    } else if (f->type == SP_SYMLINK) {
      ok = make_link(s, f) && !pr_fault(&s->run, f->dst);
    } else if (f->type == SP_FILE && f->tmp == NULL) {
      ok = make_copy(s, f) && !pr_fault(&s->run, f->dst);
      s->copied += ok;
    }
    if (!ok || !sp_progress(s, KPACK_SPLIT_WRITING, i + 1, s->file_count))
      return false;
  }
  if (pr_cancelled(&s->run))
    return false;
  for (size_t i = 0; i < s->archive_count; i++) {
    sp_archive* a = &s->archives[i];
    if ((a->tmp != NULL || a->drop) && !swap_in(s, &a->tmp, a->path))
      return false;
  }
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    if (f->archive_rewritten || f->type == SP_DIR)
      continue;
    if (f->type == SP_HARDLINK && !make_link(s, f))
      return false;
    if (f->tmp != NULL && !swap_in(s, &f->tmp, f->dst))
      return false;
    s->links += f->type == SP_HARDLINK;
    s->symlinks += f->type == SP_SYMLINK;
  }
  for (size_t i = s->file_count; i-- > 0;) {
    const sp_file* f = &s->files[i];
    const struct timespec times[2] = {f->st.st_atim, f->st.st_mtim};
    if (f->type != SP_DIR)
      continue;
    if (pr_fault(&s->run, f->dst))
      return false;
    if ((geteuid() == 0 && lchown(f->dst, f->st.st_uid, f->st.st_gid) != 0) ||
        chmod(f->dst, f->st.st_mode & 07777) != 0 ||
        utimensat(AT_FDCWD, f->dst, times, 0) != 0) {
      kp_error(&s->run.report, f->dst, KPACK_ERROR_IO_ERROR, errno, "%s: %s",
               f->dst, strerror(errno));
      return false;
    }
  }
  fr_outputs_commit(&s->run, &s->outputs);
  return true;
}

/* With --in-place, the same two passes over the files the run rewrites:
 * each transformed binary is already written and synced beside its place,
 * the archives too; they are put in place, the archives first (each
 * directory synced, so that no binary reaches the disk before the
 * archives it needs), what they replace kept aside until the run commits.
 * A binary with other hard links is rewritten in its own inode, a copy of
 * its earlier bytes kept instead (fr_outputs_rewrite()). */
bool sp_install_in_place(sp_state* s) {
  for (size_t i = 0; i < s->archive_count; i++) {
    sp_archive* a = &s->archives[i];
    if ((a->tmp != NULL || a->drop) && !swap_in(s, &a->tmp, a->path))
      return false;
  }
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    if (f->tmp == NULL)
      continue;
    if (pr_cancelled(&s->run))
      return false;
    if (f->st.st_nlink == 1) {
      if (!swap_in(s, &f->tmp, f->dst))
        return false;
      continue;
    }
    if (!fr_outputs_rewrite(&s->run, &s->outputs, f->tmp, f->dst))
      return false;
    free(f->tmp);
    f->tmp = NULL;
  }
  fr_outputs_commit(&s->run, &s->outputs);
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
      kp_out_of_memory(&s->run.report);
      ok = false;
      break;
    }
    ok = fr_outputs_note(&s->run, &s->outputs, path);
    if (ok && !fr_mkdirs(path)) {
      kp_error(&s->run.report, path, KPACK_ERROR_IO_ERROR, errno,
               "%s: cannot create: %s", path, strerror(errno));
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
    ok = fr_outputs_note(&s->run, &s->outputs, path);
    if (slash != NULL)
      *slash = '/';
    p = slash != NULL ? slash + 1 : NULL;
  }
  if (path == NULL)
    kp_out_of_memory(&s->run.report);
  free(path);
  return ok;
}

/* Notes `path` and each directory from below `root` down to `dir`, the
 * one holding it (malloc'ed, freed here; NULL: out of memory). */
static bool note_below(sp_state* s, const char* root, char* dir,
                       const char* path) {
  bool ok = dir != NULL &&
            (strcmp(dir, root) == 0 || note_directories(s, root, dir)) &&
            fr_outputs_note(&s->run, &s->outputs, path);
  if (dir == NULL)
    kp_out_of_memory(&s->run.report);
  free(dir);
  return ok;
}

/* Notes each archive and the directories below its group's root that
 * hold it (those that were there get their times back after a failure:
 * an archive written or removed in them changes them). */
static bool note_archives(sp_state* s) {
  for (size_t i = 0; i < s->archive_count; i++) {
    const sp_archive* a = &s->archives[i];
    const sp_group* g = &s->groups[a->group];
    if (!note_below(s, g->out_root, sp_archive_dir_of(s, g, a->arch), a->path))
      return false;
  }
  return true;
}

/* Mirror: notes every path the run may write as it is now, so that a
 * failed run can take back what it made (undo_outputs), then makes the
 * directories. The archives and their directory are noted first, the tree
 * in walk order after: a directory is always noted before what it holds. */
static bool note_outputs(sp_state* s) {
  for (size_t i = 0; i < s->tree_count; i++)
    if (!fr_outputs_note_parents(&s->run, &s->outputs, s->trees[i].out_root))
      return false;
  if (s->per_arch && !make_tree_roots(s))
    return false;
  if (!note_archives(s))
    return false;
  for (size_t i = 0; i < s->file_count; i++)
    if (!fr_outputs_note(&s->run, &s->outputs, s->files[i].dst))
      return false;
  return true;
}

/* --in-place: notes the tree roots, the new archives with the directories
 * that hold them, and each binary to rewrite with its directory, whose
 * times its temporary files change. */
bool sp_note_in_place(sp_state* s) {
  for (size_t i = 0; i < s->tree_count; i++)
    if (!fr_outputs_note(&s->run, &s->outputs, s->trees[i].out_root))
      return false;
  if (!note_archives(s))
    return false;
  for (size_t i = 0; i < s->file_count; i++) {
    const sp_file* f = &s->files[i];
    const char* slash = strrchr(f->dst, '/');
    if (f->type != SP_FILE || f->kind != KPACK_TRANSFORM_FAT || slash == NULL)
      continue; /* (dst is ROOT/REL: it has one) */
    if (!note_below(s, s->trees[f->tree].out_root,
                    strndup(f->dst, (size_t)(slash - f->dst)), f->dst))
      return false;
  }
  return true;
}

/* A directory this run made gets the input's mode (and owner) at once, so
 * that no failure can leave it with another. The owner keeps rwx until
 * install_mirror, to write into it; install_mirror then sets the exact
 * mode and the times. */
static bool set_directory_mode(sp_state* s, const sp_file* f) {
  if ((geteuid() == 0 && lchown(f->dst, f->st.st_uid, f->st.st_gid) != 0) ||
      chmod(f->dst, (f->st.st_mode & 07777) | S_IRWXU) != 0) {
    kp_error(&s->run.report, f->dst, KPACK_ERROR_IO_ERROR, errno, "%s: %s",
             f->dst, strerror(errno));
    return false;
  }
  return true;
}

/* Whether this run made `path`, noted (note_outputs()): its first note
 * says it was not there (the plan may have made it, to lock the archive
 * directory below it). */
static bool made_by_run(const sp_state* s, const char* path) {
  for (size_t i = 0; i < s->outputs.count; i++)
    if (strcmp(s->outputs.items[i].path, path) == 0)
      return !s->outputs.items[i].existed;
  return false;
}

bool sp_make_directories(sp_state* s) {
  bool ok = note_outputs(s);
  bool* made_root = calloc(s->tree_count, sizeof(*made_root));
  if (ok && made_root == NULL) {
    kp_out_of_memory(&s->run.report);
    ok = false;
  }
  for (size_t i = 0; ok && i < s->tree_count; i++) {
    made_root[i] = made_by_run(s, s->trees[i].out_root);
    if (!fr_mkdirs(s->trees[i].out_root)) {
      kp_error(&s->run.report, s->trees[i].out_root, KPACK_ERROR_IO_ERROR,
               errno, "%s: cannot create: %s", s->trees[i].out_root,
               strerror(errno));
      ok = false;
    }
  }
  for (size_t i = 0; ok && i < s->file_count; i++) {
    const sp_file* f = &s->files[i];
    if (f->type != SP_DIR)
      continue;
    bool made = mkdir(f->dst, 0700) == 0;
    if (!made && errno != EEXIST) {
      kp_error(&s->run.report, f->dst, KPACK_ERROR_IO_ERROR, errno,
               "%s: cannot create: %s", f->dst, strerror(errno));
      ok = false;
    } else if (made || (f->rel[0] == '\0' && made_root[f->tree])) {
      ok = set_directory_mode(s, f);
    }
  }
  free(made_root);
  return ok;
}

void sp_undo_outputs(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].tmp != NULL) {
      unlink(s->files[i].tmp);
      free(s->files[i].tmp);
      s->files[i].tmp = NULL;
    }
  for (size_t i = 0; i < s->archive_count; i++)
    if (s->archives[i].tmp != NULL) {
      unlink(s->archives[i].tmp);
      free(s->archives[i].tmp);
      s->archives[i].tmp = NULL;
    }
  fr_outputs_undo(&s->run, &s->outputs,
                  s->outdir != NULL ? s->outdir : s->trees[0].out_root);
}
