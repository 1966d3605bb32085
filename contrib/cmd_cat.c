/* SPDX-License-Identifier: MIT
 *
 * `kpack cat`: one kernel's bytes, decompressed, to standard output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>

#include "cli.h"

// clang-format off
static const char cat_manual[] =
    "NAME\n"
    "    kpack cat - write one kernel to standard output\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack cat ARCHIVE|DIR BINARY ARCH\n"
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
    "OPTIONS\n"
    "    -h, --help  print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx1030 > k.hsaco\n"
    "    kpack cat rand.kpack 'lib/librocrand.so.1#0' gfx1030 | readelf -h /dev/stdin\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success; 1 the archive or kernel could not be read, or standard\n"
    "    output could not be written; 2 bad command line.\n";
// clang-format on

static int cat_run(int argc, char** argv);

const cli_command cli_cat_command = {
    "cat", "write one kernel's bytes to standard output", cat_manual, cat_run};

static int cat_run(int argc, char** argv) {
  static const struct option options[] = {{"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c, status = CLI_FAIL;
  void* data = NULL;
  size_t size;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'h')
      return cli_print_manual(&cli_cat_command);
    return cli_option_error(&cli_cat_command, argv, "h");
  }
  if (argc - optind != 3)
    return cli_usage_error(&cli_cat_command,
                           "expected ARCHIVE BINARY ARCH, got %d argument%s",
                           argc - optind, argc - optind == 1 ? "" : "s");
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
