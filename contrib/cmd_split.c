/* SPDX-License-Identifier: MIT
 *
 * `kpack split`: turns HIP binaries and whole install trees into kpack-ified
 * binaries plus one archive per GPU architecture, mirroring everything else.
 * This file makes the plan (walk, classify, list code objects) and runs
 * the command; split_write.c carries the plan out, in an order that a
 * failure or a kill cannot turn into a broken tree: transformed binaries
 * to temporary files, archives, then each file into place. docs/split.md
 * describes the layout and the steps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "arch_content.h"
#include "arch_rules.h"
#include "cli.h"
#include "fatbin_stream.h"
#include "file_replace.h"
#include "host_view.h"
#include "json.h"
#include "split_wheel.h"
#include "split_write.h"

// clang-format off
static const char split_manual[] =
"NAME\n"
"    kpack split - move the device code of HIP binaries into kpack archives\n"
"\n"
"SYNOPSIS\n"
"    kpack split -o OUTDIR [--prefix NAME] [--archive-dir DIR] [-j N]\n"
"                [--arch ARCH]...\n"
"                [-l LEVEL | --no-compress] [-v | -q] INPUT...\n"
"    kpack split --per-arch -o OUTDIR [--group NAME=ARCH,...]...\n"
"                [--rules FILE]... [--dry-run [--json]] [OPTION]... TREE...\n"
"    kpack split --in-place [--prefix NAME] [-j N] [--arch ARCH]...\n"
"                [-l LEVEL | --no-compress] [-v | -q] TREE...\n"
"    kpack split --wheel FAT.whl -o OUTDIR [--per-arch]\n"
"                [--group NAME=ARCH,...]... [--arch ARCH]... [OPTION]...\n"
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
"    of the directory holding it). --archive-dir DIR puts the archives in\n"
"    OUTDIR/DIR instead of OUTDIR/.kpack, and the search paths lead there.\n"
"\n"
"    System prefixes. A tree that is /, a staged root (debian/tmp, or any\n"
"    tree holding usr/), usr or opt/rocm gets, without --prefix, the name\n"
"    of the one HIP library it holds (librocrand.so.1.1: rocrand); one\n"
"    holding several is refused until --prefix names them. A tree that\n"
"    installs at / (a staged root) is refused without --archive-dir:\n"
"    the archives would land in /.kpack.\n"
"\n"
"    Per-arch trees. --per-arch writes OUTDIR/generic, everything that is\n"
"    not for one GPU (HIP binaries kpack-ified), and OUTDIR/PROCESSOR for\n"
"    each GPU processor (gfx90a, gfx1100...): its archives, one per target\n"
"    (gfx90a:xnack- and gfx90a:xnack+ both in gfx90a), where the search\n"
"    paths look, and its kernel-database files at their own paths. --group\n"
"    NAME=ARCH,... puts those processors into OUTDIR/NAME instead. Each\n"
"    input file ends in one tree: generic with any subset of the others is\n"
"    an install for those processors, and all of them together are what a\n"
"    plain -o split writes. A file that is device code on its own (an\n"
"    AMDGPU code object, an offload bundle or CCOB for one processor) goes\n"
"    by its own target whatever its name; a name that says otherwise is\n"
"    reported. Other files go by the first rule that matches their path:\n"
"    those of each --rules FILE, then share/kpack/split-rules.conf shipped\n"
"    with kpack (Tensile libraries, MIOpen databases, aotriton images,\n"
"    composable_kernel archives, hipkernelprovider content; docs/split.md\n"
"    gives the format). The rest is generic. --dry-run prints every file's\n"
"    tree and why (content, which rule, generic) and writes nothing;\n"
"    --json prints it as JSON. A rule file with an error, or a --group\n"
"    naming a processor twice, is a bad command line.\n"
"\n"
"    Splitting again. Two runs end as one run: the archives of the group\n"
"    already there (in the input, or in OUTDIR from an earlier run) lose\n"
"    every key of each binary this run writes (REL#*, whatever the arch),\n"
"    so a binary rebuilt for fewer arches, or split again with an --arch\n"
"    that drops one, leaves no old code object behind; the keys of other\n"
"    binaries (already kpack-ified, or not among the inputs) are carried\n"
"    over, frame for frame. An archive left empty is deleted.\n"
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
"    Wheels. --wheel FAT.whl splits a Python wheel: it is unpacked (every\n"
"    file checked against its RECORD), its files but its .dist-info and\n"
"    .data are split as --per-arch splits a tree, and OUTDIR receives a\n"
"    host wheel and one device wheel per processor or --group. The host\n"
"    wheel has the input's name, version, build tag and tags, its HIP\n"
"    binaries kpack-ified, looking for archives in _kpack/DIST/ below the\n"
"    directory it installs into, and an extra device-TREE per device\n"
"    wheel (and device-all), so that pip install 'DIST[device-gfx90a]'\n"
"    installs the host wheel and the gfx90a one. Each device wheel,\n"
"    DIST_device_TREE-VERSION-TAGS.whl (project DIST-device-TREE), holds\n"
"    that tree's files, its archives in _kpack/DIST/, and installs where\n"
"    the host wheel does (same tags, same Root-Is-Purelib). The zips are\n"
"    deterministic: entries in byte-wise order, RECORD last, dated\n"
"    1980-01-01; archives stored, other files deflated (level 1). The\n"
"    wheels are written in a temporary directory in OUTDIR and moved into\n"
"    OUTDIR once all are complete. .data files are carried into the host\n"
"    wheel as they are. --prefix, --archive-dir, --in-place and --dry-run\n"
"    do not go with --wheel; --json prints {host, devices: [{tree, extra,\n"
"    wheel}], seconds}.\n"
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
"    are on disk before it is. A symbolic link given as a file INPUT\n"
"    (lib/libx.so -> libx.so.1 -> libx.so.1.2) stands for the file it\n"
"    resolves to: that file is rewritten, named from its own directory\n"
"    (kernel name libx.so.1.2, archives beside it in .kpack/), and the\n"
"    links stay as they are. Links inside a TREE stay links.\n"
"\n"
"    Device code is streamed in one pass: each fat binary is read once,\n"
"    its code objects handed to the archives of their arches, which share\n"
"    the -j compression threads; a few code objects per thread are in\n"
"    memory at a time, whatever the size of the binaries. A progress\n"
"    line is shown on standard error when it is a terminal, and a summary\n"
"    on standard output at the end: binaries transformed, skipped and why,\n"
"    files copied, archives written, bytes before and after.\n"
"\n"
"    Refused, with a message naming the file, before anything is written:\n"
"    an OUTDIR inside an input tree (or holding one), two inputs giving the\n"
"    same output path, an --arch that keeps no code object of the inputs,\n"
"    a binary --arch would leave without one, and a binary the transform\n"
"    cannot rewrite (the message says what and where, e.g. a relocation\n"
"    that still points into .hip_fatbin). The inputs are never modified\n"
"    without --in-place.\n"
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
"                          input tree's directory name; see System prefixes)\n"
"        --archive-dir DIR where the archives go below each output root,\n"
"                          relative (default .kpack), e.g.\n"
"                          usr/lib/x86_64-linux-gnu/kpack\n"
"    -j, --jobs N          compression threads (default and 0: one per\n"
"                          CPU; 1: none besides the main one)\n"
"        --arch ARCH       keep only the code objects an ARCH agent could be\n"
"                          served, by the loader's rule (repeatable): a\n"
"                          feature ARCH leaves out may be set either way, so\n"
"                          gfx90a keeps gfx90a, gfx90a:xnack- and\n"
"                          gfx90a:xnack+, gfx90a:xnack- all but the last;\n"
"                          gfx906 keeps gfx9-generic too (LLVM's generic\n"
"                          targets serve their family); a full target such as\n"
"                          amdgcn-amd-amdhsa--gfx90a:xnack- is taken too. The\n"
"                          others are dropped and counted in the summary. An\n"
"                          ARCH that keeps nothing, or a binary that would\n"
"                          keep nothing, is an error before anything is\n"
"                          written\n"
"        --wheel FAT.whl   split a wheel into a host wheel and device\n"
"                          wheels written to OUTDIR (see Wheels)\n"
"        --per-arch        write OUTDIR/generic and a tree per processor\n"
"        --group NAME=ARCH,...\n"
"                          with --per-arch, one tree NAME for these\n"
"                          processors (repeatable; e.g.\n"
"                          gfx90X-dcgpu=gfx906,gfx908,gfx90a)\n"
"        --rules FILE      with --per-arch, rules read before the shipped\n"
"                          ones (repeatable)\n"
"        --dry-run         with --per-arch, print where each file goes\n"
"    -l, --level LEVEL     zstd level, 1-22 (default 3)\n"
"        --no-compress     store code objects raw (scheme \"none\")\n"
"    -v, --verbose         one line per file on standard error\n"
"    -q, --quiet           no summary\n"
"        --json            the summary as one JSON object on standard\n"
"                          output: {transformed, host_before, host_after,\n"
"                          kpackified, debug_only, copied, hard_links,\n"
"                          symbolic_links, archives, code_objects,\n"
"                          code_bytes, stored_bytes, removed, deleted,\n"
"                          recovered, dropped: {ARCH: count}, threads,\n"
"                          seconds}; sizes in bytes. With --dry-run, the\n"
"                          plan as a JSON array\n"
"    -h, --help            print this manual\n"
"\n"
"EXAMPLES\n"
"    kpack split -o out -j8 /opt/rocm-6.4/lib/python3/site-packages/rocrand\n"
"    kpack split -o out --prefix rand_lib usr/lib/x86_64-linux-gnu/librocrand.so.1.1\n"
"    kpack split --in-place --arch gfx942 --arch gfx90a:xnack- install\n"
"    kpack split --per-arch --archive-dir usr/lib/x86_64-linux-gnu/kpack \\\n"
"                -o split debian/tmp\n"
"    kpack split --wheel dist/rocrand-1.0-cp311-cp311-linux_x86_64.whl -o wheels\n"
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

void sp_transform_error(const char* path, kpack_error_t err,
                        const kpack_transform_message_t* msg) {
  size_t n = strlen(path);
  if (msg->text[0] == '\0')
    cli_kerror(path, err);
  else if (strncmp(msg->text, path, n) == 0 && msg->text[n] == ':')
    cli_error("%s (%s)", msg->text, kpack_error_string(err));
  else
    cli_error("%s: %s (%s)", path, msg->text, kpack_error_string(err));
}

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
    bool stale = false;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        fr_is_own_name(e->d_name))
      continue;
    if (sp_is_writer_temp(e->d_name, &stale)) {
      /* Never mirrored; in place, what a killed run left is removed. */
      if (stale && s->in_place)
        unlinkat(dirfd(d), e->d_name, 0);
      continue;
    }
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

