/* SPDX-License-Identifier: MIT
 *
 * libkpack rows: opening an archive (cold and warm) against reading and
 * parsing its TOC alone, decompression against raw zstd, raw blobs against
 * a pread of the same bytes, two threads against one, and the loader
 * against a direct read.
 */
#include <fcntl.h>
#include <malloc.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "bench.h"

#define REPS 5
#define OPEN_REPS 9

static uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* What any reader of the format must do at least: read the header and the
 * TOC, and decode the msgpack (msgpack-c, into one zone). */
static double toc_read_and_parse(const char* path, uint64_t* toc_size) {
  double t = bn_now();
  int fd = open(path, O_RDONLY);
  uint8_t header[16];
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || pread(fd, header, 16, 0) != 16)
    bn_die("%s: cannot read the header", path);
  uint64_t offset = le64(header + 8);
  size_t size = (size_t)((uint64_t)st.st_size - offset);
  char* toc = malloc(size);
  if (toc == NULL || pread(fd, toc, size, (off_t)offset) != (ssize_t)size)
    bn_die("%s: cannot read the TOC", path);
  msgpack_zone zone;
  msgpack_object root;
  size_t off = 0;
  msgpack_zone_init(&zone, 1 << 16);
  if (msgpack_unpack(toc, size, &off, &zone, &root) != MSGPACK_UNPACK_SUCCESS)
    bn_die("%s: the TOC does not parse", path);
  msgpack_zone_destroy(&zone);
  free(toc);
  close(fd);
  *toc_size = size;
  return bn_now() - t;
}

static double time_open(const char* path) {
  kpack_archive_t a;
  double t = bn_now();
  kpack_error_t err = kpack_open(path, &a);
  t = bn_now() - t;
  if (err != KPACK_SUCCESS)
    bn_die_kpack(path, err);
  kpack_close(a);
  return t;
}

/* Heap bytes in use, mapped chunks included: what an open adds to RSS,
 * whatever the heap held free before. */
static long heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return (long)(m.uordblks + m.hblkhd);
}

/* Opening reads no payload, and memory grows by little more than the TOC. */
static void open_footprint(const char* path) {
  uint8_t header[16];
  int fd = open(path, O_RDONLY);
  if (fd < 0 || pread(fd, header, 16, 0) != 16)
    bn_die("%s: cannot read the header", path);
  close(fd);
  uint64_t toc = bn_file_size(path) - le64(header + 8);
  long rchar0 = bn_proc_value("/proc/self/io", "rchar: ");
  long heap0 = heap_in_use();
  kpack_archive_t a;
  kpack_error_t err = kpack_open(path, &a);
  if (err != KPACK_SUCCESS)
    bn_die_kpack(path, err);
  long heap1 = heap_in_use();
  long rchar1 = bn_proc_value("/proc/self/io", "rchar: ");
  /* The /proc read itself counts in rchar: about 1.5 KB. */
  long read_bytes = rchar1 - rchar0;
  long grown = heap1 - heap0;
  char value[64], target[64];
  snprintf(value, sizeof(value), "%ld B read, +%ld KB memory", read_bytes,
           grown / 1024);
  snprintf(target, sizeof(target), "< %llu B, < %llu KB",
           (unsigned long long)(toc + 16 + 8192),
           (unsigned long long)(4096 + 2 * toc / 1024));
  bool pass = (uint64_t)read_bytes < toc + 16 + 8192 &&
              (uint64_t)grown < (4u << 20) + 2 * toc;
  char name[128];
  snprintf(name, sizeof(name),
           "open 2,000 x 256 KiB (%.0f MB, TOC %.0f KB): bytes read, memory",
           bn_file_size(path) / 1e6, toc / 1e3);
  bn_row(name, value, target, pass);
  kpack_close(a);
}

/* kpack_open with the archive's pages evicted, against reading and parsing
 * the TOC alone, evicted too. */
