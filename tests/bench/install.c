/* SPDX-License-Identifier: MIT
 *
 * A whole multi-arch install: the `.kpack/` folder of 15 components built
 * for 28 GPU arches, one archive each (420 archives of 600 kernels of
 * 2 KiB, 252,000 kernels), generated once into install-420/ under the
 * cache directory with the image of its extracted tree. Rows: libkpack's
 * bytes per open kernel, `kpack list` of every archive, and kpackfs over
 * the folder against squashfuse_ll over the image (mount time, as a ratio
 * to `kpack info` of the same archives in the same run, daemon RSS after
 * the mount and after a full walk, walk time).
 */
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define REPS 3
#define MOUNT_REPS 7
#define KERNELS_PER_ARCHIVE 600
#define KERNEL_SIZE 2048

static const char* const components[] = {
    "rocblas", "hipblaslt", "miopen",    "rocfft",     "rocsparse",
    "rocrand", "hiprand",   "rocsolver", "hipsparse",  "rccl",
    "rocprim", "hipcub",    "rocthrust", "composable", "rocalution"};
#define COMPONENTS (sizeof(components) / sizeof(components[0]))

static const char* const arches[] = {
    "gfx900",  "gfx906",  "gfx908",  "gfx90a",  "gfx90c",  "gfx940",
    "gfx941",  "gfx942",  "gfx950",  "gfx1010", "gfx1011", "gfx1012",
    "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035",
    "gfx1036", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150",
    "gfx1151", "gfx1152", "gfx1200", "gfx1201"};
#define ARCHES (sizeof(arches) / sizeof(arches[0]))
#define ARCHIVES (COMPONENTS * ARCHES)

typedef struct install {
  char dir[512];   /* install-420 */
  char kpack[600]; /* its .kpack folder: the archives */
  char tree[600];  /* the archives extracted */
  char image[600]; /* the tree as a squashfs image */
  char* paths[ARCHIVES];
} install;

static void archive_path(char* out, size_t cap, const char* kpack_dir, size_t c,
                         size_t a) {
  snprintf(out, cap, "%s/%s_lib_%s.kpack", kpack_dir, components[c], arches[a]);
}

/* One archive per component and arch, as a ROCm build emits them: every
 * code object of the component's library, for that arch. */
static void write_archive(const char* path, size_t c, size_t a) {
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                              .threads = 2,
                              .group_name = components[c],
                              .gfx_arch_family = arches[a]};
  kpack_writer_t* w;
  kpack_error_t err = kpack_writer_create(path, &o, &w);
  if (err)
    bn_die_kpack(path, err);
  uint8_t buf[KERNEL_SIZE];
  for (size_t i = 0; i < KERNELS_PER_ARCHIVE; i++) {
    char binary[128];
    snprintf(binary, sizeof(binary), "lib/%s/lib%s.so.1#%zu", components[c],
             components[c], i);
    fx_fill_code(buf, sizeof(buf),
                 (uint32_t)((c * ARCHES + a) * KERNELS_PER_ARCHIVE + i));
    if ((err = kpack_writer_add_kernel(w, binary, arches[a], buf, sizeof(buf))))
      bn_die_kpack("add kernel", err);
  }
  if ((err = kpack_writer_finish(w)))
    bn_die_kpack(path, err);
}

static void remove_tree(const char* path) {
  char* argv[] = {"rm", "-rf", (char*)path, NULL};
  bn_run_ok(argv);
}

/* Generated once: the archives into install-420.tmp, renamed when all are
 * written; then the extracted tree and its image, each under a temporary
 * name until complete. */
static void prepare_install(const bench_data* d, install* in) {
  snprintf(in->dir, sizeof(in->dir), "%s/install-420", d->dir);
  snprintf(in->kpack, sizeof(in->kpack), "%s/.kpack", in->dir);
  snprintf(in->tree, sizeof(in->tree), "%s/tree", in->dir);
  snprintf(in->image, sizeof(in->image), "%s/tree-zstd3.sqfs", in->dir);
  if (!bn_exists(in->dir)) {
    char tmp[600], kpack[700], path[800];
    snprintf(tmp, sizeof(tmp), "%s.tmp", in->dir);
    snprintf(kpack, sizeof(kpack), "%s/.kpack", tmp);
    fprintf(stderr, "bench: generating %s (%zu archives x %d x %d bytes)\n",
            in->dir, (size_t)ARCHIVES, KERNELS_PER_ARCHIVE, KERNEL_SIZE);
    remove_tree(tmp);
    if (mkdir(tmp, 0755) != 0 || mkdir(kpack, 0755) != 0)
      bn_die("%s: cannot create", kpack);
    for (size_t c = 0; c < COMPONENTS; c++)
      for (size_t a = 0; a < ARCHES; a++) {
        archive_path(path, sizeof(path), kpack, c, a);
        write_archive(path, c, a);
      }
    if (rename(tmp, in->dir) != 0)
      bn_die("%s: cannot rename", in->dir);
  }
  for (size_t c = 0; c < COMPONENTS; c++)
    for (size_t a = 0; a < ARCHES; a++) {
      char path[800];
      archive_path(path, sizeof(path), in->kpack, c, a);
      in->paths[c * ARCHES + a] = strdup(path);
    }
  if (!d->have_squashfuse)
    return;
  if (!bn_exists(in->tree)) {
    char tmp[700], kpack[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", in->tree);
    snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
    fprintf(stderr, "bench: extracting %s\n", in->tree);
    remove_tree(tmp);
    char* argv[ARCHIVES + 6] = {kpack, "extract", "-C", tmp};
    for (size_t i = 0; i < ARCHIVES; i++)
      argv[4 + i] = in->paths[i];
    bn_run_ok(argv);
    if (rename(tmp, in->tree) != 0)
      bn_die("%s: cannot rename", in->tree);
  }
  if (!bn_exists(in->image)) {
    char tmp[700];
    snprintf(tmp, sizeof(tmp), "%s.tmp", in->image);
    fprintf(stderr, "bench: mksquashfs %s (once; a few minutes)\n", in->image);
    char* argv[] = {"mksquashfs", in->tree, tmp,
                    "-comp",      "zstd",   "-Xcompression-level",
                    "3",          "-b",     "1M",
                    "-noappend",  "-quiet", "-no-progress",
                    NULL};
    bn_run_ok(argv);
    if (rename(tmp, in->image) != 0)
      bn_die("%s: cannot rename", in->image);
  }
}

/* ---- libkpack ---------------------------------------------------------- */

static long heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return (long)(m.uordblks + m.hblkhd);
}

