/* SPDX-License-Identifier: MIT
 *
 * The mount's tree, derived from the open archives (docs/mount.md, "How
 * kpackfs holds a tree"). At mount: every source opened, every kernel's
 * names checked (warnings for those skipped), the binary paths merged into
 * one sorted list and their directories made. Below a binary directory
 * nothing is stored: an arch directory and the files in it are numbered by
 * their kernel and answered from the archive's TOC, and a binary
 * directory's entries (its arches across the sources, first source wins)
 * are made when it is first looked up or listed. A binary path may run
 * through another binary's directory (only hostile TOCs do that): the
 * directories where the two meet list both, and a name that would be both
 * a file and a directory is settled at mount by source order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tree.h"

/* A binary path shown in the mount, merged across the sources. */
struct kfs_tree_binary {
  const char* name; /* the first contributing source's string */
  uint32_t first;   /* contributors[2 * first ..]: (source, binary) pairs */
  uint32_t count;   /* in source order */
  uint32_t source;  /* the first source with a kernel shown */
  uint32_t arches;  /* arch directories shown; 0: the binary is not shown */
  uint32_t dir;     /* its directory */
};

/* A directory of the binary paths: the root, the inner components of
 * binary paths and the binary directories (above the arch directories,
 * but where binary paths nest one can be an arch directory too). dirs[d]
 * is inode 4 + d, the root (d = 0) inode 1. */
struct kfs_tree_dir {
  const char* name; /* the component */
  uint32_t parent;
  uint32_t source; /* the first source with a kernel below */
  uint32_t nlink;
  uint32_t sub_first; /* subdirs[sub_first .. + sub_count] */
  uint32_t sub_count;
  uint32_t binary; /* unique[binary] for a binary directory, else NONE */
  /* When the directory is also an arch directory of its parent binary
   * directory: the kernel whose files it holds, else NONE. */
  uint32_t arch_kernel;
};

/* An arch directory that is also a directory of a binary path: the kernel
 * and the directory that serves it. */
struct kfs_merged {
  uint32_t kernel;
  uint32_t dir;
};

/* A binary directory's entries: its arches in byte-wise order, each with
 * the global kernel that shows it. Where binary paths nest, a directory
 * that holds more than arches lists its files and subdirectories too. */
enum { ENTRY_ARCH, ENTRY_DIR, ENTRY_FILE };
typedef struct kfs_listing_entry {
  const char* name;
  uint32_t id;  /* ENTRY_DIR: a directory; otherwise a global kernel */
  uint8_t what; /* ENTRY_* */
  uint8_t slot; /* ENTRY_FILE: which of the kernel's files */
} kfs_listing_entry;

struct kfs_listing {
  size_t count;
  kfs_listing_entry entries[];
};

#define NONE UINT32_MAX
/* Inodes below a binary directory: five per kernel, in this order. */
enum { SLOT_ARCH, SLOT_KERNEL, SLOT_KERNELS, SLOT_JSON, SLOT_MAP, SLOTS };

static const char* const kernels_file = KPACK_LAYOUT_KERNELS_FILE;
static const char* const json_file = KPACK_LAYOUT_METADATA_FILE;
static const char* const map_file = KPACK_LAYOUT_TOC_METADATA_FILE;

/* ---- names --------------------------------------------------------------- */

/* The rules are the layout's (rocm_kpack/kpack_layout.h), shared with
 * `kpack extract`. Checking 252,000 kernels, the binary is checked once per
 * binary, and an arch or type already found good is not checked again:
 * libkpack keeps one string per distinct name in an archive, so the good
 * ones are remembered by address, a few of each (a binary's arches come
 * round again for the next binary). */
enum { GOOD_NAMES = 8 };
typedef struct name_check {
  const char* good_arch[GOOD_NAMES];
  const char* good_type[GOOD_NAMES];
  unsigned next_arch, next_type;
} name_check;

static bool among(const char* const* names, const char* name) {
  for (size_t i = 0; name != NULL && i < GOOD_NAMES; i++)
    if (names[i] == name)
      return true;
  return false;
}

static const char* kernel_problem(name_check* nc, const char* binary,
                                  const char* binary_why, const char* arch,
                                  const char* type) {
  if (binary_why != NULL)
    return binary_why;
  bool arch_good = among(nc->good_arch, arch);
  bool type_good = among(nc->good_type, type);
  if (arch_good && type_good)
    return NULL;
  const char* why = kpack_layout_entry_problem(binary, arch, type);
  if (why == NULL) {
    if (!arch_good)
      nc->good_arch[nc->next_arch++ % GOOD_NAMES] = arch;
    if (!type_good)
      nc->good_type[nc->next_type++ % GOOD_NAMES] = type;
  }
  return why;
}

static void warn_skip(const kfs_tree* t, uint32_t source, const char* binary,
                      const char* arch, const char* why) {
  fprintf(stderr, "kpackfs: warning: %s: skipping '%s' arch '%s': %s\n",
          t->sources[source].path, binary, arch, why);
}

/* ---- kernels by global number -------------------------------------------- */

/* Kernels are numbered across the sources in mount order, each archive's in
 * its own order (binaries by name, then arches). */

typedef struct kernel_ref {
  uint32_t source;
  size_t binary_index;
  const char* binary;
  const char* arch;
  kpack_kernel_info_t info;
  const void* map; /* the entry's metadata map, or NULL */
  size_t map_size;
} kernel_ref;

static bool is_shown(const kfs_tree* t, uint32_t g) {
  return (t->shown[g / 8] >> (g % 8)) & 1;
}

static bool kernel_at(const kfs_tree* t, uint32_t g, kernel_ref* k) {
  if (g >= t->kernel_total || !is_shown(t, g))
    return false;
  size_t lo = 0, hi = t->source_count;
  while (hi - lo > 1) { /* the last source whose first kernel is <= g */
    size_t mid = lo + (hi - lo) / 2;
    if (t->sources[mid].binary_kernel[0] <= g)
      lo = mid;
    else
      hi = mid;
  }
  const kfs_source* s = &t->sources[lo];
  size_t bl = 0, bh = s->binary_count;
  while (bh - bl > 1) {
    size_t mid = bl + (bh - bl) / 2;
    if (s->binary_kernel[mid] <= g)
      bl = mid;
    else
      bh = mid;
  }
  kpack_kernel_entry_t e;
  if (kpack_get_kernel_entry(s->archive, bl, g - s->binary_kernel[bl], &e) !=
      KPACK_SUCCESS)
    return false;
  k->source = (uint32_t)lo;
  k->binary_index = bl;
  k->binary = e.binary;
  k->arch = e.arch;
  k->info = e.info;
  k->map = e.metadata;
  k->map_size = e.metadata_size;
  return true;
}

static bool is_code_object(const kernel_ref* k) {
  return strcmp(k->info.type, "hsaco") == 0;
}

/* ---- a binary directory's entries ---------------------------------------- */

/* What the mount learns of a kernel while it checks names, so that
 * counting need not ask the archive again. Held only while building. */
typedef struct kernel_facts {
  const char* arch;
  uint64_t size;
  bool code_object; /* type "hsaco": kernels and metadata.json beside it */
  bool map;         /* a metadata map: toc-metadata.msgpack beside it */
} kernel_facts;

static int by_arch(const void* a, const void* b, void* unused) {
  (void)unused;
  const kfs_listing_entry* x = a;
  const kfs_listing_entry* y = b;
  int c = strcmp(x->name, y->name);
  /* Global numbers follow the sources: the first source sorts first. */
  return c != 0 ? c : (x->id > y->id) - (x->id < y->id);
}

