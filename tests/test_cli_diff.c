/* SPDX-License-Identifier: MIT
 *
 * `kpack diff`, run as a program: equal archives, a changed kernel, an
 * added arch, archives as ROCm's writer leaves them (no frame-size table),
 * corrupt frames that are equal on both sides (compared without being
 * decompressed), directory pairs, --json and the exit statuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_toc.h"
#include "support.h"

static char* tool;

static int setup(void** state) {
  kt_tmp_setup(state);
  tool = kt_program("kpack");
  return 0;
}

static int teardown(void** state) {
  free(tool);
  return kt_tmp_teardown(state);
}

static const char* const two_arches[] = {"gfx90a", "gfx942"};
static const char* const three_arches[] = {"gfx1100", "gfx90a", "gfx942"};

/* Two binaries for gfx90a and gfx942, the second's gfx942 kernel from
 * `seed`; with `gfx1100`, a third arch for the first binary. */
static void write_sample(const char* path, uint32_t seed, bool gfx1100) {
  void* a = kt_pattern(20000, 1);
  void* b = kt_pattern(30000, 2);
  void* c = kt_pattern(30000, seed);
  void* d = kt_pattern(5000, 4);
  kt_kernel kernels[] = {
      {"lib/liba.so#0", "gfx90a", a, 20000},
      {"lib/liba.so#0", "gfx942", a, 19000},
      {"lib/libb.so#0", "gfx90a", b, 30000},
      {"lib/libb.so#0", "gfx942", c, 30000},
      {"lib/liba.so#0", "gfx1100", d, 5000},
  };
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                   gfx1100 ? three_arches : two_arches, gfx1100 ? 3 : 2,
                   kernels, gfx1100 ? 5 : 4);
  free(a);
  free(b);
  free(c);
  free(d);
}

static char* sample(const char* name, uint32_t seed, bool gfx1100) {
  char* path = kt_path(kt_tmp, name);
  write_sample(path, seed, gfx1100);
  return path;
}

/* The archive as ROCm's writer leaves it: no zstd_frame_sizes key. */
static void drop_frame_table(const char* path) {
  size_t size;
  uint8_t* data = kt_read_file(path, &size);
  assert_non_null(data);
  uint64_t toc = fx_toc_offset(data, size);
  fx_toc t;
  fx_toc_decode(&t, data, size, toc);
  assert_int_equal(fx_toc_drop(&t.root, "zstd_frame_sizes"), 1);
  fx_toc_encode(&t, &data, &size, toc);
  kt_write_file(path, data, size);
  free(data);
}

/* Flips a byte in the middle of a kernel's stored frame. */
static void corrupt_kernel(const char* path, const char* binary,
                           const char* arch) {
  kpack_archive_t a;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, binary, arch, &info),
                   KPACK_SUCCESS);
  kpack_close(a);
  size_t size;
  uint8_t* data = kt_read_file(path, &size);
  data[info.offset + info.stored_size / 2] ^= 0x5a;
  kt_write_file(path, data, size);
  free(data);
}

static int diff(char** out, char** err, const char* a, const char* b,
                const char* option) {
  const char* args[] = {"diff", option != NULL ? option : a,
                        option != NULL ? a : b, option != NULL ? b : NULL,
                        NULL};
  return kt_run_args(tool, args, 60, out, err);
}

static void test_equal_archives_exit_0(void** state) {
  (void)state;
  char* a = sample("eq-a.kpack", 3, false);
  char* b = sample("eq-b.kpack", 3, false);
  char *out, *err;
  assert_int_equal(diff(&out, &err, a, b, NULL), 0);
  assert_string_equal(out,
                      "equal: 0 added, 0 removed, 0 changed, 4 the same\n");
  assert_string_equal(err, "");
  free(out);
  free(err);
  free(a);
  free(b);
}

static void test_one_changed_kernel_is_shown_with_sizes_and_hashes(
    void** state) {
  (void)state;
  char* a = sample("ch-a.kpack", 3, false);
  char* b = sample("ch-b.kpack", 9, false);
  void* c3 = kt_pattern(30000, 3);
  void* c9 = kt_pattern(30000, 9);
  char *out, *err, *expected;
  assert_true(asprintf(&expected,
                       "~ lib/libb.so#0 gfx942: 30000 bytes, fnv1a %016llx -> "
                       "30000 bytes, fnv1a %016llx\n"
                       "different: 0 added, 0 removed, 1 changed, 3 the same\n",
                       (unsigned long long)kt_fnv1a(c3, 30000, KT_FNV_START),
                       (unsigned long long)kt_fnv1a(c9, 30000, KT_FNV_START)) >
              0);
  assert_int_equal(diff(&out, &err, a, b, NULL), 1);
  assert_string_equal(out, expected);
  assert_string_equal(err, "");
  free(out);
  free(err);
  /* -q: only the status */
  assert_int_equal(diff(&out, &err, a, b, "-q"), 1);
  assert_string_equal(out, "");
  free(out);
  free(err);
  free(expected);
  free(c3);
  free(c9);
  free(a);
  free(b);
}

