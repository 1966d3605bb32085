/* SPDX-License-Identifier: MIT
 *
 * kpackfs: mounts kpack archives as one read-only tree. This file parses the
 * command line (including what mount(8) passes for an /etc/fstab entry),
 * opens every source before mounting so a bad one is refused up front, and
 * runs the FUSE session until unmount or SIGINT/SIGTERM.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"

/* The page cache keeps what was read across opens, and an open kernel is
 * pinned whatever the budget, so the cache only bridges a kernel's closes:
 * a tool that reads the ELF header, closes and comes back for the sections
 * (`kernels` and `metadata.json` are rendered from a prefix of the kernel,
 * outside the cache). That is the last kernel closed,
 * 1-2 MB in a real library; more only duplicates the page cache
 * (docs/design.md, "How reads work"). */
#define KFS_DEFAULT_CACHE (2ull << 20)
#define KFS_DEFAULT_RELEASE_AFTER_MS 1000u
/* Past this, a pin lingers for good in practice: a day. */
#define KFS_MAX_RELEASE_AFTER_MS (86400u * 1000u)

typedef struct kfs_config {
  char** positional; /* SOURCE... MOUNTPOINT */
  size_t positional_count, positional_cap;
  uint64_t cache_size;
  uid_t uid;
  gid_t gid;
  bool help;
  bool version;
  bool nonempty;             /* -o nonempty: a non-empty MOUNTPOINT is meant */
  bool open_requests;        /* -o open_requests: no zero-message opens */
  uint64_t release_after_ms; /* -o release_after=SECONDS */
  bool bad;
} kfs_config;

enum {
  KEY_HELP,
  KEY_VERSION,
  KEY_CACHE_SIZE,
  KEY_UID,
  KEY_GID,
  KEY_NONEMPTY,
  KEY_OPEN_REQUESTS,
  KEY_RELEASE_AFTER
};

