/* SPDX-License-Identifier: MIT
 *
 * The shared decompressed-kernel cache (kpack_kcache.h): hits and misses, LRU
 * eviction within the byte budget, recycling of evicted kernels' buffers,
 * pins, kernels larger than the budget,
 * failures that are never cached, purge, and single-flight decompression
 * under many threads. Archives come from the project's writer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define SMALL_COUNT 16
#define SMALL_SIZE 100000u
#define BIG_SIZE (16u << 20)
#define THREADS 8

static char* tmp;
static char* archive_path; /* SMALL_COUNT small kernels, "big#0", "empty#0" */
static char* corrupt_path; /* the same with big#0's checksum flipped */
static char small_names[SMALL_COUNT][16];
static void* small_data[SMALL_COUNT];
static void* big_data;

static kpack_archive_t open_archive(const char* path) {
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  return a;
}

/* Flips the last byte of a kernel's stored frame: the zstd content checksum,
 * so the frame fails only once it has been decompressed in full. */
static void corrupt_kernel(const char* path, const char* binary) {
  kpack_archive_t a = open_archive(path);
  kpack_kernel_info_t info;
  assert_int_equal(kpack_get_kernel_info(a, binary, "gfx90a", &info),
                   KPACK_SUCCESS);
  kpack_close(a);
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  assert_non_null(bytes);
  bytes[info.offset + info.stored_size - 1] ^= 0xff;
  kt_write_file(path, bytes, size);
  free(bytes);
}

static int group_setup(void** state) {
  (void)state;
  static const char* arches[] = {"gfx90a"};
  kt_kernel kernels[SMALL_COUNT + 2];
  tmp = kt_tmpdir();
  archive_path = kt_path(tmp, "cache.kpack");
  corrupt_path = kt_path(tmp, "corrupt.kpack");
  for (int i = 0; i < SMALL_COUNT; i++) {
    snprintf(small_names[i], sizeof(small_names[i]), "lib/k%d#0", i);
    small_data[i] = kt_pattern(SMALL_SIZE, (uint32_t)i + 1);
    kernels[i] =
        (kt_kernel){small_names[i], "gfx90a", small_data[i], SMALL_SIZE};
  }
  big_data = kt_pattern(BIG_SIZE, 99);
  kernels[SMALL_COUNT] = (kt_kernel){"big#0", "gfx90a", big_data, BIG_SIZE};
  kernels[SMALL_COUNT + 1] = (kt_kernel){"empty#0", "gfx90a", "", 0};
  kt_write_archive(archive_path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 1,
                   kernels, SMALL_COUNT + 2);
  kt_write_archive(corrupt_path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 1,
                   kernels, SMALL_COUNT + 2);
  corrupt_kernel(corrupt_path, "big#0");
  corrupt_kernel(corrupt_path, small_names[0]);
  return 0;
}

static int group_teardown(void** state) {
  (void)state;
  for (int i = 0; i < SMALL_COUNT; i++)
    free(small_data[i]);
  free(big_data);
  kt_rmtree(tmp);
  free(tmp);
  free(archive_path);
  free(corrupt_path);
  return 0;
}

/* Per-test cache and archive, released by teardown even if a test fails. */
typedef struct fixture {
  kpack_kcache_t* cache;
  kpack_archive_t archive;
} fixture;

static fixture fx;

static int setup(void** state) {
  (void)state;
  fx.archive = open_archive(archive_path);
  fx.cache = NULL;
  return 0;
}

static int teardown(void** state) {
  (void)state;
  kpack_kcache_destroy(fx.cache);
  kpack_close(fx.archive);
  return 0;
}

static kpack_kcache_stats_t stats_of(kpack_kcache_t* cache) {
  kpack_kcache_stats_t s;
  assert_int_equal(kpack_kcache_get_stats(cache, &s), KPACK_SUCCESS);
  return s;
}

static void make_cache(uint64_t capacity) {
  assert_int_equal(kpack_kcache_create(capacity, &fx.cache), KPACK_SUCCESS);
}

/* Acquires small kernel i and checks its bytes. */
static kpack_kcache_entry_t* pin_small(int i) {
  kpack_kcache_entry_t* e;
  const void* data;
  size_t size;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[i],
                                        "gfx90a", &e, &data, &size),
                   KPACK_SUCCESS);
  assert_non_null(e);
  assert_int_equal(size, SMALL_SIZE);
  assert_memory_equal(data, small_data[i], SMALL_SIZE);
  return e;
}

