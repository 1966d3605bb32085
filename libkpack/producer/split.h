/* SPDX-License-Identifier: MIT
 *
 * The split (kpack_split.h) in three parts: split_plan.c makes the plan
 * (walks the inputs, decides what each file is and where it goes, lists
 * the code objects to pack and reads the archives they go to),
 * split_write.c carries it out: every byte the run writes, in the order
 * docs/split.md describes, so that a failure or a kill never leaves a
 * broken tree (transformed binaries to temporary files, then the archives,
 * then each file into place); split.c is the public API over both. This
 * header is the plan they share: one struct kpack_split, owned by the
 * caller's handle, used by one thread at a time.
 */
#ifndef KPACK_PRODUCER_SPLIT_H
#define KPACK_PRODUCER_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "producer/arch_rules.h"
#include "producer/file_replace.h"
#include "producer/report.h"
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
  size_t archive;  /* in sp_state.archives */
  uint64_t size;   /* bytes */
  bool compressed; /* its bundle is a CCOB: decompressed whole, once */
} sp_kernel;

/* The archives of one prefix in one output directory. */
typedef struct sp_group {
  const char* prefix;
  const char* out_root;
} sp_group;

/* One archive of a group: written with this run's code objects for its
 * arch and the kernels its earlier version holds for binaries this run
 * does not write; rewritten without the latter's stale keys; or deleted
 * when nothing is left. The archives of a group are adjacent. */
typedef struct sp_archive {
  size_t group;
  char* arch;
  char* path;          /* OUT_ROOT[/TREE]/ARCHIVE_DIR/PREFIX_ARCH.kpack */
  char* tree;          /* per_arch: TREE; NULL otherwise */
  size_t input;        /* the input file that is this archive, or SIZE_MAX */
  kpack_archive_t old; /* its earlier version, or NULL */
  const char* old_path;
  const char** carried; /* keys of `old` kept, in byte order */
  size_t carried_count, next_carried;
  const char** stale; /* keys of `old` for binaries written anew: dropped */
  size_t stale_count;
  size_t fresh;   /* code objects of this run */
  size_t removed; /* stale keys no code object of this run writes again */
  kpack_writer_t* writer;
  /* Without --in-place: the new version, written beside `path` and put
   * in place with the rest of the tree at the end (NULL until written);
   * `drop` when the run leaves the archive empty, to remove then. */
  char* tmp;
  bool drop;
} sp_archive;

/* --group NAME=ARCH,...: processors that share one output tree. */
typedef struct sp_arch_group {
  const char* name;
  char** processors;
  size_t count;
} sp_arch_group;

/* An arch dropped by --arch, with how many code objects it had; the array
 * doubles as the result's kpack_split_dropped_t. */
typedef kpack_split_dropped_t sp_dropped;

typedef struct kpack_split sp_state;
struct kpack_split {
  pr_run run;
  kpack_split_progress_fn progress;
  void* progress_user;
  sp_tree* trees;
  size_t tree_count;
  sp_file* files;
  size_t file_count, file_cap;
  sp_kernel* kernels; /* in listing order: file by file */
  size_t kernel_count, kernel_cap;
  const sp_kernel** order; /* by group, key, entry: the order of writing */
  sp_group* groups;
  size_t group_count;
  sp_archive* archives;
  size_t archive_count, archive_cap;
  sp_dropped* dropped;
  size_t dropped_count, dropped_cap;
  char** only_arches; /* --arch */
  bool* only_matched; /* per --arch: it keeps a code object */
  size_t only_count;
  kpack_writer_options_t wo;
  char* archive_dir; /* below each output root; default ".kpack" */
  bool in_place, verbose, dry_run, executed;
  /* --per-arch: OUTDIR/generic and a tree per processor or group. */
  bool per_arch;
  char* outdir;
  sp_arch_group* arch_groups;
  size_t arch_group_count;
  ar_rules rules;
  /* summary */
  size_t transformed, kpackified, debug_only, copied, links, symlinks;
  size_t archives_written, packed, removed, deleted;
  size_t by_content, by_rule; /* --per-arch: files placed in a GPU's tree */
  unsigned recovered;
  uint64_t host_before, host_after, code_bytes, stored_bytes;
  fr_outputs outputs; /* what a failed run takes back */
  /* The plan made archive directories to lock them: taken back when the
   * split is freed unless it was executed. */
  bool undo_plan;
  /* The archive directories it writes into; --in-place: also its inputs
   * and the directories above them */
  fr_locks locks;
};

/* ---- planning (split_plan.c) --------------------------------------------- */

/* Plans the split of `inputs` with the state's options set: walk,
 * classify, code objects, per-arch places, archives. False (reported)
 * when the inputs cannot be split. */
bool sp_plan(sp_state* s, const char* const* inputs, size_t count,
             const char* prefix, bool archive_dir_given);

/* Relays a message of the fat-binary stream (user: the state) to the
 * run: its notes only when verbose. */
void sp_fatbin_message(const kpack_message_t* m, void* user);

/* Whether `name` is an archive writer's temporary file (".kpack-PID-N.tmp",
 * kpack_writer_create); *stale when its process, killed before it
 * finished, left it behind: none is running under PID. */
bool sp_is_writer_temp(const char* name, bool* stale);

/* --per-arch: the output tree of a target ID: its processor (written to
 * `buf`, of `size` bytes) or the name of its --group. */
const char* sp_tree_of_arch(const sp_state* s, const char* arch, char* buf,
                            size_t size);

/* --per-arch: the trees besides generic, those of files then those of
 * archives, each once in first-seen order, copied into *trees (free with
 * sp_free_trees()). False (reported, nothing kept) when out of memory. */
bool sp_distinct_trees(sp_state* s, char*** trees, size_t* count);
void sp_free_trees(char** trees, size_t count);

/* The directory of group g's archive for `arch`: OUT_ROOT/ARCHIVE_DIR,
 * with --per-arch OUTDIR/TREE/ARCHIVE_DIR (malloc'ed; NULL when out of
 * memory). */
char* sp_archive_dir_of(const sp_state* s, const sp_group* g, const char* arch);

/* Reports a progress step to the caller; a callback that says to stop
 * cancels the run. False when the run is cancelled. */
bool sp_progress(sp_state* s, kpack_split_phase_t phase, size_t done,
                 size_t total);

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

/* In place: the archives, then each transformed binary over its
 * original (one with other hard links rewritten in its own inode), what
 * each replaces kept until the last is in place. */
bool sp_install_in_place(sp_state* s);
/* --in-place: notes every path the run may change before it writes
 * anything, so that a failed run can take it all back. */
bool sp_note_in_place(sp_state* s);

/* After a failed -o run: its temporary files, then whatever it made that
 * was not there before; one note says what is left. */
void sp_undo_outputs(sp_state* s);

#endif /* KPACK_PRODUCER_SPLIT_H */
