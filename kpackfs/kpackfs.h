/* SPDX-License-Identifier: MIT
 *
 * kpackfs internals. sources.c turns SOURCE arguments into archive paths,
 * tree.c opens the archives and builds the immutable inode table, render.c
 * turns a kernel's code object into the text of its `kernels` and
 * `metadata.json` files, ops.c answers the FUSE low-level requests from the
 * table, the shared kernel cache and the renders, and main.c parses options
 * and runs the session.
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

/* ---- sources.c ----------------------------------------------------------- */

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
 * /etc/fstab form); empty items are dropped, and a list with none at all
 * (":", "::") is refused. Returns 0, or -1 after a message on stderr. */
int kfs_paths_add_source(kfs_paths* paths, const char* source);
void kfs_paths_free(kfs_paths* paths);

/* ---- tree.c ------------------------------------------------------------- */

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

/* ---- render.c ------------------------------------------------------------ */

/* What a kernel's code object shows as files and attributes, built on the
 * first request that needs it and immutable afterwards. */
typedef struct kfs_render {
  /* Both texts, and for the attributes the target (NULL when the bytes are
   * not a code object: no attribute) and the kernel count. */
  kpack_co_render_t text;
  /* render.c's bookkeeping, under kfs_renders.lock */
  uint32_t refs;
  uint32_t slot;
  size_t bytes;
  struct kfs_render* lru_prev;
  struct kfs_render* lru_next;
} kfs_render;

typedef struct kfs_render_slot kfs_render_slot;

/* The renders of every kernel, kept within a byte budget: released ones
 * stay in LRU order until the budget is exceeded (the page cache keeps what
 * was read anyway; this bridges closes, xattr lookups and evicted pages).
 * Sizes, once known, are remembered for good, so `stat` never renders. */
typedef struct kfs_renders {
  pthread_mutex_t lock; /* protects everything below and each slot */
  pthread_cond_t done;  /* a render finished (single flight per kernel) */
  kfs_render_slot* slots;
  size_t count;
  kfs_render* lru; /* released renders, most recent first (circular) */
  uint64_t budget;
  uint64_t bytes;    /* held, pinned or not */
  uint64_t renders;  /* renders built */
  uint64_t failures; /* renders that failed (the kernel unreadable...) */
} kfs_renders;

#define KFS_RENDER_BUDGET (8ull << 20)

/* Built once before mounting, read-only afterwards: requests read it from
 * any thread without a lock. The exception is `renders`, which has its own
 * lock (render.c). */
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
  size_t skipped;      /* unsafe or conflicting names */
  size_t shadowed;     /* hidden by an earlier source (first source wins) */
  kfs_renders renders; /* one slot per kernel file */
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
  struct fuse_session* session; /* for invalidations; set before mounting */
  bool no_opendir;              /* set once by init: the kernel skips OPENDIR */
  atomic_uint_fast64_t opens;   /* kernel files opened */
  atomic_uint_fast64_t read_requests; /* kernel reads the daemon served */
  atomic_uint_fast64_t read_errors;   /* first reads refused (EIO...) */
} kfs_fs;

extern const struct fuse_lowlevel_ops kfs_ops;

/* After the session loop has returned: closes every file the kernel never
 * released, unpinning its kernel, so the cache can be destroyed. */
void kfs_close_open_files(kfs_fs* fs);

/* ---- render.c, continued ------------------------------------------------- */

/* One slot per kernel file; called by kfs_tree_build once the tree is
 * complete, and by kfs_tree_free. 0 or -ENOMEM. */
int kfs_renders_init(kfs_renders* renders, size_t count, uint64_t budget);
void kfs_renders_free(kfs_renders* renders);

/* The size of text file `n` (KFS_KERNELS or KFS_METADATA) if its kernel was
 * ever rendered; false otherwise. Never renders. */
bool kfs_render_size(kfs_renders* renders, const kfs_node* n, uint64_t* size);

/* The render of the kernel behind node `n` (a kernel or one of its text
 * files), built on a miss: the kernel is taken from the shared kernel cache
 * (decompressed at most once however many threads ask) and read with
 * kpack_code_object_parse(). Concurrent misses for one kernel build it
 * once. Pinned until kfs_render_release(). Bytes that are not a code
 * object render too, as empty texts without a target. Statuses: the kernel
 * cache's (the kernel cannot be read), OUT_OF_MEMORY; a failure is not
 * remembered. */
kpack_error_t kfs_render_acquire(kfs_fs* fs, const kfs_node* n,
                                 kfs_render** render);
void kfs_render_release(kfs_renders* renders, kfs_render* render);

/* Telling the kernel the real size of text file `n` (ops.c, open_text),
 * once per file. begin returns false when that is done, after waiting for
 * another thread that is doing it; true makes the caller the one to do it,
 * who then calls end with whether it succeeded (if not, a later caller
 * tries again). */
bool kfs_render_announce_begin(kfs_renders* renders, const kfs_node* n);
void kfs_render_announce_end(kfs_renders* renders, const kfs_node* n,
                             bool announced);

/* Appends "renders=N\nrender_bytes=N\n" style lines for .kpackfs/stats. */
int kfs_render_stats(kfs_renders* renders, char** text);

#endif /* KPACKFS_H */
