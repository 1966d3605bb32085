/* SPDX-License-Identifier: MIT
 *
 * `kpack list`, `kpack info` and `kpack cat`: what an archive holds, from
 * its table of contents alone, and one kernel's bytes.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char list_manual[] =
    "NAME\n"
    "    kpack list - list the kernels of kpack archives and HIP fat binaries\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack list [--json] ARCHIVE|HOST-BINARY...\n"
    "    kpack list --kernels [--json] [--kernel GLOB]... ARCHIVE...\n"
    "\n"
    "DESCRIPTION\n"
    "    One row per kernel: the binary it belongs to (an install-tree path\n"
    "    ending in #N, the code object index), its architecture, its size,\n"
    "    the bytes it occupies in the archive and the compression ratio.\n"
    "    Binaries are sorted byte-wise, and each binary's architectures too.\n"
    "    With several archives a first column names the archive. Only the\n"
    "    table of contents is read; nothing is decompressed.\n"
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
    "    With --kernels, each code object (type hsaco) of the archives is\n"
    "    decompressed and its metadata note read instead: one row per\n"
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
    "                   note has no value)\n"
    "    --kernels      list the GPU kernels inside the code objects\n"
    "    --kernel GLOB  with --kernels (implied), only kernels whose name\n"
    "                   matches the shell pattern GLOB; may be repeated\n"
    "    -h, --help     print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack list .kpack/blas_lib_gfx942.kpack\n"
    "    kpack list --json .kpack/*.kpack\n"
    "    kpack list /usr/lib/x86_64-linux-gnu/librocrand.so.1\n"
    "    kpack list --kernels --kernel '*gemm*' .kpack/*.kpack\n"
    "    kpack list --kernels --json rand.kpack | jq '.[] | "
    "select(.sgpr_count\n"
    "        > 64) | .name'\n"
    "\n"
    "EXIT STATUS\n"
    "    0 all inputs listed; 1 an input (or, with --kernels, a code object)\n"
    "    could not be read, or a host binary holds no HIP device code (the\n"
    "    others are still listed); 2 bad command line; 130 interrupted.\n";

static const char info_manual[] =
    "NAME\n"
    "    kpack info - show the header of kpack archives and their totals, or\n"
    "    what a code object or a HIP host binary holds\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack info [--json] ARCHIVE|CODE-OBJECT|HOST-BINARY...\n"
    "    kpack info --metadata CODE-OBJECT\n"
    "\n"
    "DESCRIPTION\n"
    "    For an archive: the table of contents header (format version,\n"
    "    group name, architecture family, declared architectures in order,\n"
    "    compression scheme) and totals: binaries, kernels, decompressed and\n"
    "    stored bytes, file size. Nothing is decompressed.\n"
    "\n"
    "    For an AMDGPU code object (an ELF file with e_machine 224, such as\n"
    "    `kpack cat` writes or kpackfs shows as kernel.hsaco): its code\n"
    "    object version and e_flags, its target ID (processor and the xnack\n"
    "    and sramecc settings the ELF header records, e.g. gfx90a:xnack-),\n"
    "    the target its metadata note names, and one row per GPU kernel with\n"
    "    the resources `kpack list --kernels` shows.\n"
    "\n"
    "    For a HIP host binary (ELF executable, shared library or object),\n"
    "    what the HIP runtime registers from its .hipFatBinSegment:\n"
    "      - a fat binary (HIPF records, device code in .hip_fatbin): its\n"
    "        bundles by code object index, each with its compression (none,\n"
    "        or zlib/zstd in a CCOB envelope), stored and decompressed size\n"
    "        and architectures; only entry tables are read;\n"
    "      - a kpack-ified binary (HIPK records): per record the kernel the\n"
    "        loader looks up (kernel_name#co_index) and each search path as\n"
    "        written in .rocm_kpack_ref and as the loader resolves it\n"
    "        against the binary's directory (symlinks followed; @GFXARCH@\n"
    "        is expanded per target at load time). A record the runtime\n"
    "        could not use is reported with the reason, and info exits 1.\n"
    "    `kpack resolve --binary` runs the search itself.\n"
    "\n"
    "OPTIONS\n"
    "    --json      print one JSON array with an object per input: per\n"
    "                archive {archive, format_version, group_name,\n"
    "                gfx_arch_family, gfx_arches, compression_scheme,\n"
    "                binaries, kernels, size, stored_size, file_size}; per\n"
    "                code object {file, code_object_version, e_flags,\n"
    "                target, processor, xnack, sramecc, metadata_target,\n"
    "                kernels: [{name, symbol, vgpr_count, ...}]} with the\n"
    "                kernel members of `kpack list --kernels --json`; per\n"
    "                host binary {binary, kind (\"fat\", \"kpack-ified\" or\n"
    "                \"none\"), elf_type, machine} with, for a fat binary,\n"
    "                fatbin_size, numbered_by and bundles: [{co_index,\n"
    "                compression, ccob_version, stored_size, size, entries:\n"
    "                [{id, arch, size}]}], for a kpack-ified one records:\n"
    "                [{index, magic, version, co_index, status, problem,\n"
    "                kernel_name, search_paths: [{written, resolved}]}]\n"
    "    --metadata  print the whole metadata note (NT_AMDGPU_METADATA) of\n"
    "                one code object as indented JSON, as kpackfs shows it\n"
    "                in metadata.json (null when there is no note)\n"
    "    -h, --help  print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack info .kpack/rand_lib_gfx90a.kpack\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx90a:xnack- > k.hsaco\n"
    "    kpack info k.hsaco\n"
    "    kpack info --metadata k.hsaco | jq '.\"amdhsa.kernels\" | length'\n"
    "    kpack info /opt/rocm/lib/librocblas.so.5\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 an input could not be read, or a host binary has an\n"
    "    unusable record or no HIP device code; 2 bad command line.\n";

static const char cat_manual[] =
    "NAME\n"
    "    kpack cat - write one kernel to standard output\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack cat ARCHIVE BINARY ARCH\n"
    "\n"
    "DESCRIPTION\n"
    "    Decompresses the kernel of BINARY (as `kpack list` shows it,\n"
    "    including the #N suffix) for architecture ARCH (exactly as listed,\n"
    "    e.g. gfx90a:xnack-) and writes its bytes to standard output.\n"
    "\n"
    "OPTIONS\n"
    "    -h, --help  print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx1030 > k.hsaco\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx1030 | readelf -h "
    "/dev/stdin\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 the archive or kernel could not be read, or standard\n"
    "    output could not be written; 2 bad command line.\n";

static int list_run(int argc, char** argv);
static int info_run(int argc, char** argv);
static int cat_run(int argc, char** argv);

const cli_command cli_list_command = {
    "list", "list archives' kernels (sizes; --kernels: GPU kernels inside)",
    list_manual, list_run};
const cli_command cli_info_command = {
    "info", "show an archive's header, a code object's kernels, a host binary",
    info_manual, info_run};
const cli_command cli_cat_command = {
    "cat", "write one kernel's bytes to standard output", cat_manual, cat_run};

/* Parses the options shared by list and info: --json and --help, and
 * info's --metadata (`metadata` is NULL for list). Returns -1 to go on, or
 * the exit status. */
