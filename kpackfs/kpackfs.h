/* SPDX-License-Identifier: MIT
 *
 * kpackfs internals. sources.c turns SOURCE arguments into archive paths,
 * tree.c opens the archives and builds the immutable inode table, ops.c
 * answers the FUSE low-level requests from that table and the shared kernel
 * cache, and main.c parses options and runs the session.
 */
#ifndef KPACKFS_H
#define KPACKFS_H

#define FUSE_USE_VERSION 35

#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "rocm_kpack/kpack_ext.h"

#define KPACKFS_VERSION KPACK_VERSION_STRING

/* ---- sources.c ------------------------------------------------------------
 */

/* Archive paths in mount order, canonical and without duplicates. */
typedef struct kfs_paths {
  char** items;
  size_t count;
  size_t cap;
} kfs_paths;

/* Appends the archives one SOURCE argument names: a file as is, a directory
 * as every *.kpack below it (byte-wise name order at each level, hidden
 * directories included, symlinked directories not followed). An argument
 * that is not an existing path but contains ':' is a list of SOURCEs (the
 * /etc/fstab form). Returns 0, or -1 after a message on stderr. */
int kfs_paths_add_source(kfs_paths* paths, const char* source);
void kfs_paths_free(kfs_paths* paths);

/* ---- tree.c ------------------------------------------------------------- */

typedef enum kfs_kind {
  KFS_DIR,
  KFS_KERNEL,
  KFS_STATS,    /* .kpackfs/stats: rendered at each open */
  KFS_ARCHIVES, /* .kpackfs/archives: fixed at mount */
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

/* One inode. Kernel nodes point at strings the archive owns. */
typedef struct kfs_node {
  const char* name;
  fuse_ino_t parent;
  kfs_kind kind;
  uint32_t source;      /* kernels: whose kernel; dirs: who created it */
  bool holds_kernels;   /* a binary directory (counted in stats) */
  uint32_t nlink;       /* dirs: 2 + subdirectories */
  uint32_t child_first; /* dirs: children[child_first ..] sorted by name */
  uint32_t child_count;
  const char* binary; /* kernels: TOC binary name */
  const char* arch;   /* kernels: TOC arch */
  uint64_t size;      /* kernels: decompressed size from the TOC */
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
  fuse_ino_t* children;
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

/* ---- ops.c -------------------------------------------------------------- */

struct kfs_handle;

/* Everything the request handlers share; fuse userdata. */
typedef struct kfs_fs {
  kfs_tree tree;
  kpack_kcache_t* cache;
  /* `handles_lock` protects the list of open files, which outlive the
   * session when it ends with files still open (SIGTERM, lazy unmount). */
  pthread_mutex_t handles_lock;
  struct kfs_handle* handles;
  uid_t uid;
  gid_t gid;
  bool no_opendir;            /* set once by init: the kernel skips OPENDIR */
  atomic_uint_fast64_t opens; /* kernel files opened */
  atomic_uint_fast64_t read_requests; /* kernel reads the daemon served */
  atomic_uint_fast64_t read_errors;   /* first reads refused (EIO...) */
} kfs_fs;

extern const struct fuse_lowlevel_ops kfs_ops;

/* After the session loop has returned: closes every file the kernel never
 * released, unpinning its kernel, so the cache can be destroyed. */
void kfs_close_open_files(kfs_fs* fs);

#endif /* KPACKFS_H */
