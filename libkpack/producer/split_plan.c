/* SPDX-License-Identifier: MIT
 *
 * Planning a split (split.h): the inputs walked, every file classified
 * and, with per-arch trees, placed; the code objects of the fat binaries
 * listed (entry tables only) and the archives they go to read. Nothing is
 * written here but what an interrupted run left (redo files finished,
 * stale temporary files removed), as docs/split.md says.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "producer/arch_content.h"
#include "producer/split.h"

/* ---- walking the inputs -------------------------------------------------- */

static char* join(const char* a, const char* b) {
  char* out;
  if (asprintf(&out, "%s%s%s", a, *a && *b ? "/" : "", b) < 0)
    return NULL;
  return out;
}

static bool add_file(sp_state* s, size_t tree, const char* rel, const char* src,
                     const struct stat* st) {
  const sp_tree* t = &s->trees[tree];
  sp_file* files =
      kp_grow(s->files, s->file_count, &s->file_cap, sizeof(*files), 64);
  if (files == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  s->files = files;
  sp_file* f = &s->files[s->file_count];
  *f = (sp_file){.rel = strdup(rel),
                 .src = strdup(src),
                 .dst = join(t->out_root, rel),
                 .st = *st,
                 .tree = tree,
                 .type = S_ISDIR(st->st_mode)   ? SP_DIR
                         : S_ISLNK(st->st_mode) ? SP_SYMLINK
                                                : SP_FILE};
  if (f->rel == NULL || f->src == NULL || f->dst == NULL) {
    free(f->rel);
    free(f->src);
    free(f->dst);
    kp_out_of_memory(&s->run.report);
    return false;
  }
  s->file_count++;
  return true;
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

bool sp_is_writer_temp(const char* name, bool* stale) {
  char* end;
  if (strncmp(name, ".kpack-", 7) != 0 || name[7] < '0' || name[7] > '9')
    return false;
  long pid = strtol(name + 7, &end, 10);
  if (*end != '-' || end[1] < '0' || end[1] > '9')
    return false;
  strtoul(end + 1, &end, 10);
  if (strcmp(end, ".tmp") != 0)
    return false;
  *stale = pid != (long)getpid() && pid > 0 && pid <= INT_MAX &&
           kill((pid_t)pid, 0) != 0 && errno == ESRCH;
  return true;
}

/* Adds the directory `rel` of tree `tree`, then what it holds, by name.
 * With --in-place, what an interrupted run left there is finished first. */
static bool walk(sp_state* s, size_t tree, const char* rel, unsigned depth) {
  const sp_tree* t = &s->trees[tree];
  char* dir = join(t->root, rel);
  char** names = NULL;
  size_t count = 0, cap = 0;
  bool ok = false;
  DIR* d = NULL;
  if (dir == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  if (depth > 256) {
    kp_error(&s->run.report, dir, KPACK_ERROR_INVALID_FORMAT, 0,
             "%s: directories nested too deep", dir);
    goto done;
  }
  if (s->in_place && !s->dry_run && !fr_recover(&s->run, dir, &s->recovered))
    goto done;
  if ((d = opendir(dir)) == NULL) {
    kp_error(&s->run.report, dir, KPACK_ERROR_IO_ERROR, errno, "%s: %s", dir,
             strerror(errno));
    goto done;
  }
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    bool stale = false;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        fr_is_own_name(e->d_name))
      continue;
    if (sp_is_writer_temp(e->d_name, &stale)) {
      /* Never mirrored; in place, what a killed run left is removed. */
      if (stale && s->in_place && !s->dry_run)
        unlinkat(dirfd(d), e->d_name, 0);
      continue;
    }
    char** grown = kp_grow(names, count, &cap, sizeof(*names), 64);
    if (grown != NULL)
      names = grown;
    if (grown == NULL || (names[count] = strdup(e->d_name)) == NULL) {
      kp_out_of_memory(&s->run.report);
      goto done;
    }
    count++;
  }
  if (count > 1)
    qsort(names, count, sizeof(*names), compare_names);
  ok = true;
  for (size_t i = 0; ok && i < count; i++) {
    struct stat st;
    char* child_rel = join(rel, names[i]);
    char* child = child_rel != NULL ? join(t->root, child_rel) : NULL;
    if (child == NULL) {
      kp_out_of_memory(&s->run.report);
      ok = false;
    } else if (lstat(child, &st) != 0) {
      kp_error(&s->run.report, child, KPACK_ERROR_IO_ERROR, errno, "%s: %s",
               child, strerror(errno));
      ok = false;
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) ||
               S_ISLNK(st.st_mode)) {
      ok = add_file(s, tree, child_rel, child, &st) &&
           (!S_ISDIR(st.st_mode) || walk(s, tree, child_rel, depth + 1));
    } else {
      kp_error(&s->run.report, child, KPACK_ERROR_INVALID_FORMAT, 0,
               "%s: not a regular file, directory or symbolic link; "
               "not mirrored",
               child);
      ok = false;
    }
    free(child_rel);
    free(child);
  }
done:
  for (size_t i = 0; i < count; i++)
    free(names[i]);
  free(names);
  if (d != NULL)
    closedir(d);
  free(dir);
  return ok;
}

/* ---- deciding what each file is ------------------------------------------ */

typedef struct sp_inode {
  dev_t dev;
  ino_t ino;
  size_t file;
} sp_inode;

static int compare_inodes(const void* a, const void* b) {
  const sp_inode* x = a;
  const sp_inode* y = b;
  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return x->file < y->file ? -1 : x->file > y->file;
}

/* Later names of an inode that an earlier name already brings become hard
 * links to it. */
static bool find_hard_links(sp_state* s) {
  size_t n = 0;
  sp_inode* inodes = calloc(s->file_count ? s->file_count : 1, sizeof(*inodes));
  if (inodes == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].type == SP_FILE && s->files[i].st.st_nlink > 1)
      inodes[n++] = (sp_inode){s->files[i].st.st_dev, s->files[i].st.st_ino, i};
  if (n > 1)
    qsort(inodes, n, sizeof(*inodes), compare_inodes);
  /* Each name after the first of a run (sorted by file index within an
   * inode) is a link to the first. */
  for (size_t i = 1, first = 0; i < n; i++) {
    if (inodes[i].dev != inodes[first].dev ||
        inodes[i].ino != inodes[first].ino) {
      first = i;
      continue;
    }
    sp_file* f = &s->files[inodes[i].file];
    f->type = SP_HARDLINK;
    f->link_of = inodes[first].file;
  }
  free(inodes);
  return true;
}

static int compare_dst(const void* a, const void* b) {
  const sp_file* const* x = a;
  const sp_file* const* y = b;
  return strcmp((*x)->dst, (*y)->dst);
}

