/* SPDX-License-Identifier: MIT
 *
 * `kpack create` rows, on the synthetic >= 1 GB fat binary and the same code
 * objects as a tree: against `zstd -3 -T1` on the same bytes (what a user
 * would otherwise run), -j2 against -j1, and --fatbin against the tree with
 * its peak RSS. Inputs are in the page cache for every run.
 */
#include <stdio.h>
#include <unistd.h>

#include "bench.h"

#define REPS 3

void bench_create(const bench_data* d) {
  char kpack[600], out[600], zst[600], fatbin_arg[600];
  snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
  snprintf(out, sizeof(out), "%s/created.kpack", d->dir);
  snprintf(zst, sizeof(zst), "%s/created.zst", d->dir);
  snprintf(fatbin_arg, sizeof(fatbin_arg), "%s=lib/libsynth.so", d->fatbin);
  char* j1_argv[] = {
      kpack, "create", "-q", "-j1", "-o", out, (char*)d->fatbin_tree, NULL};
  char* j2_argv[] = {
      kpack, "create", "-q", "-j2", "-o", out, (char*)d->fatbin_tree, NULL};
  char* fatbin_argv[] = {kpack, "create",   "-q",       "-j2", "-o",
                         out,   "--fatbin", fatbin_arg, NULL};
  char* zstd_argv[] = {"zstd",           "-3", "-T1", "-q", "-f",
                       (char*)d->fatbin, "-o", zst,   NULL};

  bn_warm(d->fatbin);
  bn_warm_tree(d->fatbin_tree);
  double j1[REPS], j2[REPS], fat[REPS], zs[REPS];
  long fat_rss = 0, tree_rss = 0;
  for (int r = 0; r < REPS; r++) {
    j1[r] = bn_run_ok(j1_argv).seconds;
    bn_proc p = bn_run_ok(j2_argv);
    j2[r] = p.seconds;
    if (p.max_rss_kb > tree_rss)
      tree_rss = p.max_rss_kb;
    p = bn_run_ok(fatbin_argv);
    fat[r] = p.seconds;
    if (p.max_rss_kb > fat_rss)
      fat_rss = p.max_rss_kb;
    zs[r] = d->have_zstd ? bn_run_ok(zstd_argv).seconds : 0;
  }
  unlink(out);
  unlink(zst);
  double t1 = bn_median(j1, REPS), t2 = bn_median(j2, REPS),
         tf = bn_median(fat, REPS), tz = bn_median(zs, REPS);
  double gb = d->fatbin_bytes / 1e9;
  char value[96], target[64], name[128];

  snprintf(name, sizeof(name),
           "kpack create -j1 vs zstd -3 -T1, same %.2f GB (throughput)", gb);
  if (d->have_zstd) {
    double mine = d->fatbin_bytes / t1;
    double theirs = bn_file_size(d->fatbin) / tz;
    snprintf(value, sizeof(value), "%.2fx (%.0f vs %.0f MB/s)", mine / theirs,
             mine / 1e6, theirs / 1e6);
    bn_row(name, value, ">= 0.80x", mine / theirs >= 0.8);
  } else {
    bn_row_not_run(name, ">= 0.80x", "no zstd command");
  }

  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)", t1 / t2, t2, t1);
  bn_row("kpack create -j2 vs -j1 (fat-binary code objects as a tree)", value,
         ">= 1.60x", t1 / t2 >= 1.6);

  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)", tf / t2, tf, t2);
  bn_row("kpack create --fatbin vs the same code objects as a tree, -j2", value,
         "<= 1.10x", tf / t2 <= 1.1);

  /* Two jobs, each holding its code object and its compressed frame. */
  uint64_t limit = (64u << 20) + 2u * 2u * d->largest_code_object;
  snprintf(value, sizeof(value), "%ld MiB (tree: %ld MiB)", fat_rss / 1024,
           tree_rss / 1024);
  snprintf(target, sizeof(target), "<= %llu MiB",
           (unsigned long long)(limit >> 20));
  bn_row("kpack create --fatbin -j2: peak RSS", value, target,
         (uint64_t)fat_rss * 1024 <= limit);
}