static void touch_small(int i) {
  kpack_kcache_release(fx.cache, pin_small(i));
}

/* ---- arguments --------------------------------------------------------- */

static void test_create_rejects_null_and_destroy_accepts_null(void** state) {
  (void)state;
  assert_int_equal(kpack_kcache_create(1, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  kpack_kcache_destroy(NULL);
  kpack_kcache_release(NULL, NULL);
  kpack_kcache_purge(NULL, NULL);
  make_cache(123);
  kpack_kcache_release(fx.cache, NULL);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.capacity, 123);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.entries, 0);
  assert_int_equal(kpack_kcache_get_stats(fx.cache, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_kcache_get_stats(NULL, &s),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

static void test_acquire_rejects_null_arguments_and_clears_outputs(
    void** state) {
  (void)state;
  make_cache(1 << 20);
  kpack_kcache_entry_t* e = (kpack_kcache_entry_t*)&e;
  const void* data = &data;
  size_t size = 7;
  const char* b = small_names[0];
  assert_int_equal(
      kpack_kcache_acquire(NULL, fx.archive, b, "gfx90a", &e, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(e);
  assert_null(data);
  assert_int_equal(size, 0);
  assert_int_equal(
      kpack_kcache_acquire(fx.cache, NULL, b, "gfx90a", &e, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, NULL, "gfx90a",
                                        &e, &data, &size),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_kcache_acquire(fx.cache, fx.archive, b, NULL, &e, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, b, "gfx90a", NULL,
                                        &data, &size),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_kcache_acquire(fx.cache, fx.archive, b, "gfx90a", &e, NULL, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_kcache_acquire(fx.cache, fx.archive, b, "gfx90a", &e, &data, NULL),
      KPACK_ERROR_INVALID_ARGUMENT);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.hits + s.misses, 0);
}

/* ---- hits and misses --------------------------------------------------- */

static void test_first_acquire_decompresses_the_kernel_bytes(void** state) {
  (void)state;
  make_cache(1 << 20);
  kpack_kcache_entry_t* e = pin_small(3);
  void* expect;
  size_t expect_size;
  assert_int_equal(kpack_get_kernel(fx.archive, small_names[3], "gfx90a",
                                    &expect, &expect_size),
                   KPACK_SUCCESS);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.decompressions, 1);
  assert_int_equal(s.bytes_decompressed, SMALL_SIZE);
  assert_int_equal(s.bytes, SMALL_SIZE);
  assert_int_equal(s.entries, 1);
  assert_int_equal(s.pinned, 1);
  assert_int_equal(expect_size, SMALL_SIZE);
  assert_memory_equal(expect, small_data[3], SMALL_SIZE);
  kpack_free_kernel(expect);
  kpack_kcache_release(fx.cache, e);
  s = stats_of(fx.cache);
  assert_int_equal(s.pinned, 0);
  assert_int_equal(s.entries, 1); /* released, still cached */
}

static void test_second_acquire_hits_the_same_bytes(void** state) {
  (void)state;
  make_cache(1 << 20);
  const void *d1, *d2;
  size_t n1, n2;
  kpack_kcache_entry_t *e1, *e2;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[1],
                                        "gfx90a", &e1, &d1, &n1),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[1],
                                        "gfx90a", &e2, &d2, &n2),
                   KPACK_SUCCESS);
  assert_ptr_equal(e1, e2);
  assert_ptr_equal(d1, d2);
  assert_int_equal(n1, n2);
  kpack_kcache_release(fx.cache, e1);
  kpack_kcache_release(fx.cache, e2);
  touch_small(1);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.hits, 2);
  assert_int_equal(s.waits, 0);
  assert_int_equal(s.decompressions, 1);
  assert_int_equal(s.entries, 1);
  assert_int_equal(s.pinned, 0);
}

static void test_unknown_kernel_is_kernel_not_found_and_not_counted(
    void** state) {
  (void)state;
  make_cache(1 << 20);
  kpack_kcache_entry_t* e;
  const void* d;
  size_t n;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, "nope#0",
                                        "gfx90a", &e, &d, &n),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[0],
                                        "gfx942", &e, &d, &n),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  assert_null(e);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.hits + s.misses + s.failures + s.entries, 0);
}

