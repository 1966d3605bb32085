/* SPDX-License-Identifier: MIT
 *
 * The eager tree, for mounts where a binary path runs through another
 * binary's directory: every directory and file built at mount into an
 * inode table with a (parent, name) hash, in the order the sources list
 * their kernels, which decides what wins when a name would be both a file
 * and a directory. Inode numbers follow that order, which depends only on
 * the sources. Real installs never take this path (tree.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tree.h"

/* One inode of the table. */
typedef struct kfs_enode {
  const char* name;
  uint32_t parent;
  uint32_t source;
  uint8_t kind;
  bool holds_kernels; /* a binary directory (counted in stats) */
  uint32_t render;
  union {
    struct {
      uint32_t nlink;
      uint32_t child_first;
      uint32_t child_count;
    };
    struct {
      const char* binary;
      const char* arch;
      uint64_t size;
    };
  };
} kfs_enode;

typedef struct kfs_arena_chunk kfs_arena_chunk;

struct kfs_eager {
  kfs_tree* tree;   /* sources, counters and warnings */
  kfs_enode* nodes; /* nodes[ino]; nodes[0] is unused */
  size_t node_count;
  size_t node_cap;
  uint32_t* children;
  uint32_t* slots; /* open-addressing (parent, name) -> ino; 0 is empty */
  size_t slot_mask;
  kfs_arena_chunk* arena; /* names that are not TOC strings */
};

/* ---- name arena ---------------------------------------------------------- */

#define KFS_ARENA_CHUNK 65536u

struct kfs_arena_chunk {
  kfs_arena_chunk* next;
  size_t used;
  size_t cap;
  char data[];
};

static const char* arena_strndup(kfs_eager* t, const char* s, size_t n) {
  kfs_arena_chunk* c = t->arena;
  if (c == NULL || c->cap - c->used < n + 1) {
    size_t cap = n + 1 > KFS_ARENA_CHUNK ? n + 1 : KFS_ARENA_CHUNK;
    c = malloc(sizeof(*c) + cap);
    if (c == NULL)
      return NULL;
    c->next = t->arena;
    c->used = 0;
    c->cap = cap;
    t->arena = c;
  }
  char* p = c->data + c->used;
  memcpy(p, s, n);
  p[n] = '\0';
  c->used += n + 1;
  return p;
}

/* ---- (parent, name) -> ino hash ------------------------------------------ */

static uint64_t name_hash(fuse_ino_t parent, const char* name) {
  uint64_t h =
      0xcbf29ce484222325ull ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull);
  for (const unsigned char* p = (const unsigned char*)name; *p; p++)
    h = (h ^ *p) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static fuse_ino_t find(const kfs_eager* t, fuse_ino_t parent,
                       const char* name) {
  size_t i = (size_t)name_hash(parent, name) & t->slot_mask;
  for (;; i = (i + 1) & t->slot_mask) {
    uint32_t ino = t->slots[i];
    if (ino == 0)
      return 0;
    const kfs_enode* n = &t->nodes[ino];
    if (n->parent == parent && strcmp(n->name, name) == 0)
      return ino;
  }
}

static void slot_put(uint32_t* slots, size_t mask, const kfs_enode* n,
                     uint32_t ino) {
  size_t i = (size_t)name_hash(n->parent, n->name) & mask;
  while (slots[i] != 0)
    i = (i + 1) & mask;
  slots[i] = ino;
}

/* Keeps the table at most half full so probes stay short. */
static int slots_reserve(kfs_eager* t, size_t nodes) {
  size_t want = t->slot_mask + 1;
  if (t->slots != NULL && nodes * 2 <= want)
    return 0;
  while (nodes * 2 > want)
    want *= 2;
  uint32_t* slots = calloc(want, sizeof(*slots));
  if (slots == NULL)
    return -ENOMEM;
  for (size_t ino = 2; ino < t->node_count; ino++)
    slot_put(slots, want - 1, &t->nodes[ino], (uint32_t)ino);
  free(t->slots);
  t->slots = slots;
  t->slot_mask = want - 1;
  return 0;
}