static const struct fuse_opt kfs_opts[] = {
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_KEY("cache_size=%s", KEY_CACHE_SIZE),
    FUSE_OPT_KEY("uid=%s", KEY_UID),
    FUSE_OPT_KEY("gid=%s", KEY_GID),
    FUSE_OPT_KEY("nonempty", KEY_NONEMPTY),
    FUSE_OPT_KEY("open_requests", KEY_OPEN_REQUESTS),
    FUSE_OPT_KEY("release_after=%s", KEY_RELEASE_AFTER),
    /* mount(8) hands every fstab option to the helper. These mean nothing
     * to a FUSE mount, and "rw" would undo read-only, so they are dropped
     * (x-* options are dropped in kfs_opt_proc). */
    FUSE_OPT_KEY("rw", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("ro", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("owner", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("group", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("comment=", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_END,
};

/* The manual: --help prints it, and the build makes kpackfs(8) from it
 * (contrib/manpage.sh), so the two cannot drift apart. Sections and
 * layout follow the kpack tool's manuals; libfuse prints its own options. */
static void usage(void) {
  // clang-format off
  fputs(
      "NAME\n"
      "    kpackfs - mount kpack archives of GPU code objects as a read-only\n"
      "    file tree\n"
      "\n"
      "SYNOPSIS\n"
      "    kpackfs [-f] [-o OPTION[,OPTION]...] SOURCE... MOUNTPOINT\n"
      "    mount -t fuse.kpackfs SOURCE[:SOURCE]... MOUNTPOINT\n"
      "\n"
      "DESCRIPTION\n"
      "    Shows every kernel of the archives as a read-only file\n"
      "    MOUNTPOINT/<binary>/<arch>/kernel.<type> (kernel.hsaco for code\n"
      "    objects), decompressed on first read and kept in a bounded\n"
      "    cache. Beside each code object, `kernels` lists its GPU kernels\n"
      "    (one line each: name, registers, LDS, scratch...) and\n"
      "    `metadata.json` holds its metadata note (both are empty for bytes\n"
      "    that are not a code object); beside a kernel whose TOC entry has\n"
      "    a metadata map, `toc-metadata.msgpack` holds the map's MessagePack\n"
      "    bytes. `kpack extract` writes the same tree, and `kpack create`\n"
      "    packs a mounted or extracted tree back into an archive.\n"
      "    MOUNTPOINT/.kpackfs/stats counts kernels, reads and cache use;\n"
      "    MOUNTPOINT/.kpackfs/archives lists the archives. Extended\n"
      "    attributes user.kpack.* on each kernel name its archive, binary,\n"
      "    arch, sizes, compression and TOC metadata map (as JSON).\n"
      "\n"
      "    A SOURCE is a .kpack file or a directory searched recursively for\n"
      "    *.kpack; it may also be a ':'-separated list, as /etc/fstab needs\n"
      "    (empty items are skipped; a list of nothing but ':' is refused).\n"
      "    In a list, '\\:' is a ':' inside a name, as in ROCM_KPACK_PATH:\n"
      "    a.kpack:rand_gfx90a\\:xnack-.kpack names two archives; when an\n"
      "    item is missing but it and its neighbour joined by ':' name a\n"
      "    file, kpackfs says so.\n"
      "    When two sources hold the same binary and arch, the first wins.\n"
      "    Every source is opened before anything is mounted: a bad one stops\n"
      "    kpackfs with the file and the error. One file descriptor stays\n"
      "    open per archive; the soft RLIMIT_NOFILE is raised to the hard\n"
      "    limit at start.\n"
      "\n"
      "    MOUNTPOINT must be a directory, and not a mount point already:\n"
      "    kpackfs refuses a file (the MOUNTPOINT forgotten: kpackfs a.kpack\n"
      "    b.kpack) and a second mount at one place, as mount(8) does, before\n"
      "    opening any source; an autofs trigger (x-systemd.automount) is the\n"
      "    one mount it goes on top of. A directory that is not empty is\n"
      "    mounted over, as the kernel and fuse3 allow, with a warning: its\n"
      "    files are hidden until the unmount (-o nonempty says that is meant).\n"
      "\n"
      "    Unmount with fusermount3 -u MOUNTPOINT (or umount as root); SIGINT\n"
      "    and SIGTERM unmount cleanly too.\n"
      "\n"
      "OPTIONS\n"
      "    -o cache_size=SIZE     decompressed-kernel cache budget, with an\n"
      "                           optional K, M or G suffix (default 2M)\n"
      "    -o uid=N,gid=N         owner of every file, by number (default:\n"
      "                           the mounting user)\n"
      "    -o nonempty            mount over a directory that is not empty\n"
      "                           without a warning (fuse2's option)\n"
      "    -o open_requests       have the kernel ask kpackfs at every open\n"
      "                           and close, as kernels without zero-message\n"
      "                           opens do (by default files open and close\n"
      "                           in the kernel alone)\n"
      "    -o release_after=SECS  without open_requests, how long a file\n"
      "                           read in part keeps its kernel pinned after\n"
      "                           its last read (default 1; a file read to\n"
      "                           its end lets go at once)\n"
      "    -h, --help             print this manual\n"
      "    -V, --version          print the versions of kpackfs and libfuse\n"
      "\n"
      "    The options mount(8) passes from /etc/fstab (ro, rw, defaults,\n"
      "    noauto, user, nofail, _netdev, x-*...) are accepted; the mount is\n"
      "    read-only whatever they say.\n"
      "\n"
      "    One thread answers the requests. Renders, and decompressions while\n"
      "    another kernel is being read, go to a pool of one worker per CPU\n"
      "    (2 to 16); a kernel read alone is decompressed on the one thread.\n"
      "    -s answers every request on the one thread. libfuse's clone_fd,\n"
      "    max_idle_threads and max_threads are accepted and have no effect.\n"
      "\n"
      "FUSE OPTIONS\n",
      stdout);
  // clang-format on
  /* libfuse's own text, with the same layout. */
  fflush(stdout);
  fuse_cmdline_help();
  fuse_lowlevel_help();
  // clang-format off
  fputs(
      "\n"
      "EXAMPLES\n"
      "    kpackfs /opt/rocm/lib/.kpack /mnt/kernels\n"
      "    kpackfs -o cache_size=512M,allow_other a.kpack b.kpack /mnt/kernels\n"
      "    fusermount3 -u /mnt/kernels\n"
      "\n"
      "    An /etc/fstab line (several sources join with ':'):\n"
      "\n"
      "        /opt/rocm/lib/.kpack  /mnt/kernels  fuse.kpackfs  noauto,allow_other  0  0\n"
      "\n"
      "    mount.fuse3 starts kpackfs by name with the shell's default PATH\n"
      "    (/usr/local/bin and /usr/bin among others); one installed elsewhere\n"
      "    is named in the source, with the type fuse:\n"
      "\n"
      "        /opt/rocm-kpack/bin/kpackfs#/opt/rocm/lib/.kpack  /mnt/kernels  fuse  noauto  0  0\n"
      "\n"
      "EXIT STATUS\n"
      "    0 after a clean unmount (or for --help and --version); 1 when a\n"
      "    source cannot be opened, MOUNTPOINT is missing or a mount point\n"
      "    already, or the mount fails; 2 for a bad command line (an unknown\n"
      "    option, a bad value, no MOUNTPOINT or a file as MOUNTPOINT).\n"
      "\n"
      "SEE ALSO\n"
      "    kpack(1), fusermount3(1), mount.fuse3(8), fstab(5)\n",
      stdout);
  // clang-format on
}

/* SIZE with an optional K, M, G or T suffix (powers of 1024). */
static int parse_size(const char* text, uint64_t* out) {
  char* end;
  errno = 0;
  if (*text < '0' || *text > '9')
    return -1;
  unsigned long long v = strtoull(text, &end, 10);
  static const char units[] = "KMGT";
  const char* unit = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  unsigned shift = 0;
  if (errno != 0)
    return -1;
  if (unit != NULL) {
    shift = 10u * (unsigned)(unit - units + 1);
    end++;
  }
  if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
    return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

/* Seconds, whole or with up to three decimals ("1", "0.5", "2.25"), into
 * milliseconds: 0 or -1. */
static int parse_seconds(const char* text, uint64_t* ms) {
  uint64_t whole = 0, frac = 0, scale = 1000;
  const char* p = text;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++)
    if ((whole = whole * 10 + (uint64_t)(*p - '0')) > KFS_MAX_RELEASE_AFTER_MS)
      return -1;
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9' && scale > 1; p++)
      frac += (uint64_t)(*p - '0') * (scale /= 10);
  }
  if (*p != '\0' || whole * 1000 + frac > KFS_MAX_RELEASE_AFTER_MS)
    return -1;
  *ms = whole * 1000 + frac;
  return 0;
}

static int parse_id(const char* text, unsigned* out) {
  char* end;
  errno = 0;
  if (*text < '0' || *text > '9')
    return -1;
  unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || v >= (unsigned long)(unsigned)-1)
    return -1;
  *out = (unsigned)v;
  return 0;
}

static int kfs_opt_proc(void* data, const char* arg, int key,
                        struct fuse_args* outargs) {
  kfs_config* cfg = data;
  const char* value = strchr(arg, '=');
  unsigned id;
  (void)outargs;
  switch (key) {
    case FUSE_OPT_KEY_NONOPT: {
      char** grown = kfs_grow(cfg->positional, cfg->positional_count,
                              &cfg->positional_cap, sizeof(*grown), 4);
      if (grown == NULL)
        return -1;
      cfg->positional = grown;
      if ((grown[cfg->positional_count] = strdup(arg)) == NULL)
        return -1;
      cfg->positional_count++;
      return 0;
    }
    case FUSE_OPT_KEY_OPT:
      return strncmp(arg, "x-", 2) == 0 ? 0 : 1; /* systemd's x-* options */
    case KEY_HELP:
      cfg->help = true;
      return 0;
    case KEY_VERSION:
      cfg->version = true;
      return 0;
    case KEY_CACHE_SIZE:
      if (parse_size(value + 1, &cfg->cache_size) != 0) {
        fprintf(stderr, "kpackfs: bad cache_size '%s' (e.g. 512M, 2G)\n",
                value + 1);
        cfg->bad = true;
      }
      return 0;
    case KEY_NONEMPTY:
      cfg->nonempty = true;
      return 0;
    case KEY_OPEN_REQUESTS:
      cfg->open_requests = true;
      return 0;
    case KEY_RELEASE_AFTER:
      if (parse_seconds(value + 1, &cfg->release_after_ms) != 0) {
        fprintf(stderr,
                "kpackfs: bad release_after '%s' (seconds, e.g. 1 or 0.5)\n",
                value + 1);
        cfg->bad = true;
      }
      return 0;
    case KEY_UID:
    case KEY_GID:
      if (parse_id(value + 1, &id) != 0) {
        /* As for vfat or ntfs: a number, not a name to look up. */
        fprintf(stderr,
                "kpackfs: bad option '%s': a %s is a number (%s %s gives "
                "it)\n",
                arg, key == KEY_UID ? "uid" : "gid",
                key == KEY_UID ? "id -u" : "getent group", value + 1);
        cfg->bad = true;
      } else if (key == KEY_UID) {
        cfg->uid = (uid_t)id;
      } else {
        cfg->gid = (gid_t)id;
      }
      return 0;
    default:
      return 1;
  }
}

/* The mount source that mount(8), df and /proc/mounts show: the SOURCE
 * arguments joined with ':' while that stays short, else the first archive
 * and how many follow ("/x/blas_gfx90a.kpack:+89"); .kpackfs/archives lists
 * them all. The kernel refuses a mount source of a page (4 KiB) or more,
 * which some ninety archives named one by one already reach. */
#define KFS_FSNAME_MAX 255

static char* mount_source(char* const* sources, size_t count,
                          const kfs_paths* paths) {
  char* name = NULL;
  size_t len = 0;
  for (size_t i = 0; i < count; i++)
    len += strlen(sources[i]) + 1;
  if (len - 1 <= KFS_FSNAME_MAX) {
    if ((name = malloc(len)) == NULL)
      return NULL;
    name[0] = '\0';
    for (size_t i = 0; i < count; i++) {
      if (i > 0)
        strcat(name, ":");
      strcat(name, sources[i]);
    }
  } else if (paths->count == 0) {
    name = strdup("kpackfs"); /* nothing but ':' */
  } else if (asprintf(&name, "%s:+%zu", paths->items[0], paths->count - 1) <
             0) {
    return NULL;
  }
  return name;
}

/* "-o ro,default_permissions,fsname=...,subtype=kpackfs": read-only at the
 * VFS too, the kernel checks the 0444/0555 modes, and mount(8) shows where
 * the kernels come from. */
static int add_mount_options(struct fuse_args* args, char* const* sources,
                             size_t count, const kfs_paths* paths) {
  char* source = mount_source(sources, count, paths);
  char* fsname = NULL;
  char* opts = NULL;
  int rc = -1;
  if (source == NULL || asprintf(&fsname, "fsname=%s", source) < 0) {
    fsname = NULL;
    goto out;
  }
  if (fuse_opt_add_opt(&opts, "ro,default_permissions,subtype=kpackfs") != 0 ||
      fuse_opt_add_opt_escaped(&opts, fsname) != 0 ||
      fuse_opt_add_arg(args, "-o") != 0 || fuse_opt_add_arg(args, opts) != 0)
    goto out;
  rc = 0;
out:
  if (rc != 0)
    fprintf(stderr, "kpackfs: out of memory\n");
  free(source);
  free(fsname);
  free(opts);
  return rc;
}

/* ---- the mount point ----------------------------------------------------- */

/* The last (topmost) mount at `dir` (canonical) in /proc/self/mountinfo:
 * its type and source, malloc'ed into *type and *source; false when there
 * is none. */
static bool mounted_at(const char* dir, char** type, char** source) {
  FILE* f = fopen("/proc/self/mountinfo", "re");
  char* line = NULL;
  size_t cap = 0;
  bool found = false;
  *type = *source = NULL;
  if (f == NULL)
    return false;
  while (getline(&line, &cap, f) > 0) {
    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE
     * SUPER; the mount point with spaces and such written \ooo. */
    char point[PATH_MAX], fstype[256], from[PATH_MAX];
    const char* dash = strstr(line, " - ");
    if (dash == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
        sscanf(dash + 3, "%255s %4095s", fstype, from) != 2)
      continue;
    char* out = point;
    for (const char* in = point; *in; out++) {
      if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' &&
          in[2] <= '7' && in[3] >= '0' && in[3] <= '7') {
        *out = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
        in += 4;
      } else {
        *out = *in++;
      }
    }
    *out = '\0';
    if (strcmp(point, dir) != 0)
      continue;
    free(*type);
    free(*source);
    *type = strdup(fstype);
    *source = strdup(from);
    found = *type != NULL && *source != NULL;
  }
  free(line);
  fclose(f);
  return found;
}

/* Checks MOUNTPOINT before any source is opened: 0 to go on, else the
 * exit status after a message. It must be a directory (the forgotten
 * MOUNTPOINT of `kpackfs a.kpack b.kpack` would be mounted over a file)
 * that is not already a mount point: mount(8) refuses to mount twice at
 * one place, and a second kpackfs would hide the first. An autofs trigger
 * (x-systemd.automount) is the one mount kpackfs is meant to go on top
 * of; *autofs says it is one. */
static int check_mount_point(const char* dir, bool* autofs) {
  struct stat st;
  char *type = NULL, *source = NULL;
  int rc = 0;
  *autofs = false;
  if (stat(dir, &st) != 0) {
    if (errno == ENOTCONN)
      fprintf(stderr,
              "kpackfs: %s: a mount whose daemon is gone (%s): fusermount3 "
              "-u -z %s detaches it\n",
              dir, strerror(errno), dir);
    else
      fprintf(stderr, "kpackfs: %s: mount point: %s\n", dir, strerror(errno));
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr,
            "kpackfs: %s: the mount point is not a directory (MOUNTPOINT "
            "comes last: kpackfs SOURCE... MOUNTPOINT)\n",
            dir);
    return 2;
  }
  char* real = realpath(dir, NULL);
  if (real != NULL && mounted_at(real, &type, &source)) {
    *autofs = strcmp(type, "autofs") == 0;
    if (!*autofs) {
      fprintf(stderr,
              "kpackfs: %s: already a mount point (%s from %s): unmount it "
              "first (fusermount3 -u %s)\n",
              dir, type, source, dir);
      rc = 1;
    }
  }
  free(real);
  free(type);
  free(source);
  return rc;
}

/* A non-empty directory is mounted over, as the kernel and fuse3 allow,
 * with a warning unless -o nonempty says it is meant. Not asked of an
 * autofs trigger: listing it would wait for this very mount. */
static void warn_if_not_empty(const char* dir) {
  DIR* d = opendir(dir);
  size_t entries = 0;
  for (struct dirent* e; d != NULL && (e = readdir(d)) != NULL;)
    entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  if (d != NULL)
    closedir(d);
  if (entries > 0)
    fprintf(stderr,
            "kpackfs: warning: %s is not empty: its %zu entr%s hidden "
            "until it is unmounted (-o nonempty: this is meant)\n",
            dir, entries, entries == 1 ? "y stays" : "ies stay");
}

/* ---- libfuse's messages -------------------------------------------------- */

/* What libfuse logs while it parses its options, kept to be said in
 * kpackfs's words (it runs before any thread). */
static char* fuse_said;
static size_t fuse_said_len;

static void keep_fuse_log(enum fuse_log_level level, const char* fmt,
                          va_list ap) {
  char* text = NULL;
  (void)level;
  if (vasprintf(&text, fmt, ap) < 0)
    return;
  size_t n = strlen(text);
  char* grown = realloc(fuse_said, fuse_said_len + n + 1);
  if (grown != NULL) {
    memcpy(grown + fuse_said_len, text, n + 1);
    fuse_said = grown;
    fuse_said_len += n;
  }
  free(text);
}

/* Says what libfuse logged while refusing the command line: an option
 * neither kpackfs nor libfuse knows as one line of kpackfs's, anything
 * else as libfuse said it. */
static void report_fuse_refusal(void) {
  static const char unknown[] = "fuse: unknown option(s): `";
  const char* at = fuse_said != NULL ? strstr(fuse_said, unknown) : NULL;
  if (at != NULL) {
    const char* options = at + sizeof(unknown) - 1;
    int len = (int)strcspn(options, "'");
    fprintf(stderr,
            "kpackfs: unknown option '%.*s': kpackfs --help lists kpackfs's "
            "options and libfuse's (FUSE OPTIONS)\n",
            len, options);
  } else if (fuse_said != NULL) {
    fputs(fuse_said, stderr);
  }
}

/* kpackfs keeps one descriptor open per archive for the life of the mount,
 * and a library directory can hold more archives than the usual soft limit
 * of 1024: take what the hard limit allows, as a file server would. */
static void raise_fd_limit(void) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &lim); /* else open fails, and says so */
  }
}