static int parse_json_flag(const cli_command* cmd, int argc, char** argv,
                           bool* json, bool* metadata) {
  static const struct option options[] = {{"json", no_argument, NULL, 'J'},
                                          {"metadata", no_argument, NULL, 'M'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  *json = false;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
      case 'J':
        *json = true;
        break;
      case 'M':
        if (metadata == NULL)
          return cli_usage_error(cmd, "unknown option");
        *metadata = true;
        break;
      case 'h':
        return cli_print_manual(cmd);
      default:
        return cli_usage_error(cmd, "unknown option");
    }
  }
  if (optind >= argc)
    return cli_usage_error(cmd, "no ARCHIVE given");
  return -1;
}

/* ---- list ---------------------------------------------------------------- */

/* The table is printed in two passes over the open archives, the first
 * sizing its columns and counting, the second printing rows as the TOC is
 * walked: a whole install (420 archives, 252,000 kernels) is listed without
 * holding a quarter of a million rows of text. */
typedef struct list_state {
  const char* archive_path;
  bool json, many, first, failed;
  bool printing; /* the second pass */
  cli_table table;
  size_t width[6];
  uint64_t size, stored;
  size_t kernels;
} list_state;

/* Sizes (first pass) or prints (second) one row of the table, aligned as
 * cli_table_print() aligns its cells. */
