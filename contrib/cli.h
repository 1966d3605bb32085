/* SPDX-License-Identifier: MIT
 *
 * Shared by the kpack tool's source files: the subcommand entry points, their
 * manual pages, and small helpers for messages, tables, JSON and files. The
 * tool is argument parsing and printing over libkpack; nothing here knows
 * the archive format.
 */
#ifndef KPACK_CLI_H
#define KPACK_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rocm_kpack/kpack_ext.h"

#define CLI_VERSION KPACK_VERSION_STRING

/* Exit statuses shared by every subcommand. */
enum {
  CLI_OK = 0,
  CLI_FAIL = 1,          /* the command ran and something is wrong */
  CLI_USAGE = 2,         /* bad command line */
  CLI_INTERRUPTED = 130, /* SIGINT/SIGTERM */
};

typedef struct cli_command {
  const char* name;
  const char* summary;
  const char* manual; /* the full --help text */
  int (*run)(int argc, char** argv);
} cli_command;

extern const cli_command cli_list_command, cli_info_command, cli_cat_command,
    cli_extract_command, cli_create_command, cli_verify_command,
    cli_resolve_command, cli_split_command;

/* ---- messages ---------------------------------------------------------- */

/* "kpack: <message>" on stderr. */
void cli_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* "kpack: <subject>: KPACK_ERROR_X (<what it means>)" on stderr. */
void cli_kerror(const char* subject, kpack_error_t err);
/* A short phrase for a status, e.g. "no such file". */
const char* cli_error_text(kpack_error_t err);
/* Reports a bad command line for `cmd`; returns CLI_USAGE. */
int cli_usage_error(const cli_command* cmd, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the manual of `cmd` to stdout; returns CLI_OK. */
int cli_print_manual(const cli_command* cmd);

/* ---- parsing ----------------------------------------------------------- */

/* Parses a decimal integer in [min, max]; false if it is not one. */
bool cli_parse_uint(const char* text, unsigned long min, unsigned long max,
                    unsigned long* out);

/* ---- output ------------------------------------------------------------ */

/* A text table: columns sized to their widest cell, numbers right-aligned. */
typedef struct cli_table {
  size_t cols;
  const char* const* headers;
  const bool* right; /* per column: right-align */
  char** cells;      /* rows * cols, owned */
  size_t rows, cap;
} cli_table;

/* Appends one row of `t->cols` printf-formatted cells: the format holds one
 * conversion set per cell separated by '\t'. */
void cli_table_row(cli_table* t, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cli_table_print(const cli_table* t, FILE* out);
void cli_table_free(cli_table* t);

/* A JSON string literal, quoted and escaped. */
void cli_json_string(FILE* out, const char* s);
/* "1.23x", or "-" when stored is 0. */
const char* cli_ratio(char buf[32], uint64_t size, uint64_t stored);
/* "12.3 MiB" style, for summaries. */
const char* cli_human_size(char buf[32], uint64_t bytes);

/* ---- files ------------------------------------------------------------- */

/* Whole-file read into a malloc'ed buffer; false with errno set on failure. */
bool cli_read_file(const char* path, void** data, size_t* size);
/* mkdir -p; false with errno set on failure. */
bool cli_mkdirs(const char* path, unsigned mode);
/* True if a TOC binary name can be a relative path: not empty, no leading or
 * trailing '/', no empty, "." or ".." component. */
bool cli_safe_binary_name(const char* name);
/* True if an arch (or type) can be one path component. */
bool cli_safe_component(const char* name);

/* ---- archives ---------------------------------------------------------- */

/* Called for each kernel, binaries in byte-wise order and each binary's
 * arches sorted; return false to stop. */
typedef bool (*cli_kernel_fn)(kpack_archive_t archive, const char* binary,
                              const char* arch, const kpack_kernel_info_t* info,
                              void* user);
/* Walks the TOC; reads no kernel. Returns the first library error. */
kpack_error_t cli_for_each_kernel(kpack_archive_t archive, cli_kernel_fn fn,
                                  void* user);

/* ---- code objects (cmd_code_object.c) ---------------------------------- */

/* The file starts like an AMDGPU code object: ELF64, little-endian,
 * e_machine 224 (what `kpack cat` writes and kpackfs shows as
 * kernel.hsaco). */
bool cli_is_code_object(const char* path);
/* `kpack info` on a code object file: target, version and the kernel table,
 * or one object of info's JSON array with `json`. Returns an exit status. */
int cli_code_object_info(const char* path, bool json, bool first);
/* `kpack info --metadata FILE`: the metadata note as indented JSON and a
 * newline, as kpackfs shows it in metadata.json. Returns an exit status. */
int cli_code_object_metadata(const char* path);
/* `kpack list --kernels ...`: the whole command, with its own options. */
int cli_list_kernels(int argc, char** argv);
/* What a kpack_code_object_parse() status means for a code object, e.g.
 * "metadata note of the wrong shape" (cli_error_text() speaks of archives). */
const char* cli_code_object_error_text(kpack_error_t err);

/* ---- host binaries (cmd_host.c) ---------------------------------------- */

/* A 64-bit little-endian ELF that is not an AMDGPU code object: a HIP host
 * binary, fat or kpack-ified, for info, list and resolve. */
bool cli_is_host_binary(const char* path);
/* cli_kerror() for a host binary that failed to open, saying for a
 * malformed one what is wrong and where (kpack_host_diagnose()). */
void cli_host_error(const char* path, kpack_error_t err);
/* `kpack info` on a host binary: fat (bundles, arches, sizes, compression)
 * or kpack-ified (per record: kernel, search paths written and resolved);
 * one object of info's JSON array with `json`. Returns an exit status. */
int cli_host_info(const char* path, bool json, bool first);
/* `kpack list` on a host binary: one row (or JSON object) per code object
 * of a fat binary; *first tracks the JSON array. Returns an exit status. */
int cli_host_list(const char* path, bool json, bool* first);
/* A HIPK record's search paths as a JSON array of {written, resolved}, the
 * second as the loader resolves it against `path` (null when out of
 * memory), on stdout. */
void cli_host_json_search_paths(const char* path,
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
/* The arches of a bundle's HIP entries (malloc'ed; NULL when out of
 * memory): all of them when agent is NULL, else those that
 * cli_agent_loads(); space-separated, or with `json` a JSON array of
 * strings. *count, when count is not NULL, gets how many. */
char* cli_bundle_arches(const kpack_bundle_t* b, const char* const* agent,
                        size_t agent_count, bool json, size_t* count);
/* Whether an agent whose ISA names are agent[0, agent_count) (--arch) can
 * run a code object built for `target`: kpack_target_serves() for one of
 * them (same processor, each feature the target states stated the same
 * way). */
bool cli_agent_loads(const char* const* agent, size_t agent_count,
                     const char* target);

/* ---- interruption ------------------------------------------------------ */

/* Installs SIGINT/SIGTERM/SIGHUP handlers that only set a flag, so that a
 * long command can stop between steps and clean up. */
void cli_catch_signals(void);
/* The signal that arrived, or 0. */
int cli_interrupted(void);

#endif /* KPACK_CLI_H */