/* ---- nodes --------------------------------------------------------------- */

/* Appends a node; returns its inode number, or 0 when out of memory. The
 * placeholder (0) and the root (1) are not hashed: they have no parent. */
static fuse_ino_t node_add(kfs_eager* t, fuse_ino_t parent, const char* name,
                           kfs_kind kind, uint32_t source) {
  if (t->node_count >= UINT32_MAX)
    return 0;
  kfs_enode* nodes =
      kfs_grow(t->nodes, t->node_count, &t->node_cap, sizeof(*nodes), 1024);
  if (nodes == NULL)
    return 0;
  t->nodes = nodes;
  fuse_ino_t ino = t->node_count++;
  kfs_enode* n = &t->nodes[ino];
  *n = (kfs_enode){
      .name = name, .parent = (uint32_t)parent, .kind = kind, .source = source};
  if (kind == KFS_DIR)
    n->nlink = 2;
  if (ino > KFS_INO_ROOT) {
    if (slots_reserve(t, t->node_count) != 0) {
      t->node_count--;
      return 0;
    }
    slot_put(t->slots, t->slot_mask, n, (uint32_t)ino);
  }
  return ino;
}

/* The directory `name` (n bytes, a checked component of at most 255) under
 * `parent`, created if absent. Returns 0 with *conflict set when a file
 * already has that name, or 0 alone when out of memory. *fresh says on
 * entry that `parent` was created by this build step, so it is empty and
 * has nothing to look up, and on return whether the directory is new. */
static fuse_ino_t dir_get(kfs_eager* t, fuse_ino_t parent, const char* name,
                          size_t n, uint32_t source, bool* fresh,
                          bool* conflict) {
  if (!*fresh) {
    char key[256];
    memcpy(key, name, n);
    key[n] = '\0';
    fuse_ino_t ino = find(t, parent, key);
    if (ino != 0) {
      *conflict = t->nodes[ino].kind != KFS_DIR;
      return *conflict ? 0 : ino;
    }
  }
  *fresh = true;
  /* An arch, or the last component of a binary path, is a whole TOC string
   * that the archive keeps: only inner components need a copy. */
  const char* copy = name[n] == '\0' ? name : arena_strndup(t, name, n);
  return copy != NULL ? node_add(t, parent, copy, KFS_DIR, source) : 0;
}

/* ---- building ------------------------------------------------------------ */

/* A file `name` beside kernel node `kernel` in `dir`, serving that
 * kernel's binary and arch: *file is the new node, or NULL when another
 * entry already took the name (a directory, from a binary "x#0/gfx90a"
 * with arch "kernels"), which stays that entry's, with a warning. */
static int add_beside(kfs_eager* t, fuse_ino_t dir, fuse_ino_t kernel,
                      bool fresh, const char* name, kfs_kind kind,
                      kfs_enode** file) {
  const kfs_enode* k = &t->nodes[kernel];
  *file = NULL;
  if (!fresh && find(t, dir, name) != 0) {
    fprintf(stderr,
            "kpackfs: warning: %s: '%s' arch '%s': no '%s' file, the name "
            "is taken\n",
            t->tree->sources[k->source].path, k->binary, k->arch, name);
    return 0;
  }
  fuse_ino_t ino = node_add(t, dir, name, kind, k->source);
  if (ino == 0)
    return -ENOMEM;
  k = &t->nodes[kernel]; /* node_add may have moved the table */
  *file = &t->nodes[ino];
  (*file)->binary = k->binary;
  (*file)->arch = k->arch;
  return 0;
}

/* Beside a code object, the text files rendered from it (render.c). */
static int add_text_files(kfs_eager* t, fuse_ino_t dir, fuse_ino_t kernel,
                          bool fresh) {
  static const struct {
    const char* name;
    kfs_kind kind;
  } files[] = {{KPACK_LAYOUT_KERNELS_FILE, KFS_KERNELS},
               {KPACK_LAYOUT_METADATA_FILE, KFS_METADATA}};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    kfs_enode* n;
    int rc =
        add_beside(t, dir, kernel, fresh, files[i].name, files[i].kind, &n);
    if (rc != 0)
      return rc;
    if (n != NULL)
      n->render = t->nodes[kernel].render;
  }
  return 0;
}

