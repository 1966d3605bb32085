/* SPDX-License-Identifier: MIT
 *
 * `kpack info`: an archive's table of contents header and totals (nothing
 * decompressed), or what a code object file or a HIP host binary holds.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "code_object_view.h"
#include "host_view.h"
#include "json.h"

// clang-format off
static const char info_manual[] =
    "NAME\n"
    "    kpack info - show the header of kpack archives and their totals, or\n"
    "    what a code object or a HIP host binary holds\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack info [--json] [-v] [-C] ARCHIVE|DIR|CODE-OBJECT|HOST-BINARY...\n"
    "    kpack info --metadata CODE-OBJECT\n"
    "\n"
    "DESCRIPTION\n"
    "    For an archive: the table of contents header (format version,\n"
    "    group name, architecture family, declared architectures in order,\n"
    "    compression scheme) and totals: binaries, kernels, decompressed and\n"
    "    stored bytes, file size. Nothing is decompressed.\n"
    "\n"
    "    A directory DIR given as an ARCHIVE stands for the *.kpack\n"
    "    archives below it (sub-directories included, in name order), as in\n"
    "    kpackfs; one that holds none is an error.\n"
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
    "        and architectures, and the count of bundles and of code\n"
    "        objects (one per architecture of a bundle, as kpack list\n"
    "        counts them); only entry tables are read;\n"
    "      - a kpack-ified binary (HIPK records): the arches `kpack split`\n"
    "        recorded the binary was split for (\"split for:\"), then its\n"
    "        records summed up: the kernel the loader looks up\n"
    "        (kernel_name#co_index, the range of co_index), each distinct\n"
    "        search path as written in .rocm_kpack_ref and as the loader\n"
    "        resolves it against the binary's directory (symlinks\n"
    "        followed; an empty path, which the loader skips, shows as\n"
    "        such), the archives found there (@GFXARCH@ standing for any\n"
    "        arch, a directory for its *.kpack files) with the arches each\n"
    "        declares, and \"reaches:\", every arch they declare: the GPUs\n"
    "        the binary's device code is installed for. A recorded arch no\n"
    "        archive declares is shown as \"not found:\". With -v, one row\n"
    "        per record instead of the summary. A record the runtime could\n"
    "        not use is reported with the reason, and info exits 1.\n"
    "    `kpack resolve --binary` runs the search itself.\n"
    "\n"
    "    For a directory holding HIP binaries, the same for a whole\n"
    "    install: how many of the binaries below it are kpack-ified and\n"
    "    how many still fat, the arches every kpack-ified one reaches\n"
    "    (\"reaches:\") and those only some reach, with how many\n"
    "    (\"partly:\"); -v adds each kpack-ified binary's summary.\n"
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
    "                kernel_name, search_paths: [{written, resolved}],\n"
    "                recorded_arches}] (resolved null, with dropped: true,\n"
    "                for an empty path; recorded_arches the kpack_arches\n"
    "                `kpack split` wrote, null without them), then\n"
    "                archives: [{path, arches, error}] (error only for one\n"
    "                that could not be opened) and reached_arches; per\n"
    "                directory {directory, kpackified, fat, unreadable,\n"
    "                reached_arches: [{arch, binaries}]}\n"
    "    --metadata  print the whole metadata note (NT_AMDGPU_METADATA) of\n"
    "                one code object as indented JSON, as kpackfs shows it\n"
    "                in metadata.json (null when there is no note)\n"
    "    -v, --verbose  for a kpack-ified binary, one row per record (its\n"
    "                kernel, each search path written and resolved)\n"
    "    -C, --demangle  a code object's kernel names as c++filt shows them\n"
    "                (C++ names demangled, as kpack list --kernels -C);\n"
    "                --json keeps the mangled name and adds \"demangled\"\n"
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
// clang-format on

static int info_run(int argc, char** argv);

const cli_command cli_info_command = {
    "info", "show an archive's header, a code object's kernels, a host binary",
    info_manual, info_run};

typedef struct totals {
  cli_total size, stored; /* stored bytes shared by kernels count once */
  cli_ordinals ordinals;
  size_t kernels;
} totals;

static bool add_totals(kpack_archive_t archive, const char* binary,
                       const char* arch, const kpack_kernel_info_t* info,
                       void* user) {
  totals* t = user;
  (void)binary;
  (void)arch;
  cli_total_add(&t->size, info->size);
  if (cli_ordinal_first(&t->ordinals, archive, info->ordinal))
    cli_total_add(&t->stored, info->stored_size);
  t->kernels++;
  return true;
}

/* An archive's header and totals: read whole before anything is printed,
 * so that a failure prints nothing of it. */
