/* SPDX-License-Identifier: MIT
 *
 * HIP host binaries in `kpack info`, `kpack list` and `kpack resolve`: what
 * a fat binary carries (bundles, arches, sizes, compression; entry tables
 * only, so memory does not grow with the library) and what a kpack-ified
 * one names (per HIPK record: kernel, search paths as written and as the
 * loader resolves them).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define EM_AMDGPU 224u

bool cli_is_host_binary(const char* path) {
  uint8_t h[20];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  bool elf = read(fd, h, sizeof(h)) == (ssize_t)sizeof(h);
  close(fd);
  /* 64-bit little-endian ELF, and not a GPU code object. */
  return elf && memcmp(h, "\177ELF\2\1", 6) == 0 &&
         (unsigned)(h[18] | h[19] << 8) != EM_AMDGPU;
}

static const char* elf_type_name(uint16_t type) {
  switch (type) {
    case 1:
      return "ET_REL (relocatable object)";
    case 2:
      return "ET_EXEC (executable)";
    case 3:
      return "ET_DYN (shared object or PIE)";
  }
  return "unknown ELF type";
}

static const char* machine_name(uint16_t machine) {
  switch (machine) {
    case 62:
      return "x86-64";
    case 183:
      return "AArch64";
  }
  return "unknown machine";
}

/* "zstd", "zlib" or "none", as the JSON outputs name it. */
static const char* compression_name(const kpack_bundle_info_t* info) {
  return info->compression == KPACK_BUNDLE_ZSTD   ? "zstd"
         : info->compression == KPACK_BUNDLE_ZLIB ? "zlib"
                                                  : "none";
}

const char* cli_bundle_compression(const kpack_bundle_info_t* info,
                                   char buf[32]) {
  if (info->compression == KPACK_BUNDLE_UNCOMPRESSED)
    return "none";
  snprintf(buf, 32, "%s (CCOB v%u)", compression_name(info),
           info->ccob_version);
  return buf;
}

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* ---- fat binaries -------------------------------------------------------- */

bool cli_for_each_bundle(const char* path, const kpack_fatbin_t* fb,
                         cli_bundle_fn fn, void* user) {
  kpack_fatbin_info_t info;
  kpack_fatbin_get_info(fb, &info);
  for (size_t co = 0; co < info.bundle_count; co++) {
    kpack_bundle_t* b;
    kpack_error_t err = kpack_fatbin_list_bundle(fb, co, &b);
    if (err != KPACK_SUCCESS) {
      cli_error("%s: code object %zu: %s (%s)", path, co,
                kpack_error_string(err), cli_error_text(err));
      return false;
    }
    bool ok = fn(path, co, b, user);
    kpack_bundle_free(b);
    if (!ok)
      return false;
  }
  return true;
}

char* cli_bundle_arches(const kpack_bundle_t* b, const char* const* agent,
                        size_t agent_count, bool json, size_t* count) {
  kpack_bundle_info_t info;
  char* text = NULL;
  size_t len = 0, n = 0;
  if (count != NULL)
    *count = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == NULL)
    return NULL;
  kpack_bundle_get_info(b, &info);
  if (json)
    fputc('[', f);
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    kpack_bundle_get_entry(b, i, &e);
    if (e.arch == NULL ||
        (agent != NULL && !cli_agent_loads(agent, agent_count, e.arch)))
      continue;
    if (json) {
      fputs(n ? ", " : "", f);
      cli_json_string(f, e.arch);
    } else {
      fprintf(f, "%s%s", n ? " " : "", e.arch);
    }
    n++;
  }
  if (json)
    fputc(']', f);
  fclose(f);
  if (count != NULL && text != NULL)
    *count = n;
  return text;
}

bool cli_agent_loads(const char* const* agent, size_t agent_count,
                     const char* target) {
  for (size_t i = 0; i < agent_count; i++)
    if (kpack_target_serves(target, agent[i]))
      return true;
  return false;
}

typedef struct fat_state {
  bool json;
  bool first;
  cli_table table;
  uint64_t stored, size;
  size_t code_objects;
} fat_state;

