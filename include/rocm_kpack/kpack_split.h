/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the producer. Splits HIP binaries and whole install
 * trees into kpack-ified binaries plus one archive per GPU architecture,
 * mirroring everything else: what `kpack split` does, as calls a build
 * system, a binding or another tool can make. A split is planned first
 * (the inputs walked, every file classified, the code objects and the
 * archives listed, the archives already there read), which writes nothing
 * but the archive directory it locks (below) and can be read back as
 * data; then executed. docs/split.md describes the
 * layout, the order of the writes and what a failure leaves. Messages go
 * to the caller's callback (kpack_message.h), never to a stream. Status
 * values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_SPLIT_H
#define ROCM_KPACK_SPLIT_H

#include "kpack.h"
#include "kpack_message.h"
#include "kpack_transform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A planned split: its options, inputs, plan and, once executed, its
 * result. Opaque; made by kpack_split_plan(), freed by kpack_split_free().
 * Used by one thread at a time. */
typedef struct kpack_split kpack_split_t;

/* What a split is busy with, for progress. */
typedef enum kpack_split_phase {
  KPACK_SPLIT_READING = 0,      /* classifying the inputs (files) */
  KPACK_SPLIT_TRANSFORMING = 1, /* writing the transformed binaries */
  KPACK_SPLIT_PACKING = 2,      /* packing the code objects */
  KPACK_SPLIT_WRITING = 3,      /* putting every file in place (files) */
} kpack_split_phase_t;

/* Called as the work advances: `done` of `total` items of `phase`. Return
 * false to cancel: the call stops at its next step and returns CANCELLED,
 * leaving what a failure leaves. */
typedef bool (*kpack_split_progress_fn)(kpack_split_phase_t phase, size_t done,
                                        size_t total, void* user);

typedef struct kpack_split_options {
  /* sizeof(kpack_split_options_t) as the caller was built, set by
   * kpack_split_options_init(): a library with more fields gives the
   * fields past it their defaults. */
  size_t size;
  /* Where the output goes: a directory the inputs are mirrored into, or
   * (in_place, output_dir NULL) the inputs themselves. In place, each
   * input, tree or file, is locked from the plan until kpack_split_free():
   * a second in-place split over it, or over a part of it, fails with
   * KPACK_ERROR_IO_ERROR (errno EWOULDBLOCK) meanwhile (docs/split.md,
   * "Replacing files safely"). In place or not, unless dry_run, so is
   * each directory the split writes archives into (per_arch: the output
   * directory), which the plan makes when it is missing (and
   * kpack_split_free() removes again unless the split was executed): a
   * second split that writes there waits in kpack_split_plan(), after a
   * note that says so, until the first is freed, then reads the archives
   * as the first left them; while it waits, the progress callback is
   * called again (KPACK_SPLIT_READING, every file read) and the cancel
   * flag read, either of which can cancel it. */
  const char* output_dir;
  bool in_place;
  /* output_dir/generic and one tree per GPU processor (docs/split.md,
   * "Per-arch trees"); with `groups` ("NAME=PROCESSOR,PROCESSOR..." each,
   * see kpack_split_check_group()) several processors share a tree, and
   * `rules_files` (each read in turn) then `shipped_rules` (the rules
   * shipped with kpack, share/kpack/split-rules.conf; NULL for none) place
   * data files. Needs output_dir. */
  bool per_arch;
  const char* const* groups;
  size_t group_count;
  const char* const* rules_files;
  size_t rules_file_count;
  const char* shipped_rules;
  /* Keep only the code objects an agent of one of these targets could be
   * served, by the loader's rule (kpack_target_may_serve()); each must
   * pass kpack_target_check(). None: every code object. */
  const char* const* arches;
  size_t arch_count;
  /* Archive name prefix and group_name, part of a file name (not empty,
   * no '/', not "." or ".."); NULL: the name of each tree's
   * directory (for a system prefix, that of the library it holds). */
  const char* prefix;
  /* Where the archives go below each output root, relative; NULL:
   * ".kpack" (a tree that installs at "/" must name one). */
  const char* archive_dir;
  unsigned threads; /* compression threads; 0: one per CPU */
  int zstd_level;   /* 1-22; 0: 3 */
  bool no_compress; /* store code objects raw (scheme "none") */
  /* kpack_split_execute() writes nothing and returns KPACK_SUCCESS. */
  bool dry_run;
  /* A NOTE message for each file classified and each bundle listed. */
  bool verbose;
  kpack_message_fn message; /* NULL: messages are dropped */
  void* message_user;
  kpack_split_progress_fn progress; /* NULL: none */
  void* progress_user;
  /* When not NULL, the split stops at its next step once *cancel is not
   * zero (set by another thread, or a signal handler), as if `progress`
   * had returned false. */
  const volatile int* cancel;
} kpack_split_options_t;

