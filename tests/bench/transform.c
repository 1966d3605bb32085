/* SPDX-License-Identifier: MIT
 *
 * The host-ELF transform alone (kpack_transform_write(), no compression):
 * on the synthetic 1.2 GB fat binary against `cp` of the same file, and on
 * the linked form of the same library when the split rows have made it
 * (libsynth-linked/). Each transform runs in a child process, so its peak
 * RSS is its own. Inputs are in the page cache for every run.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define REPS 3

/* Transforms `in` into `out` in a child; its time and peak RSS. */
static bn_proc transform_once(const char* in, const char* out) {
  double start = bn_now();
  pid_t pid = fork();
  if (pid < 0)
    bn_die("fork");
  if (pid == 0) {
    const char* paths[] = {"../.kpack/synth_@GFXARCH@.kpack"};
    kpack_transform_options_t o = {.kernel_name = "lib/libsynth.so",
                                   .search_paths = paths,
                                   .search_path_count = 1};
    kpack_transform_message_t msg;
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    kpack_error_t err = fd < 0 ? KPACK_ERROR_IO_ERROR
                               : kpack_transform_write(in, fd, &o, NULL, &msg);
    if (err != KPACK_SUCCESS)
      fprintf(stderr, "bench: transform: %s\n", msg.text);
    _exit(err == KPACK_SUCCESS && close(fd) == 0 ? 0 : 1);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    bn_die("%s: the transform failed", in);
  return (bn_proc){status, bn_now() - start, ru.ru_maxrss};
}

static void transform_row(const bench_data* d, const char* what,
                          const char* in) {
  char out[700], copy[700], name[160], value[160];
  snprintf(out, sizeof(out), "%s/transform-out.so", d->dir);
  snprintf(copy, sizeof(copy), "%s/transform-cp.so", d->dir);
  char* cp_argv[] = {"cp", (char*)in, copy, NULL};
  bn_warm(in);
  double tf[REPS], tc[REPS];
  long rss = 0;
  for (int r = 0; r < REPS; r++) {
    bn_proc p = transform_once(in, out);
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
  snprintf(linked, sizeof(linked), "%s/libsynth-linked/lib/libsynth.so",
           d->dir);
  if (bn_exists(linked))
    transform_row(d, "the same, linked", linked);
  else
    bn_row_not_run("transform of the same library, linked, vs cp", "<= 2.00x",
                   "libsynth-linked/ not made yet (BENCH_ROWS=split)");
}