/* Two inputs must not give the same output path (directories may meet). */
static bool check_collisions(sp_state* s) {
  bool ok = true;
  const sp_file** order =
      calloc(s->file_count ? s->file_count : 1, sizeof(*order));
  if (order == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  for (size_t i = 0; i < s->file_count; i++)
    order[i] = &s->files[i];
  if (s->file_count > 1)
    qsort(order, s->file_count, sizeof(*order), compare_dst);
  for (size_t i = 1; ok && i < s->file_count; i++)
    if (strcmp(order[i]->dst, order[i - 1]->dst) == 0 &&
        (order[i]->type != SP_DIR || order[i - 1]->type != SP_DIR)) {
      kp_error(&s->run.report, order[i]->dst, KPACK_ERROR_INVALID_FORMAT, 0,
               "%s and %s both give %s", order[i - 1]->src, order[i]->src,
               order[i]->dst);
      ok = false;
    }
  free(order);
  return ok;
}

static size_t group_of(sp_state* s, const sp_tree* t) {
  for (size_t g = 0; g < s->group_count; g++)
    if (strcmp(s->groups[g].prefix, t->prefix) == 0 &&
        strcmp(s->groups[g].out_root, t->out_root) == 0)
      return g;
  s->groups[s->group_count] = (sp_group){t->prefix, t->out_root};
  return s->group_count++;
}

static bool note_dropped(sp_state* s, const char* arch) {
  for (size_t i = 0; i < s->dropped_count; i++)
    if (strcmp(s->dropped[i].arch, arch) == 0) {
      s->dropped[i].count++;
      return true;
    }
  sp_dropped* p =
      kp_grow(s->dropped, s->dropped_count, &s->dropped_cap, sizeof(*p), 4);
  char* copy = strdup(arch);
  if (p != NULL)
    s->dropped = p;
  if (p == NULL || copy == NULL) {
    free(copy);
    kp_out_of_memory(&s->run.report);
    return false;
  }
  s->dropped[s->dropped_count++] = (sp_dropped){copy, 1};
  return true;
}

typedef struct sp_listing {
  sp_state* s;
  size_t file, group;
  size_t kept, dropped; /* code objects of the file */
  char arches[256];     /* the arches of those dropped, for a refusal */
} sp_listing;

/* Appends `arch` to the list `buf` unless it is there (a list that would
 * overflow ends with "..."). */
static void list_arch(char* buf, size_t size, const char* arch) {
  size_t len = strlen(buf), n = strlen(arch);
  for (const char* p = buf; *p;) {
    size_t item = strcspn(p, ",");
    if (item == n && memcmp(p, arch, n) == 0)
      return;
    p += item;
    p += strspn(p, ", ");
  }
  if (len >= 3 && strcmp(buf + len - 3, "...") == 0)
    return;
  if (len + n + 2 + 4 < size)
    snprintf(buf + len, size - len, "%s%s", len ? ", " : "", arch);
  else
    snprintf(buf + len, size - len, "%s...", len ? ", " : "");
}

static bool add_kernel(const kpack_fatbin_code_object_t* e, void* user) {
  sp_listing* l = user;
  sp_state* s = l->s;
  if (!kpack_target_may_serve_any(e->arch, (const char* const*)s->only_arches,
                                  s->only_count, s->only_matched)) {
    l->dropped++;
    list_arch(l->arches, sizeof(l->arches), e->arch);
    return note_dropped(s, e->arch);
  }
  l->kept++;
  sp_kernel* kernels = kp_grow(s->kernels, s->kernel_count, &s->kernel_cap,
                               sizeof(*kernels), 64);
  if (kernels == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  s->kernels = kernels;
  sp_kernel* k = &s->kernels[s->kernel_count];
  *k = (sp_kernel){.key = strdup(e->binary),
                   .arch = strdup(e->arch),
                   .file = l->file,
                   .bundle = e->bundle,
                   .entry = e->entry,
                   .group = l->group,
                   .size = e->size,
                   .compressed = e->compressed};
  if (k->key == NULL || k->arch == NULL) {
    free(k->key);
    free(k->arch);
    kp_out_of_memory(&s->run.report);
    return false;
  }
  s->kernel_count++;
  return true;
}

/* A library's name from its file name: librocrand.so.1.1 -> rocrand. */
static char* library_name(const char* rel) {
  const char* base = strrchr(rel, '/');
  base = base != NULL ? base + 1 : rel;
  if (strncmp(base, "lib", 3) == 0 && base[3] != '\0' && base[3] != '.')
    base += 3;
  return strndup(base, strcspn(base, "."));
}

/* A system prefix split without --prefix takes the name of the one HIP
 * library it holds: its folder's name ("root", "tmp", "usr") would name
 * every package's archives alike. Several libraries: refused (the options
 * are at fault: they need a prefix). */
static bool name_system_prefixes(sp_state* s) {
  for (size_t t = 0; t < s->tree_count; t++) {
    sp_tree* tree = &s->trees[t];
    char* name = NULL;
    char names[256] = "";
    size_t count = 0;
    if (!tree->derive_prefix)
      continue;
    for (size_t i = 0; i < s->file_count; i++) {
      const sp_file* f = &s->files[i];
      if (f->tree != t || f->type != SP_FILE || f->kind != KPACK_TRANSFORM_FAT)
        continue;
      char* lib = library_name(f->rel);
      if (lib == NULL || lib[0] == '\0') {
        free(lib);
        continue;
      }
      list_arch(names, sizeof(names), lib);
      if (name == NULL || strcmp(name, lib) != 0)
        count++;
      if (name == NULL)
        name = lib;
      else
        free(lib);
    }
    if (count > 1) {
      pr_bad_options(&s->run, false, tree->root,
                     "%s is a system prefix holding several HIP libraries "
                     "(%s); name their archives with --prefix NAME",
                     tree->root, names);
      free(name);
      return false;
    }
    if (name != NULL) {
      free(tree->prefix);
      tree->prefix = name;
    }
  }
  return true;
}

void sp_fatbin_message(const kpack_message_t* m, void* user) {
  sp_state* s = user;
  if (m->severity != KPACK_SEVERITY_NOTE || s->verbose)
    kp_say(&s->run.report, m->severity, m->file, m->status, m->sys_errno, "%s",
           m->text);
}

/* Whether the ELF file `path` is relocatable (ET_REL: a .o, or a member
 * of a static archive given on its own). */
static bool is_relocatable(const char* path) {
  unsigned char h[18];
  FILE* in = fopen(path, "rb");
  bool rel = in != NULL && fread(h, 1, sizeof(h), in) == sizeof(h) &&
             memcmp(h, "\177ELF", 4) == 0 &&
             (h[5] == 2 ? h[16] == 0 && h[17] == 1 : h[16] == 1 && h[17] == 0);
  if (in != NULL)
    fclose(in);
  return rel;
}

/* Classifies every file, names the archives of system prefixes, and lists
 * the code objects of the fat binaries. */
static bool classify(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    kpack_transform_message_t msg = {{0}};
    if (f->type != SP_FILE)
      continue;
    kpack_error_t err = kpack_transform_classify(f->src, &f->kind, &msg);
    if (err != KPACK_SUCCESS) {
      pr_transform_error(&s->run, f->src, err, &msg);
      return false;
    }
    if (f->kind == KPACK_TRANSFORM_FAT && is_relocatable(f->src)) {
      /* A -dev package's objects: their device code reaches a program
       * only through the binary linked from them, which is what to
       * split. */
      f->kind = KPACK_TRANSFORM_NO_DEVICE_CODE;
      kp_say(&s->run.report, KPACK_SEVERITY_NOTE, f->src, KPACK_SUCCESS, 0,
             "%s: a relocatable object (.o) with device code: copied as it "
             "is; split the binaries linked from it",
             f->src);
    }
    if (s->verbose && f->kind != KPACK_TRANSFORM_NOT_ELF)
      kp_say(&s->run.report, KPACK_SEVERITY_NOTE, f->src, KPACK_SUCCESS, 0,
             "%s: %s", f->src, kpack_transform_kind_string(f->kind));
    s->kpackified += f->kind == KPACK_TRANSFORM_KPACKIFIED;
    s->debug_only += f->kind == KPACK_TRANSFORM_DEBUG_ONLY;
  }
  if (!name_system_prefixes(s))
    return false;
  size_t reported = 0;
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    if (f->type != SP_FILE || f->kind != KPACK_TRANSFORM_FAT)
      continue;
    kpack_fatbin_t* fatbin = NULL;
    kpack_error_t err = kpack_fatbin_open(f->src, &fatbin);
    if (err != KPACK_SUCCESS) {
      pr_host_error(&s->run, f->src, err);
      return false;
    }
    f->group = group_of(s, &s->trees[f->tree]);
    sp_listing l = {s, i, f->group, 0, 0, ""};
    err = kpack_fatbin_list_code_objects(fatbin, f->src, f->rel, add_kernel, &l,
                                         sp_fatbin_message, s);
    kpack_fatbin_close(fatbin);
    if (err != KPACK_SUCCESS)
      return false;
    if (l.kept == 0 && l.dropped > 0 &&
        (f->all_dropped = strdup(l.arches)) == NULL) {
      kp_out_of_memory(&s->run.report);
      return false;
    }
    if (!sp_progress(s, KPACK_SPLIT_READING, i + 1, s->file_count))
      return false;
    reported = i + 1;
  }
  /* The phase ends at its total, whatever kind of file comes last. */
  return reported == s->file_count ||
         sp_progress(s, KPACK_SPLIT_READING, s->file_count, s->file_count);
}