static bool info_bundle(const char* path, size_t co, const kpack_bundle_t* b,
                        void* user) {
  fat_state* s = user;
  kpack_bundle_info_t info;
  char comp[32];
  (void)path;
  kpack_bundle_get_info(b, &info);
  s->stored += info.extent;
  s->size += info.bundle_size;
  if (s->json) {
    printf("%s{\"co_index\": %zu, \"compression\": ", s->first ? "" : ", ", co);
    s->first = false;
    cli_json_string(stdout, compression_name(&info));
    printf(
        ", \"ccob_version\": %u, \"stored_size\": %llu, \"size\": %llu, "
        "\"entries\": [",
        info.ccob_version, (unsigned long long)info.extent,
        (unsigned long long)info.bundle_size);
    for (size_t i = 0; i < info.entry_count; i++) {
      kpack_bundle_entry_t e;
      kpack_bundle_get_entry(b, i, &e);
      fputs(i ? ", {\"id\": " : "{\"id\": ", stdout);
      cli_json_string(stdout, e.id);
      fputs(", \"arch\": ", stdout);
      if (e.arch != NULL)
        cli_json_string(stdout, e.arch);
      else
        fputs("null", stdout);
      printf(", \"size\": %llu}", (unsigned long long)e.size);
    }
    fputs("]}", stdout);
    return true;
  }
  char* arches = cli_bundle_arches(b, NULL, 0, false, NULL);
  cli_table_row(&s->table, "%zu\t%s\t%llu\t%llu\t%s", co,
                cli_bundle_compression(&info, comp),
                (unsigned long long)info.extent,
                (unsigned long long)info.bundle_size,
                arches && *arches ? arches : "(no GPU code)");
  free(arches);
  return true;
}

static int info_fat(const char* path, const kpack_host_info_t* host,
                    bool json) {
  static const char* const headers[] = {"CO", "COMPRESSION", "STORED", "SIZE",
                                        "ARCHES"};
  static const bool right[] = {true, false, true, true, false};
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  fat_state s = {.json = json, .first = true};
  char a[32];
  kpack_error_t err = kpack_fatbin_open(path, &fb);
  if (err != KPACK_SUCCESS) {
    cli_kerror(path, err);
    return CLI_FAIL;
  }
  kpack_fatbin_get_info(fb, &info);
  s.table = (cli_table){.cols = 5, .headers = headers, .right = right};
  if (json) {
    printf(", \"fatbin_size\": %llu, \"numbered_by\": \"%s\", \"bundles\": [",
           (unsigned long long)info.fatbin_size,
           info.has_wrappers ? "wrappers" : "section order");
  } else {
    printf(
        "kind:         fat binary: device code inside, in .hip_fatbin "
        "(%s)\n",
        cli_human_size(a, info.fatbin_size));
    printf("records:      %zu in .hipFatBinSegment\n", host->wrapper_count);
    printf("code objects: %zu, %s\n", info.bundle_count,
           info.has_wrappers ? "numbered by .hipFatBinSegment (co_index)"
                             : "in .hip_fatbin order (no wrappers)");
  }
  bool ok = cli_for_each_bundle(path, fb, info_bundle, &s);
  if (json) {
    fputs("]}", stdout);
  } else {
    char b[32];
    putchar('\n');
    cli_table_print(&s.table, stdout);
    printf("%zu code object%s: %s stored, %s decompressed\n", info.bundle_count,
           info.bundle_count == 1 ? "" : "s", cli_human_size(a, s.stored),
           cli_human_size(b, s.size));
  }
  cli_table_free(&s.table);
  kpack_fatbin_close(fb);
  return ok ? CLI_OK : CLI_FAIL;
}

/* ---- kpack-ified binaries ------------------------------------------------ */

/* Reports the records that cannot be used, on stderr; false if any. */
static bool report_records(const char* path, const kpack_host_t* host) {
  kpack_host_info_t info;
  bool ok = true;
  kpack_host_get_info(host, &info);
  for (size_t i = 0; i < info.wrapper_count; i++) {
    kpack_host_wrapper_t w;
    if (kpack_host_get_wrapper(host, i, &w) == KPACK_SUCCESS)
      continue;
    cli_error("%s: .hipFatBinSegment record %zu (magic 0x%08x): %s: %s", path,
              i, (unsigned)w.magic, kpack_error_string(w.status),
              kpack_host_problem_string(w.problem));
    ok = false;
  }
  return ok;
}

static const char* magic_name(uint32_t magic) {
  return magic == KPACK_HOST_HIPK_MAGIC   ? "HIPK"
         : magic == KPACK_HOST_HIPF_MAGIC ? "HIPF"
                                          : "unknown";
}

void cli_host_json_search_paths(const char* path,
                                const kpack_host_wrapper_t* w) {
  fputc('[', stdout);
  for (size_t j = 0; j < w->search_path_count; j++) {
    char* resolved = NULL;
    kpack_resolve_search_path(path, w->search_paths[j], &resolved);
    fputs(j ? ", {\"written\": " : "{\"written\": ", stdout);
    cli_json_string(stdout, w->search_paths[j]);
    fputs(", \"resolved\": ", stdout);
    if (resolved != NULL)
      cli_json_string(stdout, resolved);
    else
      fputs("null", stdout);
    fputc('}', stdout);
    free(resolved);
  }
  fputc(']', stdout);
}