/* ---- the request loop ---------------------------------------------------- */

/* How SIGTERM, SIGINT and SIGHUP end the request loop. They are blocked in
 * every thread and taken by one thread of their own with sigwait(), which
 * records the signal and then interrupts the loop's blocking read with
 * SIGUSR2 every KFS_WAKE_MS until the loop has ended. libfuse's loop relies
 * on the termination signal itself interrupting that read, and a signal
 * that lands between its check and the read is lost until the next request
 * (valgrind, which delivers signals at its own points, makes that common);
 * here the interruption is repeated, so it cannot be lost, and a request
 * still costs one read and one write. */
#define KFS_WAKE_MS 20

typedef struct kfs_stop {
  sigset_t ends;     /* SIGTERM, SIGINT, SIGHUP */
  pthread_t loop;    /* the thread reading requests */
  atomic_int signal; /* the termination signal taken; 0 while none */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  bool ended; /* under lock: the loop has returned */
} kfs_stop;

static void on_wake(int sig) {
  (void)sig; /* only for the EINTR it gives the loop's read() */
}

static void* take_signals(void* arg) {
  kfs_stop* s = arg;
  int sig = 0;
  while (sigwait(&s->ends, &sig) != 0)
    ;
  pthread_mutex_lock(&s->lock);
  if (!s->ended)
    atomic_store(&s->signal, sig);
  while (!s->ended) {
    pthread_kill(s->loop, SIGUSR2);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += KFS_WAKE_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->changed, &s->lock, &until);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* Reads and answers requests until the mount goes away or a termination
 * signal is taken: 0 when unmounted, the signal's number, or a negative
 * errno. */
static int serve(struct fuse_session* se, kfs_stop* s) {
  struct fuse_buf buf = {.mem = NULL};
  int res = 0;
  while (!fuse_session_exited(se) && atomic_load(&s->signal) == 0) {
    int n = fuse_session_receive_buf(se, &buf);
    if (n == -EINTR)
      continue;
    if (n <= 0) {
      res = n == -ENODEV ? 0 : n; /* -ENODEV: unmounted */
      break;
    }
    fuse_session_process_buf(se, &buf);
  }
  free(buf.mem);
  fuse_session_reset(se);
  int sig = atomic_load(&s->signal);
  return res == 0 && sig != 0 ? sig : res;
}

/* Pool workers: one per CPU, at least 2, at most 16. */
static size_t workers(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 2 ? 2 : cpus > 16 ? 16 : (size_t)cpus;
}

/* What serve_with_threads() returns when it could start no thread. */
#define KFS_NO_THREADS INT_MIN

/* Serves the mounted session from this thread, with a thread taking the
 * termination signals (kfs_stop) and, unless `pool` is NULL, the pool
 * taking the requests that wait. What serve() returns, or
 * KFS_NO_THREADS. */
static int serve_with_threads(kfs_fs* fs, kfs_pool* pool) {
  kfs_stop s = {.loop = pthread_self()};
  sigemptyset(&s.ends);
  sigaddset(&s.ends, SIGTERM);
  sigaddset(&s.ends, SIGINT);
  sigaddset(&s.ends, SIGHUP);
  pthread_mutex_init(&s.lock, NULL);
  pthread_cond_init(&s.changed, NULL);
  struct sigaction wake = {.sa_handler = on_wake}, old_wake;
  sigemptyset(&wake.sa_mask); /* no SA_RESTART: the read must return */
  sigaction(SIGUSR2, &wake, &old_wake);
  sigset_t old_mask, usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &s.ends, &old_mask);
  pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);

  pthread_t taker;
  int ret = KFS_NO_THREADS;
  if (kfs_start_worker(&taker, take_signals, &s) == 0) {
    if (pool != NULL && kfs_pool_start(pool, workers()) == 0)
      fs->pool = pool;
    ret = serve(fs->session, &s);
    if (fs->pool != NULL) {
      kfs_pool_stop(pool); /* runs what is queued: every request replied */
      fs->pool = NULL;
    }
    pthread_mutex_lock(&s.lock);
    s.ended = true;
    pthread_cond_signal(&s.changed);
    pthread_mutex_unlock(&s.lock);
    pthread_kill(taker, SIGTERM); /* out of sigwait(), if still there */
    pthread_join(taker, NULL);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  sigaction(SIGUSR2, &old_wake, NULL);
  pthread_cond_destroy(&s.changed);
  pthread_mutex_destroy(&s.lock);
  return ret;
}

