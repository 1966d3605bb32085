/* SPDX-License-Identifier: MIT
 *
 * `kpack list`: the kernels of archives, from their tables of contents
 * alone, or the code objects of HIP fat binaries; with --kernels, the GPU
 * kernels inside the code objects, from their metadata notes.
 */
#include <fnmatch.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "code_object_view.h"
#include "host_view.h"
#include "json.h"

// clang-format off
static const char list_manual[] =
    "NAME\n"
    "    kpack list - list the kernels of kpack archives and HIP fat binaries\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack list [--json] ARCHIVE|DIR|HOST-BINARY...\n"
    "    kpack list --kernels [-C] [--json] [--kernel GLOB]... ARCHIVE|DIR...\n"
    "\n"
    "DESCRIPTION\n"
    "    One row per kernel: the binary it belongs to (an install-tree path\n"
    "    ending in #N, the code object index), its architecture, its size,\n"
    "    the bytes it occupies in the archive and the compression ratio.\n"
    "    Binaries are sorted byte-wise, and each binary's architectures too.\n"
    "    With several archives a first column names the archive. Only the\n"
    "    table of contents is read; nothing is decompressed.\n"
    "\n"
    "    A directory DIR given as an ARCHIVE stands for the *.kpack\n"
    "    archives below it (sub-directories included, in name order), as in\n"
    "    kpackfs; one that holds none is an error.\n"
    "\n"
    "    A HIP host binary (executable, shared library or object; ELF) that\n"
    "    still carries its device code gets a table of its own, printed as\n"
    "    it is read: one row per GPU code object in its .hip_fatbin, named\n"
    "    as `kpack create --fatbin` would name it (file name#N, N the\n"
    "    co_index), with its architecture, size and the compression of its\n"
    "    bundle (none, or zlib/zstd in a CCOB envelope). Only entry tables\n"
    "    are read, so memory does not grow with the binary. A kpack-ified\n"
    "    binary holds no code objects: a note says so (see kpack info).\n"
    "\n"
    "    With --kernels, the metadata note of each code object (type\n"
    "    hsaco) of the archives is read instead, decompressing only the\n"
    "    start of the code object that holds it: one row per\n"
    "    binary, architecture and GPU kernel, with the resources the note\n"
    "    gives: VGPR, SGPR and AGPR counts, LDS (group segment) and scratch\n"
    "    (private segment, per work-item) bytes, wavefront size, maximum\n"
    "    flat workgroup size and kernarg bytes; \"-\" where the note has no\n"
    "    value (no AGPRs before gfx908). The kernel's name (usually a\n"
    "    mangled C++ name) is the last column. A code object that cannot be\n"
    "    read is reported on standard error and the others are still\n"
    "    listed.\n"
    "\n"
    "OPTIONS\n"
    "    --json         print one JSON array of objects {archive, binary,\n"
    "                   arch, type, size, stored_size, ordinal}, with\n"
    "                   \"metadata\" holding the TOC entry's metadata map,\n"
    "                   when it has one; a host binary's code objects as\n"
    "                   {file, binary, co_index, arch, id, size,\n"
    "                   compression}; with --kernels, objects {archive,\n"
    "                   binary, arch, target, name, symbol, vgpr_count,\n"
    "                   sgpr_count, agpr_count, group_segment_fixed_size,\n"
    "                   private_segment_fixed_size, kernarg_segment_size,\n"
    "                   wavefront_size, max_flat_workgroup_size,\n"
    "                   vgpr_spill_count, sgpr_spill_count} (null when the\n"
    "                   note has no value), and with -C also demangled\n"
    "    --kernels      list the GPU kernels inside the code objects\n"
    "    -C, --demangle with --kernels (implied), show kernel names as\n"
    "                   c++filt does: C++ names demangled by the C++\n"
    "                   runtime's own demangler; --json keeps the mangled\n"
    "                   name and adds the demangled one\n"
    "    --kernel GLOB  with --kernels (implied), only kernels whose name\n"
    "                   matches the shell pattern GLOB; may be repeated\n"
    "    -h, --help     print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack list .kpack/blas_lib_gfx942.kpack\n"
    "    kpack list --json .kpack/*.kpack\n"
    "    kpack list /usr/lib/x86_64-linux-gnu/librocrand.so.1\n"
    "    kpack list --kernels --kernel '*gemm*' .kpack/*.kpack\n"
    "    kpack list --kernels -C rand.kpack\n"
    "    kpack list --kernels --json rand.kpack | jq '.[] | select(.sgpr_count\n"
    "        > 64) | .name'\n"
    "\n"
    "EXIT STATUS\n"
    "    0 all inputs listed; 1 an input (or, with --kernels, a code object)\n"
    "    could not be read, or a host binary holds no HIP device code (the\n"
    "    others are still listed); 2 bad command line; 130 interrupted.\n";
