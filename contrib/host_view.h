/* SPDX-License-Identifier: MIT
 *
 * What the kpack tool shows of a HIP host binary (host_view.c), shared by
 * `kpack info`, `kpack list` and `kpack resolve`: a fat binary's bundles
 * and arches, a kpack-ified binary's HIPK records and search paths.
 */
#ifndef KPACK_CLI_HOST_VIEW_H
#define KPACK_CLI_HOST_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "json.h"
#include "rocm_kpack/kpack_ext.h"

/* A 64-bit little-endian ELF that is not an AMDGPU code object: a HIP host
 * binary, fat or kpack-ified, for info, list and resolve. */
bool cli_is_host_binary(const char* path);
/* cli_kerror() for a host binary that failed to open, saying for a
 * malformed one what is wrong and where (kpack_host_diagnose()). */
void cli_host_error(const char* path, kpack_error_t err);
/* `kpack info` on a host binary: fat (bundles, arches, sizes, compression)
 * or kpack-ified (its records summed up: kernel, distinct search paths
 * written and resolved, the archives they reach and the arches those
 * declare; with `verbose` one row per record instead), after a blank line
 * unless `first`; with `json` one whole object of info's JSON array,
 * whatever fails. Returns an exit status. */
int cli_host_info(const char* path, cli_json* json, bool first, bool verbose);
/* `kpack info DIR`: the HIP binaries below dir, how many are kpack-ified
 * and fat, and the arches the kpack-ified ones reach (every one of them,
 * or some: how many); with `verbose` each kpack-ified binary's summary
 * after it. With `json` one object {directory, kpackified, fat,
 * unreadable, reached_arches: [{arch, binaries}]}. Returns an exit status,
 * or CLI_HOST_TREE_EMPTY, having printed nothing, when no HIP binary is
 * below dir (a directory of archives is for the caller to show). */
#define CLI_HOST_TREE_EMPTY (-1)
int cli_host_tree_info(const char* dir, cli_json* json, bool first,
                       bool verbose);
/* `kpack list` on a host binary: one row per code object of a fat binary,
 * or with `json` one object each in list's JSON array. *printed says
 * whether a table is already out (a blank line goes first) and becomes
 * true. Returns an exit status. */
int cli_host_list(const char* path, cli_json* json, bool* printed);
/* What the loader makes of search path `written` of a binary opened as
 * `path`, for people: the path it tries (kpack_resolve_search_path(); in
 * *owned, to free), CLI_SEARCH_PATH_DROPPED for an empty one, which the
 * loader drops instead of trying the binary's directory, or "(out of
 * memory)". */
#define CLI_SEARCH_PATH_DROPPED "(empty: the loader skips it)"
const char* cli_search_path_shown(const char* path, const char* written,
                                  char** owned);
/* A written search path for people: itself, or "" in quotes when empty. */
const char* cli_search_path_written(const char* written);
/* A HIPK record's search paths as a JSON array of {written, resolved}, the
 * second as the loader resolves it against `path` (null when out of
 * memory); an empty path, which the loader drops, has resolved null and
 * "dropped": true. */
void cli_host_json_search_paths(cli_json* json, const char* path,
                                const kpack_host_wrapper_t* w);
/* Rows RECORD, MAGIC, KERNEL, SEARCH PATH, RESOLVED for every record. */
void cli_host_record_rows(cli_table* t, const char* path,
                          const kpack_host_t* host);
/* "none" or e.g. "zstd (CCOB v3)". */
const char* cli_bundle_compression(const kpack_bundle_info_t* info,
                                   char buf[32]);
/* Calls fn for each bundle of a fat binary, listed (entry tables only),
 * until fn returns false. A bundle that cannot be listed is reported,
 * naming path and code object, and stops the walk. False if stopped. */
typedef bool (*cli_bundle_fn)(const char* path, size_t co,
                              const kpack_bundle_t* bundle, void* user);
bool cli_for_each_bundle(const char* path, const kpack_fatbin_t* fb,
                         cli_bundle_fn fn, void* user);
/* The arches of a bundle's HIP entries, space-separated (malloc'ed; NULL
 * when out of memory): all of them when agent is NULL, else those that
 * cli_agent_loads(). *count, when count is not NULL, gets how many. */
char* cli_bundle_arches(const kpack_bundle_t* b, const char* const* agent,
                        size_t agent_count, size_t* count);
/* The same arches as a JSON array of strings; returns how many. */
size_t cli_bundle_arches_json(cli_json* w, const kpack_bundle_t* b,
                              const char* const* agent, size_t agent_count);
/* Whether an agent whose ISA names are agent[0, agent_count) (--arch) can
 * run a code object built for `target`: kpack_target_serves() for one of
 * them (same processor, each feature the target states stated the same
 * way). */
bool cli_agent_loads(const char* const* agent, size_t agent_count,
                     const char* target);

#endif /* KPACK_CLI_HOST_VIEW_H */