/* Mounts the session (made before any source was opened, so that an
 * option libfuse does not know is a usage error found at once) and serves
 * it until unmounted. One thread reads and answers the requests; those
 * that wait go to the pool (ops.c), one worker per CPU. With -s every
 * request is answered where it is read. The threads start after the daemon
 * has forked: threads do not survive a fork. */
static int run_session(kfs_fs* fs, const struct fuse_cmdline_opts* opts) {
  struct fuse_session* se = fs->session;
  int rc = 1;
  if (fuse_set_signal_handlers(se) != 0)
    return 1;
  if (fuse_session_mount(se, opts->mountpoint) != 0)
    goto remove_handlers;
  fs->mounted_ns = kfs_clock_ns();
  fuse_daemonize(opts->foreground);
  kfs_pool pool;
  int ret = serve_with_threads(fs, opts->singlethread ? NULL : &pool);
  if (ret == KFS_NO_THREADS)
    ret = fuse_session_loop(se); /* no thread: libfuse's loop, then */
  /* A positive value is the signal that ended the loop: a clean exit. So
   * is ECONNABORTED: the kernel answers a read with it when the connection
   * went away between handing a request over and copying it out, which an
   * unmount (lazy or not) racing busy readers does. */
  rc = ret < 0 && ret != -ECONNABORTED ? 1 : 0;
  fuse_session_unmount(se);
remove_handlers:
  fuse_remove_signal_handlers(se);
  return rc;
}