static kpack_error_t print_info(const char* path, kpack_archive_t archive,
                                cli_json* json, bool first) {
  kpack_error_t err;
  const char *group, *family;
  kpack_compression_scheme_t scheme;
  size_t arch_count, binaries;
  const char** arches = NULL;
  totals t = {0};
  struct stat st;
  char a[32], b[32], r[32];

  if ((err = kpack_get_group_name(archive, &group)) ||
      (err = kpack_get_gfx_arch_family(archive, &family)) ||
      (err = kpack_get_compression_scheme(archive, &scheme)) ||
      (err = kpack_get_architecture_count(archive, &arch_count)) ||
      (err = kpack_get_binary_count(archive, &binaries)) ||
      (err = cli_for_each_kernel(archive, add_totals, &t)))
    goto done;
  if ((arches = calloc(arch_count + 1, sizeof(*arches))) == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (size_t i = 0; i < arch_count; i++)
    if ((err = kpack_get_architecture(archive, i, &arches[i])))
      goto done;
  uint64_t file_size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  const char* scheme_name = kpack_compression_scheme_name(scheme);

  if (json != NULL) {
    cli_json_object(json, CLI_JSON_INLINE, false);
    cli_json_key_str(json, "archive", path);
    cli_json_key_uint(json, "format_version", KPACK_CURRENT_VERSION);
    cli_json_key_str(json, "group_name", group);
    cli_json_key_str(json, "gfx_arch_family", family);
    cli_json_key(json, "gfx_arches");
    cli_json_array(json, CLI_JSON_INLINE, false);
    for (size_t i = 0; i < arch_count; i++)
      cli_json_str(json, arches[i]);
    cli_json_end(json);
    cli_json_key_str(json, "compression_scheme", scheme_name);
    cli_json_key_uint(json, "binaries", binaries);
    cli_json_key_uint(json, "kernels", t.kernels);
    cli_json_key_uint(json, "size", t.size.value);
    cli_json_key_uint(json, "stored_size", t.stored.value);
    cli_json_key_uint(json, "file_size", file_size);
    cli_json_end(json);
    goto done;
  }
  if (!first)
    putchar('\n');
  printf("archive:      %s\n", path);
  printf("format:       kpack v%d\n", KPACK_CURRENT_VERSION);
  printf("group:        %s\n", group);
  printf("family:       %s\n", family);
  printf("arches:      ");
  for (size_t i = 0; i < arch_count; i++)
    printf(" %s", arches[i]);
  printf("%s\n", arch_count ? "" : " (none)");
  printf("compression:  %s\n", scheme_name);
  printf("binaries:     %zu\n", binaries);
  printf("kernels:      %zu\n", t.kernels);
  printf("size:         %llu (%s)\n", (unsigned long long)t.size.value,
         cli_total_human(a, t.size));
  printf("stored:       %llu (%s), ratio %s\n",
         (unsigned long long)t.stored.value, cli_total_human(b, t.stored),
         cli_ratio(r, t.size.value, t.stored.value));
  printf("file size:    %llu\n", (unsigned long long)file_size);
done:
  free(arches);
  cli_ordinals_free(&t.ordinals);
  return err;
}

static int info_run(int argc, char** argv) {
  static const struct option options[] = {
      {"json", no_argument, NULL, 'J'},    {"metadata", no_argument, NULL, 'M'},
      {"verbose", no_argument, NULL, 'v'}, {"demangle", no_argument, NULL, 'C'},
      {"help", no_argument, NULL, 'h'},    {NULL, 0, NULL, 0}};
  const cli_command* cmd = &cli_info_command;
  bool json = false, metadata = false, first = true, verbose = false;
  bool demangle = false;
  int c, status = CLI_OK;
  cli_json w;
  while ((c = getopt_long(argc, argv, "hvC", options, NULL)) != -1) {
    if (c == 'J')
      json = true;
    else if (c == 'v')
      verbose = true;
    else if (c == 'C')
      demangle = true;
    else if (c == 'M')
      metadata = true;
    else if (c == 'h')
      return cli_print_manual(cmd);
    else
      return cli_option_error(cmd, argv, "hvC");
  }
  if (optind >= argc)
    return cli_usage_error(cmd, "no ARCHIVE given");
  if (metadata) {
    if (json || argc - optind != 1)
      return cli_usage_error(cmd, "--metadata takes one code object FILE");
    if (!cli_is_code_object(argv[optind])) {
      cli_error("%s: not an AMDGPU code object (--metadata)", argv[optind]);
      return CLI_FAIL;
    }
    return cli_code_object_metadata(argv[optind]);
  }
  cli_json* out = json ? &w : NULL;
  if (out != NULL) {
    cli_json_init(&w, stdout);
    cli_json_array(&w, 2, true);
  }
  /* A directory holding HIP binaries is summed up as an install; any other
   * directory stands for the archives in it. */
  int kept = optind;
  for (int i = optind; i < argc; i++) {
    struct stat st;
    int tree;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) &&
        (tree = cli_host_tree_info(argv[i], out, first, verbose)) !=
            CLI_HOST_TREE_EMPTY) {
      if (tree != CLI_OK)
        status = CLI_FAIL;
      first = false;
      continue;
    }
    argv[kept++] = argv[i];
  }
  bool expanded = kept > optind;
  if (expanded && !cli_expand_archives(kept, argv, optind, &argc, &argv)) {
    if (out != NULL)
      cli_json_finish(&w);
    return CLI_FAIL;
  }
  if (!expanded)
    argc = optind;
  for (int i = optind; i < argc; i++) {
    kpack_archive_t archive;
    if (cli_is_code_object(argv[i])) {
      if (cli_code_object_info(argv[i], out, first, demangle) != CLI_OK)
        status = CLI_FAIL;
      first = false;
      continue;
    }
    if (cli_is_host_binary(argv[i])) {
      if (cli_host_info(argv[i], out, first, verbose) != CLI_OK)
        status = CLI_FAIL;
      first = false;
      continue;
    }
    kpack_error_t err = kpack_open(argv[i], &archive);
    if (err == KPACK_SUCCESS) {
      err = print_info(argv[i], archive, out, first);
      first = false;
      kpack_close(archive);
    }
    if (err != KPACK_SUCCESS) {
      cli_input_error(argv[i], err, errno); /* kpack_open() keeps errno */
      status = CLI_FAIL;
    }
  }
  if (out != NULL)
    cli_json_finish(&w);
  if (expanded)
    cli_operands_free(argc, argv);
  return status;
}
