/* SPDX-License-Identifier: MIT
 *
 * `make bench`: the performance table of SPEC §6. Every row is a ratio of
 * two measurements taken in this run (medians of several repetitions), so
 * a noisy machine shifts both sides alike. It reports; it never fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <msgpack.h>
#include <zstd.h>

#include "fixture_fatbin.h"
#include "rocm_kpack/kpack_ext.h"

#define REPS 5

typedef struct corpus {
  const char* path;
  size_t count;
  char (*binaries)[40];
  const char** arches;
} corpus;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(*v), compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void row(const char* name, const char* value, const char* target,
                int pass) {
  printf("| %-62s | %-22s | %-16s | %-4s |\n", name, value, target,
         pass ? "PASS" : "MISS");
  fflush(stdout);
}

static void die(const char* what, kpack_error_t err) {
  fprintf(stderr, "bench: %s: %s\n", what, kpack_error_string(err));
  exit(1);
}

static void make_archive(const char* path, kpack_compression_scheme_t scheme,
                         size_t count, size_t size) {
  if (access(path, R_OK) == 0)
    return;
  fprintf(stderr, "bench: generating %s (%zu x %zu bytes)\n", path, count,
          size);
  kpack_writer_options_t o = {.scheme = scheme,
                              .threads = 2,
                              .group_name = "bench",
                              .gfx_arch_family = "gfx9"};
  kpack_writer_t* w;
  kpack_error_t err = kpack_writer_create(path, &o, &w);
  if (err)
    die(path, err);
  uint8_t* buf = malloc(size);
  for (size_t i = 0; i < count; i++) {
    char bin[40];
    snprintf(bin, sizeof bin, "lib/libbench%zu.so#%zu", i / 4, i % 4 / 2);
    fx_fill_code(buf, size, (uint32_t)i);
    err =
        kpack_writer_add_kernel(w, bin, i % 2 ? "gfx942" : "gfx90a", buf, size);
    if (err)
      die("add kernel", err);
  }
  free(buf);
  if ((err = kpack_writer_finish(w)))
    die("finish", err);
}

/* ---- rows
 * -------------------------------------------------------------------- */

typedef struct kernel_ref {
  const char* binary;
  const char* arch;
} kernel_ref;

static kernel_ref* list_kernels(kpack_archive_t a, size_t* count) {
  size_t nb, n = 0;
  kpack_get_kernel_count(a, count);
  kernel_ref* refs = calloc(*count, sizeof(*refs));
  kpack_get_binary_count(a, &nb);
  for (size_t i = 0; i < nb; i++) {
    const char* b;
    size_t na;
    kpack_get_binary(a, i, &b);
    kpack_get_binary_arch_count(a, b, &na);
    for (size_t j = 0; j < na; j++) {
      refs[n].binary = b;
      kpack_get_binary_arch(a, b, j, &refs[n].arch);
      n++;
    }
  }
  return refs;
}

/* Opens an archive (or exits) and lists its kernels. */
static kpack_archive_t open_listed(const char* path, kernel_ref** refs,
                                   size_t* count) {
  kpack_archive_t a;
  kpack_error_t err = kpack_open(path, &a);
  if (err)
    die(path, err);
  *refs = list_kernels(a, count);
  return a;
}

static double time_get_all(kpack_archive_t a, kernel_ref* refs, size_t n,
                           uint64_t* bytes) {
  double t = now();
  *bytes = 0;
  for (size_t i = 0; i < n; i++) {
    void* d;
    size_t s;
    kpack_error_t err =
        kpack_get_kernel(a, refs[i].binary, refs[i].arch, &d, &s);
    if (err)
      die("get kernel", err);
    *bytes += s;
    kpack_free_kernel(d);
  }
  return now() - t;
}

/* Row 1: kpack_get_kernel vs ZSTD_decompressDCtx of the same frames held in
 * memory, into one reused buffer: the decompressor's own limit. */
