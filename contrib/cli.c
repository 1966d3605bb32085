/* SPDX-License-Identifier: MIT
 *
 * The helpers cli.h declares, which every kpack subcommand uses: messages
 * that name the file and the kpack status, number parsing, growing arrays,
 * text tables, totals, file utilities, walking archives and the
 * interruption flag.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("kpack: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

const char* cli_error_text(kpack_error_t err) {
  switch (err) {
    case KPACK_SUCCESS:
      return "success";
    case KPACK_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case KPACK_ERROR_FILE_NOT_FOUND:
      return "no such file";
    case KPACK_ERROR_INVALID_FORMAT:
      return "malformed file";
    case KPACK_ERROR_UNSUPPORTED_VERSION:
      return "unsupported version or scheme";
    case KPACK_ERROR_KERNEL_NOT_FOUND:
      return "no such kernel";
    case KPACK_ERROR_DECOMPRESSION_FAILED:
      return "corrupt compressed data";
    case KPACK_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case KPACK_ERROR_NOT_IMPLEMENTED:
      return "disabled or not implemented";
    case KPACK_ERROR_IO_ERROR:
      return "read or write error";
    case KPACK_ERROR_MSGPACK_PARSE_FAILED:
      return "malformed table of contents";
    case KPACK_ERROR_PATH_DISCOVERY_FAILED:
      return "binary path not found";
    case KPACK_ERROR_INVALID_METADATA:
      return "malformed HIPK metadata";
    case KPACK_ERROR_ARCHIVE_NOT_FOUND:
      return "no archive could be opened";
    case KPACK_ERROR_ARCH_NOT_FOUND:
      return "no archive declares a compatible architecture";
  }
  return "unknown status";
}

void cli_kerror(const char* subject, kpack_error_t err) {
  cli_error("%s: %s (%s)", subject, kpack_error_string(err),
            cli_error_text(err));
}

const char* cli_input_reason(const char* path, kpack_error_t err,
                             int sys_errno) {
  struct stat st;
  /* Which structure, where, the file's size: as the host reader says. */
  static char why[512];
  if ((err == KPACK_ERROR_INVALID_FORMAT ||
       err == KPACK_ERROR_MSGPACK_PARSE_FAILED ||
       err == KPACK_ERROR_UNSUPPORTED_VERSION) &&
      kpack_archive_diagnose(path, why, sizeof(why)) == err && why[0] != '\0')
    return why;
  if (err != KPACK_ERROR_IO_ERROR || sys_errno == 0)
    return cli_error_text(err);
  /* The library gives EISDIR for any file that is not a regular one. */
  if (sys_errno == EISDIR && stat(path, &st) == 0 && !S_ISDIR(st.st_mode) &&
      !S_ISREG(st.st_mode))
    return "not a regular file";
  return strerror(sys_errno);
}

void cli_input_error(const char* path, kpack_error_t err, int sys_errno) {
  cli_error("%s: %s (%s)", path, kpack_error_string(err),
            cli_input_reason(path, err, sys_errno));
}

const char* cli_read_reason(kpack_error_t err, int sys_errno) {
  if (err == KPACK_ERROR_IO_ERROR && sys_errno != 0)
    return strerror(sys_errno);
  return cli_error_text(err);
}

void cli_output_error(const char* path, kpack_error_t err, int sys_errno) {
  if (sys_errno != 0)
    cli_error("%s: cannot write: %s", path, strerror(sys_errno));
  else
    cli_error("%s: cannot write: %s (%s)", path, kpack_error_string(err),
              cli_error_text(err));
}

bool cli_is_write_errno(int sys_errno) {
  return sys_errno == ENOSPC || sys_errno == EDQUOT || sys_errno == EROFS ||
         sys_errno == EFBIG;
}

void cli_writer_error(const kpack_writer_t* writer, kpack_error_t err,
                      const char* out, const char* source, const char* binary,
                      const char* arch) {
  kpack_writer_failure_t why;
  kpack_writer_get_failure(writer, &why);
  if (why.side == KPACK_WRITER_SIDE_ARCHIVE) {
    cli_output_error(out, err, why.sys_errno);
  } else if (why.side == KPACK_WRITER_SIDE_SOURCE && source != NULL) {
    cli_error(
        "%s: %s for %s: %s (%s)", source, binary, arch, kpack_error_string(err),
        why.sys_errno != 0 ? strerror(why.sys_errno) : cli_error_text(err));
  } else {
    cli_error("%s for %s: %s (%s)", binary, arch, kpack_error_string(err),
              cli_error_text(err));
  }
}

