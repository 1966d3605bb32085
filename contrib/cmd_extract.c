/* SPDX-License-Identifier: MIT
 *
 * `kpack extract`: writes archives out as the tree kpackfs shows,
 * DIR/<binary>/<arch>/kernel.<type> and the files beside it, byte for byte
 * what a mount serves, which `kpack create` packs again.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
    "    a leading '/', a '/' inside an arch) is skipped with a message, and\n"
    "    so is a kernel whose path would run through a file of another\n"
    "    (lib/x#0/gfx906/kernels/y#0 beside lib/x#0's gfx906 kernel): kpackfs\n"
    "    settles such names by the same rule, so the trees stay one.\n"
    "\n"
    "    Each file is written whole under a temporary name beside its place\n"
    "    (.kpack-extract.NAME.tmp), then renamed there, the file it replaces\n"
    "    kept as .kpack-extract.NAME.old until the run is complete. A file\n"
    "    or directory that cannot be written (a full disk, a read-only\n"
    "    filesystem) stops the run at once, as does an interrupt: one\n"
    "    message names the file with the system's reason, and DIR is put\n"
    "    back as it was: every file the run replaced or removed is put\n"
    "    back, every file and directory it made is removed, and the\n"
    "    directories that were there get their times back. A kernel that\n"
    "    cannot be read is reported and the run goes on. Each change is\n"
    "    written down first in DIR/.kpack-extract.journal: when a run is\n"
    "    killed, the next extract into DIR takes it back before it writes\n"
    "    anything, and says so.\n"
    "\n"
    "OPTIONS\n"
    "    -C, --directory DIR  extract into DIR (default: the current directory)\n"
    "    -b, --binary BINARY  only this binary (as listed, with #N); when it\n"
    "                         names no kernel, the status is 1 and the message\n"
    "                         says what was likely meant (the #0, the arches)\n"
    "    -a, --arch ARCH      only this architecture, exactly as listed (e.g.\n"
    "                         gfx90a:xnack-); ARCH is a GPU target or an arch\n"
    "                         an archive has. When -a or -b keeps no kernel,\n"
    "                         the status is 1, the message names the arches\n"
    "                         there, and nothing is written\n"
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
    "    kernel could not be read or was skipped for its name (the run goes\n"
    "    on), a file could not be written (the run stops, DIR as it was), or\n"
    "    -a or -b keeps no kernel; 2 bad command line (an -a that is no GPU\n"
    "    target); 130 interrupted (DIR as it was).\n";
// clang-format on

static int extract_run(int argc, char** argv);

const cli_command cli_extract_command = {
    "extract", "write archives out as the tree kpackfs shows", extract_manual,
    extract_run};

/* What the run changed in DIR, so that a run that stops (a write failed,
 * an interrupt) can leave DIR as it was: each file put in place with what
 * it replaced kept beside it, each directory made, and the times of each
 * directory that was there before the run changed what it holds. */
typedef struct extract_change {
  char* path;
  char* kept; /* the earlier file, under CLI_EXTRACT_PREFIX NAME ".old"; NULL:
               * there was none */
} extract_change;

typedef struct extract_dir_times {
  char* path;
  struct timespec times[2];
} extract_dir_times;

struct extract_undo {
  extract_change* changes;
  size_t change_count, change_cap;
  char** made; /* directories, in the order made */
  size_t made_count, made_cap;
  extract_dir_times* dirs;
  size_t dir_count, dir_cap;
};

/* Each change written down before it is made (see "The journal"). */
struct extract_journal {
  char* path; /* DIR/.kpack-extract.journal; NULL: none open */
  int fd;
  uint8_t* map;
  size_t used, cap;
  /* DIR's times before the journal went in, and whether the run changed
   * what DIR itself holds (else they are put back at the end). */
  struct timespec dir_times[2];
  bool dir_changed;
};

typedef struct extract_state {
  const char* dir;
  const char* only_binary;
  const char* only_arch;
  bool verbose;
  bool bytes_only;  /* no kernels and metadata.json beside code objects */
  bool demangle;    /* names in `kernels` as c++filt shows them */
  const char* path; /* archive being extracted */
  kpack_archive_t* earlier; /* archives named before it (NULL: unopened) */
  size_t earlier_count;
  size_t archive_count;          /* every ARCHIVE operand, in `earlier` */
  char* const* archive_paths;    /* their paths */
  struct extract_clash* clashes; /* kernels kpack_layout_file_stays() cut */
  size_t clash_count, clash_cap;
  size_t written;
  cli_progress progress; /* on a terminal, without -v */
  int status;
  /* A write failed: the disk is full, read-only..., and so would every
   * later write be; the run stops rather than repeat the message. */
  bool stopped;
  struct extract_undo undo;
  struct extract_journal journal;
  bool dir_is_new; /* the last make_dirs() made the directory itself */
  /* Test hooks: KPACK_EXTRACT_FAIL_AFTER=N makes the N-th write of the
   * run (a directory made, a file written, a file put in place) fail with
   * EIO, so that a test can fail each in turn; KPACK_EXTRACT_KILL_AFTER=N
   * kills the run with SIGKILL at the N-th write or, past the last, at
   * the N-th step of its end (each kept file removed, then the journal);
   * KPACK_EXTRACT_STOP_AFTER=N stops it there (SIGSTOP) instead;
   * KPACK_EXTRACT_NAMED_JOURNAL=1 fails the link of the unnamed journal,
   * so that it is made by name (journal_open()). */
  long fail_after, kill_after, stop_after;
  bool named_journal;
  unsigned long writes;
} extract_state;

/* Whether -b and -a keep kernel (binary, arch). */
static bool wanted(const extract_state* s, const char* binary,
                   const char* arch) {
  return (s->only_binary == NULL || strcmp(binary, s->only_binary) == 0) &&
         (s->only_arch == NULL || strcmp(arch, s->only_arch) == 0);
}

/* ---- a file and a directory on one path ---------------------------------
 *
 * A hostile TOC can name a binary whose path runs through a file of
 * another kernel, or give a binary an arch named like such a file. The
 * mount settles each such name by kpack_layout_file_stays() and so does
 * extract, over its ARCHIVE operands in order, before writing anything:
 * the same kernels and files are left out, with the mount's reasons. */

/* A kernel the rule cut: left out, or some of its files left out. */
typedef struct extract_clash {
  size_t source; /* its archive's place among the operands */
  char* binary;
  char* arch;
  bool skipped;
  unsigned omitted; /* 1 << kpack_layout_file_t, for each file left out */
} extract_clash;

