/* SPDX-License-Identifier: MIT
 *
 * `kpack split`: turns HIP binaries and whole install trees into kpack-ified
 * binaries plus one archive per GPU architecture, mirroring everything else.
 * The run plans first (walk, classify, list code objects), then writes in an
 * order that a failure or a kill cannot turn into a broken tree: transformed
 * binaries to temporary files, archives, then each file into place.
 * docs/split.md describes the layout and the steps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fatbin_stream.h"
#include "file_replace.h"
#include "host_view.h"

// clang-format off
static const char split_manual[] =
"NAME\n"
"    kpack split - move the device code of HIP binaries into kpack archives\n"
"\n"
"SYNOPSIS\n"
"    kpack split -o OUTDIR [--prefix NAME] [-j N] [--arch ARCH]...\n"
"                [-l LEVEL | --no-compress] [-v | -q] INPUT...\n"
"    kpack split --in-place [--prefix NAME] [-j N] [--arch ARCH]...\n"
"                [-l LEVEL | --no-compress] [-v | -q] TREE...\n"
"\n"
"DESCRIPTION\n"
"    Each INPUT is a directory tree (an install prefix, a wheel's unpacked\n"
"    root) or a single file. Every ELF file whose .hip_fatbin section holds\n"
"    device code (a HIP library or executable) is written kpack-ified: its\n"
"    code objects go into archives, one per GPU architecture, and the\n"
"    binary keeps only small metadata that tells the HIP runtime where\n"
"    they are. Everything else is mirrored as it is.\n"
"\n"
"    Names. The root of each tree is the base of every name: the binary\n"
"    lib/librocrand.so.1.1 of the tree gets the kernel name\n"
"    lib/librocrand.so.1.1, its code object N (the N-th record of its\n"
"    .hipFatBinSegment, the co_index the HIP runtime asks for) is stored\n"
"    under the key lib/librocrand.so.1.1#N, and the binary's search path\n"
"    is the path from its own directory to the archives,\n"
"    ../.kpack/PREFIX_@GFXARCH@.kpack. A single file INPUT is named by its\n"
"    file name, its directory being the root. A binary with hard links in\n"
"    several directories is transformed once, under its first name, and\n"
"    carries a search path from each of those directories.\n"
"\n"
"    Archives. OUTDIR/.kpack/PREFIX_ARCH.kpack for each architecture ARCH\n"
"    present (e.g. rand_gfx90a:xnack-.kpack), with group_name PREFIX and\n"
"    gfx_arches [ARCH]; zstd-per-kernel unless --no-compress. PREFIX is\n"
"    --prefix, else the name of the tree's directory (for a single file,\n"
"    of the directory holding it). When the input already has an archive\n"
"    of that name (a tree split earlier, or an interrupted --in-place\n"
"    run), its kernels that this run does not write again are carried\n"
"    over, frame for frame.\n"
"\n"
"    Mirror. Directories, files without device code, symbolic links (as\n"
"    links, never followed) and hard links between files of the tree (as\n"
"    hard links) are reproduced in OUTDIR, with their modes, times and,\n"
"    when run as root, owners. Files are copied byte for byte.\n"
"\n"
"    Left alone, and reported: a binary already kpack-ified, and a\n"
"    separate debug file whose .hip_fatbin holds no bytes (NOBITS); both\n"
"    are copied unchanged. Running split on its own output therefore\n"
"    changes nothing and writes no archive.\n"
"\n"
"    --in-place rewrites each TREE (or file) itself, archives into\n"
"    TREE/.kpack/. Every transformed binary is first written in full to a\n"
"    temporary file beside it and synced; then the archives are written;\n"
"    then each binary is renamed over the original. A binary with other\n"
"    hard links keeps its inode, so every link sees the new bytes: its new\n"
"    bytes are committed to a redo file beside it (" FR_PREFIX "NAME.redo)\n"
"    before they are copied into it, and a run killed during that copy is\n"
"    finished by the next split of the tree, which first completes every\n"
"    redo file it finds. A failure or a kill therefore leaves each file as\n"
"    it was or transformed, and the archives a transformed binary needs\n"
"    are on disk before it is.\n"
"\n"
"    Device code is streamed: one code object per compression thread is\n"
"    in memory at a time, whatever the size of the binaries. A progress\n"
"    line is shown on standard error when it is a terminal, and a summary\n"
"    on standard output at the end: binaries transformed, skipped and why,\n"
"    files copied, archives written, bytes before and after.\n"
"\n"
"    Refused, with a message naming the file, before anything is written:\n"
"    an OUTDIR inside an input tree (or holding one), two inputs giving the\n"
"    same output path, and a binary the transform cannot rewrite (the\n"
"    message says what and where, e.g. a relocation that still points into\n"
"    .hip_fatbin). The inputs are never modified without --in-place.\n"
"\n"
"    A file that cannot be written stops the run at once, with a message\n"
"    naming it (the archive, binary or copy being written, not an input)\n"
"    and the system's reason, e.g. \"No space left on device\". A failed\n"
"    -o run then removes what it made in OUTDIR (files, archives and\n"
"    directories that were not there before) and says so; what it cannot\n"
"    take back is listed instead: paths it could not remove, and files\n"
"    that were there before and that it had already replaced. Directories\n"
"    get the input's mode as they are made (with the owner's rwx until\n"
"    the end). With --in-place, the temporary files are removed, and\n"
"    archives written before the failure stay in TREE/.kpack.\n"
"\n"
"OPTIONS\n"
"    -o, --output OUTDIR   the directory to mirror the inputs into\n"
"        --in-place        rewrite the inputs themselves (no -o)\n"
"        --prefix NAME     archive name prefix and group_name (default: the\n"
"                          input tree's directory name)\n"
"    -j, --jobs N          compression threads (default 1; 0: one per CPU)\n"
"        --arch ARCH       keep only the code objects for ARCH (repeatable);\n"
"                          the others are dropped and counted in the summary\n"
"    -l, --level LEVEL     zstd level, 1-22 (default 3)\n"
"        --no-compress     store code objects raw (scheme \"none\")\n"
"    -v, --verbose         one line per file on standard error\n"
"    -q, --quiet           no summary\n"
"    -h, --help            print this manual\n"
"\n"
"EXAMPLES\n"
"    kpack split -o out -j8 /opt/rocm-6.4/lib/python3/site-packages/rocrand\n"
"    kpack split -o out --prefix rand_lib usr/lib/x86_64-linux-gnu/librocrand.so.1.1\n"
"    kpack split --in-place --arch gfx942 --arch gfx90a:xnack- install\n"
"    kpack verify --binary out/lib/librocrand.so.1.1\n"
"\n"
"EXIT STATUS\n"
"    0 done (also when nothing needed splitting); 1 an input could not be\n"
"    split or an output not written (the message names the file; with -o,\n"
"    what the run made is removed); 2 bad command line; 130 interrupted\n"
"    (with -o, what the run made is removed too).\n";
// clang-format on

static int split_run(int argc, char** argv);

const cli_command cli_split_command = {
    "split", "move the device code of HIP binaries into per-arch archives",
    split_manual, split_run};

/* ---- the plan -----------------------------------------------------------
 */

