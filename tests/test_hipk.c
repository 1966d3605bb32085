/* SPDX-License-Identifier: MIT
 *
 * HIPK metadata (docs/loader.md): the map's required fields and types, every
 * malformed shape as INVALID_METADATA, and the read bound: 64 KiB and never
 * past the end of the mapping that holds the pointer.
 */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loader/hipk.h"
#include "support.h"

/* ---- encoding helpers ---------------------------------------------------- */

static void pack_str(msgpack_packer* pk, const char* s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

/* {kernel_name: name, kpack_search_paths: [paths...]} */
static void pack_hipk(msgpack_sbuffer* sb, const char* name,
                      const char* const* paths, size_t n) {
  msgpack_packer pk;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, name);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, n);
  for (size_t i = 0; i < n; i++)
    pack_str(&pk, paths[i]);
}

static void expect_invalid(const void* data, size_t size) {
  kp_hipk h;
  assert_int_equal(kp_hipk_parse(data, size, &h), KPACK_ERROR_INVALID_METADATA);
  assert_null(h.kernel_name);
  assert_int_equal(h.search_paths.count, 0);
}

#define EXPECT_INVALID(...)                        \
  do {                                             \
    static const uint8_t bytes_[] = {__VA_ARGS__}; \
    expect_invalid(bytes_, sizeof(bytes_));        \
  } while (0)

static const char* const one_path[] = {"../.kpack/blas_@GFXARCH@.kpack"};

/* ---- parsing ------------------------------------------------------------- */

static void test_valid_map_yields_name_and_paths_in_order(void** state) {
  (void)state;
  const char* paths[] = {"../.kpack/a.kpack", "/abs/b.kpack", ""};
  msgpack_sbuffer sb;
  kp_hipk h;
  pack_hipk(&sb, "lib/librocblas.so.5", paths, 3);
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  assert_string_equal(h.kernel_name, "lib/librocblas.so.5");
  assert_int_equal(h.search_paths.count, 3);
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(h.search_paths.items[i], paths[i]);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
}

static void test_unknown_keys_and_values_are_skipped(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  kp_hipk h;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 4);
  pack_str(&pk, "future");
  msgpack_pack_map(&pk, 1);
  pack_str(&pk, "nested");
  msgpack_pack_array(&pk, 2);
  msgpack_pack_int(&pk, -5);
  msgpack_pack_nil(&pk);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, "x.kpack");
  msgpack_pack_int(&pk, 7); /* a non-string key */
  msgpack_pack_true(&pk);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, "k");
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  assert_string_equal(h.kernel_name, "k");
  assert_int_equal(h.search_paths.count, 1);
  assert_string_equal(h.search_paths.items[0], "x.kpack");
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
}

static void test_wide_string_encodings_are_accepted(void** state) {
  (void)state;
  /* map16 {str16 "kernel_name": str8 "k", str32 "kpack_search_paths":
   * array16 [str8 "p"]} */
  static const uint8_t bytes[] = {
      0xde, 0,   2,   0xda, 0,    11,  'k', 'e',  'r', 'n', 'e', 'l', '_',
      'n',  'a', 'm', 'e',  0xd9, 1,   'k', 0xdb, 0,   0,   0,   18,  'k',
      'p',  'a', 'c', 'k',  '_',  's', 'e', 'a',  'r', 'c', 'h', '_', 'p',
      'a',  't', 'h', 's',  0xdc, 0,   1,   0xd9, 1,   'p'};
  kp_hipk h;
  assert_int_equal(kp_hipk_parse(bytes, sizeof(bytes), &h), KPACK_SUCCESS);
  assert_string_equal(h.kernel_name, "k");
  assert_string_equal(h.search_paths.items[0], "p");
  kp_hipk_free(&h);
}

static void test_bytes_after_the_map_are_ignored(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  kp_hipk h;
  pack_hipk(&sb, "k", one_path, 1);
  msgpack_sbuffer_write(&sb, "\xc1garbage", 8);
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
}

static void test_value_that_is_not_a_map_is_invalid(void** state) {
  (void)state;
  EXPECT_INVALID(0x91, 0xa1, 'k');     /* array */
  EXPECT_INVALID(0xa3, 'a', 'b', 'c'); /* str */
  EXPECT_INVALID(0xc0);                /* nil */
  EXPECT_INVALID(0x05);                /* int */
  expect_invalid("", 0);               /* nothing */
}