static extract_clash* find_clash(const extract_state* s, size_t source,
                                 const char* binary, const char* arch) {
  for (size_t i = 0; i < s->clash_count; i++)
    if (s->clashes[i].source == source &&
        strcmp(s->clashes[i].binary, binary) == 0 &&
        strcmp(s->clashes[i].arch, arch) == 0)
      return &s->clashes[i];
  return NULL;
}

/* The record of a kernel, made when it has none; NULL when out of
 * memory. */
static extract_clash* add_clash(extract_state* s, size_t source,
                                const char* binary, const char* arch) {
  extract_clash* c = find_clash(s, source, binary, arch);
  if (c != NULL)
    return c;
  extract_clash* grown =
      cli_grow(s->clashes, s->clash_count, &s->clash_cap, sizeof(*grown), 4);
  if (grown == NULL)
    return NULL;
  s->clashes = grown;
  c = &s->clashes[s->clash_count];
  *c = (extract_clash){
      .source = source, .binary = strdup(binary), .arch = strdup(arch)};
  if (c->binary == NULL || c->arch == NULL) {
    free(c->binary);
    free(c->arch);
    return NULL;
  }
  s->clash_count++;
  return c;
}

/* Whether archive `source`'s kernel (binary, arch) of `type` is in the
 * tree: its names can be paths and the rule did not cut it. */
static bool kernel_shown(const extract_state* s, size_t source,
                         const char* binary, const char* arch,
                         const char* type) {
  const extract_clash* c = find_clash(s, source, binary, arch);
  return kpack_layout_entry_problem(binary, arch, type) == NULL &&
         (c == NULL || !c->skipped);
}

/* The first archive whose kernel (binary, arch) is shown, with its type
 * and whether it has a metadata map; false when none is. */
static bool first_shown(const extract_state* s, const char* binary,
                        const char* arch, size_t* source,
                        kpack_kernel_info_t* info, bool* has_map) {
  for (size_t i = 0; i < s->archive_count; i++) {
    const void* map = NULL;
    size_t map_size = 0;
    if (s->earlier[i] == NULL ||
        kpack_get_kernel_info(s->earlier[i], binary, arch, info) !=
            KPACK_SUCCESS ||
        !kernel_shown(s, i, binary, arch, info->type))
      continue;
    kpack_get_entry_metadata(s->earlier[i], binary, arch, &map, &map_size);
    *source = i;
    *has_map = map != NULL;
    return true;
  }
  return false;
}

/* The first archive with a kernel of `binary` shown, or false. */
static bool first_with_binary(const extract_state* s, const char* binary,
                              size_t* source) {
  for (size_t i = 0; i < s->archive_count; i++) {
    size_t count = 0;
    if (s->earlier[i] == NULL ||
        kpack_get_binary_arch_count(s->earlier[i], binary, &count) !=
            KPACK_SUCCESS)
      continue;
    for (size_t k = 0; k < count; k++) {
      const char* arch;
      kpack_kernel_info_t info;
      if (kpack_get_binary_arch(s->earlier[i], binary, k, &arch) ==
              KPACK_SUCCESS &&
          kpack_get_kernel_info(s->earlier[i], binary, arch, &info) ==
              KPACK_SUCCESS &&
          kernel_shown(s, i, binary, arch, info.type)) {
        *source = i;
        return true;
      }
    }
  }
  return false;
}

/* Leaves out every shown kernel of `binary` (of `arch` only, when not
 * NULL), in every archive, saying so. False when out of memory. */
static bool skip_binary(extract_state* s, const char* binary,
                        const char* arch) {
  for (size_t i = 0; i < s->archive_count; i++) {
    size_t count = 0;
    if (s->earlier[i] == NULL ||
        kpack_get_binary_arch_count(s->earlier[i], binary, &count) !=
            KPACK_SUCCESS)
      continue;
    for (size_t k = 0; k < count; k++) {
      const char* a;
      kpack_kernel_info_t info;
      extract_clash* c;
      if (kpack_get_binary_arch(s->earlier[i], binary, k, &a) !=
              KPACK_SUCCESS ||
          (arch != NULL && strcmp(a, arch) != 0) ||
          kpack_get_kernel_info(s->earlier[i], binary, a, &info) !=
              KPACK_SUCCESS ||
          !kernel_shown(s, i, binary, a, info.type))
        continue;
      if ((c = add_clash(s, i, binary, a)) == NULL)
        return false;
      c->skipped = true;
      if (!wanted(s, binary, a))
        continue;
      cli_error(
          "%s: %s for %s: a file and a directory would share a path; "
          "skipped",
          s->archive_paths[i], binary, a);
      s->status = CLI_FAIL;
    }
  }
  return true;
}

/* File `file` of kernel (p, a) of archive `file_source` and the directory
 * that `binary` (its arch `arch`, when not NULL) needs, first given by
 * archive `dir_source`, share a path. Pass 0 leaves out the files that
 * lose, pass 1 the kernels that lose to the files that stay, as the mount
 * does. False when out of memory. */
static bool settle(extract_state* s, int pass, size_t file_source,
                   const char* p, const char* a, int file, size_t dir_source,
                   const char* binary, const char* arch) {
  static const char* const names[] = {
      [KPACK_LAYOUT_FILE_KERNELS] = KPACK_LAYOUT_KERNELS_FILE,
      [KPACK_LAYOUT_FILE_METADATA] = KPACK_LAYOUT_METADATA_FILE,
      [KPACK_LAYOUT_FILE_TOC_METADATA] = KPACK_LAYOUT_TOC_METADATA_FILE};
  if (kpack_layout_file_stays(file_source, dir_source))
    return pass != 1 || skip_binary(s, binary, arch);
  if (pass != 0)
    return true;
  extract_clash* c = add_clash(s, file_source, p, a);
  if (c == NULL)
    return false;
  if (c->omitted & (1u << file))
    return true;
  c->omitted |= 1u << file;
  if (!wanted(s, p, a)) {
    c->skipped = c->skipped || file == KPACK_LAYOUT_FILE_KERNEL;
  } else if (file == KPACK_LAYOUT_FILE_KERNEL) {
    c->skipped = true;
    cli_error(
        "%s: %s for %s: a file and a directory would share a path; "
        "skipped",
        s->archive_paths[file_source], p, a);
    s->status = CLI_FAIL;
  } else {
    cli_error("warning: %s: %s for %s: no '%s' file, the name is taken",
              s->archive_paths[file_source], p, a, names[file]);
  }
  return true;
}

/* Compares a binary name with the key name[0, len) of known_binary(). */
typedef struct name_key {
  const char* name;
  size_t len;
} name_key;

static int compare_key(const void* key, const void* item) {
  const name_key* k = key;
  const char* name = *(const char* const*)item;
  int c = strncmp(k->name, name, k->len);
  return c != 0 ? c : name[k->len] == '\0' ? 0 : -1;
}

