/* SPDX-License-Identifier: MIT
 *
 * `make bench`: generates the data sets once into the cache directory and
 * prints the performance table of docs/performance.md (rows in library.c,
 * create.c, mounts.c, transform.c, split.c and install.c). Usage: bench
 * CACHE_DIR [BIN_DIR [GROUPS]]; without BIN_DIR (kpack and kpackfs) only the
 * library rows run; GROUPS (e.g. "library,mounts") picks among library,
 * create, mounts, transform, split and install.
 *
 * Generated data is reused while it is current: fixture.stamp records the
 * code-object generator and the fat binary's shape, writer.stamp the bytes
 * the writer produces for a probe; a change in either regenerates what
 * depends on it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "fixture_toc.h"

/* ---- stamps -------------------------------------------------------------- */

static uint64_t fnv1a(const void* data, size_t size, uint64_t h) {
  const uint8_t* p = data;
  for (size_t i = 0; i < size; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* True when `path` holds `value`; otherwise stores it and returns false. */
static bool stamp_matches(const char* dir, const char* name, uint64_t value) {
  char path[600], want[32], have[32] = "";
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  snprintf(want, sizeof(want), "%016llx\n", (unsigned long long)value);
  FILE* f = fopen(path, "r");
  if (f != NULL) {
    if (fgets(have, sizeof(have), f) == NULL)
      have[0] = '\0';
    fclose(f);
  }
  if (strcmp(have, want) == 0)
    return true;
  f = fopen(path, "w");
  if (f == NULL || fputs(want, f) < 0 || fclose(f) != 0)
    bn_die("%s: cannot write", path);
  return false;
}

static void remove_path(const char* path) {
  char* argv[] = {"rm", "-rf", (char*)path, NULL};
  bn_run_ok(argv);
}

/* ---- archives ------------------------------------------------------------ */

static void make_archive(const char* path, kpack_compression_scheme_t scheme,
                         size_t count, size_t size) {
  if (bn_exists(path))
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
    bn_die_kpack(path, err);
  uint8_t* buf = malloc(size);
  for (size_t i = 0; i < count; i++) {
    char bin[40];
    snprintf(bin, sizeof(bin), "lib/libbench%zu.so#%zu", i / 4, i % 4 / 2);
    fx_fill_code(buf, size, (uint32_t)i);
    err =
        kpack_writer_add_kernel(w, bin, i % 2 ? "gfx942" : "gfx90a", buf, size);
    if (err)
      bn_die_kpack("add kernel", err);
  }
  free(buf);
  if ((err = kpack_writer_finish(w)))
    bn_die_kpack(path, err);
}

/* The writer's bytes for a small probe: what writer.stamp records. */
static uint64_t writer_fingerprint(const char* dir) {
  char path[600];
  snprintf(path, sizeof(path), "%s/probe.kpack", dir);
  unlink(path);
  make_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 8, 70000);
  int fd = open(path, O_RDONLY);
  uint64_t h = 1469598103934665603ull;
  uint8_t buf[65536];
  for (ssize_t n; fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0;)
    h = fnv1a(buf, (size_t)n, h);
  if (fd >= 0)
    close(fd);
  unlink(path);
  return h;
}

/* The same archive without the TOC's frame-size table, as ROCm's writer
 * makes them: the TOC re-packed with msgpack-c, minus that one key. */
static void strip_frame_table(const char* from, const char* to) {
  if (bn_exists(to))
    return;
  int fd = open(from, O_RDONLY);
  size_t size = (size_t)bn_file_size(from);
  uint8_t* bytes = malloc(size);
  if (fd < 0 || bytes == NULL || pread(fd, bytes, size, 0) != (ssize_t)size)
    bn_die("%s: cannot read", from);
  close(fd);
  uint64_t toc_offset = fx_toc_offset(bytes, size);
  fx_toc t;
  fx_toc_decode(&t, bytes, size, toc_offset);
  if (t.root.type != MSGPACK_OBJECT_MAP)
    bn_die("%s: the TOC is not a map", from);
  if (fx_toc_drop(&t.root, "zstd_frame_sizes") == 0)
    fprintf(stderr, "bench: note: %s has no frame-size table to strip\n", from);
  fx_toc_encode(&t, &bytes, &size, toc_offset);
  char tmp[600];
  snprintf(tmp, sizeof(tmp), "%s.tmp", to);
  FILE* f = fopen(tmp, "wb");
  if (f == NULL || fwrite(bytes, 1, size, f) != size || fclose(f) != 0 ||
      rename(tmp, to) != 0)
    bn_die("%s: cannot write", to);
  free(bytes);
}

/* ---- trees and images ---------------------------------------------------- */

static void extract_tree(const bench_data* d, const char* archive,
                         const char* tree) {
  if (bn_exists(tree))
    return;
  char kpack[600], tmp[600];
  snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
  snprintf(tmp, sizeof(tmp), "%s.tmp", tree);
  fprintf(stderr, "bench: extracting %s\n", tree);
  remove_path(tmp);
  char* argv[] = {kpack, "extract", "-C", tmp, (char*)archive, NULL};
  bn_run_ok(argv);
  if (rename(tmp, tree) != 0)
    bn_die("%s: cannot rename", tree);
}

/* What a squashfuse user would build: zstd, 1 MiB blocks, at the level the
 * archives use (kpack create's default, zstd -3), so that the rows compare
 * the two filesystems rather than two compression levels. mksquashfs's own
 * default, level 15, decompresses about 1.7x faster on these bytes; an
 * archive packed with `kpack create -l 15` matches it the same way. */
static void make_image(const char* tree, const char* image) {
  if (bn_exists(image))
    return;
  char tmp[600];
  snprintf(tmp, sizeof(tmp), "%s.tmp", image);
  fprintf(stderr, "bench: mksquashfs %s (once; a minute or more per GB)\n",
          image);
  char* argv[] = {"mksquashfs", (char*)tree,           tmp,      "-comp",
                  "zstd",       "-Xcompression-level", "3",      "-b",
                  "1M",         "-noappend",           "-quiet", "-no-progress",
                  NULL};
  bn_run_ok(argv);
  if (rename(tmp, image) != 0)
    bn_die("%s: cannot rename", image);
}

/* ---- the synthetic fat binary ---------------------------------------------
 * Shaped like a real HIP math library: 111 translation units, each a bundle
 * of 7 code objects of about 1.5 MiB (777 of them, 1.2 GB) that zstd -3
 * shrinks about 4.6x. */

static const char* const fatbin_arches[] = {
    "gfx900",        "gfx906:xnack-", "gfx908:xnack-", "gfx90a:xnack-",
    "gfx90a:xnack+", "gfx942",        "gfx1100"};

static void describe_fatbin(bench_data* d) {
  d->fatbin_spec = (fx_fatbin_spec){
      .bundle_count = 111,
      .arches = fatbin_arches,
      .arch_count = sizeof(fatbin_arches) / sizeof(fatbin_arches[0]),
      .code_object_size = 1600u << 10,
      .seed = 1};
  d->fatbin_bytes = 0;
  d->largest_code_object = 0;
  for (size_t b = 0; b < d->fatbin_spec.bundle_count; b++) {
    for (size_t a = 0; a < d->fatbin_spec.arch_count; a++) {
      size_t n = fx_fatbin_code_object_size(&d->fatbin_spec, b, a);
      d->fatbin_bytes += n;
      if (n > d->largest_code_object)
        d->largest_code_object = n;
    }
  }
}

static void make_dirs(char* path) {
  for (char* p = path + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  }
  mkdir(path, 0755);
}

/* The code objects the fat binary holds, as `kpack extract` would lay them
 * out after `kpack create --fatbin FATBIN=lib/libsynth.so`. */
static void write_fatbin_tree(const bench_data* d) {
  if (bn_exists(d->fatbin_tree))
    return;
  const fx_fatbin_spec* spec = &d->fatbin_spec;
  char tmp[600], path[1024];
  snprintf(tmp, sizeof(tmp), "%s.tmp", d->fatbin_tree);
  fprintf(stderr, "bench: writing %s\n", d->fatbin_tree);
  remove_path(tmp);
  uint8_t* buf = malloc(spec->code_object_size);
  for (size_t b = 0; b < spec->bundle_count; b++) {
    for (size_t a = 0; a < spec->arch_count; a++) {
      snprintf(path, sizeof(path), "%s/lib/libsynth.so#%zu/%s", tmp, b,
               spec->arches[a]);
      make_dirs(path);
      strcat(path, "/kernel.hsaco");
      size_t n = fx_fatbin_code_object_size(spec, b, a);
      fx_fatbin_code_object(spec, b, a, buf);
      int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || write(fd, buf, n) != (ssize_t)n || close(fd) != 0)
        bn_die("%s: cannot write", path);
    }
  }
  free(buf);
  if (rename(tmp, d->fatbin_tree) != 0)
    bn_die("%s: cannot rename", d->fatbin_tree);
}

