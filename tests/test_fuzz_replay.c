/* SPDX-License-Identifier: MIT
 *
 * Replays the fuzzers' committed seeds (tests/fuzz/corpus/<harness>/) and
 * every input that ever crashed one (tests/fuzz/regressions/<harness>/)
 * through the same drivers, so `make check` (and its ASan, TSan and valgrind
 * runs) keeps each past finding fixed without needing clang or libFuzzer.
 * Run from the top of the tree, as `make check` does.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_drivers.h"
#include "support.h"

/* A driver returns how much of the input it could use (kernels, loads,
 * entries); see fuzz_drivers.h. */
typedef size_t (*driver_fn)(const uint8_t* data, size_t size);

static int skip_dots(const struct dirent* e) {
  return e->d_name[0] != '.';
}

/* Feeds every file of `dir` to `driver`, in name order; returns how many.
 * A missing directory counts as empty. Each input gets a buffer of exactly
 * its size, so an over-read is caught by ASan and valgrind. With
 * `must_parse`, every input except those named "*empty*" must be usable:
 * seeds that fail to parse would start the fuzzer from nothing. */
static size_t replay_dir(const char* dir, driver_fn driver, bool must_parse) {
  struct dirent** names;
  int n = scandir(dir, &names, skip_dots, alphasort);
  if (n < 0)
    return 0;
  for (int i = 0; i < n; i++) {
    char* path = kt_path(dir, names[i]->d_name);
    size_t size = 0;
    void* data = kt_read_file(path, &size);
    assert_non_null(data);
    uint8_t* exact = malloc(size ? size : 1);
    assert_non_null(exact);
    memcpy(exact, data, size);
    size_t used = driver(exact, size);
    if (must_parse && strstr(names[i]->d_name, "empty") == NULL && used == 0)
      fail_msg("seed %s parses to nothing", path);
    free(exact);
    free(data);
    free(path);
    free(names[i]);
  }
  free(names);
  return (size_t)n;
}

static void replay(const char* harness, driver_fn driver, bool must_parse) {
  char dir[256];
  snprintf(dir, sizeof(dir), "tests/fuzz/corpus/%s", harness);
  /* An empty or missing corpus would make this test pass vacuously. */
  assert_true(replay_dir(dir, driver, must_parse) > 0);
  snprintf(dir, sizeof(dir), "tests/fuzz/regressions/%s", harness);
  replay_dir(dir, driver, false);
}

static void test_archive_seeds_and_past_crashes_replay_cleanly(void** state) {
  (void)state;
  replay("archive", kf_archive_input, true);
}

static int hipk_setup(void** state) {
  (void)state;
  kf_hipk_setup();
  return 0;
}

static int hipk_teardown(void** state) {
  (void)state;
  kf_hipk_teardown();
  return 0;
}

static void test_hipk_seeds_and_past_crashes_replay_cleanly(void** state) {
  (void)state;
  replay("hipk", kf_hipk_input, false); /* some seeds are misses */
}

/* The seeds are meant to reach the loader's success path: at least one of
 * them must load a kernel, or the fuzzer starts from nothing but errors. */
static void test_hipk_basic_seed_loads_a_fixture_kernel(void** state) {
  (void)state;
  size_t size;
  void* meta = kt_read_file("tests/fuzz/corpus/hipk/basic.msgpack", &size);
  assert_non_null(meta);
  /* gfx942 (through its feature forms), gfx90a for #1, gfx942 again, and
   * #1 for gfx942:sramecc+:xnack- from ROCM_KPACK_PATH; the driver checks
   * each code object against the fixture's bytes. */
  assert_int_equal(kf_hipk_input(meta, size), 4);
  free(meta);
}

static void test_bundle_seeds_and_past_crashes_replay_cleanly(void** state) {
  (void)state;
  replay("bundle", kf_bundle_input, true);
}

static void test_host_seeds_and_past_crashes_replay_cleanly(void** state) {
  (void)state;
  replay("host", kf_host_input, false); /* some seeds are malformed */
}

/* The well-formed seeds reach every record: the fuzzer starts from
 * binaries the reader accepts. */
static void test_host_seeds_read_every_record(void** state) {
  (void)state;
  static const char* const seeds[] = {
      "kpackified-relative.so", "kpackified-exec", "kpackified-abs64.so",
      "kpackified-aarch64.so", "kpackified-object.rel"};
  for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
    char* path = kt_path("tests/fuzz/corpus/host", seeds[i]);
    size_t size;
    void* data = kt_read_file(path, &size);
    assert_non_null(data);
    assert_int_equal(kf_host_input(data, size), 3);
    free(data);
    free(path);
  }
}

