/* SPDX-License-Identifier: MIT
 *
 * `kpack split` rows, on a linked shared object holding the synthetic fat
 * binary's 777 code objects (1.2 GB; the system compiler links it once, from
 * fixture_program.h, into libsynth-linked/lib/libsynth.so, a library as the
 * linker makes them, with program headers and relocated records; the
 * transform rows use it too): split against `kpack create --fatbin` of the
 * same library at the same -j; the same code objects as a tree of four
 * libraries (libsynth-parts/lib/libpartN.so, linked once), split against
 * create of the four; --per-arch against a plain split; --wheel against
 * --per-arch on a wheel of the library; and split's peak RSS. Inputs are in the
 * page cache for every run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "fixture_program.h"

#define REPS 3

/* Bundles [first, end) of d->fatbin_spec, bundle by bundle as
 * fx_write_fatbin() lays them out, linked by the system compiler into
 * `path`. */
static void link_library(const bench_data* d, size_t first, size_t end,
                         const char* path) {
  const fx_fatbin_spec* spec = &d->fatbin_spec;
  size_t count = end - first;
  fx_buf* bundles = calloc(count, sizeof(*bundles));
  fx_entry* entries = calloc(spec->arch_count + 1, sizeof(*entries));
  char** ids = calloc(spec->arch_count, sizeof(*ids));
  uint8_t** code = calloc(spec->arch_count, sizeof(*code));
  char dir[800], tmp[800];
  if (bundles == NULL || entries == NULL || ids == NULL || code == NULL)
    bn_die("out of memory");
  fprintf(stderr, "bench: linking %s (%.2f GB of code objects, once)\n", path,
          d->fatbin_bytes / 1e9 * (double)count / (double)spec->bundle_count);
  for (size_t a = 0; a < spec->arch_count; a++)
    if (asprintf(&ids[a], "hipv4-amdgcn-amd-amdhsa--%s", spec->arches[a]) < 0)
      bn_die("out of memory");
  for (size_t b = first; b < end; b++) {
    entries[0] = (fx_entry){"host-x86_64-unknown-linux-gnu-", NULL, 0};
    for (size_t a = 0; a < spec->arch_count; a++) {
      size_t n = fx_fatbin_code_object_size(spec, b, a);
      if ((code[a] = malloc(n)) == NULL)
        bn_die("out of memory");
      fx_fatbin_code_object(spec, b, a, code[a]);
      entries[a + 1] = (fx_entry){ids[a], code[a], n};
    }
    bundles[b - first] = fx_bundle(entries, spec->arch_count + 1);
    for (size_t a = 0; a < spec->arch_count; a++)
      free(code[a]);
  }
  snprintf(dir, sizeof(dir), "%s.build", path);
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  mkdir(dir, 0755);
  /* Record i points at bundle i, as in the fat binary the other rows use. */
  size_t* target = calloc(count, sizeof(*target));
  if (target == NULL)
    bn_die("out of memory");
  for (size_t b = 0; b < count; b++)
    target[b] = b;
  fx_program_opts o = {.kind = FX_PROGRAM_SHARED,
                       .bundles = bundles,
                       .bundle_count = count,
                       .target = target};
  if (!fx_build_program(dir, &o, tmp))
    bn_die("%s: cannot link", tmp);
  if (rename(tmp, path) != 0)
    bn_die("%s: cannot rename", tmp);
  char* rm[] = {"rm", "-rf", dir, NULL};
  bn_run_ok(rm);
  for (size_t b = 0; b < count; b++)
    fx_free(&bundles[b]);
  for (size_t a = 0; a < spec->arch_count; a++)
    free(ids[a]);
  free(target);
  free(bundles);
  free(entries);
  free(ids);
  free(code);
}

void bench_linked_library(const bench_data* d, char* path, size_t cap) {
  char tree[600], libdir[700];
  snprintf(tree, sizeof(tree), "%s/libsynth-linked", d->dir);
  snprintf(libdir, sizeof(libdir), "%s/lib", tree);
  snprintf(path, cap, "%s/libsynth.so", libdir);
  if (bn_exists(path))
    return;
  mkdir(tree, 0755);
  mkdir(libdir, 0755);
  link_library(d, 0, d->fatbin_spec.bundle_count, path);
}

