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

static const char create_manual[] =
    "NAME\n"
    "    kpack create - pack GPU code objects into a kpack archive\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack create -o OUT [-l LEVEL | --no-compress] [-j N] [--group G]\n"
    "                 [--family F] [--arch ARCH]... [-v | -q]\n"
    "                 [DIR]... [--fatbin ELF[=BINARY_NAME]]...\n"
    "\n"
    "DESCRIPTION\n"
    "    Each DIR is a tree in the layout kpackfs mounts and `kpack extract`\n"
    "    writes: DIR/<binary>/<arch>/kernel.hsaco, where <binary> is a\n"
    "    relative path that may contain '/' and ends in #N, the code object\n"
    "    index (e.g. lib/librocrand.so.1#0/gfx90a:xnack-/kernel.hsaco). A\n"
    "    .kpackfs directory at the top of a mounted tree is skipped; any\n"
    "    other file is an error.\n"
    "\n"
    "    --fatbin ELF reads a HIP host binary (executable, shared library or\n"
    "    object): the clang offload bundles in its .hip_fatbin section, plain\n"
    "    or compressed (CCOB, zlib or zstd). Code object N is the bundle the\n"
    "    N-th __CudaFatBinaryWrapper in .hipFatBinSegment points at (the\n"
    "    co_index the HIP runtime passes to the loader); without that section\n"
    "    the bundles are taken in section order. Every "
    "hipv4-amdgcn-amd-amdhsa--\n"
    "    <arch> (or hip-amdgcn-...) entry becomes the kernel BINARY_NAME#N "
    "for\n"
    "    <arch>; host entries are skipped. BINARY_NAME defaults to the ELF's\n"
    "    file name; give the install-tree path the HIPK metadata names, e.g.\n"
    "    --fatbin build/librocrand.so.1.1=lib/librocrand.so.1. The first '='\n"
    "    separates the name, unless the whole argument names a file.\n"
    "\n"
    "    Kernels are added in byte-wise (binary, arch) order, so the same\n"
    "    kernels give the same archive, byte for byte, whatever the input\n"
    "    order or -j. The archive declares the architectures of --arch, in\n"
    "    that order, or else every architecture present, sorted. OUT is\n"
    "    written to a temporary file and renamed into place: on an error or\n"
    "    an interrupt (Ctrl-C) no partial archive is left behind.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output OUT      the archive to create (replaced if it exists)\n"
    "    -l, --level LEVEL     zstd level, 1-22 (default 3)\n"
    "        --no-compress     store kernels raw (scheme \"none\")\n"
    "    -j, --jobs N          compression threads (default 1; 0: one per "
    "CPU)\n"
    "        --group G         TOC group_name, e.g. blas (default \"\")\n"
    "        --family F        TOC gfx_arch_family, e.g. gfx94X (default "
    "\"\")\n"
    "        --arch ARCH       pack only kernels for ARCH and declare these\n"
    "                          architectures in this order (repeatable)\n"
    "        --fatbin ELF[=BINARY_NAME]\n"
    "                          read the code objects of a HIP host binary\n"
    "    -v, --verbose         describe each input on standard error\n"
    "    -q, --quiet           no summary line\n"
    "    -h, --help            print this manual\n"
    "\n"
    "    Progress is shown on standard error when it is a terminal.\n"
    "\n"
    "EXAMPLES\n"
    "    kpack create -o rand.kpack -j8 --group rand "
    "--fatbin librocrand.so.1.1=lib/librocrand.so.1\n"
    "    kpack create -o rand_gfx90a.kpack --arch gfx90a:xnack- --arch "
    "gfx90a:xnack+ \\\n"
    "        --fatbin librocrand.so.1.1=lib/librocrand.so.1\n"
    "    kpack extract -C tree old.kpack && kpack create -o new.kpack -l 19 "
    "tree\n"
    "\n"
    "EXIT STATUS\n"
    "    0 the archive was written; 1 an input or the output failed (OUT is\n"
    "    left as it was); 2 bad command line; 130 interrupted.\n";

static int create_run(int argc, char** argv);

const cli_command cli_create_command = {
    "create", "pack a tree or HIP fat binaries (--fatbin) into an archive",
    create_manual, create_run};