/* Settles, for `pass`, every path through binary B's directory that meets
 * one of archive `source`'s binaries: the archives' binary names are
 * `binaries` (sorted, distinct), so that only a path with a binary's name
 * before one of its '/' is looked at. False when out of memory. */
static bool settle_archive(extract_state* s, int pass, size_t source,
                           const char* const* binaries, size_t binary_count) {
  kpack_archive_t archive = s->earlier[source];
  size_t count = 0;
  bool ok = true;
  kpack_get_binary_count(archive, &count);
  for (size_t b = 0; ok && b < count; b++) {
    const char* binary;
    if (kpack_get_binary(archive, b, &binary) != KPACK_SUCCESS ||
        kpack_layout_binary_problem(binary) != NULL)
      continue;
    for (const char* slash = strchr(binary, '/'); ok && slash != NULL;
         slash = strchr(slash + 1, '/')) {
      name_key key = {binary, (size_t)(slash - binary)};
      if (bsearch(&key, binaries, binary_count, sizeof(*binaries),
                  compare_key) == NULL)
        continue;
      const char* rest = slash + 1;
      size_t arch_len = strcspn(rest, "/");
      char* p = strndup(binary, key.len);
      char* a = strndup(rest, arch_len);
      size_t file_source, dir_source;
      kpack_kernel_info_t info;
      bool map;
      if (p == NULL || a == NULL) {
        ok = false;
      } else if (!first_shown(s, p, a, &file_source, &info, &map)) {
        /* no kernel of p for a: directories merge */
      } else if (rest[arch_len] == '/') {
        /* The path runs on through one of the files of p's arch a. */
        const char* f = rest + arch_len + 1;
        int file = kpack_layout_file_named(info.type, map, f, strcspn(f, "/"));
        const extract_clash* c = find_clash(s, file_source, p, a);
        if (file >= 0 && !(c != NULL && (c->omitted >> file) & 1) &&
            first_with_binary(s, binary, &dir_source))
          ok = settle(s, pass, file_source, p, a, file, dir_source, binary,
                      NULL);
      } else {
        /* This binary's directory is p's arch a: its arches meet a's
         * files. */
        size_t arches = 0;
        kpack_get_binary_arch_count(archive, binary, &arches);
        for (size_t k = 0; ok && k < arches; k++) {
          const char* x;
          kpack_kernel_info_t xinfo;
          bool xmap;
          if (kpack_get_binary_arch(archive, binary, k, &x) != KPACK_SUCCESS)
            continue;
          int file = kpack_layout_file_named(info.type, map, x, strlen(x));
          const extract_clash* c = find_clash(s, file_source, p, a);
          if (file >= 0 && !(c != NULL && (c->omitted >> file) & 1) &&
              first_shown(s, binary, x, &dir_source, &xinfo, &xmap) &&
              dir_source == source)
            ok = settle(s, pass, file_source, p, a, file, source, binary, x);
        }
      }
      free(p);
      free(a);
    }
  }
  return ok;
}

/* Both passes over every archive. False when out of memory. */
static bool settle_paths(extract_state* s, const char* const* binaries,
                         size_t binary_count) {
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < s->archive_count; i++)
      if (s->earlier[i] != NULL &&
          !settle_archive(s, pass, i, binaries, binary_count))
        return false;
  return true;
}

/* Writes `path` (a temporary name: one a killed run left is written
 * over) whole; on failure removes what it began. */
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

/* ---- the journal ---------------------------------------------------------
 * A run that stops takes back its own changes (undo_all()); one that is
 * killed (SIGKILL, the OOM killer) cannot. So each change is written down
 * before it is made, in DIR/.kpack-extract.journal, and the next run into
 * DIR takes back what an earlier run's journal names before it writes
 * anything (journal_recover()). The file is mapped shared, its room
 * reserved (posix_fallocate(), so that a full disk is an error, not a
 * SIGBUS): a record is stores into the page cache, which outlive the
 * process, with no system call. Nothing is synced: a power cut is not
 * covered.
 *
 * After the magic, each record is a type byte, a path relative to DIR and
 * its NUL, and for JOURNAL_TIMES the directory's two times. The type byte
 * is stored last: a record cut short by a kill reads as the end. */
#define JOURNAL_NAME CLI_EXTRACT_PREFIX "journal"
#define JOURNAL_MAGIC "kpack extract journal 1\n"
#define JOURNAL_ROOM ((size_t)64 << 10) /* at first; doubled as needed */

enum {
  JOURNAL_DIR = 'D',   /* a directory made */
  JOURNAL_NEW = 'N',   /* a file put where there was none */
  JOURNAL_KEPT = 'K',  /* a file replaced or removed, kept as ".old" */
  JOURNAL_TIMES = 'T', /* a directory's times before the run changed it */
  JOURNAL_DONE = 'C',  /* the run is complete: its kept files go */
};

/* A test hook's step: KPACK_EXTRACT_KILL_AFTER kills the run at its N-th,
 * KPACK_EXTRACT_STOP_AFTER stops it there until it is sent SIGCONT. */
static void hook_step(extract_state* s) {
  if (++s->writes == (unsigned long)s->kill_after)
    kill(getpid(), SIGKILL);
  if (s->writes == (unsigned long)s->stop_after)
    kill(getpid(), SIGSTOP);
}

/* Whether the test hook fails this write (errno EIO). */
static bool write_fails(extract_state* s) {
  hook_step(s);
  if (s->fail_after <= 0 || s->writes != (unsigned long)s->fail_after)
    return false;
  errno = EIO;
  return true;
}

/* `path` (DIR followed by a path) relative to DIR, "." for DIR itself;
 * NULL when outside it (DIR and the directories above it that the run
 * made before the journal was there). */
static const char* journal_relative(const extract_state* s, const char* path) {
  size_t n = strlen(s->dir);
  while (n > 1 && s->dir[n - 1] == '/')
    n--;
  if (strncmp(path, s->dir, n) != 0 || (path[n] != '\0' && path[n] != '/'))
    return NULL;
  while (path[n] == '/')
    n++;
  return path[n] != '\0' ? path + n : ".";
}

/* Room for `need` bytes, reserved on the disk. False with errno set. */
static bool journal_grow(struct extract_journal* j, size_t need) {
  size_t cap = j->cap > 0 ? j->cap : JOURNAL_ROOM;
  while (cap < need)
    cap *= 2;
  int err = posix_fallocate(j->fd, 0, (off_t)cap);
  if (err != 0) {
    errno = err;
    return false;
  }
  void* map = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   j->fd, 0);
  if (map == MAP_FAILED)
    return false;
  if (j->map != NULL)
    munmap(j->map, j->cap);
  j->map = map;
  j->cap = cap;
  return true;
}