int cli_usage_error(const cli_command* cmd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kpack %s: ", cmd->name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry 'kpack help %s'.\n", cmd->name);
  va_end(ap);
  return CLI_USAGE;
}

bool cli_check_target(const cli_command* cmd, const char* option,
                      const char* value) {
  char why[160];
  if (kpack_target_check(value, why, sizeof(why)))
    return true;
  cli_usage_error(cmd, "%s '%s': not a GPU target: %s", option, value, why);
  return false;
}

int cli_option_error(const cli_command* cmd, char* const* argv,
                     const char* optstring) {
  /* optind has passed the refused word, except after an unknown letter in
   * a group ("-qZ"), which optopt names. */
  const char* word = optind > 0 ? argv[optind - 1] : "";
  if (optopt == 0) /* an unknown or ambiguous long option */
    return cli_usage_error(cmd, "unrecognized option '%s'", word);
  if (strncmp(word, "--", 2) == 0)
    return cli_usage_error(cmd, "option '%.*s' requires an argument",
                           (int)strcspn(word, "="), word);
  const char* known = strchr(optstring, optopt);
  if (known != NULL && known[1] == ':')
    return cli_usage_error(cmd, "option '-%c' requires an argument", optopt);
  return cli_usage_error(cmd, "invalid option -- '%c'", optopt);
}

int cli_print_manual(const cli_command* cmd) {
  fputs(cmd->manual, stdout);
  return CLI_OK;
}

bool cli_parse_uint(const char* text, unsigned long min, unsigned long max,
                    unsigned long* out) {
  char* end;
  if (text == NULL || *text < '0' || *text > '9')
    return false;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return false;
  *out = v;
  return true;
}

bool cli_parse_threads(const cli_command* cmd, const char* text,
                       unsigned* threads) {
  unsigned long value;
  if (!cli_parse_uint(text, 0, 1024, &value)) {
    cli_usage_error(cmd, "-j takes a thread count, 0-1024");
    return false;
  }
  *threads = value == 0 ? cli_default_threads() : (unsigned)value;
  return true;
}

unsigned cli_default_threads(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? (unsigned)(cpus < 1024 ? cpus : 1024) : 1;
}

bool cli_parse_level(const cli_command* cmd, const char* text, int* level) {
  unsigned long value;
  if (!cli_parse_uint(text, 1, 22, &value)) {
    cli_usage_error(cmd, "-l takes a level from 1 to 22");
    return false;
  }
  *level = (int)value;
  return true;
}

/* ---- memory -------------------------------------------------------------- */

void* cli_grow(void* items, size_t count, size_t* cap, size_t size,
               size_t first) {
  if (count < *cap)
    return items;
  size_t next = *cap ? *cap : first;
  if (*cap > SIZE_MAX / 2 || size == 0 || next > SIZE_MAX / 2 / size)
    return NULL;
  if (*cap)
    next = *cap * 2;
  void* grown = realloc(items, next * size);
  if (grown != NULL)
    *cap = next;
  return grown;
}

/* ---- tables -------------------------------------------------------------- */

/* One row of cells, aligned to `width`. */
static void print_cells(const cli_table* t, const char* const* cells,
                        const size_t* width, FILE* out) {
  for (size_t c = 0; c < t->cols; c++) {
    const char* cell = cells[c] != NULL ? cells[c] : "";
    bool last = c + 1 == t->cols;
    if (t->right != NULL && t->right[c])
      fprintf(out, "%*s", (int)width[c], cell);
    else if (last) /* no trailing blanks */
      fputs(cell, out);
    else
      fprintf(out, "%-*s", (int)width[c], cell);
    fputs(last ? "\n" : "  ", out);
  }
}