static void cold_open(const char* path) {
  double open_t[OPEN_REPS], toc_t[OPEN_REPS];
  uint64_t toc = 0;
  for (int r = 0; r < OPEN_REPS; r++) {
    bn_evict(path);
    open_t[r] = time_open(path);
    bn_evict(path);
    toc_t[r] = toc_read_and_parse(path, &toc);
  }
  double o = bn_median(open_t, OPEN_REPS), p = bn_median(toc_t, OPEN_REPS);
  char value[64];
  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f ms)", o / p, o * 1e3,
           p * 1e3);
  bn_row("cold open 2,000 x 256 KiB vs read + parse its TOC, evicted", value,
         "<= 4.00x", o / p <= 4.0);
}

static void warm_open(const char* path, const char* name) {
  double open_t[OPEN_REPS], toc_t[OPEN_REPS];
  uint64_t toc = 0;
  bn_warm(path);
  (void)time_open(path);
  for (int r = 0; r < OPEN_REPS; r++) {
    open_t[r] = time_open(path);
    toc_t[r] = toc_read_and_parse(path, &toc);
  }
  double o = bn_median(open_t, OPEN_REPS), p = bn_median(toc_t, OPEN_REPS);
  char value[64];
  snprintf(value, sizeof(value), "%.2fx (%.1f vs %.1f ms)", o / p, o * 1e3,
           p * 1e3);
  bn_row(name, value, "<= 2.00x", o / p <= 2.0);
}

static double time_get_all(kpack_archive_t a, const bn_kernel* k, size_t n,
                           uint64_t* bytes) {
  double t = bn_now();
  *bytes = 0;
  for (size_t i = 0; i < n; i++) {
    void* d;
    size_t s;
    kpack_error_t err = kpack_get_kernel(a, k[i].binary, k[i].arch, &d, &s);
    if (err != KPACK_SUCCESS)
      bn_die_kpack("kpack_get_kernel", err);
    *bytes += s;
    kpack_free_kernel(d);
  }
  return bn_now() - t;
}

/* kpack_get_kernel against ZSTD_decompressDCtx of the same frames held in
 * memory, into one reused buffer: the decompressor's own limit. */
static void zstd_decode(const char* path) {
  size_t n;
  bn_kernel* k;
  kpack_archive_t a = bn_open_listed(path, &k, &n);
  int fd = open(path, O_RDONLY);
  void** frames = calloc(n, sizeof(*frames));
  size_t* frame_sizes = calloc(n, sizeof(*frame_sizes));
  size_t max = 0;
  for (size_t i = 0; i < n; i++) {
    kpack_kernel_info_t info;
    kpack_get_kernel_info(a, k[i].binary, k[i].arch, &info);
    frames[i] = malloc(info.stored_size);
    frame_sizes[i] = info.stored_size;
    if (pread(fd, frames[i], info.stored_size, (off_t)info.offset) < 0)
      bn_die("%s: cannot read", path);
    if (info.size > max)
      max = info.size;
  }
  close(fd);
  void* out = malloc(max);
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  double lib[REPS], raw[REPS];
  uint64_t bytes = 0;
  for (int r = 0; r < REPS; r++) {
    lib[r] = time_get_all(a, k, n, &bytes);
    double t = bn_now();
    for (size_t i = 0; i < n; i++)
      if (ZSTD_isError(
              ZSTD_decompressDCtx(dctx, out, max, frames[i], frame_sizes[i])))
        bn_die("%s: frame %zu does not decompress", path, i);
    raw[r] = bn_now() - t;
  }
  double l = bn_median(lib, REPS), z = bn_median(raw, REPS);
  char value[64];
  snprintf(value, sizeof(value), "%.2fx (%.0f vs %.0f MB/s)", z / l,
           bytes / l / 1e6, bytes / z / 1e6);
  bn_row("kpack_get_kernel (zstd) vs raw ZSTD_decompressDCtx", value,
         ">= 0.90x", z / l >= 0.9);
  for (size_t i = 0; i < n; i++)
    free(frames[i]);
  free(frames);
  free(frame_sizes);
  free(out);
  free(k);
  ZSTD_freeDCtx(dctx);
  kpack_close(a);
}