/* The arches of unique binary u across its sources, sorted, the first
 * source's kernel kept for each; *shadowed counts the others. `facts`,
 * while building, saves asking the archives for arch names. */
static int make_listing(const kfs_tree* t, uint32_t u,
                        const kernel_facts* facts, kfs_listing** out,
                        size_t* shadowed) {
  const kfs_tree_binary* b = &t->unique[u];
  size_t n = 0;
  for (uint32_t c = 0; c < b->count; c++) {
    const kfs_source* s = &t->sources[t->contributors[2 * (b->first + c)]];
    size_t i = t->contributors[2 * (b->first + c) + 1];
    n += s->binary_kernel[i + 1] - s->binary_kernel[i];
  }
  kfs_listing* l = malloc(sizeof(*l) + (n ? n : 1) * sizeof(l->entries[0]));
  if (l == NULL)
    return -ENOMEM;
  l->count = 0;
  for (uint32_t c = 0; c < b->count; c++) {
    const kfs_source* s = &t->sources[t->contributors[2 * (b->first + c)]];
    size_t i = t->contributors[2 * (b->first + c) + 1];
    for (uint32_t g = s->binary_kernel[i]; g < s->binary_kernel[i + 1]; g++) {
      const char* arch;
      kpack_kernel_entry_t e;
      if (!is_shown(t, g))
        continue;
      if (facts != NULL)
        arch = facts[g].arch;
      else if (kpack_get_kernel_entry(s->archive, i, g - s->binary_kernel[i],
                                      &e) == KPACK_SUCCESS)
        arch = e.arch;
      else
        continue;
      l->entries[l->count++] =
          (kfs_listing_entry){.name = arch, .id = g, .what = ENTRY_ARCH};
    }
  }
  /* One source's arches come sorted; most binaries have one source. */
  kfs_sort(l->entries, l->count, sizeof(l->entries[0]), by_arch, NULL);
  size_t kept = 0;
  for (size_t i = 0; i < l->count; i++) {
    if (kept > 0 && strcmp(l->entries[kept - 1].name, l->entries[i].name) == 0)
      continue; /* an earlier source already has it: first wins */
    l->entries[kept++] = l->entries[i];
  }
  *shadowed = l->count - kept;
  l->count = kept;
  *out = l;
  return 0;
}

/* ---- inode numbers ------------------------------------------------------- */

static fuse_ino_t dir_ino(uint32_t d) {
  return d == 0 ? KFS_INO_ROOT : (fuse_ino_t)d + 4;
}

/* The directory behind `ino`, or NONE. */
static uint32_t ino_dir(const kfs_tree* t, fuse_ino_t ino) {
  if (ino == KFS_INO_ROOT)
    return 0;
  if (ino > 4 && ino - 4 < t->dir_count)
    return (uint32_t)(ino - 4);
  return NONE;
}

static fuse_ino_t kernel_ino(const kfs_tree* t, uint32_t g, unsigned slot) {
  return t->kernel_ino + (fuse_ino_t)g * SLOTS + slot;
}

/* The kernel and slot behind `ino`; false if it is not below an arch
 * directory. */
static bool ino_kernel(const kfs_tree* t, fuse_ino_t ino, uint32_t* g,
                       unsigned* slot) {
  if (ino < t->kernel_ino || (ino - t->kernel_ino) / SLOTS >= t->kernel_total)
    return false;
  *g = (uint32_t)((ino - t->kernel_ino) / SLOTS);
  *slot = (unsigned)((ino - t->kernel_ino) % SLOTS);
  return true;
}

/* Whether kernel k (number g) has the file in `slot` beside it. */
static bool has_slot(const kfs_tree* t, uint32_t g, const kernel_ref* k,
                     unsigned slot) {
  if (t->omitted != NULL && (t->omitted[g] >> slot) & 1)
    return false; /* a directory took its name */
  if (slot == SLOT_KERNELS || slot == SLOT_JSON)
    return is_code_object(k);
  if (slot == SLOT_MAP)
    return k->map != NULL;
  return true;
}

/* The arch directory of kernel g, when a binary path's directory is the
 * same directory: that directory, else NONE. */
static uint32_t merged_dir(const kfs_tree* t, uint32_t g) {
  size_t lo = 0, hi = t->merged_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->merged[mid].kernel == g)
      return t->merged[mid].dir;
    if (t->merged[mid].kernel < g)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NONE;
}

/* "kernel." + type, in `buf` (a type the layout let through fits). */
static const char* kernel_file_name(const kernel_ref* k, char* buf,
                                    size_t cap) {
  if (kpack_layout_kernel_file(k->info.type, buf, cap) != KPACK_SUCCESS)
    buf[0] = '\0';
  return buf;
}

/* Whether directory d holds more than arches or subdirectories: a binary
 * directory with subdirectories, or an arch directory that is also a
 * directory of a binary path. */
static bool is_mixed(const kfs_tree* t, uint32_t d) {
  const kfs_tree_dir* dir = &t->dirs[d];
  return dir->arch_kernel != NONE ||
         (dir->binary != NONE && dir->sub_count > 0);
}

static bool is_subdir(const kfs_tree* t, const kfs_tree_dir* dir,
                      const char* name) {
  const uint32_t* sub = &t->subdirs[dir->sub_first];
  size_t lo = 0, hi = dir->sub_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, t->dirs[sub[mid]].name);
    if (c == 0)
      return true;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return false;
}

static int by_name(const void* a, const void* b, void* unused) {
  (void)unused;
  return strcmp(((const kfs_listing_entry*)a)->name,
                ((const kfs_listing_entry*)b)->name);
}

/* The entries of a mixed directory: the files of the kernel it is the arch
 * directory of, the arches of its binary, its subdirectories. An arch
 * named like a subdirectory is that subdirectory (merged at mount); a name
 * that would be a file and a directory was settled at mount. The kernel
 * file's name is kept after the entries. */
static int make_mixed_listing(const kfs_tree* t, uint32_t d,
                              kfs_listing** out) {
  const kfs_tree_dir* dir = &t->dirs[d];
  kfs_listing* arches = NULL;
  size_t shadowed;
  if (dir->binary != NONE) {
    int rc = make_listing(t, dir->binary, NULL, &arches, &shadowed);
    if (rc != 0)
      return rc;
  }
  size_t n = SLOTS + dir->sub_count + (arches ? arches->count : 0);
  size_t at = sizeof(kfs_listing) + n * sizeof(kfs_listing_entry);
  kfs_listing* l = malloc(at + KPACK_LAYOUT_NAME_MAX + 1);
  if (l == NULL) {
    free(arches);
    return -ENOMEM;
  }
  l->count = 0;
  kernel_ref k;
  uint32_t g = dir->arch_kernel;
  if (g != NONE && kernel_at(t, g, &k)) {
    static const char* const names[] = {NULL, NULL, KPACK_LAYOUT_KERNELS_FILE,
                                        KPACK_LAYOUT_METADATA_FILE,
                                        KPACK_LAYOUT_TOC_METADATA_FILE};
    char* kernel_name = (char*)l + at;
    kernel_file_name(&k, kernel_name, KPACK_LAYOUT_NAME_MAX + 1);
    for (unsigned slot = SLOT_KERNEL; slot < SLOTS; slot++)
      if (has_slot(t, g, &k, slot))
        l->entries[l->count++] = (kfs_listing_entry){
            .name = slot == SLOT_KERNEL ? kernel_name : names[slot],
            .id = g,
            .what = ENTRY_FILE,
            .slot = (uint8_t)slot};
  }
  for (size_t i = 0; arches != NULL && i < arches->count; i++)
    if (!is_subdir(t, dir, arches->entries[i].name))
      l->entries[l->count++] = arches->entries[i];
  for (uint32_t i = 0; i < dir->sub_count; i++) {
    uint32_t sub = t->subdirs[dir->sub_first + i];
    l->entries[l->count++] = (kfs_listing_entry){
        .name = t->dirs[sub].name, .id = sub, .what = ENTRY_DIR};
  }
  free(arches);
  kfs_sort(l->entries, l->count, sizeof(l->entries[0]), by_name, NULL);
  *out = l;
  return 0;
}