/* Sets *options to the defaults (everything 0 or NULL) and options->size to
 * `size`, which must be sizeof(kpack_split_options_t) as the caller sees
 * it; at most `size` bytes are written. NULL is a no-op. */
KPACK_API void kpack_split_options_init(kpack_split_options_t* options,
                                        size_t size);

/* Whether `group` ("NAME=PROCESSOR,PROCESSOR...") can be the last of the
 * `count` groups of `groups` (it included, as groups[count - 1]): NAME can
 * name a folder (no "/", not "generic", ".", "..") and is no processor
 * but one of its own (gfx1030=gfx906 would share gfx1030's tree), each
 * PROCESSOR is one
 * libkpack knows (kpack_processor_is_known()) and is in no group before.
 * When false and `why` is not NULL, `why` (of `why_size` bytes) gets what
 * is wrong, e.g. "gfx90a is named twice". False for NULL. */
KPACK_API bool kpack_split_check_group(const char* const* groups, size_t count,
                                       char* why, size_t why_size);

/* Plans the split of `inputs` (`count` paths: directory trees, or single
 * files) with `options`: walks the inputs, classifies every file
 * (kpack_transform_classify()), lists the code objects of every fat binary
 * (entry tables only), places each file (per_arch), and reads the archives
 * of each group already there. Nothing is written. *split is NULL on
 * failure, when messages have said why:
 *   INVALID_ARGUMENT  a pointer is NULL, no input, options that contradict
 *                     each other or cannot be used (USAGE messages: an
 *                     arch that is no target, a bad group, a prefix or
 *                     archive directory that cannot be a file name, a
 *                     tree that installs at "/" without archive_dir, a
 *                     bad rule file of the caller's), a system prefix
 *                     holding several HIP libraries without prefix
 *   FILE_NOT_FOUND, IO_ERROR  an input cannot be read (errno in the
 *                     message)
 *   INVALID_FORMAT    an input that cannot be split: a file that is not
 *                     a regular file, directory or symbolic link, two
 *                     inputs giving one output path, an output directory
 *                     inside an input, a fat binary or archive that does
 *                     not parse, an arch that matches no code object of
 *                     the inputs, a binary left without code objects
 *   CANCELLED         the progress callback or the cancel flag said so
 *                     (also while waiting for another run's archive
 *                     directory)
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_split_plan(const kpack_split_options_t* options,
                                         const char* const* inputs,
                                         size_t count, kpack_split_t** split);

/* ---- the plan, as data ------------------------------------------------- */
/* Strings are owned by the split and valid until kpack_split_free(). */

typedef enum kpack_split_file_type {
  KPACK_SPLIT_DIRECTORY = 0,
  KPACK_SPLIT_FILE = 1,
  KPACK_SPLIT_HARD_LINK = 2, /* another name of an earlier file (link_of) */
  KPACK_SPLIT_SYMLINK = 3,
} kpack_split_file_type_t;

/* One path of an input, in walk order (each directory before what it
 * holds, names in byte order); with per_arch, directories again once per
 * further tree that holds something below them. */
typedef struct kpack_split_file {
  const char* source;      /* the input path */
  const char* destination; /* where it is written */
  const char* path;        /* below its tree's root ("" for the root) */
  kpack_split_file_type_t type;
  kpack_transform_kind_t kind; /* FILE: KPACK_TRANSFORM_FAT is transformed */
  size_t link_of;              /* HARD_LINK: index of the first name */
  size_t tree;                 /* index of the input it comes from */
  /* per_arch: the output tree ("generic", "gfx90a", a group's name) and,
   * but for directories, why (e.g. "content: code object for gfx908",
   * "rule FILE:LINE: gfx90a", "HIP binary, transformed"); NULL otherwise. */
  const char* output_tree;
  const char* why;
} kpack_split_file_t;

/* One code object to pack, in listing order (files in walk order, then
 * code objects by co_index, entries in stored order). */
typedef struct kpack_split_code_object {
  const char* key;  /* "lib/libx.so#0" */
  const char* arch; /* as the archive files it, e.g. "gfx90a:xnack-" */
  size_t file;      /* index of its fat binary among the files */
  size_t archive;   /* index of its archive among the archives */
  uint64_t size;    /* bytes */
} kpack_split_code_object_t;

