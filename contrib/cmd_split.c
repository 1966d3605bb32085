/* SPDX-License-Identifier: MIT
 *
 * `kpack split`: turns HIP binaries and whole install trees into kpack-ified
 * binaries plus one archive per GPU architecture, mirroring everything else.
 * The split is libkpack's (kpack_split.h); this file parses the command
 * line, prints the library's messages and progress, and the plan
 * (--dry-run) or the summary. docs/split.md describes the layout and the
 * steps.
 */
#include <getopt.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "split_wheel.h"

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
"    of the directory holding it, or of its library when that is a\n"
"    system folder such as lib or x86_64-linux-gnu). --archive-dir DIR\n"
"    puts the archives in OUTDIR/DIR instead of OUTDIR/.kpack, and the\n"
"    search paths lead there.\n"
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
"    reported; a bundle for several processors is generic. Other files go by the first rule that matches their path:\n"
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
"    TREE/.kpack/. Every transformed binary and archive is first written\n"
"    in full to a temporary file beside its place and synced; then the\n"
"    archives are renamed into place, then each binary over its original,\n"
"    what each replaces kept aside (.kpack-split.NAME.old) until the run\n"
"    is complete. A binary with other hard links keeps its inode, so every\n"
"    link sees the new bytes: a copy of its bytes is kept, then its new\n"
"    bytes are committed to a redo file beside it (.kpack-split.NAME.redo)\n"
"    before they are copied into it, and a run killed during that copy is\n"
"    finished by the next split of the tree, which first completes every\n"
"    redo file it finds. A failed run puts the tree back as it was; a\n"
"    killed one leaves each file as it was or transformed, and the\n"
"    archives a transformed binary needs are on disk before it is.\n"
"    A symbolic link given as a file INPUT (lib/libx.so -> libx.so.1 ->\n"
"    libx.so.1.2) stands for the file it resolves to: that file is\n"
"    rewritten, named from its own directory (kernel name libx.so.1.2,\n"
"    archives beside it in .kpack/), and the links stay as they are.\n"
"    Links inside a TREE stay links.\n"
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
"    a binary --arch would leave without one, an archive of another\n"
"    --prefix holding a binary this run writes (an earlier run's), and a\n"
"    binary the transform cannot rewrite (the message says what and\n"
"    where, e.g. a relocation that still points into .hip_fatbin). The\n"
"    inputs are never modified\n"
"    without --in-place.\n"
"\n"
"    A file that cannot be written stops the run at once, with a message\n"
"    naming it (the archive, binary or copy being written, not an input)\n"
"    and the system's reason, e.g. \"No space left on device\". A failed\n"
"    -o run leaves OUTDIR as it was: every new file is first written under\n"
"    a temporary name, then all are renamed into place with the files they\n"
"    replace kept aside until the run is complete; after a failure the\n"
"    kept files are put back and what the run made (files, archives and\n"
"    directories that were not there before) is removed, and it says so;\n"
"    what it cannot take back is listed instead. Directories\n"
"    get the input's mode as they are made (with the owner's rwx until\n"
"    the end). A failed --in-place run is taken back the same way: each\n"
"    binary and archive it replaced is put back (a hard-linked binary's\n"
"    bytes copied back into its inode), each archive and directory it\n"
"    made is removed, and the directories get their times back. One\n"
"    --in-place run at a time writes in a tree or rewrites a file: a\n"
"    second run over the same tree or file, over a directory or file\n"
"    inside the tree, or over a tree that holds it, is refused while the\n"
"    first goes on, and writes nothing. Runs that write archives into\n"
"    one directory (files of one directory split in place, as a parallel\n"
"    build splits them, or runs into one OUTDIR) take turns: the second\n"
"    says it is waiting, and reads the archives once the first has\n"
"    written them.\n"
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
"                          served, by the loader's rule (repeatable, or a\n"
"                          list ARCH,ARCH... standing for each): a\n"
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
"                          gfx90X-dcgpu=gfx906,gfx908,gfx90a); NAME may be\n"
"                          a processor only if the group holds it\n"
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

/* What the command keeps while the library runs: where its messages and
 * progress go. */
typedef struct split_cli {
  cli_progress progress;
} split_cli;

/* A message of the split, as every kpack command prints one. */
static void print_message(const kpack_message_t* m, void* user) {
  split_cli* c = user;
  cli_progress_end(&c->progress);
  if (m->severity == KPACK_SEVERITY_USAGE)
    cli_usage_error(&cli_split_command, "%s", m->text);
  else if (m->severity == KPACK_SEVERITY_WARNING)
    fprintf(stderr, "kpack: warning: %s\n", m->text);
  else
    cli_error("%s", m->text);
}