static void test_empty_kernel_is_a_non_null_pointer_of_size_zero(void** state) {
  (void)state;
  make_cache(0);
  kpack_kcache_entry_t* e;
  const void* d;
  size_t n = 1;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, "empty#0",
                                        "gfx90a", &e, &d, &n),
                   KPACK_SUCCESS);
  assert_non_null(d);
  assert_int_equal(n, 0);
  kpack_kcache_release(fx.cache, e);
  /* Zero bytes fit any budget, even zero. */
  assert_int_equal(stats_of(fx.cache).entries, 1);
}

static void test_same_kernel_of_two_archive_handles_is_two_entries(
    void** state) {
  (void)state;
  make_cache(1 << 20);
  kpack_archive_t other = open_archive(archive_path);
  kpack_kcache_entry_t *e1, *e2;
  const void *d1, *d2;
  size_t n;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[2],
                                        "gfx90a", &e1, &d1, &n),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_kcache_acquire(fx.cache, other, small_names[2],
                                        "gfx90a", &e2, &d2, &n),
                   KPACK_SUCCESS);
  assert_ptr_not_equal(d1, d2);
  assert_memory_equal(d1, d2, SMALL_SIZE);
  kpack_kcache_release(fx.cache, e1);
  kpack_kcache_release(fx.cache, e2);
  assert_int_equal(stats_of(fx.cache).misses, 2);
  kpack_kcache_purge(fx.cache, other);
  kpack_close(other);
  assert_int_equal(stats_of(fx.cache).entries, 1);
}

/* ---- budget and eviction ----------------------------------------------- */

static void test_released_kernels_are_evicted_least_recently_used_first(
    void** state) {
  (void)state;
  make_cache(2 * SMALL_SIZE + SMALL_SIZE / 2); /* room for two */
  touch_small(0);
  touch_small(1);
  touch_small(2);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.evictions, 1);
  assert_int_equal(s.entries, 2);
  assert_int_equal(s.bytes, 2 * SMALL_SIZE);
  touch_small(1); /* still there */
  touch_small(2);
  assert_int_equal(stats_of(fx.cache).misses, 3);
  touch_small(0); /* was evicted */
  s = stats_of(fx.cache);
  assert_int_equal(s.misses, 4);
  assert_int_equal(s.hits, 2);
  assert_int_equal(s.evictions, 2);
}

static void test_a_hit_makes_the_kernel_most_recently_used(void** state) {
  (void)state;
  make_cache(2 * SMALL_SIZE + SMALL_SIZE / 2);
  touch_small(0);
  touch_small(1);
  touch_small(0); /* 1 is now the least recently used */
  touch_small(2);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.misses, 3);
  touch_small(0);
  assert_int_equal(stats_of(fx.cache).misses, 3);
  touch_small(1);
  assert_int_equal(stats_of(fx.cache).misses, 4);
}

static void test_pinned_kernels_are_never_evicted(void** state) {
  (void)state;
  make_cache(SMALL_SIZE + SMALL_SIZE / 2); /* room for one */
  kpack_kcache_entry_t* e[3];
  const void* first_bytes;
  size_t n;
  for (int i = 0; i < 3; i++)
    e[i] = pin_small(i);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.entries, 3);
  assert_int_equal(s.pinned, 3);
  assert_int_equal(s.bytes, 3 * SMALL_SIZE); /* over budget while pinned */
  assert_int_equal(s.evictions, 0);
  /* The first kernel's bytes are intact after the others came in. */
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[0],
                                        "gfx90a", &e[0], &first_bytes, &n),
                   KPACK_SUCCESS);
  assert_memory_equal(first_bytes, small_data[0], SMALL_SIZE);
  kpack_kcache_release(fx.cache, e[0]);
  for (int i = 0; i < 3; i++)
    kpack_kcache_release(fx.cache, e[i]);
  s = stats_of(fx.cache);
  assert_int_equal(s.pinned, 0);
  assert_int_equal(s.entries, 1);
  assert_int_equal(s.bytes, SMALL_SIZE);
  assert_int_equal(s.evictions, 2);
  touch_small(2); /* the last released is the one kept */
  assert_int_equal(stats_of(fx.cache).misses, 3);
}

