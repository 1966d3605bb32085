/* SPDX-License-Identifier: MIT
 *
 * `kpack extract`: writes archives out as the tree kpackfs shows,
 * DIR/<binary>/<arch>/kernel.<type>, which `kpack create` packs again.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char extract_manual[] =
    "NAME\n"
    "    kpack extract - write the kernels of archives out as files\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack extract [-C DIR] [-b BINARY] [-a ARCH] [-v] ARCHIVE...\n"
    "\n"
    "DESCRIPTION\n"
    "    Writes every kernel to DIR/<binary>/<arch>/kernel.<type>, the layout\n"
    "    kpackfs mounts (e.g. lib/librocrand.so.1#0/gfx90a:xnack-/"
    "kernel.hsaco),\n"
    "    creating directories as needed and replacing existing files. `kpack\n"
    "    create DIR` packs such a tree again. A kernel whose TOC entry has a\n"
    "    metadata map gets it beside the kernel, byte for byte, as\n"
    "    " CLI_METADATA_FILE
    " (MessagePack; `kpack list --json` shows it as\n"
    "    JSON), which `kpack create` reads back. When several archives hold "
    "the\n"
    "    same binary and arch, the first one named wins, as in kpackfs. A\n"
    "    name that cannot be a relative path (empty, '.' or '..' components,\n"
    "    a leading '/', a '/' inside an arch) is skipped with a message.\n"
    "\n"
    "OPTIONS\n"
    "    -C, --directory DIR  extract into DIR (default: the current "
    "directory)\n"
    "    -b, --binary BINARY  only this binary (as listed, with #N)\n"
    "    -a, --arch ARCH      only this architecture (as listed)\n"
    "    -v, --verbose        print each file written\n"
    "    -h, --help           print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack extract -C tree .kpack/*.kpack\n"
    "    kpack extract -C tree -a gfx1030 rand.kpack && kpack create -o "
    "gfx1030.kpack tree\n"
    "\n"
    "EXIT STATUS\n"
    "    0 every kernel was written; 1 an archive could not be opened, a\n"
    "    kernel could not be read or written, or a name was unsafe; 2 bad\n"
    "    command line; 130 interrupted.\n";

static int extract_run(int argc, char** argv);

const cli_command cli_extract_command = {
    "extract", "write kernels out as DIR/<binary>/<arch>/kernel.<type>",
    extract_manual, extract_run};

typedef struct extract_state {
  const char* dir;
  const char* only_binary;
  const char* only_arch;
  bool verbose;
  const char* path;         /* archive being extracted */
  kpack_archive_t* earlier; /* archives named before it */
  size_t earlier_count;
  size_t written;
  int status;
} extract_state;

static bool write_whole(const char* path, const void* data, size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  const uint8_t* p = data;
  bool ok = true;
  while (ok && size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    ok = n > 0;
    if (ok) {
      p += n;
      size -= (size_t)n;
    }
  }
  int saved = errno;
  if (close(fd) != 0 && ok)
    return false;
  errno = saved;
  return ok;
}

/* The entry's metadata map, beside the kernel; a stale one from an earlier
 * extraction is removed when the entry has none. */
static bool write_metadata(kpack_archive_t archive, const char* binary,
                           const char* arch, const char* dir) {
  const void* map;
  size_t size;
  char* path = NULL;
  if (asprintf(&path, "%s/%s", dir, CLI_METADATA_FILE) < 0) {
    errno = ENOMEM;
    return false;
  }
  bool ok = kpack_get_entry_metadata(archive, binary, arch, &map, &size) ==
            KPACK_SUCCESS;
  if (ok && map != NULL)
    ok = write_whole(path, map, size);
  else if (ok && unlink(path) != 0 && errno != ENOENT)
    ok = false;
  if (!ok)
    cli_error("%s: %s", path, strerror(errno));
  free(path);
  return ok;
}