static void prepare(bench_data* d) {
  const char* dir = d->dir;
  snprintf(d->zstd_2000, sizeof(d->zstd_2000), "%s/k2000-256k-zstd.kpack", dir);
  snprintf(d->none_2000, sizeof(d->none_2000), "%s/k2000-256k-none.kpack", dir);
  snprintf(d->zstd_20000, sizeof(d->zstd_20000), "%s/k20000-4k-zstd.kpack",
           dir);
  snprintf(d->plain_20000, sizeof(d->plain_20000),
           "%s/k20000-4k-zstd-no-table.kpack", dir);
  snprintf(d->plain_2000, sizeof(d->plain_2000),
           "%s/k2000-256k-zstd-no-table.kpack", dir);
  snprintf(d->none_3, sizeof(d->none_3), "%s/k3-1k-none.kpack", dir);
  snprintf(d->tree_2000, sizeof(d->tree_2000), "%s/k2000-256k-tree", dir);
  snprintf(d->sqfs_2000, sizeof(d->sqfs_2000), "%s/k2000-256k-zstd3.sqfs", dir);
  snprintf(d->tree_20000, sizeof(d->tree_20000), "%s/k20000-4k-tree", dir);
  snprintf(d->sqfs_20000, sizeof(d->sqfs_20000), "%s/k20000-4k-zstd3.sqfs",
           dir);
  snprintf(d->fatbin, sizeof(d->fatbin), "%s/libsynth.so", dir);
  snprintf(d->fatbin_tree, sizeof(d->fatbin_tree), "%s/libsynth-tree", dir);
  snprintf(d->fatbin_kpack, sizeof(d->fatbin_kpack), "%s/libsynth.kpack", dir);
  snprintf(d->fatbin_sqfs, sizeof(d->fatbin_sqfs), "%s/libsynth-zstd3.sqfs",
           dir);
  describe_fatbin(d);

  /* Everything below depends on the generated bytes; archives also on the
   * writer. */
  uint8_t sample[65536];
  fx_fill_code(sample, sizeof(sample), 1);
  uint64_t fixture = fnv1a(sample, sizeof(sample), 1469598103934665603ull);
  fixture = fnv1a(&d->fatbin_bytes, sizeof(d->fatbin_bytes), fixture);
  if (!stamp_matches(dir, "fixture.stamp", fixture)) {
    const char* generated[] = {d->tree_2000,  d->sqfs_2000, d->tree_20000,
                               d->sqfs_20000, d->fatbin,    d->fatbin_tree,
                               d->fatbin_sqfs};
    for (size_t i = 0; i < sizeof(generated) / sizeof(generated[0]); i++)
      remove_path(generated[i]);
  }
  if (!stamp_matches(dir, "writer.stamp", writer_fingerprint(dir))) {
    const char* archives[] = {d->zstd_2000,   d->none_2000,  d->zstd_20000,
                              d->plain_20000, d->plain_2000, d->none_3,
                              d->fatbin_kpack};
    for (size_t i = 0; i < sizeof(archives) / sizeof(archives[0]); i++)
      unlink(archives[i]);
  }

  make_archive(d->zstd_2000, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2000,
               256 << 10);
  make_archive(d->none_2000, KPACK_COMPRESSION_NOOP, 2000, 256 << 10);
  make_archive(d->zstd_20000, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 20000,
               4 << 10);
  strip_frame_table(d->zstd_20000, d->plain_20000);
  strip_frame_table(d->zstd_2000, d->plain_2000);
  make_archive(d->none_3, KPACK_COMPRESSION_NOOP, 3, 1 << 10);
  if (d->bin == NULL)
    return;
  if (!bn_exists(d->fatbin)) {
    fprintf(stderr, "bench: generating %s (%.2f GB of code objects)\n",
            d->fatbin, d->fatbin_bytes / 1e9);
    fx_write_fatbin(d->fatbin, &d->fatbin_spec);
  }
  write_fatbin_tree(d);
  if (!bn_exists(d->fatbin_kpack)) {
    char kpack[600];
    snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
    fprintf(stderr, "bench: packing %s\n", d->fatbin_kpack);
    char* argv[] = {kpack, "create",        "-q",           "-j2",
                    "-o",  d->fatbin_kpack, d->fatbin_tree, NULL};
    bn_run_ok(argv);
  }
  if (d->have_squashfuse) {
    extract_tree(d, d->zstd_2000, d->tree_2000);
    extract_tree(d, d->zstd_20000, d->tree_20000);
    make_image(d->tree_2000, d->sqfs_2000);
    make_image(d->tree_20000, d->sqfs_20000);
    make_image(d->fatbin_tree, d->fatbin_sqfs);
  }
}