static void test_kernel_larger_than_budget_is_served_then_dropped(
    void** state) {
  (void)state;
  make_cache(1 << 20);
  kpack_kcache_entry_t *e1, *e2;
  const void *d1, *d2;
  size_t n1, n2;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, "big#0", "gfx90a",
                                        &e1, &d1, &n1),
                   KPACK_SUCCESS);
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, "big#0", "gfx90a",
                                        &e2, &d2, &n2),
                   KPACK_SUCCESS);
  assert_int_equal(n1, BIG_SIZE);
  assert_ptr_equal(d1, d2);
  assert_memory_equal(d1, big_data, BIG_SIZE);
  kpack_kcache_release(fx.cache, e1);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.entries, 1); /* still pinned once */
  assert_int_equal(s.decompressions, 1);
  kpack_kcache_release(fx.cache, e2);
  s = stats_of(fx.cache);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.evictions, 1);
  touch_small(0); /* the budget still works for what fits */
  assert_int_equal(stats_of(fx.cache).entries, 1);
}

static void test_zero_capacity_keeps_nothing_released(void** state) {
  (void)state;
  make_cache(0);
  touch_small(0);
  touch_small(0);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.misses, 2);
  assert_int_equal(s.decompressions, 2);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
}

/* ---- recycling --------------------------------------------------------- */

static void test_a_miss_that_must_evict_decompresses_into_the_victims_buffer(
    void** state) {
  (void)state;
  make_cache(2 * SMALL_SIZE + SMALL_SIZE / 2); /* room for two */
  kpack_kcache_entry_t* e = pin_small(0);
  const void* first = NULL;
  const void* data;
  size_t n;
  kpack_kcache_entry_t* again;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[0],
                                        "gfx90a", &again, &first, &n),
                   KPACK_SUCCESS);
  kpack_kcache_release(fx.cache, again);
  kpack_kcache_release(fx.cache, e);
  touch_small(1);
  assert_int_equal(stats_of(fx.cache).recycled, 0); /* there was room */
  /* Kernel 2 evicts kernel 0, the least recently used, and takes over its
   * memory; pin_small() checks it holds kernel 2's bytes, not 0's. */
  e = pin_small(2);
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, small_names[2],
                                        "gfx90a", &again, &data, &n),
                   KPACK_SUCCESS);
  assert_ptr_equal(data, first);
  kpack_kcache_release(fx.cache, again);
  kpack_kcache_release(fx.cache, e);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.recycled, 1);
  assert_int_equal(s.evictions, 1);
  assert_int_equal(s.entries, 2);
  assert_int_equal(s.bytes, 2 * SMALL_SIZE);
  touch_small(1); /* still cached */
  assert_int_equal(stats_of(fx.cache).misses, 3);
}

static void test_a_victim_far_larger_than_the_new_kernel_is_not_reused(
    void** state) {
  (void)state;
  make_cache(BIG_SIZE + SMALL_SIZE / 2); /* room for big#0 alone */
  kpack_kcache_entry_t* e;
  const void* data;
  size_t n;
  assert_int_equal(kpack_kcache_acquire(fx.cache, fx.archive, "big#0", "gfx90a",
                                        &e, &data, &n),
                   KPACK_SUCCESS);
  kpack_kcache_release(fx.cache, e);
  touch_small(0); /* evicts big#0; its 16 MiB would waste the budget */
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.evictions, 1);
  assert_int_equal(s.recycled, 0);
  assert_int_equal(s.bytes, SMALL_SIZE);
}

static void test_a_failed_decompression_into_a_recycled_buffer_caches_nothing(
    void** state) {
  (void)state;
  make_cache(SMALL_SIZE + SMALL_SIZE / 2); /* room for one */
  kpack_archive_t bad = open_archive(corrupt_path);
  touch_small(1);
  kpack_kcache_entry_t* e;
  const void* data;
  size_t n;
  /* The corrupt kernel evicts kernel 1 to make room, takes its buffer, fails
   * its checksum; the buffer is freed (ASan and valgrind would see a leak or
   * a double free). */
  assert_int_equal(kpack_kcache_acquire(fx.cache, bad, small_names[0], "gfx90a",
                                        &e, &data, &n),
                   KPACK_ERROR_DECOMPRESSION_FAILED);
  assert_null(e);
  assert_null(data);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.recycled, 1);
  assert_int_equal(s.failures, 1);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
  touch_small(2); /* and the cache carries on */
  assert_int_equal(stats_of(fx.cache).bytes, SMALL_SIZE);
  kpack_kcache_purge(fx.cache, bad);
  kpack_close(bad);
}

/* ---- failures and purge ------------------------------------------------ */

