/* SPDX-License-Identifier: MIT
 *
 * tree.c: the mount's tree (docs/mount.md, "How kpackfs holds a tree").
 * Built before mounting from the archives' TOCs, which are all opened and
 * validated then; read-only afterwards, so that requests read it from any
 * thread without a lock. The one exception is the entries of a binary
 * directory, made on its first lookup or listing and published once with
 * an atomic store (kfs_listing). It owns the open archives (kfs_source).
 *
 * Inode numbers are derived, not counted: a directory's from its place
 * among the directories of the sorted binary paths, everything below a
 * binary directory from its kernel's place in the sources, so the same
 * sources give the same numbers whatever is looked up first.
 */
#ifndef KPACKFS_TREE_H
#define KPACKFS_TREE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "kpackfs.h"
#include "sources.h"

typedef enum kfs_kind {
  KFS_DIR,
  KFS_KERNEL,
  KFS_STATS,        /* .kpackfs/stats: rendered at each open */
  KFS_ARCHIVES,     /* .kpackfs/archives: fixed at mount */
  KFS_KERNELS,      /* <arch>/kernels: rendered from the code object */
  KFS_METADATA,     /* <arch>/metadata.json: likewise */
  KFS_TOC_METADATA, /* <arch>/toc-metadata.msgpack: the TOC entry's map */
} kfs_kind;

/* Fixed inode numbers. */
#define KFS_INO_ROOT FUSE_ROOT_ID
#define KFS_INO_META 2
#define KFS_INO_STATS 3
#define KFS_INO_ARCHIVES 4

typedef struct kfs_source {
  char* path; /* canonical; what user.kpack.archive reports */
  kpack_archive_t archive;
  struct timespec mtime;
  const char* scheme; /* "none" or "zstd-per-kernel" */
  /* Derived tree: binary i's kernels are global kernels
   * [binary_kernel[i], binary_kernel[i + 1]), in the archive's order; its
   * directory is kfs_tree.binaries[binary_unique[i]] (UINT32_MAX when none
   * of its kernels shows). */
  uint32_t* binary_kernel;
  uint32_t* binary_unique;
  size_t binary_count;
} kfs_source;

/* One inode as the requests see it, filled by kfs_tree_node(). */
typedef struct kfs_node {
  uint8_t kind;      /* a kfs_kind */
  uint32_t source;   /* kernels: whose kernel; dirs: the earliest below */
  fuse_ino_t parent; /* for ".." */
  uint32_t nlink;    /* dirs: 2 + subdirectories */
  /* Kernels and the files beside them: */
  const char* binary; /* TOC strings, owned by the archive */
  const char* arch;
  uint64_t size;   /* kernels: decompressed size from the TOC;
                      toc-metadata.msgpack: the map's size */
  uint32_t render; /* render slot, below kfs_tree.render_slots */
} kfs_node;

typedef struct kfs_tree_binary kfs_tree_binary;
typedef struct kfs_tree_dir kfs_tree_dir;
typedef struct kfs_listing kfs_listing;
typedef struct kfs_merged kfs_merged;

typedef struct kfs_tree {
  kfs_source* sources;
  size_t source_count;
  char* archives_text; /* .kpackfs/archives */
  size_t archives_size;
  struct timespec newest_mtime;
  uint64_t kernel_bytes; /* sum of kernel sizes, for statfs */
  size_t inodes;         /* for statfs */
  size_t binaries;
  size_t kernels;
  size_t skipped;      /* unsafe or conflicting names */
  size_t shadowed;     /* hidden by an earlier source (first source wins) */
  size_t render_slots; /* kfs_node.render is below this */
  uint64_t opened_ns;  /* kfs_clock_ns() when every TOC was read and checked */
  uint64_t built_ns;   /* and when the tree was built */

  /* The tree is derived from the sources (tree.c): */
  kfs_tree_binary* unique; /* binary paths, in path order ('/' first) */
  size_t unique_count;
  uint32_t* contributors; /* per unique binary: source, binary index */
  kfs_tree_dir* dirs;     /* dirs[0] is the root; dirs[d] is inode 4 + d */
  size_t dir_count;
  uint32_t* subdirs;        /* each dir's subdirectories, sorted by name */
  uint32_t root_meta_index; /* where .kpackfs sorts among the root's */
  uint8_t* shown;           /* bitmap by global kernel: names are safe */
  size_t kernel_total;      /* global kernels, every source */
  fuse_ino_t kernel_ino;    /* inode of global kernel 0's arch directory */
  char* names;              /* inner path components */
  /* Only where a binary path runs through another binary's directory: */
  kfs_merged* merged;  /* arch directories that are also path directories */
  size_t merged_count; /* sorted by kernel */
  uint8_t* omitted;    /* by global kernel: files left out, bit per slot */
  /* Binary directories' entries, made on first use (write-once). */
  _Atomic(kfs_listing*)* listings;
} kfs_tree;

/* Opens every archive (each TOC validated) and builds the tree. A source
 * that does not open is fatal: "kpackfs: PATH: KPACK_ERROR_..." on stderr
 * and -1. Names that cannot be paths are skipped with a warning on stderr.
 * On failure the tree is freed. */
int kfs_tree_build(kfs_tree* tree, const kfs_paths* paths);
void kfs_tree_free(kfs_tree* tree);

/* The inode `ino`: true with *node filled, false if there is none. */
bool kfs_tree_node(const kfs_tree* tree, fuse_ino_t ino, kfs_node* node);

/* The `kernels` file of render slot `slot` (a kernel of the sources):
 * true with *node filled, false when that kernel shows none (its name is
 * skipped or shadowed, or it is no code object). */
bool kfs_tree_text_node(const kfs_tree* tree, uint32_t slot, kfs_node* node);

/* The child of directory `parent` called `name`: 0 with *ino set (0 if
 * there is none), -ENOTDIR, or -ENOMEM (a directory's entries could not be
 * made). */
int kfs_tree_lookup(const kfs_tree* tree, fuse_ino_t parent, const char* name,
                    fuse_ino_t* ino);

/* Entry `index` of directory `dir`, in byte-wise name order ("." and ".."
 * not included): 1 with *ino and *name (valid while the tree lives), 0 past
 * the last, -ENOTDIR or -ENOMEM. */
int kfs_tree_entry(const kfs_tree* tree, fuse_ino_t dir, size_t index,
                   fuse_ino_t* ino, const char** name);

#endif /* KPACKFS_TREE_H */