// clang-format on

static int list_run(int argc, char** argv);

const cli_command cli_list_command = {
    "list", "list archives' kernels (sizes; --kernels: GPU kernels inside)",
    list_manual, list_run};

/* ---- archives and fat binaries ------------------------------------------- */

/* The table is made in two passes over the archives, kept open between
 * them (cli_table_measure()): a whole install, 420 archives and 252,000
 * kernels, is listed without holding its rows. */
typedef struct list_state {
  const char* archive_path;
  cli_json* json; /* NULL for the table */
  bool many, failed;
  bool printing; /* the second pass: rows, not totals */
  cli_table table;
  cli_total size, stored; /* stored bytes shared by kernels count once */
  cli_ordinals ordinals;
  size_t kernels;
} list_state;

static bool list_kernel(kpack_archive_t archive, const char* binary,
                        const char* arch, const kpack_kernel_info_t* info,
                        void* user) {
  list_state* s = user;
  char ratio[32];
  if (!s->printing) {
    cli_total_add(&s->size, info->size);
    if (cli_ordinal_first(&s->ordinals, s->archive_path, info->ordinal))
      cli_total_add(&s->stored, info->stored_size);
    s->kernels++;
  }
  if (s->json != NULL) {
    cli_json* w = s->json;
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_json_key_str(w, "archive", s->archive_path);
    cli_json_key_str(w, "binary", binary);
    cli_json_key_str(w, "arch", arch);
    cli_json_key_str(w, "type", info->type);
    cli_json_key_uint(w, "size", info->size);
    cli_json_key_uint(w, "stored_size", info->stored_size);
    cli_json_key_uint(w, "ordinal", info->ordinal);
    char* metadata;
    kpack_error_t err =
        kpack_get_entry_metadata_json(archive, binary, arch, &metadata);
    if (err != KPACK_SUCCESS) {
      char subject[512];
      snprintf(subject, sizeof(subject), "%s: %s for %s: metadata",
               s->archive_path, binary, arch);
      cli_kerror(subject, err);
      s->failed = true;
    } else if (metadata != NULL) {
      cli_json_key(w, "metadata");
      cli_json_raw(w, metadata);
      free(metadata);
    }
    cli_json_end(w);
    return true;
  }
  cli_ratio(ratio, info->size, info->stored_size);
  /* Names are escaped: a tab or newline in one must not shift columns. */
  const char* binary_cell = cli_table_text(&s->table, binary);
  const char* arch_cell = cli_table_text(&s->table, arch);
  if (s->many)
    cli_table_row(&s->table, "%s\t%s\t%s\t%llu\t%llu\t%s",
                  cli_table_text(&s->table, s->archive_path), binary_cell,
                  arch_cell, (unsigned long long)info->size,
                  (unsigned long long)info->stored_size, ratio);
  else
    cli_table_row(&s->table, "%s\t%s\t%llu\t%llu\t%s", binary_cell, arch_cell,
                  (unsigned long long)info->size,
                  (unsigned long long)info->stored_size, ratio);
  return true;
}