/* ---- every kernel once ----------------------------------------------------
 * What a program loading its kernels does: a fresh handle, each kernel got
 * once into memory of its own (kpack_get_kernel, kpack_free_kernel), per
 * kernel, the open and close not timed. Against the floor on the same run:
 * the same bytes from memory into fresh memory of each kernel's size, a
 * memcpy from a warm mapping of the archive (scheme none) or
 * ZSTD_decompressDCtx of the frames held in memory (zstd). ROCm's runtime
 * took 1.50 us a kernel on 20,000 x 4 KiB and 4.45 us on 3 x 1 KiB
 * (docs/performance.md). */

typedef struct once_floor {
  const uint8_t* map; /* the archive mapped, its pages touched */
  size_t map_size;
  void** frames; /* zstd: each frame, in memory */
  kpack_kernel_info_t* info;
  ZSTD_DCtx* dctx;
} once_floor;

static double floor_once(const once_floor* f, size_t n, bool zstd) {
  double t = bn_now();
  for (size_t i = 0; i < n; i++) {
    size_t size = (size_t)f->info[i].size;
    void* d = malloc(size ? size : 1);
    if (d == NULL)
      bn_die("out of memory");
    if (!zstd)
      memcpy(d, f->map + f->info[i].offset, size);
    else if (ZSTD_decompressDCtx(f->dctx, d, size, f->frames[i],
                                 (size_t)f->info[i].stored_size) != size)
      bn_die("frame %zu does not decompress", i);
    __asm__ volatile("" : : "r"(d) : "memory");
    free(d);
  }
  return bn_now() - t;
}

/* One round: a fresh handle, every kernel got once by the names in k, or,
 * with own_names, by the handle's own strings (found by address, no name
 * compared byte by byte). */
static double kpack_once(const char* path, const bn_kernel* k, size_t n,
                         bool own_names) {
  kpack_archive_t a;
  kpack_error_t err = kpack_open(path, &a);
  if (err != KPACK_SUCCESS)
    bn_die_kpack(path, err);
  bn_kernel* own = NULL;
  size_t listed = n;
  if (own_names) {
    bn_list(a, &own, &listed);
    k = own;
  }
  uint64_t bytes;
  double t = time_get_all(a, k, listed < n ? listed : n, &bytes);
  free(own);
  kpack_close(a);
  return t;
}

/* A time a kernel, in us, or in ns below 1 us. */
static void format_per_kernel(char* out, size_t cap, double seconds) {
  if (seconds < 1e-6)
    snprintf(out, cap, "%.1f ns", seconds * 1e9);
  else
    snprintf(out, cap, "%.2f us", seconds * 1e6);
}

/* The medians a kernel of kpack_once() and of the floor, in rounds that
 * take turns, enough for some 20,000 reads a repetition. */
static void once_ratio(const char* path, const bn_kernel* k, size_t n,
                       const once_floor* f, bool zstd, bool own_names,
                       double* lib_out, double* floor_out) {
  int rounds = n >= 20000 ? 1 : (int)(20000 / n);
  double lib[REPS], floor[REPS];
  for (int r = 0; r < REPS; r++) {
    lib[r] = floor[r] = 0;
    for (int i = 0; i < rounds; i++) {
      lib[r] += kpack_once(path, k, n, own_names);
      floor[r] += floor_once(f, n, zstd);
    }
  }
  double calls = (double)n * rounds;
  *lib_out = bn_median(lib, REPS) / calls;
  *floor_out = bn_median(floor, REPS) / calls;
}

/* own_names_row: also time rounds by the handle's own names, against a
 * floor of their own, and print that as an info row: the part of the
 * ratio that is not the lookup of the names. */
