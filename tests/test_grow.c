/* SPDX-License-Identifier: MIT
 *
 * Doubling arrays (common/grow.h): room while there is some, the first
 * allocation, doubling, and a size that would overflow refused with the
 * array left as it was.
 */
#include <stdint.h>
#include <stdlib.h>

#include "support.h"
#include "common/grow.h"

static void test_room_left_returns_the_same_array(void** state) {
  (void)state;
  size_t cap = 4;
  int* items = malloc(cap * sizeof(*items));
  assert_non_null(items);
  assert_ptr_equal(kp_grow(items, 3, &cap, sizeof(*items), 8), items);
  assert_int_equal(cap, 4);
  free(items);
}

static void test_an_empty_array_gets_first_elements(void** state) {
  (void)state;
  size_t cap = 0;
  int* items = kp_grow(NULL, 0, &cap, sizeof(*items), 8);
  assert_non_null(items);
  assert_int_equal(cap, 8);
  items[7] = 7; /* all eight are there (ASan/valgrind check) */
  free(items);
}

static void test_a_full_array_doubles_and_keeps_its_elements(void** state) {
  (void)state;
  size_t cap = 0, count = 0;
  int* items = NULL;
  for (int i = 0; i < 100; i++) {
    int* grown = kp_grow(items, count, &cap, sizeof(*items), 8);
    assert_non_null(grown);
    items = grown;
    items[count++] = i;
  }
  assert_int_equal(cap, 128);
  for (int i = 0; i < 100; i++)
    assert_int_equal(items[i], i);
  free(items);
}

static void test_an_overflowing_size_fails_and_leaves_the_array(void** state) {
  (void)state;
  size_t cap = SIZE_MAX / 2 + 1;
  int marker = 1;
  assert_null(kp_grow(&marker, cap, &cap, 1, 8));
  assert_int_equal(cap, SIZE_MAX / 2 + 1);
  cap = SIZE_MAX / 16;
  assert_null(kp_grow(&marker, cap, &cap, 16, 8));
  assert_int_equal(cap, SIZE_MAX / 16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_room_left_returns_the_same_array),
      cmocka_unit_test(test_an_empty_array_gets_first_elements),
      cmocka_unit_test(test_a_full_array_doubles_and_keeps_its_elements),
      cmocka_unit_test(test_an_overflowing_size_fails_and_leaves_the_array),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