/* Every --arch must keep a code object of the inputs (one that keeps
 * nothing is a typo or a wrong input), and every fat binary one of its
 * own: found before anything is written. */
static bool check_arches_matched(sp_state* s) {
  /* Without device code (a tree split before) there is nothing to match. */
  for (size_t i = 0;
       s->kernel_count + s->dropped_count > 0 && i < s->only_count; i++) {
    if (s->only_matched[i])
      continue;
    char present[256] = "";
    for (size_t k = 0; k < s->kernel_count; k++)
      list_arch(present, sizeof(present), s->kernels[k].arch);
    for (size_t d = 0; d < s->dropped_count; d++)
      list_arch(present, sizeof(present), s->dropped[d].arch);
    kp_error(&s->run.report, NULL, KPACK_ERROR_INVALID_FORMAT, 0,
             "--arch %s matches no code object of the inputs (they have %s)",
             s->only_arches[i], present);
    return false;
  }
  /* Written, such a binary would hold records no archive answers. */
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].all_dropped != NULL) {
      kp_error(&s->run.report, s->files[i].src, KPACK_ERROR_INVALID_FORMAT, 0,
               "%s: --arch keeps none of its code objects (%s); a binary "
               "without device code is not written",
               s->files[i].src, s->files[i].all_dropped);
      return false;
    }
  return true;
}

/* ---- per-arch trees ------------------------------------------------------ */

/* The processor of a target ID (gfx90a:xnack- -> gfx90a), in a buffer of
 * the caller's. */
static const char* processor_of(const char* arch, char* buf, size_t size) {
  if (strncmp(arch, "amdgcn-amd-amdhsa--", 19) == 0)
    arch += 19;
  snprintf(buf, size, "%.*s", (int)strcspn(arch, ":"), arch);
  return buf;
}

/* The output tree of a processor: its --group's name, else its own. The
 * string lives as long as the state or `processor`. */
static const char* tree_of_processor(const sp_state* s, const char* processor) {
  for (size_t g = 0; g < s->arch_group_count; g++)
    for (size_t i = 0; i < s->arch_groups[g].count; i++)
      if (strcmp(s->arch_groups[g].processors[i], processor) == 0)
        return s->arch_groups[g].name;
  return processor;
}

const char* sp_tree_of_arch(const sp_state* s, const char* arch, char* buf,
                            size_t size) {
  return tree_of_processor(s, processor_of(arch, buf, size));
}

/* Sets f->dest (NULL: generic) and f->why. */
static bool set_dest(sp_state* s, sp_file* f, const char* tree, const char* fmt,
                     ...) __attribute__((format(printf, 4, 5)));
static bool set_dest(sp_state* s, sp_file* f, const char* tree, const char* fmt,
                     ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&f->why, fmt, ap);
  va_end(ap);
  if (n < 0)
    f->why = NULL;
  f->dest = tree != NULL ? strdup(tree) : NULL;
  if (f->why == NULL || (tree != NULL && f->dest == NULL)) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  return true;
}

/* Where an archive of the input goes: ARCHIVE_DIR/PREFIX_ARCH.kpack of
 * its tree is ARCH's. */
static const char* input_archive_arch(const sp_state* s, const sp_file* f) {
  size_t dir_len = strlen(s->archive_dir);
  const char* prefix = s->trees[f->tree].prefix;
  size_t prefix_len = strlen(prefix);
  if (strncmp(f->rel, s->archive_dir, dir_len) != 0 || f->rel[dir_len] != '/')
    return NULL;
  const char* name = f->rel + dir_len + 1;
  size_t len = strlen(name);
  if (strchr(name, '/') != NULL || len <= prefix_len + 7 ||
      strncmp(name, prefix, prefix_len) != 0 || name[prefix_len] != '_' ||
      strcmp(name + len - 6, ".kpack") != 0)
    return NULL;
  return name + prefix_len + 1;
}

/* The first GPU processor the file name of `rel` names ("gfx1030" in
 * "standalone_gfx1030.hsaco"), into `out`. */
static bool named_processor(const char* rel, char* out, size_t size) {
  const char* base = strrchr(rel, '/');
  const char* at;
  size_t len;
  if (!ar_pattern_match("*<arch>*", base != NULL ? base + 1 : rel, &at, &len) ||
      len >= size)
    return false;
  memcpy(out, at, len);
  out[len] = '\0';
  return true;
}

/* Decides the output tree of every non-directory: a fat binary is
 * transformed into generic; a file of device code for one processor goes
 * to that processor's tree by its content; a file a rule names, by the
 * rule; an input archive, by its arch; the rest is generic. A hard link
 * goes where the file it links to goes. */
