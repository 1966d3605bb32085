/* SPDX-License-Identifier: MIT
 *
 * The kpack tool over HIP fat binaries, as a user runs it: the streamed
 * "fat binary -> archive entries" path that `create --fatbin` and `split`
 * share, `kpack split` over files and trees (mirror, archives, in place,
 * idempotence, a killed run) and `kpack verify --binary`.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <elf.h>
#include <spawn.h>

#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "support.h"

/* A shared object whose .hip_fatbin holds one bundle of these entries, its
 * one HIPF record pointing at it from the file. */
static fx_buf one_bundle_elf(const fx_entry* e, size_t n) {
  fx_buf bundle = fx_bundle(e, n);
  fx_wrapper w = {FX_HIPF_MAGIC, 1, 0, FX_PTR_FILE, 0};
  fx_elf_opts o = {.bundles = &bundle,
                   .bundle_count = 1,
                   .wrappers = &w,
                   .wrapper_count = 1};
  fx_buf elf = fx_elf(&o);
  fx_free(&bundle);
  return elf;
}

/* ---- create --fatbin: the streamed entries ------------------------------- */

/* A fat binary whose first code object read is empty: an empty kernel, not
 * a failed read. */
static void test_create_fatbin_takes_an_empty_first_code_object(void** state) {
  (void)state;
  void* k = kt_pattern(3000, 5);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx1100", "", 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", k, 3000}};
  fx_buf elf = one_bundle_elf(e, 3);
  char* path = kt_in_tmp("libempty.so");
  char* archive = kt_in_tmp("empty.kpack");
  kt_write_file(path, elf.data, elf.size);
  char *out, *err;
  assert_int_equal(
      KT_KPACK(&out, &err, "create", "-o", archive, "--fatbin", path), 0);
  kt_assert_contains(out, "2 kernels");
  free(out);
  free(err);
  kpack_archive_t a;
  void* data;
  size_t size;
  assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
  assert_int_equal(
      kpack_get_kernel(a, "libempty.so#0", "gfx1100", &data, &size),
      KPACK_SUCCESS);
  assert_int_equal(size, 0);
  kpack_free_kernel(data);
  assert_int_equal(kpack_get_kernel(a, "libempty.so#0", "gfx90a", &data, &size),
                   KPACK_SUCCESS);
  assert_int_equal(size, 3000);
  assert_memory_equal(data, k, 3000);
  kpack_free_kernel(data);
  kpack_close(a);
  free(path);
  free(archive);
  fx_free(&elf);
  free(k);
}

/* A bundle with only a host entry has no kernel: a clear error (and under
 * UBSan no qsort of a NULL array). */
static void test_create_fatbin_with_only_host_code_is_a_clear_error(
    void** state) {
  (void)state;
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  fx_buf elf = one_bundle_elf(e, 1);
  char* path = kt_in_tmp("libhost.so");
  char* archive = kt_in_tmp("host.kpack");
  kt_write_file(path, elf.data, elf.size);
  char* err;
  assert_int_equal(
      KT_KPACK(NULL, &err, "create", "-o", archive, "--fatbin", path), 1);
  kt_assert_contains(err, "no kernels found");
  assert_int_equal(access(archive, F_OK), -1);
  free(err);
  free(path);
  free(archive);
  fx_free(&elf);
}

/* ---- kpack split: helpers ------------------------------------------------ */

/* dir/a and dir/b are one file. */
static void assert_hard_linked(const char* dir, const char* a, const char* b) {
  struct stat sa, sb;
  char* pa = kt_path(dir, a);
  char* pb = kt_path(dir, b);
  assert_int_equal(stat(pa, &sa), 0);
  assert_int_equal(stat(pb, &sb), 0);
  assert_int_equal(sa.st_dev, sb.st_dev);
  assert_int_equal(sa.st_ino, sb.st_ino);
  free(pa);
  free(pb);
}

/* The bytes of section `name` of an ELF file (malloc'ed); NULL if absent. */
static void* section(const char* path, const char* name, size_t* size) {
  size_t n;
  uint8_t* file = kt_read_file(path, &n);
  void* out = NULL;
  assert_non_null(file);
  assert_true(n >= sizeof(Elf64_Ehdr));
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)file;
  assert_true(eh->e_shoff <= n &&
              eh->e_shnum <= (n - eh->e_shoff) / sizeof(Elf64_Shdr));
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(file + eh->e_shoff);
  const Elf64_Shdr* strtab = &sh[eh->e_shstrndx];
  for (size_t i = 0; i < eh->e_shnum; i++) {
    assert_true(strtab->sh_offset + sh[i].sh_name < n);
    if (strcmp((const char*)file + strtab->sh_offset + sh[i].sh_name, name))
      continue;
    assert_true(sh[i].sh_offset <= n && sh[i].sh_size <= n - sh[i].sh_offset);
    out = malloc(sh[i].sh_size + 1);
    memcpy(out, file + sh[i].sh_offset, sh[i].sh_size);
    *size = sh[i].sh_size;
  }
  free(file);
  return out;
}

/* For every code object i and arch of the fat binary `original`, the
 * loader given the metadata of record i of `transformed` (read from its
 * .rocm_kpack_ref), co_index i and that arch returns exactly the
 * original's bytes. Returns the number of code objects checked. */
