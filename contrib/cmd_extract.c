/* SPDX-License-Identifier: MIT
 *
 * `kpack extract`: writes archives out as the tree kpackfs shows,
 * DIR/<binary>/<arch>/kernel.<type> and the files beside it, byte for byte
 * what a mount serves, which `kpack create` packs again.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

// clang-format off
static const char extract_manual[] =
    "NAME\n"
    "    kpack extract - write archives out as the tree kpackfs shows\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack extract [-C DIR] [-b BINARY] [-a ARCH] [-B] [--demangle] [-v]\n"
    "                  ARCHIVE|DIR...\n"
    "\n"
    "DESCRIPTION\n"
    "    Writes every kernel to DIR/<binary>/<arch>/kernel.<type>, the layout\n"
    "    kpackfs mounts (e.g. lib/librocrand.so.1#0/gfx90a:xnack-/kernel.hsaco),\n"
    "    with the files a mount shows beside it, byte for byte:\n"
    "\n"
    "        " KPACK_CO_KERNELS_FILE
    "               one line per GPU kernel of a code object:\n"
    "                              name, vgpr, sgpr, agpr, lds, scratch, wave,\n"
    "                              wg, kernarg\n"
    "        " KPACK_CO_METADATA_FILE
    "         the code object's metadata note as JSON\n"
    "        " KPACK_ENTRY_METADATA_FILE
    "  the TOC entry's metadata map (MessagePack;\n"
    "                              `kpack list --json` shows it as JSON), when\n"
    "                              the entry has one\n"
    "\n"
    "    " KPACK_CO_KERNELS_FILE " and " KPACK_CO_METADATA_FILE
    " are written beside every kernel of type\n"
    "    hsaco, and are empty when its bytes are not an AMDGPU code object (as\n"
    "    in a mount; `kpack info` on the kernel says why). Directories are\n"
    "    created as needed and files replaced; one of these three files that\n"
    "    an earlier extraction left beside a kernel which now has none is\n"
    "    removed. `kpack create DIR` packs the tree again, metadata maps\n"
    "    included, as it packs a mounted tree. When several archives hold the\n"
    "    same binary and arch, the first one named wins, as in kpackfs (a\n"
    "    directory DIR stands for the *.kpack below it, in name order). A\n"
    "    name that cannot be a relative path (empty, '.' or '..' components,\n"
    "    a leading '/', a '/' inside an arch) is skipped with a message.\n"
    "\n"
    "    A file or directory that cannot be written (a full disk, a read-only\n"
    "    filesystem) stops the run at once: one message names it with the\n"
    "    system's reason, the kernel being written is removed with the files\n"
    "    beside it, and a last line says how many kernels DIR holds, each\n"
    "    whole.\n"
    "\n"
    "OPTIONS\n"
    "    -C, --directory DIR  extract into DIR (default: the current directory)\n"
    "    -b, --binary BINARY  only this binary (as listed, with #N); when it\n"
    "                         names no kernel, the status is 1 and the message\n"
    "                         says what was likely meant (the #0, the arches)\n"
    "    -a, --arch ARCH      only this architecture (as listed)\n"
    "    -B, --bytes-only     write only what `kpack create` reads back, the\n"
    "                         kernels and " KPACK_ENTRY_METADATA_FILE
    ", without\n"
    "                         reading any code object (no " KPACK_CO_KERNELS_FILE
    " or\n"
    "                         " KPACK_CO_METADATA_FILE
    ")\n"
    "    --demangle           write the names in " KPACK_CO_KERNELS_FILE
    " as c++filt shows\n"
    "                         them (C++ names demangled); the tree then\n"
    "                         differs from a mount, which shows them as\n"
    "                         stored\n"
    "    -v, --verbose        print each file written\n"
    "    -h, --help           print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack extract -C tree .kpack/*.kpack\n"
    "    kpack extract -C tree -a gfx1030 rand.kpack && kpack create -o gfx1030.kpack tree\n"
    "    kpack extract -C tree rand.kpack && grep -r xorwow tree --include=kernels\n"
    "\n"
    "EXIT STATUS\n"
    "    0 every kernel was written; 1 an archive could not be opened, a\n"
    "    kernel could not be read, a name was unsafe (the run goes on), or a\n"
    "    file could not be written (the run stops); 2 bad command line; 130\n"
    "    interrupted.\n";
// clang-format on

static int extract_run(int argc, char** argv);

const cli_command cli_extract_command = {
    "extract", "write archives out as the tree kpackfs shows", extract_manual,
    extract_run};

typedef struct extract_state {
  const char* dir;
  const char* only_binary;
  const char* only_arch;
  bool verbose;
  bool bytes_only;  /* no kernels and metadata.json beside code objects */
  bool demangle;    /* names in `kernels` as c++filt shows them */
  const char* path; /* archive being extracted */
  kpack_archive_t* earlier; /* archives named before it */
  size_t earlier_count;
  size_t written;
  cli_progress progress; /* on a terminal, without -v */
  int status;
  /* A write failed: the disk is full, read-only..., and so would every
   * later write be; the run stops rather than repeat the message. */
  bool stopped;
} extract_state;

