/* SPDX-License-Identifier: MIT
 *
 * kpackfs against squashfuse_ll, the FUSE filesystem a user would otherwise
 * mount the same kernels with: a squashfs image of the extracted tree
 * (mksquashfs -comp zstd -Xcompression-level 3 -b 1M, the archives' zstd
 * level). For each data set, fresh mounts of both,
 * interleaved: mount, first walk, first read of every kernel, re-read, and
 * the daemon's peak RSS. Before the walk and before the first read the
 * archive's or image's pages are dropped from the page cache
 * (POSIX_FADV_DONTNEED on the file: no root needed, nothing else evicted);
 * the mounted files' own pages start empty with every mount.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define REPS 5

typedef struct data_set {
  const char* name;
  bool breakdown;      /* the mount row shows where kpackfs's time goes */
  double walk_limit;   /* first walk: kpackfs's time over squashfuse_ll's */
  const char* archive; /* kpackfs source */
  const char* image;   /* squashfuse_ll source */
  bn_kernel* kernels;
  size_t count;
  uint64_t bytes;
  uint64_t largest;
} data_set;

/* Reads every kernel file once, in TOC order, 1 MiB at a time. */
static double read_all(const char* dir, const data_set* s) {
  static char buf[1 << 20];
  char path[4096];
  uint64_t bytes = 0;
  double t = bn_now();
  for (size_t i = 0; i < s->count; i++) {
    snprintf(path, sizeof(path), "%s/%s/%s/kernel.hsaco", dir,
             s->kernels[i].binary, s->kernels[i].arch);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
      bn_die("%s: cannot open", path);
    for (ssize_t r; (r = read(fd, buf, sizeof(buf))) > 0;)
      bytes += (uint64_t)r;
    close(fd);
  }
  t = bn_now() - t;
  if (bytes != s->bytes)
    bn_die("%s: read %llu bytes, expected %llu", dir, (unsigned long long)bytes,
           (unsigned long long)s->bytes);
  return t;
}

typedef struct fs_times {
  double mount[REPS], walk[REPS], first[REPS], again[REPS];
  double rtt[REPS]; /* kpackfs, for the floor row: one round trip */
  double phases[REPS][BN_PHASES]; /* kpackfs: where the mount's time went */
  bool have_phases;
  /* Peak RSS without the archive pages libkpack maps (VmHWM less the
   * *.kpack pages resident at the end: those only grow while mounted, so
   * this is the rest's peak or a little under), and those pages; the
   * largest of the runs. */
  long hwm_kb, archive_kb;
  size_t dirs;
} fs_times;

/* One FUSE round trip: a LOOKUP of a name that does not exist (each name
 * once, so no negative entry answers it), median of 1,000. */
static double round_trip(const char* dir, int rep) {
  enum { N = 1000 };
  static double t[N];
  char path[4096];
  struct stat st;
  for (int i = 0; i < N; i++) {
    snprintf(path, sizeof(path), "%s/no-such-name-%d-%d", dir, rep, i);
    double start = bn_now();
    if (stat(path, &st) == 0)
      bn_die("%s exists", path);
    t[i] = bn_now() - start;
  }
  return bn_median(t, N);
}

/* One run on a fresh mount; `round_trips` also times the cheapest request,
 * right after the walk, under the same load. */
static void measure(char* const argv[], const char* source, const char* dir,
                    const data_set* s, fs_times* out, int rep,
                    bool round_trips) {
  bn_daemon m;
  bn_evict(source);
  out->mount[rep] = bn_daemon_start(&m, argv, dir, NULL);
  out->have_phases = bn_mount_phases(&m, out->mount[rep], out->phases[rep]);
  double t = bn_now();
  out->dirs = 0;
  bn_walk(dir, &out->dirs);
  out->walk[rep] = bn_now() - t;
  if (round_trips)
    out->rtt[rep] = round_trip(dir, rep);
  bn_evict(source);
  out->first[rep] = read_all(dir, s);
  out->again[rep] = read_all(dir, s);
  char status[64];
  snprintf(status, sizeof(status), "/proc/%d/status", (int)m.pid);
  long archive = bn_archive_pages_kb(m.pid);
  long hwm = bn_proc_value(status, "VmHWM:") - archive;
  if (hwm > out->hwm_kb)
    out->hwm_kb = hwm;
  if (archive > out->archive_kb)
    out->archive_kb = archive;
  bn_daemon_stop(&m);
}