static void bench_zstd_decode(const char* path) {
  size_t n;
  kernel_ref* refs;
  kpack_archive_t a = open_listed(path, &refs, &n);
  int fd = open(path, O_RDONLY);
  void** frames = calloc(n, sizeof(*frames));
  size_t* frame_sizes = calloc(n, sizeof(*frame_sizes));
  size_t max = 0;
  for (size_t i = 0; i < n; i++) {
    kpack_kernel_info_t info;
    kpack_get_kernel_info(a, refs[i].binary, refs[i].arch, &info);
    frames[i] = malloc(info.stored_size);
    frame_sizes[i] = info.stored_size;
    if (pread(fd, frames[i], info.stored_size, (off_t)info.offset) < 0)
      exit(1);
    if (info.size > max)
      max = info.size;
  }
  close(fd);
  void* out = malloc(max);
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  double lib[REPS], raw[REPS];
  uint64_t bytes = 0;
  for (int r = 0; r < REPS; r++) {
    lib[r] = time_get_all(a, refs, n, &bytes);
    double t = now();
    for (size_t i = 0; i < n; i++)
      if (ZSTD_isError(
              ZSTD_decompressDCtx(dctx, out, max, frames[i], frame_sizes[i])))
        exit(1);
    raw[r] = now() - t;
  }
  double l = median(lib, REPS), z = median(raw, REPS);
  char value[64];
  snprintf(value, sizeof value, "%.2fx (%.0f vs %.0f MB/s)", z / l,
           bytes / l / 1e6, bytes / z / 1e6);
  row("kpack_get_kernel (zstd) vs raw ZSTD_decompressDCtx", value, ">= 0.90x",
      z / l >= 0.9);
  for (size_t i = 0; i < n; i++)
    free(frames[i]);
  free(frames);
  free(frame_sizes);
  free(out);
  free(refs);
  ZSTD_freeDCtx(dctx);
  kpack_close(a);
}

/* Row 2: raw blobs vs memcpy of the same bytes already in memory (the file
 * is in the page cache after the first repetition). */
static void bench_raw_copy(const char* path) {
  size_t n;
  kernel_ref* refs;
  kpack_archive_t a = open_listed(path, &refs, &n);
  kpack_kernel_info_t info;
  kpack_get_kernel_info(a, refs[0].binary, refs[0].arch, &info);
  size_t size = info.size;
  uint8_t* src = malloc(size * n);
  for (size_t i = 0; i < n; i++)
    fx_fill_code(src + i * size, size, (uint32_t)i);
  double lib[REPS], raw[REPS];
  uint64_t bytes = 0;
  for (int r = 0; r < REPS; r++) {
    lib[r] = time_get_all(a, refs, n, &bytes);
    double t = now();
    for (size_t i = 0; i < n; i++) {
      void* d = malloc(size);
      memcpy(d, src + i * size, size);
      __asm__ volatile("" : : "r"(d) : "memory");
      free(d);
    }
    raw[r] = now() - t;
  }
  double l = median(lib, REPS), m = median(raw, REPS);
  char value[64];
  snprintf(value, sizeof value, "%.2fx (%.0f vs %.0f MB/s)", m / l,
           bytes / l / 1e6, bytes / m / 1e6);
  row("kpack_get_kernel (none) vs malloc+memcpy from memory", value, ">= 0.80x",
      m / l >= 0.8);
  free(src);
  free(refs);
  kpack_close(a);
}

static long proc_value(const char* file, const char* key) {
  FILE* f = fopen(file, "r");
  char line[256];
  long v = -1;
  size_t k = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, k) == 0)
      v = atol(line + k);
  if (f)
    fclose(f);
  return v;
}