/* Writes down a change before it is made; `times` for JOURNAL_TIMES. A
 * path outside DIR is not written down. False with errno set (no room on
 * the disk). */
static bool journal_add(extract_state* s, int type, const char* path,
                        const struct timespec* times) {
  struct extract_journal* j = &s->journal;
  const char* rel = journal_relative(s, path);
  if (j->path == NULL || rel == NULL)
    return true;
  size_t len = strlen(rel) + 1, extra = times != NULL ? 2 * sizeof(*times) : 0;
  if (j->used + 1 + len + extra + 1 > j->cap &&
      !journal_grow(j, j->used + 1 + len + extra + 1))
    return false;
  memcpy(j->map + j->used + 1, rel, len);
  if (times != NULL)
    memcpy(j->map + j->used + 1 + len, times, extra);
  /* A kill, like a signal, sees this thread's stores in program order:
   * the type byte only after the rest. */
  atomic_signal_fence(memory_order_release);
  j->map[j->used] = (uint8_t)type;
  j->used += 1 + len + extra;
  return true;
}

/* Unmaps and closes the journal; with `remove`, deletes it. */
static void journal_close(extract_state* s, bool remove) {
  struct extract_journal* j = &s->journal;
  if (j->path == NULL)
    return;
  munmap(j->map, j->cap);
  close(j->fd);
  if (remove)
    unlink(j->path);
  free(j->path);
  j->path = NULL;
  j->map = NULL;
}

/* The message for a journal another run holds. */
static void journal_busy(const char* path, const char* dir) {
  cli_error(
      "%s: another kpack extract is writing into %s; wait for it to "
      "end",
      path, dir);
}

/* The message for a journal that cannot be made: EEXIST is another run's,
 * made since this one looked (journal_recover()). */
static void journal_refused(const char* path, const char* dir) {
  if (errno == EEXIST)
    journal_busy(path, dir);
  else
    cli_error("%s: cannot create: %s", path, strerror(errno));
}

/* Puts the journal, written in an unnamed file, under its name in DIR:
 * another run then never sees it unlocked or empty. False with errno set
 * (EEXIST: another run's journal got there first). */
static bool journal_link(const extract_state* s, int fd, const char* path) {
  if (s->named_journal) { /* the test hook: as without /proc, below */
    errno = ENOENT;
    return false;
  }
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0)
    return true;
  /* ENOENT: no /proc. Older kernels link a file by its descriptor alone
   * only for a process with CAP_DAC_READ_SEARCH. */
  if (errno != ENOENT)
    return false;
  return linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0;
}

/* One try at starting the journal (journal_open()): made unnamed, locked
 * and given its first record, then linked under its name, or, `named`,
 * made under its name and locked at once. 1 when it is in place, 0 after
 * a message, -1 when this system cannot give an unnamed file a name: the
 * filesystem makes none (EOPNOTSUPP; EISDIR from kernels before 3.11), or
 * linking it needs /proc or a capability the run lacks. */
