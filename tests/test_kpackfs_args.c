/* SPDX-License-Identifier: MIT
 *
 * kpackfs's command line, as a Linux user expects it: a mount point that is
 * a file (the MOUNTPOINT forgotten) or already a mount is refused before
 * any source is opened, a non-empty one is mounted over with a warning
 * (-o nonempty: meant), a source that is no archive says why and what to
 * do, and an option kpackfs does not take says where the options are.
 * Messages are compared in full; the mounts are real.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "support.h"

static char* kpackfs;
static char* archive;

static int setup(void** state) {
  kt_tmp_setup(state);
  char* tmp = realpath(kt_tmp, NULL); /* kpackfs names sources canonically */
  assert_non_null(tmp);
  free(kt_tmp);
  kt_tmp = tmp;
  kpackfs = kt_program("kpackfs");
  archive = kt_path(kt_tmp, "a.kpack");
  void* data = kt_pattern(5000, 3);
  const kt_kernel k = {"lib/libx.so#0", "gfx90a", data, 5000};
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &k, 1);
  free(data);
  return 0;
}

/* The directories the tests mount on: a failed test may leave a mount
 * (two, for a kpackfs that mounted twice), detached here. */
static const char* const mount_points[] = {"b.kpack", "twice", "nonempty",
                                           "sources", "options"};

static int teardown(void** state) {
  for (size_t i = 0; i < sizeof(mount_points) / sizeof(mount_points[0]); i++) {
    char* dir = kt_path(kt_tmp, mount_points[i]);
    for (int n = 0; n < 2; n++) /* quiet when nothing is mounted there */
      kt_fusermount(dir, true, 60);
    free(dir);
  }
  free(kpackfs);
  free(archive);
  return kt_tmp_teardown(state);
}

/* Runs kpackfs with the NULL-terminated arguments (it daemonizes once
 * mounted): its exit status, and its standard error. */
#define KFS(err, ...) \
  kt_run_args(kpackfs, (const char* const[]){__VA_ARGS__, NULL}, 60, NULL, err)

/* A directory of the scratch tree, made empty. */
static char* fresh_dir(const char* name) {
  char* dir = kt_path(kt_tmp, name);
  kt_rmtree(dir);
  assert_int_equal(mkdir(dir, 0755), 0);
  return dir;
}

static void unmount(const char* dir) {
  assert_int_equal(kt_fusermount(dir, false, 60), 0);
  assert_false(kt_is_mountpoint(dir));
}

/* ---- the mount point ----------------------------------------------------- */

/* `kpackfs a.kpack b.kpack` (MOUNTPOINT forgotten) would mount over the
 * file b.kpack, which then reads EIO until unmounted. */
static void test_a_file_as_mount_point_is_refused(void** state) {
  (void)state;
  char* file = kt_path(kt_tmp, "b.kpack");
  kt_copy_file(archive, file);
  char *err, *want;
  assert_int_equal(KFS(&err, archive, file), 2);
  assert_true(asprintf(&want,
                       "kpackfs: %s: the mount point is not a directory "
                       "(MOUNTPOINT comes last: kpackfs SOURCE... "
                       "MOUNTPOINT)\n",
                       file) > 0);
  assert_string_equal(err, want);
  assert_false(kt_is_mountpoint(file));
  assert_true(kt_same_file(archive, file));
  free(want);
  free(err);
  free(file);
}

/* mount(8) refuses to mount twice at one place; a second kpackfs would
 * hide the first, whose daemon would go on serving nothing. */
static void test_mounting_twice_on_one_directory_is_refused(void** state) {
  (void)state;
  char* dir = fresh_dir("twice");
  char *err, *want;
  assert_int_equal(KFS(&err, archive, dir), 0);
  assert_string_equal(err, "");
  free(err);
  assert_true(kt_is_mountpoint(dir));
  assert_int_equal(KFS(&err, archive, dir), 1);
  assert_true(asprintf(&want,
                       "kpackfs: %s: already a mount point (fuse.kpackfs from "
                       "%s): unmount it first (fusermount3 -u %s)\n",
                       dir, archive, dir) > 0);
  assert_string_equal(err, want);
  free(want);
  free(err);
  unmount(dir);
  assert_false(kt_is_mountpoint(dir)); /* one mount, not two */
  free(dir);
}

/* fuse3, as the kernel, mounts over a directory that is not empty; its
 * files are hidden until unmounted, which kpackfs says, unless -o nonempty
 * (fuse2's option) says that is meant. */
