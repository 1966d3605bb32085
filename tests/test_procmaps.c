/* SPDX-License-Identifier: MIT
 *
 * /proc/self/maps parsing and kpack_discover_binary_path() (docs/loader.md):
 * the file and offset behind an address, names with spaces, deleted files,
 * small buffers and addresses with no file behind them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/procmaps.h"
#include "support.h"

/* ---- line parsing -------------------------------------------------------- */

/* A line as the kernel prints it: fields, padding to the name column, one
 * space, the name. */
static char* maps_line(const char* fields, const char* name) {
  char* line;
  int column = (int)(25 + sizeof(void*) * 6 - 1);
  if (name == NULL)
    assert_true(asprintf(&line, "%s", fields) > 0);
  else
    assert_true(asprintf(&line, "%-*s %s", column, fields, name) > 0);
  return line;
}

static void test_line_fields_are_parsed(void** state) {
  (void)state;
  char* line = maps_line("7f0000001000-7f0000003000 r-xp 00002000 08:01 123456",
                         "/usr/lib/libx.so");
  kp_mapping m;
  assert_true(kp_procmaps_parse_line(line, strlen(line), &m));
  assert_true(m.start == 0x7f0000001000u);
  assert_true(m.end == 0x7f0000003000u);
  assert_true(m.offset == 0x2000u);
  assert_true(m.readable);
  assert_int_equal(m.dev_major, 8);
  assert_int_equal(m.dev_minor, 1);
  assert_true(m.inode == 123456u);
  assert_int_equal(m.path_len, strlen("/usr/lib/libx.so"));
  assert_memory_equal(m.path, "/usr/lib/libx.so", m.path_len);
  free(line);
}

static void test_name_with_spaces_is_kept_whole(void** state) {
  (void)state;
  const char* name = "/opt/my  libs/lib x.so";
  char* line = maps_line("1000-2000 r--p 00000000 00:2a 7", name);
  kp_mapping m;
  assert_true(kp_procmaps_parse_line(line, strlen(line), &m));
  assert_int_equal(m.path_len, strlen(name));
  assert_memory_equal(m.path, name, m.path_len);
  free(line);
}

static void test_name_starting_with_spaces_keeps_them(void** state) {
  (void)state;
  const char* name = "  odd name";
  char* line = maps_line("1000-2000 r--p 00000000 00:2a 7", name);
  kp_mapping m;
  assert_true(kp_procmaps_parse_line(line, strlen(line), &m));
  assert_int_equal(m.path_len, strlen(name));
  assert_memory_equal(m.path, name, m.path_len);
  free(line);
}

static void test_fields_wider_than_the_column_leave_one_space(void** state) {
  (void)state;
  /* Long device numbers and a 20-digit inode push past the pad column. */
  const char* fields =
      "ffffffffff600000-ffffffffff601000 --xp 00000000 1234:5678 "
      "18446744073709551615";
  char* line;
  assert_true(asprintf(&line, "%s %s", fields, "/x y") > 0);
  kp_mapping m;
  assert_true(kp_procmaps_parse_line(line, strlen(line), &m));
  assert_false(m.readable);
  assert_int_equal(m.path_len, 4);
  assert_memory_equal(m.path, "/x y", 4);
  free(line);
}

static void test_anonymous_line_has_no_name(void** state) {
  (void)state;
  char* line = maps_line("1000-2000 rw-p 00000000 00:00 0", NULL);
  kp_mapping m;
  assert_true(kp_procmaps_parse_line(line, strlen(line), &m));
  assert_int_equal(m.path_len, 0);
  free(line);
}

static void test_malformed_lines_are_rejected(void** state) {
  (void)state;
  const char* bad[] = {"", "garbage", "1000-2000 rw-p",
                       "2000-1000 rw-p 00000000 00:00 0"};
  kp_mapping m;
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
    assert_false(kp_procmaps_parse_line(bad[i], strlen(bad[i]), &m));
}

static void test_find_locates_the_mapping_of_a_stack_address(void** state) {
  (void)state;
  int local = 0;
  char* line;
  kp_mapping m;
  assert_int_equal(kp_procmaps_find((uintptr_t)&local, &m, &line),
                   KPACK_SUCCESS);
  assert_true(m.start <= (uintptr_t)&local && (uintptr_t)&local < m.end);
  assert_true(m.readable);
  free(line);
}

/* ---- kpack_discover_binary_path ------------------------------------------ */

/* Bytes the test binary maps from its own file. */
static const char marker[] = "kpack discover marker: 7c1d0f2e";

static void test_address_in_this_binary_yields_its_path_and_offset(
    void** state) {
  (void)state;
  char path[4096];
  size_t offset = 0;
  assert_int_equal(
      kpack_discover_binary_path(marker, path, sizeof(path), &offset),
      KPACK_SUCCESS);
  char* exe = realpath("/proc/self/exe", NULL);
  assert_non_null(exe);
  assert_string_equal(path, exe);
  /* The offset points at the same bytes in the file. */
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  char buf[sizeof(marker)];
  assert_int_equal(pread(fd, buf, sizeof(buf), (off_t)offset), sizeof(buf));
  assert_memory_equal(buf, marker, sizeof(marker));
  close(fd);
  free(exe);
}

static void test_offset_output_is_optional(void** state) {
  (void)state;
  char path[4096];
  assert_int_equal(kpack_discover_binary_path(marker, path, sizeof(path), NULL),
                   KPACK_SUCCESS);
}