/* Medians of split and create over REPS runs, and their peak RSS. */
typedef struct split_timing {
  double split, create;
  long split_rss, create_rss;
} split_timing;

static split_timing time_split(char* const split_argv[],
                               char* const create_argv[], const char* out,
                               const char* archive) {
  char* rm_argv[] = {"rm", "-rf", (char*)out, NULL};
  double split[REPS], create[REPS];
  split_timing t = {0};
  for (int r = 0; r < REPS; r++) {
    bn_run_ok(rm_argv);
    bn_proc p = bn_run_ok(split_argv);
    split[r] = p.seconds;
    if (p.max_rss_kb > t.split_rss)
      t.split_rss = p.max_rss_kb;
    p = bn_run_ok(create_argv);
    create[r] = p.seconds;
    if (p.max_rss_kb > t.create_rss)
      t.create_rss = p.max_rss_kb;
  }
  bn_run_ok(rm_argv);
  unlink(archive);
  t.split = bn_median(split, REPS);
  t.create = bn_median(create, REPS);
  return t;
}

#define PARTS 4

/* The linked library and a generated kernel-database tree, 2,000 Tensile
 * catalogs over 8 arches (64 KiB each), split per arch against a plain
 * split of the same tree: placing the database files is a copy either
 * way, so the two should cost the same. */
static void bench_split_per_arch(const bench_data* d, const char* kpack,
                                 const char* lib, const char* out) {
  static const char* const arches[] = {"gfx906",  "gfx908",  "gfx90a",
                                       "gfx942",  "gfx1030", "gfx1100",
                                       "gfx1101", "gfx1201"};
  char tree[600], dir[700], path[800], stamp[800];
  snprintf(tree, sizeof(tree), "%s/libsynth-db", d->dir);
  snprintf(stamp, sizeof(stamp), "%s/.complete", tree);
  if (!bn_exists(stamp)) {
    char* rm_argv[] = {"rm", "-rf", tree, NULL};
    bn_run_ok(rm_argv);
    snprintf(dir, sizeof(dir), "%s/lib/rocblas/library", tree);
    char* mkdir_argv[] = {"mkdir", "-p", dir, NULL};
    bn_run_ok(mkdir_argv);
    snprintf(path, sizeof(path), "%s/lib/libsynth.so", tree);
    char* cp_argv[] = {"cp", (char*)lib, path, NULL};
    bn_run_ok(cp_argv);
    static uint8_t block[64 << 10];
    for (size_t i = 0; i < 2000; i++) {
      snprintf(path, sizeof(path), "%s/TensileLibrary_T%04zu_%s.dat", dir, i,
               arches[i % 8]);
      for (size_t j = 0; j < sizeof(block); j++)
        block[j] = (uint8_t)(i * 131 + j * 7 + (j >> 9));
      FILE* f = fopen(path, "wb");
      if (f == NULL || fwrite(block, 1, sizeof(block), f) != sizeof(block) ||
          fclose(f) != 0)
        bn_die("%s: cannot write", path);
    }
    FILE* f = fopen(stamp, "w");
    if (f == NULL || fclose(f) != 0)
      bn_die("%s: cannot write", stamp);
  }
  bn_warm_tree(tree);
  char* rm_argv[] = {"rm", "-rf", (char*)out, NULL};
  char* per_arch_argv[] = {(char*)kpack, "split", "-q",       "-j2",
                           "--per-arch", "-o",    (char*)out, "--prefix",
                           "synth",      tree,    NULL};
  char* plain_argv[] = {(char*)kpack, "split",    "-q",    "-j2", "-o",
                        (char*)out,   "--prefix", "synth", tree,  NULL};
  double per_arch[REPS], plain[REPS];
  for (int r = 0; r < REPS; r++) {
    bn_run_ok(rm_argv);
    per_arch[r] = bn_run_ok(per_arch_argv).seconds;
    bn_run_ok(rm_argv);
    plain[r] = bn_run_ok(plain_argv).seconds;
  }
  bn_run_ok(rm_argv);
  double a = bn_median(per_arch, REPS), b = bn_median(plain, REPS);
  char value[96];
  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)", a / b, a, b);
  bn_row("kpack split --per-arch vs plain, library + 2,000 db files, -j2",
         value, "<= 1.10x", a / b <= 1.10);
}

