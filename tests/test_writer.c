/* SPDX-License-Identifier: MIT
 *
 * The streaming writer: deterministic bytes whatever the thread count,
 * atomic replacement, clean abort, argument checks, and ROCm's layout
 * (64-byte aligned blobs, frame table at offset 64, key order).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support.h"

static size_t entries_in(const char* dir) {
  size_t n = 0;
  DIR* d = opendir(dir);
  assert_non_null(d);
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Writes 300 kernels of varied sizes with `threads` compression threads. */
static void* write_sample(const char* name, kpack_compression_scheme_t scheme,
                          unsigned threads, size_t* size) {
  static const char* arches[] = {"gfx1100", "gfx90a"};
  kpack_writer_options_t o = {.scheme = scheme,
                              .threads = threads,
                              .group_name = "blas",
                              .gfx_arch_family = "gfx9",
                              .gfx_arches = arches,
                              .gfx_arch_count = 2};
  char* path = kt_path(kt_tmp, name);
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  for (unsigned i = 0; i < 300; i++) {
    char bin[32];
    size_t n = (i * 7919) % 20000;
    void* data = kt_pattern(n, i);
    snprintf(bin, sizeof bin, "lib/l%u.so#%u", i % 150, i / 150);
    assert_int_equal(
        kpack_writer_add_kernel(w, bin, i % 3 ? "gfx90a" : "gfx942", data, n),
        KPACK_SUCCESS);
    free(data);
  }
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  void* bytes = kt_read_file(path, size);
  assert_non_null(bytes);
  free(path);
  return bytes;
}

static void test_output_is_identical_for_identical_input(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    size_t n1, n2, n3;
    void* a = write_sample("a.kpack", s, 1, &n1);
    void* b = write_sample("b.kpack", s, 1, &n2);
    void* c = write_sample("c.kpack", s, 4, &n3);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    assert_int_equal(n1, n3); /* threads change nothing */
    assert_memory_equal(a, c, n1);
    free(a);
    free(b);
    free(c);
  }
}

static void test_layout_matches_rocm_writer(void** state) {
  (void)state;
  size_t n;
  uint8_t* z =
      write_sample("z.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2, &n);
  assert_memory_equal(z, "KPAK\1\0\0\0", 8);
  /* zstd: u32 frame count at 64, then the first frame's size and magic */
  assert_int_equal(z[64] | z[65] << 8, 300);
  assert_memory_equal(z + 72, "\x28\xb5\x2f\xfd", 4);
  free(z);
  uint8_t* r = write_sample("r.kpack", KPACK_COMPRESSION_NOOP, 0, &n);
  kpack_archive_t a;
  char* path = kt_path(kt_tmp, "r.kpack");
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  size_t count;
  const char* arch;
  assert_int_equal(kpack_get_architecture_count(a, &count), KPACK_SUCCESS);
  assert_int_equal(count, 3); /* declared two, then gfx942 appended */
  assert_int_equal(kpack_get_architecture(a, 2, &arch), KPACK_SUCCESS);
  assert_string_equal(arch, "gfx942");
  kpack_kernel_info_t info;
  assert_int_equal(kpack_get_kernel_info(a, "lib/l7.so#0", "gfx90a", &info),
                   KPACK_SUCCESS);
  assert_int_equal(info.offset % 64, 0);
  /* The TOC's first key is format_version, as ROCm writes it. */
  uint64_t toc = 0;
  for (int i = 7; i >= 0; i--)
    toc = toc << 8 | r[8 + i];
  assert_memory_equal(r + toc + 1,
                      "\xae"
                      "format_version",
                      15);
  kpack_close(a);
  free(path);
  free(r);
}

static void test_duplicate_kernel_and_bad_names_are_rejected(void** state) {
  (void)state;
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_NOOP};
  char* path = kt_path(kt_tmp, "dup.kpack");
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx90a", "x", 1),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx90a", "y", 1),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_writer_add_kernel(w, "", "gfx90a", "y", 1),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_writer_add_kernel(w, "b#0", "", "y", 1),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx942", NULL, 1),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_writer_add_kernel(NULL, "b#0", "gfx942", "y", 1),
                   KPACK_ERROR_INVALID_ARGUMENT);
  /* a rejected add leaves the archive usable */
  assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx942", "y", 1),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  kpack_archive_t a;
  size_t n;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_count(a, &n), KPACK_SUCCESS);
  assert_int_equal(n, 2);
  kpack_close(a);
  free(path);
}