/* Row 3: what opening costs: bytes read and resident memory. */
static void bench_open(const char* path) {
  struct stat st;
  stat(path, &st);
  int fd = open(path, O_RDONLY);
  uint8_t header[16];
  if (pread(fd, header, 16, 0) != 16)
    exit(1);
  close(fd);
  uint64_t toc_offset = 0;
  for (int i = 7; i >= 0; i--)
    toc_offset = toc_offset << 8 | header[8 + i];
  uint64_t toc = (uint64_t)st.st_size - toc_offset;

  long rchar0 = proc_value("/proc/self/io", "rchar: ");
  long rss0 = proc_value("/proc/self/status", "VmRSS:");
  double t = now();
  kpack_archive_t a;
  kpack_error_t err = kpack_open(path, &a);
  t = now() - t;
  if (err)
    die(path, err);
  long rchar1 = proc_value("/proc/self/io", "rchar: ");
  long rss1 = proc_value("/proc/self/status", "VmRSS:");
  /* The /proc reads themselves count in rchar; one status read is ~1.5 KB. */
  long read_bytes = rchar1 - rchar0;
  long rss = (rss1 - rss0) * 1024;
  char value[64];
  snprintf(value, sizeof value, "%ld B read, +%ld KB RSS", read_bytes,
           rss / 1024);
  char target[64];
  snprintf(target, sizeof target, "< %llu KB",
           (unsigned long long)(4096 + 2 * toc / 1024));
  int pass = (uint64_t)read_bytes < toc + 16 + 4 * 2001 + 8192 &&
             (uint64_t)rss < 4 * 1024 * 1024 + 2 * toc;
  char name[128];
  snprintf(name, sizeof name,
           "kpack_open 2,000 kernels / %.0f MB (TOC %.0f KB, %.1f ms)",
           st.st_size / 1e6, toc / 1e3, t * 1e3);
  row(name, value, target, pass);
  kpack_close(a);
}

typedef struct random_reader {
  kpack_archive_t archive;
  kernel_ref* refs;
  size_t count;
  unsigned seed;
  int calls;
} random_reader;

static void* random_reads(void* p) {
  random_reader* r = p;
  for (int i = 0; i < r->calls; i++) {
    r->seed = r->seed * 1103515245u + 12345u;
    kernel_ref* k = &r->refs[(r->seed >> 8) % r->count];
    void* d;
    size_t s;
    if (kpack_get_kernel(r->archive, k->binary, k->arch, &d, &s))
      exit(1);
    kpack_free_kernel(d);
  }
  return NULL;
}