/* A row of the two-pass mode: sizes the columns, or prints. */
static void stream_row(cli_table* t, char* line) {
  const char* cells[16] = {0};
  char* rest = line;
  for (size_t c = 0; c < t->cols && c < 16; c++) {
    char* tab = c + 1 < t->cols ? strchr(rest, '\t') : NULL;
    if (tab != NULL)
      *tab = '\0';
    cells[c] = rest;
    size_t n = strlen(rest);
    if (t->measuring && n > t->width[c])
      t->width[c] = n;
    rest = tab != NULL ? tab + 1 : rest + n;
  }
  if (!t->measuring && t->cols <= 16)
    print_cells(t, cells, t->width, t->stream);
}

void cli_table_measure(cli_table* t) {
  t->measuring = true;
  for (size_t c = 0; c < t->cols && c < 16; c++)
    t->width[c] = strlen(t->headers[c]);
}

void cli_table_stream(cli_table* t, FILE* out) {
  t->measuring = false;
  t->stream = out;
  if (t->cols <= 16)
    print_cells(t, t->headers, t->width, out);
}

void cli_table_row(cli_table* t, const char* fmt, ...) {
  char* line = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&line, fmt, ap);
  va_end(ap);
  if (n < 0) {
    cli_error("out of memory");
    exit(CLI_FAIL);
  }
  if (t->measuring || t->stream != NULL) {
    stream_row(t, line);
    free(line);
    return;
  }
  char** cells =
      cli_grow(t->cells, t->rows, &t->cap, t->cols * sizeof(*cells), 16);
  if (cells == NULL) {
    cli_error("out of memory");
    exit(CLI_FAIL);
  }
  t->cells = cells;
  /* Split on tabs; the row owns one copy per cell. */
  char* rest = line;
  for (size_t c = 0; c < t->cols; c++) {
    char* tab = c + 1 < t->cols ? strchr(rest, '\t') : NULL;
    if (tab != NULL)
      *tab = '\0';
    t->cells[t->rows * t->cols + c] = strdup(rest);
    rest = tab != NULL ? tab + 1 : rest + strlen(rest);
  }
  free(line);
  t->rows++;
}

void cli_table_print(const cli_table* t, FILE* out) {
  size_t width[16] = {0};
  if (t->cols > 16 || t->stream != NULL || t->measuring)
    return;
  for (size_t c = 0; c < t->cols; c++)
    width[c] = strlen(t->headers[c]);
  for (size_t r = 0; r < t->rows; r++)
    for (size_t c = 0; c < t->cols; c++) {
      const char* cell = t->cells[r * t->cols + c];
      size_t n = cell ? strlen(cell) : 0;
      if (n > width[c])
        width[c] = n;
    }
  print_cells(t, t->headers, width, out);
  for (size_t r = 0; r < t->rows; r++)
    print_cells(t, (const char* const*)&t->cells[r * t->cols], width, out);
}

void cli_table_free(cli_table* t) {
  for (size_t i = 0; i < t->rows * t->cols; i++)
    free(t->cells[i]);
  free(t->cells);
  for (size_t i = 0; i < t->text_count; i++)
    free(t->texts[i]);
  free(t->texts);
  t->cells = NULL;
  t->texts = NULL;
  t->rows = t->cap = t->text_count = t->text_cap = 0;
}

const char* cli_table_text(cli_table* t, const char* s) {
  /* Most names need no escape: no copy for them. */
  const unsigned char* p = (const unsigned char*)s;
  while (*p >= 0x20 && *p != 0x7f && *p != '\\')
    p++;
  if (*p == '\0')
    return s;
  char* text = NULL;
  if (kpack_co_escape_name(s, &text) != KPACK_SUCCESS)
    goto oom;
  char** texts =
      cli_grow(t->texts, t->text_count, &t->text_cap, sizeof(*texts), 16);
  if (texts == NULL)
    goto oom;
  t->texts = texts;
  t->texts[t->text_count++] = text;
  return text;
oom:
  free(text);
  cli_error("out of memory");
  exit(CLI_FAIL);
}

/* ---- numbers ------------------------------------------------------------- */

const char* cli_ratio(char buf[32], uint64_t size, uint64_t stored) {
  if (stored == 0)
    snprintf(buf, 32, "-");
  else
    snprintf(buf, 32, "%.2fx", (double)size / (double)stored);
  return buf;
}