/* An input: a tree, or a fat binary with the name its kernels get. */
typedef struct cr_source {
  const char* path;
  char* name;             /* fat binary: BINARY_NAME */
  kpack_fatbin_t* fatbin; /* NULL for a tree */
} cr_source;

/* One kernel to add: from a file of a tree or an entry of a bundle. */
typedef struct cr_item {
  char* binary;
  char* arch;
  char* file; /* tree kernel file; NULL for a fat binary entry */
  size_t source;
  size_t bundle, entry; /* fat binary: co_index and entry index */
  bool compressed;      /* fat binary: the bundle is a CCOB envelope */
} cr_item;

/* A bundle kept while the kernels of one binary are added: the entry table
 * of a plain bundle, whose code objects are read one at a time, or the
 * whole of a compressed one, decompressed once. */
typedef struct cr_open_bundle {
  size_t source, bundle;
  kpack_bundle_t* handle;
} cr_open_bundle;

typedef struct cr_state {
  cr_source* sources;
  size_t source_count;
  cr_item* items;
  size_t count, cap;
  const char** only_arches; /* --arch, deduplicated, in order */
  size_t only_count;
  bool verbose;
} cr_state;

/* ---- scanning ---------------------------------------------------------------
 */

static bool add_item(cr_state* s, cr_item item) {
  if (s->count == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    cr_item* p = realloc(s->items, cap * sizeof(*p));
    if (p == NULL)
      goto fail;
    s->items = p;
    s->cap = cap;
  }
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

/* A file of a tree: only <binary>/<arch>/kernel.hsaco belongs there. */
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
  if (strncmp(name, "kernel.", 7) != 0 || arch_start == NULL ||
      arch_start == rel) {
    cli_error("%s: not in the kpackfs layout <binary>#N/<arch>/kernel.hsaco",
              full);
    return false;
  }
  if (strcmp(name + 7, "hsaco") != 0) {
    cli_error("%s: kernel type '%s' not supported (only hsaco)", full,
              name + 7);
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
  return add_item(s, (cr_item){.binary = binary,
                               .arch = arch,
                               .file = strdup(full),
                               .source = source});
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
    if (depth == 0 && strcmp(e->d_name, ".kpackfs") == 0)
      continue;
    if (asprintf(&child, "%s/%s", full, e->d_name) < 0)
      child = NULL;
    if (asprintf(&child_rel, "%s%s%s", rel, *rel ? "/" : "", e->d_name) < 0)
      child_rel = NULL;
    if (child == NULL || child_rel == NULL) {
      cli_error("out of memory");
      ok = false;
    } else if (stat(child, &st) != 0) {
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

static const char* compression_name(const kpack_bundle_info_t* info) {
  switch (info->compression) {
    case KPACK_BUNDLE_ZLIB:
      return "zlib";
    case KPACK_BUNDLE_ZSTD:
      return "zstd";
    case KPACK_BUNDLE_UNCOMPRESSED:
      break;
  }
  return "none";
}

/* Lists the AMDGPU entries of every bundle of a fat binary, reading entry
 * tables only. */
static bool scan_fatbin(cr_state* s, size_t source) {
  cr_source* src = &s->sources[source];
  kpack_fatbin_info_t info;
  kpack_bundle_t* bundle = NULL;
  bool ok = false;
  kpack_error_t err = kpack_fatbin_open(src->path, &src->fatbin);
  if (err == KPACK_SUCCESS)
    err = kpack_fatbin_get_info(src->fatbin, &info);
  if (err != KPACK_SUCCESS) {
    cli_kerror(src->path, err);
    goto done;
  }
  if (!info.has_fatbin) {
    cli_error("%s: no .hip_fatbin section (not a HIP binary?)", src->path);
    goto done;
  }
  if (info.bundle_count == 0) {
    cli_error("%s: .hip_fatbin holds no code object", src->path);
    goto done;
  }
  if (s->verbose)
    fprintf(stderr, "kpack: %s: %zu code object%s (%s)\n", src->path,
            info.bundle_count, info.bundle_count == 1 ? "" : "s",
            info.has_wrappers ? "numbered by .hipFatBinSegment"
                              : "in .hip_fatbin order");
  for (size_t b = 0; b < info.bundle_count; b++) {
    kpack_bundle_info_t binfo;
    size_t device = 0;
    err = kpack_fatbin_list_bundle(src->fatbin, b, &bundle);
    if (err != KPACK_SUCCESS) {
      cli_error("%s: code object %zu: %s (%s)", src->path, b,
                kpack_error_string(err), cli_error_text(err));
      goto done;
    }
    kpack_bundle_get_info(bundle, &binfo);
    for (size_t i = 0; i < binfo.entry_count; i++) {
      kpack_bundle_entry_t e;
      char* binary = NULL;
      kpack_bundle_get_entry(bundle, i, &e);
      if (e.arch == NULL)
        continue; /* host code, or another offload kind */
      if (!cli_safe_component(e.arch)) {
        cli_error(
            "%s: code object %zu: target '%s' cannot be a directory "
            "name",
            src->path, b, e.arch);
        goto done;
      }
      if (asprintf(&binary, "%s#%zu", src->name, b) < 0)
        binary = NULL;
      if (!add_item(s, (cr_item){.binary = binary,
                                 .arch = strdup(e.arch),
                                 .source = source,
                                 .bundle = b,
                                 .entry = i,
                                 .compressed = binfo.compression !=
                                               KPACK_BUNDLE_UNCOMPRESSED}))
        goto done;
      device++;
    }
    if (s->verbose)
      fprintf(stderr,
              "kpack: %s: code object %zu: %zu entries, %zu for AMD GPUs, "
              "compression %s\n",
              src->path, b, binfo.entry_count, device,
              compression_name(&binfo));
    kpack_bundle_free(bundle);
    bundle = NULL;
  }
  ok = true;
done:
  kpack_bundle_free(bundle);
  return ok;
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

/* Sorts, applies --arch and rejects a (binary, arch) given twice. */
static bool settle_items(cr_state* s) {
  size_t kept = 0;
  for (size_t i = 0; i < s->count; i++) {
    bool keep = s->only_count == 0;
    for (size_t j = 0; !keep && j < s->only_count; j++)
      keep = strcmp(s->items[i].arch, s->only_arches[j]) == 0;
    if (keep) {
      s->items[kept++] = s->items[i];
    } else {
      free(s->items[i].binary);
      free(s->items[i].arch);
      free(s->items[i].file);
    }
  }
  s->count = kept;
  qsort(s->items, s->count, sizeof(*s->items), compare_items);
  for (size_t i = 1; i < s->count; i++) {
    if (compare_items(&s->items[i - 1], &s->items[i]) == 0) {
      cli_error("%s for %s: given twice, by %s and by %s", s->items[i].binary,
                s->items[i].arch, source_of(s, &s->items[i - 1]),
                source_of(s, &s->items[i]));
      return false;
    }
  }
  return true;
}

/* --arch, or every arch present, sorted. The strings belong to the items. */
static const char** declared_arches(const cr_state* s, size_t* count) {
  if (s->only_count > 0) {
    *count = s->only_count;
    return s->only_arches;
  }
  const char** arches = calloc(s->count ? s->count : 1, sizeof(*arches));
  if (arches == NULL)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < s->count; i++)
    arches[n++] = s->items[i].arch;
  qsort(arches, n, sizeof(*arches), compare_strings);
  size_t unique = 0;
  for (size_t i = 0; i < n; i++)
    if (unique == 0 || strcmp(arches[unique - 1], arches[i]) != 0)
      arches[unique++] = arches[i];
  *count = unique;
  return arches;
}

/* ---- writing ----------------------------------------------------------------
 */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The bundle holding a fat binary item, opened once per binary name: items
 * are sorted by binary, so all entries of one bundle come together (two
 * fat binaries with the same name interleave, hence a small set). */
static kpack_error_t bundle_for(const cr_state* s, const cr_item* item,
                                cr_open_bundle* open, size_t* open_count,
                                kpack_bundle_t** out) {
  for (size_t i = 0; i < *open_count; i++)
    if (open[i].source == item->source && open[i].bundle == item->bundle) {
      *out = open[i].handle;
      return KPACK_SUCCESS;
    }
  const kpack_fatbin_t* fatbin = s->sources[item->source].fatbin;
  kpack_error_t err = item->compressed
                          ? kpack_fatbin_get_bundle(fatbin, item->bundle, out)
                          : kpack_fatbin_list_bundle(fatbin, item->bundle, out);
  if (err == KPACK_SUCCESS)
    open[(*open_count)++] = (cr_open_bundle){item->source, item->bundle, *out};
  return err;
}

static void close_bundles(cr_open_bundle* open, size_t* open_count) {
  for (size_t i = 0; i < *open_count; i++)
    kpack_bundle_free(open[i].handle);
  *open_count = 0;
}

typedef struct cr_progress {
  bool enabled;
  double last;
} cr_progress;

static void show_progress(cr_progress* p, size_t done, size_t total,
                          uint64_t bytes) {
  char size[32];
  double t = now_seconds();
  if (!p->enabled || (t - p->last < 0.1 && done < total))
    return;
  p->last = t;
  fprintf(stderr, "\rkpack: create: %zu/%zu kernels, %s\033[K", done, total,
          cli_human_size(size, bytes));
}

/* Adds every item; returns false (having reported why) on any failure. */
static bool add_all(const cr_state* s, kpack_writer_t* w, bool progress,
                    uint64_t* bytes) {
  bool ok = true;
  cr_open_bundle* open = calloc(s->source_count, sizeof(*open));
  size_t open_count = 0;
  cr_progress prog = {.enabled = progress};
  void* code = NULL; /* one code object of a plain bundle at a time */
  size_t code_cap = 0;
  if (open == NULL) {
    cli_error("out of memory");
    return false;
  }
  for (size_t i = 0; ok && i < s->count; i++) {
    const cr_item* item = &s->items[i];
    void* owned = NULL;
    const void* data;
    size_t size;
    kpack_error_t err;
    if (cli_interrupted()) {
      ok = false;
      break;
    }
    if (i > 0 && strcmp(item->binary, s->items[i - 1].binary) != 0)
      close_bundles(open, &open_count);
    if (item->file != NULL) {
      if (!cli_read_file(item->file, &owned, &size)) {
        cli_error("%s: %s", item->file, strerror(errno));
        ok = false;
        break;
      }
      data = owned;
    } else {
      kpack_bundle_t* bundle;
      kpack_bundle_entry_t e;
      err = bundle_for(s, item, open, &open_count, &bundle);
      if (err == KPACK_SUCCESS)
        err = kpack_bundle_get_entry(bundle, item->entry, &e);
      if (err == KPACK_SUCCESS && e.data == NULL) {
        if (e.size > code_cap) {
          void* p = e.size <= SIZE_MAX ? realloc(code, (size_t)e.size) : NULL;
          if (p == NULL) {
            cli_error("out of memory");
            ok = false;
            break;
          }
          code = p;
          code_cap = (size_t)e.size;
        }
        err = kpack_bundle_read_entry(bundle, item->entry, code, code_cap);
        e.data = code;
      }
      if (err != KPACK_SUCCESS) {
        cli_error("%s: code object %zu: %s (%s)", s->sources[item->source].path,
                  item->bundle, kpack_error_string(err), cli_error_text(err));
        ok = false;
        break;
      }
      data = e.data;
      size = (size_t)e.size;
    }
    err = kpack_writer_add_kernel(w, item->binary, item->arch, data, size);
    free(owned);
    if (err != KPACK_SUCCESS) {
      char subject[512];
      snprintf(subject, sizeof(subject), "%s for %s", item->binary, item->arch);
      cli_kerror(subject, err);
      ok = false;
    }
    *bytes += size;
    show_progress(&prog, i + 1, s->count, *bytes);
  }
  if (prog.enabled)
    fputs("\r\033[K", stderr);
  close_bundles(open, &open_count);
  free(open);
  free(code);
  return ok;
}

/* ---- command ----------------------------------------------------------------
 */

static bool add_source(cr_state* s, const char* path, char* name) {
  cr_source* p = realloc(s->sources, (s->source_count + 1) * sizeof(*p));
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
  if (!cli_safe_binary_name(name)) {
    cli_error("--fatbin %s: binary name '%s' is not a relative path", arg,
              name);
    free(name);
    return false;
  }
  return add_source(s, arg, name);
}

static void free_state(cr_state* s) {
  for (size_t i = 0; i < s->count; i++) {
    free(s->items[i].binary);
    free(s->items[i].arch);
    free(s->items[i].file);
  }
  free(s->items);
  for (size_t i = 0; i < s->source_count; i++) {
    free(s->sources[i].name);
    kpack_fatbin_close(s->sources[i].fatbin);
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
  kpack_writer_options_t wo = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* writer = NULL;
  const char* out = NULL;
  const char** arches = NULL;
  bool quiet = false, level_given = false;
  unsigned long value;
  int status = CLI_FAIL, c;
  uint64_t bytes = 0;
  double start = now_seconds();

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
        if (!cli_parse_uint(optarg, 1, 22, &value)) {
          status = cli_usage_error(cmd, "-l takes a level from 1 to 22");
          goto done;
        }
        wo.zstd_level = (int)value;
        level_given = true;
        break;
      case OPT_NO_COMPRESS:
        wo.scheme = KPACK_COMPRESSION_NOOP;
        break;
      case 'j':
        if (!cli_parse_uint(optarg, 0, 1024, &value)) {
          status = cli_usage_error(cmd, "-j takes a thread count, 0-1024");
          goto done;
        }
        if (value == 0) {
          long cpus = sysconf(_SC_NPROCESSORS_ONLN);
          value = cpus > 0 ? (unsigned long)cpus : 1;
        }
        wo.threads = (unsigned)value;
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
        if (!cli_safe_component(optarg)) {
          status = cli_usage_error(cmd,
                                   "--arch '%s' cannot be a directory "
                                   "name",
                                   optarg);
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
        status = cli_usage_error(cmd, "unknown option");
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
    if (stat(argv[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
      status = cli_usage_error(cmd,
                               "%s is not a directory (a HIP binary goes "
                               "after --fatbin)",
                               argv[i]);
      goto done;
    }
    if (!add_source(&s, argv[i], NULL)) {
      cli_error("out of memory");
      goto done;
    }
  }
  if (s.source_count == 0) {
    status = cli_usage_error(cmd, "no input: give a DIR or --fatbin ELF");
    goto done;
  }

  cli_catch_signals();
  for (size_t i = 0; i < s.source_count; i++) {
    bool ok = s.sources[i].name != NULL
                  ? scan_fatbin(&s, i)
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
      used = strcmp(s.items[j].arch, s.only_arches[i]) == 0;
    if (!used)
      cli_error("warning: no kernel for --arch %s; declared anyway",
                s.only_arches[i]);
  }
  if ((arches = declared_arches(&s, &wo.gfx_arch_count)) == NULL) {
    cli_error("out of memory");
    goto done;
  }
  wo.gfx_arches = arches;

  kpack_error_t err = kpack_writer_create(out, &wo, &writer);
  if (err != KPACK_SUCCESS) {
    cli_kerror(out, err);
    goto done;
  }
  bool progress = !quiet && isatty(STDERR_FILENO);
  if (!add_all(&s, writer, progress, &bytes)) {
    kpack_writer_abort(writer);
    writer = NULL;
    if (cli_interrupted())
      goto interrupted;
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
    cli_kerror(out, err);
    goto done;
  }
  if (!quiet) {
    struct stat st;
    char a[32], b[32], r[32], rate[32];
    double seconds = now_seconds() - start;
    uint64_t stored = stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
    printf("%s: %zu kernel%s, %s -> %s (%s) in %.2f s, %s/s\n", out, s.count,
           s.count == 1 ? "" : "s", cli_human_size(a, bytes),
           cli_human_size(b, stored), cli_ratio(r, bytes, stored), seconds,
           cli_human_size(rate, seconds > 0 ? (uint64_t)(bytes / seconds) : 0));
  }
  status = CLI_OK;
  goto done;

interrupted:
  cli_error("create: interrupted; %s not written", out);
  status = CLI_INTERRUPTED;
done:
  kpack_writer_abort(writer);
  if (arches != s.only_arches)
    free(arches);
  free_state(&s);
  return status;
}
