/* SPDX-License-Identifier: MIT
 *
 * The streaming writer: deterministic bytes whatever the thread count,
 * atomic replacement, clean abort, argument checks, and ROCm's layout
 * (64-byte aligned blobs, frame table at offset 64, key order).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "fixture_toc.h"
#include "support.h"

/* This executable's fsync() stands in for libc's, also for the writer
 * linked into it: it records the directories synced. */
static dev_t synced_dev;
static ino_t synced_ino;

int fsync(int fd) {
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    synced_dev = st.st_dev;
    synced_ino = st.st_ino;
  }
  return (int)syscall(SYS_fsync, fd);
}

/* The suite is linked with --wrap=calloc: fail_calloc_count makes the
 * next calloc of that many elements fail, once (the writer's name index
 * grows by calloc, from 1024 slots, doubling). */
static size_t fail_calloc_count;
void* __real_calloc(size_t count, size_t size);
void* __wrap_calloc(size_t count, size_t size);
void* __wrap_calloc(size_t count, size_t size) {
  if (fail_calloc_count != 0 && count == fail_calloc_count) {
    fail_calloc_count = 0;
    return NULL;
  }
  return __real_calloc(count, size);
}

/* Entries of a directory, hidden ones (the temporary file) included. */
static size_t entries_in(const char* dir) {
  size_t n = 0;
  DIR* d = opendir(dir);
  assert_non_null(d);
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
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

/* Three writers on one shared pool, their kernels interleaved (one writer
 * at another level), each give the archive a writer alone gives. */
static void test_writers_sharing_a_pool_write_what_each_alone_writes(
    void** state) {
  (void)state;
  size_t alone_size;
  void* alone = write_sample("alone.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                             1, &alone_size);
  kpack_writer_pool_t* pool;
  assert_int_equal(kpack_writer_pool_create(0, &pool),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_writer_pool_create(2, &pool), KPACK_SUCCESS);
  static const char* arches[] = {"gfx1100", "gfx90a"};
  kpack_writer_t* w[3];
  char* paths[3];
  for (int k = 0; k < 3; k++) {
    kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                                .zstd_level = k == 2 ? 9 : 0,
                                .pool = pool,
                                .group_name = "blas",
                                .gfx_arch_family = "gfx9",
                                .gfx_arches = arches,
                                .gfx_arch_count = 2};
    char name[32];
    snprintf(name, sizeof(name), "shared%d.kpack", k);
    paths[k] = kt_path(kt_tmp, name);
    assert_int_equal(kpack_writer_create(paths[k], &o, &w[k]), KPACK_SUCCESS);
  }
  for (unsigned i = 0; i < 300; i++) {
    char bin[32];
    size_t n = (i * 7919) % 20000;
    void* data = kt_pattern(n, i);
    snprintf(bin, sizeof bin, "lib/l%u.so#%u", i % 150, i / 150);
    for (int k = 0; k < 3; k++)
      assert_int_equal(kpack_writer_add_kernel(
                           w[k], bin, i % 3 ? "gfx90a" : "gfx942", data, n),
                       KPACK_SUCCESS);
    free(data);
  }
  for (int k = 0; k < 3; k++)
    assert_int_equal(kpack_writer_finish(w[k]), KPACK_SUCCESS);
  kpack_writer_pool_destroy(pool);
  for (int k = 0; k < 3; k++) {
    size_t n;
    void* bytes = kt_read_file(paths[k], &n);
    if (k < 2) {
      assert_int_equal(n, alone_size);
      assert_memory_equal(bytes, alone, n);
    } else {
      kpack_archive_t a;
      void* data;
      size_t size;
      assert_int_equal(kpack_open(paths[k], &a), KPACK_SUCCESS);
      assert_int_equal(
          kpack_get_kernel(a, "lib/l149.so#1", "gfx90a", &data, &size),
          KPACK_SUCCESS);
      void* want = kt_pattern(size, 299);
      assert_int_equal(size, (299u * 7919) % 20000);
      assert_memory_equal(data, want, size);
      free(want);
      kpack_free_kernel(data);
      kpack_close(a);
    }
    free(bytes);
    free(paths[k]);
  }
  free(alone);
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
  uint64_t toc = fx_toc_offset(r, n);
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

/* ---- metadata maps ------------------------------------------------------- */

/* {"tuning": {"wg": int16 256, "fast": true}, "id": bin "\x01\x02",
 * "name": str8 "x"}: non-minimal encodings that a re-encoding would change,
 * so only a byte-for-byte copy gives them back. */
static const uint8_t sample_map[] = {
    0x83, 0xa6, 't',  'u',  'n',  'i', 'n', 'g', 0x82, 0xa2, 'w',  'g',
    0xd1, 0x01, 0x00, 0xa4, 'f',  'a', 's', 't', 0xc3, 0xa2, 'i',  'd',
    0xc4, 0x02, 0x01, 0x02, 0xa4, 'n', 'a', 'm', 'e',  0xd9, 0x01, 'x'};

static void test_metadata_map_is_stored_byte_for_byte(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    kpack_writer_options_t o = {.scheme = s};
    char* path = kt_path(kt_tmp, "meta.kpack");
    kpack_writer_t* w;
    assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
    assert_int_equal(
        kpack_writer_add_kernel_with_metadata(w, "b#0", "gfx90a", "abc", 3,
                                              sample_map, sizeof(sample_map)),
        KPACK_SUCCESS);
    assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx942", "de", 2),
                     KPACK_SUCCESS);
    assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);

    kpack_archive_t a;
    const void* m;
    size_t n;
    char* json;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_get_entry_metadata(a, "b#0", "gfx90a", &m, &n),
                     KPACK_SUCCESS);
    assert_int_equal(n, sizeof(sample_map));
    assert_memory_equal(m, sample_map, n);
    assert_int_equal(kpack_get_entry_metadata_json(a, "b#0", "gfx90a", &json),
                     KPACK_SUCCESS);
    assert_string_equal(json,
                        "{\"tuning\":{\"wg\":256,\"fast\":true},"
                        "\"id\":\"0102\",\"name\":\"x\"}");
    free(json);
    /* no metadata: success with nothing */
    assert_int_equal(kpack_get_entry_metadata(a, "b#0", "gfx942", &m, &n),
                     KPACK_SUCCESS);
    assert_null(m);
    assert_int_equal(n, 0);
    json = (char*)1;
    assert_int_equal(kpack_get_entry_metadata_json(a, "b#0", "gfx942", &json),
                     KPACK_SUCCESS);
    assert_null(json);
    assert_int_equal(kpack_get_entry_metadata(a, "b#0", "gfx1", &m, &n),
                     KPACK_ERROR_KERNEL_NOT_FOUND);
    assert_int_equal(kpack_get_entry_metadata(a, "b#0", "gfx90a", NULL, &n),
                     KPACK_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kpack_get_entry_metadata_json(NULL, "b#0", "x", &json),
                     KPACK_ERROR_INVALID_ARGUMENT);
    kpack_close(a);
    free(path);
  }
}