static void test_missing_kernel_name_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, "x.kpack");
  expect_invalid(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void test_missing_search_paths_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, "k");
  expect_invalid(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void test_empty_map_is_invalid(void** state) {
  (void)state;
  EXPECT_INVALID(0x80);
}

static void test_kernel_name_of_wrong_type_is_invalid(void** state) {
  (void)state;
  const int kinds = 3;
  for (int kind = 0; kind < kinds; kind++) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "kernel_name");
    if (kind == 0)
      msgpack_pack_int(&pk, 42);
    else if (kind == 1)
      msgpack_pack_bin_with_body(&pk, "k", 1); /* bin is not str */
    else
      msgpack_pack_nil(&pk);
    pack_str(&pk, "kpack_search_paths");
    msgpack_pack_array(&pk, 1);
    pack_str(&pk, "x.kpack");
    expect_invalid(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
}

static void test_search_paths_of_wrong_type_are_invalid(void** state) {
  (void)state;
  for (int kind = 0; kind < 3; kind++) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "kernel_name");
    pack_str(&pk, "k");
    pack_str(&pk, "kpack_search_paths");
    if (kind == 0) {
      pack_str(&pk, "x.kpack"); /* a str, not an array of str */
    } else if (kind == 1) {
      msgpack_pack_array(&pk, 2);
      pack_str(&pk, "x.kpack");
      msgpack_pack_int(&pk, 1);
    } else {
      msgpack_pack_map(&pk, 0);
    }
    expect_invalid(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
}

static void test_empty_search_path_array_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  pack_hipk(&sb, "k", NULL, 0);
  expect_invalid(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void test_empty_kernel_name_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  pack_hipk(&sb, "", one_path, 1);
  expect_invalid(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void test_repeated_key_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, "a");
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, "x.kpack");
  pack_str(&pk, "kernel_name");
  pack_str(&pk, "b");
  expect_invalid(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void test_embedded_nul_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  pack_str(&pk, "kernel_name");
  msgpack_pack_str(&pk, 3);
  msgpack_pack_str_body(&pk, "a\0b", 3);
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, "x.kpack");
  expect_invalid(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void test_every_truncation_is_invalid(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  pack_hipk(&sb, "lib/libx.so", one_path, 1);
  for (size_t n = 0; n < sb.size; n++)
    expect_invalid(sb.data, n);
  msgpack_sbuffer_destroy(&sb);
}

static void test_declared_lengths_beyond_the_input_are_invalid(void** state) {
  (void)state;
  /* map32 of 2^32-1 pairs; str32 of 2^32-1 bytes as a key; array32 of
   * 2^32-1 paths. */
  EXPECT_INVALID(0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'k');
  EXPECT_INVALID(0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'k');
  EXPECT_INVALID(0x82, 0xab, 'k', 'e', 'r', 'n', 'e', 'l', '_', 'n', 'a', 'm',
                 'e', 0xa1, 'k', 0xb2, 'k', 'p', 'a', 'c', 'k', '_', 's', 'e',
                 'a', 'r', 'c', 'h', '_', 'p', 'a', 't', 'h', 's', 0xdd, 0xff,
                 0xff, 0xff, 0xff, 0xa1, 'p');
}

/* ---- kpack_arches -------------------------------------------------------- */

/* The two loader keys, then kpack_arches with a value of shape `kind` (0 a
 * valid list; 9 a valid list and the key again). */
static void pack_with_arches(msgpack_sbuffer* sb, int kind) {
  msgpack_packer pk;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, kind == 9 ? 4 : 3);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, "k");
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, "x.kpack");
  pack_str(&pk, "kpack_arches");
  char long_arch[257];
  switch (kind) {
    case 0: /* valid */
    case 9: /* valid, then repeated */
      msgpack_pack_array(&pk, 2);
      pack_str(&pk, "gfx1100");
      pack_str(&pk, "gfx90a:xnack-");
      break;
    case 1: /* a string, not an array */
      pack_str(&pk, "gfx1100");
      break;
    case 2: /* empty array */
      msgpack_pack_array(&pk, 0);
      break;
    case 3: /* an entry that is no string */
      msgpack_pack_array(&pk, 2);
      pack_str(&pk, "gfx1100");
      msgpack_pack_int(&pk, 1100);
      break;
    case 4: /* an empty string */
      msgpack_pack_array(&pk, 1);
      pack_str(&pk, "");
      break;
    case 5: /* a string over 255 bytes */
      memset(long_arch, 'x', 256);
      long_arch[256] = '\0';
      msgpack_pack_array(&pk, 1);
      pack_str(&pk, long_arch);
      break;
    case 6: /* more than 256 entries */
      msgpack_pack_array(&pk, 257);
      for (int i = 0; i < 257; i++)
        pack_str(&pk, "gfx1100");
      break;
    case 7: /* an embedded NUL */
      msgpack_pack_array(&pk, 1);
      msgpack_pack_str(&pk, 3);
      msgpack_pack_str_body(&pk, "g\0x", 3);
      break;
    case 8: /* nil */
      msgpack_pack_nil(&pk);
      break;
  }
  if (kind == 9) {
    pack_str(&pk, "kpack_arches");
    msgpack_pack_array(&pk, 1);
    pack_str(&pk, "gfx803");
  }
}