static void rows_for(const data_set* s, fs_times* k, fs_times* q) {
  char name[128], value[256], target[64];
  double kf = bn_median(k->first, REPS), qf = bn_median(q->first, REPS);
  double ka = bn_median(k->again, REPS), qa = bn_median(q->again, REPS);
  double kw = bn_median(k->walk, REPS), qw = bn_median(q->walk, REPS);
  double km = bn_median(k->mount, REPS), qm = bn_median(q->mount, REPS);

  snprintf(name, sizeof(name), "%s: first read-all, kpackfs vs squashfuse_ll",
           s->name);
  snprintf(value, sizeof(value), "%.2fx (%.0f vs %.0f MB/s)", qf / kf,
           s->bytes / kf / 1e6, s->bytes / qf / 1e6);
  bn_row(name, value, ">= 1.00x", qf / kf >= 1.0);

  /* Both re-read from the kernel's page cache (kpackfs keeps it across
   * opens, squashfuse_ll's files are cached the same way): neither daemon
   * is asked, so parity is the target. */
  snprintf(name, sizeof(name), "%s: re-read", s->name);
  snprintf(value, sizeof(value), "%.2fx (%.0f vs %.0f MB/s)", qa / ka,
           s->bytes / ka / 1e6, s->bytes / qa / 1e6);
  bn_row(name, value, ">= 1.00x", qa / ka >= 1.0);

  snprintf(name, sizeof(name), "%s: first walk, time", s->name);
  snprintf(value, sizeof(value), "%.2fx (%.3f vs %.3f s)", kw / qw, kw, qw);
  snprintf(target, sizeof(target), "<= %.2fx", s->walk_limit);
  bn_row(name, value, target, kw / qw <= s->walk_limit);

  if (s->breakdown && k->have_phases) {
    /* kpackfs reads and checks every TOC before it mounts, which
     * squashfuse_ll has no need to do: no ratio, the parts. */
    char parts[160];
    bn_phases_text(parts, sizeof(parts), k->phases, REPS);
    snprintf(name, sizeof(name), "%s: mount, kpackfs's phases", s->name);
    snprintf(value, sizeof(value), "%s (squashfuse_ll: %.1f ms)", parts,
             qm * 1e3);
    bn_row_info(name, value, "TOCs checked before mounting");
  } else {
    snprintf(name, sizeof(name), "%s: mount, time", s->name);
    snprintf(value, sizeof(value), "%.2fx (%.1f vs %.1f ms)", km / qm, km * 1e3,
             qm * 1e3);
    bn_row(name, value, "<= 2.00x", km / qm <= 2.0);
  }

  /* One kernel is open at a time: the reader is sequential. */
  double limit = 2.0 * q->hwm_kb / 1024 + s->largest / 1048576.0;
  snprintf(name, sizeof(name), "%s: daemon peak RSS", s->name);
  if (k->archive_kb > 0)
    snprintf(value, sizeof(value),
             "%.1f vs %.1f MiB (+ %.1f MiB archive pages mapped)",
             k->hwm_kb / 1024.0, q->hwm_kb / 1024.0, k->archive_kb / 1024.0);
  else
    snprintf(value, sizeof(value), "%.1f vs %.1f MiB", k->hwm_kb / 1024.0,
             q->hwm_kb / 1024.0);
  snprintf(target, sizeof(target), "<= 2x + open: %.1f MiB", limit);
  bn_row(name, value, target, k->hwm_kb / 1024.0 <= limit);
}

/* Requests a first walk costs kpackfs, from libfuse's request trace (-d):
 * everything but INIT and DESTROY. */
static size_t walk_requests(const bench_data* d, const data_set* s,
                            size_t* dirs) {
  char kpackfs[600], dir[600], log[600], line[512];
  snprintf(kpackfs, sizeof(kpackfs), "%s/kpackfs", d->bin);
  snprintf(dir, sizeof(dir), "%s/mnt-kpackfs", d->dir);
  snprintf(log, sizeof(log), "%s/walk-trace.log", d->dir);
  char* argv[] = {kpackfs, "-d", (char*)s->archive, dir, NULL};
  bn_daemon m;
  bn_daemon_start(&m, argv, dir, log);
  *dirs = 0;
  bn_walk(dir, dirs);
  bn_daemon_stop(&m);
  size_t requests = 0;
  FILE* f = fopen(log, "r");
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    requests += strstr(line, ", opcode: ") != NULL &&
                strstr(line, "opcode: INIT ") == NULL &&
                strstr(line, "opcode: DESTROY ") == NULL;
  if (f != NULL)
    fclose(f);
  unlink(log);
  return requests;
}

static void count_text_file(const char* path, const char* name,
                            const struct stat* st, void* count) {
  (void)path;
  (void)st;
  *(size_t*)count += strcmp(name, KPACK_LAYOUT_KERNELS_FILE) == 0 ||
                     strcmp(name, KPACK_LAYOUT_METADATA_FILE) == 0;
}

/* The `kernels` and `metadata.json` files below `path`: a stat walk asks
 * for each one's size once, since that size is only known once its code
 * object's note is read (listing alone reads nothing). */
static size_t text_files(const char* path) {
  size_t count = 0, dirs = 0;
  bn_walk_each(path, &dirs, count_text_file, &count);
  return count;
}

/* The walk (a stat of every entry, as `du` or `ls -lR` make) against what
 * any FUSE filesystem needs at least for it: two round trips per directory
 * (READDIRPLUS with the entries and their attributes, then the empty one
 * that ends the directory; no LOOKUP, GETATTR or OPENDIR), plus one per
 * text file, whose exact size the first stat asks for, plus what the VFS
 * spends walking the same tree on a local filesystem, with its dentries
 * cached. That floor leaves out the kernel's own work making an inode per
 * entry, so the time is printed for information only; the row's target is
 * the request count, the part the daemon decides. */