static void every_kernel_once(const char* path, const char* name,
                              double rocm_us, bool own_names_row) {
  size_t n;
  bn_kernel* k;
  kpack_archive_t listed = bn_open_listed(path, &k, &n);
  once_floor f = {.info = calloc(n, sizeof(kpack_kernel_info_t))};
  bool zstd = false;
  for (size_t i = 0; i < n; i++) {
    kpack_get_kernel_info(listed, k[i].binary, k[i].arch, &f.info[i]);
    zstd |= f.info[i].stored_size != f.info[i].size;
  }
  bn_warm(path);
  int fd = open(path, O_RDONLY);
  f.map_size = (size_t)bn_file_size(path);
  void* map = fd < 0 ? MAP_FAILED
                     : mmap(NULL, f.map_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    bn_die("%s: cannot map", path);
  f.map = map;
  volatile uint8_t sum = 0;
  for (size_t i = 0; i < f.map_size; i += 4096)
    sum += f.map[i];
  if (zstd) {
    f.dctx = ZSTD_createDCtx();
    f.frames = calloc(n, sizeof(void*));
    for (size_t i = 0; i < n; i++) {
      f.frames[i] = malloc((size_t)f.info[i].stored_size);
      memcpy(f.frames[i], f.map + f.info[i].offset,
             (size_t)f.info[i].stored_size);
    }
  }
  double l, p;
  once_ratio(path, k, n, &f, zstd, false, &l, &p);
  char lt[32], pt[32], value[128];
  format_per_kernel(lt, sizeof(lt), l);
  format_per_kernel(pt, sizeof(pt), p);
  double vs_rocm = rocm_us / (l * 1e6);
  snprintf(value, sizeof(value),
           "%.2fx (%s vs %s a kernel; ROCm's runtime %.2f us: %.*fx)", l / p,
           lt, pt, rocm_us, vs_rocm < 10 ? 2 : 0, vs_rocm);
  bn_row(name, value, "<= 1.20x", l / p <= 1.2);
  if (own_names_row) {
    double o, p2;
    once_ratio(path, k, n, &f, zstd, true, &o, &p2);
    char ot[32];
    format_per_kernel(ot, sizeof(ot), o);
    snprintf(value, sizeof(value), "%.2fx (%s a kernel)", o / p2, ot);
    bn_row_info("  the same by the handle's own names (no lookup by name)",
                value, "no target: the row above, less its lookups");
  }
  if (zstd) {
    for (size_t i = 0; i < n; i++)
      free(f.frames[i]);
    free(f.frames);
    ZSTD_freeDCtx(f.dctx);
  }
  munmap(map, f.map_size);
  close(fd);
  free(f.info);
  free(k);
  kpack_close(listed);
}

/* Warm open and close of 2,000 x 256 KiB, against 100 times faster than
 * ROCm's runtime (137 ms: it reads the whole payload at open). */
static void warm_open_close(const char* path, const char* name) {
  double t[OPEN_REPS * 4];
  bn_warm(path);
  (void)time_open(path);
  for (int r = 0; r < OPEN_REPS * 4; r++) {
    kpack_archive_t a;
    double s = bn_now();
    kpack_error_t err = kpack_open(path, &a);
    if (err != KPACK_SUCCESS)
      bn_die_kpack(path, err);
    kpack_close(a);
    t[r] = bn_now() - s;
  }
  double o = bn_median(t, OPEN_REPS * 4);
  char value[96];
  snprintf(value, sizeof(value), "%.3f ms (ROCm's runtime 137 ms: %.0fx)",
           o * 1e3, 0.137 / o);
  bn_row(name, value, "<= 1.37 ms", o <= 1.37e-3);
}

/* Raw blobs against what any reader must do at least: a pread of the same
 * bytes (cached) into fresh memory of the kernel's size. */
static void raw_blobs(const char* path) {
  size_t n;
  bn_kernel* k;
  kpack_archive_t a = bn_open_listed(path, &k, &n);
  kpack_kernel_info_t* info = calloc(n, sizeof(*info));
  for (size_t i = 0; i < n; i++)
    kpack_get_kernel_info(a, k[i].binary, k[i].arch, &info[i]);
  int fd = open(path, O_RDONLY);
  bn_warm(path);
  double lib[REPS], raw[REPS];
  uint64_t bytes = 0;
  for (int r = 0; r < REPS; r++) {
    lib[r] = time_get_all(a, k, n, &bytes);
    double t = bn_now();
    for (size_t i = 0; i < n; i++) {
      void* d = malloc(info[i].size);
      if (d == NULL || pread(fd, d, info[i].size, (off_t)info[i].offset) !=
                           (ssize_t)info[i].size)
        bn_die("%s: cannot read", path);
      __asm__ volatile("" : : "r"(d) : "memory");
      free(d);
    }
    raw[r] = bn_now() - t;
  }
  double l = bn_median(lib, REPS), p = bn_median(raw, REPS);
  char value[64];
  snprintf(value, sizeof(value), "%.2fx (%.0f vs %.0f MB/s)", p / l,
           bytes / l / 1e6, bytes / p / 1e6);
  bn_row("kpack_get_kernel (none) vs pread into fresh memory", value,
         ">= 0.90x", p / l >= 0.9);
  close(fd);
  free(info);
  free(k);
  kpack_close(a);
}

typedef struct random_reader {
  kpack_archive_t archive;
  const bn_kernel* kernels;
  size_t count;
  unsigned seed;
  int calls;
} random_reader;

static void* random_reads(void* p) {
  random_reader* r = p;
  for (int i = 0; i < r->calls; i++) {
    r->seed = r->seed * 1103515245u + 12345u;
    const bn_kernel* k = &r->kernels[(r->seed >> 8) % r->count];
    void* d;
    size_t s;
    if (kpack_get_kernel(r->archive, k->binary, k->arch, &d, &s))
      exit(1);
    kpack_free_kernel(d);
  }
  return NULL;
}

static double run_threads(kpack_archive_t a, const bn_kernel* k, size_t n,
                          int threads, int calls) {
  pthread_t t[2];
  random_reader r[2];
  double start = bn_now();
  for (int i = 0; i < threads; i++) {
    r[i] = (random_reader){a, k, n, (unsigned)i * 7 + 1, calls};
    pthread_create(&t[i], NULL, random_reads, &r[i]);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  return bn_now() - start;
}

/* Two threads on one handle against one thread, the same calls each. Run in
 * a child: the rows before leave glibc's heap thresholds tuned to their own
 * allocations, which skewed thread scaling. */
static void two_threads(const char* path) {
  fflush(stdout);
  pid_t child = fork();
  if (child != 0) {
    waitpid(child, NULL, 0);
    return;
  }
  size_t n;
  bn_kernel* k;
  kpack_archive_t a = bn_open_listed(path, &k, &n);
  double one[REPS], two[REPS];
  for (int r = 0; r < REPS; r++) {
    one[r] = run_threads(a, k, n, 1, 1500);
    two[r] = run_threads(a, k, n, 2, 1500);
  }
  double ratio = 2 * bn_median(one, REPS) / bn_median(two, REPS);
  char value[32];
  snprintf(value, sizeof(value), "%.2fx", ratio);
  bn_row("2 threads random kpack_get_kernel vs 1 thread (throughput)", value,
         ">= 1.70x", ratio >= 1.7);
  free(k);
  kpack_close(a);
  _exit(0);
}

/* The loader with a warm cache (archive already open) against a direct
 * kpack_get_kernel of the same kernel: the cost of metadata parsing, path
 * resolution and target matching per call. */
static void loader(const char* path) {
  char abs[4096], binary[4200];
  if (realpath(path, abs) == NULL)
    bn_die("%s: no such file", path);
  snprintf(binary, sizeof(binary), "%s.host", abs);
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
    bn_die_kpack("loader setup", err);
  const char* arches[] = {"gfx90a:sramecc+:xnack-"};
  enum { CALLS = 200 };
  double load[REPS], get[REPS];
  for (int r = 0; r < REPS; r++) {
    double t = bn_now();
    for (int i = 0; i < CALLS; i++) {
      void* d;
      size_t s;
      err =
          kpack_load_code_object(cache, buf.data, binary, 0, arches, 1, &d, &s);
      if (err)
        bn_die_kpack("kpack_load_code_object", err);
      kpack_free_code_object(d);
    }
    load[r] = bn_now() - t;
    t = bn_now();
    for (int i = 0; i < CALLS; i++) {
      void* d;
      size_t s;
      err = kpack_get_kernel(a, "lib/libbench7.so#0", "gfx90a", &d, &s);
      if (err)
        bn_die_kpack("kpack_get_kernel", err);
      kpack_free_kernel(d);
    }
    get[r] = bn_now() - t;
  }
  double ratio = bn_median(load, REPS) / bn_median(get, REPS);
  char value[64];
  snprintf(value, sizeof(value), "%.2fx (%.0f vs %.0f us/call)", ratio,
           bn_median(load, REPS) / CALLS * 1e6,
           bn_median(get, REPS) / CALLS * 1e6);
  bn_row("kpack_load_code_object (warm) vs kpack_get_kernel, per call", value,
         "<= 1.20x", ratio <= 1.2);
  kpack_close(a);
  kpack_cache_destroy(cache);
  msgpack_sbuffer_destroy(&buf);
}

/* What `kpack list --kernels` does per code object: parse it from the
 * prefix that holds its metadata note (kpack_kernel_code_object), against
 * what it did before, decompress it whole and parse that. Bytes that are
 * not a code object fail the parse the same way on both sides. */
static double parse_all(kpack_archive_t a, const bn_kernel* k, size_t n,
                        bool prefix, uint64_t* decoded) {
  double t = bn_now();
  *decoded = 0;
  for (size_t i = 0; i < n; i++) {
    kpack_code_object_t* co = NULL;
    uint64_t got = 0;
    kpack_error_t err;
    if (prefix) {
      err = kpack_kernel_code_object(a, k[i].binary, k[i].arch, &co, &got);
    } else {
      void* data;
      size_t size;
      err = kpack_get_kernel(a, k[i].binary, k[i].arch, &data, &size);
      if (err == KPACK_SUCCESS) {
        err = kpack_code_object_parse(data, size, &co);
        got = size;
        kpack_free_kernel(data);
      }
    }
    if (err == KPACK_ERROR_IO_ERROR || err == KPACK_ERROR_OUT_OF_MEMORY ||
        err == KPACK_ERROR_DECOMPRESSION_FAILED)
      bn_die_kpack("reading a code object", err);
    *decoded += got;
    kpack_code_object_free(co);
  }
  return bn_now() - t;
}

static void list_kernels(const bench_data* d) {
  static const char name[] =
      "list --kernels 1.23 GB: note from prefixes vs whole kernels";
  if (!bn_exists(d->fatbin_kpack)) {
    bn_row_not_run(name, ">= 3.00x", "no fat-binary archive (needs kpack)");
    return;
  }
  size_t n;
  bn_kernel* k;
  kpack_archive_t a = bn_open_listed(d->fatbin_kpack, &k, &n);
  double pre[REPS], whole[REPS];
  uint64_t pre_bytes = 0, whole_bytes = 0;
  for (int r = 0; r < REPS; r++) {
    pre[r] = parse_all(a, k, n, true, &pre_bytes);
    whole[r] = parse_all(a, k, n, false, &whole_bytes);
  }
  double p = bn_median(pre, REPS), w = bn_median(whole, REPS);
  char value[96];
  snprintf(value, sizeof(value), "%.1fx (%.3f vs %.3f s; %.1f%% decoded)",
           w / p, p, w, whole_bytes ? 100.0 * pre_bytes / whole_bytes : 0.0);
  bn_row(name, value, ">= 3.00x", w / p >= 3.0);
  free(k);
  kpack_close(a);
}

void bench_library(const bench_data* d) {
  open_footprint(d->zstd_2000);
  cold_open(d->zstd_2000);
  warm_open(d->zstd_20000,
            "warm open 20,000 x 4 KiB vs parse its TOC (frame-size table)");
  warm_open(d->plain_20000,
            "warm open 20,000 x 4 KiB vs parse its TOC (no table: ROCm's)");
  warm_open_close(d->zstd_2000, "warm open + close 2,000 x 256 KiB");
  warm_open_close(d->plain_2000,
                  "warm open + close 2,000 x 256 KiB (no table: ROCm's)");
  every_kernel_once(d->zstd_20000,
                    "every kernel once, 20,000 x 4 KiB (zstd) vs from memory",
                    1.50, false);
  every_kernel_once(d->none_3,
                    "every kernel once, 3 x 1 KiB (none) vs from memory", 4.45,
                    true);
  zstd_decode(d->zstd_2000);
  raw_blobs(d->none_2000);
  two_threads(d->zstd_2000);
  loader(d->zstd_2000);
  list_kernels(d);
}