/* Mounting many archives keeps every TOC and builds the tree from them:
 * tens of MB of small allocations that stay (20 MB for 420 archives of 600
 * kernels), each 4 KiB page of it faulted in on first touch, which on a
 * virtual machine can cost more than parsing what goes in it. With this
 * many sources or more, the heap is grown once by KFS_HUGE_HEAP and marked
 * MADV_HUGEPAGE before any archive is opened, and every thread allocates
 * from it (one arena), so that those faults take 2 MiB pages where the
 * kernel has transparent huge pages ("madvise" or "always"); elsewhere
 * nothing changes. The cost is resident memory rounded up to 2 MiB pages
 * (5-6 MB for those 420 archives); fewer sources keep the small pages. */
#define KFS_HUGE_HEAP_SOURCES 64
#define KFS_HUGE_HEAP ((size_t)64 << 20)
#define KFS_HUGE_PAGE ((uintptr_t)2 << 20)

static void prepare_heap(size_t sources) {
#ifdef __GLIBC__
  if (sources < KFS_HUGE_HEAP_SOURCES)
    return;
  mallopt(M_ARENA_MAX, 1);
  /* Kept whole: allocated from the heap, not mapped, and not trimmed (a
   * malloc that refuses so high a threshold would map the block, and the
   * hint would go with it). */
  if (mallopt(M_MMAP_THRESHOLD, (int)(2 * KFS_HUGE_HEAP)) == 0)
    return;
  mallopt(M_TRIM_THRESHOLD, (int)(4 * KFS_HUGE_HEAP));
  char* grown = malloc(KFS_HUGE_HEAP);
  if (grown == NULL)
    return;
  uintptr_t from =
      ((uintptr_t)grown + KFS_HUGE_PAGE - 1) & ~(KFS_HUGE_PAGE - 1);
  uintptr_t to = ((uintptr_t)grown + KFS_HUGE_HEAP) & ~(KFS_HUGE_PAGE - 1);
  if (to > from)
    (void)madvise((void*)from, to - from, MADV_HUGEPAGE); /* a hint */
  free(grown); /* back to the heap's top, for what comes next */
#else
  (void)sources;
#endif
}