static void test_corrupt_kernel_fails_every_time_and_is_not_cached(
    void** state) {
  (void)state;
  make_cache(64 << 20);
  kpack_archive_t bad = open_archive(corrupt_path);
  kpack_kcache_entry_t* e;
  const void* d;
  size_t n;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(kpack_kcache_acquire(fx.cache, bad, small_names[0],
                                          "gfx90a", &e, &d, &n),
                     KPACK_ERROR_DECOMPRESSION_FAILED);
    assert_null(e);
    assert_null(d);
  }
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.failures, 2);
  assert_int_equal(s.misses, 2);
  assert_int_equal(s.decompressions, 0);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.pinned, 0);
  /* Its neighbours in the same archive are fine. */
  assert_int_equal(
      kpack_kcache_acquire(fx.cache, bad, small_names[1], "gfx90a", &e, &d, &n),
      KPACK_SUCCESS);
  assert_memory_equal(d, small_data[1], SMALL_SIZE);
  kpack_kcache_release(fx.cache, e);
  kpack_kcache_purge(fx.cache, bad);
  kpack_close(bad);
}

static void test_archive_truncated_after_open_is_io_error(void** state) {
  (void)state;
  make_cache(64 << 20);
  char* path = kt_path(tmp, "truncated.kpack");
  size_t size;
  void* bytes = kt_read_file(archive_path, &size);
  assert_non_null(bytes);
  kt_write_file(path, bytes, size);
  free(bytes);
  kpack_archive_t a = open_archive(path);
  assert_int_equal(truncate(path, 100), 0);
  kpack_kcache_entry_t* e;
  const void* d;
  size_t n;
  assert_int_equal(
      kpack_kcache_acquire(fx.cache, a, "big#0", "gfx90a", &e, &d, &n),
      KPACK_ERROR_IO_ERROR);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.failures, 1);
  assert_int_equal(s.entries, 0);
  kpack_close(a);
  unlink(path);
  free(path);
}

static void test_purge_frees_released_and_defers_pinned(void** state) {
  (void)state;
  make_cache(1 << 20);
  kpack_kcache_entry_t* pinned = pin_small(0);
  touch_small(1);
  touch_small(2);
  kpack_kcache_purge(fx.cache, fx.archive);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.entries, 1); /* only the pinned one, until released */
  assert_int_equal(s.bytes, SMALL_SIZE);
  assert_int_equal(s.evictions, 0);
  /* A purged kernel decompresses afresh even while the old copy is pinned. */
  kpack_kcache_entry_t* again = pin_small(0);
  assert_ptr_not_equal(again, pinned);
  assert_int_equal(stats_of(fx.cache).misses, 4);
  kpack_kcache_release(fx.cache, pinned);
  s = stats_of(fx.cache);
  assert_int_equal(s.entries, 1);
  assert_int_equal(s.pinned, 1);
  kpack_kcache_release(fx.cache, again);
  kpack_kcache_purge(fx.cache, NULL);
  s = stats_of(fx.cache);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
}

/* ---- threads ----------------------------------------------------------- */

typedef struct racer {
  pthread_barrier_t* start;
  kpack_archive_t archive;
  kpack_kcache_entry_t* entry;
  const void* data;
  size_t size;
  kpack_error_t err;
} racer;

static void* race_for_big(void* arg) {
  racer* r = arg;
  pthread_barrier_wait(r->start);
  r->err = kpack_kcache_acquire(fx.cache, r->archive, "big#0", "gfx90a",
                                &r->entry, &r->data, &r->size);
  return NULL;
}

static void run_race(kpack_archive_t archive, racer* r) {
  pthread_t threads[THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    r[i] = (racer){.start = &start, .archive = archive};
    assert_int_equal(pthread_create(&threads[i], NULL, race_for_big, &r[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&start);
}

static void test_concurrent_first_acquires_decompress_once(void** state) {
  (void)state;
  make_cache(64 << 20);
  racer r[THREADS];
  run_race(fx.archive, r);
  for (int i = 0; i < THREADS; i++) {
    assert_int_equal(r[i].err, KPACK_SUCCESS);
    assert_ptr_equal(r[i].data, r[0].data);
    assert_int_equal(r[i].size, BIG_SIZE);
  }
  assert_memory_equal(r[0].data, big_data, BIG_SIZE);
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.decompressions, 1);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.hits, THREADS - 1);
  assert_int_equal(s.pinned, 1);
  for (int i = 0; i < THREADS; i++)
    kpack_kcache_release(fx.cache, r[i].entry);
  s = stats_of(fx.cache);
  assert_int_equal(s.pinned, 0);
  assert_int_equal(s.entries, 1);
}

static void test_concurrent_first_acquires_of_a_corrupt_kernel_all_fail(
    void** state) {
  (void)state;
  make_cache(64 << 20);
  kpack_archive_t bad = open_archive(corrupt_path);
  racer r[THREADS];
  run_race(bad, r);
  for (int i = 0; i < THREADS; i++) {
    assert_int_equal(r[i].err, KPACK_ERROR_DECOMPRESSION_FAILED);
    assert_null(r[i].entry);
  }
  /* Each caller either failed its own decompression or waited for one that
   * failed; nothing is left behind. */
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.hits + s.misses, THREADS);
  assert_int_equal(s.misses, s.failures);
  assert_int_equal(s.hits, s.waits);
  assert_int_equal(s.decompressions, 0);
  assert_int_equal(s.entries, 0);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.pinned, 0);
  kpack_close(bad);
}

