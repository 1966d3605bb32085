/* SPDX-License-Identifier: MIT
 *
 * `make bench` (docs/performance.md): shared helpers of the benchmark.
 * bench.c generates the data sets and runs the rows; library.c measures
 * libkpack against raw zstd, pread and msgpack; create.c `kpack create`
 * against `zstd -3 -T1`; mounts.c kpackfs against squashfuse_ll on the same
 * kernels; install.c a whole multi-arch install (420 archives) mounted and
 * listed. Every row is a ratio of two measurements taken in the same run,
 * so a noisy machine shifts both sides alike; it reports and never fails.
 */
#ifndef KPACK_BENCH_H
#define KPACK_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fixture_fatbin.h"
#include "rocm_kpack/kpack_ext.h"

/* What the rows run on; paths under the cache directory. */
typedef struct bench_data {
  const char* dir;       /* .cache/bench */
  const char* bin;       /* kpack and kpackfs */
  char zstd_2000[512];   /* 2,000 x 256 KiB, zstd, as the writer writes it */
  char none_2000[512];   /* the same kernels, scheme none */
  char plain_2000[512];  /* zstd_2000 without the frame-size table */
  char zstd_20000[512];  /* 20,000 x 4 KiB, zstd */
  char plain_20000[512]; /* the same archive without the frame-size table */
  char none_3[512];      /* 3 x 1 KiB, scheme none */
  char tree_2000[512];   /* extracted trees and their squashfs images */
  char sqfs_2000[512];
  char tree_20000[512];
  char sqfs_20000[512];
  char fatbin[512]; /* >= 1 GB synthetic HIP fat binary */
  fx_fatbin_spec fatbin_spec;
  uint64_t fatbin_bytes; /* code object bytes in it */
  size_t largest_code_object;
  char fatbin_tree[512];  /* its code objects as a tree */
  char fatbin_kpack[512]; /* packed from that tree */
  char fatbin_sqfs[512];  /* the tree as a squashfs image */
  bool have_squashfuse;   /* squashfuse_ll and mksquashfs found */
  bool have_zstd;         /* the zstd command */
} bench_data;

/* ---- time and the table ---- */
double bn_now(void);
double bn_median(double* v, int n);
void bn_table_header(void);
/* One row: name, measured value, target, PASS or MISS. */
void bn_row(const char* name, const char* measured, const char* target,
            bool pass);
/* A row that could not be measured here (a tool is missing): MISS. */
void bn_row_not_run(const char* name, const char* target, const char* why);
void bn_die(const char* fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));
void bn_die_kpack(const char* what, kpack_error_t err)
    __attribute__((noreturn));

/* ---- files ---- */
bool bn_exists(const char* path);
uint64_t bn_file_size(const char* path);
/* Drops the file's pages from the page cache (POSIX_FADV_DONTNEED; the
 * pages must be clean, so it syncs the file first). No root needed. */
void bn_evict(const char* path);
/* Reads the file once so that its pages are cached. */
void bn_warm(const char* path);
void bn_warm_tree(const char* dir);
/* Largest value of "Key:" in a /proc file (kB for VmRSS/VmHWM), or -1. */
long bn_proc_value(const char* file, const char* key);
/* Resident kB of process pid's mappings of *.kpack files: archive pages
 * libkpack reads kernels from (file-backed, shared with the page cache),
 * counted apart from the rest of its RSS. */
long bn_archive_pages_kb(pid_t pid);

/* ---- processes ---- */
typedef struct bn_proc {
  int status; /* wait status */
  double seconds;
  long max_rss_kb; /* of the process tree the command became (wait4) */
} bn_proc;
/* Starts the spawner (common.c), which starts every command bn_run() runs
 * so that their peak RSS is their own: called first thing in main(). */
void bn_spawner_start(void);
/* Commands the spawner runs in a child of its own instead of a program:
 * argv[0] names one; `main` returns the exit status. The table (bench.c)
 * ends with a NULL name. */
typedef struct bn_builtin {
  const char* name;
  int (*main)(char* const argv[]);
} bn_builtin;
extern const bn_builtin bn_builtins[];
/* Runs argv (a builtin, or a program on PATH) with stdout and stderr to
 * /dev/null, or to `log` when not NULL, and waits for it. */
bn_proc bn_run(char* const argv[], const char* log);
/* bn_run that exits the bench when the command fails. */
bn_proc bn_run_ok(char* const argv[]);
/* Whether a program is on PATH. */
bool bn_have(const char* program);

/* ---- FUSE daemons ---- */
typedef struct bn_daemon {
  pid_t pid;
  const char* dir;
  double started; /* bn_now() just before the fork */
} bn_daemon;
/* Starts a FUSE daemon in the foreground (argv); returns the seconds until
 * the mount appears on `dir`. Its output goes to `log`, or nowhere. */
double bn_daemon_start(bn_daemon* m, char* const argv[], const char* dir,
                       const char* log);
/* Where a kpackfs mount's time went, in seconds, from the phases its
 * .kpackfs/stats records (CLOCK_MONOTONIC, as bn_now()): the process start
 * (fork to main), opening and validating every TOC, building the tree,
 * mount(2), INIT, and the mount showing up on the directory. False when
 * the stats lack them. */
enum { BN_START, BN_TOCS, BN_TREE, BN_MOUNT, BN_INIT, BN_SEEN, BN_PHASES };
bool bn_mount_phases(const bn_daemon* m, double mounted, double* phases);
/* "start 1.0 + TOCs ... = N ms" for a row, from medians of `reps` runs. */
void bn_phases_text(char* out, size_t cap, double (*phases)[BN_PHASES],
                    int reps);
/* A row that informs, without a target. */
void bn_row_info(const char* name, const char* measured, const char* note);

/* Unmounts (fusermount3 -u, SIGTERM if that fails) and reaps the daemon. */
void bn_daemon_stop(bn_daemon* m);
/* readdir + lstat of everything below `path`, as find(1) does; returns the
 * entries seen and adds the directories to *dirs. bn_walk_each() also hands
 * every entry that is not a directory to `file` (path, name, its stat). */
size_t bn_walk(const char* path, size_t* dirs);
typedef void bn_file_fn(const char* path, const char* name,
                        const struct stat* st, void* context);
size_t bn_walk_each(const char* path, size_t* dirs, bn_file_fn* file,
                    void* context);

/* ---- kernels of an archive ---- */
typedef struct bn_kernel {
  const char* binary;
  const char* arch;
  uint64_t size;
} bn_kernel;
/* Opens an archive (or exits) and lists its kernels in TOC order. */
kpack_archive_t bn_open_listed(const char* path, bn_kernel** kernels,
                               size_t* count);
/* Lists an open archive's kernels in TOC order, named by its own strings. */
void bn_list(kpack_archive_t a, bn_kernel** kernels, size_t* count);

/* ---- the rows ---- */
void bench_library(const bench_data* d);
void bench_create(const bench_data* d);
void bench_mounts(const bench_data* d);
void bench_transform(const bench_data* d);
/* The builtin "transform IN OUT" (transform.c): kpack_transform_write()
 * of IN into OUT. */
int bench_transform_main(char* const argv[]);
/* The linked 1.2 GB library (split.c), made the first time it is asked
 * for: the split and transform rows use it. */
void bench_linked_library(const bench_data* d, char* path, size_t cap);
void bench_split(const bench_data* d);
void bench_install(const bench_data* d);

#endif /* KPACK_BENCH_H */
