/* SPDX-License-Identifier: MIT
 *
 * tree.c: the inode table, built from the archives' TOCs before mounting
 * and read-only afterwards, so that requests read it from any thread
 * without a lock. It owns the open archives (kfs_source) and nothing that
 * changes while mounted.
 */
#ifndef KPACKFS_TREE_H
#define KPACKFS_TREE_H

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

/* Fixed inode numbers; everything else follows in build order. */
#define KFS_INO_ROOT FUSE_ROOT_ID
#define KFS_INO_META 2
#define KFS_INO_STATS 3
#define KFS_INO_ARCHIVES 4

typedef struct kfs_source {
  char* path; /* canonical; what user.kpack.archive reports */
  kpack_archive_t archive;
  struct timespec mtime;
  const char* scheme; /* "none" or "zstd-per-kernel" */
} kfs_source;

/* One inode. Kernel nodes point at strings the archive owns; the files
 * beside a kernel (`kernels`, `metadata.json`, `toc-metadata.msgpack`)
 * carry its source, binary and arch, and the text files its render slot. */
typedef struct kfs_node {
  const char* name;
  uint32_t parent;    /* inode numbers fit 32 bits (tree.c node_add) */
  uint32_t source;    /* kernels: whose kernel; dirs: who created it */
  uint8_t kind;       /* a kfs_kind */
  bool holds_kernels; /* a binary directory (counted in stats) */
  uint32_t render;    /* kernels and their text files: render slot */
  /* What a node needs by kind, overlaid: a large mount has four nodes per
   * kernel, and the table is most of the daemon's memory. */
  union {
    struct {                /* KFS_DIR */
      uint32_t nlink;       /* 2 + subdirectories */
      uint32_t child_first; /* children[child_first ..] sorted by name */
      uint32_t child_count;
    };
    struct {              /* KFS_KERNEL and the files beside it */
      const char* binary; /* TOC binary name */
      const char* arch;   /* TOC arch */
      uint64_t size;      /* kernels: decompressed size from the TOC;
                             toc-metadata.msgpack: the map's size */
    };
  };
} kfs_node;

typedef struct kfs_arena_chunk kfs_arena_chunk;

/* Built once before mounting, read-only afterwards: requests read it from
 * any thread without a lock. */
typedef struct kfs_tree {
  kfs_source* sources;
  size_t source_count;
  kfs_node* nodes; /* nodes[ino]; nodes[0] is unused */
  size_t node_count;
  size_t node_cap;
  uint32_t* children;
  uint32_t* slots; /* open-addressing (parent, name) -> ino; 0 is empty */
  size_t slot_mask;
  kfs_arena_chunk* arena; /* names that are not TOC strings */
  char* archives_text;    /* .kpackfs/archives */
  size_t archives_size;
  struct timespec newest_mtime;
  uint64_t kernel_bytes; /* sum of kernel sizes, for statfs */
  size_t binaries;
  size_t kernels;
  size_t skipped;  /* unsafe or conflicting names */
  size_t shadowed; /* hidden by an earlier source (first source wins) */
} kfs_tree;

/* Opens every archive and builds the tree. A source that does not open is
 * fatal: "kpackfs: PATH: KPACK_ERROR_..." on stderr and -1. Names that
 * cannot be paths are skipped with a warning on stderr. On failure the tree
 * is freed. */
int kfs_tree_build(kfs_tree* tree, const kfs_paths* paths);
void kfs_tree_free(kfs_tree* tree);

/* The child of dir `parent` called `name`; 0 if none. */
fuse_ino_t kfs_tree_lookup(const kfs_tree* tree, fuse_ino_t parent,
                           const char* name);

/* The node for `ino`, or NULL if there is none. */
const kfs_node* kfs_tree_node(const kfs_tree* tree, fuse_ino_t ino);

#endif /* KPACKFS_TREE_H */