/* The entries of directory d (a binary directory, or one where binary
 * paths nest), made on first use. Threads racing for it may each make it;
 * the first to publish wins. */
static int listing(const kfs_tree* t, uint32_t d, const kfs_listing** out) {
  kfs_listing* l = atomic_load_explicit(&t->listings[d], memory_order_acquire);
  if (l == NULL) {
    size_t shadowed;
    kfs_listing* made;
    int rc = is_mixed(t, d)
                 ? make_mixed_listing(t, d, &made)
                 : make_listing(t, t->dirs[d].binary, NULL, &made, &shadowed);
    if (rc != 0)
      return rc;
    if (atomic_compare_exchange_strong_explicit(&t->listings[d], &l, made,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
      l = made;
    else
      free(made); /* l is the one another thread published */
  }
  *out = l;
  return 0;
}

/* ---- building ------------------------------------------------------------ */

static size_t hash_name(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char* p = (const unsigned char*)s; *p; p++)
    h = (h ^ *p) * 0x100000001b3ull;
  return (size_t)(h ^ (h >> 29));
}

/* Where `name` is in the table of 1 + unique index, or the empty slot
 * where it would go. */
static size_t probe(const uint32_t* slots, size_t cap,
                    const kfs_tree_binary* unique, const char* name) {
  size_t h = hash_name(name) & (cap - 1);
  while (slots[h] != 0 && strcmp(unique[slots[h] - 1].name, name) != 0)
    h = (h + 1) & (cap - 1);
  return h;
}

/* A table of 1 + index for unique[0, n), at most a quarter full (so it
 * takes as many names again before the next), in place of *slots. 0 or
 * -ENOMEM, *slots unchanged then. */
static int rehash(uint32_t** slots, size_t* cap, const kfs_tree_binary* unique,
                  size_t n) {
  size_t grown = 64;
  while (grown < 4 * (n + 1))
    grown *= 2;
  uint32_t* table = calloc(grown, sizeof(*table));
  if (table == NULL)
    return -ENOMEM;
  for (uint32_t k = 0; k < n; k++)
    table[probe(table, grown, unique, unique[k].name)] = k + 1;
  free(*slots);
  *slots = table;
  *cap = grown;
  return 0;
}

/* Path order: byte-wise with '/' below every other byte, which is the
 * order of the paths' components. A binary's own directory then comes
 * right before any binary path that runs through it ("a", "a/b", "a-b";
 * byte-wise "a-b" would come between the two). */
static int path_cmp(const char* a, size_t an, const char* b, size_t bn) {
  for (size_t i = 0; i < an && i < bn; i++) {
    int x = a[i] == '/' ? 0 : (unsigned char)a[i];
    int y = b[i] == '/' ? 0 : (unsigned char)b[i];
    if (x != y)
      return x - y;
  }
  return (an > bn) - (an < bn);
}

static int by_unique_name(const void* a, const void* b, void* unused) {
  (void)unused;
  const char* x = ((const kfs_tree_binary*)a)->name;
  const char* y = ((const kfs_tree_binary*)b)->name;
  return path_cmp(x, strlen(x), y, strlen(y));
}

/* Names of every archive's binaries, merged: unique[] sorted by name, each
 * with its contributors in source order. Binaries whose path is unsafe are
 * left out (their kernels are skipped). */
static int merge_binaries(kfs_tree* t) {
  int rc = -ENOMEM;
  /* 1 + first-seen index, at most half full: sized by the names that go
   * in, not by all the sources list (an install's 252,000 are 9,000). */
  size_t cap = 0;
  uint32_t* slots = NULL;
  kfs_tree_binary* unique = NULL; /* grown as names come */
  size_t n = 0, unique_cap = 0, count = 0;
  /* Names go into the hash table only once a source does not simply repeat
   * the binaries of the one before it: a single archive never needs it,
   * an install from its second component on. */
  bool hashed = false;
  for (uint32_t s = 0; s < t->source_count; s++) {
    kfs_source* src = &t->sources[s];
    /* An install's archives of one component, one per arch, list the same
     * binaries: the previous source's binary at the same index is tried
     * before the hash (binary_unique holds first-seen indices until the
     * names are sorted below). */
    const kfs_source* prev = s > 0 ? &t->sources[s - 1] : NULL;
    for (uint32_t i = 0; i < src->binary_count; i++) {
      const char* name;
      const char* before;
      uint32_t u;
      kpack_get_binary(src->archive, i, &name);
      if (prev != NULL && i < prev->binary_count &&
          prev->binary_unique[i] != NONE &&
          kpack_get_binary(prev->archive, i, &before) == KPACK_SUCCESS &&
          strcmp(before, name) == 0) {
        u = prev->binary_unique[i];
      } else {
        if (kpack_layout_binary_problem(name) != NULL)
          continue;
        if ((!hashed && s > 0) || (hashed && 2 * (n + 1) > cap)) {
          /* The first source that does not repeat the one before, or a
           * table past half full. */
          if (rehash(&slots, &cap, unique, n) != 0)
            goto out;
          hashed = true;
        }
        size_t h = hashed ? probe(slots, cap, unique, name) : 0;
        if (!hashed || slots[h] == 0) {
          /* New (one archive names each binary once). */
          kfs_tree_binary* grown =
              kfs_grow(unique, n, &unique_cap, sizeof(*unique), 64);
          if (grown == NULL)
            goto out;
          unique = grown;
          unique[n] = (kfs_tree_binary){.name = name, .source = NONE};
          n++;
          if (hashed)
            slots[h] = (uint32_t)n;
        }
        u = hashed ? slots[h] - 1 : (uint32_t)(n - 1);
      }
      src->binary_unique[i] = u;
      unique[u].count++;
      count++;
    }
  }
  /* Contributors grouped by binary, in source order (a counting sort over
   * what each source's binary_unique says). */
  uint32_t next = 0;
  for (size_t u = 0; u < n; u++) {
    unique[u].first = next;
    next += unique[u].count;
    unique[u].count = 0;
  }
  t->contributors = malloc((count ? count : 1) * 2 * sizeof(uint32_t));
  if (t->contributors == NULL)
    goto out;
  for (uint32_t s = 0; s < t->source_count; s++) {
    const kfs_source* src = &t->sources[s];
    for (uint32_t i = 0; i < src->binary_count; i++) {
      if (src->binary_unique[i] == NONE)
        continue; /* left out above */
      kfs_tree_binary* b = &unique[src->binary_unique[i]];
      uint32_t at = b->first + b->count++;
      t->contributors[2 * at] = s;
      t->contributors[2 * at + 1] = i;
    }
  }
  /* Sorted in path order; each source's binary learns its place. Archives
   * list their binaries sorted byte-wise, and a single archive or an
   * install's archives (one component after another) are met in path order
   * already unless a name has a byte below '/' where another has '/'. */
  kfs_sort(unique, n, sizeof(*unique), by_unique_name, NULL);
  for (uint32_t u = 0; u < n; u++)
    for (uint32_t c = 0; c < unique[u].count; c++) {
      uint32_t at = unique[u].first + c;
      t->sources[t->contributors[2 * at]]
          .binary_unique[t->contributors[2 * at + 1]] = u;
    }
  t->unique = unique;
  t->unique_count = n;
  unique = NULL;
  rc = 0;
out:
  free(slots);
  free(unique);
  return rc;
}

/* Whether some binary's path runs through another binary's directory: in
 * path order, such a path comes right after that binary. */
static bool binaries_nest(const kfs_tree* t) {
  for (size_t u = 0; u + 1 < t->unique_count; u++) {
    const char* name = t->unique[u].name;
    size_t n = strlen(name);
    if (strncmp(t->unique[u + 1].name, name, n) == 0 &&
        t->unique[u + 1].name[n] == '/')
      return true;
  }
  return false;
}

/* Per source: global kernel numbers by binary. */
static int number_kernels(kfs_tree* t) {
  uint64_t g = 0;
  for (size_t s = 0; s < t->source_count; s++) {
    kfs_source* src = &t->sources[s];
    kpack_get_binary_count(src->archive, &src->binary_count);
    src->binary_kernel =
        malloc((src->binary_count + 1) * sizeof(*src->binary_kernel));
    src->binary_unique =
        malloc((src->binary_count ? src->binary_count : 1) * sizeof(uint32_t));
    if (src->binary_kernel == NULL || src->binary_unique == NULL)
      return -ENOMEM;
    for (size_t i = 0; i < src->binary_count; i++) {
      size_t arches = 0;
      kpack_get_binary_arch_count_at(src->archive, i, &arches);
      src->binary_kernel[i] = (uint32_t)g;
      src->binary_unique[i] = NONE;
      g += arches;
      if (g >= UINT32_MAX / SLOTS)
        return -ENOMEM; /* more kernels than inode numbers here */
    }
    src->binary_kernel[src->binary_count] = (uint32_t)g;
  }
  t->kernel_total = g;
  t->render_slots = g;
  t->shown = calloc(g / 8 + 1, 1);
  return t->shown != NULL ? 0 : -ENOMEM;
}

/* Checks every kernel's names, in mount order, warning about each one
 * skipped; notes what counting needs in facts[global number], when the
 * nesting of binary paths needs them (facts is NULL otherwise: counting
 * then asks the archives, cheaper than touching a large array). */
static void check_kernels(kfs_tree* t, kernel_facts* facts) {
  for (uint32_t s = 0; s < t->source_count; s++) {
    kfs_source* src = &t->sources[s];
    name_check nc = {0};
    for (size_t i = 0; i < src->binary_count; i++) {
      const char* binary;
      kpack_get_binary(src->archive, i, &binary);
      /* merge_binaries() left out exactly the binaries with a problem. */
      const char* binary_why = src->binary_unique[i] == NONE
                                   ? kpack_layout_binary_problem(binary)
                                   : NULL;
      for (uint32_t g = src->binary_kernel[i]; g < src->binary_kernel[i + 1];
           g++) {
        kpack_kernel_entry_t e;
        kpack_get_kernel_entry(src->archive, i, g - src->binary_kernel[i], &e);
        const char* why =
            kernel_problem(&nc, binary, binary_why, e.arch, e.info.type);
        if (why != NULL) {
          warn_skip(t, s, binary, e.arch, why);
          t->skipped++;
          continue;
        }
        t->shown[g / 8] |= (uint8_t)(1u << (g % 8));
        if (facts != NULL)
          facts[g] = (kernel_facts){e.arch, e.info.size,
                                    strcmp(e.info.type, "hsaco") == 0,
                                    e.metadata != NULL};
      }
    }
  }
}

static void tally(kfs_tree* t, uint32_t g, uint64_t size, bool code_object,
                  bool map) {
  t->kernels++;
  t->kernel_bytes += size;
  t->inodes += 2 + (code_object ? 2 : 0) + map;
  for (unsigned slot = SLOT_KERNELS; t->omitted != NULL && slot < SLOTS; slot++)
    t->inodes -= (t->omitted[g] >> slot) & 1;
}

/* Counts kernel g, shown: from facts when there are any, else from its
 * archive, at binary i of source s when the caller knows them (s NULL:
 * found from g). */
static void tally_kernel(kfs_tree* t, const kernel_facts* facts,
                         const kfs_source* s, size_t i, uint32_t g) {
  kpack_kernel_entry_t e;
  kernel_ref k;
  if (facts != NULL) {
    const kernel_facts* f = &facts[g];
    tally(t, g, f->size, f->code_object, f->map);
  } else if (s != NULL &&
             kpack_get_kernel_entry(s->archive, i, g - s->binary_kernel[i],
                                    &e) == KPACK_SUCCESS) {
    tally(t, g, e.info.size, strcmp(e.info.type, "hsaco") == 0,
          e.metadata != NULL);
  } else if (s == NULL && kernel_at(t, g, &k)) {
    tally(t, g, k.info.size, is_code_object(&k), k.map != NULL);
  }
}

/* ---- binary paths through other binaries' directories -------------------- */

/* Only hostile TOCs nest binary paths: a binary "x#0/gfx90a" inside the
 * arch directory of "x#0", or a binary "lib" beside "lib/x.so". Directories
 * simply merge; what is settled here, at mount, is a name that would be a
 * file of one kernel and a directory of another binary: a binary path
 * through "x#0/gfx90a/kernels", or "x#0/gfx90a" with an arch "kernels". The
 * directory wins when a source before the file's kernel's gives it: the
 * file is left out with a warning (a kernel file: the kernel is skipped).
 * Otherwise the file wins and the kernels whose path it blocks are
 * skipped. Within one archive the file always wins, as `kpack extract`
 * writes the file's binary first. */

/* The unique binary called name[0, n), or NONE. */
static uint32_t find_unique(const kfs_tree* t, const char* name, size_t n) {
  size_t lo = 0, hi = t->unique_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char* x = t->unique[mid].name;
    int c = path_cmp(x, strlen(x), name, n);
    if (c == 0)
      return (uint32_t)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NONE;
}

/* Which of kernel k's files is called name[0, n), or -1 (the names by
 * kpack_layout_file_named(), which `kpack extract` asks too). */
static int file_slot(const kfs_tree* t, uint32_t g, const kernel_ref* k,
                     const char* name, size_t n) {
  int file = kpack_layout_file_named(k->info.type, k->map != NULL, name, n);
  if (file < 0)
    return -1;
  unsigned slot = SLOT_KERNEL + (unsigned)file;
  return has_slot(t, g, k, slot) ? (int)slot : -1;
}

/* The first source with a kernel of unique binary u shown (of arch `arch`
 * when not NULL), or NONE; with `skip`, those kernels are skipped. */
static uint32_t binary_kernels(kfs_tree* t, uint32_t u, const char* arch,
                               bool skip) {
  const kfs_tree_binary* b = &t->unique[u];
  uint32_t first = NONE;
  for (uint32_t c = 0; c < b->count; c++) {
    uint32_t source = t->contributors[2 * (b->first + c)];
    const kfs_source* s = &t->sources[source];
    size_t i = t->contributors[2 * (b->first + c) + 1];
    for (uint32_t g = s->binary_kernel[i]; g < s->binary_kernel[i + 1]; g++) {
      kpack_kernel_entry_t e;
      if (!is_shown(t, g) ||
          kpack_get_kernel_entry(s->archive, i, g - s->binary_kernel[i], &e) !=
              KPACK_SUCCESS ||
          (arch != NULL && strcmp(arch, e.arch) != 0))
        continue;
      if (first == NONE)
        first = source;
      if (skip) {
        warn_skip(t, source, e.binary, e.arch,
                  "a file and a directory would share a path");
        t->shown[g / 8] &= (uint8_t) ~(1u << (g % 8));
        t->skipped++;
      }
    }
  }
  return first;
}

/* One name that kernel g's file (in `slot`) and a directory would share,
 * the directory given first by `source` for the kernels of unique binary
 * u (of `arch`, or all). Pass 0 leaves out the files that lose; pass 1
 * skips the kernels that lose to the files that stay. */
static void settle(kfs_tree* t, int pass, uint32_t g, unsigned slot,
                   uint32_t source, uint32_t u, const char* arch) {
  kernel_ref k;
  if (!kernel_at(t, g, &k) || !has_slot(t, g, &k, slot))
    return;
  if (!kpack_layout_file_stays(k.source, source)) {
    t->omitted[g] |= (uint8_t)(1u << slot);
    if (slot == SLOT_KERNEL) {
      warn_skip(t, k.source, k.binary, k.arch,
                "a file and a directory would share a path");
      t->shown[g / 8] &= (uint8_t) ~(1u << (g % 8));
      t->skipped++;
    } else {
      static const char* const names[] = {NULL, NULL, KPACK_LAYOUT_KERNELS_FILE,
                                          KPACK_LAYOUT_METADATA_FILE,
                                          KPACK_LAYOUT_TOC_METADATA_FILE};
      fprintf(stderr,
              "kpackfs: warning: %s: '%s' arch '%s': no '%s' file, the name "
              "is taken\n",
              t->sources[k.source].path, k.binary, k.arch, names[slot]);
    }
  } else if (pass == 1) {
    binary_kernels(t, u, arch, true);
  }
}

/* The kernel shown for arch name[0, n) of unique binary u, or NONE. */
static uint32_t arch_kernel(const kfs_tree* t, uint32_t u,
                            const kernel_facts* facts, const char* name,
                            size_t n, int* rc) {
  kfs_listing* l;
  size_t shadowed;
  uint32_t g = NONE;
  if ((*rc = make_listing(t, u, facts, &l, &shadowed)) != 0)
    return NONE;
  for (size_t i = 0; i < l->count && g == NONE; i++)
    if (strlen(l->entries[i].name) == n &&
        memcmp(l->entries[i].name, name, n) == 0)
      g = l->entries[i].id;
  free(l);
  return g;
}

/* Finds every name a file and a directory would share, for `pass`. */
static int settle_nesting(kfs_tree* t, const kernel_facts* facts, int pass) {
  int rc = 0;
  for (uint32_t u = 0; u < t->unique_count; u++) {
    const char* name = t->unique[u].name;
    uint32_t source = binary_kernels(t, u, NULL, false);
    if (source == NONE)
      continue;
    /* Each binary P that the path runs through, and its arch A after it. */
    for (const char* slash = strchr(name, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
      uint32_t p = find_unique(t, name, (size_t)(slash - name));
      if (p == NONE)
        continue;
      const char* arch = slash + 1;
      size_t arch_len = strcspn(arch, "/");
      uint32_t g = arch_kernel(t, p, facts, arch, arch_len, &rc);
      kernel_ref k;
      if (rc != 0)
        return rc;
      if (g == NONE || !kernel_at(t, g, &k))
        continue;
      if (arch[arch_len] == '/') {
        /* The path runs on through one of the files of P's arch A. */
        const char* file = arch + arch_len + 1;
        int slot = file_slot(t, g, &k, file, strcspn(file, "/"));
        if (slot >= 0)
          settle(t, pass, g, (unsigned)slot, source, u, NULL);
        continue;
      }
      /* This binary's directory is P's arch A: its arches meet A's files. */
      kfs_listing* l;
      size_t shadowed;
      if ((rc = make_listing(t, u, facts, &l, &shadowed)) != 0)
        return rc;
      for (size_t i = 0; i < l->count; i++) {
        const char* a = l->entries[i].name;
        int slot = file_slot(t, g, &k, a, strlen(a));
        kernel_ref shown;
        if (slot >= 0 && kernel_at(t, l->entries[i].id, &shown))
          settle(t, pass, g, (unsigned)slot, shown.source, u, a);
      }
      free(l);
    }
  }
  return rc;
}

/* Counts every kernel shown of binary b, where its archive is: the
 * number counted. */
static uint32_t tally_contributors(kfs_tree* t, const kfs_tree_binary* b,
                                   const kernel_facts* facts) {
  uint32_t counted = 0;
  for (uint32_t c = 0; c < b->count; c++) {
    const kfs_source* s = &t->sources[t->contributors[2 * (b->first + c)]];
    size_t i = t->contributors[2 * (b->first + c) + 1];
    for (uint32_t g = s->binary_kernel[i]; g < s->binary_kernel[i + 1]; g++)
      if (is_shown(t, g)) {
        tally_kernel(t, facts, s, i, g);
        counted++;
      }
  }
  return counted;
}

/* What each binary shows: its arch directories (counted, not kept), the
 * kernels and their files, the first source with a kernel shown. */
static int count_shown(kfs_tree* t, const kernel_facts* facts) {
  for (uint32_t u = 0; u < t->unique_count; u++) {
    kfs_tree_binary* b = &t->unique[u];
    if (b->count == 1) {
      /* One archive's arches are sorted and distinct: nothing to merge. */
      b->arches = tally_contributors(t, b, facts);
    } else {
      kfs_listing* l;
      size_t shadowed;
      int rc = make_listing(t, u, facts, &l, &shadowed);
      if (rc != 0)
        return rc;
      b->arches = (uint32_t)l->count;
      t->shadowed += shadowed;
      if (facts != NULL || shadowed > 0) {
        for (size_t i = 0; i < l->count; i++)
          tally_kernel(t, facts, NULL, 0, l->entries[i].id);
      } else {
        /* Every kernel shown is listed: counted where its archive is. */
        (void)tally_contributors(t, b, NULL);
      }
      free(l);
    }
    t->binaries += b->arches > 0;
    /* The first source with a kernel shown has every arch it shows. */
    for (uint32_t c = 0; c < b->count && b->source == NONE; c++) {
      const kfs_source* s = &t->sources[t->contributors[2 * (b->first + c)]];
      size_t i = t->contributors[2 * (b->first + c) + 1];
      for (uint32_t g = s->binary_kernel[i]; g < s->binary_kernel[i + 1]; g++)
        if (is_shown(t, g))
          b->source = t->contributors[2 * (b->first + c)];
    }
  }
  return 0;
}

static size_t components(const char* s) {
  size_t n = 1;
  for (; *s; s++)
    n += *s == '/';
  return n;
}

static int by_dir_name(const void* a, const void* b, void* dirs) {
  const kfs_tree_dir* d = dirs;
  return strcmp(d[*(const uint32_t*)a].name, d[*(const uint32_t*)b].name);
}

/* The directories of the shown binary paths, in path order: a binary
 * shares its leading directories with the one before it, all of them when
 * its path runs through that one's directory. */
static int make_dirs(kfs_tree* t) {
  size_t cap = 1, names = 1, depth = 1;
  for (size_t u = 0; u < t->unique_count; u++) {
    if (t->unique[u].arches == 0)
      continue;
    size_t c = components(t->unique[u].name);
    cap += c;
    names += strlen(t->unique[u].name) + 1;
    if (c > depth)
      depth = c;
  }
  uint32_t* stack = malloc((depth + 1) * sizeof(*stack));
  t->dirs = calloc(cap, sizeof(*t->dirs));
  t->names = malloc(names);
  if (stack == NULL || t->dirs == NULL || t->names == NULL) {
    free(stack);
    return -ENOMEM;
  }
  char* np = t->names;
  t->dirs[0] = (kfs_tree_dir){
      .name = "", .binary = NONE, .source = NONE, .arch_kernel = NONE};
  t->dir_count = 1;
  stack[0] = 0;
  const char* prev = NULL;
  for (uint32_t u = 0; u < t->unique_count; u++) {
    kfs_tree_binary* b = &t->unique[u];
    if (b->arches == 0)
      continue;
    /* Components shared with the previous binary: never all of this one
     * (names are unique, and a path comes after the paths it runs
     * through), all of the previous one when this path runs through it. */
    size_t shared = 0;
    const char* p = b->name;
    if (prev != NULL) {
      const char* q = prev;
      for (;;) {
        size_t n = strcspn(p, "/");
        if (strcspn(q, "/") != n || memcmp(p, q, n) != 0 || p[n] != '/')
          break;
        shared++;
        p += n + 1;
        if (q[n] == '\0')
          break;
        q += n + 1;
      }
    }
    for (size_t k = 0; k <= shared; k++)
      if (b->source < t->dirs[stack[k]].source)
        t->dirs[stack[k]].source = b->source;
    for (size_t k = shared + 1;; k++) {
      size_t n = strcspn(p, "/");
      uint32_t d = (uint32_t)t->dir_count++;
      kfs_tree_dir* dir = &t->dirs[d];
      *dir = (kfs_tree_dir){.parent = stack[k - 1],
                            .source = b->source,
                            .binary = NONE,
                            .arch_kernel = NONE};
      stack[k] = d;
      if (p[n] == '\0') {
        dir->name = p; /* the binary name's own last component */
        dir->binary = u;
        dir->nlink = 2 + b->arches;
        b->dir = d;
        break;
      }
      memcpy(np, p, n);
      np[n] = '\0';
      dir->name = np;
      np += n + 1;
      p += n + 1;
    }
    prev = b->name;
  }
  free(stack);

  /* Subdirectories by parent, sorted by name; link counts. */
  t->subdirs = malloc(t->dir_count * sizeof(*t->subdirs));
  if (t->subdirs == NULL)
    return -ENOMEM;
  for (size_t d = 1; d < t->dir_count; d++)
    t->dirs[t->dirs[d].parent].sub_count++;
  uint32_t next = 0;
  for (size_t d = 0; d < t->dir_count; d++) {
    t->dirs[d].sub_first = next;
    next += t->dirs[d].sub_count;
    t->dirs[d].sub_count = 0;
  }
  for (size_t d = 1; d < t->dir_count; d++) {
    kfs_tree_dir* parent = &t->dirs[t->dirs[d].parent];
    t->subdirs[parent->sub_first + parent->sub_count++] = (uint32_t)d;
  }
  for (size_t d = 0; d < t->dir_count; d++) {
    kfs_tree_dir* dir = &t->dirs[d];
    dir->nlink =
        dir->binary == NONE ? 2 + dir->sub_count : dir->nlink + dir->sub_count;
    /* Made in path order, which for names without '/' is byte-wise, the
     * subdirectories are in name order already. */
    kfs_sort(&t->subdirs[dir->sub_first], dir->sub_count, sizeof(uint32_t),
             by_dir_name, t->dirs);
  }
  kfs_tree_dir* root = &t->dirs[0];
  root->nlink++; /* .kpackfs */
  root->source = 0;
  t->root_meta_index = 0;
  while (t->root_meta_index < root->sub_count &&
         strcmp(t->dirs[t->subdirs[root->sub_first + t->root_meta_index]].name,
                KPACK_LAYOUT_RESERVED_DIR) < 0)
    t->root_meta_index++;
  t->inodes += 4 + t->dir_count - 1;
  t->kernel_ino = (fuse_ino_t)t->dir_count + 4;
  t->listings = calloc(t->dir_count, sizeof(*t->listings));
  return t->listings != NULL ? 0 : -ENOMEM;
}

static int by_kernel(const void* a, const void* b, void* unused) {
  (void)unused;
  uint32_t x = ((const kfs_merged*)a)->kernel;
  uint32_t y = ((const kfs_merged*)b)->kernel;
  return (x > y) - (x < y);
}

/* Where a binary directory's subdirectory is also one of its arches, the
 * two are one directory: the subdirectory's inode, listing the arch
 * directory's files too. */
static int merge_arch_dirs(kfs_tree* t) {
  size_t cap = 0;
  for (uint32_t d = 0; d < t->dir_count; d++) {
    kfs_tree_dir* dir = &t->dirs[d];
    if (dir->binary == NONE || dir->sub_count == 0)
      continue;
    kfs_listing* l;
    size_t shadowed;
    int rc = make_listing(t, dir->binary, NULL, &l, &shadowed);
    if (rc != 0)
      return rc;
    for (uint32_t i = 0; i < dir->sub_count; i++) {
      kfs_tree_dir* sub = &t->dirs[t->subdirs[dir->sub_first + i]];
      for (size_t j = 0; j < l->count; j++) {
        if (strcmp(l->entries[j].name, sub->name) != 0)
          continue;
        kfs_merged* m =
            kfs_grow(t->merged, t->merged_count, &cap, sizeof(*m), 16);
        if (m == NULL) {
          free(l);
          return -ENOMEM;
        }
        t->merged = m;
        m[t->merged_count++] =
            (kfs_merged){l->entries[j].id, t->subdirs[dir->sub_first + i]};
        sub->arch_kernel = l->entries[j].id;
        dir->nlink--; /* counted as an arch and as a subdirectory */
        t->inodes--;
      }
    }
    free(l);
  }
  kfs_sort(t->merged, t->merged_count, sizeof(*t->merged), by_kernel, NULL);
  return 0;
}

/* 0 or -ENOMEM. */
static int build_derived(kfs_tree* t) {
  int rc;
  if ((rc = number_kernels(t)) != 0 || (rc = merge_binaries(t)) != 0)
    return rc;
  bool nested = binaries_nest(t);
  kernel_facts* facts = NULL;
  if (nested && (facts = calloc(t->kernel_total ? t->kernel_total : 1,
                                sizeof(*facts))) == NULL)
    return -ENOMEM;
  check_kernels(t, facts);
  if (nested) {
    t->omitted = calloc(t->kernel_total ? t->kernel_total : 1, 1);
    rc = t->omitted == NULL ? -ENOMEM : settle_nesting(t, facts, 0);
    if (rc == 0)
      rc = settle_nesting(t, facts, 1);
  }
  if (rc == 0)
    rc = count_shown(t, facts);
  free(facts);
  if (rc == 0)
    rc = make_dirs(t);
  return rc != 0 || !nested ? rc : merge_arch_dirs(t);
}

static void free_derived(kfs_tree* t) {
  for (size_t i = 0; t->listings != NULL && i < t->dir_count; i++)
    free(atomic_load(&t->listings[i]));
  free((void*)t->listings);
  free(t->unique);
  free(t->contributors);
  free(t->dirs);
  free(t->subdirs);
  free(t->shown);
  free(t->names);
  free(t->merged);
  free(t->omitted);
  for (size_t i = 0; i < t->source_count; i++) {
    free(t->sources[i].binary_kernel);
    free(t->sources[i].binary_unique);
    t->sources[i].binary_kernel = NULL;
    t->sources[i].binary_unique = NULL;
  }
  t->listings = NULL;
  t->unique = NULL;
  t->contributors = NULL;
  t->dirs = NULL;
  t->subdirs = NULL;
  t->shown = NULL;
  t->names = NULL;
  t->merged = NULL;
  t->omitted = NULL;
  t->merged_count = 0;
  t->dir_count = t->unique_count = t->kernel_total = 0;
}

/* ---- sources ------------------------------------------------------------- */

static int render_archives(kfs_tree* t) {
  size_t size = 0;
  for (size_t i = 0; i < t->source_count; i++)
    size += strlen(t->sources[i].path) + 1;
  t->archives_text = malloc(size ? size : 1);
  if (t->archives_text == NULL)
    return -ENOMEM;
  char* p = t->archives_text;
  for (size_t i = 0; i < t->source_count; i++) {
    size_t n = strlen(t->sources[i].path);
    memcpy(p, t->sources[i].path, n);
    p[n] = '\n';
    p += n + 1;
  }
  t->archives_size = size;
  return 0;
}

static bool later(struct timespec a, struct timespec b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

/* Names the archive and the kpack error; running out of descriptors (one
 * per archive, held for the whole mount) gets its own words, since
 * KPACK_ERROR_IO_ERROR alone would send the user looking at the file. */
static void report_open_failure(const char* path, kpack_error_t err, int sys,
                                size_t archives) {
  struct rlimit lim;
  if (err == KPACK_ERROR_IO_ERROR && sys == EMFILE &&
      getrlimit(RLIMIT_NOFILE, &lim) == 0)
    fprintf(stderr,
            "kpackfs: %s: too many open files: %zu archives need a "
            "descriptor each and the limit is %llu (raise the hard limit: "
            "ulimit -Hn, or LimitNOFILE=)\n",
            path, archives, (unsigned long long)lim.rlim_cur);
  else if (err == KPACK_ERROR_IO_ERROR && sys == ENFILE)
    fprintf(stderr,
            "kpackfs: %s: too many open files in the system "
            "(fs.file-max)\n",
            path);
  else
    kfs_report_source_error(path, err);
}

/* Opening is reading and parsing a TOC per source: a few workers overlap
 * one archive's reads with another's parsing. Each takes the next source
 * by an atomic counter and keeps its own status; failures are reported in
 * source order afterwards. */
#define KFS_OPEN_WORKERS 4

typedef struct open_job {
  kfs_tree* tree;
  const kfs_paths* paths;
  kpack_error_t* errs;
  int* sys; /* errno of each failed open */
  atomic_size_t next;
} open_job;

static void* open_worker(void* arg) {
  open_job* job = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&job->next, 1);
    if (i >= job->paths->count)
      return NULL;
    kfs_source* s = &job->tree->sources[i];
    struct stat st;
    job->errs[i] = kpack_open(job->paths->items[i], &s->archive);
    job->sys[i] = errno;
    if (job->errs[i] != KPACK_SUCCESS)
      continue;
    if (stat(job->paths->items[i], &st) == 0)
      s->mtime = st.st_mtim;
  }
}

static void* prefetch_all(void* arg) {
  const kfs_paths* paths = arg;
  kpack_prefetch((const char* const*)paths->items, paths->count);
  return NULL;
}

static int open_sources(kfs_tree* t, const kfs_paths* paths) {
  size_t n = paths->count;
  int rc = -ENOMEM;
  t->sources = calloc(n ? n : 1, sizeof(*t->sources));
  open_job job = {.tree = t,
                  .paths = paths,
                  .errs = calloc(n ? n : 1, sizeof(kpack_error_t)),
                  .sys = calloc(n ? n : 1, sizeof(int))};
  atomic_init(&job.next, 0);
  if (t->sources == NULL || job.errs == NULL || job.sys == NULL)
    goto out;
  t->source_count = n; /* kfs_tree_free closes what did open */
  /* Every TOC requested at once, on a thread of its own: cold, the disk
   * serves them in parallel while the workers parse the first ones. */
  pthread_t prefetcher;
  bool prefetching = n > 1 && pthread_create(&prefetcher, NULL, prefetch_all,
                                             (void*)paths) == 0;
  pthread_t workers[KFS_OPEN_WORKERS];
  size_t started = 0;
  while (started < KFS_OPEN_WORKERS && started + 1 < n &&
         pthread_create(&workers[started], NULL, open_worker, &job) == 0)
    started++;
  open_worker(&job); /* this thread works too */
  for (size_t w = 0; w < started; w++)
    pthread_join(workers[w], NULL);
  if (prefetching)
    pthread_join(prefetcher, NULL);
  for (size_t i = 0; i < n; i++) {
    kfs_source* s = &t->sources[i];
    kpack_compression_scheme_t scheme;
    if (job.errs[i] != KPACK_SUCCESS) {
      report_open_failure(paths->items[i], job.errs[i], job.sys[i], n);
      rc = -EINVAL;
      goto out;
    }
    if ((s->path = strdup(paths->items[i])) == NULL)
      goto out;
    if (later(s->mtime, t->newest_mtime))
      t->newest_mtime = s->mtime;
    kpack_get_compression_scheme(s->archive, &scheme);
    s->scheme = kpack_compression_scheme_name(scheme);
    if (s->scheme == NULL)
      s->scheme = "unknown";
  }
  rc = 0;
out:
  free(job.errs);
  free(job.sys);
  return rc;
}

int kfs_tree_build(kfs_tree* t, const kfs_paths* paths) {
  int rc;
  *t = (kfs_tree){0};
  if ((rc = open_sources(t, paths)) != 0 || (rc = render_archives(t)) != 0)
    goto fail;
  t->opened_ns = kfs_clock_ns();
  if ((rc = build_derived(t)) != 0)
    goto fail;
  t->built_ns = kfs_clock_ns();
  return 0;

fail:
  if (rc == -ENOMEM)
    fprintf(stderr, "kpackfs: out of memory\n");
  kfs_tree_free(t);
  return -1;
}

void kfs_tree_free(kfs_tree* t) {
  free_derived(t);
  for (size_t i = 0; i < t->source_count; i++) {
    kpack_close(t->sources[i].archive);
    free(t->sources[i].path);
  }
  free(t->sources);
  free(t->archives_text);
  *t = (kfs_tree){0};
}

/* ---- requests ------------------------------------------------------------ */

bool kfs_tree_node(const kfs_tree* t, fuse_ino_t ino, kfs_node* n) {
  *n = (kfs_node){.kind = KFS_DIR, .parent = KFS_INO_ROOT, .nlink = 2};
  if (ino == KFS_INO_META)
    return true;
  if (ino == KFS_INO_STATS || ino == KFS_INO_ARCHIVES) {
    n->kind = ino == KFS_INO_STATS ? KFS_STATS : KFS_ARCHIVES;
    n->parent = KFS_INO_META;
    n->nlink = 1;
    return true;
  }
  uint32_t d = ino_dir(t, ino);
  if (d != NONE) {
    const kfs_tree_dir* dir = &t->dirs[d];
    n->parent = dir_ino(dir->parent);
    n->source = dir->source == NONE ? 0 : dir->source;
    n->nlink = dir->nlink;
    return true;
  }
  uint32_t g;
  unsigned slot;
  kernel_ref k;
  if (!ino_kernel(t, ino, &g, &slot) || !kernel_at(t, g, &k) ||
      !has_slot(t, g, &k, slot))
    return false;
  /* An arch directory that is a binary path's directory too has that
   * directory's number. */
  uint32_t merged = t->merged_count > 0 ? merged_dir(t, g) : NONE;
  if (slot == SLOT_ARCH && merged != NONE)
    return false;
  static const uint8_t kinds[SLOTS] = {KFS_DIR, KFS_KERNEL, KFS_KERNELS,
                                       KFS_METADATA, KFS_TOC_METADATA};
  n->kind = kinds[slot];
  n->source = k.source;
  n->binary = k.binary;
  n->arch = k.arch;
  n->render = g;
  if (slot == SLOT_ARCH) {
    uint32_t u = t->sources[k.source].binary_unique[k.binary_index];
    n->parent = dir_ino(t->unique[u].dir);
    return true;
  }
  n->parent = merged != NONE ? dir_ino(merged) : kernel_ino(t, g, SLOT_ARCH);
  n->nlink = 1;
  n->size = slot == SLOT_KERNEL ? k.info.size
            : slot == SLOT_MAP  ? k.map_size
                                : 0;
  return true;
}

bool kfs_tree_text_node(const kfs_tree* t, uint32_t slot, kfs_node* n) {
  return kfs_tree_node(t, kernel_ino(t, slot, SLOT_KERNELS), n);
}

static fuse_ino_t entry_ino(const kfs_tree* t, const kfs_listing_entry* e) {
  return e->what == ENTRY_DIR    ? dir_ino(e->id)
         : e->what == ENTRY_FILE ? kernel_ino(t, e->id, e->slot)
                                 : kernel_ino(t, e->id, SLOT_ARCH);
}

/* Whether directory d is answered from its listing. */
static bool has_listing(const kfs_tree* t, uint32_t d) {
  return t->dirs[d].binary != NONE || t->dirs[d].arch_kernel != NONE;
}

int kfs_tree_lookup(const kfs_tree* t, fuse_ino_t parent, const char* name,
                    fuse_ino_t* ino) {
  *ino = 0;
  if (parent == KFS_INO_META) {
    if (strcmp(name, "stats") == 0)
      *ino = KFS_INO_STATS;
    else if (strcmp(name, "archives") == 0)
      *ino = KFS_INO_ARCHIVES;
    return 0;
  }
  uint32_t d = ino_dir(t, parent);
  if (d != NONE && has_listing(t, d)) {
    const kfs_listing* l;
    int rc = listing(t, d, &l);
    if (rc != 0)
      return rc;
    size_t lo = 0, hi = l->count;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      int c = strcmp(name, l->entries[mid].name);
      if (c == 0) {
        *ino = entry_ino(t, &l->entries[mid]);
        return 0;
      }
      if (c < 0)
        hi = mid;
      else
        lo = mid + 1;
    }
    return 0;
  }
  if (d != NONE) {
    const kfs_tree_dir* dir = &t->dirs[d];
    if (d == 0 && strcmp(name, KPACK_LAYOUT_RESERVED_DIR) == 0) {
      *ino = KFS_INO_META;
      return 0;
    }
    const uint32_t* sub = &t->subdirs[dir->sub_first];
    size_t lo = 0, hi = dir->sub_count;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      int c = strcmp(name, t->dirs[sub[mid]].name);
      if (c == 0) {
        *ino = dir_ino(sub[mid]);
        return 0;
      }
      if (c < 0)
        hi = mid;
      else
        lo = mid + 1;
    }
    return 0;
  }
  uint32_t g;
  unsigned slot;
  kernel_ref k;
  if (!ino_kernel(t, parent, &g, &slot) || !kernel_at(t, g, &k))
    return 0;
  if (slot != SLOT_ARCH)
    return -ENOTDIR;
  char buf[KPACK_LAYOUT_NAME_MAX + 1];
  if (strcmp(name, kernel_file_name(&k, buf, sizeof(buf))) == 0)
    *ino = kernel_ino(t, g, SLOT_KERNEL);
  else if (strcmp(name, kernels_file) == 0 && has_slot(t, g, &k, SLOT_KERNELS))
    *ino = kernel_ino(t, g, SLOT_KERNELS);
  else if (strcmp(name, json_file) == 0 && has_slot(t, g, &k, SLOT_JSON))
    *ino = kernel_ino(t, g, SLOT_JSON);
  else if (strcmp(name, map_file) == 0 && has_slot(t, g, &k, SLOT_MAP))
    *ino = kernel_ino(t, g, SLOT_MAP);
  return 0;
}