static int journal_start(extract_state* s, bool named) {
  struct extract_journal* j = &s->journal;
  char* path;
  if (asprintf(&path, "%s/" JOURNAL_NAME, s->dir) < 0) {
    cli_error("out of memory");
    return 0;
  }
  if (named)
    j->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  else
    j->fd = open(s->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (j->fd < 0) {
    bool unsupported = !named && (errno == EOPNOTSUPP || errno == EISDIR);
    if (!unsupported)
      journal_refused(path, s->dir);
    free(path);
    return unsupported ? -1 : 0;
  }
  j->path = path;
  /* Held until the run ends or dies: another run does not take back a
   * journal still being written (journal_recover()). */
  (void)flock(j->fd, LOCK_EX);
  bool ok = journal_grow(j, JOURNAL_ROOM);
  if (ok) {
    memcpy(j->map, JOURNAL_MAGIC, sizeof(JOURNAL_MAGIC) - 1);
    j->used = sizeof(JOURNAL_MAGIC) - 1;
    ok = journal_add(s, JOURNAL_TIMES, s->dir, j->dir_times);
  }
  if (!ok) {
    cli_error("%s: cannot write: %s", path, strerror(errno));
  } else if (!named && !journal_link(s, j->fd, path)) {
    if (errno != EEXIST) {
      journal_close(s, false);
      return -1;
    }
    journal_refused(path, s->dir);
    ok = false;
  }
  if (!ok) {
    journal_close(s, named);
    utimensat(AT_FDCWD, s->dir, j->dir_times, 0);
    return 0;
  }
  return 1;
}

/* Starts this run's journal, its first record DIR's own times (the journal
 * going in changes them). The journal takes its name only once it is
 * locked and holds that record, so another run never finds it unlocked or
 * empty and takes it for a killed run's; where the system cannot do that
 * (journal_start() says -1), it is made by name and locked right after,
 * which leaves that moment open. False after a message. */
static bool journal_open(extract_state* s) {
  struct extract_journal* j = &s->journal;
  struct stat st;
  if (stat(s->dir, &st) != 0) {
    cli_error("%s: %s", s->dir, strerror(errno));
    return false;
  }
  j->dir_times[0] = st.st_atim;
  j->dir_times[1] = st.st_mtim;
  int started = journal_start(s, false);
  if (started < 0)
    started = journal_start(s, true);
  return started > 0;
}

/* Whether a journal's path stays inside DIR: relative, no "..". */
static bool journal_path_is_safe(const char* rel) {
  if (rel[0] == '/' || rel[0] == '\0')
    return false;
  for (const char* c = rel; *c != '\0';) {
    size_t n = strcspn(c, "/");
    if (n == 2 && c[0] == '.' && c[1] == '.')
      return false;
    c += n;
    c += *c == '/';
  }
  return true;
}

/* DIR/rel's temporary or kept name (`suffix` ".tmp" or ".old"). */
static char* journal_aside(const char* full, const char* suffix) {
  const char* base = strrchr(full, '/');
  char* aside = NULL;
  if (asprintf(&aside, "%.*s/" CLI_EXTRACT_PREFIX "%s%s", (int)(base - full),
               full, base + 1, suffix) < 0)
    return NULL;
  return aside;
}

typedef struct journal_record {
  int type;
  const char* rel;
  struct timespec times[2]; /* JOURNAL_TIMES; the file holds them unaligned */
} journal_record;

/* Takes back (or, after JOURNAL_DONE, completes) the run that wrote the
 * records, as undo_all() and undo_commit() would have. Returns how many
 * changes could not be taken back. */
static size_t journal_replay(const extract_state* s, const char* journal,
                             const journal_record* r, size_t count, bool done) {
  size_t left = 0;
  for (size_t pass = 0; pass < 3; pass++) {
    for (size_t i = count; i-- > 0;) {
      char* full = NULL;
      if (asprintf(&full, "%s/%s", s->dir, r[i].rel) < 0)
        return left + 1;
      if (pass == 0 &&
          (r[i].type == JOURNAL_NEW || r[i].type == JOURNAL_KEPT)) {
        char* kept = journal_aside(full, ".old");
        char* tmp = journal_aside(full, ".tmp");
        struct stat a, b;
        if (kept == NULL || tmp == NULL) {
          left++;
        } else if (r[i].type == JOURNAL_NEW) {
          if (!done && unlink(full) != 0 && errno != ENOENT)
            left++;
        } else if (lstat(kept, &a) == 0) {
          /* Kept by a second name while still in place, the two one file:
           * the second name goes. */
          bool same = lstat(full, &b) == 0 && a.st_dev == b.st_dev &&
                      a.st_ino == b.st_ino;
          if (done || same ? unlink(kept) != 0 : rename(kept, full) != 0)
            left++;
        }
        if (tmp != NULL)
          unlink(tmp);
        free(kept);
        free(tmp);
      } else if (pass == 1 && r[i].type == JOURNAL_DIR && !done) {
        rmdir(full); /* one that holds files of another's stays */
      } else if (pass == 2 && r[i].type == JOURNAL_TIMES && !done) {
        utimensat(AT_FDCWD, full, r[i].times, AT_SYMLINK_NOFOLLOW);
      }
      free(full);
    }
    /* Before the times: removing the journal changes DIR's. */
    if (pass == 1 && left == 0 && unlink(journal) != 0)
      left++;
    if (left > 0)
      break;
  }
  return left;
}

/* An earlier run's journal in DIR: that run was killed before it ended.
 * Its changes are taken back, newest first, or when it had ended, its kept
 * files removed. False after a message: the run writes nothing then, and
 * the journal stays for the next. */
static bool journal_recover(const extract_state* s) {
  char* path = NULL;
  if (asprintf(&path, "%s/" JOURNAL_NAME, s->dir) < 0) {
    cli_error("out of memory");
    return false;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    bool none = errno == ENOENT;
    if (!none)
      cli_error("%s: %s", path, strerror(errno));
    free(path);
    return none;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    journal_busy(path, s->dir);
    close(fd);
    free(path);
    return false;
  }
  struct stat st;
  uint8_t* bytes = NULL;
  size_t size = 0;
  bool ok = fstat(fd, &st) == 0 &&
            (size = (size_t)st.st_size, (bytes = malloc(size + 1)) != NULL);
  for (size_t got = 0; ok && got < size;) {
    ssize_t n = pread(fd, bytes + got, size - got, (off_t)got);
    ok = n > 0;
    got += ok ? (size_t)n : 0;
  }
  close(fd);
  if (!ok) {
    cli_error("%s: cannot read: %s", path, strerror(errno));
    free(bytes);
    free(path);
    return false;
  }
  bytes[size] = 0;
  /* The records, up to the first type byte not stored or cut short. */
  size_t magic = sizeof(JOURNAL_MAGIC) - 1, count = 0, at = magic;
  bool valid = size == 0 || bytes[0] == 0 ||
               (size >= magic && memcmp(bytes, JOURNAL_MAGIC, magic) == 0);
  bool done = false;
  journal_record* r = calloc(size / 2 + 1, sizeof(*r));
  while (valid && r != NULL && size > 0 && bytes[0] != 0 && at < size &&
         bytes[at] != 0) {
    const char* rel = (const char*)bytes + at + 1;
    size_t len = strnlen(rel, size - at - 1);
    size_t extra = bytes[at] == JOURNAL_TIMES ? 2 * sizeof(struct timespec) : 0;
    if (at + 1 + len + 1 + extra > size)
      break; /* cut short */
    r[count] = (journal_record){.type = bytes[at], .rel = rel};
    memcpy(r[count].times, rel + len + 1, extra);
    valid = strchr("DNKTC", bytes[at]) != NULL &&
            (bytes[at] == JOURNAL_DONE || journal_path_is_safe(rel) ||
             (bytes[at] == JOURNAL_TIMES && strcmp(rel, ".") == 0));
    done |= bytes[at] == JOURNAL_DONE;
    count++;
    at += 1 + len + 1 + extra;
  }
  size_t left = 0;
  if (r == NULL) {
    cli_error("out of memory");
  } else if (!valid) {
    cli_error("%s: not a journal kpack extract wrote; remove it to go on",
              path);
  } else if ((left = journal_replay(s, path, r, count, done)) != 0) {
    cli_error(
        "extract: %s: %zu change%s of a run that was killed could not "
        "be taken back; the journal stays",
        s->dir, left, left == 1 ? "" : "s");
  } else {
    cli_error(done ? "extract: %s: the run before, killed as it ended, was "
                     "completed"
                   : "extract: %s: the run before was killed; what it had "
                     "changed was taken back",
              s->dir);
  }
  bool recovered = r != NULL && valid && left == 0;
  free(r);
  free(bytes);
  free(path);
  return recovered;
}

/* Notes the times of directory `dir`, there before the run, before the
 * run first changes what it holds (the same directory twice in a row is
 * noted once; the first note of one noted twice is put back last). */
static bool note_dir_times(extract_state* s, const char* dir) {
  struct extract_undo* u = &s->undo;
  struct stat st;
  if (u->dir_count > 0 && strcmp(u->dirs[u->dir_count - 1].path, dir) == 0)
    return true;
  if (lstat(dir, &st) != 0)
    return true; /* nothing to put back */
  const char* rel = journal_relative(s, dir);
  if (rel != NULL && strcmp(rel, ".") == 0)
    s->journal.dir_changed = true;
  extract_dir_times* grown =
      cli_grow(u->dirs, u->dir_count, &u->dir_cap, sizeof(*grown), 64);
  char* path = strdup(dir);
  if (grown == NULL || path == NULL) {
    free(path);
    cli_error("out of memory");
    return false;
  }
  u->dirs = grown;
  u->dirs[u->dir_count] = (extract_dir_times){path, {st.st_atim, st.st_mtim}};
  if (!journal_add(s, JOURNAL_TIMES, dir, u->dirs[u->dir_count].times)) {
    cli_error("%s: cannot write: %s", s->journal.path, strerror(errno));
    free(path);
    return false;
  }
  u->dir_count++;
  return true;
}

/* mkdir -p `dir`, each directory made noted (and, before, the times of
 * the one above the first); s->dir_is_new says whether `dir` itself was
 * made, so that nothing in it is looked for. The deepest directory there is
 * found from the end: a kernel's directory usually is, or lies one or two
 * levels below one that is. False with errno set; out of memory said. */
static bool make_dirs(extract_state* s, const char* dir) {
  struct extract_undo* u = &s->undo;
  struct stat st;
  s->dir_is_new = false;
  if (stat(dir, &st) == 0) {
    errno = ENOTDIR;
    return S_ISDIR(st.st_mode);
  }
  char* copy = strdup(dir);
  if (copy == NULL) {
    cli_error("out of memory");
    errno = ENOMEM;
    return false;
  }
  /* Back up to the deepest directory that is there: copy[0, cut). */
  size_t cut = strlen(copy);
  bool found = false;
  while (!found && cut > 0) {
    size_t start = cut; /* of the last component */
    while (start > 0 && copy[start - 1] != '/')
      start--;
    if (start <= 1)
      break; /* "x" or "/x": nothing above to look at */
    cut = start - 1;
    copy[cut] = '\0';
    found = stat(copy, &st) == 0;
    if (found && !S_ISDIR(st.st_mode)) {
      free(copy);
      errno = ENOTDIR;
      return false;
    }
    bool ok = !found || note_dir_times(s, copy); /* the first made goes in */
    copy[cut] = '/';
    if (!ok) {
      free(copy);
      errno = ENOMEM;
      return false;
    }
  }
  /* Down again, making each directory below it. */
  bool ok = true;
  for (size_t i = found ? cut + 1 : 1; ok; i++) {
    char c = copy[i];
    if (c != '/' && c != '\0')
      continue;
    copy[i] = '\0';
    char** grown =
        cli_grow(u->made, u->made_count, &u->made_cap, sizeof(*grown), 64);
    if (grown != NULL)
      u->made = grown;
    char* made = grown != NULL ? strdup(copy) : NULL;
    if (made == NULL) {
      cli_error("out of memory");
      errno = ENOMEM;
      ok = false;
    } else if (!journal_add(s, JOURNAL_DIR, copy, NULL)) {
      int saved = errno;
      free(made);
      errno = saved;
      ok = false;
    } else if (!write_fails(s) && mkdir(copy, 0755) == 0) {
      u->made[u->made_count++] = made;
      s->dir_is_new = c == '\0';
    } else {
      int saved = errno;
      free(made);
      errno = saved;
      ok = errno == EEXIST; /* made meanwhile */
    }
    copy[i] = c;
    if (c == '\0')
      break;
  }
  free(copy);
  return ok;
}

/* Puts the new file `tmp` (NULL: nothing) in place of dir/name, what was
 * there (`there`: a file) kept as dir/CLI_EXTRACT_PREFIX name ".old" until the
 * run ends; noted in the run's changes. False with errno set. */
static bool swap_in(extract_state* s, const char* dir, const char* name,
                    const char* path, const char* tmp, bool there) {
  struct extract_undo* u = &s->undo;
  char* kept = NULL;
  bool linked = false;
  char* noted = strdup(path);
  extract_change* grown = cli_grow(u->changes, u->change_count, &u->change_cap,
                                   sizeof(*grown), 256);
  if (grown != NULL)
    u->changes = grown;
  if (grown == NULL || noted == NULL) {
    free(noted);
    errno = ENOMEM;
    return false;
  }
  if (there) {
    if (asprintf(&kept, "%s/" CLI_EXTRACT_PREFIX "%s.old", dir, name) < 0) {
      free(noted);
      errno = ENOMEM;
      return false;
    }
    unlink(kept); /* a killed run's */
    /* A second name keeps the file in place until the rename replaces it
     * (where links are refused, the file is moved aside). */
    if (write_fails(s)) {
      free(kept);
      free(noted);
      return false;
    }
    linked = tmp != NULL && link(path, kept) == 0;
    if (!linked && rename(path, kept) != 0) {
      free(kept);
      free(noted);
      return false;
    }
  } else if (tmp == NULL) {
    free(noted);
    return true; /* nothing to remove */
  }
  if (tmp != NULL && (write_fails(s) || rename(tmp, path) != 0)) {
    int saved = errno;
    /* Back as it was: the second name dropped (a rename of one link over
     * another of the same file does nothing), or the file moved back. */
    if (kept != NULL)
      linked ? unlink(kept) : rename(kept, path);
    free(kept);
    free(noted);
    errno = saved;
    return false;
  }
  u->changes[u->change_count++] = (extract_change){noted, kept};
  return true;
}

/* Writes dir/name, or with `data` NULL removes a dir/name an earlier
 * extraction left, so that nothing beside a kernel describes other bytes:
 * the new file is written whole under a temporary name, then renamed into
 * place, what was there kept until the run ends. False after a message;
 * the run then stops. */
static bool put_file(extract_state* s, const char* dir, const char* name,
                     const void* data, size_t size) {
  char *path = NULL, *tmp = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0 ||
      asprintf(&tmp, "%s/" CLI_EXTRACT_PREFIX "%s.tmp", dir, name) < 0) {
    free(path);
    cli_error("out of memory");
    s->stopped = true;
    return false;
  }
  struct stat st;
  bool ok = s->dir_is_new || note_dir_times(s, dir);
  bool there =
      ok && !s->dir_is_new && lstat(path, &st) == 0 && !S_ISDIR(st.st_mode);
  if (ok && data == NULL && !there) {
    /* nothing to remove */
  } else if (ok &&
             !journal_add(s, there ? JOURNAL_KEPT : JOURNAL_NEW, path, NULL)) {
    cli_output_error(path, KPACK_ERROR_IO_ERROR, errno);
    ok = false;
  } else if (ok && data != NULL &&
             (write_fails(s) || !write_whole(tmp, data, size))) {
    cli_output_error(path, KPACK_ERROR_IO_ERROR, errno);
    ok = false;
  } else if (ok &&
             !swap_in(s, dir, name, path, data != NULL ? tmp : NULL, there)) {
    if (data != NULL) {
      int saved = errno;
      unlink(tmp);
      errno = saved;
      cli_output_error(path, KPACK_ERROR_IO_ERROR, errno);
    } else {
      cli_error("%s: cannot remove: %s", path, strerror(errno));
    }
    ok = false;
  } else if (ok && data != NULL && s->verbose) {
    printf("%s\n", path);
  }
  if (!ok)
    s->stopped = true;
  free(path);
  free(tmp);
  return ok;
}