const char* cli_human_size(char buf[32], uint64_t bytes) {
  static const char* const units[] = {"B",   "KiB", "MiB", "GiB",
                                      "TiB", "PiB", "EiB"};
  double v = (double)bytes;
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
  else
    snprintf(buf, 32, "%.1f %s", v, units[u]);
  return buf;
}

void cli_total_add(cli_total* t, uint64_t v) {
  if (v > UINT64_MAX - t->value) {
    t->value = UINT64_MAX;
    t->over = true;
  } else {
    t->value += v;
  }
}

const char* cli_total_human(char buf[32], cli_total t) {
  if (t.over) {
    snprintf(buf, 32, "over 16.0 EiB");
    return buf;
  }
  return cli_human_size(buf, t.value);
}

/* ---- files --------------------------------------------------------------- */

bool cli_read_file(const char* path, void** data, size_t* size) {
  bool ok = false;
  uint8_t* buf = NULL;
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return false;
  if (fstat(fd, &st) != 0)
    goto done;
  if (!S_ISREG(st.st_mode)) {
    errno = EISDIR;
    goto done;
  }
  /* One byte more than st_size, so that a file that did not change is read
   * (and its end seen) without growing the buffer; read to EOF rather than
   * trusting st_size, since the file may change. */
  size_t cap = (size_t)st.st_size + 1, n = 0;
  buf = malloc(cap);
  if (buf == NULL)
    goto done;
  for (;;) {
    uint8_t* grown = cli_grow(buf, n, &cap, 1, 1);
    if (grown == NULL)
      goto done;
    buf = grown;
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      goto done;
    if (got == 0)
      break;
    n += (size_t)got;
  }
  *data = buf;
  *size = n;
  buf = NULL;
  ok = true;
done:;
  int saved = errno;
  free(buf);
  close(fd);
  errno = saved;
  return ok;
}

bool cli_mkdirs(const char* path, unsigned mode) {
  char* copy = strdup(path);
  bool ok = copy != NULL;
  /* Create each prefix in turn; existing directories are fine. */
  for (char* p = copy; ok && p != NULL;) {
    p = strchr(p + 1, '/');
    if (p != NULL)
      *p = '\0';
    if (copy[0] != '\0' && mkdir(copy, mode) != 0 && errno != EEXIST)
      ok = false;
    if (p != NULL)
      *p = '/';
  }
  struct stat st;
  if (ok && stat(path, &st) != 0)
    ok = false;
  else if (ok && !S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    ok = false;
  }
  free(copy);
  return ok;
}

/* ---- archives ------------------------------------------------------------ */

kpack_error_t cli_for_each_kernel(kpack_archive_t archive, cli_kernel_fn fn,
                                  void* user) {
  kpack_error_t err;
  size_t binaries;
  if ((err = kpack_get_binary_count(archive, &binaries)) != KPACK_SUCCESS)
    return err;
  for (size_t b = 0; b < binaries; b++) {
    const char* binary;
    size_t arches;
    if ((err = kpack_get_binary(archive, b, &binary)) != KPACK_SUCCESS ||
        (err = kpack_get_binary_arch_count(archive, binary, &arches)) !=
            KPACK_SUCCESS)
      return err;
    for (size_t a = 0; a < arches; a++) {
      const char* arch;
      kpack_kernel_info_t info;
      if ((err = kpack_get_binary_arch(archive, binary, a, &arch)) !=
              KPACK_SUCCESS ||
          (err = kpack_get_kernel_info(archive, binary, arch, &info)) !=
              KPACK_SUCCESS)
        return err;
      if (!fn(archive, binary, arch, &info, user))
        return KPACK_SUCCESS;
    }
  }
  return KPACK_SUCCESS;
}

cli_walk cli_walk_archive(const char* path, cli_kernel_fn fn, void* user,
                          kpack_archive_t* keep) {
  kpack_archive_t archive = NULL;
  kpack_error_t err = kpack_open(path, &archive);
  cli_walk walk = CLI_WALKED;
  if (err != KPACK_SUCCESS) {
    cli_input_error(path, err, errno); /* kpack_open() keeps errno */
    walk = CLI_WALK_UNOPENED;
  } else if ((err = cli_for_each_kernel(archive, fn, user)) != KPACK_SUCCESS) {
    cli_kerror(path, err);
    walk = CLI_WALK_BROKEN;
  }
  if (keep != NULL)
    *keep = archive;
  else
    kpack_close(archive);
  return walk;
}