static void test_kpack_arches_are_read_in_order(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  kp_hipk h;
  pack_with_arches(&sb, 0);
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  assert_int_equal(h.arches.count, 2);
  assert_string_equal(h.arches.items[0], "gfx1100");
  assert_string_equal(h.arches.items[1], "gfx90a:xnack-");
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
  /* Absent: an empty list, the map still valid. */
  pack_hipk(&sb, "k", one_path, 1);
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  assert_int_equal(h.arches.count, 0);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
}

/* A tool acting on the list must get all of it or nothing: every other
 * shape (not an array, empty, a non-string or empty or overlong entry, too
 * many entries, a NUL, the key twice) is INVALID_METADATA. */
static void test_malformed_kpack_arches_are_invalid(void** state) {
  (void)state;
  for (int kind = 1; kind <= 9; kind++) {
    msgpack_sbuffer sb;
    kp_hipk h;
    pack_with_arches(&sb, kind);
    if (kp_hipk_parse(sb.data, sb.size, &h) != KPACK_ERROR_INVALID_METADATA)
      fail_msg("kpack_arches shape %d was accepted", kind);
    assert_null(h.kernel_name);
    assert_int_equal(h.arches.count, 0);
    msgpack_sbuffer_destroy(&sb);
  }
}

/* ---- kpack_record_arches ------------------------------------------------- */

/* kpack_arches [gfx1100, gfx90a:xnack-] and, unless kind is 8 (the per-record
 * key alone), kpack_record_arches of shape `kind`: 0 valid ([[0, 1], [1],
 * []]); 1 not an array; 2 empty; 3 an entry no array; 4 a position no
 * uint; 5 a position past kpack_arches; 6 a negative position; 7 the key
 * twice; 8 without kpack_arches. */
static void pack_with_record_arches(msgpack_sbuffer* sb, int kind) {
  msgpack_packer pk;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, kind == 8 ? 3 : kind == 7 ? 5 : 4);
  pack_str(&pk, "kernel_name");
  pack_str(&pk, "k");
  pack_str(&pk, "kpack_search_paths");
  msgpack_pack_array(&pk, 1);
  pack_str(&pk, "x.kpack");
  pack_str(&pk, "kpack_record_arches");
  switch (kind) {
    case 0:
    case 7:
    case 8:
      msgpack_pack_array(&pk, 3);
      msgpack_pack_array(&pk, 2);
      msgpack_pack_uint8(&pk, 0);
      msgpack_pack_uint8(&pk, 1);
      msgpack_pack_array(&pk, 1);
      msgpack_pack_uint8(&pk, 1);
      msgpack_pack_array(&pk, 0);
      break;
    case 1:
      msgpack_pack_uint8(&pk, 0);
      break;
    case 2:
      msgpack_pack_array(&pk, 0);
      break;
    case 3:
      msgpack_pack_array(&pk, 1);
      pack_str(&pk, "gfx1100");
      break;
    case 4:
      msgpack_pack_array(&pk, 1);
      msgpack_pack_array(&pk, 1);
      pack_str(&pk, "gfx1100");
      break;
    case 5:
      msgpack_pack_array(&pk, 1);
      msgpack_pack_array(&pk, 1);
      msgpack_pack_uint8(&pk, 2);
      break;
    case 6:
      msgpack_pack_array(&pk, 1);
      msgpack_pack_array(&pk, 1);
      msgpack_pack_int8(&pk, -1);
      break;
  }
  if (kind == 7) {
    pack_str(&pk, "kpack_record_arches");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 0);
  }
  if (kind != 8) { /* after the per-record key: any key order is read */
    pack_str(&pk, "kpack_arches");
    msgpack_pack_array(&pk, 2);
    pack_str(&pk, "gfx1100");
    pack_str(&pk, "gfx90a:xnack-");
  }
}

/* Each record its own arches, by code object index; an index past the
 * list has none; without the key, every record has the whole list. */