static bool show_progress(kpack_split_phase_t phase, size_t done, size_t total,
                          void* user) {
  split_cli* c = user;
  switch (phase) {
    case KPACK_SPLIT_READING:
      cli_progress_show(&c->progress, false,
                        "kpack: split: reading %zu/%zu files", done, total);
      break;
    case KPACK_SPLIT_TRANSFORMING:
      cli_progress_show(&c->progress, false,
                        "kpack: split: transformed %zu/%zu binaries", done,
                        total);
      break;
    case KPACK_SPLIT_PACKING:
      cli_progress_show(&c->progress, false,
                        "kpack: split: packing %zu/%zu code objects", done,
                        total);
      break;
    case KPACK_SPLIT_WRITING:
      cli_progress_show(&c->progress, false,
                        "kpack: split: writing %zu/%zu files", done, total);
      break;
  }
  return true; /* an interruption cancels through the flag */
}

static void print_summary(const kpack_split_result_t* r, bool in_place,
                          bool per_arch, double seconds) {
  char a[32], b[32], c[32], d[32];
  printf("split: %zu binar%s transformed (%s -> %s)", r->transformed,
         r->transformed == 1 ? "y" : "ies", cli_human_size(a, r->host_before),
         cli_human_size(b, r->host_after));
  if (r->kpackified + r->debug_only > 0)
    printf(", %zu left alone (%zu already kpack-ified, %zu debug only)",
           r->kpackified + r->debug_only, r->kpackified, r->debug_only);
  printf("\n");
  if (!in_place)
    printf("split: %zu file%s copied, %zu hard link%s, %zu symbolic link%s\n",
           r->copied, r->copied == 1 ? "" : "s", r->hard_links,
           r->hard_links == 1 ? "" : "s", r->symbolic_links,
           r->symbolic_links == 1 ? "" : "s");
  printf(
      "split: %zu archive%s written: %zu code object%s, %s -> %s in %.2f "
      "s\n",
      r->archives, r->archives == 1 ? "" : "s", r->code_objects,
      r->code_objects == 1 ? "" : "s", cli_human_size(c, r->code_bytes),
      cli_human_size(d, r->stored_bytes), seconds);
  if (r->removed > 0 || r->deleted > 0)
    printf(
        "split: %zu code object%s of earlier builds removed, %zu archive%s "
        "left empty deleted\n",
        r->removed, r->removed == 1 ? "" : "s", r->deleted,
        r->deleted == 1 ? "" : "s");
  for (size_t i = 0; i < r->dropped_count; i++)
    printf("split: dropped by --arch: %s (%zu code object%s)\n",
           r->dropped[i].arch, r->dropped[i].count,
           r->dropped[i].count == 1 ? "" : "s");
  if (per_arch)
    printf(
        "split: per-arch trees: %zu file%s placed by their content, %zu by "
        "rules\n",
        r->by_content, r->by_content == 1 ? "" : "s", r->by_rule);
  if (r->recovered > 0)
    printf("split: %zu rewrite%s of an interrupted run finished\n",
           r->recovered, r->recovered == 1 ? "" : "s");
}

/* print_summary() for scripts (--json); sizes in bytes. */
static void print_summary_json(const kpack_split_result_t* r, double seconds) {
  cli_json w;
  char text[32];
  cli_json_init(&w, stdout);
  cli_json_object(&w, 2, true);
  cli_json_key_uint(&w, "transformed", r->transformed);
  cli_json_key_uint(&w, "host_before", r->host_before);
  cli_json_key_uint(&w, "host_after", r->host_after);
  cli_json_key_uint(&w, "kpackified", r->kpackified);
  cli_json_key_uint(&w, "debug_only", r->debug_only);
  cli_json_key_uint(&w, "copied", r->copied);
  cli_json_key_uint(&w, "hard_links", r->hard_links);
  cli_json_key_uint(&w, "symbolic_links", r->symbolic_links);
  cli_json_key_uint(&w, "archives", r->archives);
  cli_json_key_uint(&w, "code_objects", r->code_objects);
  cli_json_key_uint(&w, "code_bytes", r->code_bytes);
  cli_json_key_uint(&w, "stored_bytes", r->stored_bytes);
  cli_json_key_uint(&w, "removed", r->removed);
  cli_json_key_uint(&w, "deleted", r->deleted);
  cli_json_key_uint(&w, "recovered", r->recovered);
  cli_json_key(&w, "dropped");
  cli_json_object(&w, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < r->dropped_count; i++)
    cli_json_key_uint(&w, r->dropped[i].arch, r->dropped[i].count);
  cli_json_end(&w);
  cli_json_key_uint(&w, "threads", r->threads);
  snprintf(text, sizeof(text), "%.2f", seconds);
  cli_json_key(&w, "seconds");
  cli_json_raw(&w, text);
  cli_json_finish(&w);
}