static bool extract_kernel(kpack_archive_t archive, const char* binary,
                           const char* arch, const kpack_kernel_info_t* info,
                           void* user) {
  extract_state* s = user;
  char *dir = NULL, *file = NULL;
  void* data = NULL;
  size_t size;
  kpack_kernel_info_t other;
  bool go_on = true;

  if (cli_interrupted())
    return false;
  if ((s->only_binary && strcmp(binary, s->only_binary) != 0) ||
      (s->only_arch && strcmp(arch, s->only_arch) != 0))
    return true;
  for (size_t i = 0; i < s->earlier_count; i++)
    if (kpack_get_kernel_info(s->earlier[i], binary, arch, &other) ==
        KPACK_SUCCESS)
      return true; /* an earlier archive already provided it */
  if (!cli_safe_binary_name(binary) || !cli_safe_component(arch) ||
      !cli_safe_component(info->type)) {
    cli_error("%s: %s for %s: not a safe relative path; skipped", s->path,
              binary, arch);
    s->status = CLI_FAIL;
    return true;
  }
  if (asprintf(&dir, "%s/%s/%s", s->dir, binary, arch) < 0)
    dir = NULL;
  if (dir == NULL || asprintf(&file, "%s/kernel.%s", dir, info->type) < 0) {
    file = NULL;
    cli_error("out of memory");
    s->status = CLI_FAIL;
    go_on = false;
    goto done;
  }
  kpack_error_t err = kpack_get_kernel(archive, binary, arch, &data, &size);
  if (err != KPACK_SUCCESS) {
    cli_error("%s: %s for %s: %s (%s)", s->path, binary, arch,
              kpack_error_string(err), cli_error_text(err));
    s->status = CLI_FAIL;
  } else if (!cli_mkdirs(dir, 0755) || !write_whole(file, data, size)) {
    cli_error("%s: %s", file, strerror(errno));
    s->status = CLI_FAIL;
  } else if (!write_metadata(archive, binary, arch, dir)) {
    s->status = CLI_FAIL;
  } else {
    s->written++;
    if (s->verbose)
      printf("%s\n", file);
  }
done:
  kpack_free_kernel(data);
  free(dir);
  free(file);
  return go_on;
}

static int extract_run(int argc, char** argv) {
  static const struct option options[] = {
      {"directory", required_argument, NULL, 'C'},
      {"binary", required_argument, NULL, 'b'},
      {"arch", required_argument, NULL, 'a'},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  extract_state s = {.dir = "."};
  int c;
  while ((c = getopt_long(argc, argv, "C:b:a:vh", options, NULL)) != -1) {
    switch (c) {
      case 'C':
        s.dir = optarg;
        break;
      case 'b':
        s.only_binary = optarg;
        break;
      case 'a':
        s.only_arch = optarg;
        break;
      case 'v':
        s.verbose = true;
        break;
      case 'h':
        return cli_print_manual(&cli_extract_command);
      default:
        return cli_usage_error(&cli_extract_command, "unknown option");
    }
  }
  if (optind >= argc)
    return cli_usage_error(&cli_extract_command, "no ARCHIVE given");
  if (s.dir[0] == '\0')
    return cli_usage_error(&cli_extract_command, "empty -C directory");

  cli_catch_signals();
  if (!cli_mkdirs(s.dir, 0755)) {
    cli_error("%s: %s", s.dir, strerror(errno));
    return CLI_FAIL;
  }
  s.earlier = calloc((size_t)(argc - optind), sizeof(*s.earlier));
  if (s.earlier == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  for (int i = optind; i < argc && !cli_interrupted(); i++) {
    kpack_archive_t archive;
    kpack_error_t err = kpack_open(argv[i], &archive);
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      s.status = CLI_FAIL;
      continue;
    }
    s.path = argv[i];
    err = cli_for_each_kernel(archive, extract_kernel, &s);
    if (err != KPACK_SUCCESS) {
      cli_kerror(argv[i], err);
      s.status = CLI_FAIL;
    }
    s.earlier[s.earlier_count++] = archive;
  }
  for (size_t i = 0; i < s.earlier_count; i++)
    kpack_close(s.earlier[i]);
  free(s.earlier);
  if (cli_interrupted()) {
    cli_error("extract: interrupted after %zu kernels", s.written);
    return CLI_INTERRUPTED;
  }
  return s.status;
}