static bool choose_trees(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    char by_content[64] = "", by_rule[64] = "", archive[64], tree[64];
    const char* what = NULL;
    const ar_rule* rule = NULL;
    bool failed = false, ok;
    if (f->type == SP_DIR)
      continue;
    if (f->type == SP_HARDLINK) {
      const sp_file* first = &s->files[f->link_of];
      ok = set_dest(s, f, first->dest, "hard link to %s", first->rel);
    } else if (f->type == SP_FILE && f->kind == KPACK_TRANSFORM_FAT) {
      ok = set_dest(s, f, NULL, "HIP binary, transformed");
    } else {
      bool own = f->type == SP_FILE &&
                 ac_file_processor(f->src, by_content, sizeof(by_content),
                                   &what, &failed, &s->run.report);
      if (failed)
        return false;
      rule = ar_rules_match(&s->rules, f->rel, by_rule, sizeof(by_rule));
      const char* arch = f->type == SP_FILE ? input_archive_arch(s, f) : NULL;
      if (!own && what != NULL) {
        /* Device code for several processors: every install needs it. */
        ok = set_dest(s, f, NULL, "content: %s", what);
      } else if (own) {
        const char* a = strchr("aeiou", what[0]) != NULL ? "an" : "a";
        if (rule != NULL && (rule->generic || strcmp(by_rule, by_content) != 0))
          kp_say(&s->run.report, KPACK_SEVERITY_WARNING, f->src, KPACK_SUCCESS,
                 0,
                 "%s: %s %s for %s, but the rule at %s says %s; placed by its "
                 "content",
                 f->src, a, what, by_content, rule->where,
                 rule->generic ? "generic" : by_rule);
        else if (rule == NULL &&
                 named_processor(f->rel, by_rule, sizeof(by_rule)) &&
                 strcmp(by_rule, by_content) != 0)
          kp_say(&s->run.report, KPACK_SEVERITY_WARNING, f->src, KPACK_SUCCESS,
                 0,
                 "%s: %s %s for %s, but its name says %s; placed by its "
                 "content",
                 f->src, a, what, by_content, by_rule);
        ok = set_dest(s, f, tree_of_processor(s, by_content),
                      "content: %s for %s", what, by_content);
        s->by_content++;
      } else if (arch != NULL) {
        ok = set_dest(s, f, sp_tree_of_arch(s, arch, tree, sizeof(tree)),
                      "archive for %s",
                      processor_of(arch, archive, sizeof(archive)));
      } else if (rule != NULL && rule->generic) {
        ok = set_dest(s, f, NULL, "rule %s (generic)", rule->where);
      } else if (rule != NULL) {
        ok = set_dest(s, f, tree_of_processor(s, by_rule), "rule %s: %s",
                      rule->where, by_rule);
        s->by_rule++;
      } else {
        ok = set_dest(s, f, NULL, "generic");
      }
    }
    if (!ok)
      return false;
    free(f->dst);
    if (asprintf(&f->dst, "%s/%s%s%s", s->outdir,
                 f->dest != NULL ? f->dest : "generic", f->rel[0] ? "/" : "",
                 f->rel) < 0) {
      f->dst = NULL;
      kp_out_of_memory(&s->run.report);
      return false;
    }
  }
  return true;
}

/* Whether `rel` lies below directory `dir` ("" is the root). */
static bool below(const char* rel, const char* dir) {
  size_t n = strlen(dir);
  return n == 0 || (strncmp(rel, dir, n) == 0 && rel[n] == '/');
}

/* The tree of item i of the files, then the code objects (a file's dest,
 * its archive's tree, its processor written to `buf`); NULL for
 * generic. */
static const char* tree_at(const sp_state* s, size_t i, char* buf,
                           size_t size) {
  return i < s->file_count
             ? s->files[i].dest
             : sp_tree_of_arch(s, s->kernels[i - s->file_count].arch, buf,
                               size);
}

void sp_free_trees(char** trees, size_t count) {
  for (size_t t = 0; t < count; t++)
    free(trees[t]);
  free(trees);
}

bool sp_distinct_trees(sp_state* s, char*** trees, size_t* count) {
  size_t cap = 0;
  *trees = NULL;
  *count = 0;
  for (size_t i = 0; i < s->file_count + s->kernel_count; i++) {
    char buf[64];
    const char* t = tree_at(s, i, buf, sizeof(buf));
    bool seen = t == NULL;
    for (size_t j = 0; !seen && j < *count; j++)
      seen = strcmp((*trees)[j], t) == 0;
    if (seen)
      continue;
    char** grown = kp_grow(*trees, *count, &cap, sizeof(*grown), 8);
    char* copy = strdup(t);
    if (grown != NULL)
      *trees = grown;
    if (grown == NULL || copy == NULL) {
      free(copy);
      sp_free_trees(*trees, *count);
      *trees = NULL;
      *count = 0;
      kp_out_of_memory(&s->run.report);
      return false;
    }
    (*trees)[(*count)++] = copy;
  }
  return true;
}

/* Per-arch trees: every directory goes to generic, and to each other tree
 * that holds something below it (a file, or its archives): appended as
 * one more directory entry per tree, in walk order, so parents come
 * first. */
static bool place_directories(sp_state* s) {
  size_t count = s->file_count;
  char** trees;
  size_t tree_count;
  bool ok = sp_distinct_trees(s, &trees, &tree_count);
  /* Per file its tree's index (tree_count: generic); per tree whether
   * it has archives, and per directory which trees hold something below
   * it. A directory's content follows it in walk order, so each
   * directory looks at its own content only: files times depth. */
  size_t* index = calloc(count ? count : 1, sizeof(*index));
  bool* archives = calloc(tree_count + 1, sizeof(*archives));
  bool* wanted = calloc(tree_count + 1, sizeof(*wanted));
  if (ok && (index == NULL || archives == NULL || wanted == NULL)) {
    kp_out_of_memory(&s->run.report);
    ok = false;
  }
  for (size_t i = 0; ok && i < count + s->kernel_count; i++) {
    char buf[64];
    const char* t = tree_at(s, i, buf, sizeof(buf));
    size_t n = 0;
    while (t != NULL && n < tree_count && strcmp(trees[n], t) != 0)
      n++;
    if (i < count)
      index[i] = t != NULL ? n : tree_count;
    else
      archives[n] = true;
  }
  for (size_t d = 0; ok && d < count; d++) {
    sp_file* dir = &s->files[d];
    if (dir->type != SP_DIR)
      continue;
    char* generic = NULL;
    if (asprintf(&generic, "%s/generic%s%s", s->outdir, dir->rel[0] ? "/" : "",
                 dir->rel) < 0) {
      kp_out_of_memory(&s->run.report);
      ok = false;
      break;
    }
    free(dir->dst);
    dir->dst = generic;
    bool holds_archive_dir = below(s->archive_dir, dir->rel) ||
                             strcmp(s->archive_dir, dir->rel) == 0;
    for (size_t t = 0; t < tree_count; t++)
      wanted[t] = holds_archive_dir && archives[t];
    for (size_t i = d + 1; i < count && s->files[i].tree == dir->tree &&
                           below(s->files[i].rel, dir->rel);
         i++)
      wanted[index[i]] = true;
    for (size_t t = 0; ok && t < tree_count; t++) {
      if (!wanted[t])
        continue;
      sp_file* files =
          kp_grow(s->files, s->file_count, &s->file_cap, sizeof(*files), 64);
      if (files == NULL) {
        kp_out_of_memory(&s->run.report);
        ok = false;
        break;
      }
      s->files = files;
      dir = &s->files[d];
      sp_file* copy = &s->files[s->file_count];
      *copy = *dir;
      copy->rel = strdup(dir->rel);
      copy->src = strdup(dir->src);
      copy->dest = strdup(trees[t]);
      copy->why = NULL;
      copy->dst = NULL;
      if (copy->rel == NULL || copy->src == NULL || copy->dest == NULL ||
          asprintf(&copy->dst, "%s/%s%s%s", s->outdir, trees[t],
                   dir->rel[0] ? "/" : "", dir->rel) < 0) {
        free(copy->rel);
        free(copy->src);
        free(copy->dest);
        kp_out_of_memory(&s->run.report);
        ok = false;
        break;
      }
      s->file_count++;
    }
  }
  free(index);
  free(archives);
  free(wanted);
  sp_free_trees(trees, tree_count);
  return ok;
}

