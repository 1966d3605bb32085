/* SPDX-License-Identifier: MIT
 *
 * `kpack`: entry point of the command-line tool. Finds the subcommand and
 * hands it the rest of the command line; `kpack help CMD`, `kpack CMD
 * --help` and `kpack --version` are answered here.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const cli_command* const commands[] = {
    &cli_list_command,    &cli_info_command,   &cli_cat_command,
    &cli_extract_command, &cli_create_command, &cli_verify_command,
    &cli_resolve_command, &cli_split_command,  &cli_diff_command,
};
#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static void print_overview(FILE* out) {
  // clang-format off
  fputs(
      "NAME\n"
      "    kpack - inspect, verify, extract and create kpack archives of GPU\n"
      "    code objects, and explain the loader's search\n"
      "\n"
      "SYNOPSIS\n"
      "    kpack COMMAND [OPTIONS] [ARGUMENTS]\n"
      "    kpack help [COMMAND]\n"
      "    kpack -V|--version\n"
      "\n"
      "COMMANDS\n",
      out);
  // clang-format on
  for (size_t i = 0; i < COMMAND_COUNT; i++)
    fprintf(out, "    %-9s %s\n", commands[i]->name, commands[i]->summary);
  // clang-format off
  fputs(
      "\n"
      "    Every command takes --help. Output is a table for people; list,\n"
      "    info, verify, resolve, split and diff take --json for scripts.\n"
      "    Where a command takes an ARCHIVE, a directory stands for the\n"
      "    *.kpack archives below it, as in kpackfs.\n"
      "\n"
      "EXAMPLES\n"
      "    kpack list .kpack/*.kpack\n"
      "    kpack create -o rand.kpack -j8 --fatbin librocrand.so.1.1=lib/librocrand.so.1\n"
      "    kpack resolve --binary lib/librocrand.so.1 --kernel lib/librocrand.so.1 \\\n"
      "        --search-path ../.kpack/rand.kpack --arch gfx90a:sramecc+:xnack-\n"
      "\n"
      "EXIT STATUS\n"
      "    0 success, 1 failure (the message names the file and the kpack\n"
      "    status, or standard output could not be written), 2 bad command\n"
      "    line, 130 interrupted. diff, like diff(1), exits 1 when the\n"
      "    archives differ and 2 when one cannot be read.\n"
      "\n"
      "ENVIRONMENT\n"
      "    ROCM_KPACK_PATH         ':'-separated archives (or directories of\n"
      "                            them) searched instead of embedded paths;\n"
      "                            '\\:' is a ':' inside a name\n"
      "                            (rand_gfx90a\\:xnack-.kpack)\n"
      "    ROCM_KPACK_PATH_PREFIX  searched before the embedded paths\n"
      "    ROCM_KPACK_DISABLE      the loader finds nothing\n"
      "    ROCM_KPACK_DEBUG        the loader logs each step on standard error\n"
      "\n"
      "    kpack resolve searches as the HIP runtime would with them.\n"
      "\n"
      "SEE ALSO\n"
      "    kpackfs(8)\n",
      out);
  // clang-format on
}

/* ---- standard output ----------------------------------------------------
 *
 * Output that never reached its file is a failure, as in coreutils: a full
 * disk or an I/O error on standard output turns any exit status into 1 with
 * "kpack: write error: REASON". Commands just print; the check runs at exit,
 * so it also covers those that exit() early. stdio forgets why a write
 * failed once its buffer is dropped, so standard output goes through a
 * stream whose write function keeps the first errno. */

static int stdout_errno;

static ssize_t stdout_write(void* cookie, const char* buf, size_t size) {
  size_t done = 0;
  (void)cookie;
  while (done < size) {
    ssize_t n = write(STDOUT_FILENO, buf + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (stdout_errno == 0)
        stdout_errno = n < 0 ? errno : EIO;
      /* Never negative (fopencookie(3)): glibc subtracts the result from
       * what is left to write, and -1 made fwrite copy a byte past the
       * caller's buffer into its own. */
      return (ssize_t)done;
    }
    done += (size_t)n;
  }
  return (ssize_t)done;
}

static void check_stdout(void) {
  bool failed = ferror(stdout) != 0;
  failed = fclose(stdout) != 0 || failed;
  if (!failed)
    return;
  if (stdout_errno != 0)
    cli_error("write error: %s", strerror(stdout_errno));
  else
    cli_error("write error");
  _exit(CLI_FAIL);
}

/* Swaps stdout for the errno-keeping stream, buffered as stdio would be. If
 * that cannot be had, stdout stays and only the reason may be missing. */
static void watch_stdout(void) {
  static const cookie_io_functions_t io = {.write = stdout_write};
  FILE* out = fopencookie(NULL, "w", io);
  if (out != NULL) {
    setvbuf(out, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = out;
  }
  atexit(check_stdout);
}

static const cli_command* find_command(const char* name) {
  for (size_t i = 0; i < COMMAND_COUNT; i++)
    if (strcmp(commands[i]->name, name) == 0)
      return commands[i];
  return NULL;
}

/* Edits (insert, delete, replace, swap two neighbours) from a to b, when
 * both are short; SIZE_MAX otherwise. */
static size_t edit_distance(const char* a, const char* b) {
  enum { MAX = 32 };
  size_t n = strlen(a), m = strlen(b);
  size_t d[MAX + 1][MAX + 1];
  if (n > MAX || m > MAX)
    return SIZE_MAX;
  for (size_t i = 0; i <= n; i++)
    for (size_t j = 0; j <= m; j++) {
      if (i == 0 || j == 0) {
        d[i][j] = i + j;
        continue;
      }
      size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best)
        best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

/* "no such command", with the command likely meant, as git says it: one
 * that `name` begins (`kpack ext`) or that is at most two edits away and
 * closer than any other (`kpack lst`). */
static int no_such_command(const char* name) {
  const cli_command* best = NULL;
  size_t best_distance = 3, prefixed = 0;
  for (size_t i = 0; i < COMMAND_COUNT; i++) {
    size_t d = edit_distance(name, commands[i]->name);
    if (strlen(name) >= 2 &&
        strncmp(commands[i]->name, name, strlen(name)) == 0) {
      prefixed++;
      d = 0;
    }
    if (d < best_distance && d < strlen(commands[i]->name)) {
      best = commands[i];
      best_distance = d;
    }
  }
  if (best != NULL && prefixed <= 1)
    cli_error("no such command '%s'; did you mean '%s'? (see 'kpack help')",
              name, best->name);
  else
    cli_error("no such command '%s' (see 'kpack help')", name);
  return CLI_USAGE;
}

int main(int argc, char** argv) {
  watch_stdout();
  if (argc < 2) {
    print_overview(stderr);
    return CLI_USAGE;
  }
  const char* name = argv[1];
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0 ||
      strcmp(name, "version") == 0) {
    printf("kpack %s (kpack archive format v%d)\n", CLI_VERSION,
           KPACK_CURRENT_VERSION);
    return CLI_OK;
  }
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
      strcmp(name, "help") == 0) {
    if (argc > 2 && strcmp(name, "help") == 0) {
      const cli_command* cmd = find_command(argv[2]);
      if (cmd == NULL)
        return no_such_command(argv[2]);
      return cli_print_manual(cmd);
    }
    print_overview(stdout);
    return CLI_OK;
  }
  const cli_command* cmd = find_command(name);
  if (cmd == NULL)
    return no_such_command(name);
  /* The subcommand sees itself as argv[0], as getopt expects; it reports
   * a refused option itself (cli_option_error()), once. */
  opterr = 0;
  return cmd->run(argc - 1, argv + 1);
}