/* Writes `path` whole; on failure removes what it began (it replaced the
 * file anyway), so no kernel or file beside it is left half written. */
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
  if (close(fd) != 0 && ok) {
    saved = errno;
    ok = false;
  }
  if (!ok)
    unlink(path);
  errno = saved;
  return ok;
}

/* Writes dir/name, or with `data` NULL removes a dir/name an earlier
 * extraction left, so that nothing beside a kernel describes other bytes.
 * False after a message; the run then stops. */
static bool put_file(extract_state* s, const char* dir, const char* name,
                     const void* data, size_t size) {
  char* path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0) {
    cli_error("out of memory");
    return false;
  }
  bool ok = data != NULL ? write_whole(path, data, size)
                         : unlink(path) == 0 || errno == ENOENT;
  if (!ok) {
    if (data != NULL)
      cli_output_error(path, KPACK_ERROR_IO_ERROR, errno);
    else
      cli_error("%s: cannot remove: %s", path, strerror(errno));
    s->stopped = true;
  } else if (data != NULL && s->verbose)
    printf("%s\n", path);
  free(path);
  return ok;
}

/* The files beside the kernel: the TOC entry's metadata map, byte for byte,
 * and for a code object the `kernels` and `metadata.json` a mount shows,
 * from the same renderer, so the two trees are one. Bytes that are not a
 * code object render as empty files there too. */
static bool write_beside(extract_state* s, kpack_archive_t archive,
                         const char* binary, const char* arch, const char* type,
                         const char* dir, const void* data, size_t size) {
  const void* map = NULL;
  size_t map_size = 0;
  kpack_co_render_t r = {0};
  bool shown = !s->bytes_only && strcmp(type, "hsaco") == 0;
  kpack_get_entry_metadata(archive, binary, arch, &map, &map_size);
  char* demangled = NULL;
  size_t demangled_size = 0;
  if (shown && (kpack_co_render(data, size, &r) != KPACK_SUCCESS ||
                (s->demangle && (demangled = cli_demangle_kernels(
                                     r.kernels, &demangled_size)) == NULL))) {
    kpack_co_render_free(&r);
    cli_error("out of memory");
    return false;
  }
  bool ok = put_file(s, dir, KPACK_LAYOUT_TOC_METADATA_FILE, map, map_size) &&
            put_file(s, dir, KPACK_LAYOUT_KERNELS_FILE,
                     demangled != NULL ? demangled : r.kernels,
                     demangled != NULL ? demangled_size : r.kernels_size) &&
            put_file(s, dir, KPACK_LAYOUT_METADATA_FILE, r.metadata_json,
                     r.metadata_json_size);
  free(demangled);
  kpack_co_render_free(&r);
  return ok;
}

static bool extract_kernel(kpack_archive_t archive, const char* binary,
                           const char* arch, const kpack_kernel_info_t* info,
                           void* user) {
  extract_state* s = user;
  char* dir = NULL;
  char name[KPACK_LAYOUT_NAME_MAX + 1];
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
  /* The names a mount skips, extract skips: one rule for both trees. */
  const char* why = kpack_layout_entry_problem(binary, arch, info->type);
  if (why != NULL) {
    cli_error("%s: %s for %s: not a safe relative path (%s); skipped", s->path,
              binary, arch, why);
    s->status = CLI_FAIL;
    return true;
  }
  kpack_layout_kernel_file(info->type, name, sizeof(name)); /* fits: above */
  if (asprintf(&dir, "%s/%s/%s", s->dir, binary, arch) < 0) {
    dir = NULL;
    cli_error("out of memory");
    s->status = CLI_FAIL;
    go_on = false;
    goto done;
  }
  kpack_error_t err = kpack_get_kernel(archive, binary, arch, &data, &size);
  if (err != KPACK_SUCCESS) {
    cli_error("%s: %s for %s: %s (%s)", s->path, binary, arch,
              kpack_error_string(err), cli_read_reason(err, errno));
    s->status = CLI_FAIL;
  } else if (!cli_mkdirs(dir, 0755)) {
    cli_error("%s: cannot create: %s", dir, strerror(errno));
    s->status = CLI_FAIL;
    s->stopped = true;
  } else if (!put_file(s, dir, name, data != NULL ? data : "", size)) {
    s->status = CLI_FAIL;
  } else if (!write_beside(s, archive, binary, arch, info->type, dir, data,
                           size)) {
    /* Only whole kernels stay: one without its files is taken back. */
    const char* const files[] = {name, KPACK_LAYOUT_TOC_METADATA_FILE,
                                 KPACK_LAYOUT_KERNELS_FILE,
                                 KPACK_LAYOUT_METADATA_FILE};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
      char* path = NULL;
      if (asprintf(&path, "%s/%s", dir, files[i]) >= 0)
        unlink(path);
      free(path);
    }
    s->status = CLI_FAIL;
  } else {
    s->written++;
    cli_progress_show(&s->progress, false, "kpack: extract: %zu kernels, %s",
                      s->written, s->path);
  }
  go_on = !s->stopped;