/* Lists each binary left alone, and why. */
static void print_left_alone(const kpack_split_t* split) {
  kpack_split_counts_t n;
  kpack_split_get_counts(split, &n);
  for (size_t i = 0; i < n.files; i++) {
    kpack_split_file_t f;
    kpack_split_get_file(split, i, &f);
    if (f.type == KPACK_SPLIT_FILE && (f.kind == KPACK_TRANSFORM_KPACKIFIED ||
                                       f.kind == KPACK_TRANSFORM_DEBUG_ONLY))
      printf("split: %s: %s, left alone\n", f.source,
             kpack_transform_kind_string(f.kind));
  }
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

/* One row of the plan: a table line, or an object of the JSON array. */
static void plan_row(cli_json* w, const char* tree, const char* kind,
                     const char* path, const char* why) {
  if (w == NULL) {
    printf("%-16s %-10s %-40s %s\n", tree, kind, path, why);
    return;
  }
  cli_json_object(w, 4, true);
  cli_json_key(w, "path");
  cli_json_str(w, path);
  cli_json_key(w, "kind");
  cli_json_str(w, kind);
  cli_json_key(w, "tree");
  cli_json_str(w, tree);
  cli_json_key(w, "why");
  cli_json_str(w, why);
  cli_json_end(w);
}

/* --dry-run: every path and each archive, its tree and why. */
static bool print_plan(const kpack_split_t* split, bool json) {
  cli_json w;
  kpack_split_counts_t n;
  kpack_split_get_counts(split, &n);
  bool* shown = calloc(n.archives ? n.archives : 1, sizeof(*shown));
  if (shown == NULL) {
    cli_error("out of memory");
    return false;
  }
  if (json) {
    cli_json_init(&w, stdout);
    cli_json_array(&w, 2, false);
  } else {
    printf("%-16s %-10s %-40s %s\n", "TREE", "KIND", "PATH", "WHY");
  }
  for (size_t i = 0; i < n.files; i++) {
    kpack_split_file_t f;
    kpack_split_get_file(split, i, &f);
    if (f.type == KPACK_SPLIT_DIRECTORY)
      continue;
    plan_row(json ? &w : NULL, f.output_tree,
             f.type == KPACK_SPLIT_SYMLINK     ? "symlink"
             : f.type == KPACK_SPLIT_HARD_LINK ? "hardlink"
                                               : "file",
             f.path, f.why);
  }
  /* The archives of the code objects, each at its first. */
  for (size_t i = 0; i < n.code_objects; i++) {
    kpack_split_code_object_t co;
    kpack_split_archive_t a;
    char why[96];
    kpack_split_get_code_object(split, i, &co);
    if (shown[co.archive])
      continue;
    shown[co.archive] = true;
    kpack_split_get_archive(split, co.archive, &a);
    snprintf(why, sizeof(why), "code objects for %s", a.arch);
    plan_row(json ? &w : NULL, a.output_tree, "archive", a.name, why);
  }
  if (json) {
    cli_json_end(&w);
    printf("\n");
  }
  free(shown);
  return true;
}

/* The exit status of a failed call of the split. */
static int split_status(kpack_error_t err) {
  return err == KPACK_ERROR_INVALID_ARGUMENT ? CLI_USAGE
         : err == KPACK_ERROR_CANCELLED      ? CLI_INTERRUPTED
                                             : CLI_FAIL;
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
  kpack_split_options_t o;
  kpack_split_options_init(&o, sizeof(o));
  o.threads = cli_default_threads();
  split_cli c = {{0}};
  kpack_split_t* split = NULL;
  bool quiet = false, level_given = false, json = false;
  const char** arches = NULL;
  size_t arch_cap = 0;
  const char** groups = calloc((size_t)argc, sizeof(*groups));
  const char** rule_files = calloc((size_t)argc, sizeof(*rule_files));
  char* shipped = NULL;
  int status = CLI_FAIL, ch;
  double start = cli_seconds();

  if (groups == NULL || rule_files == NULL) {
    cli_error("out of memory");
    goto done;
  }
  o.groups = groups;
  o.rules_files = rule_files;
  while ((ch = getopt_long(argc, argv, "o:j:l:vqh", options, NULL)) != -1) {
    char why[160];
    switch (ch) {
      case 'o':
        o.output_dir = optarg;
        break;
      case OPT_IN_PLACE:
        o.in_place = true;
        break;
      case OPT_PREFIX:
        o.prefix = optarg;
        break;
      case 'j':
        if (!cli_parse_threads(cmd, optarg, &o.threads)) {
          status = CLI_USAGE;
          goto done;
        }
        break;
      case OPT_ARCH:
        /* A list (gfx90a:xnack-,gfx1030) is each of its targets, each
         * checked, as verify --arch takes it. */
        if (*optarg == '\0' || *optarg == ',' || strstr(optarg, ",,") ||
            optarg[strlen(optarg) - 1] == ',') {
          status = cli_usage_error(
              cmd, "--arch '%s': not a GPU target: an empty one in the list",
              optarg);
          goto done;
        }
        for (char* t = strtok(optarg, ","); t != NULL; t = strtok(NULL, ",")) {
          const char** grown =
              cli_grow(arches, o.arch_count, &arch_cap, sizeof(*arches), 8);
          if (grown == NULL) {
            cli_error("out of memory");
            goto done;
          }
          o.arches = arches = grown;
          if (!cli_check_target(cmd, "--arch", t)) {
            status = CLI_USAGE;
            goto done;
          }
          arches[o.arch_count++] = t;
        }
        break;
      case 'l':
        if (!cli_parse_level(cmd, optarg, &o.zstd_level)) {
          status = CLI_USAGE;
          goto done;
        }
        level_given = true;
        break;
      case OPT_NO_COMPRESS:
        o.no_compress = true;
        break;
      case OPT_ARCHIVE_DIR:
        o.archive_dir = optarg;
        break;
      case OPT_PER_ARCH:
        o.per_arch = true;
        break;
      case OPT_GROUP:
        groups[o.group_count++] = optarg;
        if (!kpack_split_check_group(groups, o.group_count, why, sizeof(why))) {
          status = cli_usage_error(cmd, "--group '%s': %s", optarg, why);
          goto done;
        }
        break;
      case OPT_RULES:
        rule_files[o.rules_file_count++] = optarg;
        break;
      case OPT_DRY_RUN:
        o.dry_run = true;
        break;
      case 'v':
        o.verbose = true;
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
  if ((o.output_dir == NULL) == !o.in_place) {
    status =
        cli_usage_error(cmd, o.in_place ? "--in-place and -o exclude each other"
                                        : "no output: -o OUTDIR or --in-place");
    goto done;
  }
  if (!o.per_arch &&
      (o.dry_run || o.rules_file_count > 0 || o.group_count > 0)) {
    status = cli_usage_error(cmd,
                             "--dry-run, --rules and --group go with "
                             "--per-arch");
    goto done;
  }
  if (o.per_arch && o.in_place) {
    status = cli_usage_error(cmd, "--per-arch writes new trees: give -o");
    goto done;
  }
  if (level_given && o.no_compress) {
    status = cli_usage_error(cmd, "-l and --no-compress exclude each other");
    goto done;
  }
  if (optind == argc) {
    status = cli_usage_error(cmd, "no input: give a tree or a file");
    goto done;
  }
  if (o.per_arch)
    o.shipped_rules = shipped = shipped_rules();
  c.progress.enabled = !quiet && isatty(STDERR_FILENO);
  o.message = print_message;
  o.message_user = &c;
  o.progress = show_progress;
  o.progress_user = &c;
  o.cancel = cli_interrupt_flag();
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
  kpack_error_t err = kpack_split_plan(&o, (const char* const*)argv + optind,
                                       (size_t)(argc - optind), &split);
  if (err == KPACK_SUCCESS && o.dry_run) {
    status = print_plan(split, json) ? CLI_OK : CLI_FAIL;
    goto done;
  }
  if (err == KPACK_SUCCESS)
    err = kpack_split_execute(split);
  cli_progress_end(&c.progress);
  if (err != KPACK_SUCCESS) {
    status = split_status(err);
    goto done;
  }
  kpack_split_result_t result;
  kpack_split_get_result(split, &result);
  if (!quiet && !json) {
    print_left_alone(split);
    print_summary(&result, o.in_place, o.per_arch, cli_seconds() - start);
  } else if (json) {
    print_summary_json(&result, cli_seconds() - start);
  }
  status = CLI_OK;
done:
  kpack_split_free(split);
  free(shipped);
  free(arches);
  free(groups);
  free(rule_files);
  return status;
}