/* The run is complete: the journal says so, the kept earlier files go,
 * then the journal. DIR gets its times back when only the journal changed
 * what it holds. */
static void undo_commit(extract_state* s) {
  if (!journal_add(s, JOURNAL_DONE, s->dir, NULL)) {
    /* No room for the record: the kept files stay, and the next run,
     * taking this one back, finds the tree as it was. */
    cli_error("%s: cannot write: %s", s->journal.path, strerror(errno));
    journal_close(s, false);
    return;
  }
  for (size_t i = 0; i < s->undo.change_count; i++)
    if (s->undo.changes[i].kept != NULL) {
      hook_step(s);
      unlink(s->undo.changes[i].kept);
    }
  hook_step(s);
  bool opened = s->journal.path != NULL;
  journal_close(s, true);
  if (opened && !s->journal.dir_changed)
    utimensat(AT_FDCWD, s->dir, s->journal.dir_times, 0);
}

/* The run stopped: every change is taken back, newest first (each file
 * put back or removed, each directory made removed, the times of those
 * that were there put back). Returns how many changes could not be. */
static size_t undo_all(extract_state* s) {
  struct extract_undo* u = &s->undo;
  size_t left = 0;
  for (size_t i = u->change_count; i-- > 0;) {
    const extract_change* c = &u->changes[i];
    if (c->kept != NULL ? rename(c->kept, c->path) != 0
                        : unlink(c->path) != 0 && errno != ENOENT)
      left++;
  }
  for (size_t i = u->made_count; i-- > 0;)
    if (rmdir(u->made[i]) != 0 && errno != ENOENT)
      left++;
  /* The journal goes once nothing is left for the next run to take back,
   * before the times: removing it changes DIR's. */
  bool opened = s->journal.path != NULL;
  journal_close(s, left == 0);
  for (size_t i = u->dir_count; i-- > 0;)
    utimensat(AT_FDCWD, u->dirs[i].path, u->dirs[i].times, AT_SYMLINK_NOFOLLOW);
  if (opened && left == 0)
    utimensat(AT_FDCWD, s->dir, s->journal.dir_times, 0);
  return left;
}