static void test_an_added_arch_is_shown_both_ways(void** state) {
  (void)state;
  char* a = sample("arch-a.kpack", 3, false);
  char* b = sample("arch-b.kpack", 3, true);
  void* d = kt_pattern(5000, 4);
  char *out, *err, *added, *removed;
  unsigned long long h = kt_fnv1a(d, 5000, KT_FNV_START);
  assert_true(asprintf(&added,
                       "+ declared arch gfx1100\n"
                       "+ lib/liba.so#0 gfx1100 (5000 bytes, fnv1a %016llx)\n"
                       "different: 1 added, 0 removed, 0 changed, 4 the same\n",
                       h) > 0);
  assert_true(asprintf(&removed,
                       "- declared arch gfx1100\n"
                       "- lib/liba.so#0 gfx1100 (5000 bytes, fnv1a %016llx)\n"
                       "different: 0 added, 1 removed, 0 changed, 4 the same\n",
                       h) > 0);
  assert_int_equal(diff(&out, &err, a, b, NULL), 1);
  assert_string_equal(out, added);
  free(out);
  free(err);
  assert_int_equal(diff(&out, &err, b, a, NULL), 1);
  assert_string_equal(out, removed);
  free(out);
  free(err);
  free(added);
  free(removed);
  free(d);
  free(a);
  free(b);
}

static void test_archives_without_frame_table_compare_by_content(void** state) {
  (void)state;
  char* ours = sample("rocm-ours.kpack", 3, false);
  char* rocm = sample("rocm-theirs.kpack", 3, false);
  char* rocm_changed = sample("rocm-changed.kpack", 9, false);
  drop_frame_table(rocm);
  drop_frame_table(rocm_changed);
  char *out, *err;
  assert_int_equal(diff(&out, &err, ours, rocm, NULL), 0);
  assert_string_equal(out,
                      "equal: 0 added, 0 removed, 0 changed, 4 the same\n");
  free(out);
  free(err);
  assert_int_equal(diff(&out, &err, rocm, rocm_changed, NULL), 1);
  kt_assert_contains(out, "~ lib/libb.so#0 gfx942: 30000 bytes");
  kt_assert_contains(out, "0 added, 0 removed, 1 changed, 3 the same\n");
  free(out);
  free(err);
  free(ours);
  free(rocm);
  free(rocm_changed);
}

/* A frame corrupt the same way on both sides is equal by its stored bytes:
 * had it been decompressed, the diff would have failed with status 2. */
static void test_equal_stored_frames_are_not_decompressed(void** state) {
  (void)state;
  char* a = sample("bad-a.kpack", 3, false);
  char* b = sample("bad-b.kpack", 3, false);
  char* c = sample("bad-c.kpack", 3, false);
  corrupt_kernel(a, "lib/libb.so#0", "gfx90a");
  corrupt_kernel(b, "lib/libb.so#0", "gfx90a");
  char *out, *err;
  assert_int_equal(diff(&out, &err, a, b, NULL), 0);
  assert_string_equal(out,
                      "equal: 0 added, 0 removed, 0 changed, 4 the same\n");
  free(out);
  free(err);
  /* against the intact archive, both kernels must be read: the corrupt one
   * cannot be, and the diff says so */
  assert_int_equal(diff(&out, &err, a, c, NULL), 2);
  kt_assert_contains(err, "lib/libb.so#0 for gfx90a: KPACK_ERROR_");
  free(out);
  free(err);
  free(a);
  free(b);
  free(c);
}