static void json_record(const char* path, size_t index,
                        const kpack_host_wrapper_t* w) {
  printf("%s{\"index\": %zu, \"magic\": \"%s\", \"version\": %u",
         index ? ", " : "", index, magic_name(w->magic), (unsigned)w->version);
  if (w->magic == KPACK_HOST_HIPK_MAGIC)
    printf(", \"co_index\": %llu", (unsigned long long)w->reserved);
  fputs(", \"status\": ", stdout);
  cli_json_string(stdout, kpack_error_string(w->status));
  if (w->status != KPACK_SUCCESS) {
    fputs(", \"problem\": ", stdout);
    cli_json_string(stdout, kpack_host_problem_string(w->problem));
  }
  if (w->kernel_name != NULL) {
    fputs(", \"kernel_name\": ", stdout);
    cli_json_string(stdout, w->kernel_name);
    fputs(", \"search_paths\": ", stdout);
    cli_host_json_search_paths(path, w);
  }
  fputc('}', stdout);
}

void cli_host_record_rows(cli_table* t, const char* path,
                          const kpack_host_t* host) {
  kpack_host_info_t info;
  kpack_host_get_info(host, &info);
  for (size_t i = 0; i < info.wrapper_count; i++) {
    kpack_host_wrapper_t w;
    kpack_host_get_wrapper(host, i, &w);
    if (w.status != KPACK_SUCCESS) {
      cli_table_row(t, "%zu\t%s\t-\t%s: %s\t", i, magic_name(w.magic),
                    kpack_error_string(w.status),
                    kpack_host_problem_string(w.problem));
      continue;
    }
    if (w.magic != KPACK_HOST_HIPK_MAGIC) {
      cli_table_row(t, "%zu\t%s\t-\t(device code in .hip_fatbin)\t", i,
                    magic_name(w.magic));
      continue;
    }
    for (size_t j = 0; j < w.search_path_count; j++) {
      char* resolved = NULL;
      kpack_resolve_search_path(path, w.search_paths[j], &resolved);
      if (j == 0)
        cli_table_row(t, "%zu\tHIPK\t%s#%llu\t%s\t%s", i, w.kernel_name,
                      (unsigned long long)w.reserved, w.search_paths[j],
                      resolved ? resolved : "(out of memory)");
      else
        cli_table_row(t, "\t\t\t%s\t%s", w.search_paths[j],
                      resolved ? resolved : "(out of memory)");
      free(resolved);
    }
  }
}

static int info_kpackified(const char* path, const kpack_host_t* host,
                           const kpack_host_info_t* info, bool json) {
  static const char* const headers[] = {"RECORD", "MAGIC", "KERNEL",
                                        "SEARCH PATH", "RESOLVED"};
  bool ok = report_records(path, host);
  if (json) {
    fputs(", \"records\": [", stdout);
    for (size_t i = 0; i < info->wrapper_count; i++) {
      kpack_host_wrapper_t w;
      kpack_host_get_wrapper(host, i, &w);
      json_record(path, i, &w);
    }
    fputs("]}", stdout);
    return ok ? CLI_OK : CLI_FAIL;
  }
  printf("kind:         kpack-ified: device code in kpack archives\n");
  printf("records:      %zu in .hipFatBinSegment\n\n", info->wrapper_count);
  cli_table t = {.cols = 5, .headers = headers};
  cli_host_record_rows(&t, path, host);
  cli_table_print(&t, stdout);
  cli_table_free(&t);
  printf(
      "\nKERNEL is what the loader looks up (kernel_name#co_index); "
      "RESOLVED is\nwhere it looks for SEARCH PATH, @GFXARCH@ expanded "
      "per target.\n");
  return ok ? CLI_OK : CLI_FAIL;
}