static void test_a_non_empty_mount_point_gets_a_warning(void** state) {
  (void)state;
  char* dir = fresh_dir("nonempty");
  char* file = kt_path(dir, "hidden.txt");
  kt_write_file(file, "hi\n", 3);
  char *err, *want;
  assert_int_equal(KFS(&err, archive, dir), 0);
  assert_true(asprintf(&want,
                       "kpackfs: warning: %s is not empty: its 1 entry stays "
                       "hidden until it is unmounted (-o nonempty: this is "
                       "meant)\n",
                       dir) > 0);
  assert_string_equal(err, want);
  free(want);
  free(err);
  assert_true(kt_is_mountpoint(dir));
  unmount(dir);
  assert_int_equal(KFS(&err, "-o", "nonempty", archive, dir), 0);
  assert_string_equal(err, "");
  free(err);
  unmount(dir);
  assert_int_equal(access(file, F_OK), 0); /* there again */
  free(file);
  free(dir);
}

/* ---- sources that are no archive ----------------------------------------- */

static void test_sources_that_are_no_archive_say_why(void** state) {
  (void)state;
  char* dir = fresh_dir("sources");
  char* cut = kt_path(kt_tmp, "cut.kpack");
  size_t size;
  void* bytes = kt_read_file(archive, &size);
  kt_write_file(cut, bytes, 100);
  free(bytes);
  char why[512];
  assert_int_equal(kpack_archive_diagnose(cut, why, sizeof(why)),
                   KPACK_ERROR_INVALID_FORMAT);
  kt_assert_contains(why, "past end of file (100 bytes)");
  char *err, *want;
  assert_int_equal(KFS(&err, cut, dir), 1);
  assert_true(asprintf(&want, "kpackfs: %s: KPACK_ERROR_INVALID_FORMAT (%s)\n",
                       cut, why) > 0);
  assert_string_equal(err, want);
  free(want);
  free(err);
  /* A fat binary: how to make an archive of it. */
  char* fat = kt_path(kt_tmp, "libfat.so");
  void* code = kt_pattern(900, 3);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a", code, 900}};
  fx_buf bundle = fx_bundle(e, 2);
  fx_elf_opts o = {.bundles = &bundle, .bundle_count = 1};
  fx_write_elf(fat, &o);
  fx_free(&bundle);
  free(code);
  assert_int_equal(KFS(&err, fat, dir), 1);
  assert_true(asprintf(&want,
                       "kpackfs: %s: KPACK_ERROR_INVALID_FORMAT (a HIP host "
                       "binary, not a kpack archive: pack its device code "
                       "first, with kpack create -o x.kpack --fatbin %s, or "
                       "kpack split)\n",
                       fat, fat) > 0);
  assert_string_equal(err, want);
  assert_false(kt_is_mountpoint(dir));
  free(want);
  free(err);
  free(fat);
  free(cut);
  free(dir);
}

/* ---- options ------------------------------------------------------------- */

static void test_unknown_options_and_named_ids_say_what_works(void** state) {
  (void)state;
  char* dir = fresh_dir("options");
  char* err;
  assert_int_equal(KFS(&err, "-o", "ro,no_such_option", archive, dir), 2);
  assert_string_equal(err,
                      "kpackfs: unknown option '-o no_such_option': kpackfs "
                      "--help lists kpackfs's options and libfuse's (FUSE "
                      "OPTIONS)\n");
  free(err);
  assert_int_equal(KFS(&err, "-o", "uid=bob", archive, dir), 2);
  assert_string_equal(err,
                      "kpackfs: bad option 'uid=bob': a uid is a number (id "
                      "-u bob gives it)\n");
  free(err);
  assert_int_equal(KFS(&err, "-o", "gid=staff", archive, dir), 2);
  assert_string_equal(err,
                      "kpackfs: bad option 'gid=staff': a gid is a number "
                      "(getent group staff gives it)\n");
  free(err);
  assert_false(kt_is_mountpoint(dir));
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_file_as_mount_point_is_refused),
      cmocka_unit_test(test_mounting_twice_on_one_directory_is_refused),
      cmocka_unit_test(test_a_non_empty_mount_point_gets_a_warning),
      cmocka_unit_test(test_sources_that_are_no_archive_say_why),
      cmocka_unit_test(test_unknown_options_and_named_ids_say_what_works),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