/* Maps `file` (two pages of data) from its second page. */
static uint8_t* map_second_page(const char* file, size_t* page) {
  *page = (size_t)sysconf(_SC_PAGESIZE);
  void* data = kt_pattern(2 * *page, 3);
  kt_write_file(file, data, 2 * *page);
  free(data);
  int fd = open(file, O_RDONLY);
  assert_true(fd >= 0);
  uint8_t* p = mmap(NULL, *page, PROT_READ, MAP_PRIVATE, fd, (off_t)*page);
  close(fd);
  assert_true(p != MAP_FAILED);
  return p;
}

static void test_mapped_file_with_spaces_in_path_is_found(void** state) {
  (void)state;
  char* dir = kt_tmpdir();
  char* sub = kt_path(dir, "dir with space");
  assert_int_equal(mkdir(sub, 0755), 0);
  char* file = kt_path(sub, "file name.bin");
  size_t page, offset = 0;
  uint8_t* p = map_second_page(file, &page);
  char path[4096];
  assert_int_equal(
      kpack_discover_binary_path(p + 100, path, sizeof(path), &offset),
      KPACK_SUCCESS);
  char* real = realpath(file, NULL);
  assert_string_equal(path, real);
  assert_int_equal(offset, page + 100);
  munmap(p, page);
  kt_rmtree(dir);
  free(real);
  free(file);
  free(sub);
  free(dir);
}

static void test_deleted_file_reports_its_former_path(void** state) {
  (void)state;
  char* dir = kt_tmpdir();
  char* file = kt_path(dir, "gone.so");
  size_t page;
  uint8_t* p = map_second_page(file, &page);
  char* real = realpath(file, NULL);
  assert_int_equal(unlink(file), 0);
  char path[4096];
  assert_int_equal(kpack_discover_binary_path(p, path, sizeof(path), NULL),
                   KPACK_SUCCESS);
  assert_string_equal(path, real);
  munmap(p, page);
  kt_rmtree(dir);
  free(real);
  free(file);
  free(dir);
}

static void test_file_really_named_deleted_keeps_its_name(void** state) {
  (void)state;
  char* dir = kt_tmpdir();
  char* file = kt_path(dir, "lib.so (deleted)");
  size_t page;
  uint8_t* p = map_second_page(file, &page);
  char* real = realpath(file, NULL);
  char path[4096];
  assert_int_equal(kpack_discover_binary_path(p, path, sizeof(path), NULL),
                   KPACK_SUCCESS);
  assert_string_equal(path, real);
  munmap(p, page);
  kt_rmtree(dir);
  free(real);
  free(file);
  free(dir);
}

static void test_buffer_one_byte_short_is_invalid_argument(void** state) {
  (void)state;
  char full[4096];
  assert_int_equal(kpack_discover_binary_path(marker, full, sizeof(full), NULL),
                   KPACK_SUCCESS);
  size_t len = strlen(full);
  char* exact = malloc(len + 1);
  assert_non_null(exact);
  assert_int_equal(kpack_discover_binary_path(marker, exact, len, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_discover_binary_path(marker, exact, 0, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_discover_binary_path(marker, exact, len + 1, NULL),
                   KPACK_SUCCESS);
  assert_string_equal(exact, full);
  free(exact);
}

static void test_null_arguments_are_invalid(void** state) {
  (void)state;
  char path[64];
  assert_int_equal(kpack_discover_binary_path(NULL, path, sizeof(path), NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_discover_binary_path(marker, NULL, 64, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

static void test_unmapped_address_fails_discovery(void** state) {
  (void)state;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* gone = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(gone != MAP_FAILED);
  assert_int_equal(munmap(gone, page), 0);
  char path[4096];
  assert_int_equal(kpack_discover_binary_path(gone, path, sizeof(path), NULL),
                   KPACK_ERROR_PATH_DISCOVERY_FAILED);
}

static void test_anonymous_heap_and_stack_memory_fail_discovery(void** state) {
  (void)state;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* anon = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(anon != MAP_FAILED);
  void* heap = malloc(16);
  int local = 0;
  char path[4096];
  const void* addrs[] = {anon, heap, &local};
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(
        kpack_discover_binary_path(addrs[i], path, sizeof(path), NULL),
        KPACK_ERROR_PATH_DISCOVERY_FAILED);
  free(heap);
  munmap(anon, page);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_line_fields_are_parsed),
      cmocka_unit_test(test_name_with_spaces_is_kept_whole),
      cmocka_unit_test(test_name_starting_with_spaces_keeps_them),
      cmocka_unit_test(test_fields_wider_than_the_column_leave_one_space),
      cmocka_unit_test(test_anonymous_line_has_no_name),
      cmocka_unit_test(test_malformed_lines_are_rejected),
      cmocka_unit_test(test_find_locates_the_mapping_of_a_stack_address),
      cmocka_unit_test(test_address_in_this_binary_yields_its_path_and_offset),
      cmocka_unit_test(test_offset_output_is_optional),
      cmocka_unit_test(test_mapped_file_with_spaces_in_path_is_found),
      cmocka_unit_test(test_deleted_file_reports_its_former_path),
      cmocka_unit_test(test_file_really_named_deleted_keeps_its_name),
      cmocka_unit_test(test_buffer_one_byte_short_is_invalid_argument),
      cmocka_unit_test(test_null_arguments_are_invalid),
      cmocka_unit_test(test_unmapped_address_fails_discovery),
      cmocka_unit_test(test_anonymous_heap_and_stack_memory_fail_discovery),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
