/* SPDX-License-Identifier: MIT
 *
 * `kpack create`: packs kernels from trees in the kpackfs layout and from
 * the .hip_fatbin of HIP host binaries into one archive. Inputs are scanned
 * first, then added in (binary, arch) byte order, so the archive depends on
 * the set of kernels alone; the writer makes it appear atomically.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "host_view.h"

// clang-format off
static const char create_manual[] =
    "NAME\n"
    "    kpack create - pack GPU code objects into a kpack archive\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack create -o OUT [-l LEVEL | --no-compress] [-j N] [--group G]\n"
    "                 [--family F] [--arch ARCH]... [-v | -q]\n"
    "                 [DIR | ARCHIVE]... [--fatbin ELF[=BINARY_NAME]]...\n"
    "\n"
    "DESCRIPTION\n"
    "    Each DIR is a tree in the layout kpackfs mounts and `kpack extract`\n"
    "    writes: DIR/<binary>/<arch>/kernel.hsaco, where <binary> is a\n"
    "    relative path that may contain '/' and ends in #N, the code object\n"
    "    index (e.g. lib/librocrand.so.1#0/gfx90a:xnack-/kernel.hsaco). A\n"
    "    " KPACK_ENTRY_METADATA_FILE
    " beside a kernel holds its TOC metadata map\n"
    "    (MessagePack, exactly one map), as `kpack extract` writes it and a\n"
    "    kpackfs mount shows it. The " KPACK_CO_KERNELS_FILE
    " and " KPACK_CO_METADATA_FILE
    " files both show\n"
    "    beside each code object, and a .kpackfs directory at the top of a\n"
    "    mounted tree, are skipped; any other file is an error.\n"
    "\n"
    "    Each ARCHIVE (any input that is not a directory) is a kpack archive\n"
    "    whose kernels are merged in without extracting anything, with their\n"
    "    metadata maps; the architectures it declares are declared too.\n"
    "    Between zstd archives a kernel's frame is copied byte for byte, once\n"
    "    it has been read back as the kernel; -l compresses such kernels again\n"
    "    at that level, --no-compress stores them raw. Unless --group or\n"
    "    --family are given, the output takes the group_name and\n"
    "    gfx_arch_family the input archives that set them agree on.\n"
    "\n"
    "    --fatbin ELF reads a HIP host binary (executable, shared library or\n"
    "    object): the clang offload bundles in its .hip_fatbin section, plain\n"
    "    or compressed (CCOB, zlib or zstd). Code object N is the bundle the\n"
    "    N-th __CudaFatBinaryWrapper in .hipFatBinSegment points at (the\n"
    "    co_index the HIP runtime passes to the loader); without that section\n"
    "    the bundles are taken in section order. Every\n"
    "    hipv4-amdgcn-amd-amdhsa--<arch> (or hip-amdgcn-...) entry becomes\n"
    "    the kernel BINARY_NAME#N for <arch>; host entries are skipped.\n"
    "    BINARY_NAME defaults to the ELF's file name; give the install-tree\n"
    "    path the HIPK metadata names, e.g.\n"
    "    --fatbin build/librocrand.so.1.1=lib/librocrand.so.1. The first '='\n"
    "    separates the name, unless the whole argument names a file.\n"
    "\n"
    "    The same binary and arch from two trees or archives is fine when the\n"
    "    kernels and their metadata are identical (the copy kept is an\n"
    "    archive's, then the smaller stored one, then the first by path);\n"
    "    different ones are an error naming both inputs. Kernels are added in\n"
    "    byte-wise (binary, arch) order, so the same inputs give the same\n"
    "    archive, byte for byte, whatever their order or -j. The archive\n"
    "    declares, sorted, every architecture it holds a kernel for and those\n"
    "    the input archives declare (with --arch, those an ARCH agent could\n"
    "    be served): the loader tries an archive only for the architectures\n"
    "    it declares, so an architecture declared without a kernel would end\n"
    "    an agent's search with KPACK_ERROR_KERNEL_NOT_FOUND. OUT is\n"
    "    written to a temporary file in its directory and renamed into place\n"
    "    (then the directory is synced): on an error or an interrupt (Ctrl-C)\n"
    "    no partial archive is left behind. If OUT is a symbolic link, the\n"
    "    file it points to is replaced that way and the link is kept.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output OUT      the archive to create (replaced if it exists)\n"
    "    -l, --level LEVEL     zstd level, 1-22 (default 3); also recompresses\n"
    "                          kernels taken from archives\n"
    "        --no-compress     store kernels raw (scheme \"none\")\n"
    "    -j, --jobs N          compression threads (default and 0: one per\n"
    "                          CPU; 1: none besides the main one)\n"
    "        --group G         TOC group_name, e.g. blas (default \"\")\n"
    "        --family F        TOC gfx_arch_family, e.g. gfx94X (default \"\")\n"
    "        --arch ARCH       pack only kernels an ARCH agent could be served\n"
    "                          (gfx90a: gfx90a, gfx90a:xnack-, gfx90a:xnack+...;\n"
    "                          gfx90a:xnack-: not gfx90a:xnack+; gfx906: also\n"
    "                          gfx9-generic; the rule of kpack split --arch);\n"
    "                          ARCH is a GPU target, e.g. gfx90a:xnack-\n"
    "                          (repeatable)\n"
    "        --fatbin ELF[=BINARY_NAME]\n"
    "                          read the code objects of a HIP host binary\n"
    "    -v, --verbose         describe each input on standard error\n"
    "    -q, --quiet           no summary line\n"
    "    -h, --help            print this manual\n"
    "\n"
    "    Progress is shown on standard error when it is a terminal.\n"
    "\n"
    "EXAMPLES\n"
    "    kpack create -o rand.kpack -j8 --group rand --fatbin librocrand.so.1.1=lib/librocrand.so.1\n"
    "    kpack create -o rand_gfx90a.kpack --arch gfx90a:xnack- --arch gfx90a:xnack+ \\\n"
    "        --fatbin librocrand.so.1.1=lib/librocrand.so.1\n"
    "    kpack extract -C tree old.kpack && kpack create -o new.kpack -l 19 tree\n"
    "    kpack create -o blas.kpack shard0.kpack shard1.kpack extra-tree\n"
    "\n"
    "EXIT STATUS\n"
    "    0 the archive was written; 1 an input or the output failed (OUT is\n"
    "    left as it was and no temporary file stays; the message names the\n"
    "    input, or OUT with the system's reason, e.g. \"No space left on\n"
    "    device\"); 2 bad command line; 130 interrupted.\n";
// clang-format on

static int create_run(int argc, char** argv);

const cli_command cli_create_command = {
    "create",
    "pack trees, archives or HIP fat binaries (--fatbin) into an archive",
    create_manual, create_run};

/* An input: a tree, an archive, or a fat binary with the name its kernels
 * get. */