/* One archive the split writes or deletes: those of the code objects in
 * order of their first code object, then earlier archives of a group that
 * lose keys. Archives nothing concerns are not listed (and left as they
 * are). */
typedef struct kpack_split_archive {
  const char* path;   /* where it is: OUT_ROOT[/TREE]/ARCHIVE_DIR/NAME */
  const char* name;   /* ARCHIVE_DIR/PREFIX_ARCH.kpack */
  const char* prefix; /* its group_name */
  const char* arch;
  const char* output_tree; /* per_arch: its tree; NULL otherwise */
  size_t keys_added;       /* code objects of this split */
  size_t keys_carried;     /* keys of other binaries kept from before */
  size_t keys_removed;     /* keys of binaries this split writes that it
                              does not write again (earlier builds) */
  bool existed;            /* an earlier version is there */
  bool deleted;            /* left without keys: removed */
} kpack_split_archive_t;

typedef struct kpack_split_counts {
  size_t files, code_objects, archives;
} kpack_split_counts_t;

/* How many files, code objects and archives the plan holds.
 *   INVALID_ARGUMENT  a pointer is NULL */
KPACK_API kpack_error_t kpack_split_get_counts(const kpack_split_t* split,
                                               kpack_split_counts_t* counts);
/* Item `index` of each list. INVALID_ARGUMENT if a pointer is NULL or the
 * index is past the list. */
KPACK_API kpack_error_t kpack_split_get_file(const kpack_split_t* split,
                                             size_t index,
                                             kpack_split_file_t* file);
KPACK_API kpack_error_t
kpack_split_get_code_object(const kpack_split_t* split, size_t index,
                            kpack_split_code_object_t* code_object);
KPACK_API kpack_error_t kpack_split_get_archive(const kpack_split_t* split,
                                                size_t index,
                                                kpack_split_archive_t* archive);

/* ---- execution --------------------------------------------------------- */

/* Carries the plan out, in the order docs/split.md gives: each fat binary
 * transformed to a temporary file, then the archives (one pass over the
 * fat binaries), then every file into place. Once per split: a second
 * call returns INVALID_ARGUMENT. With dry_run, writes nothing. When it
 * fails, what was made is taken back as docs/split.md describes ("When a
 * write fails") and messages say what is left.
 *   INVALID_ARGUMENT  split is NULL, or executed before
 *   IO_ERROR          a file cannot be written or read (the message names
 *                     it, with the system's reason)
 *   INVALID_FORMAT    a fat binary the transform refuses (the message
 *                     says what and where) or that no longer parses
 *   CANCELLED         the progress callback or the cancel flag said so
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_split_execute(kpack_split_t* split);

/* An arch --arch dropped, with how many code objects it had. */
typedef struct kpack_split_dropped {
  const char* arch;
  size_t count;
} kpack_split_dropped_t;

/* What a split did (after kpack_split_execute(); after kpack_split_plan()
 * only the counts of the plan: binaries left alone, dropped, placed,
 * recovered). */
typedef struct kpack_split_result {
  size_t transformed;    /* fat binaries written kpack-ified */
  size_t kpackified;     /* binaries left alone: already kpack-ified */
  size_t debug_only;     /* ... and separate debug files */
  size_t copied;         /* files mirrored (not in place) */
  size_t hard_links;     /* ... hard links */
  size_t symbolic_links; /* ... symbolic links */
  size_t archives;       /* archives written */
  size_t code_objects;   /* code objects packed */
  size_t removed;        /* keys of earlier builds removed */
  size_t deleted;        /* archives left empty, deleted */
  size_t by_content;     /* per_arch: files placed by their content */
  size_t by_rule;        /* ... by a rule */
  size_t recovered;      /* rewrites an interrupted run left, finished */
  uint64_t host_before;  /* bytes of the fat binaries */
  uint64_t host_after;   /* ... transformed */
  uint64_t code_bytes;   /* bytes of the code objects packed */
  uint64_t stored_bytes; /* bytes of the archives written */
  unsigned threads;      /* compression threads used */
  const kpack_split_dropped_t* dropped; /* by arch, in order of first drop */
  size_t dropped_count;
} kpack_split_result_t;

/* INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_split_get_result(const kpack_split_t* split,
                                               kpack_split_result_t* result);

/* Frees the split: temporary files of a failed execution are removed.
 * NULL is a no-op. */
KPACK_API void kpack_split_free(kpack_split_t* split);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_SPLIT_H */