/* What every archive held open costs per kernel, against the bytes of the
 * names it must keep (binary names, and each archive's arch names once). */
static void bytes_per_kernel(const install* in) {
  static kpack_archive_t open_archives[ARCHIVES];
  size_t kernels = 0, names = 0;
  long before = heap_in_use();
  for (size_t i = 0; i < ARCHIVES; i++) {
    kpack_error_t err = kpack_open(in->paths[i], &open_archives[i]);
    if (err != KPACK_SUCCESS)
      bn_die_kpack(in->paths[i], err);
  }
  long grown = heap_in_use() - before;
  for (size_t i = 0; i < ARCHIVES; i++) {
    kpack_archive_t a = open_archives[i];
    size_t n = 0, binaries = 0, count = 0;
    kpack_get_kernel_count(a, &n);
    kernels += n;
    kpack_get_binary_count(a, &binaries);
    for (size_t b = 0; b < binaries; b++) {
      const char* name;
      kpack_get_binary(a, b, &name);
      names += strlen(name) + 1;
    }
    kpack_get_architecture_count(a, &count);
    for (size_t j = 0; j < count; j++) {
      const char* arch;
      kpack_get_architecture(a, j, &arch);
      names += strlen(arch) + 1;
    }
    kpack_close(a);
  }
  double per = (double)grown / (double)kernels;
  double name_bytes = (double)names / (double)kernels;
  char value[96], target[64];
  snprintf(value, sizeof(value), "%.1f B/kernel (%.1f MiB for %zu kernels)",
           per, grown / 1048576.0, kernels);
  snprintf(target, sizeof(target), "<= 64 + %.1f names", name_bytes);
  bn_row("install: libkpack heap per open kernel, 420 archives open", value,
         target, per <= 64.0 + name_bytes);
}

static void list_all(const bench_data* d, const install* in) {
  char kpack[600];
  snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
  char* argv[ARCHIVES + 3] = {kpack, "list"};
  for (size_t i = 0; i < ARCHIVES; i++)
    argv[2 + i] = in->paths[i];
  double rss[REPS];
  for (int r = 0; r < REPS; r++) {
    bn_proc p = bn_run_ok(argv);
    rss[r] = p.max_rss_kb / 1024.0;
  }
  double m = bn_median(rss, REPS);
  char value[64];
  snprintf(value, sizeof(value), "%.1f MiB", m);
  bn_row("install: kpack list of all 420 archives, peak RSS", value,
         "<= 24 MiB", m <= 24.0);
}

/* ---- mounts ------------------------------------------------------------ */

typedef struct install_run {
  double mount[MOUNT_REPS], walk[REPS];
  /* MiB, VmRSS right after the mount and VmHWM after the walk, each less
   * the archive pages libkpack maps (mounts.c), and those pages. */
  double rss_mounted[REPS], archive_mounted[REPS];
  double hwm_walked[REPS], archive_walked[REPS];
  double phases[MOUNT_REPS][BN_PHASES]; /* kpackfs: where the time went */
  bool have_phases;
  size_t entries;
} install_run;

static void evict_all(const install* in, bool image) {
  if (image) {
    bn_evict(in->image);
    return;
  }
  for (size_t i = 0; i < ARCHIVES; i++)
    bn_evict(in->paths[i]);
}

static double proc_mib(pid_t pid, const char* key) {
  char status[64];
  snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
  return bn_proc_value(status, key) / 1024.0;
}