static void test_metadata_that_is_not_one_map_is_invalid_argument(
    void** state) {
  (void)state;
  static const uint8_t array[] = {0x91, 0x01};
  static const uint8_t trailing[] = {0x80, 0x00};
  static const uint8_t truncated[] = {0x81, 0xa1, 'k'};
  static const uint8_t bad_tag[] = {0x81, 0xa1, 'k', 0xc1};
  uint8_t deep[70];
  deep[0] = 0x81;
  deep[1] = 0xa1;
  deep[2] = 'k';
  for (int i = 3; i < 69; i++)
    deep[i] = 0x91; /* 66 nested arrays */
  deep[69] = 0x01;
  const struct {
    const void* data;
    size_t size;
  } bad[] = {{array, sizeof array},
             {trailing, sizeof trailing},
             {truncated, sizeof truncated},
             {bad_tag, sizeof bad_tag},
             {deep, sizeof deep},
             {NULL, 3},
             {sample_map, 0}};
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_NOOP};
  char* path = kt_path(kt_tmp, "badmeta.kpack");
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(kpack_writer_add_kernel_with_metadata(
                         w, "b#0", "gfx90a", "x", 1, bad[i].data, bad[i].size),
                     KPACK_ERROR_INVALID_ARGUMENT);
  /* refused maps leave the writer usable, the name still free */
  static const uint8_t empty_map[] = {0x80};
  assert_int_equal(kpack_writer_add_kernel_with_metadata(w, "b#0", "gfx90a",
                                                         "x", 1, empty_map, 1),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  kpack_archive_t a;
  const void* m;
  size_t n;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_entry_metadata(a, "b#0", "gfx90a", &m, &n),
                   KPACK_SUCCESS);
  assert_int_equal(n, 1);
  assert_memory_equal(m, empty_map, 1);
  kpack_close(a);
  free(path);
}