static size_t assert_round_trip(const char* original, const char* transformed,
                                const char* kernel_name) {
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  kpack_host_t* host;
  kpack_host_info_t hinfo;
  kpack_cache_t cache;
  size_t refs_size = 0, checked = 0;
  assert_int_equal(kpack_fatbin_open(original, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  assert_int_equal(kpack_host_open(transformed, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_info(host, &hinfo), KPACK_SUCCESS);
  assert_int_equal(hinfo.kind, KPACK_HOST_KPACKIFIED);
  assert_int_equal(hinfo.wrapper_count, info.bundle_count);
  uint8_t* refs = section(transformed, ".rocm_kpack_ref", &refs_size);
  assert_non_null(refs);
  assert_int_equal(kpack_cache_create(&cache), KPACK_SUCCESS);
  for (size_t i = 0; i < info.bundle_count; i++) {
    kpack_host_wrapper_t w;
    kpack_bundle_t* b;
    kpack_bundle_info_t binfo;
    assert_int_equal(kpack_host_get_wrapper(host, i, &w), KPACK_SUCCESS);
    assert_int_equal(w.reserved, i);
    assert_string_equal(w.kernel_name, kernel_name);
    assert_true(w.metadata_offset < refs_size);
    assert_int_equal(kpack_fatbin_get_bundle(fb, i, &b), KPACK_SUCCESS);
    kpack_bundle_get_info(b, &binfo);
    for (size_t e = 0; e < binfo.entry_count; e++) {
      kpack_bundle_entry_t entry;
      void* code = NULL;
      size_t size = 0;
      kpack_bundle_get_entry(b, e, &entry);
      if (entry.arch == NULL)
        continue;
      kpack_error_t err =
          kpack_load_code_object(cache, refs + w.metadata_offset, transformed,
                                 (uint32_t)i, &entry.arch, 1, &code, &size);
      if (err != KPACK_SUCCESS)
        fail_msg("%s record %zu %s: %s", transformed, i, entry.arch,
                 kpack_error_string(err));
      assert_int_equal(size, entry.size);
      if (size > 0)
        assert_memory_equal(code, entry.data, size);
      kpack_free_code_object(code);
      checked++;
    }
    kpack_bundle_free(b);
  }
  kpack_cache_destroy(cache);
  free(refs);
  kpack_host_close(host);
  kpack_fatbin_close(fb);
  return checked;
}

/* Fixture fat binaries of the shapes the fixture builder makes. */
typedef enum fat_shape { ONE_WRAPPER, MANY_WRAPPERS, CCOB_BUNDLES } fat_shape;

static const char* const shape_names[] = {"one wrapper", "many wrappers",
                                          "CCOB bundles"};

/* A HIP-like program linked by the system compiler (fixture_program.h)
 * whose .hip_fatbin holds bundles of `shape`, each with the first `arches`
 * of gfx90a:xnack-, gfx942:sramecc+:xnack- and gfx1100 (a build for fewer
 * arches holds the same code objects for those it has); the records point
 * at the bundles in reverse order, so co_index is the record's, not the
 * bundle's place. Built once per (kind, shape, seed, arches) into the
 * scratch directory, then copied to `path`. */
static void write_program_for(const char* path, fx_program_kind kind,
                              fat_shape shape, uint32_t seed, size_t arches) {
  enum { N = 4 };
  char name[96];
  snprintf(name, sizeof(name), "programs/%d-%d-%u-%zu", (int)kind, (int)shape,
           seed, arches);
  char* built = kt_in_tmp(name);
  if (access(built, F_OK) != 0) {
    fx_buf bundles[N];
    void* k[N][3];
    size_t count = shape == ONE_WRAPPER ? 1 : N;
    for (size_t i = 0; i < count; i++) {
      for (size_t a = 0; a < 3; a++)
        k[i][a] = kt_pattern(1000 + 97 * i + 13 * a,
                             seed + 10 * (uint32_t)i + (uint32_t)a);
      fx_entry e[] = {
          {"host-x86_64-unknown-linux-gnu-", NULL, 0},
          {"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", k[i][0], 1000 + 97 * i},
          {"hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", k[i][1],
           1013 + 97 * i},
          {"hipv4-amdgcn-amd-amdhsa--gfx1100", k[i][2], 1026 + 97 * i}};
      fx_buf plain = fx_bundle(e, 1 + arches);
      if (shape == CCOB_BUNDLES) {
        bundles[i] =
            fx_ccob(1 + (unsigned)(i % 3), i % 2 ? FX_ZLIB : FX_ZSTD, &plain);
        fx_free(&plain);
      } else {
        bundles[i] = plain;
      }
    }
    char* dir = kt_in_tmp("programs/build");
    kt_mkdirs(dir);
    fx_program_opts o = {
        .kind = kind, .bundles = bundles, .bundle_count = count};
    assert_true(fx_build_program(dir, &o, built));
    kt_rmtree(dir);
    free(dir);
    for (size_t i = 0; i < count; i++) {
      fx_free(&bundles[i]);
      for (size_t a = 0; a < 3; a++)
        free(k[i][a]);
    }
  }
  kt_copy_file(built, path);
  free(built);
}

static void write_program(const char* path, fx_program_kind kind,
                          fat_shape shape, uint32_t seed) {
  write_program_for(path, kind, shape, seed, 3);
}

static void write_fat(const char* path, fat_shape shape, uint32_t seed) {
  write_program(path, FX_PROGRAM_SHARED, shape, seed);
}

/* A file's bytes equal `data`. */
static bool holds(const char* path, const void* data, size_t size) {
  size_t n;
  void* bytes = kt_read_file(path, &n);
  bool same = bytes != NULL && n == size && memcmp(bytes, data, n) == 0;
  free(bytes);
  return same;
}

/* ---- kpack split --------------------------------------------------------- */

/* create --arch keeps what split --arch keeps: gfx90a names every gfx90a
 * code object, and keeps something, so no warning. */
static void test_create_arch_follows_the_loaders_target_rules(void** state) {
  (void)state;
  char* lib = kt_in_tmp("libfat.so");
  char* archive = kt_in_tmp("fat.kpack");
  write_fat(lib, MANY_WRAPPERS, 44);
  char *out, *err;
  assert_int_equal(KT_KPACK(&out, &err, "create", "-o", archive, "--arch",
                            "gfx90a", "--fatbin", lib),
                   0);
  kt_assert_contains(out, "4 kernels");
  if (strstr(err, "warning") != NULL)
    fail_msg("unexpected: %s", err);
  free(out);
  free(err);
  kpack_archive_t a;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
  assert_int_equal(
      kpack_get_kernel_info(a, "libfat.so#3", "gfx90a:xnack-", &info),
      KPACK_SUCCESS);
  assert_int_not_equal(
      kpack_get_kernel_info(a, "libfat.so#3", "gfx1100", &info), KPACK_SUCCESS);
  kpack_close(a);
  free(lib);
  free(archive);
}

static void test_split_round_trip_on_fixture_fat_binaries(void** state) {
  (void)state;
  static const char* const kind_names[] = {"shared object", "PIE",
                                           "executable"};
  for (fx_program_kind kind = FX_PROGRAM_SHARED; kind <= FX_PROGRAM_EXEC;
       kind++) {
    for (fat_shape shape = ONE_WRAPPER; shape <= CCOB_BUNDLES; shape++) {
      char name[64];
      snprintf(name, sizeof(name), "in%d-%d", (int)kind, (int)shape);
      char* in = kt_in_tmp(name);
      snprintf(name, sizeof(name), "out%d-%d", (int)kind, (int)shape);
      char* out = kt_in_tmp(name);
      char* lib = kt_tree_path(in, "lib/libfat.so.1");
      write_program(lib, kind, shape, 100 * (uint32_t)shape);
      char *stdout_text, *err;
      int rc = KT_KPACK(&stdout_text, &err, "split", "-o", out, "--prefix",
                        "fat", in);
      if (rc != 0)
        fail_msg("%s, %s: exit %d\n%s", kind_names[kind], shape_names[shape],
                 rc, err);
      kt_assert_contains(stdout_text, "1 binary transformed");
      kt_assert_contains(stdout_text, "3 archives written");
      char* split_lib = kt_path(out, "lib/libfat.so.1");
      size_t checked = assert_round_trip(lib, split_lib, "lib/libfat.so.1");
      assert_int_equal(checked, shape == ONE_WRAPPER ? 3 : 12);
      /* The layout: archives named by prefix and arch, one arch each. */
      char* archive = kt_path(out, ".kpack/fat_gfx942:sramecc+:xnack-.kpack");
      kpack_archive_t a;
      const char *group, *arch;
      size_t count;
      assert_int_equal(kpack_open(archive, &a), KPACK_SUCCESS);
      assert_int_equal(kpack_get_group_name(a, &group), KPACK_SUCCESS);
      assert_string_equal(group, "fat");
      assert_int_equal(kpack_get_architecture_count(a, &count), KPACK_SUCCESS);
      assert_int_equal(count, 1);
      assert_int_equal(kpack_get_architecture(a, 0, &arch), KPACK_SUCCESS);
      assert_string_equal(arch, "gfx942:sramecc+:xnack-");
      kpack_close(a);
      /* verify --binary agrees. */
      assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", split_lib),
                       0);
      free(archive);
      free(split_lib);
      free(stdout_text);
      free(err);
      free(lib);
      free(in);
      free(out);
    }
  }
}

static void set_mtime(const char* path, time_t t) {
  struct timespec times[2] = {{t, 0}, {t, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW), 0);
}

static void test_split_mirrors_links_symlinks_modes_and_times(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* out = kt_in_tmp("out");
  char* tool_bin = kt_tree_path(in, "bin/tool");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  char* alias = kt_tree_path(in, "lib/sub/alias.so.1");
  char* data = kt_tree_path(in, "share/data.txt");
  char* copy = kt_tree_path(in, "share/copy.txt");
  char* empty = kt_tree_path(in, "share/empty/x");
  write_fat(tool_bin, MANY_WRAPPERS, 7);
  write_fat(lib, ONE_WRAPPER, 9);
  assert_int_equal(link(lib, alias), 0);
  kt_write_file(data, "some text\n", 10);
  assert_int_equal(link(data, copy), 0);
  *strrchr(empty, '/') = '\0';
  assert_int_equal(chmod(empty, 0700), 0);
  assert_int_equal(chmod(tool_bin, 0751), 0);
  assert_int_equal(chmod(data, 0640), 0);
  char* link1 = kt_path(in, "lib/libfat.so");
  char* link2 = kt_path(in, "lib/dangling");
  assert_int_equal(symlink("libfat.so.1", link1), 0);
  assert_int_equal(symlink("../nowhere", link2), 0);
  set_mtime(data, 1000000000);
  set_mtime(tool_bin, 1100000000);
  set_mtime(link1, 1200000000);
  set_mtime(empty, 1300000000);

  /* A separate debug file: its .hip_fatbin is NOBITS. */
  char* debug = kt_tree_path(in, "lib/debug/libfat.so.1.debug");
  char* objcopy[] = {"objcopy", "--only-keep-debug", lib, debug, NULL};
  assert_int_equal(kt_run(objcopy, 60, NULL, NULL), 0);
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", out, in), 0);
  kt_assert_contains(text, "2 binaries transformed");
  kt_assert_contains(text,
                     "1 left alone (0 already kpack-ified, 1 debug only)");
  kt_assert_contains(text, "libfat.so.1.debug: no device code bytes");
  free(text);
  char* o_debug = kt_path(out, "lib/debug/libfat.so.1.debug");
  size_t debug_size;
  void* debug_bytes = kt_read_file(debug, &debug_size);
  assert_true(holds(o_debug, debug_bytes, debug_size));
  free(debug_bytes);
  free(o_debug);
  free(debug);

  struct stat a, b;
  char* o_data = kt_path(out, "share/data.txt");
  char* o_copy = kt_path(out, "share/copy.txt");
  assert_true(holds(o_data, "some text\n", 10));
  assert_int_equal(stat(o_data, &a), 0);
  assert_int_equal(stat(o_copy, &b), 0);
  assert_int_equal(a.st_ino, b.st_ino); /* still one file, two names */
  assert_int_equal(a.st_mode & 07777, 0640);
  assert_int_equal(a.st_mtime, 1000000000);
  char* o_tool = kt_path(out, "bin/tool");
  assert_int_equal(stat(o_tool, &a), 0);
  assert_int_equal(a.st_mode & 07777, 0751);
  assert_int_equal(a.st_mtime, 1100000000);
  char* o_empty = kt_path(out, "share/empty");
  assert_int_equal(stat(o_empty, &a), 0);
  assert_true(S_ISDIR(a.st_mode));
  assert_int_equal(a.st_mode & 07777, 0700);
  assert_int_equal(a.st_mtime, 1300000000);
  char target[64];
  char* o_link1 = kt_path(out, "lib/libfat.so");
  char* o_link2 = kt_path(out, "lib/dangling");
  ssize_t n = readlink(o_link1, target, sizeof(target));
  assert_int_equal(n, 11);
  assert_memory_equal(target, "libfat.so.1", 11);
  assert_int_equal(lstat(o_link1, &a), 0);
  assert_int_equal(a.st_mtime, 1200000000);
  n = readlink(o_link2, target, sizeof(target));
  assert_int_equal(n, 10);
  assert_memory_equal(target, "../nowhere", 10);

  /* A transformed binary with two names stays one file; each name finds
   * the archives (a search path per directory). */
  char* o_lib = kt_path(out, "lib/libfat.so.1");
  char* o_alias = kt_path(out, "lib/sub/alias.so.1");
  assert_int_equal(stat(o_lib, &a), 0);
  assert_int_equal(stat(o_alias, &b), 0);
  assert_int_equal(a.st_ino, b.st_ino);
  assert_int_equal(assert_round_trip(lib, o_lib, "lib/libfat.so.1"), 3);
  assert_int_equal(assert_round_trip(lib, o_alias, "lib/libfat.so.1"), 3);
  assert_int_equal(assert_round_trip(tool_bin, o_tool, "bin/tool"), 12);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "verify", "--binary", o_lib, o_alias, o_tool), 0);

  free(o_lib);
  free(o_alias);
  free(o_link1);
  free(o_link2);
  free(o_empty);
  free(o_tool);
  free(o_data);
  free(o_copy);
  free(link1);
  free(link2);
  free(tool_bin);
  free(lib);
  free(alias);
  free(data);
  free(copy);
  free(empty);
  free(in);
  free(out);
}