static void test_record_arches_give_each_record_its_own(void** state) {
  (void)state;
  msgpack_sbuffer sb;
  kp_hipk h;
  const char* const* arches;
  size_t count;
  pack_with_record_arches(&sb, 0);
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  kp_hipk_record_arches(&h, 0, &arches, &count);
  assert_int_equal(count, 2);
  assert_string_equal(arches[0], "gfx1100");
  assert_string_equal(arches[1], "gfx90a:xnack-");
  kp_hipk_record_arches(&h, 1, &arches, &count);
  assert_int_equal(count, 1);
  assert_string_equal(arches[0], "gfx90a:xnack-");
  kp_hipk_record_arches(&h, 2, &arches, &count);
  assert_int_equal(count, 0);
  assert_null(arches);
  kp_hipk_record_arches(&h, 3, &arches, &count);
  assert_int_equal(count, 0);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
  pack_with_arches(&sb, 0);
  assert_int_equal(kp_hipk_parse(sb.data, sb.size, &h), KPACK_SUCCESS);
  kp_hipk_record_arches(&h, 5, &arches, &count);
  assert_int_equal(count, 2);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
}

static void test_malformed_record_arches_are_invalid(void** state) {
  (void)state;
  for (int kind = 1; kind <= 8; kind++) {
    msgpack_sbuffer sb;
    kp_hipk h;
    pack_with_record_arches(&sb, kind);
    if (kp_hipk_parse(sb.data, sb.size, &h) != KPACK_ERROR_INVALID_METADATA)
      fail_msg("kpack_record_arches shape %d was accepted", kind);
    assert_null(h.kernel_name);
    assert_int_equal(h.record_count, 0);
    assert_null(h.record_arches);
    msgpack_sbuffer_destroy(&sb);
  }
}

/* ---- the read bound ------------------------------------------------------ */