static void list_cells(list_state* s, const char* const* cells) {
  const cli_table* t = &s->table;
  for (size_t c = 0; c < t->cols; c++) {
    size_t n = strlen(cells[c]);
    if (!s->printing) {
      if (n > s->width[c])
        s->width[c] = n;
      continue;
    }
    bool last = c + 1 == t->cols;
    if (t->right[c])
      printf("%*s", (int)s->width[c], cells[c]);
    else if (last) /* no trailing blanks */
      fputs(cells[c], stdout);
    else
      printf("%-*s", (int)s->width[c], cells[c]);
    fputs(last ? "\n" : "  ", stdout);
  }
}

static bool list_kernel(kpack_archive_t archive, const char* binary,
                        const char* arch, const kpack_kernel_info_t* info,
                        void* user) {
  list_state* s = user;
  char ratio[32], size[32], stored[32];
  if (!s->printing) {
    s->size += info->size;
    s->stored += info->stored_size;
    s->kernels++;
  }
  if (s->json) {
    fputs(s->first ? "\n  {\"archive\": " : ",\n  {\"archive\": ", stdout);
    s->first = false;
    cli_json_string(stdout, s->archive_path);
    fputs(", \"binary\": ", stdout);
    cli_json_string(stdout, binary);
    fputs(", \"arch\": ", stdout);
    cli_json_string(stdout, arch);
    fputs(", \"type\": ", stdout);
    cli_json_string(stdout, info->type);
    printf(", \"size\": %llu, \"stored_size\": %llu, \"ordinal\": %u",
           (unsigned long long)info->size,
           (unsigned long long)info->stored_size, (unsigned)info->ordinal);
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
      printf(", \"metadata\": %s", metadata);
      free(metadata);
    }
    fputs("}", stdout);
    return true;
  }
  cli_ratio(ratio, info->size, info->stored_size);
  snprintf(size, sizeof(size), "%llu", (unsigned long long)info->size);
  snprintf(stored, sizeof(stored), "%llu",
           (unsigned long long)info->stored_size);
  const char* cells[] = {s->archive_path, binary, arch, size, stored, ratio};
  list_cells(s, s->many ? cells : cells + 1);
  return true;
}