/* Every entry of a tree as a "type path size links mode mtime target"
 * line, to compare metadata as well as bytes; with `files_only`, without
 * directories (whose mtimes a run that made and removed its temporary
 * files in them has changed). */
static char* describe(const char* dir, bool files_only) {
  char* out = NULL;
  char* argv[] = {"sh", "-c",
                  files_only ? "cd \"$0\" && find . ! -type d -printf '%y %p "
                               "%s %n %M %T@ %l\\n' | sort"
                             : "cd \"$0\" && find . -printf '%y %p %s %n %M "
                               "%T@ %l\\n' | sort",
                  (char*)dir, NULL};
  assert_int_equal(kt_run(argv, 60, &out, NULL), 0);
  return out;
}

static char* describe_tree(const char* dir) {
  return describe(dir, false);
}

static void test_split_json_summary_counts_what_the_text_does(void** state) {
  (void)state;
  char* in = kt_in_tmp("json-in");
  char* out = kt_in_tmp("json-out");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  write_fat(lib, CCOB_BUNDLES, 5);
  char* text;
  assert_int_equal(
      KT_KPACK(&text, NULL, "split", "--json", "-j1", "-o", out, in), 0);
  /* One object, nothing else on standard output. */
  assert_int_equal(text[0], '{');
  assert_string_equal(text + strlen(text) - 2, "}\n");
  kt_assert_contains(text, "{\n  \"transformed\": 1,\n");
  kt_assert_contains(text, "  \"kpackified\": 0,\n  \"debug_only\": 0,\n");
  kt_assert_contains(text, "  \"dropped\": {},\n  \"threads\": 1,\n");
  kt_assert_contains(text, "  \"archives\": 3,\n  \"code_objects\": 12,\n");
  free(text);
  /* The text summary of the same split says the same. */
  char* again = kt_in_tmp("json-again");
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", again, in), 0);
  kt_assert_contains(text, "split: 3 archives written: 12 code objects");
  free(text);
  kt_rmtree(again);
  free(again);
  kt_rmtree(out);
  kt_rmtree(in);
  free(lib);
  free(out);
  free(in);
}

static void test_split_of_its_own_output_changes_nothing(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* out = kt_in_tmp("out");
  char* again = kt_in_tmp("again");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  write_fat(lib, CCOB_BUNDLES, 3);
  char* text;
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", out, in), 0);
  char* before = describe_tree(out);
  /* Into a new directory: the same tree, byte for byte and time for time,
   * and no archive written. */
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", again, out), 0);
  kt_assert_contains(text, "0 binaries transformed");
  kt_assert_contains(text, "already kpack-ified, left alone");
  kt_assert_contains(text, "0 archives written");
  free(text);
  kt_assert_same_tree(out, again);
  char* copy = describe_tree(again);
  assert_string_equal(before, copy);
  /* In place: nothing changes. */
  assert_int_equal(KT_KPACK(&text, NULL, "split", "--in-place", out), 0);
  kt_assert_contains(text, "0 binaries transformed");
  free(text);
  char* after = describe_tree(out);
  assert_string_equal(before, after);
  kt_assert_same_tree(out, again);
  free(before);
  free(copy);
  free(after);
  free(lib);
  free(in);
  free(out);
  free(again);
}

/* A file split copies whole keeps its holes (an installed file with
 * sparse padding, a program linked with large pages): its copy uses no
 * more disk blocks than it does and reads the same. */
static void test_split_copies_sparse_files_sparse(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* out = kt_in_tmp("out");
  char* sparse = kt_tree_path(in, "share/data/padded.bin");
  char* copy = kt_tree_path(out, "share/data/padded.bin");
  int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  static const char head[] = "at the start", tail[] = "at the end";
  assert_int_equal(pwrite(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
  assert_int_equal(pwrite(fd, tail, sizeof(tail), 6 << 20),
                   (ssize_t)sizeof(tail));
  assert_int_equal(ftruncate(fd, 8 << 20), 0); /* and a hole at the end */
  close(fd);
  struct stat a, b;
  assert_int_equal(stat(sparse, &a), 0);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", out, in), 0);
  assert_int_equal(stat(copy, &b), 0);
  assert_int_equal(b.st_size, a.st_size);
  if (b.st_blocks > a.st_blocks)
    fail_msg("the copy of a %lld-byte file of %lld blocks uses %lld blocks",
             (long long)a.st_size, (long long)a.st_blocks,
             (long long)b.st_blocks);
  kt_assert_same_tree(in, out);
  free(sparse);
  free(copy);
  free(in);
  free(out);
}

/* A program whose bundle clang-offload-bundler made for gfx90a:xnack-
 * and portable SPIR-V, from `native` and `spirv` bytes. */
static void write_spirv_program(const char* path, const fx_buf* native,
                                const fx_buf* spirv) {
  char* dir = kt_in_tmp("spirv-build");
  kt_mkdirs(dir);
  char* host = kt_path(dir, "host");
  char* n = kt_path(dir, "native");
  char* v = kt_path(dir, "spirv");
  char* b = kt_path(dir, "bundle");
  kt_write_file(host, "", 0);
  kt_write_file(n, native->data, native->size);
  kt_write_file(v, spirv->data, spirv->size);
  char *in_h, *in_n, *in_v, *out;
  assert_true(asprintf(&in_h, "--input=%s", host) > 0);
  assert_true(asprintf(&in_n, "--input=%s", n) > 0);
  assert_true(asprintf(&in_v, "--input=%s", v) > 0);
  assert_true(asprintf(&out, "--output=%s", b) > 0);
  char* argv[] = {"/usr/lib/llvm-15/bin/clang-offload-bundler",
                  "--type=o",
                  "--targets=host-x86_64-unknown-linux-gnu,"
                  "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-,"
                  "hipv4-spirv64-amd-amdhsa--amdgcnspirv",
                  in_h,
                  in_n,
                  in_v,
                  out,
                  NULL};
  char* err = NULL;
  if (kt_run(argv, 60, NULL, &err) != 0)
    fail_msg("clang-offload-bundler: %s", err);
  free(err);
  fx_buf bundle = {0};
  bundle.data = kt_read_file(b, &bundle.size);
  fx_program_opts o = {
      .kind = FX_PROGRAM_SHARED, .bundles = &bundle, .bundle_count = 1};
  assert_true(fx_build_program(dir, &o, path));
  free(bundle.data);
  kt_rmtree(dir);
  free(in_h);
  free(in_n);
  free(in_v);
  free(out);
  free(host);
  free(n);
  free(v);
  free(b);
  free(dir);
}

/* The archive at `path` serves `want` as the kernel of lib/libsp.so for
 * `arch`. */
static void assert_archive_serves(const char* path, const char* arch,
                                  const fx_buf* want) {
  kpack_archive_t a;
  void* data;
  size_t size;
  if (kpack_open(path, &a) != KPACK_SUCCESS)
    fail_msg("%s does not open", path);
  assert_int_equal(kpack_get_kernel(a, "lib/libsp.so#0", arch, &data, &size),
                   KPACK_SUCCESS);
  assert_int_equal(size, want->size);
  assert_memory_equal(data, want->data, size);
  kpack_free_kernel(data);
  kpack_close(a);
}

/* Portable SPIR-V ("amdgcnspirv" entries) goes to an archive of its own,
 * PREFIX_amdgcnspirv.kpack, kept unless --arch leaves it out, in a
 * per-arch tree of its own, and the loader's search serves it to an agent
 * that no native archive serves. */
static void test_split_spirv_is_the_portable_fallback(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* lib = kt_tree_path(in, "lib/libsp.so");
  fx_buf native = {.data = kt_pattern(3000, 41), .size = 3000};
  fx_buf spirv = {.data = kt_pattern(2000, 42), .size = 2000};
  write_spirv_program(lib, &native, &spirv);

  /* Every arch kept: the SPIR-V archive beside the native one. */
  char* all = kt_in_tmp("all");
  char* text = NULL;
  assert_int_equal(
      KT_KPACK(&text, NULL, "split", "--prefix", "sp", "-o", all, in), 0);
  free(text);
  char* archive = kt_path(all, ".kpack/sp_amdgcnspirv.kpack");
  assert_archive_serves(archive, "amdgcnspirv", &spirv);
  free(archive);
  archive = kt_path(all, ".kpack/sp_gfx90a:xnack-.kpack");
  assert_archive_serves(archive, "gfx90a:xnack-", &native);
  free(archive);
  char* split_lib = kt_path(all, "lib/libsp.so");
  /* Native first; SPIR-V for an agent nothing native serves. */
  assert_int_equal(KT_KPACK(&text, NULL, "resolve", "--binary", split_lib,
                            "--arch", "gfx90a:xnack-"),
                   0);
  kt_assert_contains(text, "sp_gfx90a:xnack-.kpack");
  free(text);
  assert_int_equal(KT_KPACK(&text, NULL, "resolve", "--binary", split_lib,
                            "--arch", "gfx1100"),
                   0);
  kt_assert_contains(text, "sp_amdgcnspirv.kpack");
  free(text);
  assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", "--arch",
                            "gfx1100", split_lib),
                   0);
  /* Without the SPIR-V archive, that is a broken install, not a GPU the
   * build has no code for. */
  char* moved = kt_in_tmp("spirv-moved.kpack");
  archive = kt_path(all, ".kpack/sp_amdgcnspirv.kpack");
  assert_int_equal(rename(archive, moved), 0);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--arch",
                            "gfx1100", split_lib),
                   1);
  kt_assert_contains(text,
                     "gfx1100: KPACK_ERROR_ARCHIVE_NOT_FOUND: no "
                     "archive for this arch is installed");
  free(text);
  assert_int_equal(rename(moved, archive), 0);
  free(archive);
  free(moved);
  free(split_lib);

  /* --arch without amdgcnspirv leaves it out: gfx1100 is served nothing. */
  char* some = kt_in_tmp("some");
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--prefix", "sp", "--arch",
                            "gfx90a:xnack-", "-o", some, in),
                   0);
  archive = kt_path(some, ".kpack/sp_amdgcnspirv.kpack");
  assert_int_equal(access(archive, F_OK), -1);
  free(archive);
  split_lib = kt_path(some, "lib/libsp.so");
  assert_int_not_equal(KT_KPACK(NULL, NULL, "verify", "--binary", "--arch",
                                "gfx1100", split_lib),
                       0);
  free(split_lib);
  char* asked = kt_in_tmp("asked");
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--prefix", "sp", "--arch",
                            "amdgcnspirv", "-o", asked, in),
                   0);
  archive = kt_path(asked, ".kpack/sp_amdgcnspirv.kpack");
  assert_archive_serves(archive, "amdgcnspirv", &spirv);
  free(archive);
  archive = kt_path(asked, ".kpack/sp_gfx90a:xnack-.kpack");
  assert_int_equal(access(archive, F_OK), -1);
  free(archive);

  /* Per-arch: a tree of its own. */
  char* pa = kt_in_tmp("pa");
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--per-arch", "--prefix", "sp",
                            "-o", pa, in),
                   0);
  archive = kt_path(pa, "amdgcnspirv/.kpack/sp_amdgcnspirv.kpack");
  assert_archive_serves(archive, "amdgcnspirv", &spirv);
  free(archive);
  archive = kt_path(pa, "gfx90a/.kpack/sp_gfx90a:xnack-.kpack");
  assert_archive_serves(archive, "gfx90a:xnack-", &native);
  free(archive);
  free(native.data);
  free(spirv.data);
  free(lib);
  free(in);
  free(all);
  free(some);
  free(asked);
  free(pa);
}

