/* SPDX-License-Identifier: MIT
 *
 * `kpack split` in two parts: cmd_split.c makes the plan (walks the
 * inputs, decides what each file is and where it goes, lists the code
 * objects to pack) and split_write.c carries it out: every byte the run
 * writes, in the order docs/split.md describes, so that a failure or a
 * kill never leaves a broken tree (transformed binaries to temporary
 * files, then the archives, then each file into place). This header is
 * the plan they share.
 */
#ifndef KPACK_SPLIT_WRITE_H
#define KPACK_SPLIT_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "arch_rules.h"
#include "cli.h"
#include "file_replace.h"
#include "rocm_kpack/kpack_ext.h"

/* ---- the plan ------------------------------------------------------------ */

/* One INPUT. */
typedef struct sp_tree {
  char* root;     /* the directory names are relative to */
  char* single;   /* a file INPUT: its name in root; NULL for a tree */
  char* out_root; /* OUTDIR, or root with --in-place */
  char* prefix;
  bool derive_prefix; /* a system prefix without --prefix: named after the
                         library it holds (name_system_prefixes) */
  bool system_root;   /* installed at "/": ARCHIVE_DIR would be /ARCHIVE_DIR */
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
  char* all_dropped;           /* FAT: --arch dropped all of these arches */
  size_t group;                /* FAT: the archives it goes to */
  bool archive_rewritten;      /* an archive this run rewrites or deletes */
  char* tmp;                   /* FAT: the transformed file, not yet in place */
  kpack_transform_result_t result;
  /* --per-arch: the output tree (a processor or a --group; NULL for
   * generic) and why it goes there. */
  char* dest;
  char* why;
} sp_file;

/* One code object to pack. */
typedef struct sp_kernel {
  char* key; /* "REL#N" */
  char* arch;
  size_t file, bundle, entry;
  size_t group;
  bool compressed; /* its bundle is a CCOB: decompressed whole, once */
} sp_kernel;

/* The archives of one prefix in one output directory. */
typedef struct sp_group {
  const char* prefix;
  const char* out_root;
} sp_group;

/* --group NAME=ARCH,...: processors that share one output tree. */
typedef struct sp_arch_group {
  const char* name;
  char** processors;
  size_t count;
} sp_arch_group;

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
  bool* only_matched;       /* per --arch: it keeps a code object */
  size_t only_count;
  kpack_writer_options_t wo;
  const char* archive_dir; /* below each output root; default ".kpack" */
  bool in_place, verbose;
  /* --per-arch: OUTDIR/generic and a tree per processor or group. */
  bool per_arch;
  const char* outdir;
  sp_arch_group* arch_groups;
  size_t arch_group_count;
  ar_rules rules;
  cli_progress progress;
  /* summary */
  size_t transformed, kpackified, debug_only, copied, links, symlinks;
  size_t archives, packed, removed, deleted;
  size_t by_content, by_rule; /* --per-arch: files placed in a GPU's tree */
  unsigned recovered;
  uint64_t host_before, host_after, code_bytes, stored_bytes;
  fr_outputs outputs; /* -o: what a failed run takes back */
} sp_state;

/* ---- the planner's, used in writing too (cmd_split.c) -------------------- */

/* A refusal of the transform, naming the file once. */
void sp_transform_error(const char* path, kpack_error_t err,
                        const kpack_transform_message_t* msg);

/* Whether `name` is an archive writer's temporary file (".kpack-PID-N.tmp",
 * kpack_writer_create); *stale when its process, killed before it
 * finished, left it behind: none is running under PID. */
bool sp_is_writer_temp(const char* name, bool* stale);

/* --per-arch: the output tree of a target ID; the string is the state's or
 * static (valid until the next call). */
const char* sp_tree_of_arch(const sp_state* s, const char* arch);

/* --per-arch: the trees besides generic, those of files then those of
 * archives, each once in first-seen order, copied into *trees (free with
 * sp_free_trees()). False (reported, nothing kept) when out of memory. */
bool sp_distinct_trees(const sp_state* s, char*** trees, size_t* count);
void sp_free_trees(char** trees, size_t count);

/* ---- writing (split_write.c) --------------------------------------------- */

/* Writes each fat binary, transformed, to a temporary file beside where it
 * goes, synced: every refusal shows here, before anything is replaced. */
bool sp_transform_all(sp_state* s);

/* Every archive: per group, OUT_ROOT/.kpack/PREFIX_ARCH.kpack for each
 * arch, all of a group's written in one pass over its fat binaries. */
bool sp_write_archives(sp_state* s);

/* The output roots and every directory of the plan, each noted first as an
 * output a failed run takes back; a directory made here gets its mode. */
bool sp_make_directories(sp_state* s);

/* Mirror: every path into OUTDIR; then the directories get their modes and
 * times, deepest first (writing into a directory changes its mtime). */
bool sp_install_mirror(sp_state* s);

/* In place: each transformed binary over its original; one with other
 * hard links rewritten in its own inode. */
bool sp_install_in_place(sp_state* s);

/* After a failed -o run: its temporary files, then whatever it made that
 * was not there before; one line says what is left. */
void sp_undo_outputs(sp_state* s, const char* outdir);

/* Whether kernel i is the first of its group and arch, which names an
 * archive. Kernels are in listing order: a few of each group and arch, so
 * the scan back to an earlier one stops soon. */
bool sp_first_of_archive(const sp_state* s, size_t i);

#endif