/* ---- copying kernels from archives --------------------------------------- */

/* 40 kernels, every fifth with the sample metadata map. */
static void write_source(const char* path, kpack_compression_scheme_t scheme,
                         int level) {
  kpack_writer_options_t o = {.scheme = scheme, .zstd_level = level};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  for (unsigned i = 0; i < 40; i++) {
    char bin[32];
    size_t n = 1000 + i * 1231;
    void* data = kt_pattern(n, i);
    snprintf(bin, sizeof bin, "lib/l%u.so#0", i);
    assert_int_equal(
        kpack_writer_add_kernel_with_metadata(
            w, bin, i % 2 ? "gfx90a" : "gfx942", data, n,
            i % 5 ? NULL : sample_map, i % 5 ? 0 : sizeof(sample_map)),
        KPACK_SUCCESS);
    free(data);
  }
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
}

/* Copies every kernel of src into dst; returns dst's bytes. */
static void* copy_all(const char* src, const char* dst,
                      kpack_compression_scheme_t scheme, unsigned threads,
                      unsigned flags, int level, size_t* size) {
  kpack_archive_t a;
  kpack_writer_options_t o = {
      .scheme = scheme, .threads = threads, .zstd_level = level};
  kpack_writer_t* w;
  assert_int_equal(kpack_open(src, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_create(dst, &o, &w), KPACK_SUCCESS);
  size_t binaries;
  assert_int_equal(kpack_get_binary_count(a, &binaries), KPACK_SUCCESS);
  for (size_t b = 0; b < binaries; b++) {
    const char *bin, *arch;
    size_t arches;
    assert_int_equal(kpack_get_binary(a, b, &bin), KPACK_SUCCESS);
    assert_int_equal(kpack_get_binary_arch_count(a, bin, &arches),
                     KPACK_SUCCESS);
    for (size_t i = 0; i < arches; i++) {
      assert_int_equal(kpack_get_binary_arch(a, bin, i, &arch), KPACK_SUCCESS);
      assert_int_equal(kpack_writer_copy_kernel(w, a, bin, arch, flags),
                       KPACK_SUCCESS);
    }
  }
  kpack_close(a); /* before finish: nothing refers to it any more */
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  void* bytes = kt_read_file(dst, size);
  assert_non_null(bytes);
  return bytes;
}

/* Same kernels and metadata; `same_frames`: every stored frame identical. */
static void assert_same_archive_content(const char* x, const char* y,
                                        bool same_frames) {
  kpack_archive_t a, b;
  size_t na, nb;
  assert_int_equal(kpack_open(x, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_open(y, &b), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_count(a, &na), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_count(b, &nb), KPACK_SUCCESS);
  assert_int_equal(na, nb);
  size_t xs, ys;
  uint8_t* xb = kt_read_file(x, &xs);
  uint8_t* yb = kt_read_file(y, &ys);
  for (unsigned i = 0; i < 40; i++) {
    char bin[32];
    const char* arch = i % 2 ? "gfx90a" : "gfx942";
    snprintf(bin, sizeof bin, "lib/l%u.so#0", i);
    void *da, *db;
    size_t sa, sb;
    assert_int_equal(kpack_get_kernel(a, bin, arch, &da, &sa), KPACK_SUCCESS);
    assert_int_equal(kpack_get_kernel(b, bin, arch, &db, &sb), KPACK_SUCCESS);
    assert_int_equal(sa, sb);
    assert_memory_equal(da, db, sa);
    kpack_free_kernel(da);
    kpack_free_kernel(db);
    const void *ma, *mb;
    size_t la, lb;
    assert_int_equal(kpack_get_entry_metadata(a, bin, arch, &ma, &la),
                     KPACK_SUCCESS);
    assert_int_equal(kpack_get_entry_metadata(b, bin, arch, &mb, &lb),
                     KPACK_SUCCESS);
    assert_int_equal(la, lb);
    if (la > 0)
      assert_memory_equal(ma, mb, la);
    kpack_kernel_info_t ia, ib;
    assert_int_equal(kpack_get_kernel_info(a, bin, arch, &ia), KPACK_SUCCESS);
    assert_int_equal(kpack_get_kernel_info(b, bin, arch, &ib), KPACK_SUCCESS);
    if (same_frames) {
      assert_int_equal(ia.stored_size, ib.stored_size);
      assert_memory_equal(xb + ia.offset, yb + ib.offset, ia.stored_size);
    }
  }
  free(xb);
  free(yb);
  kpack_close(a);
  kpack_close(b);
}

static void test_copy_carries_zstd_frames_and_metadata_over(void** state) {
  (void)state;
  char* src = kt_path(kt_tmp, "src19.kpack");
  char* d1 = kt_path(kt_tmp, "copy1.kpack");
  char* d2 = kt_path(kt_tmp, "copy2.kpack");
  /* level 19 frames: a writer at the default level 3 would make others */
  write_source(src, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 19);
  size_t n1, n2;
  void* a = copy_all(src, d1, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 0, 0, 0, &n1);
  void* b = copy_all(src, d2, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 3, 0, 0, &n2);
  assert_int_equal(n1, n2); /* deterministic whatever the threads */
  assert_memory_equal(a, b, n1);
  assert_same_archive_content(src, d1, true);
  /* the copy of a copy is the same archive */
  free(b);
  b = copy_all(d1, d2, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2, 0, 0, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(a, b, n1);
  free(a);
  free(b);
  /* recompressing at level 1 changes the frames, not the kernels */
  a = copy_all(src, d1, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2,
               KPACK_WRITER_RECOMPRESS, 1, &n1);
  free(a);
  assert_same_archive_content(src, d1, false);
  kpack_archive_t x, y;
  kpack_kernel_info_t ix, iy;
  assert_int_equal(kpack_open(src, &x), KPACK_SUCCESS);
  assert_int_equal(kpack_open(d1, &y), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(x, "lib/l39.so#0", "gfx90a", &ix),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(y, "lib/l39.so#0", "gfx90a", &iy),
                   KPACK_SUCCESS);
  assert_int_not_equal(ix.stored_size, iy.stored_size);
  kpack_close(x);
  kpack_close(y);
  free(src);
  free(d1);
  free(d2);
}

/* ---- identical kernels, stored once ---------------------------------- */

/* What -fgpu-rdc gives: every record of a binary names one code object. */
static const struct {
  const char* binary;
  const char* arch;
  uint32_t seed; /* of kt_pattern() */
} shared_kernels[] = {
    {"bin/app#0", "gfx90a", 1},  {"bin/app#1", "gfx90a", 1},
    {"bin/app#2", "gfx90a", 1},  {"lib/x.so#0", "gfx90a", 2},
    {"lib/y.so#0", "gfx90a", 3}, /* as large as seed 1, other bytes */
    {"bin/app#0", "gfx1100", 1}, /* the same bytes under another arch */
};
#define SHARED_SIZE 5000

/* Writes shared_kernels with `threads` threads, or through a pool. */
static void* write_shared(const char* name, kpack_compression_scheme_t scheme,
                          unsigned threads, bool pool, size_t* size) {
  kpack_writer_pool_t* p = NULL;
  if (pool)
    assert_int_equal(kpack_writer_pool_create(threads, &p), KPACK_SUCCESS);
  kpack_writer_options_t o = {
      .scheme = scheme, .threads = pool ? 0 : threads, .pool = p};
  char* path = kt_path(kt_tmp, name);
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  for (size_t i = 0; i < sizeof(shared_kernels) / sizeof(*shared_kernels);
       i++) {
    void* data = kt_pattern(SHARED_SIZE, shared_kernels[i].seed);
    assert_int_equal(
        kpack_writer_add_kernel(w, shared_kernels[i].binary,
                                shared_kernels[i].arch, data, SHARED_SIZE),
        KPACK_SUCCESS);
    free(data);
  }
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  kpack_writer_pool_destroy(p);
  void* bytes = kt_read_file(path, size);
  assert_non_null(bytes);
  free(path);
  return bytes;
}

/* Every kernel of shared_kernels reads back; those with one seed share
 * one ordinal and one stored range, the others have their own. */
static void check_shared(const char* name) {
  char* path = kt_path(kt_tmp, name);
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  kpack_kernel_info_t info[sizeof(shared_kernels) / sizeof(*shared_kernels)];
  for (size_t i = 0; i < sizeof(shared_kernels) / sizeof(*shared_kernels);
       i++) {
    void* data;
    size_t n;
    assert_int_equal(kpack_get_kernel(a, shared_kernels[i].binary,
                                      shared_kernels[i].arch, &data, &n),
                     KPACK_SUCCESS);
    void* want = kt_pattern(SHARED_SIZE, shared_kernels[i].seed);
    assert_int_equal(n, SHARED_SIZE);
    assert_memory_equal(data, want, n);
    free(want);
    kpack_free_kernel(data);
    assert_int_equal(kpack_get_kernel_info(a, shared_kernels[i].binary,
                                           shared_kernels[i].arch, &info[i]),
                     KPACK_SUCCESS);
    for (size_t j = 0; j < i; j++) {
      bool same = shared_kernels[i].seed == shared_kernels[j].seed;
      assert_int_equal(info[i].ordinal == info[j].ordinal, same);
      assert_int_equal(info[i].offset == info[j].offset, same);
    }
  }
  /* Ordinals 0, 1, 2 in order of first appearance. */
  assert_int_equal(info[0].ordinal, 0);
  assert_int_equal(info[3].ordinal, 1);
  assert_int_equal(info[4].ordinal, 2);
  kpack_close(a);
  free(path);
}

static void test_identical_kernels_are_stored_once(void** state) {
  (void)state;
  size_t n;
  uint8_t* z = write_shared("shared-z.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                            1, false, &n);
  assert_int_equal(kp_load_le(z + 64, 4), 3); /* three frames */
  check_shared("shared-z.kpack");
  free(z);
  uint8_t* r =
      write_shared("shared-r.kpack", KPACK_COMPRESSION_NOOP, 1, false, &n);
  assert_true(n < 4 * SHARED_SIZE); /* three blobs and a TOC */
  check_shared("shared-r.kpack");
  free(r);
}

/* Which kernel is stored and which shares it depends on the order of
 * the calls alone, not on threads or a shared pool. */
static void test_sharing_does_not_depend_on_threads(void** state) {
  (void)state;
  size_t n1, n2, n3;
  void* a = write_shared("s1.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL, 1,
                         false, &n1);
  void* b = write_shared("s4.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL, 4,
                         false, &n2);
  void* c =
      write_shared("sp.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2, true, &n3);
  assert_int_equal(n1, n2);
  assert_memory_equal(a, b, n1);
  assert_int_equal(n1, n3);
  assert_memory_equal(a, c, n1);
  check_shared("sp.kpack");
  free(a);
  free(b);
  free(c);
}

/* Two archives holding one code object, merged frame for frame (and one
 * of them also decompressed and compressed again at the same level),
 * give one frame named by every key. */
static void test_merged_archives_share_identical_frames(void** state) {
  (void)state;
  char* x = kt_path(kt_tmp, "merge-x.kpack");
  char* y = kt_path(kt_tmp, "merge-y.kpack");
  char* r = kt_path(kt_tmp, "merge-r.kpack");
  char* out = kt_path(kt_tmp, "merged.kpack");
  void* data = kt_pattern(SHARED_SIZE, 9);
  kt_kernel kx = {"lib/x.so#0", "gfx90a", data, SHARED_SIZE};
  kt_kernel ky = {"lib/y.so#0", "gfx90a", data, SHARED_SIZE};
  kt_kernel kr = {"lib/r.so#0", "gfx90a", data, SHARED_SIZE};
  kt_write_archive(x, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &kx, 1);
  kt_write_archive(y, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &ky, 1);
  kt_write_archive(r, KPACK_COMPRESSION_NOOP, NULL, 0, &kr, 1);
  kpack_archive_t ax, ay, ar;
  assert_int_equal(kpack_open(x, &ax), KPACK_SUCCESS);
  assert_int_equal(kpack_open(y, &ay), KPACK_SUCCESS);
  assert_int_equal(kpack_open(r, &ar), KPACK_SUCCESS);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(out, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_copy_kernel(w, ax, "lib/x.so#0", "gfx90a", 0),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_copy_kernel(w, ay, "lib/y.so#0", "gfx90a", 0),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_copy_kernel(w, ar, "lib/r.so#0", "gfx90a", 0),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
  kpack_close(ax);
  kpack_close(ay);
  kpack_close(ar);
  size_t n;
  uint8_t* bytes = kt_read_file(out, &n);
  assert_int_equal(kp_load_le(bytes + 64, 4), 1);
  kpack_archive_t m;
  assert_int_equal(kpack_open(out, &m), KPACK_SUCCESS);
  const char* names[] = {"lib/x.so#0", "lib/y.so#0", "lib/r.so#0"};
  for (int i = 0; i < 3; i++) {
    void* k;
    size_t size;
    kpack_kernel_info_t info;
    assert_int_equal(kpack_get_kernel(m, names[i], "gfx90a", &k, &size),
                     KPACK_SUCCESS);
    assert_int_equal(size, SHARED_SIZE);
    assert_memory_equal(k, data, size);
    kpack_free_kernel(k);
    assert_int_equal(kpack_get_kernel_info(m, names[i], "gfx90a", &info),
                     KPACK_SUCCESS);
    assert_int_equal(info.ordinal, 0);
  }
  kpack_close(m);
  free(bytes);
  free(data);
  free(x);
  free(y);
  free(r);
  free(out);
}

static void test_copy_between_schemes_converts_kernels(void** state) {
  (void)state;
  char* none = kt_path(kt_tmp, "src-none.kpack");
  char* zstd = kt_path(kt_tmp, "to-zstd.kpack");
  char* back = kt_path(kt_tmp, "back-none.kpack");
  write_source(none, KPACK_COMPRESSION_NOOP, 0);
  size_t n;
  free(copy_all(none, zstd, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 2, 0, 0, &n));
  assert_same_archive_content(none, zstd, false);
  void* b = copy_all(zstd, back, KPACK_COMPRESSION_NOOP, 0, 0, 0, &n);
  size_t m;
  /* none -> zstd -> none is none -> none (kernels in the same order) */
  void* a = copy_all(none, zstd, KPACK_COMPRESSION_NOOP, 0, 0, 0, &m);
  assert_int_equal(n, m);
  assert_memory_equal(a, b, n);
  free(a);
  free(b);
  free(none);
  free(zstd);
  free(back);
}

/* The index growing past 512 entries fails after the entry is recorded:
 * the writer must fail for good (a caller carrying on would get frames
 * shifted against their ordinals), through add_kernel and copy_kernel
 * alike, and leave no archive behind. */
static void fail_index_growth(bool copy) {
  char* src = kt_path(kt_tmp, "oom-src.kpack");
  char* path = kt_path(kt_tmp, copy ? "oom-copy.kpack" : "oom-add.kpack");
  uint8_t byte = 7;
  kt_kernel one = {"lib/src.so#0", "gfx90a", &byte, 1};
  kt_write_archive(src, KPACK_COMPRESSION_NOOP, NULL, 0, &one, 1);
  kpack_archive_t a;
  assert_int_equal(kpack_open(src, &a), KPACK_SUCCESS);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  char bin[32];
  for (int i = 0; i < 512; i++) {
    snprintf(bin, sizeof bin, "lib/b%d.so#0", i);
    assert_int_equal(kpack_writer_add_kernel(w, bin, "gfx90a", &byte, 1),
                     KPACK_SUCCESS);
  }
  fail_calloc_count = 2048;
  kpack_error_t err =
      copy ? kpack_writer_copy_kernel(w, a, "lib/src.so#0", "gfx90a", 0)
           : kpack_writer_add_kernel(w, "lib/b512.so#0", "gfx90a", &byte, 1);
  assert_int_equal(fail_calloc_count, 0); /* the failure was injected */
  assert_int_equal(err, KPACK_ERROR_OUT_OF_MEMORY);
  assert_int_equal(
      kpack_writer_add_kernel(w, "lib/next.so#0", "gfx90a", &byte, 1),
      KPACK_ERROR_OUT_OF_MEMORY);
  assert_int_equal(kpack_writer_copy_kernel(w, a, "lib/src.so#0", "gfx942", 0),
                   KPACK_ERROR_OUT_OF_MEMORY);
  assert_int_equal(kpack_writer_finish(w), KPACK_ERROR_OUT_OF_MEMORY);
  struct stat st;
  assert_int_not_equal(stat(path, &st), 0);
  kpack_close(a);
  free(src);
  free(path);
}

static void test_index_growth_failing_in_add_fails_the_writer(void** state) {
  (void)state;
  fail_index_growth(false);
}

static void test_index_growth_failing_in_copy_fails_the_writer(void** state) {
  (void)state;
  fail_index_growth(true);
}

static void test_copy_refuses_a_frame_that_does_not_read_back(void** state) {
  (void)state;
  char* src = kt_path(kt_tmp, "corrupt-src.kpack");
  char* dst = kt_path(kt_tmp, "corrupt-dst.kpack");
  write_source(src, KPACK_COMPRESSION_ZSTD_PER_KERNEL, 0);
  kpack_archive_t a;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(src, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, "lib/l3.so#0", "gfx90a", &info),
                   KPACK_SUCCESS);
  kpack_close(a);
  size_t n;
  uint8_t* bytes = kt_read_file(src, &n);
  bytes[info.offset + info.stored_size / 2] ^= 0x55; /* checksum catches it */
  kt_write_file(src, bytes, n);
  free(bytes);
  for (unsigned threads = 0; threads <= 2; threads += 2) {
    kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                                .threads = threads};
    kpack_writer_t* w;
    assert_int_equal(kpack_open(src, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_writer_create(dst, &o, &w), KPACK_SUCCESS);
    kpack_writer_failure_t why;
    assert_int_equal(kpack_writer_copy_kernel(w, a, "lib/l3.so#0", "gfx90a", 0),
                     KPACK_ERROR_DECOMPRESSION_FAILED);
    kpack_writer_get_failure(w, &why);
    assert_int_equal(why.side, KPACK_WRITER_SIDE_SOURCE); /* not the output */
    assert_int_equal(why.sys_errno, 0);
    assert_int_equal(kpack_writer_copy_kernel(w, a, "lib/l3.so#0", "gfx1", 0),
                     KPACK_ERROR_KERNEL_NOT_FOUND);
    assert_int_equal(kpack_writer_copy_kernel(w, a, "lib/l3.so#0", "gfx90a", 2),
                     KPACK_ERROR_INVALID_ARGUMENT);
    /* the writer is still usable, the name still free */
    assert_int_equal(kpack_writer_copy_kernel(w, a, "lib/l4.so#0", "gfx942", 0),
                     KPACK_SUCCESS);
    assert_int_equal(
        kpack_writer_add_kernel(w, "lib/l3.so#0", "gfx90a", "x", 1),
        KPACK_SUCCESS);
    assert_int_equal(kpack_writer_copy_kernel(w, a, "lib/l4.so#0", "gfx942", 0),
                     KPACK_ERROR_INVALID_ARGUMENT); /* already added */
    kpack_writer_get_failure(w, &why);
    assert_int_equal(why.side, KPACK_WRITER_SIDE_NONE);
    assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
    kpack_close(a);
  }
  free(src);
  free(dst);
}

/* A write that fails names the archive and the system's reason, in the
 * call that failed, in every later one and in finish (through errno):
 * here the file size limit (EFBIG), which needs no privilege. */
static void test_a_failed_write_says_why_until_finish(void** state) {
  (void)state;
  char* dst = kt_path(kt_tmp, "efbig.kpack");
  uint8_t* big = malloc(1 << 20);
  uint32_t x = 4; /* xorshift: bytes zstd cannot shrink under the limit */
  for (size_t i = 0; i < 1 << 20; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    big[i] = (uint8_t)x;
  }
  struct rlimit old, small = {64 << 10, 0};
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  small.rlim_max = old.rlim_max;
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  for (int scheme = 0; scheme < 2; scheme++) {
    kpack_writer_options_t o = {.scheme =
                                    scheme ? KPACK_COMPRESSION_ZSTD_PER_KERNEL
                                           : KPACK_COMPRESSION_NOOP};
    kpack_writer_t* w;
    kpack_writer_failure_t why;
    assert_int_equal(kpack_writer_create(dst, &o, &w), KPACK_SUCCESS);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    assert_int_equal(kpack_writer_add_kernel(w, "a#0", "gfx90a", big, 1 << 20),
                     KPACK_ERROR_IO_ERROR);
    kpack_writer_get_failure(w, &why);
    assert_int_equal(why.side, KPACK_WRITER_SIDE_ARCHIVE);
    assert_int_equal(why.sys_errno, EFBIG);
    assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx90a", "x", 1),
                     KPACK_ERROR_IO_ERROR);
    kpack_writer_get_failure(w, &why);
    assert_int_equal(why.side, KPACK_WRITER_SIDE_ARCHIVE);
    assert_int_equal(why.sys_errno, EFBIG);
    errno = 0;
    assert_int_equal(kpack_writer_finish(w), KPACK_ERROR_IO_ERROR);
    assert_int_equal(errno, EFBIG);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(access(dst, F_OK), -1);
  }
  signal(SIGXFSZ, was);
  free(big);
  free(dst);
}

/* ---- destination: long names, symbolic links, durability ----------------- */

static void write_one(const char* path) {
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL};
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &o, &w), KPACK_SUCCESS);
  assert_int_equal(kpack_writer_add_kernel(w, "b#0", "gfx90a", "abc", 3),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
}

static void assert_is_archive(const char* path) {
  kpack_archive_t a;
  size_t n;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_count(a, &n), KPACK_SUCCESS);
  assert_int_equal(n, 1);
  kpack_close(a);
}

static void test_names_up_to_name_max_can_be_written(void** state) {
  (void)state;
  char name[256];
  for (size_t len = 250; len <= 255; len += 5) {
    memset(name, 'k', len);
    memcpy(name + len - 6, ".kpack", 6);
    name[len] = '\0';
    char* path = kt_path(kt_tmp, name);
    write_one(path);
    assert_is_archive(path);
    unlink(path);
    free(path);
  }
}

static void test_symlink_destination_replaces_its_target(void** state) {
  (void)state;
  char* sub = kt_path(kt_tmp, "links");
  char* real_dir = kt_path(sub, "real");
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(mkdir(real_dir, 0755), 0);
  char* target = kt_path(real_dir, "t.kpack");
  char* hop = kt_path(sub, "hop.kpack");
  char* link = kt_path(sub, "link.kpack");
  kt_write_file(target, "old", 3);
  /* link -> hop -> real/t.kpack, both relative */
  assert_int_equal(symlink("real/t.kpack", hop), 0);
  assert_int_equal(symlink("hop.kpack", link), 0);
  write_one(link);
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(lstat(hop, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_is_archive(target);
  /* the temporary file lived beside the target, and is gone */
  assert_int_equal(entries_in(real_dir), 1);
  assert_int_equal(entries_in(sub), 3);

  /* a dangling link: its target is created */
  char* dangling = kt_path(sub, "dangling.kpack");
  char* created = kt_path(real_dir, "new.kpack");
  assert_int_equal(symlink(created, dangling), 0); /* absolute */
  write_one(dangling);
  assert_int_equal(lstat(dangling, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_is_archive(created);

  /* a loop is an I/O error, and nothing is created */
  char* loop = kt_path(sub, "loop.kpack");
  assert_int_equal(symlink("loop.kpack", loop), 0);
  kpack_writer_options_t o = {.scheme = KPACK_COMPRESSION_NOOP};
  kpack_writer_t* w = (kpack_writer_t*)1;
  assert_int_equal(kpack_writer_create(loop, &o, &w), KPACK_ERROR_IO_ERROR);
  assert_null(w);
  free(loop);
  free(dangling);
  free(created);
  free(target);
  free(hop);
  free(link);
  free(real_dir);
  free(sub);
}

static void test_finish_syncs_the_directory_after_the_rename(void** state) {
  (void)state;
  char* sub = kt_path(kt_tmp, "durable");
  assert_int_equal(mkdir(sub, 0755), 0);
  char* path = kt_path(sub, "d.kpack");
  struct stat st;
  assert_int_equal(stat(sub, &st), 0);
  synced_ino = 0;
  write_one(path);
  assert_int_equal(synced_dev, st.st_dev);
  assert_int_equal(synced_ino, st.st_ino);
  free(path);
  free(sub);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_output_is_identical_for_identical_input),
      cmocka_unit_test(test_layout_matches_rocm_writer),
      cmocka_unit_test(test_duplicate_kernel_and_bad_names_are_rejected),
      cmocka_unit_test(test_bad_options_are_rejected),
      cmocka_unit_test(test_abort_leaves_destination_untouched),
      cmocka_unit_test(test_finish_replaces_existing_file_with_ordinary_mode),
      cmocka_unit_test(test_names_up_to_name_max_can_be_written),
      cmocka_unit_test(test_symlink_destination_replaces_its_target),
      cmocka_unit_test(test_finish_syncs_the_directory_after_the_rename),
      cmocka_unit_test(test_metadata_map_is_stored_byte_for_byte),
      cmocka_unit_test(test_metadata_that_is_not_one_map_is_invalid_argument),
      cmocka_unit_test(test_copy_carries_zstd_frames_and_metadata_over),
      cmocka_unit_test(test_copy_between_schemes_converts_kernels),
      cmocka_unit_test(test_identical_kernels_are_stored_once),
      cmocka_unit_test(test_sharing_does_not_depend_on_threads),
      cmocka_unit_test(test_merged_archives_share_identical_frames),
      cmocka_unit_test(test_copy_refuses_a_frame_that_does_not_read_back),
      cmocka_unit_test(test_a_failed_write_says_why_until_finish),
      cmocka_unit_test(test_index_growth_failing_in_add_fails_the_writer),
      cmocka_unit_test(test_index_growth_failing_in_copy_fails_the_writer),
      cmocka_unit_test(
          test_writers_sharing_a_pool_write_what_each_alone_writes),
  };
  return cmocka_run_group_tests_name("writer", tests, kt_tmp_setup,
                                     kt_tmp_teardown);
}