static double run_threads(kpack_archive_t a, kernel_ref* refs, size_t n,
                          int threads, int calls) {
  pthread_t t[8];
  random_reader r[8];
  double start = now();
  for (int i = 0; i < threads; i++) {
    r[i] = (random_reader){a, refs, n, (unsigned)i * 7 + 1, calls};
    pthread_create(&t[i], NULL, random_reads, &r[i]);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  return now() - start;
}

/* Row 4: two threads on one handle vs one thread, same calls per thread. */
static void bench_threads(const char* path) {
  size_t n;
  kernel_ref* refs;
  kpack_archive_t a = open_listed(path, &refs, &n);
  double one[REPS], two[REPS];
  for (int r = 0; r < REPS; r++) {
    one[r] = run_threads(a, refs, n, 1, 1500);
    two[r] = run_threads(a, refs, n, 2, 1500);
  }
  /* throughput ratio: two threads did twice the calls */
  double ratio = 2 * median(one, REPS) / median(two, REPS);
  char value[32];
  snprintf(value, sizeof value, "%.2fx", ratio);
  row("2 threads random kpack_get_kernel vs 1 thread (throughput)", value,
      ">= 1.70x", ratio >= 1.7);
  free(refs);
  kpack_close(a);
}

/* Row 5: the loader with a warm cache (archive already open) vs a direct
 * kpack_get_kernel of the same kernel: the cost of metadata parsing, path
 * resolution and target matching per call. */
static void bench_loader(const char* path) {
  char abs[4096], binary[4200];
  if (realpath(path, abs) == NULL)
    exit(1);
  snprintf(binary, sizeof binary, "%s.host", abs);
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "kernel_name", 11);
  msgpack_pack_str_with_body(&pk, "lib/libbench7.so", 16);
  msgpack_pack_str_with_body(&pk, "kpack_search_paths", 18);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_str_with_body(&pk, abs, strlen(abs));

  kpack_cache_t cache;
  kpack_archive_t a;
  kpack_error_t err = kpack_cache_create(&cache);
  if (!err)
    err = kpack_open(path, &a);
  if (err)
    die("loader setup", err);
  const char* arches[] = {"gfx90a:sramecc+:xnack-"};
  enum { CALLS = 200 };
  double load[REPS], get[REPS];
  for (int r = 0; r < REPS; r++) {
    double t = now();
    for (int i = 0; i < CALLS; i++) {
      void* d;
      size_t s;
      err =
          kpack_load_code_object(cache, buf.data, binary, 0, arches, 1, &d, &s);
      if (err)
        die("kpack_load_code_object", err);
      kpack_free_code_object(d);
    }
    load[r] = now() - t;
    t = now();
    for (int i = 0; i < CALLS; i++) {
      void* d;
      size_t s;
      err = kpack_get_kernel(a, "lib/libbench7.so#0", "gfx90a", &d, &s);
      if (err)
        die("kpack_get_kernel", err);
      kpack_free_kernel(d);
    }
    get[r] = now() - t;
  }
  double ratio = median(load, REPS) / median(get, REPS);
  char value[64];
  snprintf(value, sizeof value, "%.2fx (%.0f vs %.0f us/call)", ratio,
           median(load, REPS) / CALLS * 1e6, median(get, REPS) / CALLS * 1e6);
  row("kpack_load_code_object (warm) vs kpack_get_kernel, per call", value,
      "<= 1.20x", ratio <= 1.2);
  kpack_close(a);
  kpack_cache_destroy(cache);
  msgpack_sbuffer_destroy(&buf);
}

/* ---- kpackfs
 * ------------------------------------------------------------------ */

typedef struct mount {
  pid_t pid;
  char dir[512];
} mount;

/* Starts `kpackfs -f SOURCE DIR [-o OPTS]` and waits until DIR is a mount. */
static double mount_start(mount* m, const char* bin, const char* source,
                          const char* dir, const char* opts) {
  char kpackfs[600];
  struct stat before, now_st;
  snprintf(kpackfs, sizeof kpackfs, "%s/kpackfs", bin);
  snprintf(m->dir, sizeof m->dir, "%s", dir);
  mkdir(dir, 0755);
  stat(dir, &before);
  double t = now();
  m->pid = fork();
  if (m->pid == 0) {
    if (opts)
      execl(kpackfs, "kpackfs", "-f", source, dir, "-o", opts, (char*)NULL);
    else
      execl(kpackfs, "kpackfs", "-f", source, dir, (char*)NULL);
    _exit(127);
  }
  for (int i = 0; i < 20000; i++) {
    if (stat(dir, &now_st) == 0 && now_st.st_dev != before.st_dev)
      return now() - t;
    if (waitpid(m->pid, NULL, WNOHANG) == m->pid)
      break;
    usleep(100);
  }
  fprintf(stderr, "bench: kpackfs did not mount %s\n", dir);
  exit(1);
}

static void mount_stop(mount* m) {
  kill(m->pid, SIGTERM);
  waitpid(m->pid, NULL, 0);
}

static long daemon_rss_kb(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  return proc_value(path, "VmRSS:");
}

/* Reads every kernel file once through the mount, in TOC order. */
static double read_all_files(const char* dir, kernel_ref* refs, size_t n,
                             uint64_t* bytes) {
  static char buf[1 << 20];
  char path[1024];
  double t = now();
  *bytes = 0;
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s/%s/kernel.hsaco", dir, refs[i].binary,
             refs[i].arch);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
      perror(path);
      exit(1);
    }
    for (ssize_t r; (r = read(fd, buf, sizeof buf)) > 0;)
      *bytes += (size_t)r;
    close(fd);
  }
  return now() - t;
}