static void test_split_output_is_deterministic_whatever_the_jobs(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* one = kt_in_tmp("one");
  char* two = kt_in_tmp("two");
  char* a = kt_tree_path(in, "lib/liba.so.1");
  char* b = kt_tree_path(in, "bin/b");
  write_fat(a, MANY_WRAPPERS, 71);
  write_program(b, FX_PROGRAM_PIE, CCOB_BUNDLES, 72);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-j1", "-o", one, in), 0);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-j3", "-o", two, in), 0);
  kt_assert_same_tree(one, two); /* byte for byte */
  free(a);
  free(b);
  free(in);
  free(one);
  free(two);
}

static void test_split_in_place_keeps_hard_links(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  char* other = kt_tree_path(in, "lib/libother.so.1");
  char* twin = kt_tree_path(in, "lib64/libfat.so.1");
  char* outside = kt_in_tmp("outside.so");
  char* original = kt_in_tmp("original.so");
  write_fat(lib, MANY_WRAPPERS, 21);
  write_fat(other, ONE_WRAPPER, 22);
  kt_copy_file(lib, original);
  assert_int_equal(link(lib, twin), 0);
  assert_int_equal(link(lib, outside), 0);
  struct stat before, after, st;
  assert_int_equal(stat(lib, &before), 0);
  assert_int_equal(before.st_nlink, 3);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", in), 0);
  assert_int_equal(stat(lib, &after), 0);
  assert_int_equal(after.st_ino, before.st_ino);
  assert_int_equal(after.st_nlink, 3);
  assert_int_equal(after.st_mtime, before.st_mtime);
  assert_int_equal(stat(twin, &st), 0);
  assert_int_equal(st.st_ino, before.st_ino);
  assert_int_equal(stat(outside, &st), 0); /* a link outside the tree too */
  assert_int_equal(st.st_ino, before.st_ino);
  assert_true(after.st_size < before.st_size);
  assert_int_equal(assert_round_trip(original, lib, "lib/libfat.so.1"), 12);
  assert_int_equal(assert_round_trip(original, twin, "lib/libfat.so.1"), 12);
  assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", lib, twin, other),
                   0);
  /* Nothing of ours is left beside the files. */
  char* dir = kt_path(in, "lib");
  char* argv[] = {"sh", "-c", "ls -a \"$0\" | grep -c kpack-split", dir, NULL};
  char* count = NULL;
  kt_run(argv, 10, &count, NULL);
  assert_string_equal(count, "0\n");
  free(count);
  free(dir);
  free(lib);
  free(other);
  free(twin);
  free(outside);
  free(original);
  free(in);
}

/* In place, a symbolic link given as the input (a soname chain) is taken
 * for the file it resolves to: that file is rewritten and named from its
 * own directory, and the links stay links. */
static void test_split_in_place_through_a_symlink_rewrites_its_target(
    void** state) {
  (void)state;
  char* dir = kt_in_tmp("soname");
  char* real = kt_tree_path(dir, "lib/libx.so.1.2");
  char* link1 = kt_path(dir, "lib/libx.so.1");
  char* link0 = kt_path(dir, "lib/libx.so");
  write_fat(real, MANY_WRAPPERS, 47);
  assert_int_equal(symlink("libx.so.1.2", link1), 0);
  assert_int_equal(symlink("libx.so.1", link0), 0);
  char* fat = kt_in_tmp("libx.so.1.2.orig");
  kt_copy_file(real, fat);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix", "x", link0),
      0);
  /* The links are as they were. */
  char target[64];
  ssize_t n = readlink(link0, target, sizeof(target) - 1);
  assert_true(n > 0);
  target[n] = '\0';
  assert_string_equal(target, "libx.so.1");
  n = readlink(link1, target, sizeof(target) - 1);
  assert_true(n > 0);
  target[n] = '\0';
  assert_string_equal(target, "libx.so.1.2");
  /* The file they resolve to is kpack-ified, named as itself. */
  kpack_host_t* host;
  kpack_host_wrapper_t w;
  assert_int_equal(kpack_host_open(real, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_wrapper(host, 0, &w), KPACK_SUCCESS);
  assert_string_equal(w.kernel_name, "libx.so.1.2");
  assert_int_equal(w.search_path_count, 1);
  assert_string_equal(w.search_paths[0], ".kpack/x_@GFXARCH@.kpack");
  kpack_host_close(host);
  char* archive = kt_path(dir, "lib/.kpack/x_gfx1100.kpack");
  assert_int_equal(access(archive, F_OK), 0);
  assert_int_equal(assert_round_trip(fat, link0, "libx.so.1.2"), 12);
  assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", link0), 0);
  free(archive);
  free(fat);
  free(link0);
  free(link1);
  free(real);
  free(dir);
}

/* The archives of two trees are the same files, byte for byte. */
static void assert_same_archives(const char* a, const char* b) {
  char* da = kt_path(a, ".kpack");
  char* db = kt_path(b, ".kpack");
  kt_assert_same_tree(da, db);
  free(da);
  free(db);
}

/* Two runs end as one run: a binary rebuilt for fewer arches, or split
 * again with an --arch that drops one, leaves none of its earlier code
 * objects in any archive of the group; keys of binaries the second run
 * does not write are carried over; an archive left empty is deleted. In
 * place and with -o over an earlier output alike. */