/* ---- inputs -------------------------------------------------------------- */

/* realpath() of a path that may not exist yet: its deepest existing
 * ancestor resolved, the rest appended. */
static char* resolve_maybe_missing(const char* path) {
  char* real = realpath(path, NULL);
  if (real != NULL || errno != ENOENT)
    return real;
  const char* slash = strrchr(path, '/');
  char* parent = slash == NULL   ? strdup(".")
                 : slash == path ? strdup("/")
                                 : strndup(path, (size_t)(slash - path));
  char* base = parent != NULL ? resolve_maybe_missing(parent) : NULL;
  char* out = NULL;
  if (base != NULL && asprintf(&out, "%s/%s", strcmp(base, "/") ? base : "",
                               slash ? slash + 1 : path) < 0)
    out = NULL;
  free(parent);
  free(base);
  return out;
}

static bool ends_with(const char* s, const char* tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Whether the directory `real` (a resolved path) is a system prefix, whose
 * folder name says nothing of what it holds: "/" and a staged root (a
 * dpkg root holding usr/, debian/tmp), which also install at "/", or
 * usr, opt/rocm (opt/rocm-VERSION). */
static bool is_system_prefix(const char* real, bool* root) {
  struct stat st;
  char* usr = NULL;
  *root = strcmp(real, "/") == 0 || ends_with(real, "/debian/tmp");
  if (!*root && asprintf(&usr, "%s/usr", real) >= 0) {
    *root = lstat(usr, &st) == 0 && S_ISDIR(st.st_mode);
    free(usr);
  }
  /* opt/rocm, or a versioned opt/rocm-6.4 */
  const char* name = strrchr(real, '/');
  bool rocm = name != NULL && name - real >= 4 &&
              strncmp(name - 4, "/opt", 4) == 0 &&
              (strcmp(name, "/rocm") == 0 || strncmp(name, "/rocm-", 6) == 0);
  return *root || rocm || ends_with(real, "/usr");
}

/* Whether the directory `real` is a system library or program folder
 * (lib, lib64, bin..., or a multiarch one such as x86_64-linux-gnu):
 * its name says nothing of a file it holds. */
static bool is_system_folder(const char* real) {
  static const char* const names[] = {"lib",    "lib32", "lib64",
                                      "libx32", "bin",   "sbin"};
  const char* name = strrchr(real, '/');
  name = name != NULL ? name + 1 : real;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(name, names[i]) == 0)
      return true;
  return strstr(name, "-linux-") != NULL;
}

/* The --archive-dir to suggest for the staged root `root`: its
 * usr/lib/TRIPLET/kpack when it has one multiarch library folder (where
 * docs/split.md puts them), else usr/lib/kpack; malloc'ed. */
static char* suggested_archive_dir(const char* root) {
  char* usr_lib = NULL;
  char* found = NULL;
  size_t count = 0;
  if (asprintf(&usr_lib, "%s/usr/lib", root) < 0)
    return NULL;
  DIR* d = opendir(usr_lib);
  for (struct dirent* e; d != NULL && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && strstr(e->d_name, "-linux-") != NULL &&
        count++ == 0)
      found = strdup(e->d_name);
  if (d != NULL)
    closedir(d);
  free(usr_lib);
  char* out = NULL;
  if (asprintf(&out, "usr/lib/%s%skpack", count == 1 ? found : "",
               count == 1 ? "/" : "") < 0)
    out = NULL;
  free(found);
  return out;
}

/* a is b or lies below it. */
static bool is_within(const char* a, const char* b) {
  size_t n = strlen(b);
  return strncmp(a, b, n) == 0 &&
         (a[n] == '\0' || a[n] == '/' || strcmp(b, "/") == 0);
}

/* The status of a failed system call on a path. */
static kpack_error_t sys_status(int sys_errno) {
  return sys_errno == ENOENT ? KPACK_ERROR_FILE_NOT_FOUND
                             : KPACK_ERROR_IO_ERROR;
}

