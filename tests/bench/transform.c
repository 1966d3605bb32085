/* SPDX-License-Identifier: MIT
 *
 * The host-ELF transform alone (kpack_transform_write(), no compression):
 * on the synthetic 1.2 GB fat binary against `cp` of the same file, and on
 * the linked form of the same library (libsynth-linked/, made by the split
 * rows' code the first time either group runs). Each transform runs in a
 * child of the spawner, so its peak RSS is its own. Inputs are in the page
 * cache for every run.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define REPS 3

int bench_transform_main(char* const argv[]) {
  const char* paths[] = {"../.kpack/synth_@GFXARCH@.kpack"};
  kpack_transform_options_t o = {.kernel_name = "lib/libsynth.so",
                                 .search_paths = paths,
                                 .search_path_count = 1};
  kpack_transform_message_t msg = {0};
  if (argv[1] == NULL || argv[2] == NULL)
    return 2;
  int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  kpack_error_t err = fd < 0
                          ? KPACK_ERROR_IO_ERROR
                          : kpack_transform_write(argv[1], fd, &o, NULL, &msg);
  if (err != KPACK_SUCCESS)
    fprintf(stderr, "bench: transform: %s\n", msg.text);
  return err == KPACK_SUCCESS && close(fd) == 0 ? 0 : 1;
}

static void transform_row(const bench_data* d, const char* what,
                          const char* in) {
  char out[700], copy[700], name[160], value[160];
  snprintf(out, sizeof(out), "%s/transform-out.so", d->dir);
  snprintf(copy, sizeof(copy), "%s/transform-cp.so", d->dir);
  char* cp_argv[] = {"cp", (char*)in, copy, NULL};
  char* transform_argv[] = {"transform", (char*)in, out, NULL};
  bn_warm(in);
  double tf[REPS], tc[REPS];
  long rss = 0;
  for (int r = 0; r < REPS; r++) {
    bn_proc p = bn_run(transform_argv, NULL);
    if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 0)
      bn_die("%s: the transform failed", in);
    tf[r] = p.seconds;
    if (p.max_rss_kb > rss)
      rss = p.max_rss_kb;
    unlink(copy);
    tc[r] = bn_run_ok(cp_argv).seconds;
  }
  uint64_t in_size = bn_file_size(in), out_size = bn_file_size(out);
  unlink(out);
  unlink(copy);
  double t = bn_median(tf, REPS), c = bn_median(tc, REPS);
  snprintf(name, sizeof(name), "transform of %s (%.2f GB) vs cp", what,
           in_size / 1e9);
  snprintf(value, sizeof(value),
           "%.3fx (%.3f vs %.2f s), %ld MiB RSS, %llu B out", t / c, t, c,
           rss / 1024, (unsigned long long)out_size);
  bn_row(name, value, "<= 2.00x", t / c <= 2.0);
}

void bench_transform(const bench_data* d) {
  char linked[700];
  transform_row(d, "the synthetic fat binary", d->fatbin);
  bench_linked_library(d, linked, sizeof(linked));
  transform_row(d, "the same, linked", linked);
}