static bool wanted(const char* groups, const char* group) {
  if (groups == NULL || *groups == '\0')
    return true;
  size_t n = strlen(group);
  for (const char* p = groups; (p = strstr(p, group)) != NULL; p += n)
    if ((p == groups || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
      return true;
  return false;
}

const bn_builtin bn_builtins[] = {
    {"transform", bench_transform_main},
    {NULL, NULL},
};

int main(int argc, char** argv) {
  /* Before anything grows this process: see common.c. */
  bn_spawner_start();
  bench_data d = {.dir = argc > 1 ? argv[1] : ".cache/bench",
                  .bin = argc > 2 && *argv[2] ? argv[2] : NULL};
  const char* groups = argc > 3 ? argv[3] : NULL;
  mkdir(d.dir, 0755);
  double start = bn_now();
  d.have_squashfuse = bn_have("squashfuse_ll") && bn_have("mksquashfs") &&
                      bn_have("fusermount3");
  d.have_zstd = bn_have("zstd");
  /* The install rows have data of their own (install.c): run alone, they
   * need none of the other groups'. */
  if (groups == NULL || strcmp(groups, "install") != 0)
    prepare(&d);
  double ready = bn_now();
  if (d.bin != NULL && !d.have_squashfuse)
    fprintf(stderr,
            "bench: squashfuse_ll, mksquashfs or fusermount3 missing "
            "(Debian: squashfuse squashfs-tools fuse3): the peer rows "
            "will not run\n");

  bn_table_header();
  if (wanted(groups, "library"))
    bench_library(&d);
  if (d.bin != NULL && wanted(groups, "create"))
    bench_create(&d);
  if (d.bin != NULL && wanted(groups, "mounts"))
    bench_mounts(&d);
  if (d.bin != NULL && wanted(groups, "transform"))
    bench_transform(&d);
  if (d.bin != NULL && wanted(groups, "split"))
    bench_split(&d);
  if (wanted(groups, "install"))
    bench_install(&d);
  printf(
      "\nbench: %.0f s (%.0f s generating data into %s); medians; page "
      "cache dropped per file with POSIX_FADV_DONTNEED before cold runs\n",
      bn_now() - start, ready - start, d.dir);
  return 0;
}