/* Beside a kernel whose TOC entry has a metadata map, the map's exact
 * bytes, sized from the TOC (held in memory: nothing is read to serve
 * it), so that a mounted tree re-packs with its maps. */
static int add_toc_metadata(kfs_eager* t, fuse_ino_t dir, fuse_ino_t kernel,
                            bool fresh) {
  const kfs_enode* k = &t->nodes[kernel];
  const void* map = NULL;
  size_t size = 0;
  kpack_get_entry_metadata(t->tree->sources[k->source].archive, k->binary,
                           k->arch, &map, &size);
  if (map == NULL)
    return 0;
  kfs_enode* n;
  int rc = add_beside(t, dir, kernel, fresh, KPACK_LAYOUT_TOC_METADATA_FILE,
                      KFS_TOC_METADATA, &n);
  if (n != NULL)
    n->size = size;
  return rc;
}

/* "kernel." + type: one shared string for the usual type. */
static const char* kernel_file_name(kfs_eager* t, const char* type) {
  static const char hsaco[] = KPACK_LAYOUT_KERNEL_PREFIX "hsaco";
  if (strcmp(type, "hsaco") == 0)
    return hsaco;
  char name[KPACK_LAYOUT_NAME_MAX + 1];
  if (kpack_layout_kernel_file(type, name, sizeof(name)) != KPACK_SUCCESS)
    return NULL; /* kpack_layout_entry_problem() let no such type through */
  return arena_strndup(t, name, strlen(name));
}

/* The directory of `binary`, its path components created as needed; 0 with
 * *conflict set when a component is already a file, 0 alone when out of
 * memory. *fresh says whether the directory is new. */
static fuse_ino_t binary_dir_get(kfs_eager* t, uint32_t source,
                                 const char* binary, bool* fresh,
                                 bool* conflict) {
  fuse_ino_t dir = KFS_INO_ROOT;
  *fresh = false; /* below a new directory nothing needs looking up */
  for (const char* p = binary;;) {
    const char* slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    dir = dir_get(t, dir, p, n, source, fresh, conflict);
    if (dir == 0 || slash == NULL)
      return dir;
    p = slash + 1;
  }
}

/* Adds one kernel of `binary`, whose directory *binary_dir is made by the
 * first of its kernels that can be added (0 until then; *binary_fresh then
 * says whether this binary created it), and whose name problem, if any, is
 * `binary_why`. */
