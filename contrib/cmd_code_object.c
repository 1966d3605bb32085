/* SPDX-License-Identifier: MIT
 *
 * What is inside code objects, for the kpack tool: `kpack info` on a single
 * code object file (target, version, the kernel table, or the metadata note
 * as JSON) and `kpack list --kernels` over archives (one row per binary,
 * arch and GPU kernel), both over libkpack's code object reader.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- shared -------------------------------------------------------------- */

const char* cli_code_object_error_text(kpack_error_t err) {
  switch (err) {
    case KPACK_ERROR_INVALID_FORMAT:
      return "not an AMDGPU code object, or its ELF tables or notes are cut";
    case KPACK_ERROR_MSGPACK_PARSE_FAILED:
      return "metadata note is not valid MessagePack";
    case KPACK_ERROR_INVALID_METADATA:
      return "metadata note of the wrong shape";
    default:
      return cli_error_text(err);
  }
}

static void code_object_error(const char* subject, kpack_error_t err) {
  cli_error("%s: %s (%s)", subject, kpack_error_string(err),
            cli_code_object_error_text(err));
}

bool cli_is_code_object(const char* path) {
  uint8_t header[64];
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    return false;
  size_t n = fread(header, 1, sizeof(header), f);
  fclose(f);
  return kpack_is_code_object(header, n);
}

/* The resource columns of one kernel, tab-separated for cli_table_row, in
 * the order of the `kernels` file a mount shows; "-" where the note has no
 * value. */
static void resource_cells(const kpack_co_kernel_t* k, char* out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < KPACK_CO_RESOURCE_COUNT && used < cap; i++) {
    const char* key;
    uint64_t value;
    int n = kpack_co_kernel_resource(k, i, &key, &value)
                ? snprintf(out + used, cap - used, "%s%" PRIu64, i ? "\t" : "",
                           value)
                : snprintf(out + used, cap - used, "%s-", i ? "\t" : "");
    used += n > 0 ? (size_t)n : 0;
  }
}

/* Their headers: the keys of the `kernels` file in capitals (VGPR, LDS...). */
static const char* const* resource_headers(void) {
  static char names[KPACK_CO_RESOURCE_COUNT][16];
  static const char* headers[KPACK_CO_RESOURCE_COUNT];
  const kpack_co_kernel_t none = {0};
  for (size_t i = 0; i < KPACK_CO_RESOURCE_COUNT; i++) {
    const char* key;
    uint64_t value;
    kpack_co_kernel_resource(&none, i, &key, &value);
    for (size_t c = 0; c + 1 < sizeof(names[i]) && key[c]; c++)
      names[i][c] = (char)toupper((unsigned char)key[c]);
    headers[i] = names[i];
  }
  return headers;
}

#define RESOURCE_COLUMNS KPACK_CO_RESOURCE_COUNT

/* `"key": N` or `"key": null`, with the separator before it. */
static void json_count(const char* key, const kpack_co_kernel_t* k,
                       uint32_t bit, uint64_t value) {
  if (k->present & bit)
    printf(", \"%s\": %" PRIu64, key, value);
  else
    printf(", \"%s\": null", key);
}

/* The members of a kernel's JSON object after its opening brace: name,
 * symbol and every count, named as in the note without the leading dot. */
static void json_kernel(const kpack_co_kernel_t* k) {
  fputs("\"name\": ", stdout);
  cli_json_string(stdout, k->name);
  fputs(", \"symbol\": ", stdout);
  cli_json_string(stdout, k->symbol);
  json_count("vgpr_count", k, KPACK_CO_VGPR_COUNT, k->vgpr_count);
  json_count("sgpr_count", k, KPACK_CO_SGPR_COUNT, k->sgpr_count);
  json_count("agpr_count", k, KPACK_CO_AGPR_COUNT, k->agpr_count);
  json_count("group_segment_fixed_size", k, KPACK_CO_GROUP_SEGMENT_FIXED_SIZE,
             k->group_segment_fixed_size);
  json_count("private_segment_fixed_size", k,
             KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE,
             k->private_segment_fixed_size);
  json_count("kernarg_segment_size", k, KPACK_CO_KERNARG_SEGMENT_SIZE,
             k->kernarg_segment_size);
  json_count("wavefront_size", k, KPACK_CO_WAVEFRONT_SIZE, k->wavefront_size);
  json_count("max_flat_workgroup_size", k, KPACK_CO_MAX_FLAT_WORKGROUP_SIZE,
             k->max_flat_workgroup_size);
  json_count("vgpr_spill_count", k, KPACK_CO_VGPR_SPILL_COUNT,
             k->vgpr_spill_count);
  json_count("sgpr_spill_count", k, KPACK_CO_SGPR_SPILL_COUNT,
             k->sgpr_spill_count);
}