static void test_split_twice_ends_as_one_split_of_the_last_build(void** state) {
  (void)state;
  char* a3 = kt_in_tmp("liba3.so"); /* gfx90a, gfx942, gfx1100 */
  char* a2 = kt_in_tmp("liba2.so"); /* gfx90a, gfx942: the same code objects */
  char* b3 = kt_in_tmp("libb3.so");
  write_program_for(a3, FX_PROGRAM_SHARED, MANY_WRAPPERS, 61, 3);
  write_program_for(a2, FX_PROGRAM_SHARED, MANY_WRAPPERS, 61, 2);
  write_program_for(b3, FX_PROGRAM_SHARED, ONE_WRAPPER, 62, 3);
  static const char* const names[] = {"ref",  "inplace", "dropped",   "in",
                                      "out",  "refo",    "in1",       "out1",
                                      "ref1", "single",  "single_ref"};
  enum { N = sizeof(names) / sizeof(names[0]) };
  char* t[N];
  char *la[N], *lb[N];
  for (size_t i = 0; i < N; i++) {
    t[i] = kt_in_tmp(names[i]);
    la[i] = kt_tree_path(t[i], "lib/liba.so");
    lb[i] = kt_tree_path(t[i], "lib/libb.so");
  }
  enum { REF, INPLACE, DROPPED, IN, OUT, REFO, IN1, OUT1, REF1, ONE, ONE_REF };
  /* One run over the last build. */
  kt_copy_file(a2, la[REF]);
  kt_copy_file(b3, lb[REF]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix",
                            "t", t[REF]),
                   0);
  /* In place: liba rebuilt for fewer arches, then split again. libb,
   * kpack-ified by the first run, is left alone: its keys carry over. */
  kt_copy_file(a3, la[INPLACE]);
  kt_copy_file(b3, lb[INPLACE]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix",
                            "t", t[INPLACE]),
                   0);
  kt_copy_file(a2, la[INPLACE]);
  char* text;
  assert_int_equal(
      KT_KPACK(&text, NULL, "split", "--in-place", "--prefix", "t", t[INPLACE]),
      0);
  kt_assert_contains(text, "4 code objects of earlier builds removed");
  free(text);
  kt_assert_same_tree(t[INPLACE], t[REF]);
  /* In place, the same build split again with --arch dropping gfx1100. */
  kt_copy_file(a3, la[DROPPED]);
  kt_copy_file(b3, lb[DROPPED]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix",
                            "t", t[DROPPED]),
                   0);
  kt_copy_file(a3, la[DROPPED]);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix", "t",
               "--arch", "gfx90a", "--arch", "gfx942", t[DROPPED]),
      0);
  assert_same_archives(t[DROPPED], t[REF]);
  /* -o over the output of an earlier run of the same tree. */
  kt_copy_file(a3, la[IN]);
  kt_copy_file(b3, lb[IN]);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-o", t[OUT], "-q", "--prefix", "t", t[IN]),
      0);
  kt_copy_file(a2, la[IN]);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-o", t[OUT], "-q", "--prefix", "t", t[IN]),
      0);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", t[REFO], "-q",
                            "--prefix", "t", t[IN]),
                   0);
  kt_assert_same_tree(t[OUT], t[REFO]);
  assert_same_archives(t[OUT], t[REF]);
  /* -o again with --arch: archives left empty are deleted. */
  kt_copy_file(a3, la[IN1]);
  unlink(lb[IN1]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", t[OUT1], "-q",
                            "--prefix", "t", t[IN1]),
                   0);
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", t[OUT1], "--prefix",
                            "t", "--arch", "gfx90a", t[IN1]),
                   0);
  kt_assert_contains(text, "2 archives left empty deleted");
  free(text);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", t[REF1], "-q",
                            "--prefix", "t", "--arch", "gfx90a", t[IN1]),
                   0);
  kt_assert_same_tree(t[OUT1], t[REF1]);
  char* only = kt_path(t[OUT1], ".kpack/t_gfx90a:xnack-.kpack");
  assert_int_equal(access(only, F_OK), 0);
  free(only);
  /* A single file in place: its directory's archives are its group's. */
  kt_copy_file(a3, la[ONE]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix",
                            "t", la[ONE]),
                   0);
  kt_copy_file(a2, la[ONE]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix",
                            "t", la[ONE]),
                   0);
  kt_copy_file(a2, la[ONE_REF]);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "--in-place", "-q", "--prefix",
                            "t", la[ONE_REF]),
                   0);
  char* again_lib = kt_path(t[ONE], "lib");
  char* ref_lib = kt_path(t[ONE_REF], "lib");
  assert_same_archives(again_lib, ref_lib);
  free(again_lib);
  free(ref_lib);
  for (size_t i = 0; i < N; i++) {
    free(t[i]);
    free(la[i]);
    free(lb[i]);
  }
  free(a3);
  free(a2);
  free(b3);
}

/* The tree of the kill test: a single-link binary, a hard-linked pair, a
 * CCOB binary and a plain file. */
static void write_kill_tree(const char* root) {
  char* a = kt_tree_path(root, "lib/liba.so.1");
  char* b = kt_tree_path(root, "lib/libb.so.1");
  char* b2 = kt_tree_path(root, "lib/libb2.so.1");
  char* c = kt_tree_path(root, "bin/c");
  char* x = kt_tree_path(root, "share/x.txt");
  write_fat(a, ONE_WRAPPER, 31);
  write_fat(b, MANY_WRAPPERS, 32);
  assert_int_equal(link(b, b2), 0);
  write_fat(c, CCOB_BUNDLES, 33);
  kt_write_file(x, "x\n", 2);
  free(a);
  free(b);
  free(b2);
  free(c);
  free(x);
}

static void test_killed_in_place_run_leaves_no_half_written_file(void** state) {
  (void)state;
  static const char* const files[] = {"lib/liba.so.1", "lib/libb.so.1", "bin/c",
                                      "share/x.txt"};
  char* orig = kt_in_tmp("orig");
  char* ref = kt_in_tmp("ref");
  write_kill_tree(orig);
  write_kill_tree(ref);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "--in-place", "--prefix", "k", ref), 0);
  unsigned kills = 0, midway = 0;
  for (unsigned step = 1; step < 100; step++) {
    char name[32];
    snprintf(name, sizeof(name), "run%u", step);
    char* run = kt_in_tmp(name);
    write_kill_tree(run);
    int status =
        kt_run_killed("KPACK_SPLIT_KILL_AFTER", step,
                      (const char* const[]){"split", "--in-place", "--prefix",
                                            "k", run, NULL});
    bool finished = WIFEXITED(status);
    if (finished)
      assert_int_equal(WEXITSTATUS(status), 0);
    else
      assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* Each file is as it was or as a whole run makes it; only a file whose
     * committed redo copy is beside it may be between the two. */
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
      char* path = kt_path(run, files[f]);
      char* was = kt_path(orig, files[f]);
      char* will = kt_path(ref, files[f]);
      char* redo = kt_path(run, "lib/.kpack-split.libb.so.1.redo");
      size_t n_was, n_will;
      void* d_was = kt_read_file(was, &n_was);
      void* d_will = kt_read_file(will, &n_will);
      bool whole = holds(path, d_was, n_was) || holds(path, d_will, n_will);
      if (!whole && !(f == 1 && access(redo, F_OK) == 0))
        fail_msg("killed at step %u: %s is half written", step, files[f]);
      midway += !whole;
      free(d_was);
      free(d_will);
      free(path);
      free(was);
      free(will);
      free(redo);
    }
    /* The next run finishes the job: the tree a whole run makes, links
     * kept. */
    if (!finished) {
      kills++;
      assert_int_equal(
          KT_KPACK(NULL, NULL, "split", "--in-place", "--prefix", "k", run), 0);
    }
    kt_assert_same_tree(run, ref);
    assert_hard_linked(run, "lib/libb.so.1", "lib/libb2.so.1");
    kt_rmtree(run);
    free(run);
    if (finished)
      break;
  }
  assert_true(kills >= 8); /* every kind of step was interrupted */
  assert_true(midway > 0); /* including a rewrite in place, halfway */
  free(orig);
  free(ref);
}

/* An in-place run over a tree while another is writing there: the first
 * is stopped with its first temporary file written and synced, which a
 * second run would take for a killed run's and remove. The second is
 * refused and touches nothing, as are runs over a directory and a file
 * inside the tree; the first, let go on, ends as if it had been alone. */
static void test_in_place_run_beside_another_is_refused(void** state) {
  (void)state;
  char* run = kt_in_tmp("beside");
  char* ref = kt_in_tmp("beside-ref");
  write_kill_tree(run);
  write_kill_tree(ref);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "--in-place", "--prefix", "k", ref), 0);
  const char* const args[] = {"split", "--in-place", "--prefix",
                              "k",     run,          NULL};
  pid_t first = kt_start_stopped("KPACK_SPLIT_STOP_AFTER", 1, args);
  char* before = kt_tree_state(run, true);
  assert_non_null(strstr(before, ".kpack-split."));
  char* lib = kt_path(run, "lib");
  char* file = kt_path(run, "bin/c");
  const char* operands[] = {run, lib, file};
  const char* why[] = {"is writing in this tree", "which holds it",
                       "which holds it"};
  for (size_t i = 0; i < 3; i++) {
    char* err = NULL;
    assert_int_equal(KT_KPACK(NULL, &err, "split", "--in-place", "--prefix",
                              "k", operands[i]),
                     1);
    kt_assert_contains(err, "another kpack split --in-place is writing in");
    kt_assert_contains(err, why[i]);
    free(err);
  }
  char* after = kt_tree_state(run, true);
  assert_string_equal(after, before);
  assert_int_equal(kt_resume_stopped(first), 0);
  kt_assert_same_tree(run, ref);
  assert_hard_linked(run, "lib/libb.so.1", "lib/libb2.so.1");
  free(after);
  free(before);
  free(file);
  free(lib);
  free(run);
  free(ref);
}