static int add_kernel(kfs_eager* t, uint32_t source, const char* binary,
                      const char* binary_why, fuse_ino_t* binary_dir,
                      bool* binary_fresh, const char* arch) {
  kpack_archive_t a = t->tree->sources[source].archive;
  kpack_kernel_info_t info;
  const char* why = binary_why;
  bool conflict = false;

  if (kpack_get_kernel_info(a, binary, arch, &info) != KPACK_SUCCESS)
    return -EIO; /* listed by the archive itself: cannot happen */
  if (why != NULL ||
      (why = kpack_layout_entry_problem(binary, arch, info.type)) != NULL)
    goto skip;
  if (*binary_dir == 0 &&
      (*binary_dir =
           binary_dir_get(t, source, binary, binary_fresh, &conflict)) == 0)
    goto conflict_or_oom;
  /* A directory this binary created holds only its own arches, which the
   * TOC parser keeps unique: nothing to look up there. */
  bool fresh = *binary_fresh;
  fuse_ino_t dir =
      dir_get(t, *binary_dir, arch, strlen(arch), source, &fresh, &conflict);
  if (dir == 0)
    goto conflict_or_oom;

  const char* name = kernel_file_name(t, info.type);
  if (name == NULL)
    return -ENOMEM;
  fuse_ino_t existing = fresh ? 0 : find(t, dir, name);
  if (existing != 0) {
    if (t->nodes[existing].kind == KFS_KERNEL) {
      t->tree->shadowed++; /* an earlier source already has it: first wins */
      return 0;
    }
    conflict = true;
    goto conflict_or_oom;
  }
  fuse_ino_t ino = node_add(t, dir, name, KFS_KERNEL, source);
  if (ino == 0)
    return -ENOMEM;
  kfs_enode* n = &t->nodes[ino];
  n->binary = binary;
  n->arch = arch;
  n->size = info.size;
  n->render = (uint32_t)t->tree->kernels;
  t->tree->kernel_bytes += info.size;
  t->tree->kernels++;
  if (!t->nodes[*binary_dir].holds_kernels) {
    t->nodes[*binary_dir].holds_kernels = true;
    t->tree->binaries++;
  }
  int rc = add_toc_metadata(t, dir, ino, fresh);
  if (rc == 0 && strcmp(info.type, "hsaco") == 0)
    rc = add_text_files(t, dir, ino, fresh);
  return rc;

conflict_or_oom:
  if (!conflict)
    return -ENOMEM;
  why = "a file and a directory would share a path";
skip:
  kfs_warn_skip(t->tree, source, binary, arch, why);
  t->tree->skipped++;
  return 0;
}

static int add_source(kfs_eager* t, uint32_t source) {
  kpack_archive_t a = t->tree->sources[source].archive;
  size_t binaries = 0;
  kpack_get_binary_count(a, &binaries);
  for (size_t i = 0; i < binaries; i++) {
    const char* binary;
    size_t arches = 0;
    fuse_ino_t dir = 0;
    bool fresh = false;
    kpack_get_binary(a, i, &binary);
    kpack_get_binary_arch_count(a, binary, &arches);
    const char* why = kpack_layout_binary_problem(binary);
    for (size_t j = 0; j < arches; j++) {
      const char* arch;
      kpack_get_binary_arch(a, binary, j, &arch);
      int rc = add_kernel(t, source, binary, why, &dir, &fresh, arch);
      if (rc != 0)
        return rc;
    }
  }
  return 0;
}

static int by_name(const void* a, const void* b, void* nodes) {
  const kfs_enode* n = nodes;
  return strcmp(n[*(const uint32_t*)a].name, n[*(const uint32_t*)b].name);
}

/* Gives every directory its sorted slice of `children` and its link count. */
static int index_children(kfs_eager* t) {
  size_t count = t->node_count;
  t->children = malloc((count ? count : 1) * sizeof(*t->children));
  if (t->children == NULL)
    return -ENOMEM;
  /* Only directories have child fields: in other nodes they are kernel
   * data (kfs_enode's union). Every parent is a directory. */
  for (size_t ino = 2; ino < count; ino++) {
    kfs_enode* parent = &t->nodes[t->nodes[ino].parent];
    parent->child_count++;
    if (t->nodes[ino].kind == KFS_DIR)
      parent->nlink++;
  }
  uint32_t next = 0;
  for (size_t ino = 1; ino < count; ino++) {
    kfs_enode* n = &t->nodes[ino];
    if (n->kind != KFS_DIR)
      continue;
    n->child_first = next;
    next += n->child_count;
    n->child_count = 0;
  }
  for (size_t ino = 2; ino < count; ino++) {
    kfs_enode* parent = &t->nodes[t->nodes[ino].parent];
    t->children[parent->child_first + parent->child_count++] = (uint32_t)ino;
  }
  /* Children come in TOC order, which the writers keep sorted: most
   * directories need no sort at all. */
  for (size_t ino = 1; ino < count; ino++) {
    kfs_enode* n = &t->nodes[ino];
    if (n->kind != KFS_DIR || n->child_count < 2)
      continue;
    kfs_sort(&t->children[n->child_first], n->child_count, sizeof(uint32_t),
             by_name, t->nodes);
  }
  return 0;
}