typedef struct cr_source {
  const char* path;
  char* name;              /* fat binary: BINARY_NAME */
  kpack_fatbin_t* fatbin;  /* NULL for a tree */
  kpack_archive_t archive; /* an archive input; NULL otherwise */
} cr_source;

/* One kernel to add: from a file of a tree, an archive's TOC or an entry of
 * a bundle. */
typedef struct cr_item {
  char* binary;
  char* arch;
  char* file;          /* tree kernel file; NULL for a fat binary entry */
  char* metadata_file; /* tree: its toc-metadata.msgpack, if there is one */
  size_t source;
  size_t bundle, entry; /* fat binary: co_index and entry index */
  bool compressed;      /* fat binary: the bundle is a CCOB envelope */
} cr_item;

/* A toc-metadata.msgpack of a tree, matched to its kernel once all are
 * found. */
typedef struct cr_sidecar {
  char* binary;
  char* arch;
  char* file;
  size_t source;
} cr_sidecar;

typedef struct cr_state {
  cr_source* sources;
  size_t source_count, source_cap;
  cr_item* items;
  size_t count, cap;
  cr_sidecar* sidecars;
  size_t sidecar_count, sidecar_cap;
  const char** only_arches; /* --arch, deduplicated, in order */
  size_t only_count;
  bool verbose;
  const char* out; /* -o: the archive being written, for messages */
} cr_state;

/* ---- scanning ------------------------------------------------------------ */

static bool add_item(cr_state* s, cr_item item) {
  cr_item* p = cli_grow(s->items, s->count, &s->cap, sizeof(*p), 64);
  if (p == NULL)
    goto fail;
  s->items = p;
  if (item.binary == NULL || item.arch == NULL)
    goto fail;
  s->items[s->count++] = item;
  return true;
fail:
  free(item.binary);
  free(item.arch);
  free(item.file);
  cli_error("out of memory");
  return false;
}