/* Reads and parses a code object file; a message and the status if not. */
static kpack_error_t load_file(const char* path, kpack_code_object_t** co) {
  void* data = NULL;
  size_t size = 0;
  *co = NULL;
  if (!cli_read_file(path, &data, &size)) {
    cli_error("%s: %s", path, strerror(errno));
    return KPACK_ERROR_IO_ERROR;
  }
  kpack_error_t err = kpack_code_object_parse(data, size, co);
  free(data);
  if (err != KPACK_SUCCESS)
    code_object_error(path, err);
  return err;
}

/* ---- kpack info FILE.hsaco ----------------------------------------------- */

static void info_json(const char* path, const kpack_code_object_t* co,
                      const kpack_code_object_info_t* info, bool first) {
  fputs(first ? "\n  {\"file\": " : ",\n  {\"file\": ", stdout);
  cli_json_string(stdout, path);
  printf(", \"code_object_version\": %u, \"e_flags\": %" PRIu32
         ", \"target\": ",
         info->version, info->e_flags);
  cli_json_string(stdout, info->target);
  fputs(", \"processor\": ", stdout);
  cli_json_string(stdout, info->processor);
  printf(", \"xnack\": \"%s\", \"sramecc\": \"%s\", \"metadata_target\": ",
         kpack_feature_name(info->xnack), kpack_feature_name(info->sramecc));
  cli_json_string(stdout, info->metadata_target);
  fputs(", \"kernels\": [", stdout);
  for (size_t i = 0; i < info->kernel_count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    fputs(i ? ",\n    {" : "\n    {", stdout);
    json_kernel(&k);
    fputs("}", stdout);
  }
  fputs(info->kernel_count ? "\n  ]}" : "]}", stdout);
}

static void info_text(const char* path, const kpack_code_object_t* co,
                      const kpack_code_object_info_t* info, bool first) {
  static const char* headers[RESOURCE_COLUMNS + 1];
  static const bool right[RESOURCE_COLUMNS + 1] = {true, true, true, true, true,
                                                   true, true, true, false};
  memcpy(headers, resource_headers(), RESOURCE_COLUMNS * sizeof(*headers));
  headers[RESOURCE_COLUMNS] = "KERNEL";
  cli_table t = {
      .cols = RESOURCE_COLUMNS + 1, .headers = headers, .right = right};
  char cells[256];
  if (!first)
    putchar('\n');
  printf("file:         %s\n", path);
  if (info->version > 0)
    printf("code object:  AMDGPU, version %u, e_flags 0x%" PRIx32 "\n",
           info->version, info->e_flags);
  else
    printf("code object:  AMDGPU (not for the HSA runtime), e_flags 0x%" PRIx32
           "\n",
           info->e_flags);
  printf("target:       %s\n", *info->target ? info->target : "(unknown)");
  printf("processor:    %s (xnack %s, sramecc %s)\n",
         *info->processor ? info->processor : "(unknown)",
         kpack_feature_name(info->xnack), kpack_feature_name(info->sramecc));
  if (info->has_metadata)
    printf("metadata:     %s, %zu bytes\n",
           *info->metadata_target ? info->metadata_target : "(no target)",
           info->metadata_size);
  else
    printf("metadata:     none (no NT_AMDGPU_METADATA note)\n");
  printf("kernels:      %zu\n", info->kernel_count);
  if (info->kernel_count == 0)
    return;
  putchar('\n');
  for (size_t i = 0; i < info->kernel_count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    resource_cells(&k, cells, sizeof(cells));
    cli_table_row(&t, "%s\t%s", cells, k.name);
  }
  cli_table_print(&t, stdout);
  cli_table_free(&t);
}

int cli_code_object_info(const char* path, bool json, bool first) {
  kpack_code_object_t* co;
  kpack_code_object_info_t info;
  if (load_file(path, &co) != KPACK_SUCCESS)
    return CLI_FAIL;
  kpack_code_object_get_info(co, &info);
  if (json)
    info_json(path, co, &info, first);
  else
    info_text(path, co, &info, first);
  kpack_code_object_free(co);
  return CLI_OK;
}

int cli_code_object_metadata(const char* path) {
  void* data = NULL;
  size_t size = 0;
  kpack_co_render_t r;
  if (!cli_read_file(path, &data, &size)) {
    cli_error("%s: %s", path, strerror(errno));
    return CLI_FAIL;
  }
  /* The bytes a mount shows as metadata.json: one renderer for both. */
  kpack_error_t err = kpack_co_render(data, size, &r);
  free(data);
  if (err == KPACK_SUCCESS)
    err = r.status;
  if (err == KPACK_SUCCESS)
    fwrite(r.metadata_json, 1, r.metadata_json_size, stdout);
  else
    code_object_error(path, err);
  kpack_co_render_free(&r);
  return err == KPACK_SUCCESS ? CLI_OK : CLI_FAIL;
}

/* ---- kpack list --kernels ------------------------------------------------ */

