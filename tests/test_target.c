/* SPDX-License-Identifier: MIT
 *
 * Target compatibility (docs/loader.md): triple prefixes, every feature subset
 * from most to least specific in a fixed order, and the bounds on hostile
 * names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "loader/target.h"

/* Asserts that `isa` expands to exactly `want[0..n)`, in order. */
static void expect_targets(const char* isa, const char* const* want, size_t n) {
  kp_target_list list;
  assert_int_equal(kp_target_compatible(isa, &list), KPACK_SUCCESS);
  assert_int_equal(list.count, n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(list.names[i], want[i]);
  kp_target_list_free(&list);
}

#define EXPECT(isa, ...)                                        \
  do {                                                          \
    static const char* const want_[] = {__VA_ARGS__};           \
    expect_targets(isa, want_, sizeof(want_) / sizeof(*want_)); \
  } while (0)

static void test_bare_processor_yields_itself(void** state) {
  (void)state;
  EXPECT("gfx90a", "gfx90a");
}

static void test_one_feature_yields_feature_then_bare(void** state) {
  (void)state;
  EXPECT("gfx90a:xnack-", "gfx90a:xnack-", "gfx90a");
}

static void test_two_features_follow_the_spec_example(void** state) {
  (void)state;
  EXPECT("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", "gfx942:sramecc+",
         "gfx942:xnack-", "gfx942");
}

static void test_three_features_order_larger_subsets_first_then_positions(
    void** state) {
  (void)state;
  EXPECT("gfx1:a:b:c", "gfx1:a:b:c", "gfx1:a:b", "gfx1:a:c", "gfx1:b:c",
         "gfx1:a", "gfx1:b", "gfx1:c", "gfx1");
}

static void test_amdgcn_triple_prefix_is_stripped(void** state) {
  (void)state;
  EXPECT("amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a:xnack+", "gfx90a");
}

static void test_hipv4_triple_prefix_is_stripped(void** state) {
  (void)state;
  EXPECT("hipv4-amdgcn-amd-amdhsa--gfx1030", "gfx1030");
}

static void test_unknown_prefix_is_kept(void** state) {
  (void)state;
  EXPECT("amdgcn-amd-amdpal--gfx90a", "amdgcn-amd-amdpal--gfx90a");
}

static void test_generic_target_names_expand_like_others(void** state) {
  (void)state;
  EXPECT("gfx9-4-generic:xnack+", "gfx9-4-generic:xnack+", "gfx9-4-generic");
}

static void test_repeated_feature_yields_no_duplicates(void** state) {
  (void)state;
  EXPECT("gfx90a:xnack-:xnack-", "gfx90a:xnack-:xnack-", "gfx90a:xnack-",
         "gfx90a");
}

static void test_empty_name_and_missing_processor_yield_nothing(void** state) {
  (void)state;
  const char* names[] = {"", ":xnack-", "amdgcn-amd-amdhsa--"};
  for (size_t i = 0; i < 3; i++) {
    kp_target_list list;
    assert_int_equal(kp_target_compatible(names[i], &list), KPACK_SUCCESS);
    assert_int_equal(list.count, 0);
    kp_target_list_free(&list);
  }
}

static void test_empty_feature_yields_only_the_name(void** state) {
  (void)state;
  EXPECT("gfx942::xnack-", "gfx942::xnack-");
  EXPECT("gfx942:", "gfx942:");
}

static void test_eight_features_expand_to_all_256_subsets(void** state) {
  (void)state;
  kp_target_list list;
  assert_int_equal(kp_target_compatible("p:a:b:c:d:e:f:g:h", &list),
                   KPACK_SUCCESS);
  assert_int_equal(list.count, 256);
  assert_string_equal(list.names[0], "p:a:b:c:d:e:f:g:h");
  assert_string_equal(list.names[1], "p:a:b:c:d:e:f:g");
  assert_string_equal(list.names[8], "p:b:c:d:e:f:g:h");
  assert_string_equal(list.names[9], "p:a:b:c:d:e:f");
  assert_string_equal(list.names[255], "p");
  kp_target_list_free(&list);
}

static void test_more_than_eight_features_yield_only_the_name(void** state) {
  (void)state;
  EXPECT("p:a:b:c:d:e:f:g:h:i", "p:a:b:c:d:e:f:g:h:i");
}

static void test_overlong_name_yields_only_the_name(void** state) {
  (void)state;
  char name[400];
  memset(name, 'x', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  name[10] = ':';
  expect_targets(name, (const char* const[]){name}, 1);
}

/* kpack_target_may_serve(): a code object `target` may be served to some
 * agent that `agent` describes, features `agent` leaves out being open. */
static void test_may_serve_leaves_unstated_features_open(void** state) {
  (void)state;
  static const struct {
    const char* target;
    const char* agent;
    bool may;
  } cases[] = {
      {"gfx90a", "gfx90a", true},
      {"gfx90a:xnack-", "gfx90a", true},
      {"gfx90a:xnack+", "gfx90a", true},
      {"gfx90a:sramecc+:xnack-", "gfx90a", true},
      {"gfx90a", "gfx90a:xnack-", true},
      {"gfx90a:xnack-", "gfx90a:xnack-", true},
      {"gfx90a:xnack+", "gfx90a:xnack-", false},
      {"gfx90a:sramecc+:xnack-", "gfx90a:xnack-", true},
      {"gfx90a:sramecc-:xnack-", "gfx90a:sramecc+", false},
      {"gfx90a:xnack-", "amdgcn-amd-amdhsa--gfx90a:xnack-", true},
      {"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
       "amdgcn-amd-amdhsa--gfx90a:xnack-", false},
      {"gfx908:xnack-", "gfx90a", false},
      {"gfx90a", "gfx90", false},
      {"gfx1100", "gfx90a", false},
      /* Generic targets, as the loader's table has them. */
      {"gfx9-generic", "gfx906", true},
      {"gfx9-generic:xnack-", "gfx906:xnack-", true},
      {"gfx9-generic:xnack+", "gfx906:xnack-", false},
      {"gfx9-generic", "gfx90a", false},
      {"gfx9-4-generic:sramecc+:xnack-", "gfx942", true},
      {"gfx10-1-generic", "gfx1010", true},
      {"gfx10-3-generic", "gfx1030", true},
      {"gfx11-generic", "gfx1151", true},
      {"gfx12-generic", "gfx1201", true},
      {"gfx12-generic", "gfx1100", false},
      {"gfx9-generic", "gfx9-generic", true},
      {"gfx906", "gfx9-generic", false},
      {"", "gfx90a", false},
      {"gfx90a", "", false},
      {":xnack-", ":xnack-", false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    if (kp_target_may_serve(cases[i].target, cases[i].agent) != cases[i].may)
      fail_msg("'%s' for agent '%s': expected %s", cases[i].target,
               cases[i].agent, cases[i].may ? "may serve" : "cannot serve");
}

/* The one judge of target names: what it accepts, and for each kind of
 * mistake the phrase every command prints. */
static void test_target_check_accepts_targets_and_names_each_mistake(
    void** state) {
  (void)state;
  static const char* const good[] = {
      "gfx90a",
      "gfx90a:xnack-",
      "gfx90a:sramecc+:xnack-",
      "gfx942:sramecc-",
      "gfx1030",
      "gfx9-generic:xnack+",
      "gfx9-4-generic:sramecc+:xnack-",
      "amdgcn-amd-amdhsa--gfx90a:xnack-",
      "hipv4-amdgcn-amd-amdhsa--gfx1100",
      "amdgcnspirv",
      "hipv4-spirv64-amd-amdhsa--amdgcnspirv",
  };
  static const struct {
    const char* target;
    const char* why;
  } bad[] = {
      {"", "the name is empty"},
      {"gfx90a:xnak-",
       "'xnak-' is not a target feature (the features are sramecc and "
       "xnack, each followed by + or -)"},
      {"gfx90a:garbage",
       "'garbage' is not a target feature (the features are sramecc and "
       "xnack, each followed by + or -)"},
      {"gfx90a:banana+",
       "'banana+' is not a target feature (the features are sramecc and "
       "xnack, each followed by + or -)"},
      {"gfx90a:xnack", "'xnack' needs a sign: xnack+ or xnack-"},
      {"gfx90a:xnack+:xnack-", "xnack is set twice"},
      {"gfx90a:xnack-:sramecc+",
       "sramecc comes before xnack, as in gfx90a:sramecc+:xnack-"},
      {"gfx1030:xnack-", "gfx1030 has no xnack setting"},
      {"gfx900:sramecc+", "gfx900 has no sramecc setting"},
      {"gfx9000",
       "'gfx9000' is not a GPU processor kpack knows (such as gfx90a, "
       "gfx942, gfx1100 or gfx9-generic)"},
      {"gfx90",
       "'gfx90' is not a GPU processor kpack knows (such as gfx90a, "
       "gfx942, gfx1100 or gfx9-generic)"},
      {"gfx90a:", "an empty feature after ':'"},
      {":xnack-", "no processor before ':'"},
      {"amdgcn-amd-amdhsa--", "no processor before ':'"},
      {"gfx90a:xnack-,gfx1030", "a list of targets where one is expected"},
      {"x86_64-unknown-linux-gnu",
       "'x86_64-unknown-linux-gnu' is not a GPU processor kpack knows "
       "(such as gfx90a, gfx942, gfx1100 or gfx9-generic)"},
  };
  char why[160];
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if (!kpack_target_check(good[i], why, sizeof(why)))
      fail_msg("'%s' refused: %s", good[i], why);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (kpack_target_check(bad[i].target, why, sizeof(why)))
      fail_msg("'%s' accepted", bad[i].target);
    assert_string_equal(why, bad[i].why);
  }
  assert_false(kpack_target_check(NULL, NULL, 0));
  assert_false(kpack_target_check("gfx90a:xnak-", why, 8)); /* truncated */
  assert_int_equal(strlen(why), 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bare_processor_yields_itself),
      cmocka_unit_test(test_one_feature_yields_feature_then_bare),
      cmocka_unit_test(test_two_features_follow_the_spec_example),
      cmocka_unit_test(
          test_three_features_order_larger_subsets_first_then_positions),
      cmocka_unit_test(test_amdgcn_triple_prefix_is_stripped),
      cmocka_unit_test(test_hipv4_triple_prefix_is_stripped),
      cmocka_unit_test(test_unknown_prefix_is_kept),
      cmocka_unit_test(test_generic_target_names_expand_like_others),
      cmocka_unit_test(test_repeated_feature_yields_no_duplicates),
      cmocka_unit_test(test_empty_name_and_missing_processor_yield_nothing),
      cmocka_unit_test(test_empty_feature_yields_only_the_name),
      cmocka_unit_test(test_eight_features_expand_to_all_256_subsets),
      cmocka_unit_test(test_more_than_eight_features_yield_only_the_name),
      cmocka_unit_test(test_overlong_name_yields_only_the_name),
      cmocka_unit_test(test_may_serve_leaves_unstated_features_open),
      cmocka_unit_test(
          test_target_check_accepts_targets_and_names_each_mistake),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