/* Rows 6, 7, 9: reading through the mount. The in-process side decompresses
 * the same kernels with the archive's pages cached, as the daemon's are. */
static void bench_kpackfs_reads(const char* bin, const char* path,
                                const char* dir) {
  size_t n;
  kernel_ref* refs;
  kpack_archive_t a = open_listed(path, &refs, &n);
  uint64_t bytes;
  double inproc[REPS], first[REPS], second[REPS];
  long rss = 0;
  for (int r = 0; r < REPS; r++) {
    inproc[r] = time_get_all(a, refs, n, &bytes);
    mount m;
    mount_start(&m, bin, path, dir, NULL);
    first[r] = read_all_files(dir, refs, n, &bytes);
    second[r] = read_all_files(dir, refs, n, &bytes);
    long kb = daemon_rss_kb(m.pid);
    if (kb > rss)
      rss = kb;
    mount_stop(&m);
  }
  double i = median(inproc, REPS), f = median(first, REPS),
         s2 = median(second, REPS);
  char value[64];
  snprintf(value, sizeof value, "%.2fx (%.0f vs %.0f MB/s)", i / f,
           bytes / f / 1e6, bytes / i / 1e6);
  row("kpackfs: read every kernel once vs in-process kpack_get_kernel", value,
      ">= 0.75x", i / f >= 0.75);
  snprintf(value, sizeof value, "%.1fx (%.0f MB/s)", f / s2, bytes / s2 / 1e6);
  row("kpackfs: second read (page cache) vs first read", value, ">= 5x",
      f / s2 >= 5);
  snprintf(value, sizeof value, "%ld MB", rss / 1024);
  row("kpackfs: daemon RSS after reading 500 MB, budget 256 MB", value,
      "<= 272 MB", rss <= (256 + 16) * 1024);
  free(refs);
  kpack_close(a);
}

static size_t walk(const char* path) {
  size_t count = 1;
  DIR* d = opendir(path);
  if (d == NULL)
    return count;
  char child[4096];
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(child, sizeof child, "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(child, &st) != 0)
      continue;
    count += S_ISDIR(st.st_mode) ? walk(child) : 1;
  }
  closedir(d);
  return count;
}

/* The same tree on tmpfs: what this machine's VFS needs to walk it at all. */
static double walk_tmpfs_twin(kpack_archive_t a, kernel_ref* refs, size_t n) {
  char root[] = "/dev/shm/kpack-bench-XXXXXX", path[4096];
  if (mkdtemp(root) == NULL)
    return 0;
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", root, refs[i].binary, refs[i].arch);
    for (char* p = path + strlen(root) + 1; *p; p++)
      if (*p == '/') {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
      }
    mkdir(path, 0755);
    strcat(path, "/kernel.hsaco");
    close(open(path, O_CREAT | O_WRONLY, 0644));
  }
  (void)a;
  double t = now();
  walk(root);
  t = now() - t;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd) != 0)
    fprintf(stderr, "bench: could not remove %s\n", root);
  return t;
}

/* Row 8: mount and list a 20,000-kernel archive, as `find` would. */
static void bench_kpackfs_listing(const char* bin, const char* path,
                                  const char* dir) {
  size_t n;
  kernel_ref* refs;
  kpack_archive_t a = open_listed(path, &refs, &n);
  double total[REPS], again[REPS], mounts[REPS];
  size_t entries = 0;
  for (int r = 0; r < REPS; r++) {
    mount m;
    double t = now();
    mounts[r] = mount_start(&m, bin, path, dir, NULL);
    entries = walk(dir);
    total[r] = now() - t;
    t = now();
    walk(dir);
    again[r] = now() - t;
    mount_stop(&m);
  }
  double twin = walk_tmpfs_twin(a, refs, n);
  double tt = median(total, REPS);
  char value[96], name[128];
  snprintf(value, sizeof value, "%.2f s (mount %.2f s, again %.2f s)", tt,
           median(mounts, REPS), median(again, REPS));
  snprintf(name, sizeof name,
           "kpackfs: mount + walk %zu kernels (%zu entries; tmpfs: %.2f s)", n,
           entries, twin);
  row(name, value, "< 0.2 s", tt < 0.2);
  free(refs);
  kpack_close(a);
}