static bool add_kernel(const fbs_entry* e, void* user) {
  sp_listing* l = user;
  sp_state* s = l->s;
  if (!cli_arch_listed(s->only_arches, s->only_count, e->arch,
                       s->only_matched)) {
    l->dropped++;
    list_arch(l->arches, sizeof(l->arches), e->arch);
    return note_dropped(s, e->arch);
  }
  l->kept++;
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
                   .group = l->group,
                   .compressed = e->compressed};
  if (k->key == NULL || k->arch == NULL) {
    free(k->key);
    free(k->arch);
    cli_error("out of memory");
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
 * every package's archives alike. Several libraries: refused (exit 2). */
static int name_system_prefixes(sp_state* s) {
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
      cli_error(
          "%s is a system prefix holding several HIP libraries (%s); name "
          "their archives with --prefix NAME",
          tree->root, names);
      free(name);
      return CLI_USAGE;
    }
    if (name != NULL) {
      free(tree->prefix);
      tree->prefix = name;
    }
  }
  return CLI_OK;
}

/* Classifies every file, names the archives of system prefixes, and lists
 * the code objects of the fat binaries. CLI_USAGE when a prefix cannot be
 * named. */
static int classify(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    kpack_transform_message_t msg = {{0}};
    if (f->type != SP_FILE)
      continue;
    kpack_error_t err = kpack_transform_classify(f->src, &f->kind, &msg);
    if (err != KPACK_SUCCESS) {
      sp_transform_error(f->src, err, &msg);
      return CLI_FAIL;
    }
    if (s->verbose && f->kind != KPACK_TRANSFORM_NOT_ELF)
      fprintf(stderr, "kpack: %s: %s\n", f->src,
              kpack_transform_kind_string(f->kind));
    s->kpackified += f->kind == KPACK_TRANSFORM_KPACKIFIED;
    s->debug_only += f->kind == KPACK_TRANSFORM_DEBUG_ONLY;
  }
  int status = name_system_prefixes(s);
  if (status != CLI_OK)
    return status;
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    if (f->type != SP_FILE || f->kind != KPACK_TRANSFORM_FAT)
      continue;
    kpack_fatbin_t* fatbin = NULL;
    kpack_error_t err = kpack_fatbin_open(f->src, &fatbin);
    if (err != KPACK_SUCCESS) {
      cli_host_error(f->src, err);
      return CLI_FAIL;
    }
    f->group = group_of(s, &s->trees[f->tree]);
    sp_listing l = {s, i, f->group, 0, 0, ""};
    bool ok = fbs_list(f->src, fatbin, f->rel, s->verbose, add_kernel, &l);
    kpack_fatbin_close(fatbin);
    if (!ok)
      return CLI_FAIL;
    if (l.kept == 0 && l.dropped > 0 &&
        (f->all_dropped = strdup(l.arches)) == NULL) {
      cli_error("out of memory");
      return CLI_FAIL;
    }
    cli_progress_show(&s->progress, false,
                      "kpack: split: reading %zu/%zu files", i + 1,
                      s->file_count);
  }
  return CLI_OK;
}