static void undo_free(struct extract_undo* u) {
  for (size_t i = 0; i < u->change_count; i++) {
    free(u->changes[i].path);
    free(u->changes[i].kept);
  }
  for (size_t i = 0; i < u->made_count; i++)
    free(u->made[i]);
  for (size_t i = 0; i < u->dir_count; i++)
    free(u->dirs[i].path);
  free(u->changes);
  free(u->made);
  free(u->dirs);
}

/* The files beside the kernel: the TOC entry's metadata map, byte for byte,
 * and for a code object the `kernels` and `metadata.json` a mount shows,
 * from the same renderer, so the two trees are one. Bytes that are not a
 * code object render as empty files there too. */
static bool write_beside(extract_state* s, kpack_archive_t archive,
                         const char* binary, const char* arch, const char* type,
                         const char* dir, const void* data, size_t size,
                         unsigned omitted) {
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
  /* A file the rule left out has a directory in its place: left alone. */
  bool ok = ((omitted >> KPACK_LAYOUT_FILE_TOC_METADATA) & 1 ||
             put_file(s, dir, KPACK_LAYOUT_TOC_METADATA_FILE, map, map_size)) &&
            ((omitted >> KPACK_LAYOUT_FILE_KERNELS) & 1 ||
             put_file(s, dir, KPACK_LAYOUT_KERNELS_FILE,
                      demangled != NULL ? demangled : r.kernels,
                      demangled != NULL ? demangled_size : r.kernels_size)) &&
            ((omitted >> KPACK_LAYOUT_FILE_METADATA) & 1 ||
             put_file(s, dir, KPACK_LAYOUT_METADATA_FILE, r.metadata_json,
                      r.metadata_json_size));
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
  if (!wanted(s, binary, arch))
    return true;
  size_t source = s->earlier_count; /* this archive's place */
  const extract_clash* clash = find_clash(s, source, binary, arch);
  if (clash != NULL && clash->skipped)
    return true; /* a file and a directory: reported */
  for (size_t i = 0; i < source; i++)
    if (s->earlier[i] != NULL && /* NULL: it did not open */
        kpack_get_kernel_info(s->earlier[i], binary, arch, &other) ==
            KPACK_SUCCESS &&
        (kpack_layout_entry_problem(binary, arch, other.type) != NULL ||
         kernel_shown(s, i, binary, arch, other.type)))
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
  } else if (!make_dirs(s, dir)) {
    if (errno != ENOMEM)
      cli_error("%s: cannot create: %s", dir, strerror(errno));
    s->status = CLI_FAIL;
    s->stopped = true;
  } else if (!put_file(s, dir, name, data != NULL ? data : "", size) ||
             !write_beside(s, archive, binary, arch, info->type, dir, data,
                           size, clash != NULL ? clash->omitted : 0u)) {
    s->status = CLI_FAIL; /* the run stops and takes back what it wrote */
    s->stopped = true;
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

  const char* fail_after = getenv("KPACK_EXTRACT_FAIL_AFTER");
  const char* kill_after = getenv("KPACK_EXTRACT_KILL_AFTER");
  const char* stop_after = getenv("KPACK_EXTRACT_STOP_AFTER");
  if (fail_after != NULL)
    s.fail_after = strtol(fail_after, NULL, 10);
  if (kill_after != NULL)
    s.kill_after = strtol(kill_after, NULL, 10);
  if (stop_after != NULL)
    s.stop_after = strtol(stop_after, NULL, 10);
  const char* named_journal = getenv("KPACK_EXTRACT_NAMED_JOURNAL");
  s.named_journal = named_journal != NULL && strcmp(named_journal, "1") == 0;
  if (!cli_expand_archives(argc, argv, optind, &argc, &argv))
    return CLI_FAIL; /* a directory stands for the archives in it */
  int status = extract_archives(s, argc, argv);
  cli_operands_free(argc, argv);
  return status;
}

/* What the archives hold, read from their TOCs before anything is written:
 * how many kernels -b and -a keep, and every arch (strings owned by the
 * archives), so that a filter that keeps nothing is an error naming what
 * there is, with no directory made. */
typedef struct extract_scan {
  const extract_state* s;
  size_t kept;
  const char** arches;
  size_t arch_count, arch_cap;
  const char** binaries; /* sorted and made distinct after the scan */
  size_t binary_count, binary_cap;
  bool failed; /* out of memory */
} extract_scan;