/* A wheel of the linked library (python3 -m wheel pack, deflated as build
 * backends write wheels), split by `kpack split --wheel` against a
 * --per-arch split of the same files into the same layout: the difference
 * is the zip I/O (inflating and hashing the input, deflating and hashing
 * the host wheel, hashing the stored archives). */
static void bench_split_wheel(const bench_data* d, const char* kpack,
                              const char* lib, const char* out) {
  static const char row[] =
      "kpack split --wheel vs --per-arch tree, 1.2 GB library wheel, -j2";
  static const char target[] = "<= 1.15x";
  if (!bn_exists("/usr/lib/python3/dist-packages/wheel/__main__.py")) {
    bn_row_not_run(row, target, "no python3-wheel to pack its wheel");
    return;
  }
  char tree[600], path[800], wheel[800], wheels[700], stamp[800];
  snprintf(tree, sizeof(tree), "%s/synthwheel", d->dir);
  snprintf(wheels, sizeof(wheels), "%s/synthwheel-dist", d->dir);
  snprintf(wheel, sizeof(wheel), "%s/synth-1.0-cp311-cp311-linux_x86_64.whl",
           wheels);
  snprintf(stamp, sizeof(stamp), "%s/.complete", wheels);
  if (!bn_exists(stamp)) {
    char* rm_argv[] = {"rm", "-rf", tree, wheels, NULL};
    bn_run_ok(rm_argv);
    snprintf(path, sizeof(path), "%s/synth/lib", tree);
    char* mkdir_argv[] = {"mkdir", "-p", path, wheels, NULL};
    bn_run_ok(mkdir_argv);
    snprintf(path, sizeof(path), "%s/synth/lib/libsynth.so", tree);
    char* cp_argv[] = {"cp", (char*)lib, path, NULL};
    bn_run_ok(cp_argv);
    snprintf(path, sizeof(path), "%s/synth-1.0.dist-info", tree);
    mkdir(path, 0755);
    static const char* const files[][2] = {
        {"METADATA", "Metadata-Version: 2.1\nName: synth\nVersion: 1.0\n"},
        {"WHEEL",
         "Wheel-Version: 1.0\nGenerator: bench\n"
         "Root-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"}};
    for (size_t i = 0; i < 2; i++) {
      snprintf(path, sizeof(path), "%s/synth-1.0.dist-info/%s", tree,
               files[i][0]);
      FILE* f = fopen(path, "w");
      if (f == NULL || fputs(files[i][1], f) < 0 || fclose(f) != 0)
        bn_die("%s: cannot write", path);
    }
    fprintf(stderr, "bench: packing %s (once)\n", wheel);
    char* pack_argv[] = {
        "/usr/bin/python3", "-m", "wheel", "pack", "-d", wheels, tree, NULL};
    bn_run_ok(pack_argv);
    snprintf(path, sizeof(path), "%s/synth-1.0.dist-info", tree);
    char* rm_info[] = {"rm", "-rf", path, NULL};
    bn_run_ok(rm_info);
    FILE* f = fopen(stamp, "w");
    if (f == NULL || fclose(f) != 0)
      bn_die("%s: cannot write", stamp);
  }
  bn_warm(wheel);
  bn_warm_tree(tree);
  char* rm_argv[] = {"rm", "-rf", (char*)out, NULL};
  char* wheel_argv[] = {(char*)kpack, "split", "-q",       "-j2", "--wheel",
                        wheel,        "-o",    (char*)out, NULL};
  char* tree_argv[] = {
      (char*)kpack,   "split",    "-q",       "-j2",   "--per-arch",
      "-o",           (char*)out, "--prefix", "synth", "--archive-dir",
      "_kpack/synth", tree,       NULL};
  double w[REPS], t[REPS];
  for (int r = 0; r < REPS; r++) {
    bn_run_ok(rm_argv);
    w[r] = bn_run_ok(wheel_argv).seconds;
    bn_run_ok(rm_argv);
    t[r] = bn_run_ok(tree_argv).seconds;
  }
  bn_run_ok(rm_argv);
  double a = bn_median(w, REPS), b = bn_median(t, REPS);
  char value[96];
  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)", a / b, a, b);
  bn_row(row, value, target, a / b <= 1.15);
}