static void protocol_floor(const bench_data* d, const data_set* s,
                           const char* local_tree, fs_times* k) {
  char value[128], name[128];
  double local[REPS];
  size_t local_dirs = 0, dirs = 0;
  bn_walk(local_tree, &local_dirs); /* dentries and inodes cached */
  for (int r = 0; r < REPS; r++) {
    double t = bn_now();
    local_dirs = 0;
    bn_walk(local_tree, &local_dirs);
    local[r] = bn_now() - t;
  }
  size_t requests = walk_requests(d, s, &dirs);
  size_t texts = text_files(local_tree);
  double floor_requests = 2.0 * (double)dirs + (double)texts;
  double rtt = bn_median(k->rtt, REPS);
  double trips = (2.0 * (double)k->dirs + (double)texts) * rtt;
  double floor = trips + bn_median(local, REPS);
  double w = bn_median(k->walk, REPS);
  snprintf(name, sizeof(name), "%s: kpackfs first walk vs protocol floor",
           s->name);
  snprintf(value, sizeof(value),
           "%.2fx (%.2f req/dir; floor %.2f: %zu dirs x 2 + %zu text files)",
           w / floor, (double)requests / (double)dirs,
           floor_requests / (double)dirs, dirs, texts);
  /* The floor, to the printed precision: the mount itself adds a few
   * requests (the root's attributes) whatever the tree. */
  double per_dir = (double)requests / (double)dirs;
  bn_row(name, value, "the floor's req/dir, no time",
         per_dir < floor_requests / (double)dirs + 0.005);
}

static void compare(const bench_data* d, data_set* s, const char* floor_tree) {
  char kpackfs[600], kdir[600], qdir[600];
  snprintf(kpackfs, sizeof(kpackfs), "%s/kpackfs", d->bin);
  snprintf(kdir, sizeof(kdir), "%s/mnt-kpackfs", d->dir);
  snprintf(qdir, sizeof(qdir), "%s/mnt-squashfuse", d->dir);
  kpack_archive_t a = bn_open_listed(s->archive, &s->kernels, &s->count);
  s->bytes = s->largest = 0;
  for (size_t i = 0; i < s->count; i++) {
    s->bytes += s->kernels[i].size;
    if (s->kernels[i].size > s->largest)
      s->largest = s->kernels[i].size;
  }
  char* kargv[] = {kpackfs, "-f", (char*)s->archive, kdir, NULL};
  char* qargv[] = {"squashfuse_ll", "-f", (char*)s->image, qdir, NULL};
  fs_times k = {0}, q = {0};
  /* Each goes first in every other run: whatever the one before leaves
   * (the page cache it filled, the memory it freed) favours both alike. */
  for (int r = 0; r < REPS; r++) {
    if (r % 2 == 1)
      measure(qargv, s->image, qdir, s, &q, r, false);
    measure(kargv, s->archive, kdir, s, &k, r, floor_tree != NULL);
    if (r % 2 == 0)
      measure(qargv, s->image, qdir, s, &q, r, false);
  }
  rows_for(s, &k, &q);
  if (floor_tree != NULL)
    protocol_floor(d, s, floor_tree, &k);
  free(s->kernels);
  kpack_close(a);
}

/* A mount left behind by an interrupted run would fail the next one. */
static void clear_stale_mount(const bench_data* d, const char* name) {
  char dir[600];
  snprintf(dir, sizeof(dir), "%s/%s", d->dir, name);
  char* argv[] = {"fusermount3", "-u", "-q", "-z", dir, NULL};
  (void)bn_run(argv, NULL);
}

void bench_mounts(const bench_data* d) {
  clear_stale_mount(d, "mnt-kpackfs");
  clear_stale_mount(d, "mnt-squashfuse");
  char fat_name[64];
  snprintf(fat_name, sizeof(fat_name), "fat binary %.2f GB",
           d->fatbin_bytes / 1e9);
  data_set sets[] = {
      {.name = "2,000 x 256 KiB",
       .walk_limit = 1.0,
       .archive = d->zstd_2000,
       .image = d->sqfs_2000},
      {.name = "20,000 x 4 KiB",
       .breakdown = true,
       .walk_limit = 1.0,
       .archive = d->zstd_20000,
       .image = d->sqfs_20000},
      /* Its `kernels` and `metadata.json` files have exact sizes, which
       * takes decoding a prefix of every code object (about 4% of its
       * bytes) on the first stat: squashfuse_ll's files have theirs
       * written down. */
      {.name = fat_name,
       .walk_limit = 1.5,
       .archive = d->fatbin_kpack,
       .image = d->fatbin_sqfs},
  };
  for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
    if (!d->have_squashfuse) {
      char name[128];
      snprintf(name, sizeof(name), "%s: kpackfs vs squashfuse_ll",
               sets[i].name);
      bn_row_not_run(name, "(5 rows)", "squashfuse_ll or mksquashfs missing");
      continue;
    }
    compare(d, &sets[i], i == 1 ? d->tree_20000 : NULL);
  }
}