/* One INPUT. */
typedef struct sp_tree {
  char* root;     /* the directory names are relative to */
  char* single;   /* a file INPUT: its name in root; NULL for a tree */
  char* out_root; /* OUTDIR, or root with --in-place */
  char* prefix;
} sp_tree;

typedef enum sp_type {
  SP_DIR,
  SP_FILE,
  SP_HARDLINK, /* another name of an earlier SP_FILE (link_of) */
  SP_SYMLINK,
} sp_type;

/* One path of an input, in walk order (each directory before what it
 * holds, names in byte order). */
typedef struct sp_file {
  char* rel; /* below the tree's root ("" for a tree's root itself) */
  char* src;
  char* dst;
  struct stat st;
  size_t tree;
  sp_type type;
  size_t link_of;
  kpack_transform_kind_t kind; /* SP_FILE */
  bool archive_rewritten;      /* an archive this run writes anew */
  char* tmp;                   /* FAT: the transformed file, not yet in place */
  kpack_transform_result_t result;
} sp_file;

/* One code object to pack. */
typedef struct sp_kernel {
  char* key; /* "REL#N" */
  char* arch;
  size_t file, bundle, entry;
  size_t group;
} sp_kernel;

/* The archives of one prefix in one output directory. */
typedef struct sp_group {
  const char* prefix;
  const char* out_root;
} sp_group;

/* An arch dropped by --arch, with how many code objects it had. */
typedef struct sp_dropped {
  char* arch;
  size_t count;
} sp_dropped;

typedef struct sp_state {
  sp_tree* trees;
  size_t tree_count;
  sp_file* files;
  size_t file_count, file_cap;
  sp_kernel* kernels;
  size_t kernel_count, kernel_cap;
  sp_group* groups;
  size_t group_count;
  sp_dropped* dropped;
  size_t dropped_count, dropped_cap;
  const char** only_arches; /* --arch */
  size_t only_count;
  kpack_writer_options_t wo;
  bool in_place, verbose;
  cli_progress progress;
  /* summary */
  size_t transformed, kpackified, debug_only, copied, links, symlinks;
  size_t archives, packed;
  unsigned recovered;
  uint64_t host_before, host_after, code_bytes, stored_bytes;
  fr_outputs outputs; /* -o: what a failed run takes back */
} sp_state;