/* Starts kt_kpack with `args`, a run that must wait for another's archive
 * directory: returns once it has said so, naming `dir` ("/lib/.kpack",
 * the end of its path), its stderr's read end in *fd. */
static pid_t start_waiting(const char* const* args, const char* dir, int* fd) {
  pid_t pid = kt_start_piped(args, fd);
  char* said = NULL;
  size_t last = 0;
  while (args[last + 1] != NULL)
    last++;
  if (!kt_read_until(*fd, "waiting for it to end", &said))
    fail_msg("the split of %s did not wait for the run before it:\n%s",
             args[last], said);
  char* expected = NULL;
  assert_true(asprintf(&expected,
                       "%s: another kpack split is writing archives here; "
                       "waiting for it to end",
                       dir) > 0);
  kt_assert_contains(said, expected);
  free(expected);
  free(said);
  return pid;
}

/* The run `second` (start_waiting(), its stderr `fd`) waits while `first`
 * is held: `dir` is still as `before`; let go, both end well and `dir` is
 * the same tree as `ref`, where the same runs ran one after the other. */
static void end_in_turn(pid_t first, pid_t second, int fd, const char* dir,
                        const char* before, const char* ref) {
  char* now = kt_tree_state(dir, true);
  assert_string_equal(now, before);
  free(now);
  assert_int_equal(kt_resume_stopped(first), 0);
  assert_int_equal(kt_wait_exit(second), 0);
  close(fd);
  kt_assert_same_tree(dir, ref);
}

/* In-place runs over single files of one directory, `pa` and `pb` their
 * prefixes: while the first rewrites its file, a second over the same
 * file is refused and changes nothing; one over the other file writes its
 * archives in the same directory, so it waits, saying so, and changes
 * nothing until the first has ended (Ctrl-C ends such a wait, changing
 * nothing). Both then end as the same two runs one after the other do. With one
 * prefix they share the archives: the second reads the first's and keeps its
 * kernels. */
static void runs_over_neighbours_take_turns(const char* name, const char* pa,
                                            const char* pb) {
  char* run = kt_in_tmp(name);
  char* ref = kt_in_tmp("turns-ref");
  kt_rmtree(ref);
  write_kill_tree(run);
  write_kill_tree(ref);
  char* a = kt_path(run, "lib/liba.so.1");
  char* b = kt_path(run, "lib/libb.so.1");
  char* ref_a = kt_path(ref, "lib/liba.so.1");
  char* ref_b = kt_path(ref, "lib/libb.so.1");
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "--in-place", "--prefix", pa, ref_a), 0);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "--in-place", "--prefix", pb, ref_b), 0);
  const char* const args[] = {"split", "--in-place", "--prefix", pa, a, NULL};
  pid_t first = kt_start_stopped("KPACK_SPLIT_STOP_AFTER", 1, args);
  char* before = kt_tree_state(run, true);
  char* err = NULL;
  assert_int_equal(
      KT_KPACK(NULL, &err, "split", "--in-place", "--prefix", pa, a), 1);
  kt_assert_contains(err,
                     "another kpack split --in-place is rewriting "
                     "this file; wait for it to end");
  char* after = kt_tree_state(run, true);
  assert_string_equal(after, before);
  /* Ctrl-C ends the wait: exit 130, nothing changed. */
  const char* const second_args[] = {"split", "--in-place", "--prefix", pb,
                                     b,       NULL};
  int waiting_fd;
  pid_t waiting = start_waiting(second_args, "/lib/.kpack", &waiting_fd);
  assert_int_equal(kill(waiting, SIGINT), 0);
  assert_int_equal(kt_wait_exit(waiting), 130);
  close(waiting_fd);
  free(after);
  after = kt_tree_state(run, true);
  assert_string_equal(after, before);
  int pipe_fd;
  pid_t second = start_waiting(second_args, "/lib/.kpack", &pipe_fd);
  end_in_turn(first, second, pipe_fd, run, before, ref);
  free(err);
  free(after);
  free(before);
  free(ref_b);
  free(ref_a);
  free(b);
  free(a);
  free(run);
  free(ref);
}

static void test_in_place_runs_over_files_of_one_directory_take_turns(
    void** state) {
  (void)state;
  runs_over_neighbours_take_turns("turns", "ka", "kb");
}

/* Without turns, the second run would write the shared archives with its
 * kernels only, and the first, ending after it, with its own only. */
static void test_in_place_runs_sharing_archives_keep_each_others_kernels(
    void** state) {
  (void)state;
  runs_over_neighbours_take_turns("turns-shared", "k", "k");
}

/* Two -o runs into one OUTDIR write its archives, with one prefix the
 * same ones: the second waits for the first, changing nothing meanwhile,
 * then ends as it would after it. Without turns each would write the
 * archives with its own kernels only, one failing as the other replaced
 * the temporary file they share. */
static void test_runs_into_one_output_directory_take_turns(void** state) {
  (void)state;
  char* in = kt_in_tmp("turns-o-in");
  char* out = kt_in_tmp("turns-o");
  char* ref = kt_in_tmp("turns-o-ref");
  write_kill_tree(in);
  char* a = kt_path(in, "lib/liba.so.1");
  char* b = kt_path(in, "lib/libb.so.1");
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", ref, "--prefix", "k", a),
                   0);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", ref, "--prefix", "k", b),
                   0);
  pid_t first = kt_start_stopped(
      "KPACK_SPLIT_STOP_AFTER", 1,
      (const char* const[]){"split", "-o", out, "--prefix", "k", a, NULL});
  char* before = kt_tree_state(out, true);
  int pipe_fd;
  pid_t second = start_waiting(
      (const char* const[]){"split", "-o", out, "--prefix", "k", b, NULL},
      "/turns-o/.kpack", &pipe_fd);
  end_in_turn(first, second, pipe_fd, out, before, ref);
  free(before);
  free(b);
  free(a);
  free(ref);
  free(out);
  free(in);
}

/* The input of a re-split over an earlier output: a binary (rebuilt for
 * fewer arches the second time, so that an archive goes), a hard link to
 * it, a symbolic link, a data file that changes, and a directory. */
static void write_rerun_tree(const char* root, uint32_t seed, size_t arches,
                             const char* data) {
  char* lib = kt_tree_path(root, "lib/libx.so");
  char* hard = kt_path(root, "lib/libx-hard.so");
  char* sym = kt_path(root, "lib/libx-link.so");
  char* text = kt_tree_path(root, "share/sub/data.txt");
  unlink(lib);
  unlink(hard);
  unlink(sym);
  write_program_for(lib, FX_PROGRAM_SHARED, MANY_WRAPPERS, seed, arches);
  assert_int_equal(link(lib, hard), 0);
  assert_int_equal(symlink("libx.so", sym), 0);
  kt_write_file(text, data, strlen(data));
  free(lib);
  free(hard);
  free(sym);
  free(text);
}

/* A -o run over an earlier output that fails at any of its writes (each
 * failed in turn through KPACK_SPLIT_FAIL_AFTER: a transformed binary,
 * each archive, each copy and link, each file put in place, each
 * directory's mode) leaves the earlier output exactly as it was: every
 * file, archive, link, mode and time, directories' included; no archive
 * of the new build beside binaries of the old one. */
static void test_failed_rerun_leaves_the_earlier_output_as_it_was(
    void** state) {
  (void)state;
  char* in = kt_in_tmp("rerun-in");
  char* out = kt_in_tmp("rerun-out");
  char* ref = kt_in_tmp("rerun-ref");
  write_rerun_tree(in, 71, 3, "build 1\n");
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--prefix", "x", in), 0);
  write_rerun_tree(in, 72, 2, "build 2, longer\n");
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", ref, "--prefix", "x", in), 0);
  unsigned failures =
      kt_fail_each_write("KPACK_SPLIT_FAIL_AFTER", out,
                         (const char* const[]){"split", "-q", "-o", out,
                                               "--prefix", "x", in, NULL});
  /* 1 binary, 3 archives (one dropped), 3 copies and links, 6 files put
   * in place, 6 directories. */
  assert_true(failures >= 15);
  kt_assert_same_tree(out, ref);
  char* gone = kt_path(out, ".kpack/x_gfx1100.kpack");
  assert_int_not_equal(access(gone, F_OK), 0);
  free(gone);
  free(ref);
  free(out);
  free(in);
}

/* An --in-place run that fails at any of its writes (each failed in turn
 * through KPACK_SPLIT_FAIL_AFTER: each transformed binary, archive and
 * rename, the hard-linked binary's rewrite in its inode) leaves the tree
 * exactly as it was: the binaries of the earlier build, the archives of
 * the earlier split (none of them gone or holding new keys), no archive
 * directory that was not there, every mode and time, directories'
 * included. The tree: an earlier in-place split of a library (with a hard
 * link and a symbolic link to it) and of an executable, then both
 * rebuilt, the library for fewer arches (an archive goes), the executable
 * alone in its inode. */