static int list_archives(int argc, char** argv) {
  static const struct option options[] = {{"json", no_argument, NULL, 'J'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  static const char* const headers[] = {"ARCHIVE", "BINARY", "ARCH",
                                        "SIZE",    "STORED", "RATIO"};
  static const bool right[] = {false, false, false, true, true, true};
  list_state s = {0};
  cli_json w;
  int c, status = CLI_OK;
  size_t listed = 0;
  bool printed = false; /* a host binary's table is out */
  char a[32], b[32], r[32];

  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'J')
      s.json = &w;
    else if (c == 'h')
      return cli_print_manual(&cli_list_command);
    else
      return cli_option_error(&cli_list_command, argv, "h");
  }
  if (optind >= argc)
    return cli_usage_error(&cli_list_command, "no ARCHIVE given");
  if (!cli_expand_archives(argc, argv, optind, &argc, &argv))
    return CLI_FAIL; /* a directory stands for the archives in it */
  s.many = argc - optind > 1;
  s.table.cols = s.many ? 6 : 5;
  s.table.headers = s.many ? headers : headers + 1;
  s.table.right = s.many ? right : right + 1;
  kpack_archive_t* kept = calloc((size_t)argc, sizeof(*kept));
  if (kept == NULL) {
    cli_error("out of memory");
    cli_operands_free(argc, argv);
    return CLI_FAIL;
  }
  if (s.json != NULL) {
    cli_json_init(&w, stdout);
    cli_json_array(&w, 2, true);
  } else {
    cli_table_measure(&s.table);
  }
  for (int i = optind; i < argc; i++) {
    if (cli_is_code_object(argv[i])) {
      cli_error(
          "%s: an AMDGPU code object, not a kpack archive: `kpack info "
          "%s` shows its kernels",
          argv[i], argv[i]);
      status = CLI_FAIL;
      continue;
    }
    if (cli_is_host_binary(argv[i])) { /* its own table, printed now */
      if (cli_host_list(argv[i], s.json, &printed) != CLI_OK)
        status = CLI_FAIL;
      continue;
    }
    s.archive_path = argv[i];
    cli_walk walk = cli_walk_archive(argv[i], list_kernel, &s,
                                     s.json != NULL ? NULL : &kept[i]);
    listed += walk != CLI_WALK_UNOPENED;
    if (walk != CLI_WALKED)
      status = CLI_FAIL;
  }
  if (s.json != NULL) {
    cli_json_finish(&w);
  } else if (listed > 0) {
    if (printed)
      putchar('\n');
    cli_table_stream(&s.table, stdout);
    /* The same walks again: the same rows, up to the same failure, which
     * the first pass reported. */
    s.printing = true;
    for (int i = optind; i < argc; i++) {
      if (kept[i] == NULL)
        continue;
      s.archive_path = argv[i];
      (void)cli_for_each_kernel(kept[i], list_kernel, &s);
    }
    printf("%zu kernel%s, %s, stored %s (%s)\n", s.kernels,
           s.kernels == 1 ? "" : "s", cli_total_human(a, s.size),
           cli_total_human(b, s.stored),
           cli_ratio(r, s.size.value, s.stored.value));
  }
  for (int i = 0; i < argc; i++)
    kpack_close(kept[i]);
  free(kept);
  cli_table_free(&s.table);
  cli_ordinals_free(&s.ordinals);
  cli_operands_free(argc, argv);
  return s.failed ? CLI_FAIL : status;
}

/* ---- GPU kernels (--kernels) --------------------------------------------- */

typedef struct kernels_state {
  const char* archive_path;
  char* const* globs; /* --kernel patterns; none matches every kernel */
  size_t glob_count;
  cli_json* json; /* NULL for the table */
  bool many;
  bool demangle; /* -C: names as c++filt shows them */
  int status;
  cli_table table;
  size_t code_objects, kernels;
} kernels_state;

/* A pattern matches the name as shown or, with -C, as stored. */
static bool wanted(const kernels_state* s, const char* name,
                   const char* shown) {
  if (s->glob_count == 0)
    return true;
  for (size_t i = 0; i < s->glob_count; i++)
    if (fnmatch(s->globs[i], name, 0) == 0 ||
        fnmatch(s->globs[i], shown, 0) == 0)
      return true;
  return false;
}

static void kernel_row(kernels_state* s, const char* binary, const char* arch,
                       const kpack_code_object_info_t* info,
                       const kpack_co_kernel_t* k, const char* shown) {
  char cells[256];
  s->kernels++;
  if (s->json != NULL) {
    cli_json* w = s->json;
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_json_key_str(w, "archive", s->archive_path);
    cli_json_key_str(w, "binary", binary);
    cli_json_key_str(w, "arch", arch);
    cli_json_key_str(w, "target", info->target);
    cli_co_json_kernel_members(w, k);
    if (s->demangle)
      cli_json_key_str(w, "demangled", shown);
    cli_json_end(w);
    return;
  }
  cli_co_resource_cells(k, cells, sizeof(cells));
  const char* name = cli_table_text(&s->table, shown);
  if (s->many)
    cli_table_row(&s->table, "%s\t%s\t%s\t%s\t%s",
                  cli_table_text(&s->table, s->archive_path),
                  cli_table_text(&s->table, binary),
                  cli_table_text(&s->table, arch), cells, name);
  else
    cli_table_row(&s->table, "%s\t%s\t%s\t%s",
                  cli_table_text(&s->table, binary),
                  cli_table_text(&s->table, arch), cells, name);
}

static bool list_code_object(kpack_archive_t archive, const char* binary,
                             const char* arch, const kpack_kernel_info_t* kinfo,
                             void* user) {
  kernels_state* s = user;
  kpack_code_object_t* co = NULL;
  if (cli_interrupted())
    return false;
  if (strcmp(kinfo->type, "hsaco") != 0)
    return true; /* not a code object by its type: nothing to list */
  /* Only the prefix that holds the metadata note is decoded. */
  kpack_error_t err =
      kpack_kernel_code_object(archive, binary, arch, &co, NULL);
  if (err != KPACK_SUCCESS) {
    cli_error("%s: %s %s: %s (%s)", s->archive_path, binary, arch,
              kpack_error_string(err), cli_code_object_error_text(err));
    s->status = CLI_FAIL;
    return true;
  }
  kpack_code_object_info_t info;
  kpack_code_object_get_info(co, &info);
  s->code_objects++;
  for (size_t i = 0; i < info.kernel_count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    char* demangled = s->demangle ? cli_demangle(k.name) : NULL;
    if (s->demangle && demangled == NULL) {
      cli_error("out of memory");
      s->status = CLI_FAIL;
      break;
    }
    const char* shown = demangled != NULL ? demangled : k.name;
    if (wanted(s, k.name, shown))
      kernel_row(s, binary, arch, &info, &k, shown);
    free(demangled);
  }
  kpack_code_object_free(co);
  return true;
}