/* Two pages, the second made inaccessible: a read past the first faults. */
static uint8_t* guarded_page(size_t* page) {
  *page = (size_t)sysconf(_SC_PAGESIZE);
  uint8_t* base = mmap(NULL, 2 * *page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(base != MAP_FAILED);
  assert_int_equal(mprotect(base + *page, *page, PROT_NONE), 0);
  return base;
}

static void test_metadata_ending_at_the_mapping_end_is_read(void** state) {
  (void)state;
  size_t page;
  uint8_t* base = guarded_page(&page);
  msgpack_sbuffer sb;
  kp_hipk h;
  pack_hipk(&sb, "lib/libx.so", one_path, 1);
  uint8_t* at = base + page - sb.size;
  memcpy(at, sb.data, sb.size);
  assert_int_equal(kp_hipk_read(at, &h), KPACK_SUCCESS);
  assert_string_equal(h.kernel_name, "lib/libx.so");
  assert_string_equal(h.search_paths.items[0], one_path[0]);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
  munmap(base, 2 * page);
}

/* The first page holds only the start; the rest is in the next page of the
 * same mapping, so the read must go past the page (the slow path). */
static void test_metadata_straddling_a_page_boundary_is_read(void** state) {
  (void)state;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint8_t* base = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(base != MAP_FAILED);
  msgpack_sbuffer sb;
  kp_hipk h;
  pack_hipk(&sb, "lib/libx.so", one_path, 1);
  uint8_t* at = base + page - 7;
  memcpy(at, sb.data, sb.size);
  assert_int_equal(kp_hipk_read(at, &h), KPACK_SUCCESS);
  assert_string_equal(h.kernel_name, "lib/libx.so");
  assert_string_equal(h.search_paths.items[0], one_path[0]);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
  munmap(base, 2 * page);
}

static void test_metadata_cut_by_the_mapping_end_is_invalid(void** state) {
  (void)state;
  size_t page;
  uint8_t* base = guarded_page(&page);
  msgpack_sbuffer sb;
  kp_hipk h;
  pack_hipk(&sb, "lib/libx.so", one_path, 1);
  /* All but the last byte fits; a reader that ignored the mapping would
   * fault on the guard page. */
  uint8_t* at = base + page - (sb.size - 1);
  memcpy(at, sb.data, sb.size - 1);
  assert_int_equal(kp_hipk_read(at, &h), KPACK_ERROR_INVALID_METADATA);
  /* Also when the map claims huge sizes right at the end. */
  static const uint8_t huge[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
  at = base + page - sizeof(huge);
  memcpy(at, huge, sizeof(huge));
  assert_int_equal(kp_hipk_read(at, &h), KPACK_ERROR_INVALID_METADATA);
  msgpack_sbuffer_destroy(&sb);
  munmap(base, 2 * page);
}

static void test_pointer_in_no_mapping_is_invalid(void** state) {
  (void)state;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* gone = mmap(NULL, page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(gone != MAP_FAILED);
  assert_int_equal(munmap(gone, page), 0);
  kp_hipk h;
  assert_int_equal(kp_hipk_read(gone, &h), KPACK_ERROR_INVALID_METADATA);
}

static void test_pointer_in_unreadable_mapping_is_invalid(void** state) {
  (void)state;
  size_t page;
  uint8_t* base = guarded_page(&page);
  kp_hipk h;
  assert_int_equal(kp_hipk_read(base + page, &h), KPACK_ERROR_INVALID_METADATA);
  munmap(base, 2 * page);
}

/* Metadata whose one search path is `path_len` bytes, in a 256 KiB mapping
 * so that only the 64 KiB look-ahead can bound the read. */
static kpack_error_t read_with_path_of(size_t path_len, size_t* encoded) {
  const size_t map_size = 256 * 1024;
  uint8_t* base = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(base != MAP_FAILED);
  char* path = malloc(path_len + 1);
  assert_non_null(path);
  memset(path, 'p', path_len);
  path[path_len] = '\0';
  const char* paths[] = {path};
  msgpack_sbuffer sb;
  pack_hipk(&sb, "k", paths, 1);
  assert_true(sb.size < map_size);
  memcpy(base, sb.data, sb.size);
  *encoded = sb.size;
  kp_hipk h;
  kpack_error_t err = kp_hipk_read(base, &h);
  if (err == KPACK_SUCCESS)
    assert_int_equal(strlen(h.search_paths.items[0]), path_len);
  kp_hipk_free(&h);
  msgpack_sbuffer_destroy(&sb);
  free(path);
  munmap(base, map_size);
  return err;
}

static void test_metadata_of_exactly_64_kib_is_read(void** state) {
  (void)state;
  size_t encoded;
  /* Find the path length whose encoding is exactly 64 KiB. */
  size_t overhead;
  assert_int_equal(read_with_path_of(1000, &encoded), KPACK_SUCCESS);
  overhead = encoded - 1000; /* both lengths take a str16 */
  assert_int_equal(read_with_path_of(KP_HIPK_MAX_SIZE - overhead, &encoded),
                   KPACK_SUCCESS);
  assert_int_equal(encoded, KP_HIPK_MAX_SIZE);
}

static void test_metadata_larger_than_64_kib_is_invalid(void** state) {
  (void)state;
  size_t encoded;
  assert_int_equal(read_with_path_of(70000, &encoded),
                   KPACK_ERROR_INVALID_METADATA);
  assert_true(encoded > KP_HIPK_MAX_SIZE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_map_yields_name_and_paths_in_order),
      cmocka_unit_test(test_unknown_keys_and_values_are_skipped),
      cmocka_unit_test(test_wide_string_encodings_are_accepted),
      cmocka_unit_test(test_bytes_after_the_map_are_ignored),
      cmocka_unit_test(test_value_that_is_not_a_map_is_invalid),
      cmocka_unit_test(test_missing_kernel_name_is_invalid),
      cmocka_unit_test(test_missing_search_paths_is_invalid),
      cmocka_unit_test(test_empty_map_is_invalid),
      cmocka_unit_test(test_kernel_name_of_wrong_type_is_invalid),
      cmocka_unit_test(test_search_paths_of_wrong_type_are_invalid),
      cmocka_unit_test(test_empty_search_path_array_is_invalid),
      cmocka_unit_test(test_empty_kernel_name_is_invalid),
      cmocka_unit_test(test_repeated_key_is_invalid),
      cmocka_unit_test(test_embedded_nul_is_invalid),
      cmocka_unit_test(test_every_truncation_is_invalid),
      cmocka_unit_test(test_declared_lengths_beyond_the_input_are_invalid),
      cmocka_unit_test(test_kpack_arches_are_read_in_order),
      cmocka_unit_test(test_malformed_kpack_arches_are_invalid),
      cmocka_unit_test(test_record_arches_give_each_record_its_own),
      cmocka_unit_test(test_malformed_record_arches_are_invalid),
      cmocka_unit_test(test_metadata_ending_at_the_mapping_end_is_read),
      cmocka_unit_test(test_metadata_straddling_a_page_boundary_is_read),
      cmocka_unit_test(test_metadata_cut_by_the_mapping_end_is_invalid),
      cmocka_unit_test(test_pointer_in_no_mapping_is_invalid),
      cmocka_unit_test(test_pointer_in_unreadable_mapping_is_invalid),
      cmocka_unit_test(test_metadata_of_exactly_64_kib_is_read),
      cmocka_unit_test(test_metadata_larger_than_64_kib_is_invalid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