done:
  kpack_free_kernel(data);
  free(dir);
  return go_on;
}

static int extract_archives(extract_state s, int argc, char** argv);

static int extract_run(int argc, char** argv) {
  static const struct option options[] = {
      {"directory", required_argument, NULL, 'C'},
      {"binary", required_argument, NULL, 'b'},
      {"arch", required_argument, NULL, 'a'},
      {"verbose", no_argument, NULL, 'v'},
      {"bytes-only", no_argument, NULL, 'B'},
      {"demangle", no_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  extract_state s = {.dir = "."};
  int c;
  while ((c = getopt_long(argc, argv, "C:b:a:vBh", options, NULL)) != -1) {
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
      case 'B':
        s.bytes_only = true;
        break;
      case 'D':
        s.demangle = true;
        break;
      case 'h':
        return cli_print_manual(&cli_extract_command);
      default:
        return cli_option_error(&cli_extract_command, argv, "C:b:a:vBh");
    }
  }
  if (optind >= argc)
    return cli_usage_error(&cli_extract_command, "no ARCHIVE given");
  if (s.dir[0] == '\0')
    return cli_usage_error(&cli_extract_command, "empty -C directory");

  if (!cli_expand_archives(argc, argv, optind, &argc, &argv))
    return CLI_FAIL; /* a directory stands for the archives in it */
  int status = extract_archives(s, argc, argv);
  cli_operands_free(argc, argv);
  return status;
}

/* The walk over the ARCHIVE operands (directories expanded), with the
 * options extract_run() parsed into `s`. */
static int extract_archives(extract_state s, int argc, char** argv) {
  cli_catch_signals();
  s.progress.enabled = !s.verbose && isatty(STDERR_FILENO);
  if (!cli_mkdirs(s.dir, 0755)) {
    cli_error("%s: %s", s.dir, strerror(errno));
    return CLI_FAIL;
  }
  s.earlier = calloc((size_t)(argc - optind), sizeof(*s.earlier));
  if (s.earlier == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  for (int i = optind; i < argc && !cli_interrupted() && !s.stopped; i++) {
    kpack_archive_t archive;
    s.path = argv[i];
    cli_progress_show(&s.progress, false, "kpack: extract: %zu kernels, %s",
                      s.written, argv[i]);
    if (cli_walk_archive(argv[i], extract_kernel, &s, &archive) != CLI_WALKED)
      s.status = CLI_FAIL;
    if (archive != NULL) /* what it provides shadows later archives */
      s.earlier[s.earlier_count++] = archive;
  }
  cli_progress_end(&s.progress);
  /* -b names nothing: say what it likely meant, from every archive. */
  if (s.only_binary != NULL && s.written == 0 && s.status == CLI_OK &&
      !cli_interrupted() && s.earlier_count > 0) {
    char* hint = cli_kernel_hint(s.earlier, s.earlier_count, s.only_binary);
    cli_error("%s: no kernel of %s%s%s%s%s", argv[optind], s.only_binary,
              s.only_arch != NULL ? " for " : "",
              s.only_arch != NULL ? s.only_arch : "", hint != NULL ? "; " : "",
              hint != NULL ? hint : "");
    free(hint);
    s.status = CLI_FAIL;
  }
  for (size_t i = 0; i < s.earlier_count; i++)
    kpack_close(s.earlier[i]);
  free(s.earlier);
  if (cli_interrupted()) {
    cli_error("extract: interrupted after %zu kernels", s.written);
    return CLI_INTERRUPTED;
  }
  if (s.stopped)
    cli_error(
        "extract: stopped; %s holds the %zu kernel%s written before, "
        "each whole",
        s.dir, s.written, s.written == 1 ? "" : "s");
  return s.status;
}