int kfs_eager_build(kfs_tree* tree) {
  kfs_eager* t = calloc(1, sizeof(*t));
  if (t == NULL)
    return -ENOMEM;
  tree->eager = t;
  t->tree = tree;
  /* Sized for what the TOCs promise (an arch directory, the kernel, its
   * two text files and perhaps its metadata map per kernel, a directory per
   * binary), so that neither the table nor its hash grows and rehashes
   * while it fills. */
  size_t expected = 8;
  for (size_t i = 0; i < tree->source_count; i++) {
    size_t kernels = 0, binaries = 0;
    kpack_get_kernel_count(tree->sources[i].archive, &kernels);
    kpack_get_binary_count(tree->sources[i].archive, &binaries);
    expected += 5 * kernels + binaries;
  }
  /* Node 0 is a placeholder so that nodes[ino] needs no offset. */
  t->node_cap = expected;
  t->nodes = calloc(t->node_cap, sizeof(*t->nodes));
  if (t->nodes == NULL || slots_reserve(t, expected) != 0)
    return -ENOMEM;
  t->node_count = 1;
  if (node_add(t, 0, "", KFS_DIR, 0) != KFS_INO_ROOT ||
      node_add(t, KFS_INO_ROOT, KPACK_LAYOUT_RESERVED_DIR, KFS_DIR, 0) !=
          KFS_INO_META ||
      node_add(t, KFS_INO_META, "stats", KFS_STATS, 0) != KFS_INO_STATS ||
      node_add(t, KFS_INO_META, "archives", KFS_ARCHIVES, 0) !=
          KFS_INO_ARCHIVES)
    return -ENOMEM;
  for (uint32_t i = 0; i < tree->source_count; i++) {
    int rc = add_source(t, i);
    if (rc != 0)
      return rc;
  }
  /* The table is final: give back what doubling left unused. */
  kfs_enode* exact = realloc(t->nodes, t->node_count * sizeof(*t->nodes));
  if (exact != NULL) {
    t->nodes = exact;
    t->node_cap = t->node_count;
  }
  tree->inodes = t->node_count - 1;
  tree->render_slots = tree->kernels;
  return index_children(t);
}

void kfs_eager_free(kfs_eager* t) {
  if (t == NULL)
    return;
  free(t->nodes);
  free(t->children);
  free(t->slots);
  while (t->arena != NULL) {
    kfs_arena_chunk* next = t->arena->next;
    free(t->arena);
    t->arena = next;
  }
  free(t);
}

bool kfs_eager_node(const kfs_eager* t, fuse_ino_t ino, kfs_node* out) {
  if (ino < 1 || ino >= t->node_count)
    return false;
  const kfs_enode* n = &t->nodes[ino];
  *out = (kfs_node){.kind = n->kind,
                    .source = n->source,
                    .parent = ino == KFS_INO_ROOT ? ino : n->parent,
                    .render = n->render};
  if (n->kind == KFS_DIR) {
    out->nlink = n->nlink;
  } else {
    out->binary = n->binary;
    out->arch = n->arch;
    out->size = n->size;
  }
  return true;
}

int kfs_eager_lookup(const kfs_eager* t, fuse_ino_t parent, const char* name,
                     fuse_ino_t* ino) {
  *ino = 0;
  if (parent < 1 || parent >= t->node_count)
    return 0;
  if (t->nodes[parent].kind != KFS_DIR)
    return -ENOTDIR;
  *ino = find(t, parent, name);
  return 0;
}

int kfs_eager_entry(const kfs_eager* t, fuse_ino_t dir, size_t index,
                    fuse_ino_t* ino, const char** name) {
  if (dir < 1 || dir >= t->node_count || t->nodes[dir].kind != KFS_DIR)
    return -ENOTDIR;
  const kfs_enode* d = &t->nodes[dir];
  if (index >= d->child_count)
    return 0;
  *ino = t->children[d->child_first + index];
  *name = t->nodes[*ino].name;
  return 1;
}