/* Appends `path` (taken: freed on failure) to the array. */
static bool push_operand(char*** items, size_t* count, size_t* cap,
                         char* path) {
  char** grown = cli_grow(*items, *count, cap, sizeof(**items), 16);
  if (path == NULL || grown == NULL) {
    free(path);
    return false;
  }
  *items = grown;
  (*items)[(*count)++] = path;
  return true;
}

bool cli_expand_archives(int argc, char** argv, int first, int* out_argc,
                         char*** out_argv) {
  size_t count = 0, cap = 0;
  char** expanded = NULL;
  for (int i = 0; i < first; i++)
    if (!push_operand(&expanded, &count, &cap, strdup(argv[i])))
      goto nomem;
  for (int i = first; i < argc; i++) {
    struct stat st;
    char** found = NULL;
    size_t found_count = 0;
    if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
      if (!push_operand(&expanded, &count, &cap, strdup(argv[i])))
        goto nomem;
      continue;
    }
    kpack_error_t err = kpack_find_archives(argv[i], &found, &found_count);
    if (err != KPACK_SUCCESS) {
      cli_input_error(argv[i], err, err == KPACK_ERROR_IO_ERROR ? errno : 0);
      goto fail;
    }
    if (found_count == 0)
      cli_error("%s: no *.kpack archive in this directory", argv[i]);
    size_t j = 0;
    while (j < found_count && push_operand(&expanded, &count, &cap, found[j]))
      j++;
    if (j < found_count)
      kpack_path_list_free(found + j + 1, found_count - j - 1);
    free(found);
    if (found_count == 0)
      goto fail;
    if (j < found_count)
      goto nomem;
  }
  if (count == cap) {
    char** grown = cli_grow(expanded, count, &cap, sizeof(*expanded), 16);
    if (grown == NULL)
      goto nomem;
    expanded = grown;
  }
  expanded[count] = NULL;
  *out_argc = (int)count;
  *out_argv = expanded;
  return true;
nomem:
  cli_error("out of memory");
fail:
  for (size_t i = 0; i < count; i++)
    free(expanded[i]);
  free(expanded);
  return false;
}

void cli_operands_free(int argc, char** argv) {
  for (int i = 0; i < argc && argv != NULL; i++)
    free(argv[i]);
  free(argv);
}

/* Adds `item` to the `count` strings of `list` (capacity `cap`) unless it
 * is there; false when out of memory. The strings stay the caller's. */
static bool add_unique(const char*** list, size_t* count, size_t* cap,
                       const char* item) {
  for (size_t i = 0; i < *count; i++)
    if (strcmp((*list)[i], item) == 0)
      return true;
  const char** grown = cli_grow(*list, *count, cap, sizeof(**list), 8);
  if (grown == NULL)
    return false;
  *list = grown;
  grown[(*count)++] = item;
  return true;
}

/* True when one of the archives holds `binary` for some arch. */
static bool has_binary(const kpack_archive_t* archives, size_t count,
                       const char* binary) {
  for (size_t i = 0; i < count; i++) {
    size_t arches;
    if (kpack_get_binary_arch_count(archives[i], binary, &arches) ==
            KPACK_SUCCESS &&
        arches > 0)
      return true;
  }
  return false;
}