static int list_run(int argc, char** argv) {
  static const char* const headers[] = {"ARCHIVE", "BINARY", "ARCH",
                                        "SIZE",    "STORED", "RATIO"};
  static const bool right[] = {false, false, false, true, true, true};
  list_state s = {0};
  int status = CLI_OK;
  size_t listed = 0;
  char a[32], b[32], r[32];

  /* --kernels reads the code objects: a command of its own. */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strncmp(argv[i], "--kernel", 8) == 0)
      return cli_list_kernels(argc, argv);
  int early = parse_json_flag(&cli_list_command, argc, argv, &s.json, NULL);
  if (early >= 0)
    return early;
  s.many = argc - optind > 1;
  s.first = true;
  s.table.cols = s.many ? 6 : 5;
  s.table.headers = s.many ? headers : headers + 1;
  s.table.right = s.many ? right : right + 1;
  kpack_archive_t* open = calloc((size_t)argc, sizeof(*open));
  if (open == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  for (size_t c = 0; c < s.table.cols; c++)
    s.width[c] = strlen(s.table.headers[c]);
  if (s.json)
    fputs("[", stdout);
  for (int i = optind; i < argc; i++) {
    kpack_archive_t archive;
    if (cli_is_host_binary(argv[i])) { /* its own table, printed now */
      if (cli_host_list(argv[i], s.json, &s.first) != CLI_OK)
        status = CLI_FAIL;
      continue;
    }
    kpack_error_t err = kpack_open(argv[i], &archive);
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      status = CLI_FAIL;
      continue;
    }
    s.archive_path = argv[i];
    listed++;
    err = cli_for_each_kernel(archive, list_kernel, &s);
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      status = CLI_FAIL;
    }
    if (s.json)
      kpack_close(archive);
    else
      open[i] = archive; /* kept for the second pass */
  }
  if (s.json) {
    fputs(s.first ? "]\n" : "\n]\n", stdout);
  } else if (listed > 0) {
    if (!s.first) /* after a host binary's table */
      putchar('\n');
    s.printing = true;
    list_cells(&s, s.table.headers);
    /* The same walk again: the same rows, up to the same error if any
     * (reported by the first pass). */
    for (int i = optind; i < argc; i++) {
      if (open[i] == NULL)
        continue;
      s.archive_path = argv[i];
      (void)cli_for_each_kernel(open[i], list_kernel, &s);
    }
    printf("%zu kernel%s, %s, stored %s (%s)\n", s.kernels,
           s.kernels == 1 ? "" : "s", cli_human_size(a, s.size),
           cli_human_size(b, s.stored), cli_ratio(r, s.size, s.stored));
  }
  for (int i = 0; i < argc; i++)
    kpack_close(open[i]);
  free(open);
  return s.failed ? CLI_FAIL : status;
}

/* ---- info ---------------------------------------------------------------- */

typedef struct totals {
  uint64_t size, stored;
  size_t kernels;
} totals;

static bool add_totals(kpack_archive_t archive, const char* binary,
                       const char* arch, const kpack_kernel_info_t* info,
                       void* user) {
  totals* t = user;
  (void)archive;
  (void)binary;
  (void)arch;
  t->size += info->size;
  t->stored += info->stored_size;
  t->kernels++;
  return true;
}

static kpack_error_t print_info(const char* path, kpack_archive_t archive,
                                bool json, bool first) {
  kpack_error_t err;
  const char *group, *family;
  kpack_compression_scheme_t scheme;
  size_t arch_count, binaries;
  totals t = {0};
  struct stat st;
  char a[32], b[32], r[32];

  if ((err = kpack_get_group_name(archive, &group)) ||
      (err = kpack_get_gfx_arch_family(archive, &family)) ||
      (err = kpack_get_compression_scheme(archive, &scheme)) ||
      (err = kpack_get_architecture_count(archive, &arch_count)) ||
      (err = kpack_get_binary_count(archive, &binaries)) ||
      (err = cli_for_each_kernel(archive, add_totals, &t)))
    return err;
  uint64_t file_size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  const char* scheme_name = kpack_compression_scheme_name(scheme);

  if (json) {
    fputs(first ? "\n  {\"archive\": " : ",\n  {\"archive\": ", stdout);
    cli_json_string(stdout, path);
    fputs(", \"format_version\": 1, \"group_name\": ", stdout);
    cli_json_string(stdout, group);
    fputs(", \"gfx_arch_family\": ", stdout);
    cli_json_string(stdout, family);
    fputs(", \"gfx_arches\": [", stdout);
    for (size_t i = 0; i < arch_count; i++) {
      const char* arch;
      if ((err = kpack_get_architecture(archive, i, &arch)))
        return err;
      fputs(i ? ", " : "", stdout);
      cli_json_string(stdout, arch);
    }
    fputs("], \"compression_scheme\": ", stdout);
    cli_json_string(stdout, scheme_name);
    printf(
        ", \"binaries\": %zu, \"kernels\": %zu, \"size\": %llu, "
        "\"stored_size\": %llu, \"file_size\": %llu}",
        binaries, t.kernels, (unsigned long long)t.size,
        (unsigned long long)t.stored, (unsigned long long)file_size);
    return KPACK_SUCCESS;
  }
  if (!first)
    putchar('\n');
  printf("archive:      %s\n", path);
  printf("format:       kpack v%d\n", KPACK_CURRENT_VERSION);
  printf("group:        %s\n", group);
  printf("family:       %s\n", family);
  printf("arches:      ");
  for (size_t i = 0; i < arch_count; i++) {
    const char* arch;
    if ((err = kpack_get_architecture(archive, i, &arch)))
      return err;
    printf(" %s", arch);
  }
  printf("%s\n", arch_count ? "" : " (none)");
  printf("compression:  %s\n", scheme_name);
  printf("binaries:     %zu\n", binaries);
  printf("kernels:      %zu\n", t.kernels);
  printf("size:         %llu (%s)\n", (unsigned long long)t.size,
         cli_human_size(a, t.size));
  printf("stored:       %llu (%s), ratio %s\n", (unsigned long long)t.stored,
         cli_human_size(b, t.stored), cli_ratio(r, t.size, t.stored));
  printf("file size:    %llu\n", (unsigned long long)file_size);
  return KPACK_SUCCESS;
}