#define HAMMER_ROUNDS 400

static void* hammer(void* arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int round = 0; round < HAMMER_ROUNDS; round++) {
    seed = seed * 1103515245u + 12345u;
    int i = (int)((seed >> 8) % SMALL_COUNT);
    kpack_kcache_entry_t* e;
    const void* d;
    size_t n;
    if (kpack_kcache_acquire(fx.cache, fx.archive, small_names[i], "gfx90a", &e,
                             &d, &n) != KPACK_SUCCESS ||
        n != SMALL_SIZE || memcmp(d, small_data[i], SMALL_SIZE) != 0)
      return (void*)1;
    kpack_kcache_release(fx.cache, e);
  }
  return NULL;
}

static void test_threads_under_a_small_budget_keep_the_accounting(
    void** state) {
  (void)state;
  make_cache(3 * SMALL_SIZE);
  pthread_t threads[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    assert_int_equal(
        pthread_create(&threads[i], NULL, hammer, (void*)(i * 7919 + 1)), 0);
  for (int i = 0; i < THREADS; i++) {
    void* failed;
    pthread_join(threads[i], &failed);
    assert_null(failed);
  }
  kpack_kcache_stats_t s = stats_of(fx.cache);
  assert_int_equal(s.hits + s.misses, THREADS * HAMMER_ROUNDS);
  assert_int_equal(s.decompressions, s.misses);
  assert_int_equal(s.bytes_decompressed, s.misses * SMALL_SIZE);
  assert_int_equal(s.pinned, 0);
  assert_true(s.bytes <= s.capacity);
  assert_int_equal(s.bytes, s.entries * SMALL_SIZE);
  assert_int_equal(s.misses - s.evictions, s.entries);
  /* Misses evicted to fit, and took over the victims' buffers while other
   * threads read theirs (TSan checks the hand-over). */
  assert_true(s.recycled > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_create_rejects_null_and_destroy_accepts_null),
      T(test_acquire_rejects_null_arguments_and_clears_outputs),
      T(test_first_acquire_decompresses_the_kernel_bytes),
      T(test_second_acquire_hits_the_same_bytes),
      T(test_unknown_kernel_is_kernel_not_found_and_not_counted),
      T(test_empty_kernel_is_a_non_null_pointer_of_size_zero),
      T(test_same_kernel_of_two_archive_handles_is_two_entries),
      T(test_released_kernels_are_evicted_least_recently_used_first),
      T(test_a_hit_makes_the_kernel_most_recently_used),
      T(test_pinned_kernels_are_never_evicted),
      T(test_kernel_larger_than_budget_is_served_then_dropped),
      T(test_zero_capacity_keeps_nothing_released),
      T(test_a_miss_that_must_evict_decompresses_into_the_victims_buffer),
      T(test_a_victim_far_larger_than_the_new_kernel_is_not_reused),
      T(test_a_failed_decompression_into_a_recycled_buffer_caches_nothing),
      T(test_corrupt_kernel_fails_every_time_and_is_not_cached),
      T(test_archive_truncated_after_open_is_io_error),
      T(test_purge_frees_released_and_defers_pinned),
      T(test_concurrent_first_acquires_decompress_once),
      T(test_concurrent_first_acquires_of_a_corrupt_kernel_all_fail),
      T(test_threads_under_a_small_budget_keep_the_accounting),
#undef T
  };
  return cmocka_run_group_tests_name("kernel_cache", tests, group_setup,
                                     group_teardown);
}
