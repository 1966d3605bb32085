/* SPDX-License-Identifier: MIT
 *
 * Shared by the kpack tool's source files (implemented in cli.c): the
 * subcommand entry points, their manual pages, and small helpers for
 * messages, option values, growing arrays, tables, totals, files and
 * walking archives. The tool is argument parsing and printing over
 * libkpack; nothing here knows the archive format. What a code object or a host
 * binary shows has its own module (code_object_view.h, host_view.h), and so has
 * JSON (json.h).
 */
#ifndef KPACK_CLI_H
#define KPACK_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rocm_kpack/kpack_ext.h"

#define CLI_VERSION KPACK_VERSION_STRING

/* What `kpack extract` names its temporary, kept and journal files with
 * (cmd_extract.c), which `kpack create` refuses to pack. */
#define CLI_EXTRACT_PREFIX ".kpack-extract."

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
    cli_resolve_command, cli_split_command, cli_diff_command;

/* ---- messages ------------------------------------------------------------ */

/* "kpack: <message>" on stderr. */
void cli_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* "kpack: <subject>: KPACK_ERROR_X (<what it means>)" on stderr. */
void cli_kerror(const char* subject, kpack_error_t err);
/* A failure to open or read the input `path`: as cli_kerror(), the
 * system's reason (strerror(sys_errno), e.g. "Permission denied") or, for
 * an archive that does not parse, which structure fails where
 * (kpack_archive_diagnose()), in place of the status's phrase when there
 * is one. */
void cli_input_error(const char* path, kpack_error_t err, int sys_errno);
/* The phrase cli_input_error() puts in parentheses: for a malformed
 * archive, what kpack_archive_diagnose() says is wrong where (kept until
 * the next call). */
const char* cli_input_reason(const char* path, kpack_error_t err,
                             int sys_errno);
/* A failure to write the output `path` (an archive, a mirrored file, an
 * extracted kernel): "kpack: <path>: cannot write: <reason>", the reason
 * being the system's (strerror(sys_errno), e.g. "No space left on
 * device") when there is one, else the status and its phrase. */
void cli_output_error(const char* path, kpack_error_t err, int sys_errno);
/* True for an errno only writing gives (a full disk or quota, a read-only
 * filesystem, a file too large): no read of an input fails so. */
bool cli_is_write_errno(int sys_errno);
/* Reports a failed kpack_writer_add_kernel*() or kpack_writer_copy_kernel()
 * for the kernel (binary, arch), blaming the file kpack_writer_get_failure()
 * names: the archive `out` being written (cli_output_error()), the archive
 * `source` being copied from, or none (a refused name or metadata). */
void cli_writer_error(const kpack_writer_t* writer, kpack_error_t err,
                      const char* out, const char* source, const char* binary,
                      const char* arch);
/* A short phrase for a status, e.g. "no such file" (kpack_error_text()). */
const char* cli_error_text(kpack_error_t err);
/* A message of a libkpack call (kpack_message.h) on stderr, as the
 * commands print theirs: "kpack: TEXT", or "kpack: warning: TEXT". A note
 * is printed when `user` is NULL or points to a true bool (--verbose). */
void cli_message(const kpack_message_t* m, void* user);
/* The reason to print for a failed read: the system's (strerror) when
 * `err` is IO_ERROR and `sys_errno`, taken right after the call, is set;
 * else cli_error_text(err). */