static void test_transform_seeds_and_past_crashes_replay_cleanly(void** s) {
  (void)s;
  replay("transform", kf_transform_input, true);
}

/* The linked seeds transform, every record: the fuzzer starts from files
 * the transform rewrites. */
static void test_transform_seeds_transform_every_record(void** state) {
  (void)state;
  static const char* const seeds[] = {"fat-shared.so", "fat-relr.so", "fat-pie",
                                      "fat-exec"};
  for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
    char* path = kt_path("tests/fuzz/corpus/transform", seeds[i]);
    size_t size;
    void* data = kt_read_file(path, &size);
    assert_non_null(data);
    assert_int_equal(kf_transform_input(data, size), 2);
    free(data);
    free(path);
  }
}

static void test_code_object_seeds_and_past_crashes_replay_cleanly(
    void** state) {
  (void)state;
  replay("code_object", kf_code_object_input, true);
}

static void test_wheel_seeds_and_past_crashes_replay_cleanly(void** state) {
  (void)state;
  replay("wheel", kf_wheel_input, true);
  kf_wheel_teardown();
}

/* The packed seeds read whole and unpack: the fuzzer starts from wheels the
 * reader accepts. */
static void test_wheel_seeds_unpack(void** state) {
  (void)state;
  static const struct {
    const char* name;
    size_t used; /* entries, plus 1 for the unpack */
  } seeds[] = {{"stored.whl", 6},
               {"deflated-extras.whl", 6},
               {"dist-info-and-data.whl", 7}};
  for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
    char* path = kt_path("tests/fuzz/corpus/wheel", seeds[i].name);
    size_t size;
    void* data = kt_read_file(path, &size);
    assert_non_null(data);
    assert_int_equal(kf_wheel_input(data, size), seeds[i].used);
    free(data);
    free(path);
  }
  kf_wheel_teardown();
}

static void test_rules_seeds_and_past_crashes_replay_cleanly(void** state) {
  (void)state;
  replay("rules", kf_rules_input, true);
}

/* The shipped rules' seed is contrib/split-rules.conf as it is now (a
 * change to it needs `make fuzz-corpus`), and they place every path the
 * seed lists: the fuzzer starts from the rules kpack ships, matching. */
static void test_rules_shipped_seed_places_every_path_it_lists(void** state) {
  (void)state;
  size_t size, shipped_size;
  uint8_t* seed = kt_read_file("tests/fuzz/corpus/rules/shipped.rules", &size);
  void* shipped = kt_read_file("contrib/split-rules.conf", &shipped_size);
  assert_non_null(seed);
  assert_non_null(shipped);
  assert_true(size > shipped_size);
  assert_memory_equal(seed, shipped, shipped_size);
  assert_int_equal(seed[shipped_size], '\0');
  size_t listed = 0;
  for (size_t i = shipped_size + 1; i < size; i++)
    listed += seed[i] == '\n';
  assert_int_equal(listed, 18);
  /* The rules alone place the driver's fixed paths: all but its three
   * misses. */
  size_t fixed = kf_rules_input(seed, shipped_size);
  assert_int_equal(fixed, 10);
  assert_int_equal(kf_rules_input(seed, size), fixed + listed);
  free(shipped);
  free(seed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_archive_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test_setup_teardown(
          test_hipk_seeds_and_past_crashes_replay_cleanly, hipk_setup,
          hipk_teardown),
      cmocka_unit_test_setup_teardown(
          test_hipk_basic_seed_loads_a_fixture_kernel, hipk_setup,
          hipk_teardown),
      cmocka_unit_test(test_bundle_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test(test_host_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test(test_host_seeds_read_every_record),
      cmocka_unit_test(test_code_object_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test(test_transform_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test(test_wheel_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test(test_wheel_seeds_unpack),
      cmocka_unit_test(test_transform_seeds_transform_every_record),
      cmocka_unit_test(test_rules_seeds_and_past_crashes_replay_cleanly),
      cmocka_unit_test(test_rules_shipped_seed_places_every_path_it_lists),
  };
  return cmocka_run_group_tests_name("fuzz replay", tests, NULL, NULL);
}