typedef struct kernels_state {
  const char* archive_path;
  char* const* globs; /* --kernel patterns; none matches every kernel */
  size_t glob_count;
  bool json, many, first;
  int status;
  cli_table table;
  size_t code_objects, kernels;
} kernels_state;

static bool wanted(const kernels_state* s, const char* name) {
  if (s->glob_count == 0)
    return true;
  for (size_t i = 0; i < s->glob_count; i++)
    if (fnmatch(s->globs[i], name, 0) == 0)
      return true;
  return false;
}

static void kernel_row(kernels_state* s, const char* binary, const char* arch,
                       const kpack_code_object_info_t* info,
                       const kpack_co_kernel_t* k) {
  char cells[256];
  s->kernels++;
  if (s->json) {
    fputs(s->first ? "\n  {\"archive\": " : ",\n  {\"archive\": ", stdout);
    s->first = false;
    cli_json_string(stdout, s->archive_path);
    fputs(", \"binary\": ", stdout);
    cli_json_string(stdout, binary);
    fputs(", \"arch\": ", stdout);
    cli_json_string(stdout, arch);
    fputs(", \"target\": ", stdout);
    cli_json_string(stdout, info->target);
    fputs(", ", stdout);
    json_kernel(k);
    fputs("}", stdout);
    return;
  }
  resource_cells(k, cells, sizeof(cells));
  if (s->many)
    cli_table_row(&s->table, "%s\t%s\t%s\t%s\t%s", s->archive_path, binary,
                  arch, cells, k->name);
  else
    cli_table_row(&s->table, "%s\t%s\t%s\t%s", binary, arch, cells, k->name);
}

static bool list_code_object(kpack_archive_t archive, const char* binary,
                             const char* arch, const kpack_kernel_info_t* kinfo,
                             void* user) {
  kernels_state* s = user;
  void* data = NULL;
  size_t size;
  kpack_code_object_t* co = NULL;
  if (cli_interrupted())
    return false;
  if (strcmp(kinfo->type, "hsaco") != 0)
    return true; /* not a code object by its type: nothing to list */
  kpack_error_t err = kpack_get_kernel(archive, binary, arch, &data, &size);
  if (err == KPACK_SUCCESS)
    err = kpack_code_object_parse(data, size, &co);
  kpack_free_kernel(data);
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
    if (wanted(s, k.name))
      kernel_row(s, binary, arch, &info, &k);
  }
  kpack_code_object_free(co);
  return true;
}

int cli_list_kernels(int argc, char** argv) {
  enum { OPT_JSON = 256, OPT_KERNELS, OPT_KERNEL };
  static const struct option options[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"kernels", no_argument, NULL, OPT_KERNELS},
      {"kernel", required_argument, NULL, OPT_KERNEL},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static const char* headers[RESOURCE_COLUMNS + 4];
  static bool right[RESOURCE_COLUMNS + 4];
  kernels_state s = {.first = true, .status = CLI_OK};
  char** globs = calloc((size_t)argc + 1, sizeof(*globs));
  int c;
  if (globs == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
      case OPT_JSON:
        s.json = true;
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
        return cli_usage_error(&cli_list_command, "unknown option");
    }
  }
  if (optind >= argc) {
    free(globs);
    return cli_usage_error(&cli_list_command, "no ARCHIVE given");
  }
  s.globs = globs;
  s.many = argc - optind > 1;
  /* [ARCHIVE] BINARY ARCH, the resources, KERNEL last: names are long. */
  size_t col = 0;
  if (s.many)
    headers[col++] = "ARCHIVE";
  headers[col++] = "BINARY";
  headers[col++] = "ARCH";
  const char* const* resources = resource_headers();
  for (size_t i = 0; i < RESOURCE_COLUMNS; i++) {
    right[col] = true;
    headers[col++] = resources[i];
  }
  right[col] = false;
  headers[col++] = "KERNEL";
  s.table = (cli_table){.cols = col, .headers = headers, .right = right};

  cli_catch_signals();
  if (s.json)
    fputs("[", stdout);
  for (int i = optind; i < argc && !cli_interrupted(); i++) {
    kpack_archive_t archive;
    kpack_error_t err = kpack_open(argv[i], &archive);
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      s.status = CLI_FAIL;
      continue;
    }
    s.archive_path = argv[i];
    err = cli_for_each_kernel(archive, list_code_object, &s);
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      s.status = CLI_FAIL;
    }
    kpack_close(archive);
  }
  if (s.json) {
    fputs(s.first ? "]\n" : "\n]\n", stdout);
  } else {
    cli_table_print(&s.table, stdout);
    printf("%zu kernel%s in %zu code object%s\n", s.kernels,
           s.kernels == 1 ? "" : "s", s.code_objects,
           s.code_objects == 1 ? "" : "s");
  }
  cli_table_free(&s.table);
  free(globs);
  if (cli_interrupted()) {
    cli_error("list: interrupted");
    return CLI_INTERRUPTED;
  }
  return s.status;
}