const char* cli_read_reason(kpack_error_t err, int sys_errno);
/* Reports a bad command line for `cmd`; returns CLI_USAGE. */
int cli_usage_error(const cli_command* cmd, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Reports the option getopt_long(..., optstring, ...) just refused (it
 * returned '?') as
 * getopt would ("unrecognized option '--x'", "option '-j' requires an
 * argument"), in cli_usage_error()'s one message: kpack's main() turns
 * getopt's own message off (opterr), so that each bad command line says
 * one thing once. Returns CLI_USAGE. */
int cli_option_error(const cli_command* cmd, char* const* argv,
                     const char* optstring);
/* Whether `value`, given to `option` of `cmd`, names one GPU target
 * (kpack_target_check()); when not, reports the bad command line in the
 * words every command uses ("--arch 'gfx90a:xnak-': not a GPU target:
 * 'xnak-' is not a target feature (...)") and returns false. */
bool cli_check_target(const cli_command* cmd, const char* option,
                      const char* value);
/* Prints the manual of `cmd` to stdout; returns CLI_OK. */
int cli_print_manual(const cli_command* cmd);

/* ---- parsing ------------------------------------------------------------- */

/* Parses a decimal integer in [min, max]; false if it is not one. */
bool cli_parse_uint(const char* text, unsigned long min, unsigned long max,
                    unsigned long* out);
/* The -j of the commands that write archives: a thread count from 0 to
 * 1024, 0 meaning one per online CPU (cli_default_threads(), also what
 * they use without -j; -j1 compresses on the calling thread). False, after
 * reporting the bad command line for `cmd`, when `text` is not one. */
bool cli_parse_threads(const cli_command* cmd, const char* text,
                       unsigned* threads);
unsigned cli_default_threads(void);
/* Their -l: a zstd level from 1 to 22. False, after reporting the bad
 * command line for `cmd`, when `text` is not one. */
bool cli_parse_level(const cli_command* cmd, const char* text, int* level);

/* ---- memory -------------------------------------------------------------- */

/* Makes room for element `count` of an array of `*cap` elements of `size`
 * bytes, the one way the tool grows an array (as kp_grow does inside the
 * library): returns `items` itself while count < *cap, else the array moved
 * to twice its capacity (`first` elements when it has none) with *cap
 * updated. NULL when that allocation fails or its size would overflow:
 * `items` and *cap are then unchanged and still the caller's. */
void* cli_grow(void* items, size_t count, size_t* cap, size_t size,
               size_t first);

/* ---- output -------------------------------------------------------------- */

/* A text table: columns sized to their widest cell, numbers right-aligned. */
typedef struct cli_table {
  size_t cols;
  const char* const* headers;
  const bool* right; /* per column: right-align */
  char** cells;      /* rows * cols, owned */
  size_t rows, cap;
  char** texts; /* escaped copies made by cli_table_text(), owned */
  size_t text_count, text_cap;
  /* A table too large to keep (a whole install's kernels) is made in two
   * passes over the same rows: see cli_table_measure(). */
  bool measuring;
  FILE* stream;
  size_t width[16];
} cli_table;

/* Appends one row of `t->cols` printf-formatted cells: the format holds one
 * conversion set per cell separated by '\t'. */
void cli_table_row(cli_table* t, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cli_table_print(const cli_table* t, FILE* out);
void cli_table_free(cli_table* t);
/* Two passes instead of keeping the rows: after cli_table_measure(), rows
 * only size the columns; after cli_table_stream(), which prints the
 * header, each row is printed as it is added, aligned to those sizes, and
 * cli_table_print() prints nothing. The same rows in both passes print
 * what cli_table_print() would. */
void cli_table_measure(cli_table* t);
void cli_table_stream(cli_table* t, FILE* out);
/* `s` as one cell's text: itself when it holds no control byte and no
 * backslash, else a copy kept by the table until cli_table_free(), escaped
 * by kpack_co_escape_name() as the `kernels` file of a mount writes a
 * kernel's name, so that a name can split neither its row nor its
 * columns. */
const char* cli_table_text(cli_table* t, const char* s);

/* A sum of sizes that says so when it passes what 64 bits hold, instead of
 * wrapping round to a small number. */
typedef struct cli_total {
  uint64_t value; /* UINT64_MAX once over */
  bool over;
} cli_total;
void cli_total_add(cli_total* t, uint64_t v);
/* cli_human_size() of the total, or "over 16.0 EiB". */
const char* cli_total_human(char buf[32], cli_total t);

/* The ordinals of one archive counted so far: kernels that share their
 * stored bytes (docs/format.md, "Shared ordinals") add them to a total
 * once. Zero-initialised; cli_ordinals_free() when done. */
typedef struct cli_ordinals {
  const void* archive; /* whose ordinals these are */
  uint8_t* seen;       /* one bit per ordinal */
  size_t bytes;
} cli_ordinals;
/* True the first time `ordinal` of `archive` is given since the set last
 * held another archive's, and when memory runs out (a total then counts
 * it again rather than lose it). */
bool cli_ordinal_first(cli_ordinals* o, const void* archive, uint32_t ordinal);
void cli_ordinals_free(cli_ordinals* o);

/* A kernel name as c++filt shows it, malloc'ed: demangled by the C++
 * runtime's __cxa_demangle when it is a mangled C++ name (_Z...), else a
 * copy. NULL only when out of memory. */
char* cli_demangle(const char* name);
/* A `kernels` text (kpack_render.h) with each line's name demangled so,
 * malloc'ed and NUL-terminated, *size its length; NULL when out of memory.
 * An escaped name (\t, \xHH...) is no mangled name and stays. */
char* cli_demangle_kernels(const char* text, size_t* size);
/* "1.23x", or "-" when stored is 0. */
const char* cli_ratio(char buf[32], uint64_t size, uint64_t stored);
/* "12.3 MiB" style, for summaries. */
const char* cli_human_size(char buf[32], uint64_t bytes);

/* True when code objects for `arch` are kept by the `count` --arch options
 * `listed` (always when there are none): when one of them names an agent
 * that could be served `arch`, by the loader's rule (kpack_target_may_serve:
 * "gfx90a" keeps gfx90a:xnack- and gfx90a:xnack+, "gfx90a:xnack-" only the
 * first, "gfx906" also gfx9-generic). When `matched` is not NULL, it holds
 * one flag per listed arch, set for each that keeps `arch`. */
bool cli_arch_listed(const char* const* listed, size_t count, const char* arch,
                     bool* matched);

/* Monotonic seconds, for elapsed times. */
double cli_seconds(void);

/* A progress line on stderr for long work, drawn over itself at most every
 * 0.1 s (always when `last`), and erased by cli_progress_end(); nothing
 * when not enabled (quiet, or stderr not a terminal). */
typedef struct cli_progress {
  bool enabled;
  bool drawn;   /* on the screen now */
  double shown; /* when it was last drawn, in monotonic seconds */
} cli_progress;
void cli_progress_show(cli_progress* p, bool last, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Erases the line, when drawn (before other output, and at the end). */
void cli_progress_end(cli_progress* p);

/* ---- files --------------------------------------------------------------- */

/* Whole-file read into a malloc'ed buffer; false with errno set on failure. */
bool cli_read_file(const char* path, void** data, size_t* size);
/* mkdir -p; false with errno set on failure. */
bool cli_mkdirs(const char* path, unsigned mode);

/* ---- archives ------------------------------------------------------------ */

/* Called for each kernel, binaries in byte-wise order and each binary's
 * arches sorted; return false to stop. */
typedef bool (*cli_kernel_fn)(kpack_archive_t archive, const char* binary,
                              const char* arch, const kpack_kernel_info_t* info,
                              void* user);
/* Walks the TOC; reads no kernel. Returns the first library error. */
kpack_error_t cli_for_each_kernel(kpack_archive_t archive, cli_kernel_fn fn,
                                  void* user);

/* What became of one archive argument. */
typedef enum cli_walk {
  CLI_WALKED,        /* opened and walked to the end (or until fn stopped) */
  CLI_WALK_UNOPENED, /* could not be opened: reported */
  CLI_WALK_BROKEN,   /* opened, but its TOC could not be walked: reported */
} cli_walk;
/* The loop of the commands that walk the kernels of each ARCHIVE argument
 * (list, list --kernels, extract): opens `path`, calls fn
 * for each kernel as cli_for_each_kernel() does, reports a failure on
 * standard error naming the file and the status, and closes the archive,
 * or hands it to the caller through *keep when keep is not NULL (NULL
 * there when it could not be opened). */
cli_walk cli_walk_archive(const char* path, cli_kernel_fn fn, void* user,
                          kpack_archive_t* keep);

/* The command line with each directory among the operands argv[first..]
 * replaced by the archives below it, as kpackfs reads a SOURCE directory
 * (kpack_find_archives(): *.kpack files, recursively, in name order);
 * other words stay as given. On success *out_argv is a new array of
 * *out_argc copies, NULL-terminated, freed with cli_operands_free(). False
 * after a message naming the directory when one cannot be read or holds
 * no archive. */
bool cli_expand_archives(int argc, char** argv, int first, int* out_argc,
                         char*** out_argv);
void cli_operands_free(int argc, char** argv);

/* For a kernel of `binary` that none of the `count` archives holds (for
 * the arch asked), what the user likely meant, malloc'ed: "did you mean
 * 'lib/libx.so#0'?" when `binary` with "#0" appended, or with leading
 * directories removed ("usr/lib/..." for "lib/..."), is a binary of one of
 * them; "lib/libx.so#0 has gfx90a, gfx942" (every arch of every archive)
 * when the binary is there but not for that arch. NULL when there is
 * nothing to suggest (or no memory to say it). */
char* cli_kernel_hint(const kpack_archive_t* archives, size_t count,
                      const char* binary);

/* ARCHIVE_NOT_FOUND for per-arch archives means one of two things a user
 * must tell apart: the build has no code for this GPU (the directories
 * the `missing` candidate paths point into hold archives, for other
 * arches), or the archives are not installed at all (none there). Says
 * which, malloc'ed ("no code for this GPU in this build: 2 archives beside
 * the candidates declare gfx942, gfx1100", "archive not installed: no
 * *.kpack archive in /opt/x/.kpack"), from the archives beside them. NULL
 * when no candidate names a directory (or out of memory). */
char* cli_why_not_found(const char* const* missing, size_t missing_count);

/* ---- interruption -------------------------------------------------------- */

/* Installs SIGINT/SIGTERM/SIGHUP handlers that only set a flag, so that a
 * long command can stop between steps and clean up. */
void cli_catch_signals(void);
/* The signal that arrived, or 0. */
int cli_interrupted(void);
/* The flag cli_catch_signals() sets, for the cancel flag of a libkpack
 * call (kpack_split_options_t, kpack_verify_options_t). */
const volatile int* cli_interrupt_flag(void);

#endif /* KPACK_CLI_H */
