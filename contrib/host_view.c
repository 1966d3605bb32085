/* SPDX-License-Identifier: MIT
 *
 * What the kpack tool shows of a HIP host binary (declared in host_view.h),
 * for `kpack info`, `kpack list` and `kpack resolve`: what a fat binary
 * carries (bundles, arches, sizes, compression; entry tables only, so
 * memory does not grow with the library) and what a kpack-ified one names
 * (per HIPK record: kernel, search paths as written and as the loader
 * resolves them).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "host_view.h"
#include "json.h"

bool cli_is_host_binary(const char* path) {
  uint8_t h[20];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, h, sizeof(h));
  close(fd);
  return n > 0 && kpack_is_host_binary(h, (size_t)n);
}

void cli_host_error(const char* path, kpack_error_t err) {
  char why[256];
  if (err == KPACK_ERROR_INVALID_FORMAT &&
      kpack_host_diagnose(path, why, sizeof(why)) == err && why[0] != '\0')
    cli_error("%s: %s (%s)", path, kpack_error_string(err), why);
  else
    cli_kerror(path, err);
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

/* Whether entry `e` is one the caller asked for. */
static bool entry_wanted(const kpack_bundle_entry_t* e,
                         const char* const* agent, size_t agent_count) {
  return e->arch != NULL &&
         (agent == NULL || cli_agent_loads(agent, agent_count, e->arch));
}

char* cli_bundle_arches(const kpack_bundle_t* b, const char* const* agent,
                        size_t agent_count, size_t* count) {
  kpack_bundle_info_t info;
  char* text = NULL;
  size_t len = 0, n = 0;
  if (count != NULL)
    *count = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == NULL)
    return NULL;
  kpack_bundle_get_info(b, &info);
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    kpack_bundle_get_entry(b, i, &e);
    if (!entry_wanted(&e, agent, agent_count))
      continue;
    fprintf(f, "%s%s", n ? " " : "", e.arch);
    n++;
  }
  fclose(f);
  if (count != NULL && text != NULL)
    *count = n;
  return text;
}

size_t cli_bundle_arches_json(cli_json* w, const kpack_bundle_t* b,
                              const char* const* agent, size_t agent_count) {
  kpack_bundle_info_t info;
  size_t n = 0;
  kpack_bundle_get_info(b, &info);
  cli_json_array(w, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    kpack_bundle_get_entry(b, i, &e);
    if (!entry_wanted(&e, agent, agent_count))
      continue;
    cli_json_str(w, e.arch);
    n++;
  }
  cli_json_end(w);
  return n;
}

bool cli_agent_loads(const char* const* agent, size_t agent_count,
                     const char* target) {
  for (size_t i = 0; i < agent_count; i++)
    if (kpack_target_serves(target, agent[i]))
      return true;
  return false;
}

typedef struct fat_state {
  cli_json* json; /* NULL for the table */
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
  if (s->json != NULL) {
    cli_json* w = s->json;
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_json_key_uint(w, "co_index", co);
    cli_json_key_str(w, "compression", compression_name(&info));
    cli_json_key_uint(w, "ccob_version", info.ccob_version);
    cli_json_key_uint(w, "stored_size", info.extent);
    cli_json_key_uint(w, "size", info.bundle_size);
    cli_json_key(w, "entries");
    cli_json_array(w, CLI_JSON_INLINE, false);
    for (size_t i = 0; i < info.entry_count; i++) {
      kpack_bundle_entry_t e;
      kpack_bundle_get_entry(b, i, &e);
      cli_json_object(w, CLI_JSON_INLINE, false);
      cli_json_key_str(w, "id", e.id);
      cli_json_key_str(w, "arch", e.arch);
      cli_json_key_uint(w, "size", e.size);
      cli_json_end(w);
    }
    cli_json_end(w);
    cli_json_end(w);
    return true;
  }
  size_t count = 0; /* its code objects, one per GPU arch */
  char* arches = cli_bundle_arches(b, NULL, 0, &count);
  s->code_objects += count;
  cli_table_row(&s->table, "%zu\t%s\t%llu\t%llu\t%s", co,
                cli_bundle_compression(&info, comp),
                (unsigned long long)info.extent,
                (unsigned long long)info.bundle_size,
                arches && *arches ? arches : "(no GPU code)");
  free(arches);
  return true;
}