void bench_split(const bench_data* d) {
  char kpack[600], lib[700], tree[600], out[600], archive[600];
  char fatbin_arg[800];
  snprintf(kpack, sizeof(kpack), "%s/kpack", d->bin);
  snprintf(tree, sizeof(tree), "%s/libsynth-linked", d->dir);
  bench_linked_library(d, lib, sizeof(lib));
  snprintf(out, sizeof(out), "%s/split-out", d->dir);
  snprintf(archive, sizeof(archive), "%s/split-created.kpack", d->dir);
  snprintf(fatbin_arg, sizeof(fatbin_arg), "%s=lib/libsynth.so", lib);
  /* The same code objects as PARTS libraries of a tree, a quarter of the
   * bundles each: split then packs several binaries into each archive. */
  char parts[600], part_libs[PARTS][700], part_args[PARTS][800];
  snprintf(parts, sizeof(parts), "%s/libsynth-parts", d->dir);
  size_t bundles = d->fatbin_spec.bundle_count;
  for (size_t i = 0; i < PARTS; i++) {
    snprintf(part_libs[i], sizeof(part_libs[i]), "%s/lib/libpart%zu.so", parts,
             i);
    snprintf(part_args[i], sizeof(part_args[i]),
             "%s/lib/libpart%zu.so=lib/libpart%zu.so", parts, i, i);
    if (!bn_exists(part_libs[i])) {
      char libdir[700];
      snprintf(libdir, sizeof(libdir), "%s/lib", parts);
      mkdir(parts, 0755);
      mkdir(libdir, 0755);
      link_library(d, bundles * i / PARTS, bundles * (i + 1) / PARTS,
                   part_libs[i]);
    }
  }
  char* split_argv[] = {kpack, "split",    "-q",    "-j2", "-o",
                        out,   "--prefix", "synth", tree,  NULL};
  char* create_argv[] = {kpack,   "create",   "-q",       "-j2", "-o",
                         archive, "--fatbin", fatbin_arg, NULL};
  char* split_parts_argv[] = {kpack, "split",    "-q",    "-j2", "-o",
                              out,   "--prefix", "synth", parts, NULL};
  char* create_parts_argv[8 + 2 * PARTS] = {kpack, "create", "-q",
                                            "-j2", "-o",     archive};
  for (size_t i = 0; i < PARTS; i++) {
    create_parts_argv[6 + 2 * i] = "--fatbin";
    create_parts_argv[7 + 2 * i] = part_args[i];
  }

  bn_warm(lib);
  split_timing one = time_split(split_argv, create_argv, out, archive);
  bn_warm_tree(parts);
  split_timing many =
      time_split(split_parts_argv, create_parts_argv, out, archive);
  char value[96], target[64];

  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)",
           one.split / one.create, one.split, one.create);
  bn_row("kpack split vs create --fatbin, linked 1.2 GB library, -j2", value,
         "<= 1.10x", one.split / one.create <= 1.10);
  snprintf(value, sizeof(value), "%.2fx (%.2f vs %.2f s)",
           many.split / many.create, many.split, many.create);
  bn_row("kpack split vs create --fatbin, tree of 4 libraries, -j2", value,
         "<= 1.10x", many.split / many.create <= 1.10);

  bench_split_per_arch(d, kpack, lib, out);
  bench_split_wheel(d, kpack, lib, out);

  /* Two jobs, each holding its code object and its compressed frame. */
  uint64_t limit = (64u << 20) + 2u * 2u * d->largest_code_object;
  long rss = one.split_rss > many.split_rss ? one.split_rss : many.split_rss;
  snprintf(value, sizeof(value), "%ld MiB (create --fatbin: %ld MiB)",
           rss / 1024, one.create_rss / 1024);
  snprintf(target, sizeof(target), "<= %llu MiB",
           (unsigned long long)(limit >> 20));
  bn_row("kpack split -j2: peak RSS", value, target,
         (uint64_t)rss * 1024 <= limit);
}