int cli_host_info(const char* path, bool json, bool first) {
  kpack_host_t* host;
  kpack_host_info_t info;
  kpack_error_t err = kpack_host_open(path, &host);
  if (err != KPACK_SUCCESS) {
    cli_kerror(path, err);
    return CLI_FAIL;
  }
  kpack_host_get_info(host, &info);
  const char* kind = info.kind == KPACK_HOST_KPACKIFIED ? "kpack-ified"
                     : info.kind == KPACK_HOST_FAT      ? "fat"
                                                        : "none";
  if (json) {
    fputs(first ? "\n  {\"binary\": " : ",\n  {\"binary\": ", stdout);
    cli_json_string(stdout, path);
    printf(", \"kind\": \"%s\", \"elf_type\": %u, \"machine\": %u", kind,
           (unsigned)info.elf_type, (unsigned)info.machine);
  } else {
    if (!first)
      putchar('\n');
    printf("binary:       %s\n", path);
    printf("elf:          %s, %s\n", elf_type_name(info.elf_type),
           machine_name(info.machine));
  }
  int status = CLI_OK;
  if (info.kind == KPACK_HOST_KPACKIFIED) {
    status = info_kpackified(path, host, &info, json);
  } else if (info.kind == KPACK_HOST_FAT) {
    status = info_fat(path, &info, json);
  } else {
    if (json)
      fputc('}', stdout);
    else
      printf(
          "kind:         no HIP device code (no .hipFatBinSegment, no "
          ".hip_fatbin)\n");
  }
  kpack_host_close(host);
  return status;
}

/* ---- list
 * ---------------------------------------------------------------------- */

typedef struct list_state {
  const char* name; /* the binary name create would give: the file name */
  bool json;
  bool* first;
  cli_table table;
  uint64_t size;
  size_t count;
} list_state;

static bool list_bundle(const char* path, size_t co, const kpack_bundle_t* b,
                        void* user) {
  list_state* s = user;
  kpack_bundle_info_t info;
  char comp[32];
  kpack_bundle_get_info(b, &info);
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    kpack_bundle_get_entry(b, i, &e);
    if (e.arch == NULL)
      continue;
    s->size += e.size;
    s->count++;
    if (s->json) {
      fputs(*s->first ? "\n  {\"file\": " : ",\n  {\"file\": ", stdout);
      *s->first = false;
      cli_json_string(stdout, path);
      char* binary = NULL;
      if (asprintf(&binary, "%s#%zu", s->name, co) < 0)
        binary = NULL;
      fputs(", \"binary\": ", stdout);
      cli_json_string(stdout, binary ? binary : s->name);
      free(binary);
      printf(", \"co_index\": %zu, \"arch\": ", co);
      cli_json_string(stdout, e.arch);
      fputs(", \"id\": ", stdout);
      cli_json_string(stdout, e.id);
      printf(", \"size\": %llu, \"compression\": \"%s\"}",
             (unsigned long long)e.size, compression_name(&info));
      continue;
    }
    cli_table_row(&s->table, "%s#%zu\t%s\t%llu\t%s", s->name, co, e.arch,
                  (unsigned long long)e.size,
                  cli_bundle_compression(&info, comp));
  }
  return true;
}

int cli_host_list(const char* path, bool json, bool* first) {
  static const char* const headers[] = {"BINARY", "ARCH", "SIZE", "BUNDLE"};
  static const bool right[] = {false, false, true, false};
  kpack_host_t* host;
  kpack_host_info_t info;
  kpack_fatbin_t* fb;
  char a[32];
  kpack_error_t err = kpack_host_open(path, &host);
  if (err != KPACK_SUCCESS) {
    cli_kerror(path, err);
    return CLI_FAIL;
  }
  kpack_host_get_info(host, &info);
  kpack_host_close(host);
  if (info.kind == KPACK_HOST_KPACKIFIED) {
    cli_error(
        "%s: kpack-ified: its code objects are in kpack archives "
        "(`kpack info %s` shows where)",
        path, path);
    return CLI_OK;
  }
  if (info.kind == KPACK_HOST_NONE) {
    cli_error("%s: no HIP device code (no .hipFatBinSegment, no .hip_fatbin)",
              path);
    return CLI_FAIL;
  }
  if ((err = kpack_fatbin_open(path, &fb)) != KPACK_SUCCESS) {
    cli_kerror(path, err);
    return CLI_FAIL;
  }
  list_state s = {.name = base_name(path), .json = json, .first = first};
  s.table = (cli_table){.cols = 4, .headers = headers, .right = right};
  bool ok = cli_for_each_bundle(path, fb, list_bundle, &s);
  if (!json) {
    if (!*first)
      putchar('\n');
    *first = false;
    cli_table_print(&s.table, stdout);
    printf("%zu code object%s in %s, %s\n", s.count, s.count == 1 ? "" : "s",
           path, cli_human_size(a, s.size));
  }
  cli_table_free(&s.table);
  kpack_fatbin_close(fb);
  return ok ? CLI_OK : CLI_FAIL;
}