static void test_bad_options_are_rejected(void** state) {
  (void)state;
  kpack_writer_t* w = (kpack_writer_t*)1;
  kpack_writer_options_t o = {.scheme = 7};
  char* path = kt_path(kt_tmp, "bad.kpack");
  assert_int_equal(kpack_writer_create(path, &o, &w),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(w);
  o.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL;
  o.zstd_level = 1000;
  assert_int_equal(kpack_writer_create(path, &o, &w),
                   KPACK_ERROR_INVALID_ARGUMENT);
  o.zstd_level = 0;
  o.gfx_arch_count = 1;
  assert_int_equal(kpack_writer_create(path, &o, &w),
                   KPACK_ERROR_INVALID_ARGUMENT);
  o.gfx_arch_count = 0;
  assert_int_equal(kpack_writer_create(NULL, &o, &w),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_writer_create("/nonexistent-dir/x.kpack", &o, &w),
                   KPACK_ERROR_IO_ERROR);
  assert_int_equal(kpack_writer_finish(NULL), KPACK_ERROR_INVALID_ARGUMENT);
  kpack_writer_abort(NULL);
  free(path);
}

static void test_abort_leaves_destination_untouched(void** state) {
  (void)state;
  char* sub = kt_path(kt_tmp, "abort");
  assert_int_equal(mkdir(sub, 0755), 0);
  char* path = kt_path(sub, "out.kpack");
  kt_write_file(path, "old", 3);
  for (unsigned threads = 0; threads <= 3; threads += 3) {
    kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                                .threads = threads};
    kpack_writer_t* w;
    void* data = kt_pattern(100000, 1);
    assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
    assert_int_equal(entries_in(sub), 2); /* old archive + temporary */
    for (int i = 0; i < 20; i++) {
      char bin[16];
      snprintf(bin, sizeof bin, "b%d#0", i);
      assert_int_equal(kpack_writer_add_kernel(w, bin, "gfx90a", data, 100000),
                       KPACK_SUCCESS);
    }
    kpack_writer_abort(w);
    free(data);
    size_t n;
    char* old = kt_read_file(path, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(old, "old", 3);
    free(old);
    assert_int_equal(entries_in(sub), 1);
  }
  free(path);
  free(sub);
}

static void test_finish_replaces_existing_file_with_ordinary_mode(
    void** state) {
  (void)state;
  char* path = kt_path(kt_tmp, "replace.kpack");
  kt_write_file(path, "old", 3);
  kt_kernel k = {"b#0", "gfx90a", "abc", 3};
  kt_write_archive(path, KPACK_COMPRESSION_NOOP, NULL, 0, &k, 1);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  mode_t mask = umask(022);
  umask(mask);
  assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  kpack_close(a);
  free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_is_identical_for_identical_input),
      cmocka_unit_test(test_layout_matches_rocm_writer),
      cmocka_unit_test(test_duplicate_kernel_and_bad_names_are_rejected),
      cmocka_unit_test(test_bad_options_are_rejected),
      cmocka_unit_test(test_abort_leaves_destination_untouched),
      cmocka_unit_test(test_finish_replaces_existing_file_with_ordinary_mode),
  };
  return cmocka_run_group_tests_name("writer", tests, kt_tmp_setup,
                                     kt_tmp_teardown);
}