static bool scan_kernel(kpack_archive_t archive, const char* binary,
                        const char* arch, const kpack_kernel_info_t* info,
                        void* user) {
  extract_scan* scan = user;
  (void)archive;
  (void)info;
  if (wanted(scan->s, binary, arch))
    scan->kept++;
  /* A binary's kernels come one after another, its name by one pointer. */
  if (scan->binary_count == 0 ||
      scan->binaries[scan->binary_count - 1] != binary) {
    const char** grown = cli_grow(scan->binaries, scan->binary_count,
                                  &scan->binary_cap, sizeof(*grown), 64);
    if (grown == NULL) {
      scan->failed = true;
      return false;
    }
    scan->binaries = grown;
    scan->binaries[scan->binary_count++] = binary;
  }
  for (size_t i = 0; i < scan->arch_count; i++)
    if (strcmp(scan->arches[i], arch) == 0)
      return true;
  const char** grown = cli_grow(scan->arches, scan->arch_count, &scan->arch_cap,
                                sizeof(*grown), 16);
  if (grown == NULL) {
    scan->failed = true;
    return false;
  }
  scan->arches = grown;
  scan->arches[scan->arch_count++] = arch;
  return true;
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* -b or -a keeps no kernel of the archives (all opened): the message, and
 * the status. An -a that is neither a GPU target nor an arch of an archive
 * is a bad command line, in the words of every command's --arch. */
static int report_nothing_kept(const extract_state* s, extract_scan* scan,
                               const char* first) {
  bool known = false;
  for (size_t i = 0; s->only_arch != NULL && i < scan->arch_count; i++)
    known = known || strcmp(scan->arches[i], s->only_arch) == 0;
  if (s->only_arch != NULL && !known &&
      !cli_check_target(&cli_extract_command, "-a", s->only_arch))
    return CLI_USAGE;
  if (s->only_binary != NULL) {
    char* hint = cli_kernel_hint(s->earlier, s->earlier_count, s->only_binary);
    cli_error("%s: no kernel of %s%s%s%s%s", first, s->only_binary,
              s->only_arch != NULL ? " for " : "",
              s->only_arch != NULL ? s->only_arch : "",
              hint != NULL ? "; " : "", hint != NULL ? hint : "");
    free(hint);
    return CLI_FAIL;
  }
  qsort(scan->arches, scan->arch_count, sizeof(*scan->arches), compare_names);
  char* list = NULL;
  size_t size = 0;
  FILE* f = open_memstream(&list, &size);
  if (f == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  for (size_t i = 0; i < scan->arch_count; i++)
    fprintf(f, "%s%s", i ? ", " : "", scan->arches[i]);
  fclose(f);
  if (s->earlier_count == 1)
    cli_error("%s: no kernel for %s; its arches: %s", first, s->only_arch,
              scan->arch_count ? list : "none");
  else
    cli_error("no kernel for %s in the %zu archives; their arches: %s",
              s->only_arch, s->earlier_count, scan->arch_count ? list : "none");
  free(list);
  return CLI_FAIL;
}

/* The walk over the ARCHIVE operands (directories expanded), with the
 * options extract_run() parsed into `s`: every archive opened and its TOC
 * read first, then its kernels written, each archive's shadowing those of
 * the archives after it. */
static int extract_archives(extract_state s, int argc, char** argv) {
  extract_scan scan = {.s = &s};
  int status = CLI_OK;
  cli_catch_signals();
  s.progress.enabled = !s.verbose && isatty(STDERR_FILENO);
  s.earlier = calloc((size_t)(argc - optind), sizeof(*s.earlier));
  if (s.earlier == NULL) {
    cli_error("out of memory");
    return CLI_FAIL;
  }
  size_t opened = 0;
  for (int i = optind; i < argc; i++) {
    kpack_archive_t archive;
    if (cli_walk_archive(argv[i], scan_kernel, &scan, &archive) != CLI_WALKED)
      s.status = CLI_FAIL;
    if (scan.failed) {
      kpack_close(archive);
      cli_error("out of memory");
      status = CLI_FAIL;
      goto done;
    }
    s.earlier[i - optind] = archive; /* NULL when it did not open */
    opened += archive != NULL;
  }
  s.earlier_count = opened;
  if ((s.only_binary != NULL || s.only_arch != NULL) && scan.kept == 0 &&
      s.status == CLI_OK && opened > 0) {
    status = report_nothing_kept(&s, &scan, argv[optind]);
    goto done;
  }
  /* The names a file and a directory would share, settled as the mount
   * settles them. */
  s.archive_count = (size_t)(argc - optind);
  s.archive_paths = argv + optind;
  if (scan.binary_count > 1)
    qsort(scan.binaries, scan.binary_count, sizeof(*scan.binaries),
          compare_names);
  size_t distinct = 0;
  for (size_t i = 0; i < scan.binary_count; i++)
    if (distinct == 0 ||
        strcmp(scan.binaries[distinct - 1], scan.binaries[i]) != 0)
      scan.binaries[distinct++] = scan.binaries[i];
  if (!settle_paths(&s, scan.binaries, distinct)) {
    cli_error("out of memory");
    status = CLI_FAIL;
    goto done;
  }
  if (!make_dirs(&s, s.dir)) {
    if (errno != ENOMEM)
      cli_error("%s: %s", s.dir, strerror(errno));
    undo_all(&s);
    status = CLI_FAIL;
    goto done;
  }
  if (!journal_recover(&s)) {
    undo_all(&s);
    status = CLI_FAIL;
    goto done;
  }
  if (!journal_open(&s))
    s.stopped = true; /* said; the run writes nothing */
  for (int i = optind; i < argc && !cli_interrupted() && !s.stopped; i++) {
    kpack_archive_t archive = s.earlier[i - optind];
    if (archive == NULL)
      continue;
    s.path = argv[i];
    s.earlier_count = (size_t)(i - optind); /* those named before it */
    cli_progress_show(&s.progress, false, "kpack: extract: %zu kernels, %s",
                      s.written, argv[i]);
    (void)cli_for_each_kernel(archive, extract_kernel, &s); /* reported */
  }
  cli_progress_end(&s.progress);
  if (cli_interrupted() || s.stopped) {
    size_t left = undo_all(&s);
    const char* why = s.stopped ? "stopped" : "interrupted";
    if (left == 0)
      cli_error(
          "extract: %s; %s is as it was (the %zu kernel%s written "
          "taken back)",
          why, s.dir, s.written, s.written == 1 ? "" : "s");
    else
      cli_error("extract: %s; %zu change%s to %s could not be taken back", why,
                left, left == 1 ? "" : "s", s.dir);
    status = s.stopped ? CLI_FAIL : CLI_INTERRUPTED;
    goto done;
  }
  undo_commit(&s);
  status = s.status;
done:
  journal_close(&s, false); /* a run stopped with changes left: it stays */
  undo_free(&s.undo);
  for (int i = optind; i < argc; i++)
    kpack_close(s.earlier[i - optind]);
  free(s.earlier);
  free(scan.arches);
  free(scan.binaries);
  for (size_t i = 0; i < s.clash_count; i++) {
    free(s.clashes[i].binary);
    free(s.clashes[i].arch);
  }
  free(s.clashes);
  return status;
}
