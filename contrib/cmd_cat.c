/* SPDX-License-Identifier: MIT
 *
 * `kpack cat`: one kernel's bytes, decompressed, to standard output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

// clang-format off
static const char cat_manual[] =
    "NAME\n"
    "    kpack cat - write one kernel to standard output\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack cat [-f] ARCHIVE|DIR BINARY ARCH\n"
    "\n"
    "DESCRIPTION\n"
    "    Decompresses the kernel of BINARY (as `kpack list` shows it,\n"
    "    including the #N suffix) for architecture ARCH (exactly as listed,\n"
    "    e.g. gfx90a:xnack-) and writes its bytes to standard output. A\n"
    "    directory DIR stands for the *.kpack archives below it, in name\n"
    "    order: the first that holds the kernel gives it. A missing kernel\n"
    "    is reported with what was likely meant: the binary with its #0,\n"
    "    or the arches it has.\n"
    "\n"
    "    The bytes are binary: when standard output is a terminal, cat\n"
    "    refuses to write them there unless -f is given, as gzip and zstd\n"
    "    do; redirect them to a file or a pipe. readelf and objdump read\n"
    "    regular files only: write the kernel to one first.\n"
    "\n"
    "OPTIONS\n"
    "    -f, --force  write to standard output even when it is a terminal\n"
    "    -h, --help   print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx1030 > k.hsaco && readelf -h k.hsaco\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx1030 | sha256sum\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 the archive or kernel could not be read, standard\n"
    "    output could not be written or is a terminal (without -f); 2 bad\n"
    "    command line.\n";
// clang-format on

static int cat_run(int argc, char** argv);

const cli_command cli_cat_command = {
    "cat", "write one kernel's bytes to standard output", cat_manual, cat_run};

static int cat_run(int argc, char** argv) {
  static const struct option options[] = {{"force", no_argument, NULL, 'f'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c, status = CLI_FAIL;
  void* data = NULL;
  size_t size;
  bool force = false;
  while ((c = getopt_long(argc, argv, "fh", options, NULL)) != -1) {
    if (c == 'f')
      force = true;
    else if (c == 'h')
      return cli_print_manual(&cli_cat_command);
    else
      return cli_option_error(&cli_cat_command, argv, "fh");
  }
  if (argc - optind != 3)
    return cli_usage_error(&cli_cat_command,
                           "expected ARCHIVE BINARY ARCH, got %d argument%s",
                           argc - optind, argc - optind == 1 ? "" : "s");
  if (!force && isatty(STDOUT_FILENO)) {
    cli_error(
        "cat: standard output is a terminal: redirect the kernel's "
        "bytes to a file (> k.hsaco) or a pipe, or give -f to write "
        "them to the terminal anyway");
    return CLI_FAIL;
  }
  const char* binary = argv[optind + 1];
  const char* arch = argv[optind + 2];
  int paths_count;
  char** paths;
  if (!cli_expand_archives(optind + 1, argv, optind, &paths_count, &paths))
    return CLI_FAIL; /* a directory: the first of its archives with it */
  /* Archives are asked in order; all stay open for the hint. */
  size_t count = 0;
  kpack_archive_t* archives =
      calloc((size_t)(paths_count - optind), sizeof(*archives));
  kpack_error_t err = KPACK_ERROR_KERNEL_NOT_FOUND;
  if (archives == NULL) {
    cli_kerror("cat", KPACK_ERROR_OUT_OF_MEMORY);
    goto done;
  }
  for (int i = optind; i < paths_count && err == KPACK_ERROR_KERNEL_NOT_FOUND;
       i++) {
    err = kpack_open(paths[i], &archives[count]);
    if (err != KPACK_SUCCESS) {
      cli_input_error(paths[i], err, errno); /* kpack_open() keeps errno */
      goto done;
    }
    err = kpack_get_kernel(archives[count++], binary, arch, &data, &size);
  }
  if (err != KPACK_SUCCESS) {
    char* hint = cli_kernel_hint(archives, count, binary);
    cli_error("%s: %s for %s: %s (%s)%s%s", argv[optind], binary, arch,
              kpack_error_string(err), cli_error_text(err),
              hint != NULL ? "; " : "", hint != NULL ? hint : "");
    free(hint);
    goto done;
  }
  /* A short write is reported at exit, with every other command's. */
  fwrite(data, 1, size, stdout);
  status = CLI_OK;
done:
  kpack_free_kernel(data);
  for (size_t i = 0; i < count; i++)
    kpack_close(archives[i]);
  free(archives);
  cli_operands_free(paths_count, paths);
  return status;
}