/* Row 10: `kpack create -j2` vs `-j1` on the same extracted tree. */
static void bench_create(const char* bin, const char* dir) {
  char tree[600], out[600], cmd[2048];
  snprintf(tree, sizeof tree, "%s/tree-400x256k", dir);
  snprintf(out, sizeof out, "%s/created.kpack", dir);
  if (access(tree, F_OK) != 0) {
    char src[600];
    snprintf(src, sizeof src, "%s/k400-256k-none.kpack", dir);
    make_archive(src, KPACK_COMPRESSION_NOOP, 400, 256 << 10);
    snprintf(cmd, sizeof cmd, "%s/kpack extract -C %s %s", bin, tree, src);
    if (system(cmd) != 0)
      exit(1);
  }
  double j1[REPS], j2[REPS];
  for (int r = 0; r < REPS; r++) {
    for (int j = 1; j <= 2; j++) {
      snprintf(cmd, sizeof cmd, "%s/kpack create -q -j%d -o %s %s", bin, j, out,
               tree);
      double t = now();
      if (system(cmd) != 0)
        exit(1);
      (j == 1 ? j1 : j2)[r] = now() - t;
    }
  }
  double ratio = median(j1, REPS) / median(j2, REPS);
  char value[64];
  snprintf(value, sizeof value, "%.2fx (%.0f vs %.0f MB/s)", ratio,
           100.0 * 1.048576 / median(j2, REPS),
           100.0 * 1.048576 / median(j1, REPS));
  row("kpack create -j2 vs -j1 (400 x 256 KiB, level 3)", value, ">= 1.80x",
      ratio >= 1.8);
  unlink(out);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".cache/bench";
  const char* bin = argc > 2 ? argv[2] : NULL;
  char zstd_path[512], raw_path[512], small_path[512], mnt[512];
  mkdir(dir, 0755);
  snprintf(zstd_path, sizeof zstd_path, "%s/k2000-256k-zstd.kpack", dir);
  snprintf(raw_path, sizeof raw_path, "%s/k2000-256k-none.kpack", dir);
  snprintf(small_path, sizeof small_path, "%s/k20000-4k-zstd.kpack", dir);
  snprintf(mnt, sizeof mnt, "%s/mnt", dir);
  make_archive(zstd_path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2000, 256 << 10);
  make_archive(raw_path, KPACK_COMPRESSION_NOOP, 2000, 256 << 10);
  make_archive(small_path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 20000, 4 << 10);

  printf("| %-62s | %-22s | %-16s | %-4s |\n", "row", "measured", "target", "");
  printf("|%s|%s|%s|%s|\n",
         "----------------------------------------------------------------",
         "------------------------", "------------------", "------");
  bench_open(zstd_path);
  bench_zstd_decode(zstd_path);
  bench_raw_copy(raw_path);
  /* In a child of its own: the rows before leave glibc's heap thresholds
   * tuned to their own allocations, which skewed thread scaling. */
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    bench_threads(zstd_path);
    _exit(0);
  }
  waitpid(child, NULL, 0);
  bench_loader(zstd_path);
  if (bin != NULL) {
    bench_kpackfs_reads(bin, zstd_path, mnt);
    bench_kpackfs_listing(bin, small_path, mnt);
    bench_create(bin, dir);
  }
  return 0;
}