static bool add_tree(sp_state* s, const char* arg, const char* outdir,
                     const char* prefix) {
  struct stat st;
  sp_tree* t = &s->trees[s->tree_count];
  char* real = NULL;
  bool ok = false;
  if (stat(arg, &st) != 0) {
    kp_error(&s->run.report, arg, sys_status(errno), errno, "%s: %s", arg,
             strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    kp_error(&s->run.report, arg, KPACK_ERROR_INVALID_FORMAT, 0,
             "%s: not a directory or a regular file", arg);
    return false;
  }
  if ((real = realpath(arg, NULL)) == NULL) {
    kp_error(&s->run.report, arg, sys_status(errno), errno, "%s: %s", arg,
             strerror(errno));
    return false;
  }
  *t = (sp_tree){0};
  if (S_ISDIR(st.st_mode)) {
    t->root = strdup(arg);
  } else {
    /* In place, a symbolic link (libx.so -> libx.so.1 -> libx.so.1.2) is
     * taken for the file it resolves to: that file is rewritten, named
     * from its own directory, and the links stay as they are. */
    struct stat lst;
    const char* file = arg;
    if (s->in_place && lstat(arg, &lst) == 0 && S_ISLNK(lst.st_mode)) {
      file = real;
      if (s->verbose)
        kp_say(&s->run.report, KPACK_SEVERITY_NOTE, arg, KPACK_SUCCESS, 0,
               "%s: a symbolic link; rewriting %s", arg, real);
    }
    const char* slash = strrchr(file, '/');
    t->root = slash == NULL   ? strdup(".")
              : slash == file ? strdup("/")
                              : strndup(file, (size_t)(slash - file));
    t->single = strdup(slash != NULL ? slash + 1 : file);
    char* cut = strrchr(real, '/'); /* the directory holding the file */
    cut[cut == real] = '\0';
  }
  /* The default prefix: the name of the directory that is the root, but
   * for a system prefix the library it holds (name_system_prefixes). */
  const char* name = strrchr(real, '/');
  name = name != NULL && name[1] != '\0' ? name + 1 : "root";
  t->prefix = strdup(prefix != NULL ? prefix : name);
  if (S_ISDIR(st.st_mode) && is_system_prefix(real, &t->system_root))
    t->derive_prefix = prefix == NULL;
  /* A file of /usr/lib/x86_64-linux-gnu is named after its library too. */
  if (S_ISREG(st.st_mode) && is_system_folder(real))
    t->derive_prefix = prefix == NULL;
  t->out_root = strdup(outdir != NULL ? outdir : t->root);
  s->tree_count++; /* owned by the state from here */
  if (t->root == NULL || t->prefix == NULL || t->out_root == NULL ||
      (S_ISREG(st.st_mode) && t->single == NULL)) {
    kp_out_of_memory(&s->run.report);
    goto done;
  }
  if (t->prefix[0] == '\0' || strchr(t->prefix, '/') != NULL) {
    kp_error(&s->run.report, arg, KPACK_ERROR_INVALID_FORMAT, 0,
             "%s: the prefix '%s' cannot be part of a file name", arg,
             t->prefix);
    goto done;
  }
  if (outdir != NULL) {
    char* out = resolve_maybe_missing(outdir);
    if (out == NULL) {
      kp_error(&s->run.report, outdir, sys_status(errno), errno, "%s: %s",
               outdir, strerror(errno));
      goto done;
    }
    bool inside = S_ISDIR(st.st_mode)
                      ? is_within(out, real) || is_within(real, out)
                      : strcmp(out, real) == 0;
    if (inside && strcmp(out, real) == 0)
      kp_error(&s->run.report, arg, KPACK_ERROR_INVALID_FORMAT, 0,
               "%s: the output directory %s is the input%s itself (use "
               "--in-place to rewrite it)",
               arg, outdir, S_ISDIR(st.st_mode) ? "" : "'s directory");
    else if (inside)
      kp_error(&s->run.report, arg, KPACK_ERROR_INVALID_FORMAT, 0,
               "%s: the output directory %s %s the input", arg, outdir,
               is_within(out, real) ? "is inside" : "holds");
    free(out);
    if (inside)
      goto done;
  }
  ok = true;
done:
  free(real);
  return ok;
}

/* ---- the archives -------------------------------------------------------- */

/* Kernels of a group in byte order of their keys (entries of one code
 * object in stored order): each archive then gets its keys in byte order,
 * and each code object of a fat binary is read once, all its arches
 * together. */
static int compare_kernels(const void* a, const void* b) {
  const sp_kernel* x = *(const sp_kernel* const*)a;
  const sp_kernel* y = *(const sp_kernel* const*)b;
  if (x->group != y->group)
    return x->group < y->group ? -1 : 1;
  int c = strcmp(x->key, y->key);
  if (c != 0)
    return c;
  return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* The archive of group archives [first, s->archive_count) for `arch`. */
static sp_archive* archive_for(sp_state* s, size_t first, const char* arch) {
  for (size_t i = first; i < s->archive_count; i++)
    if (strcmp(s->archives[i].arch, arch) == 0)
      return &s->archives[i];
  return NULL;
}

char* sp_archive_dir_of(const sp_state* s, const sp_group* g,
                        const char* arch) {
  char* dir;
  char buf[64];
  int n = s->per_arch ? asprintf(&dir, "%s/%s/%s", g->out_root,
                                 sp_tree_of_arch(s, arch, buf, sizeof(buf)),
                                 s->archive_dir)
                      : asprintf(&dir, "%s/%s", g->out_root, s->archive_dir);
  return n < 0 ? NULL : dir;
}

/* ARCHIVE_DIR/PREFIX_ARCH.kpack of group g, below its output root. */
static char* archive_path(const sp_state* s, const sp_group* g,
                          const char* arch) {
  char* dir = sp_archive_dir_of(s, g, arch);
  char* path;
  if (dir == NULL ||
      asprintf(&path, "%s/%s_%s.kpack", dir, g->prefix, arch) < 0)
    path = NULL;
  free(dir);
  return path;
}

static sp_archive* add_archive(sp_state* s, size_t g, const char* arch) {
  sp_archive* items = kp_grow(s->archives, s->archive_count, &s->archive_cap,
                              sizeof(*items), 8);
  if (items == NULL)
    return NULL;
  s->archives = items;
  sp_archive* a = &s->archives[s->archive_count];
  char buf[64];
  *a = (sp_archive){.group = g, .arch = strdup(arch), .input = SIZE_MAX};
  if (s->per_arch)
    a->tree = strdup(sp_tree_of_arch(s, arch, buf, sizeof(buf)));
  if (a->arch == NULL || (s->per_arch && a->tree == NULL) ||
      (a->path = archive_path(s, &s->groups[g], arch)) == NULL) {
    free(a->arch);
    free(a->tree);
    return NULL;
  }
  s->archive_count++;
  return a;
}

/* Forgets the archive added last (one that is not the group's). */
static void drop_last_archive(sp_state* s) {
  sp_archive* a = &s->archives[--s->archive_count];
  free(a->arch);
  free(a->path);
  free(a->tree);
  free(a->carried);
  free(a->stale);
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

/* An archive of another prefix at `path` that holds keys of a binary this
 * run writes (the output of an earlier run with another --prefix): the
 * loader would find the old code objects beside the new ones, so the run
 * is refused, naming the archive, the binary and the prefix that would
 * keep using it. Archives that do not open, or hold none of those keys,
 * are not the run's business. */
static bool other_prefix_clash(sp_state* s, const sp_group* g, const char* path,
                               const char* const* written, size_t count) {
  kpack_archive_t old = NULL;
  const char* group = NULL;
  size_t binaries = 0;
  bool clash = false;
  if (kpack_open(path, &old) != KPACK_SUCCESS ||
      kpack_get_group_name(old, &group) != KPACK_SUCCESS ||
      strcmp(group, g->prefix) == 0 ||
      kpack_get_binary_count(old, &binaries) != KPACK_SUCCESS)
    binaries = 0;
  for (size_t b = 0; !clash && b < binaries; b++) {
    const char* key;
    if (kpack_get_binary(old, b, &key) != KPACK_SUCCESS ||
        !key_of_written(key, written, count))
      continue;
    clash = true;
    kp_error(&s->run.report, path, KPACK_ERROR_INVALID_FORMAT, 0,
             "%s: an archive of the prefix '%s' holds %s, which this run "
             "writes with the prefix '%s': the loader would find both; "
             "remove the '%s' archives, or split with --prefix %s",
             path, group, key, g->prefix, group, group);
  }
  kpack_close(old);
  return clash;
}

/* Opens the earlier version of `a` at `src` when it is an archive of group
 * `g` for a->arch alone, and sorts its keys into carried and stale. An
 * archive that does not open, or is another group's, is left alone
 * (false, nothing reported), unless `must_read` (an input archive whose
 * kernels the new one carries over). */
static bool read_old_archive(sp_state* s, sp_archive* a, const sp_group* g,
                             const char* src, const char* const* written,
                             size_t written_count, bool must_read,
                             bool* failed) {
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
      pr_input_error(&s->run, src, err, errno); /* from kpack_open() */
      *failed = true;
    }
    kpack_close(old);
    return false;
  }
  a->carried = calloc(binaries ? binaries : 1, sizeof(*a->carried));
  a->stale = calloc(binaries ? binaries : 1, sizeof(*a->stale));
  if (a->carried == NULL || a->stale == NULL) {
    kp_out_of_memory(&s->run.report);
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
    kp_status_error(&s->run.report, src, err);
    kpack_close(old);
    *failed = true;
    return false;
  }
  a->old = old;
  a->old_path = src;
  return true;
}

/* The archives of group `g`, from s->archives[first] on: one per arch of
 * its kernels, and every earlier archive of the group (in the input, or in
 * OUTDIR from an earlier run), with the keys of binaries this run writes
 * (`written`) marked stale. */
static bool plan_group(sp_state* s, size_t g, size_t first,
                       const char* const* written, size_t written_count) {
  const sp_group* group = &s->groups[g];
  for (size_t i = 0; i < s->kernel_count; i++) {
    sp_kernel* k = &s->kernels[i];
    if (k->group != g)
      continue;
    sp_archive* a = archive_for(s, first, k->arch);
    if (a == NULL && (a = add_archive(s, g, k->arch)) == NULL) {
      kp_out_of_memory(&s->run.report);
      return false;
    }
    a->fresh++;
    k->archive = (size_t)(a - s->archives);
  }
  /* Earlier archives: PREFIX_ARCH.kpack among the inputs that go to
   * OUT_ROOT/ARCHIVE_DIR, then those already there (OUTDIR's, or beside a
   * single-file input, which the walk does not see). */
  char* dir = NULL;
  bool ok = true, failed = false;
  if ((dir = sp_archive_dir_of(s, group, "")) == NULL) {
    kp_out_of_memory(&s->run.report);
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
      size_t input = SIZE_MAX;
      if (pass == 0) {
        if (i == s->file_count)
          break;
        input = i++;
        if (s->files[input].type == SP_DIR)
          continue;
        const char* slash = strrchr(s->files[input].dst, '/');
        name = slash != NULL ? slash + 1 : s->files[input].dst;
      } else {
        struct dirent* e = readdir(d);
        bool stale = false;
        if (e == NULL)
          break;
        name = e->d_name;
        if (sp_is_writer_temp(name, &stale) && stale && !s->dry_run)
          unlinkat(dirfd(d), name, 0); /* left by a killed run */
      }
      size_t len = strlen(name);
      if (strchr(name, '/') != NULL || len <= prefix_len + 7 ||
          strncmp(name, group->prefix, prefix_len) != 0 ||
          name[prefix_len] != '_' || strcmp(name + len - 6, ".kpack") != 0) {
        char* other = NULL;
        if (pass >= 1 && len > 6 && strcmp(name + len - 6, ".kpack") == 0 &&
            name[0] != '.') {
          if (asprintf(&other, "%s/%s", found_dir ? found_dir : dir, name) <
              0) {
            kp_out_of_memory(&s->run.report);
            ok = false;
            break;
          }
          bool clash =
              other_prefix_clash(s, group, other, written, written_count);
          free(other);
          if (clash) {
            ok = false;
            break;
          }
        }
        continue;
      }
      char* arch = strndup(name + prefix_len + 1, len - prefix_len - 7);
      if (arch == NULL) {
        kp_out_of_memory(&s->run.report);
        ok = false;
        break;
      }
      sp_archive* a = archive_for(s, first, arch);
      bool added = a == NULL;
      if (added)
        a = add_archive(s, g, arch);
      free(arch);
      if (a == NULL) {
        kp_out_of_memory(&s->run.report);
        ok = false;
        break;
      }
      /* Only the file at the archive's own path is its earlier version. */
      char* path = NULL;
      if (found_dir != NULL && asprintf(&path, "%s/%s", found_dir, name) < 0) {
        kp_out_of_memory(&s->run.report);
        ok = false;
        break;
      }
      bool elsewhere = pass == 0 ? strcmp(s->files[input].dst, a->path) != 0
                                 : path != NULL && strcmp(path, a->path) != 0;
      free(path);
      if (elsewhere) {
        if (added)
          drop_last_archive(s);
        continue;
      }
      if (pass >= 1 && (a->input != SIZE_MAX || a->old != NULL))
        continue; /* the input's archive of that name is mirrored over it */
      if (pass == 0)
        a->input = input;
      if (!read_old_archive(
              s, a, group, pass == 0 ? s->files[input].src : a->path, written,
              written_count, pass == 0 && a->fresh > 0, &failed) &&
          added && !failed) {
        /* Not an archive of this group: not ours to rewrite. */
        drop_last_archive(s);
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

/* The stale keys of `a` that no kernel of order [first, end) (sorted by
 * key) writes again: code objects the new archive no longer has. */
static size_t removed_keys(const sp_state* s, size_t first, size_t end,
                           const sp_archive* a) {
  size_t removed = 0, i = first;
  for (size_t k = 0; k < a->stale_count; k++) {
    int c = 1;
    for (; i < end && c > 0; i++)
      if (strcmp(s->order[i]->arch, a->arch) == 0)
        c = strcmp(a->stale[k], s->order[i]->key);
    if (c != 0)
      removed++;
    if (c < 0)
      i--; /* that kernel is compared again with the next stale key */
  }
  return removed;
}

/* The archives of every group, and the order the code objects are written
 * in. */
/* Whether file f is a fat binary of group g: the run writes it kpack-ified
 * and its code objects into the group's archives. */
static bool writes_fat(const sp_file* f, size_t g) {
  return f->type == SP_FILE && f->kind == KPACK_TRANSFORM_FAT && f->group == g;
}

static bool plan_archives(sp_state* s) {
  const char** written = NULL;
  bool ok = true;
  s->order = calloc(s->kernel_count ? s->kernel_count : 1, sizeof(*s->order));
  written = calloc(s->file_count ? s->file_count : 1, sizeof(*written));
  if (s->order == NULL || written == NULL) {
    kp_out_of_memory(&s->run.report);
    free(written);
    return false;
  }
  for (size_t i = 0; i < s->kernel_count; i++)
    s->order[i] = &s->kernels[i];
  if (s->kernel_count > 1)
    qsort(s->order, s->kernel_count, sizeof(*s->order), compare_kernels);
  for (size_t g = 0, i = 0; ok && g < s->group_count; g++) {
    /* The binaries this run writes: their keys in earlier archives go. */
    size_t written_count = 0, first = s->archive_count, end = i;
    for (size_t f = 0; f < s->file_count; f++)
      if (writes_fat(&s->files[f], g))
        written[written_count++] = s->files[f].rel;
    if (written_count > 1)
      qsort(written, written_count, sizeof(*written), compare_strings);
    ok = plan_group(s, g, first, written, written_count);
    while (end < s->kernel_count && s->order[end]->group == g)
      end++;
    /* Earlier archives the run does not change are left as they are (and
     * mirrored, when they are inputs): out of the plan. They come after
     * those of the code objects, which keep their places. */
    size_t kept = first;
    for (size_t a = first; ok && a < s->archive_count; a++) {
      sp_archive* archive = &s->archives[a];
      if (archive->fresh == 0 && archive->stale_count == 0) {
        kpack_close(archive->old);
        free(archive->carried);
        free(archive->stale);
        free(archive->arch);
        free(archive->path);
        free(archive->tree);
        continue;
      }
      archive->removed = removed_keys(s, i, end, archive);
      /* An input archive that changes is written anew, not mirrored. */
      if (archive->input != SIZE_MAX)
        s->files[archive->input].archive_rewritten = true;
      s->archives[kept++] = *archive;
    }
    if (ok)
      s->archive_count = kept;
    i = end;
  }
  free(written);
  return ok;
}

/* ---- the plan ------------------------------------------------------------ */

bool sp_progress(sp_state* s, kpack_split_phase_t phase, size_t done,
                 size_t total) {
  if (s->progress != NULL && !pr_cancelled(&s->run) &&
      !s->progress(phase, done, total, s->progress_user))
    pr_cancel(&s->run);
  return !pr_cancelled(&s->run);
}

/* Adds the files of tree t: a single file, or the tree's root (unless in
 * place: the root itself is not rewritten) and what it holds. In place,
 * each input is locked first (fr_lock_input()). */
static bool add_input_files(sp_state* s, size_t t) {
  const sp_tree* tree = &s->trees[t];
  struct stat st;
  if (tree->single != NULL) {
    char* src = join(tree->root, tree->single);
    if (src != NULL && s->in_place && !s->dry_run &&
        !fr_lock_input(&s->run, &s->locks, src)) {
      free(src);
      return false;
    }
    bool ok = src != NULL && stat(src, &st) == 0 &&
              add_file(s, t, tree->single, src, &st);
    if (src == NULL)
      kp_out_of_memory(&s->run.report);
    else if (!ok && s->run.report.status == KPACK_SUCCESS)
      kp_error(&s->run.report, src, sys_status(errno), errno, "%s: %s", src,
               strerror(errno));
    free(src);
    return ok;
  }
  if (stat(tree->root, &st) != 0) {
    kp_error(&s->run.report, tree->root, sys_status(errno), errno, "%s: %s",
             tree->root, strerror(errno));
    return false;
  }
  /* In place, before the walk finishes what a killed run left. */
  if (s->in_place && !s->dry_run &&
      !fr_lock_input(&s->run, &s->locks, tree->root))
    return false;
  return (s->in_place || add_file(s, t, "", tree->root, &st)) &&
         walk(s, t, "", 0);
}

/* Whether group g has fat binaries to write, so archives to write. */
static bool group_writes(const sp_state* s, size_t g) {
  for (size_t f = 0; f < s->file_count; f++)
    if (writes_fat(&s->files[f], g))
      return true;
  return false;
}

/* Makes `dir` and what is missing above it, each noted first as an output
 * that a run failing, or freed unexecuted, takes back. */
static bool make_archive_dir(sp_state* s, const char* dir) {
  if (!fr_outputs_note_parents(&s->run, &s->outputs, dir))
    return false;
  s->undo_plan = true;
  if (fr_mkdirs(dir))
    return true;
  kp_error(&s->run.report, dir, KPACK_ERROR_IO_ERROR, errno,
           "%s: cannot create: %s", dir, strerror(errno));
  return false;
}

/* While a run waits for another's archive directory: the caller's
 * progress callback, asked again, may cancel it. */
static bool still_reading(void* user) {
  sp_state* s = user;
  return sp_progress(s, KPACK_SPLIT_READING, s->file_count, s->file_count);
}

/* The archive directories this run reads earlier archives from and
 * writes into, locked until it ends (with --per-arch, whose archives go to
 * a directory per tree, the output root). Two runs that write the same
 * archives (files of one directory split in place with one prefix, runs
 * into one OUTDIR, trees whose --archive-dir leads to one place) then take
 * turns, the second reading what the first wrote, instead of each writing
 * them without the other's kernels. A missing directory that the run will
 * write into is made first, to have something to lock; the directories
 * are locked in the order of their real paths, so that two runs never
 * each wait for the other. */
static bool lock_archive_dirs(sp_state* s) {
  char** dirs = calloc(s->group_count ? s->group_count : 1, sizeof(*dirs));
  size_t n = 0;
  bool ok = dirs != NULL;
  if (!ok)
    kp_out_of_memory(&s->run.report);
  for (size_t g = 0; ok && g < s->group_count; g++) {
    const sp_group* group = &s->groups[g];
    char* dir =
        s->per_arch ? strdup(group->out_root) : sp_archive_dir_of(s, group, "");
    struct stat st;
    if (dir == NULL)
      kp_out_of_memory(&s->run.report);
    ok = dir != NULL && (stat(dir, &st) == 0 || !group_writes(s, g) ||
                         make_archive_dir(s, dir));
    char* real = ok ? realpath(dir, NULL) : NULL;
    if (real != NULL)
      dirs[n++] = real; /* none: nothing to read there, nor to write */
    free(dir);
  }
  if (n > 1)
    qsort(dirs, n, sizeof(*dirs), compare_strings);
  for (size_t i = 0; ok && i < n; i++) {
    if (i > 0 && strcmp(dirs[i], dirs[i - 1]) == 0)
      continue;
    int got = 0;
    while (ok && (got = fr_lock_turn(&s->run, &s->locks, dirs[i], still_reading,
                                     s)) == 0)
      ok = make_archive_dir(s, dirs[i]); /* another run took it back */
    ok = ok && got > 0;
  }
  for (size_t i = 0; i < n; i++)
    free(dirs[i]);
  free(dirs);
  return ok;
}

bool sp_plan(sp_state* s, const char* const* inputs, size_t count,
             const char* prefix, bool archive_dir_given) {
  s->trees = calloc(count, sizeof(*s->trees));
  s->groups = calloc(count, sizeof(*s->groups));
  if (s->trees == NULL || s->groups == NULL) {
    kp_out_of_memory(&s->run.report);
    return false;
  }
  for (size_t i = 0; i < count; i++)
    if (!add_tree(s, inputs[i], s->outdir, prefix))
      return false;
  for (size_t t = 0; t < s->tree_count; t++)
    if (s->trees[t].system_root && !archive_dir_given) {
      char* suggested = suggested_archive_dir(s->trees[t].root);
      pr_bad_options(&s->run, true, inputs[t],
                     "%s installs at '/': its archives would go to /%s; "
                     "choose their folder with --archive-dir (e.g. %s)",
                     inputs[t], s->archive_dir,
                     suggested != NULL ? suggested : "usr/lib/kpack");
      free(suggested);
      return false;
    }
  for (size_t t = 0; t < s->tree_count; t++)
    if (!add_input_files(s, t))
      return false;
  return find_hard_links(s) && check_collisions(s) && classify(s) &&
         check_arches_matched(s) &&
         (!s->per_arch || (choose_trees(s) && place_directories(s))) &&
         (s->dry_run || lock_archive_dirs(s)) && plan_archives(s);
}