/* The rest of a fat binary's `kpack info`; with `json`, members of its
 * object. */
static int info_fat(const char* path, const kpack_host_info_t* host,
                    cli_json* json) {
  static const char* const headers[] = {"CO", "COMPRESSION", "STORED", "SIZE",
                                        "ARCHES"};
  static const bool right[] = {true, false, true, true, false};
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  fat_state s = {.json = json};
  char a[32];
  kpack_error_t err = kpack_fatbin_open(path, &fb);
  if (err != KPACK_SUCCESS) {
    cli_host_error(path, err);
    return CLI_FAIL;
  }
  kpack_fatbin_get_info(fb, &info);
  s.table = (cli_table){.cols = 5, .headers = headers, .right = right};
  if (json != NULL) {
    cli_json_key_uint(json, "fatbin_size", info.fatbin_size);
    cli_json_key_str(json, "numbered_by",
                     info.has_wrappers ? "wrappers" : "section order");
    cli_json_key(json, "bundles");
    cli_json_array(json, CLI_JSON_INLINE, false);
  } else {
    printf(
        "kind:         fat binary: device code inside, in .hip_fatbin "
        "(%s)\n",
        cli_human_size(a, info.fatbin_size));
    printf("records:      %zu in .hipFatBinSegment\n", host->wrapper_count);
    printf("bundles:      %zu, %s\n", info.bundle_count,
           info.has_wrappers ? "numbered by .hipFatBinSegment (co_index)"
                             : "in .hip_fatbin order (no wrappers)");
  }
  bool ok = cli_for_each_bundle(path, fb, info_bundle, &s);
  if (json != NULL) {
    cli_json_end(json);
  } else {
    char b[32];
    putchar('\n');
    cli_table_print(&s.table, stdout);
    printf("%zu bundle%s, %zu code object%s: %s stored, %s decompressed\n",
           info.bundle_count, info.bundle_count == 1 ? "" : "s", s.code_objects,
           s.code_objects == 1 ? "" : "s", cli_human_size(a, s.stored),
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

const char* cli_search_path_shown(const char* path, const char* written,
                                  char** owned) {
  *owned = NULL;
  if (written[0] == '\0')
    return CLI_SEARCH_PATH_DROPPED; /* as the loader's add_items() does */
  kpack_resolve_search_path(path, written, owned);
  return *owned != NULL ? *owned : "(out of memory)";
}

const char* cli_search_path_written(const char* written) {
  return written[0] != '\0' ? written : "\"\"";
}

void cli_host_json_search_paths(cli_json* json, const char* path,
                                const kpack_host_wrapper_t* w) {
  cli_json_array(json, CLI_JSON_INLINE, false);
  for (size_t j = 0; j < w->search_path_count; j++) {
    char* resolved = NULL;
    cli_search_path_shown(path, w->search_paths[j], &resolved);
    cli_json_object(json, CLI_JSON_INLINE, false);
    cli_json_key_str(json, "written", w->search_paths[j]);
    cli_json_key_str(json, "resolved", resolved);
    if (w->search_paths[j][0] == '\0')
      cli_json_key_bool(json, "dropped", true);
    cli_json_end(json);
    free(resolved);
  }
  cli_json_end(json);
}

static void json_record(cli_json* json, const char* path,
                        const kpack_host_t* host, size_t index,
                        const kpack_host_wrapper_t* w) {
  const char* const* arches;
  size_t arch_count;
  kpack_host_get_arches(host, index, &arches, &arch_count);
  cli_json_object(json, CLI_JSON_INLINE, false);
  cli_json_key_uint(json, "index", index);
  cli_json_key_str(json, "magic", magic_name(w->magic));
  cli_json_key_uint(json, "version", w->version);
  if (w->magic == KPACK_HOST_HIPK_MAGIC)
    cli_json_key_uint(json, "co_index", w->reserved);
  cli_json_key_str(json, "status", kpack_error_string(w->status));
  if (w->status != KPACK_SUCCESS)
    cli_json_key_str(json, "problem", kpack_host_problem_string(w->problem));
  if (w->kernel_name != NULL) {
    cli_json_key_str(json, "kernel_name", w->kernel_name);
    cli_json_key(json, "search_paths");
    cli_host_json_search_paths(json, path, w);
    cli_json_key(json, "recorded_arches");
    if (arch_count > 0) {
      cli_json_array(json, CLI_JSON_INLINE, false);
      for (size_t i = 0; i < arch_count; i++)
        cli_json_str(json, arches[i]);
      cli_json_end(json);
    } else {
      cli_json_null(json);
    }
  }
  cli_json_end(json);
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
      const char* written =
          cli_table_text(t, cli_search_path_written(w.search_paths[j]));
      const char* where = cli_table_text(
          t, cli_search_path_shown(path, w.search_paths[j], &resolved));
      if (j == 0)
        cli_table_row(t, "%zu\tHIPK\t%s#%llu\t%s\t%s", i,
                      cli_table_text(t, w.kernel_name),
                      (unsigned long long)w.reserved, written, where);
      else
        cli_table_row(t, "\t\t\t%s\t%s", written, where);
      free(resolved);
    }
  }
}

/* ---- what a kpack-ified binary's search paths reach ----------------------
 *
 * A split binary has one record per code object (111 in a math library),
 * all naming the same search paths: `kpack info` sums them up as the
 * distinct paths, the archives found where they lead (@GFXARCH@ matching
 * any arch, a directory its *.kpack files) and the arches those declare,
 * which is what GPUs the binary can be loaded for here. */

typedef struct reach_path {
  const char* written; /* owned by the host */
  char* resolved;      /* NULL for an empty path, which the loader drops */
  size_t records;      /* how many records name it */
} reach_path;

typedef struct reach_archive {
  char* path;
  char** arches; /* declared, in the archive's order */
  size_t arch_count;
  kpack_error_t err; /* why it could not be opened */
} reach_archive;

typedef struct reach {
  reach_path* paths;
  size_t path_count, path_cap;
  reach_archive* archives;
  size_t archive_count, archive_cap;
  const char** arches; /* every declared arch, once, owned by archives */
  size_t arch_count, arch_cap;
  size_t usable; /* HIPK records whose metadata parsed */
  size_t first_co, last_co;
  const char* kernel; /* the records' kernel name, NULL when they differ */
  bool kernels_differ;
} reach;

static void reach_free(reach* r) {
  for (size_t i = 0; i < r->path_count; i++)
    free(r->paths[i].resolved);
  for (size_t i = 0; i < r->archive_count; i++) {
    for (size_t j = 0; j < r->archives[i].arch_count; j++)
      free(r->archives[i].arches[j]);
    free(r->archives[i].arches);
    free(r->archives[i].path);
  }
  free(r->paths);
  free(r->archives);
  free(r->arches);
}

static bool reach_add_arch(reach* r, const char* arch) {
  for (size_t i = 0; i < r->arch_count; i++)
    if (strcmp(r->arches[i], arch) == 0)
      return true;
  const char** grown =
      cli_grow(r->arches, r->arch_count, &r->arch_cap, sizeof(*grown), 16);
  if (grown == NULL)
    return false;
  r->arches = grown;
  r->arches[r->arch_count++] = arch;
  return true;
}

/* Opens one archive a path leads to and notes what it declares. */
static bool reach_add_archive(reach* r, const char* file) {
  for (size_t i = 0; i < r->archive_count; i++)
    if (strcmp(r->archives[i].path, file) == 0)
      return true;
  reach_archive* grown = cli_grow(r->archives, r->archive_count,
                                  &r->archive_cap, sizeof(*grown), 8);
  if (grown == NULL)
    return false;
  r->archives = grown;
  reach_archive* a = &r->archives[r->archive_count];
  memset(a, 0, sizeof(*a));
  if ((a->path = strdup(file)) == NULL)
    return false;
  r->archive_count++;
  kpack_archive_t archive;
  size_t count = 0;
  if ((a->err = kpack_open(file, &archive)) != KPACK_SUCCESS)
    return true;
  bool ok = true;
  if ((a->err = kpack_get_architecture_count(archive, &count)) ==
          KPACK_SUCCESS &&
      count > 0 && (a->arches = calloc(count, sizeof(*a->arches))) == NULL)
    ok = false;
  for (size_t i = 0; ok && a->arches != NULL && i < count; i++) {
    const char* arch;
    if (kpack_get_architecture(archive, i, &arch) != KPACK_SUCCESS)
      break;
    if ((a->arches[i] = strdup(arch)) == NULL)
      ok = false;
    else
      a->arch_count++;
  }
  kpack_close(archive);
  for (size_t i = 0; ok && i < a->arch_count; i++)
    ok = reach_add_arch(r, a->arches[i]);
  return ok;
}

/* The archives a resolved search path leads to: @GFXARCH@ as any name, a
 * directory as its *.kpack files, else the file itself when it exists. */
static bool reach_follow(reach* r, const char* resolved) {
  char* pattern = NULL;
  const char* at = strstr(resolved, "@GFXARCH@");
  struct stat st;
  bool ok = true;
  if (at != NULL) {
    if (asprintf(&pattern, "%.*s*%s", (int)(at - resolved), resolved,
                 at + strlen("@GFXARCH@")) < 0)
      return false;
  } else if (stat(resolved, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (asprintf(&pattern, "%s/*.kpack", resolved) < 0)
      return false;
  } else if (stat(resolved, &st) == 0) {
    return reach_add_archive(r, resolved);
  } else {
    return true;
  }
  glob_t g;
  if (glob(pattern, 0, NULL, &g) == 0) {
    for (size_t i = 0; ok && i < g.gl_pathc; i++)
      ok = reach_add_archive(r, g.gl_pathv[i]);
    globfree(&g);
  }
  free(pattern);
  return ok;
}

static bool reach_collect(reach* r, const char* path, const kpack_host_t* host,
                          const kpack_host_info_t* info) {
  for (size_t i = 0; i < info->wrapper_count; i++) {
    kpack_host_wrapper_t w;
    if (kpack_host_get_wrapper(host, i, &w) != KPACK_SUCCESS ||
        w.magic != KPACK_HOST_HIPK_MAGIC || w.kernel_name == NULL)
      continue;
    if (r->usable == 0) {
      r->kernel = w.kernel_name;
      r->first_co = r->last_co = (size_t)w.reserved;
    } else if (!r->kernels_differ && strcmp(r->kernel, w.kernel_name) != 0) {
      r->kernels_differ = true;
    }
    if ((size_t)w.reserved < r->first_co)
      r->first_co = (size_t)w.reserved;
    if ((size_t)w.reserved > r->last_co)
      r->last_co = (size_t)w.reserved;
    r->usable++;
    for (size_t j = 0; j < w.search_path_count; j++) {
      size_t k = 0;
      while (k < r->path_count &&
             strcmp(r->paths[k].written, w.search_paths[j]) != 0)
        k++;
      if (k == r->path_count) {
        reach_path* grown =
            cli_grow(r->paths, r->path_count, &r->path_cap, sizeof(*grown), 4);
        if (grown == NULL)
          return false;
        r->paths = grown;
        reach_path* p = &r->paths[r->path_count++];
        p->written = w.search_paths[j];
        p->records = 0;
        p->resolved = NULL;
        if (p->written[0] != '\0' &&
            (kpack_resolve_search_path(path, p->written, &p->resolved) !=
                 KPACK_SUCCESS ||
             !reach_follow(r, p->resolved)))
          return false;
      }
      r->paths[k].records++;
    }
  }
  return true;
}

static void reach_json(cli_json* json, const reach* r) {
  cli_json_key(json, "archives");
  cli_json_array(json, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < r->archive_count; i++) {
    const reach_archive* a = &r->archives[i];
    cli_json_object(json, CLI_JSON_INLINE, false);
    cli_json_key_str(json, "path", a->path);
    if (a->err != KPACK_SUCCESS)
      cli_json_key_str(json, "error", kpack_error_string(a->err));
    cli_json_key(json, "arches");
    cli_json_array(json, CLI_JSON_INLINE, false);
    for (size_t j = 0; j < a->arch_count; j++)
      cli_json_str(json, a->arches[j]);
    cli_json_end(json);
    cli_json_end(json);
  }
  cli_json_end(json);
  cli_json_key(json, "reached_arches");
  cli_json_array(json, CLI_JSON_INLINE, false);
  for (size_t i = 0; i < r->arch_count; i++)
    cli_json_str(json, r->arches[i]);
  cli_json_end(json);
}

static void reach_print(const reach* r, const char* const* recorded,
                        size_t recorded_count) {
  if (r->kernels_differ)
    printf("kernels:      records name different kernels (-v lists them)\n");
  else if (r->usable > 0 && r->last_co != r->first_co)
    printf("kernels:      %s#%zu to #%zu\n", r->kernel, r->first_co,
           r->last_co);
  else if (r->usable > 0)
    printf("kernel:       %s#%zu\n", r->kernel, r->first_co);
  for (size_t i = 0; i < r->path_count; i++) {
    const reach_path* p = &r->paths[i];
    printf("%s %s", i == 0 ? "search path: " : "             ",
           cli_search_path_written(p->written));
    if (p->records != r->usable)
      printf(" (%zu of %zu records)", p->records, r->usable);
    printf("\n               -> %s\n",
           p->resolved != NULL ? p->resolved : CLI_SEARCH_PATH_DROPPED);
  }
  if (r->archive_count == 0)
    printf("archives:     none found\n");
  for (size_t i = 0; i < r->archive_count; i++) {
    const reach_archive* a = &r->archives[i];
    printf("%s %s:", i == 0 ? "archives:    " : "             ", a->path);
    if (a->err != KPACK_SUCCESS)
      printf(" %s (%s)", kpack_error_string(a->err), cli_error_text(a->err));
    for (size_t j = 0; j < a->arch_count; j++)
      printf(" %s", a->arches[j]);
    putchar('\n');
  }
  printf("reaches:     ");
  for (size_t i = 0; i < r->arch_count; i++)
    printf(" %s", r->arches[i]);
  printf("%s\n", r->arch_count == 0 ? " no arch" : "");
  /* Arches split for that no archive found declares: not installed here. */
  bool missing = false;
  for (size_t i = 0; i < recorded_count; i++) {
    bool found = false;
    for (size_t j = 0; j < r->arch_count && !found; j++)
      found = strcmp(recorded[i], r->arches[j]) == 0;
    if (!found) {
      printf("%s %s", missing ? "" : "not found:   ", recorded[i]);
      missing = true;
    }
  }
  if (missing)
    printf(" (split for, no archive found declares it)\n");
}

/* The rest of a kpack-ified binary's `kpack info`; with `json`, members of
 * its object. Without `verbose`, a summary of the records (reach_print())
 * instead of one row each. */
static int info_kpackified(const char* path, const kpack_host_t* host,
                           const kpack_host_info_t* info, cli_json* json,
                           bool verbose) {
  static const char* const headers[] = {"RECORD", "MAGIC", "KERNEL",
                                        "SEARCH PATH", "RESOLVED"};
  bool ok = report_records(path, host);
  reach r = {0};
  if (!reach_collect(&r, path, host, info)) {
    cli_error("%s: %s", path, strerror(ENOMEM));
    ok = false;
  }
  if (json != NULL) {
    cli_json_key(json, "records");
    cli_json_array(json, CLI_JSON_INLINE, false);
    for (size_t i = 0; i < info->wrapper_count; i++) {
      kpack_host_wrapper_t w;
      kpack_host_get_wrapper(host, i, &w);
      json_record(json, path, host, i, &w);
    }
    cli_json_end(json);
    reach_json(json, &r);
    reach_free(&r);
    return ok ? CLI_OK : CLI_FAIL;
  }
  printf("kind:         kpack-ified: device code in kpack archives\n");
  printf("records:      %zu in .hipFatBinSegment", info->wrapper_count);
  if (r.usable != info->wrapper_count)
    printf(", %zu of them usable HIPK records", r.usable);
  putchar('\n');
  /* Every record of a split binary shares one map: the first usable
   * record's list is the binary's. */
  const char* const* arches = NULL;
  size_t arch_count = 0;
  for (size_t i = 0; i < info->wrapper_count && arch_count == 0; i++)
    kpack_host_get_arches(host, i, &arches, &arch_count);
  if (arch_count > 0) {
    printf("split for:   ");
    for (size_t i = 0; i < arch_count; i++)
      printf(" %s", arches[i]);
    printf(" (kpack_arches)\n");
  }
  if (!verbose) {
    reach_print(&r, arches, arch_count);
    reach_free(&r);
    return ok ? CLI_OK : CLI_FAIL;
  }
  reach_free(&r);
  putchar('\n');
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

int cli_host_info(const char* path, cli_json* json, bool first, bool verbose) {
  kpack_host_t* host;
  kpack_host_info_t info;
  kpack_error_t err = kpack_host_open(path, &host);
  if (err != KPACK_SUCCESS) {
    cli_host_error(path, err);
    return CLI_FAIL;
  }
  kpack_host_get_info(host, &info);
  const char* kind = info.kind == KPACK_HOST_KPACKIFIED ? "kpack-ified"
                     : info.kind == KPACK_HOST_FAT      ? "fat"
                                                        : "none";
  size_t depth = json != NULL ? cli_json_depth(json) : 0;
  if (json != NULL) {
    cli_json_object(json, CLI_JSON_INLINE, false);
    cli_json_key_str(json, "binary", path);
    cli_json_key_str(json, "kind", kind);
    cli_json_key_uint(json, "elf_type", info.elf_type);
    cli_json_key_uint(json, "machine", info.machine);
  } else {
    if (!first)
      putchar('\n');
    printf("binary:       %s\n", path);
    printf("elf:          %s, %s\n", elf_type_name(info.elf_type),
           machine_name(info.machine));
  }
  int status = CLI_OK;
  if (info.kind == KPACK_HOST_KPACKIFIED) {
    status = info_kpackified(path, host, &info, json, verbose);
  } else if (info.kind == KPACK_HOST_FAT) {
    status = info_fat(path, &info, json);
  } else if (json == NULL) {
    printf(
        "kind:         no HIP device code (no .hipFatBinSegment, no "
        ".hip_fatbin)\n");
  }
  /* The object is whole even when a part of it failed. */
  if (json != NULL)
    cli_json_close_to(json, depth);
  kpack_host_close(host);
  return status;
}

/* ---- a directory ---------------------------------------------------------
 *
 * `kpack info DIR` answers for a whole install what info of one binary
 * answers for it: how many HIP binaries are split or still fat, and which
 * arches the split ones reach through their search paths (how many of them
 * reach each), from the archives actually there. */

typedef struct tree_arch {
  const char* name; /* owned by the tree's names */
  size_t binaries;  /* kpack-ified binaries that reach it */
} tree_arch;

typedef struct tree_info {
  size_t kpackified, fat, unreadable;
  tree_arch* arches;
  size_t arch_count, arch_cap;
  char** names; /* every arch name kept, owned */
  size_t name_count, name_cap;
  char** binaries; /* the kpack-ified binaries, for -v */
  size_t binary_count, binary_cap;
  bool out_of_memory;
} tree_info;

static tree_info* tree_walked; /* nftw has no user pointer */

static void tree_note_arch(tree_info* t, const char* arch) {
  for (size_t i = 0; i < t->arch_count; i++)
    if (strcmp(t->arches[i].name, arch) == 0) {
      t->arches[i].binaries++;
      return;
    }
  char* copy = strdup(arch);
  char** names =
      cli_grow(t->names, t->name_count, &t->name_cap, sizeof(*names), 16);
  tree_arch* arches =
      cli_grow(t->arches, t->arch_count, &t->arch_cap, sizeof(*arches), 16);
  if (names != NULL)
    t->names = names;
  if (arches != NULL)
    t->arches = arches;
  if (copy == NULL || names == NULL || arches == NULL) {
    free(copy);
    t->out_of_memory = true;
    return;
  }
  t->names[t->name_count++] = copy;
  t->arches[t->arch_count++] = (tree_arch){copy, 1};
}

static int tree_entry(const char* path, const struct stat* st, int type,
                      struct FTW* ftw) {
  tree_info* t = tree_walked;
  kpack_host_t* host;
  kpack_host_info_t info;
  (void)ftw;
  if (type != FTW_F || !S_ISREG(st->st_mode) || !cli_is_host_binary(path))
    return 0;
  if (kpack_host_open(path, &host) != KPACK_SUCCESS) {
    t->unreadable++;
    return 0;
  }
  kpack_host_get_info(host, &info);
  if (info.kind == KPACK_HOST_FAT) {
    t->fat++;
  } else if (info.kind == KPACK_HOST_KPACKIFIED) {
    reach r = {0};
    t->kpackified++;
    if (!reach_collect(&r, path, host, &info))
      t->out_of_memory = true;
    for (size_t i = 0; i < r.arch_count; i++)
      tree_note_arch(t, r.arches[i]);
    reach_free(&r);
    char* copy = strdup(path);
    char** grown = cli_grow(t->binaries, t->binary_count, &t->binary_cap,
                            sizeof(*grown), 16);
    if (copy == NULL || grown == NULL) {
      free(copy);
      t->out_of_memory = true;
    } else {
      t->binaries = grown;
      t->binaries[t->binary_count++] = copy;
    }
  }
  kpack_host_close(host);
  return t->out_of_memory ? 1 : 0;
}

static int compare_tree_arches(const void* a, const void* b) {
  return strcmp(((const tree_arch*)a)->name, ((const tree_arch*)b)->name);
}

static int compare_tree_binaries(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

int cli_host_tree_info(const char* dir, cli_json* json, bool first,
                       bool verbose) {
  tree_info t = {0};
  int status = CLI_OK;
  tree_walked = &t;
  if (nftw(dir, tree_entry, 16, FTW_PHYS) != 0 || t.out_of_memory) {
    if (t.out_of_memory)
      cli_error("%s: %s", dir, strerror(ENOMEM));
    else
      cli_input_error(dir, KPACK_ERROR_IO_ERROR, errno);
    status = CLI_FAIL;
  }
  tree_walked = NULL;
  if (status == CLI_OK && t.kpackified + t.fat + t.unreadable == 0)
    return CLI_HOST_TREE_EMPTY; /* nothing allocated */
  qsort(t.binaries, t.binary_count, sizeof(*t.binaries), compare_tree_binaries);
  /* by name: the walk's order is the directories' */
  qsort(t.arches, t.arch_count, sizeof(*t.arches), compare_tree_arches);
  if (json != NULL) {
    size_t depth = cli_json_depth(json);
    cli_json_object(json, CLI_JSON_INLINE, false);
    cli_json_key_str(json, "directory", dir);
    cli_json_key_uint(json, "kpackified", t.kpackified);
    cli_json_key_uint(json, "fat", t.fat);
    cli_json_key_uint(json, "unreadable", t.unreadable);
    cli_json_key(json, "reached_arches");
    cli_json_array(json, CLI_JSON_INLINE, false);
    for (size_t i = 0; i < t.arch_count; i++) {
      cli_json_object(json, CLI_JSON_INLINE, false);
      cli_json_key_str(json, "arch", t.arches[i].name);
      cli_json_key_uint(json, "binaries", t.arches[i].binaries);
      cli_json_end(json);
    }
    cli_json_end(json);
    cli_json_close_to(json, depth);
  } else {
    if (!first)
      putchar('\n');
    printf("directory:    %s\n", dir);
    printf("binaries:     %zu kpack-ified, %zu fat", t.kpackified, t.fat);
    if (t.unreadable > 0)
      printf(", %zu that could not be read", t.unreadable);
    putchar('\n');
    printf("reaches:     ");
    for (size_t i = 0; i < t.arch_count; i++)
      if (t.arches[i].binaries == t.kpackified)
        printf(" %s", t.arches[i].name);
    printf("%s\n", t.kpackified > 0 ? " (every kpack-ified binary)"
                                    : " no arch (no kpack-ified binary)");
    bool partly = false;
    for (size_t i = 0; i < t.arch_count; i++) {
      if (t.arches[i].binaries == t.kpackified)
        continue;
      printf("%s %s (%zu)", partly ? "" : "partly:      ", t.arches[i].name,
             t.arches[i].binaries);
      partly = true;
    }
    if (partly)
      printf(" (how many of the %zu reach it)\n", t.kpackified);
    for (size_t i = 0; verbose && i < t.binary_count; i++)
      if (cli_host_info(t.binaries[i], NULL, false, false) != CLI_OK)
        status = CLI_FAIL;
  }
  for (size_t i = 0; i < t.name_count; i++)
    free(t.names[i]);
  for (size_t i = 0; i < t.binary_count; i++)
    free(t.binaries[i]);
  free(t.names);
  free(t.arches);
  free(t.binaries);
  return status;
}

/* ---- list ---------------------------------------------------------------- */

typedef struct list_state {
  const char* name; /* the binary name create would give: the file name */
  cli_json* json;   /* NULL for the table */
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
    if (s->json != NULL) {
      cli_json* w = s->json;
      char* binary = NULL;
      if (asprintf(&binary, "%s#%zu", s->name, co) < 0)
        binary = NULL;
      cli_json_object(w, CLI_JSON_INLINE, false);
      cli_json_key_str(w, "file", path);
      cli_json_key_str(w, "binary", binary ? binary : s->name);
      cli_json_key_uint(w, "co_index", co);
      cli_json_key_str(w, "arch", e.arch);
      cli_json_key_str(w, "id", e.id);
      cli_json_key_uint(w, "size", e.size);
      cli_json_key_str(w, "compression", compression_name(&info));
      cli_json_end(w);
      free(binary);
      continue;
    }
    cli_table_row(&s->table, "%s#%zu\t%s\t%llu\t%s",
                  cli_table_text(&s->table, s->name), co,
                  cli_table_text(&s->table, e.arch), (unsigned long long)e.size,
                  cli_bundle_compression(&info, comp));
  }
  return true;
}

int cli_host_list(const char* path, cli_json* json, bool* printed) {
  static const char* const headers[] = {"BINARY", "ARCH", "SIZE", "BUNDLE"};
  static const bool right[] = {false, false, true, false};
  kpack_host_t* host;
  kpack_host_info_t info;
  kpack_fatbin_t* fb;
  char a[32];
  kpack_error_t err = kpack_host_open(path, &host);
  if (err != KPACK_SUCCESS) {
    cli_host_error(path, err);
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
    cli_host_error(path, err);
    return CLI_FAIL;
  }
  list_state s = {.name = base_name(path), .json = json};
  s.table = (cli_table){.cols = 4, .headers = headers, .right = right};
  bool ok = cli_for_each_bundle(path, fb, list_bundle, &s);
  if (json == NULL) {
    if (*printed)
      putchar('\n');
    *printed = true;
    cli_table_print(&s.table, stdout);
    printf("%zu code object%s in %s, %s\n", s.count, s.count == 1 ? "" : "s",
           path, cli_human_size(a, s.size));
  }
  cli_table_free(&s.table);
  kpack_fatbin_close(fb);
  return ok ? CLI_OK : CLI_FAIL;
}
