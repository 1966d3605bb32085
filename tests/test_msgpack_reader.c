/* SPDX-License-Identifier: MIT
 *
 * The bounded msgpack reader: every encoding width, declared sizes checked
 * against the bytes left, and skipping without recursion.
 */
#include <stdlib.h>
#include <string.h>

#include "common/msgpack_reader.h"
#include "support.h"

#define CURSOR(...)                              \
  mp_cursor_make((const uint8_t[]){__VA_ARGS__}, \
                 sizeof((const uint8_t[]){__VA_ARGS__}))

static void test_strings_of_every_width(void** state) {
  (void)state;
  const char* s;
  uint32_t n;
  mp_cursor c = CURSOR(0xa2, 'h', 'i', 0xd9, 1, 'a', 0xda, 0, 1, 'b', 0xdb, 0,
                       0, 0, 1, 'c', 0xa0);
  assert_int_equal(mp_read_str(&c, &s, &n), MP_OK);
  assert_true(mp_str_eq(s, n, "hi"));
  for (int i = 0; i < 3; i++) {
    assert_int_equal(mp_read_str(&c, &s, &n), MP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(s[0], 'a' + i);
  }
  assert_int_equal(mp_read_str(&c, &s, &n), MP_OK);
  assert_int_equal(n, 0);
  assert_int_equal(mp_remaining(&c), 0);
}

static void test_bins_of_every_width(void** state) {
  (void)state;
  const uint8_t* b;
  uint32_t n;
  mp_cursor c = CURSOR(0xc4, 2, 7, 8, 0xc5, 0, 1, 9, 0xc6, 0, 0, 0, 0);
  assert_int_equal(mp_read_bin(&c, &b, &n), MP_OK);
  assert_int_equal(n, 2);
  assert_int_equal(b[1], 8);
  assert_int_equal(mp_read_bin(&c, &b, &n), MP_OK);
  assert_int_equal(n, 1);
  assert_int_equal(b[0], 9);
  assert_int_equal(mp_read_bin(&c, &b, &n), MP_OK);
  assert_int_equal(n, 0);
  assert_int_equal(mp_remaining(&c), 0);
  mp_cursor str = CURSOR(0xa1, 'x');
  assert_int_equal(mp_read_bin(&str, &b, &n), MP_WRONG_TYPE);
  assert_int_equal(mp_remaining(&str), 2); /* not consumed */
  mp_cursor cut = CURSOR(0xc5, 0, 3, 1, 2);
  assert_int_equal(mp_read_bin(&cut, &b, &n), MP_TRUNCATED);
  assert_int_equal(mp_remaining(&cut), 5);
}

static void test_unsigned_and_nonnegative_signed_integers(void** state) {
  (void)state;
  uint64_t v;
  mp_cursor c =
      CURSOR(0x7f, 0xcc, 0xff, 0xcd, 1, 0, 0xce, 0, 1, 0, 0, 0xcf, 1, 0, 0, 0,
             0, 0, 0, 0, 0xd0, 5, 0xd3, 0, 0, 0, 0, 0, 0, 0, 9);
  const uint64_t want[] = {127, 255, 256, 65536, 1ull << 56, 5, 9};
  for (int i = 0; i < 7; i++) {
    assert_int_equal(mp_read_uint(&c, &v), MP_OK);
    assert_true(v == want[i]);
  }
  mp_cursor neg = CURSOR(0xff);
  assert_int_equal(mp_read_uint(&neg, &v), MP_WRONG_TYPE);
  mp_cursor neg8 = CURSOR(0xd0, 0x80);
  assert_int_equal(mp_read_uint(&neg8, &v), MP_WRONG_TYPE);
  mp_cursor str = CURSOR(0xa1, 'x');
  assert_int_equal(mp_read_uint(&str, &v), MP_WRONG_TYPE);
  assert_int_equal(mp_remaining(&str), 2); /* not consumed */
}

static void test_truncated_values_are_reported(void** state) {
  (void)state;
  uint64_t v;
  const char* s;
  uint32_t n;
  mp_cursor a = CURSOR(0xcf, 1, 2);
  assert_int_equal(mp_read_uint(&a, &v), MP_TRUNCATED);
  mp_cursor b = CURSOR(0xa5, 'x');
  assert_int_equal(mp_read_str(&b, &s, &n), MP_TRUNCATED);
  mp_cursor c = CURSOR(0xda, 0);
  assert_int_equal(mp_read_str(&c, &s, &n), MP_TRUNCATED);
  mp_cursor d = mp_cursor_make("", 0);
  assert_int_equal(mp_read_map(&d, &n), MP_TRUNCATED);
}

static void test_container_counts_larger_than_input_are_truncated(
    void** state) {
  (void)state;
  uint32_t n;
  mp_cursor map = CURSOR(0x82, 1, 2, 3); /* 2 pairs need 4 bytes */
  assert_int_equal(mp_read_map(&map, &n), MP_TRUNCATED);
  mp_cursor arr = CURSOR(0xdd, 0xff, 0xff, 0xff, 0xff, 1);
  assert_int_equal(mp_read_array(&arr, &n), MP_TRUNCATED);
  mp_cursor ok = CURSOR(0xdc, 0, 2, 1, 2);
  assert_int_equal(mp_read_array(&ok, &n), MP_OK);
  assert_int_equal(n, 2);
}

static void test_skip_covers_every_type(void** state) {
  (void)state;
  mp_cursor c =
      CURSOR(0x84,                         /* map of 4 */
             0xc0, 0xc2,                   /* nil: false */
             0xca, 0, 0, 0, 0,             /* float32 */
             0xcb, 0, 0, 0, 0, 0, 0, 0, 0, /* float64 */
             0xc4, 2, 1, 2,                /* bin8 */
             0xd4, 1, 2,                   /* fixext1 */
             0xc7, 1, 5, 9,                /* ext8 */
             0x92, 0xe0, 0x91, 0x80,       /* nested arrays, neg fixint, map */
             0x7f);
  assert_int_equal(mp_skip(&c), MP_OK);
  uint64_t v;
  assert_int_equal(mp_read_uint(&c, &v), MP_OK);
  assert_int_equal(v, 0x7f);
}

static void test_skip_handles_deep_nesting_without_recursion(void** state) {
  (void)state;
  enum { DEPTH = 1 << 20 };
  uint8_t* deep = malloc(DEPTH + 1);
  memset(deep, 0x91, DEPTH); /* a million nested one-element arrays */
  deep[DEPTH] = 0x01;
  mp_cursor c = mp_cursor_make(deep, DEPTH + 1);
  assert_int_equal(mp_skip(&c), MP_OK);
  assert_int_equal(mp_remaining(&c), 0);
  c = mp_cursor_make(deep, DEPTH); /* missing the innermost value */
  assert_int_equal(mp_skip(&c), MP_TRUNCATED);
  free(deep);
}

static void test_reserved_byte_is_malformed(void** state) {
  (void)state;
  mp_cursor c = CURSOR(0x91, 0xc1);
  assert_int_equal(mp_skip(&c), MP_MALFORMED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strings_of_every_width),
      cmocka_unit_test(test_bins_of_every_width),
      cmocka_unit_test(test_unsigned_and_nonnegative_signed_integers),
      cmocka_unit_test(test_truncated_values_are_reported),
      cmocka_unit_test(test_container_counts_larger_than_input_are_truncated),
      cmocka_unit_test(test_skip_covers_every_type),
      cmocka_unit_test(test_skip_handles_deep_nesting_without_recursion),
      cmocka_unit_test(test_reserved_byte_is_malformed),
  };
  return cmocka_run_group_tests_name("msgpack_reader", tests, NULL, NULL);
}