static void test_failed_in_place_run_leaves_the_tree_as_it_was(void** state) {
  (void)state;
  char* in = kt_in_tmp("inplace-fail");
  char* ref = kt_in_tmp("inplace-fail-ref");
  char* exe = kt_tree_path(in, "bin/y");
  write_rerun_tree(in, 73, 3, "build 1\n");
  write_program_for(exe, FX_PROGRAM_PIE, MANY_WRAPPERS, 74, 3);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "--in-place", "--prefix", "x", in),
      0);
  write_rerun_tree(in, 75, 2, "build 2, longer\n");
  unlink(exe);
  write_program_for(exe, FX_PROGRAM_PIE, MANY_WRAPPERS, 76, 2);
  char* cp_argv[] = {"cp", "-a", in, ref, NULL};
  assert_int_equal(kt_run(cp_argv, 60, NULL, NULL), 0);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "--in-place", "--prefix", "x", ref),
      0);
  unsigned failures =
      kt_fail_each_write("KPACK_SPLIT_FAIL_AFTER", in,
                         (const char* const[]){"split", "-q", "--in-place",
                                               "--prefix", "x", in, NULL});
  /* 2 binaries and 2 archives written; 3 archives (one dropped) and the
   * executable put in place; the library's copy kept, then its rewrite
   * failed after the commit point. */
  assert_true(failures >= 10);
  kt_assert_same_tree(in, ref);
  char* gone = kt_path(in, ".kpack/x_gfx1100.kpack");
  assert_int_not_equal(access(gone, F_OK), 0);
  assert_hard_linked(in, "lib/libx.so", "lib/libx-hard.so");
  free(gone);
  free(exe);
  free(ref);
  free(in);
}

/* A HIP relocatable object (.o, as -dev packages ship them) beside a
 * library in a tree: copied byte for byte with a note saying why and what
 * to split instead, the library split as usual; before, the whole run
 * failed on it ("neither ET_EXEC nor ET_DYN"). */
static void test_split_copies_a_relocatable_object_as_data(void** state) {
  (void)state;
  char* in = kt_in_tmp("objects-in");
  char* out = kt_in_tmp("objects-out");
  char* obj = kt_tree_path(in, "lib/hip/kernels.o");
  char* lib = kt_tree_path(in, "lib/libx.so");
  char* build = kt_in_tmp("objects-build");
  kt_mkdirs(build);
  void* k = kt_pattern(700, 81);
  const fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                        {"hipv4-amdgcn-amd-amdhsa--gfx1100", k, 700}};
  fx_buf bundle = fx_bundle(e, 2);
  fx_program_opts o = {.kind = FX_PROGRAM_SHARED,
                       .bundles = &bundle,
                       .bundle_count = 1,
                       .flags = "-c"};
  assert_true(fx_build_program(build, &o, obj));
  write_fat(lib, MANY_WRAPPERS, 82);
  char *text, *err;
  int rc = KT_KPACK(&text, &err, "split", "-o", out, "--prefix", "x", in);
  if (rc != 0)
    fail_msg("exit %d: %s", rc, err);
  char* expected;
  assert_true(asprintf(&expected,
                       "kpack: %s: a relocatable object (.o) with device "
                       "code: copied as it is; split the binaries linked "
                       "from it\n",
                       obj) > 0);
  kt_assert_contains(err, expected);
  kt_assert_contains(text, "split: 1 binary transformed");
  char* copied = kt_path(out, "lib/hip/kernels.o");
  size_t n;
  void* bytes = kt_read_file(obj, &n);
  assert_true(holds(copied, bytes, n));
  free(bytes);
  free(copied);
  free(expected);
  free(text);
  free(err);
  fx_free(&bundle);
  free(k);
  free(build);
  free(lib);
  free(obj);
  free(out);
  free(in);
}

/* A re-split into the same -o with another --prefix would leave the old
 * prefix's archives beside the new ones, holding the same binary keys
 * (kpackfs and diff then see duplicates): refused before anything is
 * written, naming the archive, the key and the prefixes; the earlier
 * output is left as it was, and the old prefix still works. */
static void test_split_again_with_another_prefix_is_refused(void** state) {
  (void)state;
  char* in = kt_in_tmp("prefix-in");
  char* out = kt_in_tmp("prefix-out");
  char* lib = kt_tree_path(in, "lib/libx.so");
  write_fat(lib, MANY_WRAPPERS, 91);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--prefix", "old", in), 0);
  char* before = kt_tree_state(out, true);
  char* err;
  assert_int_equal(
      KT_KPACK(NULL, &err, "split", "-q", "-o", out, "--prefix", "new", in), 1);
  kt_assert_contains(err, "an archive of the prefix 'old' holds lib/libx.so#");
  kt_assert_contains(err, "which this run writes with the prefix 'new'");
  kt_assert_contains(err, "or split with --prefix old");
  free(err);
  char* after = kt_tree_state(out, true);
  assert_string_equal(after, before);
  free(after);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--prefix", "old", in), 0);
  free(before);
  free(lib);
  free(out);
  free(in);
}

static void test_split_arch_keeps_only_the_listed_arches(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* out = kt_in_tmp("out");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  write_fat(lib, MANY_WRAPPERS, 41);
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", out, "--arch",
                            "gfx1100", "--prefix", "p", in),
                   0);
  kt_assert_contains(text, "1 archive written: 4 code objects");
  kt_assert_contains(text, "dropped by --arch: gfx90a:xnack- (4 code objects)");
  kt_assert_contains(
      text, "dropped by --arch: gfx942:sramecc+:xnack- (4 code objects)");
  free(text);
  char* kept = kt_path(out, ".kpack/p_gfx1100.kpack");
  char* dropped = kt_path(out, ".kpack/p_gfx90a:xnack-.kpack");
  assert_int_equal(access(kept, F_OK), 0);
  assert_int_equal(access(dropped, F_OK), -1);
  char* o_lib = kt_path(out, "lib/libfat.so.1");
  assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", o_lib), 0);
  free(o_lib);
  /* A list, as verify --arch takes one, is each of its targets, each
   * checked; an empty item or a bad target refuses the command line. */
  char* out2 = kt_in_tmp("out-list");
  char* kept2 = kt_path(out2, ".kpack/p_gfx90a:xnack-.kpack");
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", out2, "--arch",
                            "gfx90a:xnack-,gfx1100", "--prefix", "p", in),
                   0);
  kt_assert_contains(text, "2 archives written: 8 code objects");
  free(text);
  assert_int_equal(access(kept2, F_OK), 0);
  char* err;
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-o", out, "--arch",
                            "gfx90a:xnack-,gfx1100,", "--prefix", "p", in),
                   2);
  kt_assert_contains(err, "an empty one in the list");
  free(err);
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-o", out, "--arch",
                            "gfx1100,gfx90a:xnak-", "--prefix", "p", in),
                   2);
  kt_assert_contains(err, "--arch 'gfx90a:xnak-': not a GPU target");
  free(err);
  /* A prefix that cannot be part of a file name is a bad command line. */
  assert_int_equal(
      KT_KPACK(NULL, &err, "split", "-o", out, "--prefix", "a/b", in), 2);
  kt_assert_contains(err, "--prefix 'a/b' cannot be part of a file name");
  free(err);
  free(kept2);
  free(out2);
  free(kept);
  free(dropped);
  free(lib);
  free(in);
  free(out);
}

/* --arch names agents, as the loader sees them: a bare processor keeps
 * every code object of it whatever its features, a feature keeps what an
 * agent with it could be served, a full target string is accepted. An
 * --arch that keeps nothing, or a binary that would keep nothing, is an
 * error before anything is written. */