static void test_directories_pair_archives_by_path(void** state) {
  (void)state;
  char* da = kt_path(kt_tmp, "dir-a");
  char* db = kt_path(kt_tmp, "dir-b");
  char* ka = kt_path(da, ".kpack");
  char* kb = kt_path(db, ".kpack");
  assert_int_equal(mkdir(da, 0755), 0);
  assert_int_equal(mkdir(db, 0755), 0);
  assert_int_equal(mkdir(ka, 0755), 0);
  assert_int_equal(mkdir(kb, 0755), 0);
  char* p;
  write_sample(p = kt_path(ka, "x.kpack"), 3, false), free(p);
  write_sample(p = kt_path(kb, "x.kpack"), 3, false), free(p);
  write_sample(p = kt_path(ka, "y.kpack"), 3, false), free(p);
  write_sample(p = kt_path(kb, "y.kpack"), 9, false), free(p);
  write_sample(p = kt_path(kb, "z.kpack"), 3, false), free(p);
  kt_write_file(p = kt_path(kb, "notes.txt"), "x", 1), free(p);
  char *out, *err;
  assert_int_equal(diff(&out, &err, da, db, NULL), 1);
  kt_assert_contains(out, "~ .kpack/y.kpack: lib/libb.so#0 gfx942: ");
  kt_assert_contains(out, "+ .kpack/z.kpack: declared arch gfx90a\n");
  kt_assert_contains(out, "+ .kpack/z.kpack: lib/libb.so#0 gfx942 (");
  kt_assert_contains(out,
                     "different: 4 added, 0 removed, 1 changed, 7 the same\n");
  assert_null(strstr(out, "x.kpack"));
  free(out);
  free(err);
  assert_int_equal(diff(&out, &err, da, da, NULL), 0);
  assert_string_equal(out,
                      "equal: 0 added, 0 removed, 0 changed, 8 the same\n");
  free(out);
  free(err);
  free(ka);
  free(kb);
  free(da);
  free(db);
}

static void test_json_lists_each_difference(void** state) {
  (void)state;
  char* a = sample("json-a.kpack", 3, false);
  char* b = sample("json-b.kpack", 9, true);
  char *out, *err;
  assert_int_equal(diff(&out, &err, a, b, "--json"), 1);
  char* path = kt_path(kt_tmp, "diff.json");
  kt_write_file(path, out, strlen(out));
  char* cmd;
  assert_true(asprintf(&cmd,
                       "jq -c '[.equal, .added, .removed, .changed, .same, "
                       ".complete, [.differences[] | [.kind, .change, .arch, "
                       "(.a | .size?), (.b | .size?)]]]' '%s'",
                       path) > 0);
  const char* sh[] = {"-c", cmd, NULL};
  char* jq;
  assert_int_equal(kt_run_args("sh", sh, 30, &jq, NULL), 0);
  assert_string_equal(
      jq,
      "[false,1,0,1,3,true,[[\"declared_arch\",\"added\",\"gfx1100\",null,"
      "null],[\"kernel\",\"added\",\"gfx1100\",null,5000],[\"kernel\","
      "\"changed\",\"gfx942\",30000,30000]]]\n");
  free(jq);
  free(cmd);
  free(path);
  free(out);
  free(err);
  free(a);
  free(b);
}

static void test_unreadable_input_and_bad_command_line_exit_2(void** state) {
  (void)state;
  char* a = sample("two-a.kpack", 3, false);
  char* missing = kt_path(kt_tmp, "missing.kpack");
  char* junk = kt_path(kt_tmp, "junk.kpack");
  kt_write_file(junk, "not an archive", 14);
  char *out, *err;
  assert_int_equal(diff(&out, &err, a, missing, NULL), 2);
  kt_assert_contains(err, "missing.kpack");
  free(out);
  free(err);
  assert_int_equal(diff(&out, &err, a, junk, NULL), 2);
  kt_assert_contains(err, "junk.kpack");
  free(out);
  free(err);
  assert_int_equal(diff(&out, &err, a, kt_tmp, NULL), 2);
  kt_assert_contains(err, "cannot compare a directory with a file");
  free(out);
  free(err);
  const char* one[] = {"diff", a, NULL};
  assert_int_equal(kt_run_args(tool, one, 30, NULL, NULL), 2);
  free(a);
  free(missing);
  free(junk);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_equal_archives_exit_0),
      cmocka_unit_test(test_one_changed_kernel_is_shown_with_sizes_and_hashes),
      cmocka_unit_test(test_an_added_arch_is_shown_both_ways),
      cmocka_unit_test(test_archives_without_frame_table_compare_by_content),
      cmocka_unit_test(test_equal_stored_frames_are_not_decompressed),
      cmocka_unit_test(test_directories_pair_archives_by_path),
      cmocka_unit_test(test_json_lists_each_difference),
      cmocka_unit_test(test_unreadable_input_and_bad_command_line_exit_2),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