/* Every --arch must keep a code object of the inputs (one that keeps
 * nothing is a typo or a wrong input), and every fat binary one of its
 * own: found before anything is written. */
static bool check_arches_matched(const sp_state* s) {
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
    cli_error("--arch %s matches no code object of the inputs (they have %s)",
              s->only_arches[i], present);
    return false;
  }
  /* Written, such a binary would hold records no archive answers. */
  for (size_t i = 0; i < s->file_count; i++)
    if (s->files[i].all_dropped != NULL) {
      cli_error(
          "%s: --arch keeps none of its code objects (%s); a binary without "
          "device code is not written",
          s->files[i].src, s->files[i].all_dropped);
      return false;
    }
  return true;
}

/* ---- per-arch trees ------------------------------------------------------ */

/* The processor of a target ID (gfx90a:xnack- -> gfx90a), in a static
 * buffer of the caller's. */
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

const char* sp_tree_of_arch(const sp_state* s, const char* arch) {
  static char processor[64];
  processor_of(arch, processor, sizeof(processor));
  return tree_of_processor(s, processor);
}

/* Sets f->dest (NULL: generic) and f->why. */
static bool set_dest(sp_file* f, const char* tree, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool set_dest(sp_file* f, const char* tree, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&f->why, fmt, ap);
  va_end(ap);
  if (n < 0)
    f->why = NULL;
  f->dest = tree != NULL ? strdup(tree) : NULL;
  if (f->why == NULL || (tree != NULL && f->dest == NULL)) {
    cli_error("out of memory");
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

/* Decides the output tree of every non-directory: a fat binary is
 * transformed into generic; a file of device code for one processor goes
 * to that processor's tree by its content; a file a rule names, by the
 * rule; an input archive, by its arch; the rest is generic. A hard link
 * goes where the file it links to goes. */
static bool choose_trees(sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    sp_file* f = &s->files[i];
    char by_content[64] = "", by_rule[64] = "", archive[64];
    const char* what = NULL;
    const ar_rule* rule = NULL;
    bool failed = false, ok;
    if (f->type == SP_DIR)
      continue;
    if (f->type == SP_HARDLINK) {
      const sp_file* first = &s->files[f->link_of];
      ok = set_dest(f, first->dest, "hard link to %s", first->rel);
    } else if (f->type == SP_FILE && f->kind == KPACK_TRANSFORM_FAT) {
      ok = set_dest(f, NULL, "HIP binary, transformed");
    } else {
      if (f->type == SP_FILE &&
          !ac_file_processor(f->src, by_content, sizeof(by_content), &what,
                             &failed) &&
          failed)
        return false;
      rule = ar_rules_match(&s->rules, f->rel, by_rule, sizeof(by_rule));
      const char* arch = f->type == SP_FILE ? input_archive_arch(s, f) : NULL;
      if (by_content[0] != '\0') {
        if (rule != NULL && (rule->generic || strcmp(by_rule, by_content) != 0))
          fprintf(stderr,
                  "kpack: warning: %s: a %s for %s, but the rule at %s "
                  "says %s; placed by its content\n",
                  f->src, what, by_content, rule->where,
                  rule->generic ? "generic" : by_rule);
        ok = set_dest(f, tree_of_processor(s, by_content), "content: %s for %s",
                      what, by_content);
        s->by_content++;
      } else if (arch != NULL) {
        ok = set_dest(f, sp_tree_of_arch(s, arch), "archive for %s",
                      processor_of(arch, archive, sizeof(archive)));
      } else if (rule != NULL && rule->generic) {
        ok = set_dest(f, NULL, "rule %s (generic)", rule->where);
      } else if (rule != NULL) {
        ok = set_dest(f, tree_of_processor(s, by_rule), "rule %s: %s",
                      rule->where, by_rule);
        s->by_rule++;
      } else {
        ok = set_dest(f, NULL, "generic");
      }
    }
    if (!ok)
      return false;
    free(f->dst);
    if (asprintf(&f->dst, "%s/%s%s%s", s->outdir,
                 f->dest != NULL ? f->dest : "generic", f->rel[0] ? "/" : "",
                 f->rel) < 0) {
      f->dst = NULL;
      cli_error("out of memory");
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
 * its archive's tree); NULL for generic. */
static const char* tree_at(const sp_state* s, size_t i) {
  return i < s->file_count
             ? s->files[i].dest
             : sp_tree_of_arch(s, s->kernels[i - s->file_count].arch);
}

void sp_free_trees(char** trees, size_t count) {
  for (size_t t = 0; t < count; t++)
    free(trees[t]);
  free(trees);
}

bool sp_distinct_trees(const sp_state* s, char*** trees, size_t* count) {
  size_t cap = 0;
  *trees = NULL;
  *count = 0;
  for (size_t i = 0; i < s->file_count + s->kernel_count; i++) {
    const char* t = tree_at(s, i);
    bool seen = t == NULL;
    for (size_t j = 0; !seen && j < *count; j++)
      seen = strcmp((*trees)[j], t) == 0;
    if (seen)
      continue;
    char** grown = cli_grow(*trees, *count, &cap, sizeof(*grown), 8);
    char* copy = strdup(t);
    if (grown != NULL)
      *trees = grown;
    if (grown == NULL || copy == NULL) {
      free(copy);
      sp_free_trees(*trees, *count);
      *trees = NULL;
      *count = 0;
      cli_error("out of memory");
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
    cli_error("out of memory");
    ok = false;
  }
  for (size_t i = 0; ok && i < count + s->kernel_count; i++) {
    const char* t = tree_at(s, i);
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
      cli_error("out of memory");
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
          cli_grow(s->files, s->file_count, &s->file_cap, sizeof(*files), 64);
      if (files == NULL) {
        cli_error("out of memory");
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
        cli_error("out of memory");
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
    /* In place, a symbolic link (libx.so -> libx.so.1 -> libx.so.1.2) is
     * taken for the file it resolves to: that file is rewritten, named
     * from its own directory, and the links stay as they are. */
    struct stat lst;
    const char* file = arg;
    if (s->in_place && lstat(arg, &lst) == 0 && S_ISLNK(lst.st_mode)) {
      file = real;
      if (s->verbose)
        fprintf(stderr, "kpack: %s: a symbolic link; rewriting %s\n", arg,
                real);
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
  free(s->groups);
  for (size_t i = 0; i < s->dropped_count; i++)
    free(s->dropped[i].arch);
  free(s->dropped);
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
  if (s->removed > 0 || s->deleted > 0)
    printf(
        "split: %zu code object%s of earlier builds removed, %zu archive%s "
        "left empty deleted\n",
        s->removed, s->removed == 1 ? "" : "s", s->deleted,
        s->deleted == 1 ? "" : "s");
  for (size_t i = 0; i < s->dropped_count; i++)
    printf("split: dropped by --arch: %s (%zu code object%s)\n",
           s->dropped[i].arch, s->dropped[i].count,
           s->dropped[i].count == 1 ? "" : "s");
  if (s->per_arch)
    printf(
        "split: per-arch trees: %zu file%s placed by their content, %zu by "
        "rules\n",
        s->by_content, s->by_content == 1 ? "" : "s", s->by_rule);
  if (s->recovered > 0)
    printf("split: %u rewrite%s of an interrupted run finished\n", s->recovered,
           s->recovered == 1 ? "" : "s");
}

/* Lists each binary left alone, and why. */
/* print_summary() for scripts (--json); sizes in bytes. */
static void print_summary_json(const sp_state* s, double seconds) {
  cli_json w;
  char text[32];
  cli_json_init(&w, stdout);
  cli_json_object(&w, 2, true);
  cli_json_key_uint(&w, "transformed", s->transformed);
  cli_json_key_uint(&w, "host_before", s->host_before);
  cli_json_key_uint(&w, "host_after", s->host_after);
  cli_json_key_uint(&w, "kpackified", s->kpackified);
  cli_json_key_uint(&w, "debug_only", s->debug_only);
  cli_json_key_uint(&w, "copied", s->copied);
  cli_json_key_uint(&w, "hard_links", s->links);
  cli_json_key_uint(&w, "symbolic_links", s->symlinks);
  cli_json_key_uint(&w, "archives", s->archives);
  cli_json_key_uint(&w, "code_objects", s->packed);
  cli_json_key_uint(&w, "code_bytes", s->code_bytes);
  cli_json_key_uint(&w, "stored_bytes", s->stored_bytes);
  cli_json_key_uint(&w, "removed", s->removed);
  cli_json_key_uint(&w, "deleted", s->deleted);
  cli_json_key_uint(&w, "recovered", s->recovered);
  cli_json_key(&w, "dropped");
  cli_json_object(&w, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < s->dropped_count; i++)
    cli_json_key_uint(&w, s->dropped[i].arch, s->dropped[i].count);
  cli_json_end(&w);
  cli_json_key_uint(&w, "threads", s->wo.threads);
  snprintf(text, sizeof(text), "%.2f", seconds);
  cli_json_key(&w, "seconds");
  cli_json_raw(&w, text);
  cli_json_finish(&w);
}

static void print_left_alone(const sp_state* s) {
  for (size_t i = 0; i < s->file_count; i++) {
    const sp_file* f = &s->files[i];
    if (f->type == SP_FILE && (f->kind == KPACK_TRANSFORM_KPACKIFIED ||
                               f->kind == KPACK_TRANSFORM_DEBUG_ONLY))
      printf("split: %s: %s, left alone\n", f->src,
             kpack_transform_kind_string(f->kind));
  }
}

/* --group NAME=ARCH,...: CLI_USAGE after a message naming the argument
 * when NAME cannot be a folder, an ARCH is no GPU processor, or an ARCH is
 * in a group already. */
static int add_arch_group(sp_state* s, const cli_command* cmd,
                          const char* arg) {
  const char* eq = strchr(arg, '=');
  if (eq == NULL || eq == arg || eq[1] == '\0')
    return cli_usage_error(cmd, "--group '%s': give NAME=ARCH,ARCH...", arg);
  size_t name_len = (size_t)(eq - arg);
  if (memchr(arg, '/', name_len) != NULL ||
      (name_len == 7 && memcmp(arg, "generic", 7) == 0) ||
      (name_len <= 2 && arg[0] == '.' && arg[name_len - 1] == '.'))
    return cli_usage_error(cmd, "--group '%s': '%.*s' cannot name a tree", arg,
                           (int)name_len, arg);
  sp_arch_group* groups = realloc(
      s->arch_groups, (s->arch_group_count + 1) * sizeof(*s->arch_groups));
  if (groups == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  s->arch_groups = groups;
  sp_arch_group* g = &groups[s->arch_group_count++];
  *g = (sp_arch_group){strndup(arg, name_len), NULL, 0};
  g->processors = calloc(strlen(eq) + 1, sizeof(*g->processors));
  if (g->name == NULL || g->processors == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  for (const char* p = eq + 1; *p;) {
    size_t n = strcspn(p, ",");
    char* proc = strndup(p, n);
    if (proc == NULL) {
      cli_error("out of memory");
      return CLI_FAIL;
    }
    g->processors[g->count++] = proc;
    if (!kpack_processor_is_known(proc, n))
      return cli_usage_error(
          cmd, "--group '%s': '%s' is not a GPU processor (such as gfx90a)",
          arg, proc);
    for (size_t o = 0; o < s->arch_group_count; o++)
      for (size_t i = 0; i < groups[o].count; i++)
        if ((o != s->arch_group_count - 1 || i != g->count - 1) &&
            strcmp(groups[o].processors[i], proc) == 0)
          return cli_usage_error(cmd, "--group '%s': %s is named twice", arg,
                                 proc);
    p += n;
    p += *p == ',';
  }
  return CLI_OK;
}

/* The rules shipped with kpack: share/kpack/split-rules.conf beside the
 * bin/ folder of the program (installed, and in the build tree). */
static char* shipped_rules(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  char* path = NULL;
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  char* slash = strrchr(exe, '/');
  if (slash != NULL)
    *slash = '\0';
  slash = strrchr(exe, '/'); /* bin/ */
  if (slash != NULL)
    *slash = '\0';
  if (asprintf(&path, "%s/share/kpack/split-rules.conf", exe) < 0)
    return NULL;
  return path;
}

/* --dry-run: every path and each archive, its tree and why. */
static void print_plan(const sp_state* s, bool json) {
  cli_json w;
  if (json) {
    cli_json_init(&w, stdout);
    cli_json_array(&w, 2, false);
  } else {
    printf("%-16s %-10s %-40s %s\n", "TREE", "KIND", "PATH", "WHY");
  }
  for (size_t i = 0; i <= s->file_count + s->kernel_count; i++) {
    const char *tree, *kind, *rel, *why;
    char* archive = NULL;
    char reason[96];
    if (i < s->file_count) {
      const sp_file* f = &s->files[i];
      if (f->type == SP_DIR)
        continue;
      tree = f->dest != NULL ? f->dest : "generic";
      kind = f->type == SP_SYMLINK    ? "symlink"
             : f->type == SP_HARDLINK ? "hardlink"
                                      : "file";
      rel = f->rel[0] ? f->rel : s->trees[f->tree].single;
      why = f->why;
    } else if (i < s->file_count + s->kernel_count) {
      const sp_kernel* k = &s->kernels[i - s->file_count];
      const sp_group* g = &s->groups[k->group];
      if (!sp_first_of_archive(s, i - s->file_count) ||
          asprintf(&archive, "%s/%s_%s.kpack", s->archive_dir, g->prefix,
                   k->arch) < 0)
        continue;
      tree = sp_tree_of_arch(s, k->arch);
      kind = "archive";
      rel = archive;
      snprintf(reason, sizeof(reason), "code objects for %s", k->arch);
      why = reason;
    } else {
      break;
    }
    if (json) {
      cli_json_object(&w, 4, true);
      cli_json_key(&w, "path");
      cli_json_str(&w, rel);
      cli_json_key(&w, "kind");
      cli_json_str(&w, kind);
      cli_json_key(&w, "tree");
      cli_json_str(&w, tree);
      cli_json_key(&w, "why");
      cli_json_str(&w, why);
      cli_json_end(&w);
    } else {
      printf("%-16s %-10s %-40s %s\n", tree, kind, rel, why);
    }
    free(archive);
  }
  if (json) {
    cli_json_end(&w);
    printf("\n");
  }
}

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

static int split_run(int argc, char** argv) {
  if (sw_wants_wheel(argc, argv))
    return sw_run(argc, argv, split_run);
  enum {
    OPT_IN_PLACE = 256,
    OPT_PREFIX,
    OPT_ARCH,
    OPT_NO_COMPRESS,
    OPT_ARCHIVE_DIR,
    OPT_PER_ARCH,
    OPT_GROUP,
    OPT_RULES,
    OPT_DRY_RUN,
    OPT_JSON
  };
  static const struct option options[] = {
      {"output", required_argument, NULL, 'o'},
      {"in-place", no_argument, NULL, OPT_IN_PLACE},
      {"prefix", required_argument, NULL, OPT_PREFIX},
      {"jobs", required_argument, NULL, 'j'},
      {"arch", required_argument, NULL, OPT_ARCH},
      {"level", required_argument, NULL, 'l'},
      {"no-compress", no_argument, NULL, OPT_NO_COMPRESS},
      {"archive-dir", required_argument, NULL, OPT_ARCHIVE_DIR},
      {"per-arch", no_argument, NULL, OPT_PER_ARCH},
      {"group", required_argument, NULL, OPT_GROUP},
      {"rules", required_argument, NULL, OPT_RULES},
      {"dry-run", no_argument, NULL, OPT_DRY_RUN},
      {"json", no_argument, NULL, OPT_JSON},
      {"verbose", no_argument, NULL, 'v'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const cli_command* cmd = &cli_split_command;
  sp_state s = {.wo = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                       .threads = cli_default_threads()},
                .archive_dir = ".kpack"};
  const char *outdir = NULL, *prefix = NULL;
  bool quiet = false, level_given = false, archive_dir_given = false;
  bool dry_run = false, json = false;
  const char** rule_files = calloc((size_t)argc, sizeof(*rule_files));
  size_t rule_file_count = 0;
  int status = CLI_FAIL, c;
  double start = cli_seconds();

  s.only_arches = calloc((size_t)argc, sizeof(*s.only_arches));
  s.only_matched = calloc((size_t)argc, sizeof(*s.only_matched));
  if (s.only_arches == NULL || s.only_matched == NULL || rule_files == NULL) {
    cli_error("out of memory");
    free(rule_files);
    free(s.only_arches);
    free(s.only_matched);
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
        if (!cli_check_target(cmd, "--arch", optarg)) {
          status = CLI_USAGE;
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
      case OPT_ARCHIVE_DIR:
        if (!is_relative_dir(optarg)) {
          status = cli_usage_error(
              cmd,
              "--archive-dir '%s' must be a relative path without '.', '..' "
              "or empty parts",
              optarg);
          goto done;
        }
        s.archive_dir = optarg;
        archive_dir_given = true;
        break;
      case OPT_PER_ARCH:
        s.per_arch = true;
        break;
      case OPT_GROUP:
        status = add_arch_group(&s, cmd, optarg);
        if (status != CLI_OK)
          goto done;
        status = CLI_FAIL;
        break;
      case OPT_RULES:
        rule_files[rule_file_count++] = optarg;
        break;
      case OPT_DRY_RUN:
        dry_run = true;
        break;
      case 'v':
        s.verbose = true;
        break;
      case 'q':
        quiet = true;
        break;
      case OPT_JSON:
        json = true;
        break;
      case 'h':
        status = cli_print_manual(cmd);
        goto done;
      default:
        status = cli_option_error(cmd, argv, "o:j:l:vqh");
        goto done;
    }
  }
  if ((outdir == NULL) == !s.in_place) {
    status =
        cli_usage_error(cmd, s.in_place ? "--in-place and -o exclude each other"
                                        : "no output: -o OUTDIR or --in-place");
    goto done;
  }
  if (!s.per_arch &&
      (dry_run || rule_file_count > 0 || s.arch_group_count > 0)) {
    status = cli_usage_error(cmd,
                             "--dry-run, --rules and --group go with "
                             "--per-arch");
    goto done;
  }
  if (s.per_arch && s.in_place) {
    status = cli_usage_error(cmd, "--per-arch writes new trees: give -o");
    goto done;
  }
  s.outdir = outdir;
  if (s.per_arch) {
    /* The packager's rules first: the first rule that matches decides. */
    char* shipped = shipped_rules();
    bool loaded = shipped != NULL;
    for (size_t i = 0; loaded && i < rule_file_count; i++)
      loaded = ar_rules_load(&s.rules, rule_files[i]);
    bool own = loaded;
    loaded = loaded && ar_rules_load(&s.rules, shipped);
    free(shipped);
    if (!loaded) {
      status = own ? CLI_FAIL : CLI_USAGE;
      goto done;
    }
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
  for (size_t t = 0; t < s.tree_count; t++)
    if (s.trees[t].system_root && !archive_dir_given) {
      status = cli_usage_error(
          cmd,
          "%s installs at '/': its archives would go to /%s; choose their "
          "folder with --archive-dir (e.g. usr/lib/kpack)",
          argv[optind + (int)t], s.archive_dir);
      goto done;
    }
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
  if (!find_hard_links(&s) || !check_collisions(&s))
    goto done;
  status = classify(&s);
  if (status != CLI_OK)
    goto done;
  status = CLI_FAIL;
  if (!check_arches_matched(&s))
    goto done;
  if (s.per_arch && (!choose_trees(&s) || !place_directories(&s)))
    goto done;
  if (dry_run) {
    print_plan(&s, json);
    status = CLI_OK;
    goto done;
  }
  if (cli_interrupted())
    goto interrupted;

  /* Write: transformed binaries (held back), archives, then into place. */
  if (!s.in_place && !sp_make_directories(&s))
    goto done;
  if (!sp_transform_all(&s) || !sp_write_archives(&s) ||
      !(s.in_place ? sp_install_in_place(&s) : sp_install_mirror(&s))) {
    if (cli_interrupted())
      goto interrupted;
    goto done;
  }
  cli_progress_end(&s.progress);
  if (!quiet && !json) {
    print_left_alone(&s);
    print_summary(&s, cli_seconds() - start);
  } else if (json) {
    print_summary_json(&s, cli_seconds() - start);
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
    sp_undo_outputs(&s, outdir);
  free_state(&s);
  free(rule_files);
  return status;
}