/* Decompressed kernels are large and allocated over and over in a few
 * sizes. The kernel cache hands an evicted kernel's buffer to the kernel
 * that replaces it; what it does allocate stays in one heap (not one arena
 * per FUSE thread, not a fresh mmap per kernel) so freed memory is reused
 * rather than returned to the system and faulted in again, page by page.
 * Called once the inode table is built: its large arrays, grown by
 * doubling, are better off mapped (realloc moves them without copying and
 * leaves no freed holes behind in the heap), unless prepare_heap() gave
 * the heap huge pages. */
static void tune_malloc(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
  mallopt(M_ARENA_MAX, 1);
#endif
}

int main(int argc, char* argv[]) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct fuse_cmdline_opts opts;
  kfs_config cfg = {.cache_size = KFS_DEFAULT_CACHE,
                    .release_after_ms = KFS_DEFAULT_RELEASE_AFTER_MS,
                    .uid = getuid(),
                    .gid = getgid()};
  kfs_paths paths = {0};
  kfs_fs fs;
  bool tree_built = false;
  int rc = 1;

  memset(&opts, 0, sizeof(opts));
  memset(&fs, 0, sizeof(fs));
  fs.started_ns = kfs_clock_ns();
  pthread_mutex_init(&fs.handles_lock, NULL);
  if (kfs_attach_init(&fs) != 0) {
    fprintf(stderr, "kpackfs: out of memory\n");
    return 1;
  }
  /* A bad command line exits 2, as kpack's does. */
  rc = 2;
  if (fuse_opt_parse(&args, &cfg, kfs_opts, kfs_opt_proc) != 0 || cfg.bad)
    goto out;
  if (cfg.help) {
    usage();
    rc = 0;
    goto out;
  }
  if (cfg.version) {
    printf("kpackfs version %s\nlibfuse version %s\n", KPACKFS_VERSION,
           fuse_pkgversion());
    fflush(stdout); /* fuse_lowlevel_version() runs fusermount3 too */
    fuse_lowlevel_version();
    rc = 0;
    goto out;
  }
  if (cfg.positional_count < 2) {
    fprintf(stderr, "usage: %s [options] SOURCE... MOUNTPOINT (see --help)\n",
            argv[0]);
    goto out;
  }
  rc = 1;
  size_t source_count = cfg.positional_count - 1;
  for (size_t i = 0; i < source_count; i++)
    if (kfs_paths_add_source(&paths, cfg.positional[i]) != 0)
      goto out;
  /* Where to mount, before any source is opened. */
  bool autofs;
  if ((rc = check_mount_point(cfg.positional[source_count], &autofs)) != 0)
    goto out;
  rc = 1;
  if (fuse_opt_add_arg(&args, cfg.positional[source_count]) != 0 ||
      add_mount_options(&args, cfg.positional, source_count, &paths) != 0)
    goto out;
  /* Options for libfuse: one it rejects (it says which) is a usage error,
   * found before any archive is opened. */
  rc = 2;
  fuse_set_log_func(keep_fuse_log);
  if (fuse_parse_cmdline(&args, &opts) == 0)
    fs.session = fuse_session_new(&args, &kfs_ops, sizeof(kfs_ops), &fs);
  fuse_set_log_func(NULL); /* libfuse's own again, for the mount */
  if (fs.session == NULL) {
    report_fuse_refusal();
    goto out;
  }
  if (fuse_said != NULL)
    fputs(fuse_said, stderr); /* accepted, but it had something to say */
  if (!cfg.nonempty && !autofs)
    warn_if_not_empty(cfg.positional[source_count]);
  rc = 1;

  /* Every source is opened before anything is mounted. */
  raise_fd_limit();
  prepare_heap(paths.count);
  if (kfs_tree_build(&fs.tree, &paths) != 0)
    goto out;
  tree_built = true;
  if (kfs_renders_init(&fs.renders, fs.tree.render_slots, KFS_RENDER_BUDGET) !=
      0) {
    fprintf(stderr, "kpackfs: out of memory\n");
    goto out;
  }
  tune_malloc();
  kpack_error_t err = kpack_kcache_create(cfg.cache_size, &fs.cache);
  if (err != KPACK_SUCCESS) {
    fprintf(stderr, "kpackfs: kernel cache: %s\n", kpack_error_string(err));
    goto out;
  }
  fs.uid = cfg.uid;
  fs.gid = cfg.gid;
  fs.want_no_open = !cfg.open_requests;
  fs.release_after_ns = cfg.release_after_ms * 1000000u;
  rc = run_session(&fs, &opts);
  kfs_close_open_files(&fs);

out:
  if (fs.session != NULL)
    fuse_session_destroy(fs.session);
  kpack_kcache_destroy(fs.cache);
  pthread_mutex_destroy(&fs.handles_lock);
  kfs_attach_free(&fs);
  kfs_renders_free(&fs.renders);
  if (tree_built)
    kfs_tree_free(&fs.tree);
  kfs_paths_free(&paths);
  free(opts.mountpoint);
  for (size_t i = 0; i < cfg.positional_count; i++)
    free(cfg.positional[i]);
  free(cfg.positional);
  fuse_opt_free_args(&args);
  free(fuse_said);
  return rc;
}