/* "...#N" with N decimal: the code object index every binary name ends in. */
static bool has_index_suffix(const char* binary) {
  const char* hash = strrchr(binary, '#');
  if (hash == NULL || hash[1] == '\0')
    return false;
  for (const char* p = hash + 1; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  return true;
}

static bool add_sidecar(cr_state* s, cr_sidecar sidecar) {
  cr_sidecar* p =
      cli_grow(s->sidecars, s->sidecar_count, &s->sidecar_cap, sizeof(*p), 16);
  if (p == NULL)
    goto fail;
  s->sidecars = p;
  if (sidecar.binary == NULL || sidecar.arch == NULL || sidecar.file == NULL)
    goto fail;
  s->sidecars[s->sidecar_count++] = sidecar;
  return true;
fail:
  free(sidecar.binary);
  free(sidecar.arch);
  free(sidecar.file);
  cli_error("out of memory");
  return false;
}

/* A file of a tree: <binary>/<arch>/kernel.hsaco, the entry's metadata map
 * beside it, and the files a kpackfs mount renders there (skipped). */
static bool scan_tree_file(cr_state* s, size_t source, const char* full,
                           const char* rel) {
  const char* base = strrchr(rel, '/');
  const char* name = base ? base + 1 : rel;
  const char* arch_start = NULL;
  if (base != NULL) {
    arch_start = base;
    while (arch_start > rel && arch_start[-1] != '/')
      arch_start--;
  }
  bool in_arch_dir = arch_start != NULL && arch_start != rel;
  if (in_arch_dir && (strcmp(name, KPACK_LAYOUT_KERNELS_FILE) == 0 ||
                      strcmp(name, KPACK_LAYOUT_METADATA_FILE) == 0))
    return true;
  bool sidecar =
      in_arch_dir && strcmp(name, KPACK_LAYOUT_TOC_METADATA_FILE) == 0;
  const char* type = kpack_layout_kernel_type(name);
  if (strncmp(name, CLI_EXTRACT_PREFIX, strlen(CLI_EXTRACT_PREFIX)) == 0) {
    cli_error(
        "%s: left by a kpack extract that was killed; run it into "
        "this tree again, which first takes the killed run back",
        full);
    return false;
  }
  if (!sidecar && (type == NULL || !in_arch_dir)) {
    cli_error("%s: not in the kpackfs layout <binary>#N/<arch>/kernel.hsaco",
              full);
    return false;
  }
  if (!sidecar && strcmp(type, "hsaco") != 0) {
    cli_error("%s: kernel type '%s' not supported (only hsaco)", full, type);
    return false;
  }
  char* binary = strndup(rel, (size_t)(arch_start - 1 - rel));
  char* arch = strndup(arch_start, (size_t)(base - arch_start));
  if (binary != NULL && !has_index_suffix(binary)) {
    cli_error(
        "%s: binary directory '%s' does not end in #N (code object "
        "index)",
        full, binary);
    free(binary);
    free(arch);
    return false;
  }
  if (sidecar)
    return add_sidecar(s, (cr_sidecar){.binary = binary,
                                       .arch = arch,
                                       .file = strdup(full),
                                       .source = source});
  return add_item(s, (cr_item){.binary = binary,
                               .arch = arch,
                               .file = strdup(full),
                               .source = source});
}

/* The type of a directory entry into st->st_mode: from readdir where the
 * filesystem says (a tree of thousands of kernels then costs no stat per
 * entry), else by stat, which also follows symbolic links. */
static bool entry_type(const struct dirent* e, const char* path,
                       struct stat* st) {
  if (e->d_type == DT_DIR || e->d_type == DT_REG) {
    st->st_mode = e->d_type == DT_DIR ? S_IFDIR : S_IFREG;
    return true;
  }
  return stat(path, st) == 0;
}

/* Walks a tree; `rel` is the path below its root ("" at the top). Symlinks
 * are followed, to a bounded depth. */
static bool scan_tree(cr_state* s, size_t source, const char* full,
                      const char* rel, unsigned depth) {
  bool ok = true;
  DIR* d;
  if (depth > 64) {
    cli_error("%s: directories nested too deep (a symlink loop?)", full);
    return false;
  }
  if ((d = opendir(full)) == NULL) {
    cli_error("%s: %s", full, strerror(errno));
    return false;
  }
  for (struct dirent* e; ok && (e = readdir(d)) != NULL;) {
    struct stat st;
    char *child = NULL, *child_rel = NULL;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    /* kpackfs's own files, at the top of a mounted tree. */
    if (depth == 0 && strcmp(e->d_name, KPACK_LAYOUT_RESERVED_DIR) == 0)
      continue;
    if (asprintf(&child, "%s/%s", full, e->d_name) < 0)
      child = NULL;
    if (asprintf(&child_rel, "%s%s%s", rel, *rel ? "/" : "", e->d_name) < 0)
      child_rel = NULL;
    if (child == NULL || child_rel == NULL) {
      cli_error("out of memory");
      ok = false;
    } else if (!entry_type(e, child, &st)) {
      cli_error("%s: %s", child, strerror(errno));
      ok = false;
    } else if (S_ISDIR(st.st_mode)) {
      ok = scan_tree(s, source, child, child_rel, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      ok = scan_tree_file(s, source, child, child_rel);
    } else {
      cli_error("%s: not a regular file or directory", child);
      ok = false;
    }
    free(child);
    free(child_rel);
  }
  closedir(d);
  return ok;
}

typedef struct cr_fatbin_scan {
  cr_state* s;
  size_t source;
} cr_fatbin_scan;

static bool add_fatbin_entry(const kpack_fatbin_code_object_t* e, void* user) {
  cr_fatbin_scan* scan = user;
  return add_item(scan->s, (cr_item){.binary = strdup(e->binary),
                                     .arch = strdup(e->arch),
                                     .source = scan->source,
                                     .bundle = e->bundle,
                                     .entry = e->entry,
                                     .compressed = e->compressed});
}

/* Lists the AMDGPU entries of every bundle of a fat binary, reading entry
 * tables only. */
static bool scan_fatbin(cr_state* s, size_t source) {
  cr_source* src = &s->sources[source];
  kpack_fatbin_info_t info;
  kpack_error_t err = kpack_fatbin_open(src->path, &src->fatbin);
  if (err == KPACK_ERROR_IO_ERROR) {
    cli_input_error(src->path, err, errno); /* kpack_fatbin_open() keeps it */
    return false;
  }
  if (err == KPACK_SUCCESS)
    err = kpack_fatbin_get_info(src->fatbin, &info);
  if (err != KPACK_SUCCESS) {
    cli_host_error(src->path, err);
    return false;
  }
  if (!info.has_fatbin) {
    cli_error("%s: no .hip_fatbin section (not a HIP binary?)", src->path);
    return false;
  }
  if (info.bundle_count == 0) {
    cli_error("%s: .hip_fatbin holds no code object", src->path);
    return false;
  }
  if (s->verbose)
    fprintf(stderr, "kpack: %s: %zu code object%s (%s)\n", src->path,
            info.bundle_count, info.bundle_count == 1 ? "" : "s",
            info.has_wrappers ? "numbered by .hipFatBinSegment"
                              : "in .hip_fatbin order");
  cr_fatbin_scan scan = {s, source};
  return kpack_fatbin_list_code_objects(src->fatbin, src->path, src->name,
                                        add_fatbin_entry, &scan, cli_message,
                                        &s->verbose) == KPACK_SUCCESS;
}

/* Lists the kernels of an archive input; they are copied, not extracted. */
static bool scan_archive(cr_state* s, size_t source) {
  cr_source* src = &s->sources[source];
  size_t binaries;
  kpack_error_t err = kpack_get_binary_count(src->archive, &binaries);
  for (size_t b = 0; err == KPACK_SUCCESS && b < binaries; b++) {
    const char* binary;
    size_t arches;
    err = kpack_get_binary(src->archive, b, &binary);
    if (err == KPACK_SUCCESS)
      err = kpack_get_binary_arch_count(src->archive, binary, &arches);
    for (size_t i = 0; err == KPACK_SUCCESS && i < arches; i++) {
      const char* arch;
      err = kpack_get_binary_arch(src->archive, binary, i, &arch);
      if (err == KPACK_SUCCESS &&
          !add_item(s, (cr_item){.binary = strdup(binary),
                                 .arch = strdup(arch),
                                 .source = source}))
        return false;
    }
  }
  if (err != KPACK_SUCCESS) {
    cli_kerror(src->path, err);
    return false;
  }
  if (s->verbose)
    fprintf(stderr, "kpack: %s: archive, %zu binar%s\n", src->path, binaries,
            binaries == 1 ? "y" : "ies");
  return true;
}

static int compare_items(const void* a, const void* b) {
  const cr_item* x = a;
  const cr_item* y = b;
  int c = strcmp(x->binary, y->binary);
  return c != 0 ? c : strcmp(x->arch, y->arch);
}

static int compare_strings(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static const char* source_of(const cr_state* s, const cr_item* item) {
  return item->file != NULL ? item->file : s->sources[item->source].path;
}

static void free_item(cr_item* item) {
  free(item->binary);
  free(item->arch);
  free(item->file);
  free(item->metadata_file);
}

/* Gives each tree item its metadata file; one without a kernel beside it
 * is an error (unless --arch left that kernel out). Items are sorted. */
static bool attach_sidecars(cr_state* s) {
  for (size_t i = 0; i < s->sidecar_count; i++) {
    cr_sidecar* m = &s->sidecars[i];
    cr_item key = {.binary = m->binary, .arch = m->arch};
    size_t lo = 0, hi = s->count;
    while (lo < hi) { /* the first item not below (binary, arch) */
      size_t mid = lo + (hi - lo) / 2;
      if (compare_items(&s->items[mid], &key) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    cr_item* owner = NULL;
    for (; lo < s->count && compare_items(&s->items[lo], &key) == 0; lo++)
      if (s->items[lo].source == m->source && s->items[lo].file != NULL)
        owner = &s->items[lo];
    if (owner != NULL) {
      owner->metadata_file = m->file;
      m->file = NULL;
    } else if (cli_arch_listed(s->only_arches, s->only_count, m->arch, NULL)) {
      cli_error("%s: metadata without a kernel.hsaco beside it", m->file);
      return false;
    }
  }
  return true;
}

/* An item's bytes and metadata map (*meta NULL if it has none), malloc'ed,
 * to compare two inputs that hold the same kernel. */
static bool load_item(const cr_state* s, const cr_item* item, void** data,
                      size_t* size, void** meta, size_t* meta_size) {
  *data = *meta = NULL;
  *meta_size = 0;
  kpack_archive_t archive = s->sources[item->source].archive;
  if (archive != NULL) {
    const void* m;
    kpack_error_t err =
        kpack_get_kernel(archive, item->binary, item->arch, data, size);
    if (err == KPACK_SUCCESS)
      err = kpack_get_entry_metadata(archive, item->binary, item->arch, &m,
                                     meta_size);
    if (err == KPACK_SUCCESS && m != NULL) {
      if ((*meta = malloc(*meta_size)) == NULL)
        err = KPACK_ERROR_OUT_OF_MEMORY;
      else
        memcpy(*meta, m, *meta_size);
    }
    if (err != KPACK_SUCCESS) {
      cli_error("%s: %s for %s: %s (%s)", s->sources[item->source].path,
                item->binary, item->arch, kpack_error_string(err),
                cli_error_text(err));
      free(*data);
      *data = NULL;
      return false;
    }
    return true;
  }
  const char* failed = NULL;
  if (!cli_read_file(item->file, data, size))
    failed = item->file;
  else if (item->metadata_file != NULL &&
           !cli_read_file(item->metadata_file, meta, meta_size))
    failed = item->metadata_file;
  if (failed != NULL) {
    cli_error("%s: %s", failed, strerror(errno));
    free(*data);
    *data = NULL;
    return false;
  }
  return true;
}

/* An item's TOC type: an archive's entry says; a tree's kernel.hsaco and a
 * fat binary's entries are code objects. */
static const char* item_type(const cr_state* s, const cr_item* item) {
  kpack_archive_t archive = s->sources[item->source].archive;
  kpack_kernel_info_t info;
  if (archive != NULL &&
      kpack_get_kernel_info(archive, item->binary, item->arch, &info) ==
          KPACK_SUCCESS)
    return info.type;
  return "hsaco";
}

/* Two inputs give the same (binary, arch): fine if type, kernel and
 * metadata are identical (together they are the entry), an error naming
 * both otherwise. */
static bool same_kernel(const cr_state* s, const cr_item* a, const cr_item* b) {
  void *da = NULL, *db = NULL, *ma = NULL, *mb = NULL;
  size_t sa, sb = 0, la, lb = 0;
  const char* ta = item_type(s, a);
  const char* tb = item_type(s, b);
  if (strcmp(ta, tb) != 0) {
    cli_error("%s for %s: type '%s' in %s and type '%s' in %s", a->binary,
              a->arch, ta, source_of(s, a), tb, source_of(s, b));
    return false;
  }
  bool ok = load_item(s, a, &da, &sa, &ma, &la);
  ok = ok && load_item(s, b, &db, &sb, &mb, &lb);
  if (ok && (sa != sb || memcmp(da, db, sa) != 0)) {
    cli_error("%s for %s: different kernels in %s and in %s", a->binary,
              a->arch, source_of(s, a), source_of(s, b));
    ok = false;
  } else if (ok && (la != lb || (la > 0 && memcmp(ma, mb, la) != 0))) {
    cli_error(
        "%s for %s: the same kernel with different metadata in %s and "
        "in %s",
        a->binary, a->arch, source_of(s, a), source_of(s, b));
    ok = false;
  }
  free(da);
  free(db);
  free(ma);
  free(mb);
  return ok;
}

/* Which of two identical copies is kept, so that the result does not
 * depend on the order of the inputs: an archive's (its frame can be
 * carried over), the smaller stored one, then the first input path. */
static bool keep_first(const cr_state* s, const cr_item* a, const cr_item* b) {
  kpack_archive_t xa = s->sources[a->source].archive;
  kpack_archive_t xb = s->sources[b->source].archive;
  if ((xa != NULL) != (xb != NULL))
    return xa != NULL;
  if (xa != NULL) {
    kpack_kernel_info_t ia, ib;
    if (kpack_get_kernel_info(xa, a->binary, a->arch, &ia) == KPACK_SUCCESS &&
        kpack_get_kernel_info(xb, b->binary, b->arch, &ib) == KPACK_SUCCESS &&
        ia.stored_size != ib.stored_size)
      return ia.stored_size < ib.stored_size;
  }
  return strcmp(source_of(s, a), source_of(s, b)) <= 0;
}

/* Sorts, applies --arch, attaches metadata files, and settles a (binary,
 * arch) given by several inputs: identical copies collapse to one,
 * different ones are an error. */
static bool settle_items(cr_state* s) {
  size_t kept = 0;
  for (size_t i = 0; i < s->count; i++) {
    if (cli_arch_listed(s->only_arches, s->only_count, s->items[i].arch, NULL))
      s->items[kept++] = s->items[i];
    else
      free_item(&s->items[i]);
  }
  s->count = kept;
  if (s->count > 1) /* items is NULL when nothing was found */
    qsort(s->items, s->count, sizeof(*s->items), compare_items);
  if (!attach_sidecars(s))
    return false;
  kept = 0;
  bool ok = true;
  size_t i = 0;
  while (ok && i < s->count) {
    size_t j = i + 1, best = i;
    while (j < s->count && compare_items(&s->items[i], &s->items[j]) == 0)
      j++;
    for (size_t k = i + 1; ok && k < j; k++) {
      const cr_item *a = &s->items[i], *b = &s->items[k];
      if (s->sources[a->source].fatbin != NULL ||
          s->sources[b->source].fatbin != NULL) {
        cli_error("%s for %s: given twice, by %s and by %s", a->binary, a->arch,
                  source_of(s, a), source_of(s, b));
        ok = false;
      } else if (!same_kernel(s, a, b)) {
        ok = false;
      } else if (!keep_first(s, &s->items[best], b)) {
        best = k;
      }
    }
    if (!ok)
      break;
    for (size_t k = i; k < j; k++)
      if (k != best)
        free_item(&s->items[k]);
    s->items[kept++] = s->items[best];
    i = j;
  }
  /* On failure the unsettled rest stays, for free_state to free. */
  if (i < s->count)
    memmove(s->items + kept, s->items + i, (s->count - i) * sizeof(*s->items));
  s->count = kept + (s->count - i);
  return ok;
}

/* Every arch of a kernel kept, and every arch an input archive declares
 * that --arch keeps, sorted: never an --arch as given, which may name no
 * kernel (a bare gfx90a beside gfx90a:xnack- objects would make the loader
 * try this archive for a bare gfx90a agent and stop at KERNEL_NOT_FOUND).
 * The strings belong to the items and the archives. */
static const char** declared_arches(const cr_state* s, size_t* count) {
  size_t total = s->count;
  for (size_t i = 0; i < s->source_count; i++) {
    size_t n = 0;
    if (s->sources[i].archive != NULL)
      kpack_get_architecture_count(s->sources[i].archive, &n);
    total += n;
  }
  const char** arches = calloc(total ? total : 1, sizeof(*arches));
  if (arches == NULL)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < s->count; i++)
    arches[n++] = s->items[i].arch;
  for (size_t i = 0; i < s->source_count; i++) {
    size_t declared = 0;
    kpack_archive_t a = s->sources[i].archive;
    if (a != NULL)
      kpack_get_architecture_count(a, &declared);
    for (size_t j = 0; j < declared && n < total; j++)
      if (kpack_get_architecture(a, j, &arches[n]) == KPACK_SUCCESS &&
          cli_arch_listed(s->only_arches, s->only_count, arches[n], NULL))
        n++;
  }
  qsort(arches, n, sizeof(*arches), compare_strings);
  size_t unique = 0;
  for (size_t i = 0; i < n; i++)
    if (unique == 0 || strcmp(arches[unique - 1], arches[i]) != 0)
      arches[unique++] = arches[i];
  *count = unique;
  return arches;
}

/* ---- writing ------------------------------------------------------------- */

static void show_progress(cli_progress* p, size_t done, size_t total,
                          uint64_t bytes) {
  char size[32];
  cli_progress_show(p, done == total, "kpack: create: %zu/%zu kernels, %s",
                    done, total, cli_human_size(size, bytes));
}

/* Copies an archive's kernel (its frame byte for byte unless `flags` ask
 * to recompress) with its metadata. */
static bool copy_item(const cr_state* s, const cr_item* item, kpack_writer_t* w,
                      unsigned flags, uint64_t* size) {
  const cr_source* src = &s->sources[item->source];
  kpack_kernel_info_t info;
  kpack_error_t err =
      kpack_get_kernel_info(src->archive, item->binary, item->arch, &info);
  if (err != KPACK_SUCCESS) {
    cli_error("%s: %s for %s: %s (%s)", src->path, item->binary, item->arch,
              kpack_error_string(err), cli_error_text(err));
    return false;
  }
  err = kpack_writer_copy_kernel(w, src->archive, item->binary, item->arch,
                                 flags);
  if (err != KPACK_SUCCESS) {
    /* A full disk is the output's failure, not the input archive's. */
    cli_writer_error(w, err, s->out, src->path, item->binary, item->arch);
    return false;
  }
  *size = info.size;
  return true;
}

/* Adds a tree's kernel with the metadata map beside it, if any. */
static bool add_tree_item(const cr_state* s, const cr_item* item,
                          kpack_writer_t* w, uint64_t* size) {
  void *data = NULL, *meta = NULL;
  size_t n, meta_size = 0;
  bool ok = false;
  if (!cli_read_file(item->file, &data, &n)) {
    cli_error("%s: %s", item->file, strerror(errno));
    goto done;
  }
  if (item->metadata_file != NULL &&
      !cli_read_file(item->metadata_file, &meta, &meta_size)) {
    cli_error("%s: %s", item->metadata_file, strerror(errno));
    goto done;
  }
  kpack_error_t err = kpack_writer_add_kernel_with_metadata(
      w, item->binary, item->arch, data, n, meta, meta_size);
  if (err == KPACK_ERROR_INVALID_ARGUMENT && meta != NULL) {
    cli_error("%s: not one MessagePack map (%s)", item->metadata_file,
              kpack_error_string(err));
  } else if (err != KPACK_SUCCESS) {
    cli_writer_error(w, err, s->out, NULL, item->binary, item->arch);
  } else {
    ok = true;
    *size = n;
  }
done:
  free(data);
  free(meta);
  return ok;
}

/* Adds every item; returns false (having reported why) on any failure. */
static bool add_all(const cr_state* s, kpack_writer_t* w, unsigned flags,
                    bool progress, uint64_t* bytes) {
  bool ok = true;
  cli_progress prog = {.enabled = progress};
  /* One binary's bundles, one code object. */
  kpack_fatbin_reader_t* reader = NULL;
  if (kpack_fatbin_reader_create(&reader) != KPACK_SUCCESS) {
    cli_error("out of memory");
    return false;
  }
  for (size_t i = 0; ok && i < s->count; i++) {
    const cr_item* item = &s->items[i];
    const cr_source* src = &s->sources[item->source];
    const void* data;
    size_t size;
    if (cli_interrupted()) {
      ok = false;
      break;
    }
    if (i > 0 && strcmp(item->binary, s->items[i - 1].binary) != 0)
      kpack_fatbin_reader_release(reader);
    /* Archives and trees; what follows reads fat binaries. */
    if (src->archive != NULL || item->file != NULL) {
      uint64_t added = 0;
      ok = src->archive != NULL ? copy_item(s, item, w, flags, &added)
                                : add_tree_item(s, item, w, &added);
      *bytes += added;
      show_progress(&prog, i + 1, s->count, *bytes);
      continue;
    }
    if (kpack_fatbin_reader_read(reader, src->fatbin, src->path, item->bundle,
                                 item->entry, item->compressed, &data, &size,
                                 cli_message, NULL) != KPACK_SUCCESS) {
      ok = false;
      break;
    }
    kpack_error_t err =
        kpack_writer_add_kernel(w, item->binary, item->arch, data, size);
    if (err != KPACK_SUCCESS) {
      cli_writer_error(w, err, s->out, NULL, item->binary, item->arch);
      ok = false;
    }
    *bytes += size;
    show_progress(&prog, i + 1, s->count, *bytes);
  }
  cli_progress_end(&prog);
  kpack_fatbin_reader_destroy(reader);
  return ok;
}

/* ---- command ------------------------------------------------------------- */

static bool add_source(cr_state* s, const char* path, char* name) {
  cr_source* p =
      cli_grow(s->sources, s->source_count, &s->source_cap, sizeof(*p), 4);
  if (p == NULL) {
    free(name);
    return false;
  }
  s->sources = p;
  s->sources[s->source_count++] = (cr_source){.path = path, .name = name};
  return true;
}

/* --fatbin ELF[=NAME]: splits at the first '=' unless the whole argument is
 * an existing file. The name defaults to the ELF's file name. */
static bool add_fatbin_source(cr_state* s, char* arg) {
  char* eq = strchr(arg, '=');
  struct stat st;
  if (eq != NULL && stat(arg, &st) != 0)
    *eq = '\0';
  else
    eq = NULL;
  const char* slash = strrchr(arg, '/');
  char* name = strdup(eq != NULL ? eq + 1 : slash ? slash + 1 : arg);
  if (name == NULL)
    return false;
  const char* why = kpack_layout_binary_problem(name);
  if (why != NULL) {
    cli_error("--fatbin %s: binary name '%s' is not a relative path (%s)", arg,
              name, why);
    free(name);
    return false;
  }
  return add_source(s, arg, name);
}

/* --group or --family not given: the value the input archives that set
 * one agree on, or "" (with a warning) when they differ. */
static const char* agreed_header(const cr_state* s, bool family) {
  const char* agreed = NULL;
  const char* first_path = NULL;
  for (size_t i = 0; i < s->source_count; i++) {
    const char* v;
    kpack_archive_t a = s->sources[i].archive;
    if (a == NULL ||
        (family ? kpack_get_gfx_arch_family(a, &v)
                : kpack_get_group_name(a, &v)) != KPACK_SUCCESS ||
        *v == '\0')
      continue; /* not an archive, or one that does not say */
    if (agreed == NULL) {
      agreed = v;
      first_path = s->sources[i].path;
    } else if (strcmp(agreed, v) != 0) {
      cli_error(
          "warning: %s differs between %s ('%s') and %s ('%s'); "
          "written as \"\" (set it with %s)",
          family ? "gfx_arch_family" : "group_name", first_path, agreed,
          s->sources[i].path, v, family ? "--family" : "--group");
      return NULL;
    }
  }
  return agreed;
}

/* An INPUT that is not a directory must be an archive. */
static bool open_archive_source(cr_source* src) {
  kpack_error_t err = kpack_open(src->path, &src->archive);
  if (err == KPACK_SUCCESS)
    return true;
  cli_input_error(src->path, err, errno); /* kpack_open() keeps errno */
  if (err == KPACK_ERROR_INVALID_FORMAT) {
    char magic[4] = {0};
    FILE* f = fopen(src->path, "rb");
    if (f != NULL && fread(magic, 1, 4, f) == 4 &&
        memcmp(magic,
               "\x7f"
               "ELF",
               4) == 0)
      cli_error("%s: an ELF file: a HIP binary goes after --fatbin", src->path);
    if (f != NULL)
      fclose(f);
  }
  return false;
}

static void free_state(cr_state* s) {
  for (size_t i = 0; i < s->count; i++)
    free_item(&s->items[i]);
  free(s->items);
  for (size_t i = 0; i < s->sidecar_count; i++) {
    free(s->sidecars[i].binary);
    free(s->sidecars[i].arch);
    free(s->sidecars[i].file);
  }
  free(s->sidecars);
  for (size_t i = 0; i < s->source_count; i++) {
    free(s->sources[i].name);
    kpack_fatbin_close(s->sources[i].fatbin);
    kpack_close(s->sources[i].archive);
  }
  free(s->sources);
  free(s->only_arches);
}

static int create_run(int argc, char** argv) {
  enum { OPT_NO_COMPRESS = 256, OPT_GROUP, OPT_FAMILY, OPT_ARCH, OPT_FATBIN };
  static const struct option options[] = {
      {"output", required_argument, NULL, 'o'},
      {"level", required_argument, NULL, 'l'},
      {"no-compress", no_argument, NULL, OPT_NO_COMPRESS},
      {"jobs", required_argument, NULL, 'j'},
      {"group", required_argument, NULL, OPT_GROUP},
      {"family", required_argument, NULL, OPT_FAMILY},
      {"arch", required_argument, NULL, OPT_ARCH},
      {"fatbin", required_argument, NULL, OPT_FATBIN},
      {"verbose", no_argument, NULL, 'v'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const cli_command* cmd = &cli_create_command;
  cr_state s = {0};
  kpack_writer_options_t wo = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                               .threads = cli_default_threads()};
  kpack_writer_t* writer = NULL;
  const char* out = NULL;
  const char** arches = NULL;
  bool quiet = false, level_given = false;
  int status = CLI_FAIL, c;
  uint64_t bytes = 0;
  double start = cli_seconds();

  s.only_arches = calloc((size_t)argc, sizeof(*s.only_arches));
  if (s.only_arches == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  while ((c = getopt_long(argc, argv, "o:l:j:vqh", options, NULL)) != -1) {
    switch (c) {
      case 'o':
        out = optarg;
        break;
      case 'l':
        if (!cli_parse_level(cmd, optarg, &wo.zstd_level)) {
          status = CLI_USAGE;
          goto done;
        }
        level_given = true;
        break;
      case OPT_NO_COMPRESS:
        wo.scheme = KPACK_COMPRESSION_NOOP;
        break;
      case 'j':
        if (!cli_parse_threads(cmd, optarg, &wo.threads)) {
          status = CLI_USAGE;
          goto done;
        }
        break;
      case OPT_GROUP:
        wo.group_name = optarg;
        break;
      case OPT_FAMILY:
        wo.gfx_arch_family = optarg;
        break;
      case OPT_ARCH: {
        bool seen = false;
        for (size_t i = 0; i < s.only_count; i++)
          seen = seen || strcmp(s.only_arches[i], optarg) == 0;
        if (!cli_check_target(cmd, "--arch", optarg)) {
          status = CLI_USAGE;
          goto done;
        }
        if (!seen)
          s.only_arches[s.only_count++] = optarg;
        break;
      }
      case OPT_FATBIN:
        if (!add_fatbin_source(&s, optarg))
          goto done;
        break;
      case 'v':
        s.verbose = true;
        break;
      case 'q':
        quiet = true;
        break;
      case 'h':
        status = cli_print_manual(cmd);
        goto done;
      default:
        status = cli_option_error(cmd, argv, "o:l:j:vqh");
        goto done;
    }
  }
  if (out == NULL) {
    status = cli_usage_error(cmd, "no output: -o OUT is required");
    goto done;
  }
  if (level_given && wo.scheme == KPACK_COMPRESSION_NOOP) {
    status = cli_usage_error(cmd, "-l and --no-compress exclude each other");
    goto done;
  }
  for (int i = optind; i < argc; i++) {
    struct stat st;
    if (!add_source(&s, argv[i], NULL)) {
      cli_error("out of memory");
      goto done;
    }
    if (stat(argv[i], &st) == 0 && !S_ISDIR(st.st_mode) &&
        !open_archive_source(&s.sources[s.source_count - 1]))
      goto done;
  }
  if (s.source_count == 0) {
    status = cli_usage_error(cmd, "no input: give a DIR or --fatbin ELF");
    goto done;
  }

  cli_catch_signals();
  for (size_t i = 0; i < s.source_count; i++) {
    bool ok = s.sources[i].name != NULL ? scan_fatbin(&s, i)
              : s.sources[i].archive != NULL
                  ? scan_archive(&s, i)
                  : scan_tree(&s, i, s.sources[i].path, "", 0);
    if (!ok)
      goto done;
    if (cli_interrupted())
      goto interrupted;
  }
  if (!settle_items(&s))
    goto done;
  if (s.count == 0) {
    cli_error("no kernels found in the input%s",
              s.only_count ? " for the --arch given" : "");
    goto done;
  }
  for (size_t i = 0; i < s.only_count; i++) {
    bool used = false;
    for (size_t j = 0; !used && j < s.count; j++)
      used = cli_arch_listed(&s.only_arches[i], 1, s.items[j].arch, NULL);
    if (!used)
      cli_error(
          "warning: --arch %s: no kernel in the input could be served to "
          "such an agent; the archive does not declare it",
          s.only_arches[i]);
  }
  if ((arches = declared_arches(&s, &wo.gfx_arch_count)) == NULL) {
    cli_error("out of memory");
    goto done;
  }
  wo.gfx_arches = arches;
  if (wo.group_name == NULL)
    wo.group_name = agreed_header(&s, false);
  if (wo.gfx_arch_family == NULL)
    wo.gfx_arch_family = agreed_header(&s, true);

  s.out = out;
  kpack_error_t err = kpack_writer_create(out, &wo, &writer);
  if (err != KPACK_SUCCESS) {
    cli_output_error(out, err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
    goto done;
  }
  bool progress = !quiet && isatty(STDERR_FILENO);
  if (!add_all(&s, writer, level_given ? KPACK_WRITER_RECOMPRESS : 0u, progress,
               &bytes)) {
    kpack_writer_failure_t why;
    kpack_writer_get_failure(writer, &why);
    kpack_writer_abort(writer);
    writer = NULL;
    if (cli_interrupted())
      goto interrupted;
    if (why.side != KPACK_WRITER_SIDE_ARCHIVE) /* else said already */
      cli_error("%s: not written", out);
    goto done;
  }
  if (cli_interrupted()) {
    kpack_writer_abort(writer);
    writer = NULL;
    goto interrupted;
  }
  err = kpack_writer_finish(writer);
  writer = NULL;
  if (err != KPACK_SUCCESS) {
    cli_output_error(out, err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
    goto done;
  }
  if (!quiet) {
    struct stat st;
    char a[32], b[32], r[32], rate[32];
    double seconds = cli_seconds() - start;
    uint64_t stored = stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
    printf("%s: %zu kernel%s, %s -> %s (%s) in %.2f s, %s/s, %u thread%s\n",
           out, s.count, s.count == 1 ? "" : "s", cli_human_size(a, bytes),
           cli_human_size(b, stored), cli_ratio(r, bytes, stored), seconds,
           cli_human_size(rate, seconds > 0 ? (uint64_t)(bytes / seconds) : 0),
           wo.threads, wo.threads == 1 ? "" : "s");
  }
  status = CLI_OK;
  goto done;

interrupted:
  cli_error("create: interrupted; %s not written", out);
  status = CLI_INTERRUPTED;
done:
  kpack_writer_abort(writer);
  free(arches);
  free_state(&s);
  return status;
}