static void test_split_arch_follows_the_loaders_target_rules(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  write_fat(lib, MANY_WRAPPERS, 43);
  static const struct {
    const char* arch;
    const char* kept;
  } cases[] = {
      {"gfx90a", "gfx90a:xnack-"},
      {"gfx90a:xnack-", "gfx90a:xnack-"},
      {"gfx942", "gfx942:sramecc+:xnack-"},
      {"gfx942:xnack-", "gfx942:sramecc+:xnack-"},
      {"amdgcn-amd-amdhsa--gfx1100", "gfx1100"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char name[32];
    snprintf(name, sizeof(name), "out%zu", i);
    char* out = kt_in_tmp(name);
    char* text;
    assert_int_equal(KT_KPACK(&text, NULL, "split", "-o", out, "--arch",
                              cases[i].arch, "--prefix", "p", in),
                     0);
    kt_assert_contains(text, "1 archive written: 4 code objects");
    free(text);
    char archive[128];
    snprintf(archive, sizeof(archive), ".kpack/p_%s.kpack", cases[i].kept);
    char* kept = kt_path(out, archive);
    if (access(kept, F_OK) != 0)
      fail_msg("--arch %s: no %s", cases[i].arch, archive);
    char* o_lib = kt_path(out, "lib/libfat.so.1");
    assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", o_lib), 0);
    free(o_lib);
    free(kept);
    free(out);
  }
  /* Keeping nothing: named, exit 1, nothing written, also in place and
   * quiet. */
  char* out = kt_in_tmp("none");
  char* before = describe(in, true);
  char* err;
  assert_int_equal(
      KT_KPACK(NULL, &err, "split", "-o", out, "--arch", "gfx90a:xnack+", in),
      1);
  kt_assert_contains(err, "--arch gfx90a:xnack+ matches no code object");
  free(err);
  assert_int_equal(access(out, F_OK), -1);
  assert_int_equal(KT_KPACK(NULL, &err, "split", "--in-place", "-q", "--arch",
                            "gfx90a", "--arch", "gfx1030", in),
                   1);
  kt_assert_contains(err, "--arch gfx1030 matches no code object");
  free(err);
  char* after = describe(in, true);
  assert_string_equal(before, after);
  free(after);
  /* A binary --arch would leave without device code is refused, named. */
  void* k = kt_pattern(700, 3);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx1100", k, 700}};
  fx_buf elf = one_bundle_elf(e, 2);
  char* only1100 = kt_path(in, "lib/libonly1100.so");
  kt_write_file(only1100, elf.data, elf.size);
  free(before);
  before = describe(in, true);
  assert_int_equal(
      KT_KPACK(NULL, &err, "split", "--in-place", "-q", "--arch", "gfx90a", in),
      1);
  kt_assert_contains(err, only1100);
  kt_assert_contains(err, "keeps none of its code objects (gfx1100)");
  free(err);
  after = describe(in, true);
  assert_string_equal(before, after);
  free(after);
  free(before);
  free(only1100);
  fx_free(&elf);
  free(k);
  free(out);
  free(lib);
  free(in);
}

static void test_split_bad_inputs_are_refused_and_leave_inputs_alone(
    void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* good = kt_tree_path(in, "lib/libgood.so.1");
  char* inside = kt_path(in, "lib/out");
  write_fat(good, ONE_WRAPPER, 51);
  char* before = describe(in, true);
  char* err;
  /* An output directory inside the input. */
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-o", inside, in), 1);
  kt_assert_contains(err, in);
  kt_assert_contains(err, "inside");
  free(err);
  /* A binary the transform refuses: a pointer no relocation sets, in a
   * shared object. Named, exit 1, and in place nothing changes at all. */
  void* k = kt_pattern(500, 1);
  fx_entry e[] = {{"hipv4-amdgcn-amd-amdhsa--gfx1100", k, 500}};
  fx_buf elf = one_bundle_elf(e, 1);
  char* bad = kt_tree_path(in, "lib/libbad.so.1");
  kt_write_file(bad, elf.data, elf.size);
  free(before);
  before = describe(in, true);
  assert_int_equal(KT_KPACK(NULL, &err, "split", "--in-place", in), 1);
  kt_assert_contains(err, bad);
  free(err);
  char* after = describe(in, true);
  assert_string_equal(before, after);
  free(after);
  /* A truncated ELF. */
  kt_write_file(bad, elf.data, 100);
  free(before);
  before = describe(in, true);
  char* out = kt_in_tmp("out");
  assert_int_equal(KT_KPACK(NULL, &err, "split", "-o", out, in), 1);
  kt_assert_contains(err, bad);
  free(err);
  after = describe(in, true);
  assert_string_equal(before, after);
  free(after);
  /* Command lines. */
  assert_int_equal(KT_KPACK(NULL, NULL, "split", in), 2);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", out, "--in-place", in),
                   2);
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", out), 2);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-o", out, "--prefix", "a/b", in), 2);
  fx_free(&elf);
  free(k);
  free(out);
  free(bad);
  free(before);
  free(good);
  free(inside);
  free(in);
}

static void test_verify_binary_names_binary_record_and_arch(void** state) {
  (void)state;
  char* in = kt_in_tmp("in");
  char* out = kt_in_tmp("out");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  write_fat(lib, ONE_WRAPPER, 61);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-o", out, "--prefix", "v", in), 0);
  char* o_lib = kt_path(out, "lib/libfat.so.1");
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_lib), 0);
  kt_assert_contains(text, "OK, 1 record, 3 loads");
  free(text);
  /* An archive that declares gfx1100 but lacks this binary's code object. */
  char* archive = kt_path(out, ".kpack/v_gfx1100.kpack");
  const char* arches[] = {"gfx1100"};
  kt_kernel other = {"lib/other.so#0", "gfx1100", "abc", 3};
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 1,
                   &other, 1);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_lib), 1);
  char* line;
  assert_true(asprintf(&line,
                       "%s: record 0 (lib/libfat.so.1#0) gfx1100: "
                       "KPACK_ERROR_KERNEL_NOT_FOUND",
                       o_lib) > 0);
  kt_assert_contains(text, line);
  free(line);
  free(text);
  /* No archive at all. */
  char* kpack_dir = kt_path(out, ".kpack");
  kt_rmtree(kpack_dir);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_lib), 1);
  kt_assert_contains(text,
                     "record 0 (lib/libfat.so.1#0) gfx1100: "
                     "KPACK_ERROR_ARCHIVE_NOT_FOUND: no archive for "
                     "this arch is installed");
  free(text);
  /* A fat binary is reported and skipped. */
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", lib), 0);
  kt_assert_contains(text, "not kpack-ified");
  free(text);
  free(kpack_dir);
  free(archive);
  free(o_lib);
  free(lib);
  free(in);
  free(out);
}

static void test_split_real_librocrand(void** state) {
  (void)state;
  char* rocrand = kt_librocrand();
  char* in = kt_in_tmp("rocrand");
  char* out = kt_in_tmp("out");
  char* again = kt_in_tmp("again");
  char* lib = kt_tree_path(in, "lib/librocrand.so.1.1");
  char* link1 = kt_path(in, "lib/librocrand.so.1");
  kt_copy_file(rocrand, lib);
  assert_int_equal(symlink("librocrand.so.1.1", link1), 0);
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "split", "-j2", "-o", out, "--prefix",
                            "rand_lib", in),
                   0);
  kt_assert_contains(text, "1 binary transformed");
  kt_assert_contains(text, "7 archives written");
  free(text);
  char* o_lib = kt_path(out, "lib/librocrand.so.1.1");
  char* o_link = kt_path(out, "lib/librocrand.so.1");
  assert_int_equal(assert_round_trip(lib, o_lib, "lib/librocrand.so.1.1"), 7);
  assert_int_equal(assert_round_trip(lib, o_link, "lib/librocrand.so.1.1"), 7);
  kpack_host_t* host;
  kpack_host_wrapper_t w;
  assert_int_equal(kpack_host_open(o_lib, &host), KPACK_SUCCESS);
  assert_int_equal(kpack_host_get_wrapper(host, 0, &w), KPACK_SUCCESS);
  assert_int_equal(w.search_path_count, 1);
  assert_string_equal(w.search_paths[0], "../.kpack/rand_lib_@GFXARCH@.kpack");
  kpack_host_close(host);
  /* The device code left the file. */
  kpack_fatbin_t* fb;
  kpack_fatbin_info_t info;
  struct stat a, b;
  assert_int_equal(kpack_fatbin_open(lib, &fb), KPACK_SUCCESS);
  assert_int_equal(kpack_fatbin_get_info(fb, &info), KPACK_SUCCESS);
  kpack_fatbin_close(fb);
  assert_int_equal(stat(lib, &a), 0);
  assert_int_equal(stat(o_lib, &b), 0);
  assert_true((uint64_t)(a.st_size - b.st_size) >= info.fatbin_size / 100 * 95);
  assert_int_equal(KT_KPACK(NULL, NULL, "verify", "--binary", o_lib), 0);
  /* A real HIP runtime loads the split library as it loads the original. */
  if (!kt_loads_in_child(lib, "rocrand_create_generator"))
    fail_msg(
        "the original librocrand does not load: is libamdhip64-5 "
        "installed? (make check installs it)");
  assert_true(kt_loads_in_child(o_lib, "rocrand_create_generator"));
  assert_int_equal(KT_KPACK(NULL, NULL, "split", "-o", again, out), 0);
  kt_assert_same_tree(out, again);
  free(o_lib);
  free(o_link);
  free(link1);
  free(lib);
  free(rocrand);
  free(in);
  free(out);
  free(again);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_create_fatbin_takes_an_empty_first_code_object, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_create_fatbin_with_only_host_code_is_a_clear_error,
          kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_create_arch_follows_the_loaders_target_rules, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_round_trip_on_fixture_fat_binaries, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_mirrors_links_symlinks_modes_and_times, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_of_its_own_output_changes_nothing, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_json_summary_counts_what_the_text_does, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_output_is_deterministic_whatever_the_jobs, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(test_split_copies_sparse_files_sparse,
                                      kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(test_split_spirv_is_the_portable_fallback,
                                      kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(test_split_in_place_keeps_hard_links,
                                      kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_in_place_through_a_symlink_rewrites_its_target,
          kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_twice_ends_as_one_split_of_the_last_build, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_killed_in_place_run_leaves_no_half_written_file, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_in_place_run_beside_another_is_refused, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_in_place_runs_over_files_of_one_directory_take_turns,
          kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_in_place_runs_sharing_archives_keep_each_others_kernels,
          kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_runs_into_one_output_directory_take_turns, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_failed_rerun_leaves_the_earlier_output_as_it_was, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_failed_in_place_run_leaves_the_tree_as_it_was, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_copies_a_relocatable_object_as_data, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_again_with_another_prefix_is_refused, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_arch_keeps_only_the_listed_arches, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_arch_follows_the_loaders_target_rules, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_split_bad_inputs_are_refused_and_leave_inputs_alone,
          kt_kpack_setup, kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(
          test_verify_binary_names_binary_record_and_arch, kt_kpack_setup,
          kt_kpack_teardown),
      cmocka_unit_test_setup_teardown(test_split_real_librocrand,
                                      kt_kpack_setup, kt_kpack_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