/* A refusal of the transform, naming the file once. */
static void transform_error(const char* path, kpack_error_t err,
                            const kpack_transform_message_t* msg) {
  size_t n = strlen(path);
  if (msg->text[0] == '\0')
    cli_kerror(path, err);
  else if (strncmp(msg->text, path, n) == 0 && msg->text[n] == ':')
    cli_error("%s (%s)", msg->text, kpack_error_string(err));
  else
    cli_error("%s: %s (%s)", path, msg->text, kpack_error_string(err));
}

/* ---- walking the inputs -------------------------------------------------
 */

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
      cli_grow(s->files, s->file_count, &s->file_cap, sizeof(*files), 64);
  if (files == NULL) {
    cli_error("out of memory");
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
    cli_error("out of memory");
    return false;
  }
  s->file_count++;
  return true;
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
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
    cli_error("out of memory");
    return false;
  }
  if (depth > 256) {
    cli_error("%s: directories nested too deep", dir);
    goto done;
  }
  if (s->in_place && !fr_recover(dir, &s->recovered))
    goto done;
  if ((d = opendir(dir)) == NULL) {
    cli_error("%s: %s", dir, strerror(errno));
    goto done;
  }
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        fr_is_own_name(e->d_name))
      continue;
    char** grown = cli_grow(names, count, &cap, sizeof(*names), 64);
    if (grown != NULL)
      names = grown;
    if (grown == NULL || (names[count] = strdup(e->d_name)) == NULL) {
      cli_error("out of memory");
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
      cli_error("out of memory");
      ok = false;
    } else if (lstat(child, &st) != 0) {
      cli_error("%s: %s", child, strerror(errno));
      ok = false;
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) ||
               S_ISLNK(st.st_mode)) {
      ok = add_file(s, tree, child_rel, child, &st) &&
           (!S_ISDIR(st.st_mode) || walk(s, tree, child_rel, depth + 1));
    } else {
      cli_error(
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

/* ---- deciding what each file is ----------------------------------------
 */

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
    cli_error("out of memory");
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
static bool check_collisions(const sp_state* s) {
  bool ok = true;
  const sp_file** order =
      calloc(s->file_count ? s->file_count : 1, sizeof(*order));
  if (order == NULL) {
    cli_error("out of memory");
    return false;
  }
  for (size_t i = 0; i < s->file_count; i++)
    order[i] = &s->files[i];
  if (s->file_count > 1)
    qsort(order, s->file_count, sizeof(*order), compare_dst);
  for (size_t i = 1; ok && i < s->file_count; i++)
    if (strcmp(order[i]->dst, order[i - 1]->dst) == 0 &&
        (order[i]->type != SP_DIR || order[i - 1]->type != SP_DIR)) {
      cli_error("%s and %s both give %s", order[i - 1]->src, order[i]->src,
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
      cli_grow(s->dropped, s->dropped_count, &s->dropped_cap, sizeof(*p), 4);
  char* copy = strdup(arch);
  if (p != NULL)
    s->dropped = p;
  if (p == NULL || copy == NULL) {
    free(copy);
    cli_error("out of memory");
    return false;
  }
  s->dropped[s->dropped_count++] = (sp_dropped){copy, 1};
  return true;
}

typedef struct sp_listing {
  sp_state* s;
  size_t file, group;
} sp_listing;

static bool add_kernel(const fbs_entry* e, void* user) {
  sp_listing* l = user;
  sp_state* s = l->s;
  if (!cli_arch_listed(s->only_arches, s->only_count, e->arch))
    return note_dropped(s, e->arch);
  sp_kernel* kernels = cli_grow(s->kernels, s->kernel_count, &s->kernel_cap,
                                sizeof(*kernels), 64);
  if (kernels == NULL) {
    cli_error("out of memory");
    return false;
  }
  s->kernels = kernels;
  sp_kernel* k = &s->kernels[s->kernel_count];
  *k = (sp_kernel){.key = strdup(e->binary),
                   .arch = strdup(e->arch),
                   .file = l->file,
                   .bundle = e->bundle,
                   .entry = e->entry,
                   .group = l->group};
  if (k->key == NULL || k->arch == NULL) {
    free(k->key);
    free(k->arch);
    cli_error("out of memory");
    return false;
  }
  s->kernel_count++;
  return true;
}

/* Classifies every file and lists the code objects of the fat ones. */
static bool classify(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    kpack_transform_message_t msg = {{0}};
    if (f->type != SP_FILE)
      continue;
    kpack_error_t err = kpack_transform_classify(f->src, &f->kind, &msg);
    if (err != KPACK_SUCCESS) {
      transform_error(f->src, err, &msg);
      return false;
    }
    if (s->verbose && f->kind != KPACK_TRANSFORM_NOT_ELF)
      fprintf(stderr, "kpack: %s: %s\n", f->src,
              kpack_transform_kind_string(f->kind));
    s->kpackified += f->kind == KPACK_TRANSFORM_KPACKIFIED;
    s->debug_only += f->kind == KPACK_TRANSFORM_DEBUG_ONLY;
    if (f->kind != KPACK_TRANSFORM_FAT)
      continue;
    kpack_fatbin_t* fatbin = NULL;
    err = kpack_fatbin_open(f->src, &fatbin);
    if (err != KPACK_SUCCESS) {
      cli_host_error(f->src, err);
      return false;
    }
    sp_listing l = {s, i, group_of(s, &s->trees[f->tree])};
    bool ok = fbs_list(f->src, fatbin, f->rel, s->verbose, add_kernel, &l);
    kpack_fatbin_close(fatbin);
    if (!ok)
      return false;
    cli_progress_show(&s->progress, false,
                      "kpack: split: reading %zu/%zu files", i + 1,
                      s->file_count);
  }
  return true;
}

/* ---- writing --------------------------------------------------------------
 */

/* "../" per directory of `rel`, then .kpack/PREFIX_@GFXARCH@.kpack. */
static char* search_path(const char* rel, const char* prefix) {
  size_t depth = 0;
  for (const char* p = rel; *p; p++)
    depth += *p == '/';
  size_t len = 3 * depth + strlen(prefix) + 32;
  char* out = malloc(len);
  if (out == NULL)
    return NULL;
  out[0] = '\0';
  for (size_t i = 0; i < depth; i++)
    strcat(out, "../");
  snprintf(out + 3 * depth, len - 3 * depth, ".kpack/%s_@GFXARCH@.kpack",
           prefix);
  return out;
}

/* Writes each fat binary, transformed, to a temporary file beside where it
 * goes, synced: every refusal shows here, before anything is replaced. */
static bool transform_all(sp_state* s) {
  size_t total = 0;
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
      char* p = search_path(name->rel, s->trees[f->tree].prefix);
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
    kpack_transform_options_t o = {.kernel_name = f->rel,
                                   .search_paths = (const char* const*)paths,
                                   .search_path_count = path_count};
    kpack_transform_message_t msg = {{0}};
    int fd = -1;
    ok = ok && fr_create_temp(f->dst, &f->tmp, &fd);
    if (ok) {
      kpack_error_t err =
          kpack_transform_write(f->src, fd, &o, &f->result, &msg);
      if (err == KPACK_ERROR_IO_ERROR && cli_is_write_errno(errno)) {
        cli_output_error(f->dst, err, errno); /* the output, not the input */
        close(fd);
        ok = false;
      } else if (err != KPACK_SUCCESS) {
        transform_error(f->src, err, &msg);
        close(fd);
        ok = false;
      } else {
        ok = fr_finish_temp(fd, f->tmp, &f->st, true);
      }
      if (ok)
        fr_step();
    }
    for (size_t k = 0; k < path_count; k++)
      free(paths[k]);
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

static int compare_kernels(const void* a, const void* b) {
  const sp_kernel* x = a;
  const sp_kernel* y = b;
  if (x->group != y->group)
    return x->group < y->group ? -1 : 1;
  int c = strcmp(x->arch, y->arch);
  return c != 0 ? c : strcmp(x->key, y->key);
}

/* The input path that is the archive `path` of this run (a file, a hard
 * link or a symbolic link): an archive split earlier, whose kernels are
 * carried over, and which is not mirrored over the new one. NULL if
 * none. */
static sp_file* existing_archive(sp_state* s, const char* path) {
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].type != SP_DIR && strcmp(s->files[i].dst, path) == 0)
      return &s->files[i];
  return NULL;
}

/* Writes one archive: kernels [first, end) of s->kernels (one group, one
 * arch, sorted by key) and the kernels of `old` (an earlier archive of the
 * same name) that these do not replace, all in byte order of their keys. */
static bool write_archive(sp_state* s, const char* path, size_t first,
                          size_t end, const sp_file* old, fbs_reader* reader,
                          const char* prefix) {
  kpack_archive_t carried = NULL;
  kpack_writer_t* w = NULL;
  kpack_fatbin_t* fatbin = NULL; /* of fatbin_file */
  const sp_file* fatbin_file = NULL;
  const char* arch = s->kernels[first].arch;
  kpack_writer_options_t wo = s->wo;
  const char* const arches[1] = {arch};
  size_t old_count = 0, o = 0;
  const char** old_keys = NULL;
  bool ok = false;
  kpack_error_t err;
  wo.group_name = prefix;
  wo.gfx_arches = arches;
  wo.gfx_arch_count = 1;
  if (old != NULL) {
    /* Keys of the old archive for this arch, sorted. */
    size_t binaries = 0;
    err = kpack_open(old->src, &carried);
    if (err == KPACK_SUCCESS)
      err = kpack_get_binary_count(carried, &binaries);
    old_keys = calloc(binaries ? binaries : 1, sizeof(*old_keys));
    if (err == KPACK_SUCCESS && old_keys == NULL)
      err = KPACK_ERROR_OUT_OF_MEMORY;
    for (size_t b = 0; err == KPACK_SUCCESS && b < binaries; b++) {
      const char* key;
      kpack_kernel_info_t info;
      err = kpack_get_binary(carried, b, &key);
      if (err == KPACK_SUCCESS &&
          kpack_get_kernel_info(carried, key, arch, &info) == KPACK_SUCCESS)
        old_keys[old_count++] = key;
    }
    if (err != KPACK_SUCCESS) {
      cli_input_error(old->src, err, errno); /* from kpack_open() */
      goto done;
    }
    /* Sorted already: an archive lists its binaries byte-wise (kpack.h). */
  }
  err = kpack_writer_create(path, &wo, &w);
  if (err != KPACK_SUCCESS) {
    cli_output_error(path, err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
    goto done;
  }
  size_t i = first;
  while (i < end || o < old_count) {
    int c = i == end         ? 1
            : o == old_count ? -1
                             : strcmp(s->kernels[i].key, old_keys[o]);
    if (cli_interrupted())
      goto done;
    if (c > 0) { /* only in the old archive: carried over */
      err = kpack_writer_copy_kernel(w, carried, old_keys[o], arch, 0);
      if (err != KPACK_SUCCESS) {
        cli_writer_error(w, err, path, old->src, old_keys[o], arch);
        goto done;
      }
      o++;
      continue;
    }
    if (c == 0)
      o++; /* the fat binary's code object replaces the old one */
    const sp_kernel* k = &s->kernels[i++];
    const sp_file* f = &s->files[k->file];
    const void* data;
    size_t size;
    if (fatbin_file != f) {
      kpack_fatbin_close(fatbin);
      fatbin = NULL;
      fatbin_file = f;
      err = kpack_fatbin_open(f->src, &fatbin);
      if (err != KPACK_SUCCESS) {
        cli_host_error(f->src, err);
        goto done;
      }
    }
    /* An archive takes one code object per bundle, so the bundle is let
     * go at once; a compressed one is decompressed only as far as the
     * entry, through a small window. */
    bool read = fbs_read(reader, f->src, fatbin, k->bundle, k->entry, false,
                         &data, &size);
    if (read) {
      err = kpack_writer_add_kernel(w, k->key, arch, data, size);
      if (err != KPACK_SUCCESS)
        cli_writer_error(w, err, path, NULL, k->key, arch);
    }
    fbs_reader_release(reader);
    if (!read || err != KPACK_SUCCESS)
      goto done;
    s->packed++;
    s->code_bytes += size;
    cli_progress_show(&s->progress, false,
                      "kpack: split: packing %s: %zu/%zu code objects", arch,
                      i - first, end - first);
  }
  err = kpack_writer_finish(w);
  w = NULL;
  if (err != KPACK_SUCCESS) {
    cli_output_error(path, err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
    goto done;
  }
  struct stat st;
  if (stat(path, &st) == 0)
    s->stored_bytes += (uint64_t)st.st_size;
  s->archives++;
  fr_step();
  ok = true;
done:
  kpack_writer_abort(w);
  kpack_fatbin_close(fatbin);
  kpack_close(carried);
  free(old_keys);
  return ok;
}

/* Every archive: per group and arch, OUT_ROOT/.kpack/PREFIX_ARCH.kpack. */
static bool write_archives(sp_state* s) {
  fbs_reader reader = {0};
  bool ok = true;
  if (s->kernel_count > 1)
    qsort(s->kernels, s->kernel_count, sizeof(*s->kernels), compare_kernels);
  for (size_t i = 0; ok && i < s->kernel_count;) {
    size_t end = i + 1;
    const sp_kernel* k = &s->kernels[i];
    const sp_group* g = &s->groups[k->group];
    while (end < s->kernel_count && s->kernels[end].group == k->group &&
           strcmp(s->kernels[end].arch, k->arch) == 0)
      end++;
    char *dir = NULL, *path = NULL;
    if (asprintf(&dir, "%s/.kpack", g->out_root) < 0)
      dir = NULL;
    if (dir != NULL &&
        asprintf(&path, "%s/%s_%s.kpack", dir, g->prefix, k->arch) < 0)
      path = NULL;
    if (path == NULL) {
      cli_error("out of memory");
      ok = false;
    } else if (!cli_mkdirs(dir, 0755)) {
      cli_error("%s: cannot create: %s", dir, strerror(errno));
      ok = false;
    } else {
      sp_file* old = existing_archive(s, path);
      ok = write_archive(s, path, i, end, old, &reader, g->prefix);
      if (ok && old != NULL)
        old->archive_rewritten = true;
    }
    free(dir);
    free(path);
    i = end;
  }
  fbs_reader_free(&reader);
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

/* Mirror: every path into OUTDIR; then the directories get their modes and
 * times, deepest first (writing into a directory changes its mtime). */
static bool install_mirror(sp_state* s) {
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
        ok = ok && fr_finish_temp(fd, tmp, &f->st, false) &&
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

/* In place: each transformed binary over its original; one with other
 * hard links rewritten in its own inode. */
static bool install_in_place(sp_state* s) {
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

/* Mirror: notes every path the run may write as it is now, so that a
 * failed run can take back what it made (undo_outputs), then makes the
 * directories. The archives and their directory are noted first, the tree
 * in walk order after: a directory is always noted before what it holds. */
static bool note_outputs(sp_state* s) {
  const sp_kernel* last = NULL;
  for (size_t i = 0; i < s->tree_count; i++)
    if (!fr_outputs_note_parents(&s->outputs, s->trees[i].out_root))
      return false;
  for (size_t i = 0; i < s->kernel_count; i++) {
    const sp_kernel* k = &s->kernels[i];
    const sp_group* g = &s->groups[k->group];
    char *dir = NULL, *path = NULL;
    if (last != NULL && last->group == k->group &&
        strcmp(last->arch, k->arch) == 0)
      continue; /* the archive just noted */
    last = k;
    if (asprintf(&dir, "%s/.kpack", g->out_root) < 0)
      dir = NULL;
    if (dir != NULL &&
        asprintf(&path, "%s/%s_%s.kpack", dir, g->prefix, k->arch) < 0)
      path = NULL;
    bool ok = path != NULL && fr_outputs_note(&s->outputs, dir) &&
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

static bool make_directories(sp_state* s) {
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

/* After a failed -o run: its temporary files, then whatever it made that
 * was not there before; one line says what is left. */
static void undo_outputs(sp_state* s, const char* outdir) {
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].tmp != NULL) {
      unlink(s->files[i].tmp);
      free(s->files[i].tmp);
      s->files[i].tmp = NULL;
    }
  fr_outputs_undo(&s->outputs, outdir);
}

/* ---- inputs ---------------------------------------------------------------
 */

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

/* a is b or lies below it. */
static bool is_within(const char* a, const char* b) {
  size_t n = strlen(b);
  return strncmp(a, b, n) == 0 &&
         (a[n] == '\0' || a[n] == '/' || strcmp(b, "/") == 0);
}

static bool add_tree(sp_state* s, const char* arg, const char* outdir,
                     const char* prefix) {
  struct stat st;
  sp_tree* t = &s->trees[s->tree_count];
  char* real = NULL;
  bool ok = false;
  if (stat(arg, &st) != 0) {
    cli_error("%s: %s", arg, strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    cli_error("%s: not a directory or a regular file", arg);
    return false;
  }
  if ((real = realpath(arg, NULL)) == NULL) {
    cli_error("%s: %s", arg, strerror(errno));
    return false;
  }
  *t = (sp_tree){0};
  if (S_ISDIR(st.st_mode)) {
    t->root = strdup(arg);
  } else {
    const char* slash = strrchr(arg, '/');
    t->root = slash == NULL  ? strdup(".")
              : slash == arg ? strdup("/")
                             : strndup(arg, (size_t)(slash - arg));
    t->single = strdup(slash != NULL ? slash + 1 : arg);
    char* cut = strrchr(real, '/'); /* the directory holding the file */
    cut[cut == real] = '\0';
  }
  /* The default prefix: the name of the directory that is the root. */
  const char* name = strrchr(real, '/');
  name = name != NULL && name[1] != '\0' ? name + 1 : "root";
  t->prefix = strdup(prefix != NULL ? prefix : name);
  t->out_root = strdup(outdir != NULL ? outdir : t->root);
  s->tree_count++; /* owned by the state from here */
  if (t->root == NULL || t->prefix == NULL || t->out_root == NULL ||
      (S_ISREG(st.st_mode) && t->single == NULL)) {
    cli_error("out of memory");
    goto done;
  }
  if (t->prefix[0] == '\0' || strchr(t->prefix, '/') != NULL) {
    cli_error("%s: the prefix '%s' cannot be part of a file name", arg,
              t->prefix);
    goto done;
  }
  if (outdir != NULL) {
    char* out = resolve_maybe_missing(outdir);
    if (out == NULL) {
      cli_error("%s: %s", outdir, strerror(errno));
      goto done;
    }
    bool inside = S_ISDIR(st.st_mode)
                      ? is_within(out, real) || is_within(real, out)
                      : strcmp(out, real) == 0;
    if (inside && strcmp(out, real) == 0)
      cli_error(
          "%s: the output directory %s is the input%s itself (use "
          "--in-place to rewrite it)",
          arg, outdir, S_ISDIR(st.st_mode) ? "" : "'s directory");
    else if (inside)
      cli_error("%s: the output directory %s %s the input", arg, outdir,
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

static void free_state(sp_state* s) {
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
    free(s->files[i].rel);
    free(s->files[i].src);
    free(s->files[i].dst);
  }
  free(s->files);
  for (size_t i = 0; i < s->kernel_count; i++) {
    free(s->kernels[i].key);
    free(s->kernels[i].arch);
  }
  free(s->kernels);
  free(s->groups);
  for (size_t i = 0; i < s->dropped_count; i++)
    free(s->dropped[i].arch);
  free(s->dropped);
  free(s->only_arches);
  fr_outputs_free(&s->outputs);
}

static void print_summary(const sp_state* s, double seconds) {
  char a[32], b[32], c[32], d[32];
  printf("split: %zu binar%s transformed (%s -> %s)", s->transformed,
         s->transformed == 1 ? "y" : "ies", cli_human_size(a, s->host_before),
         cli_human_size(b, s->host_after));
  if (s->kpackified + s->debug_only > 0)
    printf(", %zu left alone (%zu already kpack-ified, %zu debug only)",
           s->kpackified + s->debug_only, s->kpackified, s->debug_only);
  printf("\n");
  if (!s->in_place)
    printf("split: %zu file%s copied, %zu hard link%s, %zu symbolic link%s\n",
           s->copied, s->copied == 1 ? "" : "s", s->links,
           s->links == 1 ? "" : "s", s->symlinks, s->symlinks == 1 ? "" : "s");
  printf(
      "split: %zu archive%s written: %zu code object%s, %s -> %s in %.2f "
      "s\n",
      s->archives, s->archives == 1 ? "" : "s", s->packed,
      s->packed == 1 ? "" : "s", cli_human_size(c, s->code_bytes),
      cli_human_size(d, s->stored_bytes), seconds);
  for (size_t i = 0; i < s->dropped_count; i++)
    printf("split: dropped by --arch: %s (%zu code object%s)\n",
           s->dropped[i].arch, s->dropped[i].count,
           s->dropped[i].count == 1 ? "" : "s");
  if (s->recovered > 0)
    printf("split: %u rewrite%s of an interrupted run finished\n", s->recovered,
           s->recovered == 1 ? "" : "s");
}

/* Lists each binary left alone, and why. */
static void print_left_alone(const sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    const sp_file* f = &s->files[i];
    if (f->type == SP_FILE && (f->kind == KPACK_TRANSFORM_KPACKIFIED ||
                               f->kind == KPACK_TRANSFORM_DEBUG_ONLY))
      printf("split: %s: %s, left alone\n", f->src,
             kpack_transform_kind_string(f->kind));
  }
}

static int split_run(int argc, char** argv) {
  enum { OPT_IN_PLACE = 256, OPT_PREFIX, OPT_ARCH, OPT_NO_COMPRESS };
  static const struct option options[] = {
      {"output", required_argument, NULL, 'o'},
      {"in-place", no_argument, NULL, OPT_IN_PLACE},
      {"prefix", required_argument, NULL, OPT_PREFIX},
      {"jobs", required_argument, NULL, 'j'},
      {"arch", required_argument, NULL, OPT_ARCH},
      {"level", required_argument, NULL, 'l'},
      {"no-compress", no_argument, NULL, OPT_NO_COMPRESS},
      {"verbose", no_argument, NULL, 'v'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const cli_command* cmd = &cli_split_command;
  sp_state s = {.wo = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL}};
  const char *outdir = NULL, *prefix = NULL;
  bool quiet = false, level_given = false;
  int status = CLI_FAIL, c;
  double start = cli_seconds();

  s.only_arches = calloc((size_t)argc, sizeof(*s.only_arches));
  if (s.only_arches == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  while ((c = getopt_long(argc, argv, "o:j:l:vqh", options, NULL)) != -1) {
    switch (c) {
      case 'o':
        outdir = optarg;
        break;
      case OPT_IN_PLACE:
        s.in_place = true;
        break;
      case OPT_PREFIX:
        prefix = optarg;
        break;
      case 'j':
        if (!cli_parse_threads(cmd, optarg, &s.wo.threads)) {
          status = CLI_USAGE;
          goto done;
        }
        break;
      case OPT_ARCH:
        if (kpack_layout_arch_problem(optarg) != NULL) {
          status = cli_usage_error(
              cmd, "--arch '%s' cannot be part of a file name", optarg);
          goto done;
        }
        s.only_arches[s.only_count++] = optarg;
        break;
      case 'l':
        if (!cli_parse_level(cmd, optarg, &s.wo.zstd_level)) {
          status = CLI_USAGE;
          goto done;
        }
        level_given = true;
        break;
      case OPT_NO_COMPRESS:
        s.wo.scheme = KPACK_COMPRESSION_NOOP;
        break;
      case 'v':
        s.verbose = true;
        break;
      case 'q':
        quiet = true;
        break;
      case 'h':
        status = cli_print_manual(cmd);
        goto done;
      default:
        status = cli_usage_error(cmd, "unknown option");
        goto done;
    }
  }
  if ((outdir == NULL) == !s.in_place) {
    status =
        cli_usage_error(cmd, s.in_place ? "--in-place and -o exclude each other"
                                        : "no output: -o OUTDIR or --in-place");
    goto done;
  }
  if (level_given && s.wo.scheme == KPACK_COMPRESSION_NOOP) {
    status = cli_usage_error(cmd, "-l and --no-compress exclude each other");
    goto done;
  }
  if (optind == argc) {
    status = cli_usage_error(cmd, "no input: give a tree or a file");
    goto done;
  }
  s.trees = calloc((size_t)(argc - optind), sizeof(*s.trees));
  s.groups = calloc((size_t)(argc - optind), sizeof(*s.groups));
  if (s.trees == NULL || s.groups == NULL) {
    cli_error("out of memory");
    goto done;
  }
  s.progress.enabled = !quiet && isatty(STDERR_FILENO);
  cli_catch_signals();
#ifdef __GLIBC__
  /* Code objects and frames (megabytes each) are allocated and freed over
   * and over, by the threads of one archive after another. glibc would
   * raise its mmap threshold after the first free and carve them from the
   * arenas, which fragment: peak memory grew with the number of archives
   * (48 MiB instead of 21 for the bench's seven). A fixed threshold keeps
   * them mapped and unmapped whole. */
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
#endif

  /* Plan: nothing is written until every input has been read. */
  for (int i = optind; i < argc; i++)
    if (!add_tree(&s, argv[i], outdir, prefix))
      goto done;
  for (size_t t = 0; t < s.tree_count; t++) {
    const sp_tree* tree = &s.trees[t];
    struct stat st;
    if (tree->single != NULL) {
      char* src = join(tree->root, tree->single);
      bool ok = src != NULL && stat(src, &st) == 0 &&
                add_file(&s, t, tree->single, src, &st);
      if (src == NULL)
        cli_error("out of memory");
      free(src);
      if (!ok)
        goto done;
    } else if (stat(tree->root, &st) != 0 ||
               (!s.in_place && !add_file(&s, t, "", tree->root, &st)) ||
               !walk(&s, t, "", 0)) {
      goto done;
    }
  }
  if (!find_hard_links(&s) || !check_collisions(&s) || !classify(&s))
    goto done;
  if (cli_interrupted())
    goto interrupted;

  /* Write: transformed binaries (held back), archives, then into place. */
  if (!s.in_place && !make_directories(&s))
    goto done;
  if (!transform_all(&s) || !write_archives(&s) ||
      !(s.in_place ? install_in_place(&s) : install_mirror(&s))) {
    if (cli_interrupted())
      goto interrupted;
    goto done;
  }
  cli_progress_end(&s.progress);
  if (!quiet) {
    print_left_alone(&s);
    print_summary(&s, cli_seconds() - start);
  }
  status = CLI_OK;
  goto done;

interrupted:
  cli_progress_end(&s.progress);
  cli_error("split: interrupted; no file was left half written");
  status = CLI_INTERRUPTED;
done:
  if (status == CLI_FAIL)
    cli_progress_end(&s.progress);
  if (status != CLI_OK && s.outputs.count > 0)
    undo_outputs(&s, outdir);
  free_state(&s);
  return status;
}