/* The files of an arch directory, in name order: kernel.<type> sorts
 * before kernels ('.' < 's'), then metadata.json, toc-metadata.msgpack. The
 * kernel file's name is made into a per-thread buffer: the type is the
 * archive's, "kernel." is not. */
static int arch_entry(const kfs_tree* t, uint32_t g, size_t index,
                      fuse_ino_t* ino, const char** name) {
  static _Thread_local char buf[KPACK_LAYOUT_NAME_MAX + 1];
  kernel_ref k;
  if (!kernel_at(t, g, &k))
    return -ENOTDIR;
  static const unsigned slots[] = {SLOT_KERNEL, SLOT_KERNELS, SLOT_JSON,
                                   SLOT_MAP};
  static const char* const names[] = {NULL, KPACK_LAYOUT_KERNELS_FILE,
                                      KPACK_LAYOUT_METADATA_FILE,
                                      KPACK_LAYOUT_TOC_METADATA_FILE};
  for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
    if (!has_slot(t, g, &k, slots[i]))
      continue;
    if (index-- > 0)
      continue;
    *ino = kernel_ino(t, g, slots[i]);
    *name = i == 0 ? kernel_file_name(&k, buf, sizeof(buf)) : names[i];
    return 1;
  }
  return 0;
}

int kfs_tree_entry(const kfs_tree* t, fuse_ino_t dir, size_t index,
                   fuse_ino_t* ino, const char** name) {
  if (dir == KFS_INO_META) {
    static const char* const meta[] = {"archives", "stats"};
    if (index >= 2)
      return 0;
    *ino = index == 0 ? KFS_INO_ARCHIVES : KFS_INO_STATS;
    *name = meta[index];
    return 1;
  }
  uint32_t d = ino_dir(t, dir);
  if (d != NONE && has_listing(t, d)) {
    const kfs_listing* l;
    int rc = listing(t, d, &l);
    if (rc != 0)
      return rc;
    if (index >= l->count)
      return 0;
    *ino = entry_ino(t, &l->entries[index]);
    *name = l->entries[index].name;
    return 1;
  }
  if (d != NONE) {
    const kfs_tree_dir* dr = &t->dirs[d];
    if (d == 0 && index == t->root_meta_index) {
      *ino = KFS_INO_META;
      *name = KPACK_LAYOUT_RESERVED_DIR;
      return 1;
    }
    if (d == 0 && index > t->root_meta_index)
      index--;
    if (index >= dr->sub_count)
      return 0;
    uint32_t sub = t->subdirs[dr->sub_first + index];
    *ino = dir_ino(sub);
    *name = t->dirs[sub].name;
    return 1;
  }
  uint32_t g;
  unsigned slot;
  if (!ino_kernel(t, dir, &g, &slot) || slot != SLOT_ARCH)
    return -ENOTDIR;
  return arch_entry(t, g, index, ino, name);
}