static int list_kernels(int argc, char** argv) {
  enum { OPT_JSON = 256, OPT_KERNELS, OPT_KERNEL };
  static const struct option options[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"kernels", no_argument, NULL, OPT_KERNELS},
      {"kernel", required_argument, NULL, OPT_KERNEL},
      {"demangle", no_argument, NULL, 'C'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static const char* headers[KPACK_CO_RESOURCE_COUNT + 4];
  static bool right[KPACK_CO_RESOURCE_COUNT + 4];
  kernels_state s = {.status = CLI_OK};
  cli_json w;
  char** globs = calloc((size_t)argc + 1, sizeof(*globs));
  int c;
  if (globs == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  while ((c = getopt_long(argc, argv, "hC", options, NULL)) != -1) {
    switch (c) {
      case OPT_JSON:
        s.json = &w;
        break;
      case 'C':
        s.demangle = true;
        break;
      case OPT_KERNELS:
        break;
      case OPT_KERNEL:
        globs[s.glob_count++] = optarg;
        break;
      case 'h':
        free(globs);
        return cli_print_manual(&cli_list_command);
      default:
        free(globs);
        return cli_option_error(&cli_list_command, argv, "hC");
    }
  }
  if (optind >= argc) {
    free(globs);
    return cli_usage_error(&cli_list_command, "no ARCHIVE given");
  }
  if (!cli_expand_archives(argc, argv, optind, &argc, &argv)) {
    free(globs);
    return CLI_FAIL;
  }
  s.globs = globs;
  s.many = argc - optind > 1;
  /* [ARCHIVE] BINARY ARCH, the resources, KERNEL last: names are long. */
  size_t col = 0;
  if (s.many)
    headers[col++] = "ARCHIVE";
  headers[col++] = "BINARY";
  headers[col++] = "ARCH";
  const char* const* resources = cli_co_resource_headers();
  for (size_t i = 0; i < KPACK_CO_RESOURCE_COUNT; i++) {
    right[col] = true;
    headers[col++] = resources[i];
  }
  right[col] = false;
  headers[col++] = "KERNEL";
  s.table = (cli_table){.cols = col, .headers = headers, .right = right};

  cli_catch_signals();
  if (s.json != NULL) {
    cli_json_init(&w, stdout);
    cli_json_array(&w, 2, true);
  }
  size_t listed = 0; /* archives opened: without any, no table */
  for (int i = optind; i < argc && !cli_interrupted(); i++) {
    s.archive_path = argv[i];
    if (cli_is_code_object(argv[i])) {
      cli_error(
          "%s: an AMDGPU code object, not a kpack archive: `kpack info "
          "%s` shows its kernels",
          argv[i], argv[i]);
      s.status = CLI_FAIL;
      continue;
    }
    if (cli_is_host_binary(argv[i])) {
      cli_error(
          "%s: a HIP host binary, not a kpack archive: `kpack list %s` "
          "lists its code objects; for their GPU kernels, pack them "
          "first (kpack create -o x.kpack --fatbin %s)",
          argv[i], argv[i], argv[i]);
      s.status = CLI_FAIL;
      continue;
    }
    cli_walk walk = cli_walk_archive(argv[i], list_code_object, &s, NULL);
    listed += walk != CLI_WALK_UNOPENED;
    if (walk != CLI_WALKED)
      s.status = CLI_FAIL;
  }
  if (s.json != NULL) {
    cli_json_finish(&w);
  } else if (listed > 0) {
    cli_table_print(&s.table, stdout);
    printf("%zu kernel%s in %zu code object%s\n", s.kernels,
           s.kernels == 1 ? "" : "s", s.code_objects,
           s.code_objects == 1 ? "" : "s");
  }
  cli_table_free(&s.table);
  free(globs);
  cli_operands_free(argc, argv);
  if (cli_interrupted()) {
    cli_error("list: interrupted");
    return CLI_INTERRUPTED;
  }
  return s.status;
}

static int list_run(int argc, char** argv) {
  /* --kernels reads the code objects: a listing of its own (--kernel and
   * -C/--demangle imply it). */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strncmp(argv[i], "--kernel", 8) == 0 || strcmp(argv[i], "-C") == 0 ||
        strcmp(argv[i], "--demangle") == 0)
      return list_kernels(argc, argv);
  return list_archives(argc, argv);
}