static void run_mounts(char* const argv[], const char* dir, const install* in,
                       bool image, install_run* out) {
  for (int r = 0; r < MOUNT_REPS; r++) {
    bn_daemon m;
    evict_all(in, image);
    out->mount[r] = bn_daemon_start(&m, argv, dir, NULL);
    if (!image)
      out->have_phases &= bn_mount_phases(&m, out->mount[r], out->phases[r]);
    if (r < REPS) {
      out->archive_mounted[r] = bn_archive_pages_kb(m.pid) / 1024.0;
      out->rss_mounted[r] = proc_mib(m.pid, "VmRSS:") - out->archive_mounted[r];
      size_t dirs = 0;
      double t = bn_now();
      out->entries = bn_walk(dir, &dirs);
      out->walk[r] = bn_now() - t;
      out->archive_walked[r] = bn_archive_pages_kb(m.pid) / 1024.0;
      out->hwm_walked[r] = proc_mib(m.pid, "VmHWM:") - out->archive_walked[r];
    }
    bn_daemon_stop(&m);
  }
}

/* `kpack info` of every archive, cold as the mounts are: it opens and
 * validates each TOC, one after another, as a mount must before it shows
 * anything. Seconds, the median of MOUNT_REPS. */
static double info_all(const bench_data* d, const install* in) {
  char kpack[600];
  snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
  char* argv[ARCHIVES + 3] = {kpack, "info"};
  for (size_t i = 0; i < ARCHIVES; i++)
    argv[2 + i] = in->paths[i];
  double seconds[MOUNT_REPS];
  for (int r = 0; r < MOUNT_REPS; r++) {
    evict_all(in, false);
    seconds[r] = bn_run_ok(argv).seconds;
  }
  return bn_median(seconds, MOUNT_REPS);
}

static void mounts(const bench_data* d, const install* in) {
  char kpackfs[600], kdir[600], qdir[600], value[160];
  snprintf(kpackfs, sizeof(kpackfs), "%s/kpackfs", d->bin);
  snprintf(kdir, sizeof(kdir), "%s/mnt-install-kpackfs", d->dir);
  snprintf(qdir, sizeof(qdir), "%s/mnt-install-squashfuse", d->dir);
  char* kargv[] = {kpackfs, "-f", (char*)in->kpack, kdir, NULL};
  char* qargv[] = {"squashfuse_ll", "-f", (char*)in->image, qdir, NULL};
  install_run k = {.have_phases = true}, q = {0};
  run_mounts(kargv, kdir, in, false, &k);
  if (d->have_squashfuse)
    run_mounts(qargv, qdir, in, true, &q);

  /* An absolute time holds on one machine only: the mount is measured
   * against what opening the same TOCs costs on this one, in this run. */
  double km = bn_median(k.mount, MOUNT_REPS);
  double ki = info_all(d, in);
  snprintf(value, sizeof(value),
           "%.2fx (%.0f vs %.0f ms; squashfuse_ll: %.0f ms)", km / ki, km * 1e3,
           ki * 1e3,
           d->have_squashfuse ? bn_median(q.mount, MOUNT_REPS) * 1e3 : 0.0);
  bn_row("install: kpackfs mount of 420 archives vs kpack info of them", value,
         "<= 1.50x", km / ki <= 1.5);
  if (k.have_phases) {
    bn_phases_text(value, sizeof(value), k.phases, MOUNT_REPS);
    bn_row_info("install: kpackfs mount, its phases", value,
                "where the time goes");
  }

  double rss = bn_median(k.rss_mounted, REPS);
  double pages = bn_median(k.archive_mounted, REPS);
  if (pages > 0)
    snprintf(value, sizeof(value), "%.1f MiB (+ %.1f MiB archive pages)", rss,
             pages);
  else
    snprintf(value, sizeof(value), "%.1f MiB", rss);
  bn_row("install: kpackfs daemon RSS after the mount", value, "<= 48 MiB",
         rss <= 48.0);

  double hwm = bn_median(k.hwm_walked, REPS);
  pages = bn_median(k.archive_walked, REPS);
  if (pages > 0)
    snprintf(value, sizeof(value),
             "%.1f MiB (+ %.1f MiB archive pages; %zu entries walked)", hwm,
             pages, k.entries);
  else
    snprintf(value, sizeof(value), "%.1f MiB (%zu entries walked)", hwm,
             k.entries);
  bn_row("install: kpackfs daemon peak RSS after a full walk", value,
         "<= 48 MiB", hwm <= 48.0);

  if (!d->have_squashfuse) {
    bn_row_not_run("install: first walk, kpackfs vs squashfuse_ll", "<= 1.00x",
                   "squashfuse_ll or mksquashfs missing");
    return;
  }
  double kw = bn_median(k.walk, REPS), qw = bn_median(q.walk, REPS);
  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)", kw / qw, kw, qw);
  bn_row("install: first walk, kpackfs vs squashfuse_ll", value, "<= 1.00x",
         kw / qw <= 1.0);
}

void bench_install(const bench_data* d) {
  install in;
  prepare_install(d, &in);
  bytes_per_kernel(&in);
  if (d->bin != NULL) {
    list_all(d, &in);
    mounts(d, &in);
  }
  for (size_t i = 0; i < ARCHIVES; i++)
    free(in.paths[i]);
}