/* "binary has A, B, C": the arches the archives hold it for, each once. */
static char* arches_of(const kpack_archive_t* archives, size_t count,
                       const char* binary) {
  const char** seen = NULL;
  size_t seen_count = 0, seen_cap = 0, len = 0;
  char* text = NULL;
  FILE* out = open_memstream(&text, &len);
  if (out == NULL)
    return NULL;
  fprintf(out, "%s has ", binary);
  for (size_t a = 0; a < count; a++) {
    size_t arches = 0;
    (void)kpack_get_binary_arch_count(archives[a], binary, &arches);
    for (size_t i = 0; i < arches; i++) {
      const char* arch;
      size_t before = seen_count;
      if (kpack_get_binary_arch(archives[a], binary, i, &arch) ==
              KPACK_SUCCESS &&
          add_unique(&seen, &seen_count, &seen_cap, arch) &&
          seen_count > before)
        fprintf(out, "%s%s", before > 0 ? ", " : "", arch);
    }
  }
  free(seen);
  if (fclose(out) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

char* cli_kernel_hint(const kpack_archive_t* archives, size_t count,
                      const char* binary) {
  char* hint = NULL;
  if (has_binary(archives, count, binary))
    return arches_of(archives, count, binary);
  /* The binary as given, then without each leading directory in turn. */
  for (const char* tail = binary; tail != NULL && hint == NULL;) {
    char* numbered = NULL;
    if (tail != binary && has_binary(archives, count, tail)) {
      if (asprintf(&hint, "did you mean '%s'?", tail) < 0)
        hint = NULL;
    } else if (strchr(tail, '#') == NULL &&
               asprintf(&numbered, "%s#0", tail) > 0) {
      if (has_binary(archives, count, numbered) &&
          asprintf(&hint, "did you mean '%s'?", numbered) < 0)
        hint = NULL;
      free(numbered);
    }
    tail = strchr(tail, '/');
    if (tail != NULL)
      tail++;
  }
  return hint;
}

char* cli_why_not_found(const char* const* missing, size_t missing_count) {
  const char** dirs = NULL;
  const char** declared = NULL;
  size_t dir_count = 0, dir_cap = 0, declared_count = 0, declared_cap = 0;
  size_t archives = 0;
  char** names = NULL;
  size_t name_count = 0;
  kpack_archive_t* open = NULL;
  size_t open_count = 0, open_cap = 0;
  char** copies = NULL;
  size_t copy_count = 0, copy_cap = 0;
  char* text = NULL;
  size_t text_len = 0;
  FILE* out = NULL;
  for (size_t i = 0; i < missing_count; i++) {
    char* dir;
    if ((dir = strdup(missing[i])) == NULL)
      goto done;
    char* slash = strrchr(dir, '/');
    if (slash == NULL) {
      free(dir);
      continue;
    }
    *(slash == dir ? slash + 1 : slash) = '\0';
    char** grown = cli_grow(copies, copy_count, &copy_cap, sizeof(*copies), 8);
    if (grown == NULL) {
      free(dir);
      goto done;
    }
    copies = grown;
    copies[copy_count++] = dir;
    if (!add_unique(&dirs, &dir_count, &dir_cap, dir))
      goto done;
  }
  if (dir_count == 0)
    goto done;
  for (size_t d = 0; d < dir_count; d++) {
    struct stat st;
    if (stat(dirs[d], &st) != 0 || !S_ISDIR(st.st_mode) ||
        kpack_find_archives(dirs[d], &names, &name_count) != KPACK_SUCCESS)
      continue;
    for (size_t n = 0; n < name_count; n++) {
      kpack_archive_t a;
      size_t count = 0;
      if (kpack_open(names[n], &a) != KPACK_SUCCESS)
        continue;
      kpack_archive_t* grown =
          cli_grow(open, open_count, &open_cap, sizeof(*open), 8);
      if (grown == NULL) {
        kpack_close(a);
        goto done;
      }
      open = grown;
      open[open_count++] = a;
      archives++;
      (void)kpack_get_architecture_count(a, &count);
      for (size_t k = 0; k < count; k++) {
        const char* arch;
        if (kpack_get_architecture(a, k, &arch) == KPACK_SUCCESS &&
            !add_unique(&declared, &declared_count, &declared_cap, arch))
          goto done;
      }
    }
    kpack_path_list_free(names, name_count);
    names = NULL;
    name_count = 0;
  }
  if ((out = open_memstream(&text, &text_len)) == NULL)
    goto done;
  if (archives == 0) {
    fprintf(out, "archive not installed: no *.kpack archive in");
    for (size_t d = 0; d < dir_count; d++)
      fprintf(out, "%s %s", d > 0 ? "," : "", dirs[d]);
  } else {
    fprintf(out,
            "no code for this GPU in this build: %zu archive%s beside the "
            "candidates declare%s",
            archives, archives == 1 ? "" : "s", archives == 1 ? "s" : "");
    for (size_t k = 0; k < declared_count; k++)
      fprintf(out, "%s %s", k > 0 ? "," : "", declared[k]);
    if (declared_count == 0)
      fprintf(out, " no arch");
  }
  if (fclose(out) != 0) {
    free(text);
    text = NULL;
  }
done:
  kpack_path_list_free(names, name_count);
  for (size_t i = 0; i < open_count; i++)
    kpack_close(open[i]);
  free(open);
  for (size_t i = 0; i < copy_count; i++)
    free(copies[i]);
  free(copies);
  free(dirs);
  free(declared);
  return text;
}

/* ---- interruption -------------------------------------------------------- */

static volatile sig_atomic_t caught_signal;

static void on_signal(int sig) {
  caught_signal = sig;
}

void cli_catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART; /* I/O carries on; the flag is polled */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

int cli_interrupted(void) {
  return (int)caught_signal;
}

/* The C++ runtime's demangler, libstdc++'s __cxa_demangle, loaded the
 * first time a name is demangled: the tool stays C, and only -C pays for
 * the C++ runtime (the commands that walk whole installs keep their
 * memory). Without it names are shown as they are, after one warning. */
typedef char* (*cxa_demangle_fn)(const char* mangled, char* buffer,
                                 size_t* length, int* status);
static cxa_demangle_fn cxa_demangle;
static pthread_once_t cxa_demangle_once = PTHREAD_ONCE_INIT;

static void load_cxa_demangle(void) {
  void* runtime = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
  void* symbol = runtime != NULL ? dlsym(runtime, "__cxa_demangle") : NULL;
  if (symbol == NULL) {
    fprintf(stderr, "kpack: cannot demangle: %s; names are shown as stored\n",
            dlerror());
    return;
  }
  memcpy(&cxa_demangle, &symbol, sizeof(cxa_demangle));
}

char* cli_demangle(const char* name) {
  if (strncmp(name, "_Z", 2) == 0) {
    pthread_once(&cxa_demangle_once, load_cxa_demangle);
    int status = -1;
    char* out =
        cxa_demangle != NULL ? cxa_demangle(name, NULL, NULL, &status) : NULL;
    if (status == 0 && out != NULL)
      return out;
    free(out);
  }
  return strdup(name);
}

char* cli_demangle_kernels(const char* text, size_t* size) {
  char* out = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&out, &len);
  if (f == NULL)
    return NULL;
  for (const char* line = text; *line != '\0';) {
    size_t name_len = strcspn(line, "\t\n");
    size_t line_len = strcspn(line, "\n");
    char* name = strndup(line, name_len);
    char* shown = name != NULL ? cli_demangle(name) : NULL;
    if (shown != NULL) {
      fputs(shown, f);
      fwrite(line + name_len, 1, line_len - name_len, f);
    }
    free(shown);
    free(name);
    if (shown == NULL) {
      fclose(f);
      free(out);
      return NULL;
    }
    line += line_len;
    if (*line == '\n') {
      fputc('\n', f);
      line++;
    }
  }
  if (fclose(f) != 0) {
    free(out);
    return NULL;
  }
  *size = len;
  return out;
}

bool cli_arch_listed(const char* const* listed, size_t count, const char* arch,
                     bool* matched) {
  bool keep = count == 0;
  for (size_t i = 0; i < count; i++)
    if (kpack_target_may_serve(arch, listed[i])) {
      keep = true;
      if (matched == NULL)
        break;
      matched[i] = true;
    }
  return keep;
}

double cli_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_show(cli_progress* p, bool last, const char* fmt, ...) {
  if (!p->enabled)
    return;
  double t = cli_seconds();
  if (t - p->shown < 0.1 && !last)
    return;
  p->shown = t;
  p->drawn = true;
  va_list ap;
  va_start(ap, fmt);
  fputc('\r', stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\033[K", stderr);
  va_end(ap);
}

void cli_progress_end(cli_progress* p) {
  if (p->drawn)
    fputs("\r\033[K", stderr);
  p->drawn = false;
}