static int info_run(int argc, char** argv) {
  bool json, metadata = false;
  int status = CLI_OK;
  bool first = true;
  int early = parse_json_flag(&cli_info_command, argc, argv, &json, &metadata);
  if (early >= 0)
    return early;
  if (metadata) {
    if (json || argc - optind != 1)
      return cli_usage_error(&cli_info_command,
                             "--metadata takes one code object FILE");
    if (!cli_is_code_object(argv[optind])) {
      cli_error("%s: not an AMDGPU code object (--metadata)", argv[optind]);
      return CLI_FAIL;
    }
    return cli_code_object_metadata(argv[optind]);
  }
  if (json)
    fputs("[", stdout);
  for (int i = optind; i < argc; i++) {
    kpack_archive_t archive;
    if (cli_is_code_object(argv[i])) {
      if (cli_code_object_info(argv[i], json, first) != CLI_OK)
        status = CLI_FAIL;
      first = false;
      continue;
    }
    if (cli_is_host_binary(argv[i])) {
      if (cli_host_info(argv[i], json, first) != CLI_OK)
        status = CLI_FAIL;
      first = false;
      continue;
    }
    kpack_error_t err = kpack_open(argv[i], &archive);
    if (err == KPACK_SUCCESS) {
      err = print_info(argv[i], archive, json, first);
      first = false;
      kpack_close(archive);
    }
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      status = CLI_FAIL;
    }
  }
  if (json)
    fputs(first ? "]\n" : "\n]\n", stdout);
  return status;
}

/* ---- cat ----------------------------------------------------------------- */

static int cat_run(int argc, char** argv) {
  static const struct option options[] = {{"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c, status = CLI_FAIL;
  kpack_archive_t archive = NULL;
  void* data = NULL;
  size_t size;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'h')
      return cli_print_manual(&cli_cat_command);
    return cli_usage_error(&cli_cat_command, "unknown option");
  }
  if (argc - optind != 3)
    return cli_usage_error(&cli_cat_command,
                           "expected ARCHIVE BINARY ARCH, got %d argument%s",
                           argc - optind, argc - optind == 1 ? "" : "s");
  const char* path = argv[optind];
  const char* binary = argv[optind + 1];
  const char* arch = argv[optind + 2];

  kpack_error_t err = kpack_open(path, &archive);
  if (err != KPACK_SUCCESS) {
    cli_kerror(path, err);
    goto done;
  }
  err = kpack_get_kernel(archive, binary, arch, &data, &size);
  if (err != KPACK_SUCCESS) {
    cli_error("%s: %s for %s: %s (%s)", path, binary, arch,
              kpack_error_string(err), cli_error_text(err));
    goto done;
  }
  /* A short write is reported at exit, with every other command's. */
  fwrite(data, 1, size, stdout);
  status = CLI_OK;
done:
  kpack_free_kernel(data);
  kpack_close(archive);
  return status;
}
