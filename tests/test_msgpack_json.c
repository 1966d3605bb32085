/* SPDX-License-Identifier: MIT
 *
 * MessagePack to JSON: every type and width, escaping, compact and pretty
 * layouts, and hostile input (lying counts, truncation, deep nesting).
 */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "common/msgpack_json.h"
#include "support.h"

#define BYTES(...) \
  (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})

static char* render(const void* data, size_t size, bool pretty) {
  char* json = NULL;
  size_t len = 0, used = 0;
  assert_int_equal(kp_msgpack_to_json(data, size, pretty, &json, &len, &used),
                   KPACK_SUCCESS);
  assert_non_null(json);
  assert_int_equal(strlen(json), len);
  return json;
}

static void expect_json(const void* data, size_t size, const char* want) {
  char* json = render(data, size, false);
  assert_string_equal(json, want);
  free(json);
}

static void expect_failure(const void* data, size_t size) {
  char* json = (char*)1;
  size_t len;
  assert_int_equal(kp_msgpack_to_json(data, size, false, &json, &len, NULL),
                   KPACK_ERROR_MSGPACK_PARSE_FAILED);
  assert_null(json);
}

static void test_scalars_of_every_width(void** state) {
  (void)state;
  expect_json(BYTES(0xc0), "null");
  expect_json(BYTES(0xc3), "true");
  expect_json(BYTES(0xc2), "false");
  expect_json(BYTES(0x7f), "127");
  expect_json(BYTES(0xff), "-1");
  expect_json(BYTES(0xe0), "-32");
  expect_json(BYTES(0xcc, 0xff), "255");
  expect_json(BYTES(0xcd, 0x01, 0x00), "256");
  expect_json(BYTES(0xce, 0, 1, 0, 0), "65536");
  expect_json(BYTES(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
              "18446744073709551615");
  expect_json(BYTES(0xd0, 0x80), "-128");
  expect_json(BYTES(0xd1, 0xff, 0x00), "-256");
  expect_json(BYTES(0xd2, 0x80, 0, 0, 0), "-2147483648");
  expect_json(BYTES(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0), "-9223372036854775808");
  expect_json(BYTES(0xd3, 0, 0, 0, 0, 0, 0, 0, 7), "7");
  expect_json(BYTES(0xca, 0x3f, 0xc0, 0, 0), "1.5");
  expect_json(BYTES(0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18),
              "3.1415926535897931");
  expect_json(BYTES(0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0), "null"); /* NaN */
  expect_json(BYTES(0xca, 0x7f, 0x80, 0, 0), "null");             /* +inf */
}

static void test_strings_are_escaped_and_kept_valid_utf8(void** state) {
  (void)state;
  expect_json(BYTES(0xa0), "\"\"");
  expect_json(BYTES(0xa5, 'a', '"', '\\', '\n', 0x01),
              "\"a\\\"\\\\\\n\\u0001\"");
  expect_json(BYTES(0xd9, 2, 0xc3, 0xa9), "\"\xc3\xa9\""); /* é */
  expect_json(BYTES(0xda, 0, 4, 0xf0, 0x9f, 0x98, 0x80),
              "\"\xf0\x9f\x98\x80\"");
  expect_json(BYTES(0xa3, 'a', 0xff, 'b'), "\"a\\ufffdb\"");  /* stray */
  expect_json(BYTES(0xa2, 0xc0, 0x80), "\"\\ufffd\\ufffd\""); /* overlong */
  expect_json(BYTES(0xa3, 0xed, 0xa0, 0x80),
              "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
  expect_json(BYTES(0xa1, 0x00), "\"\\u0000\"");
}

/* kpack_json_quote() is that same string rule on its own (the tool's
 * --json output uses it): each case agrees with the str rendered above. */
static void expect_quote(const char* text, size_t size, const char* want) {
  char* json = NULL;
  assert_int_equal(kpack_json_quote(text, size, &json), KPACK_SUCCESS);
  assert_string_equal(json, want);
  free(json);
}

static void test_a_string_on_its_own_quotes_as_in_a_map(void** state) {
  (void)state;
  expect_quote("", 0, "\"\"");
  expect_quote(NULL, 0, "\"\"");
  expect_quote("a\"\\\n\x01", 5, "\"a\\\"\\\\\\n\\u0001\"");
  expect_quote("\t\r\x7f", 3, "\"\\t\\r\x7f\"");
  expect_quote("\xc3\xa9", 2, "\"\xc3\xa9\"");
  expect_quote("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");
  expect_quote(
      "a\xff"
      "b",
      3, "\"a\\ufffdb\"");
  expect_quote("\xc0\x80", 2, "\"\\ufffd\\ufffd\"");
  expect_quote("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");
  expect_quote("\xe2\x82", 2, "\"\\ufffd\\ufffd\""); /* cut short */
  expect_quote("\0", 1, "\"\\u0000\"");
  char* json = (char*)1;
  assert_int_equal(kpack_json_quote(NULL, 1, &json),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(json);
  assert_int_equal(kpack_json_quote("a", 1, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

static void test_bin_and_ext_become_hex(void** state) {
  (void)state;
  expect_json(BYTES(0xc4, 3, 0x00, 0xab, 0xff), "\"00abff\"");
  expect_json(BYTES(0xc5, 0, 0), "\"\"");
  expect_json(BYTES(0xd4, 0x05, 0x10), "{\"ext\":5,\"data\":\"10\"}");
  expect_json(BYTES(0xc7, 2, 0xff, 0xde, 0xad),
              "{\"ext\":-1,\"data\":\"dead\"}");
}

static void test_containers_compact_and_pretty(void** state) {
  (void)state;
  /* {"a": [1, {}], "b": []} built with msgpack-c, as ROCm's tools would. */
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "a", 1);
  msgpack_pack_array(&pk, 2);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_map(&pk, 0);
  msgpack_pack_str_with_body(&pk, "b", 1);
  msgpack_pack_array(&pk, 0);
  expect_json(sb.data, sb.size, "{\"a\":[1,{}],\"b\":[]}");
  char* pretty = render(sb.data, sb.size, true);
  assert_string_equal(pretty,
                      "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
  free(pretty);
  msgpack_sbuffer_destroy(&sb);
}

static void test_non_string_keys_are_quoted(void** state) {
  (void)state;
  expect_json(BYTES(0x82, 0x01, 0xc3, 0x91, 0xa1, 'x', 0xc0),
              "{\"1\":true,\"[\\\"x\\\"]\":null}");
}

/* A map key that is itself a map keyed by a map...: each level quotes the
 * JSON of the level below, doubling its escapes, so 22 levels once rendered
 * 12 MB from 46 bytes (found by fuzz_code_object). One level of container
 * key is rendered; a container key inside it is refused. */
static void test_container_keys_inside_container_keys_are_refused(
    void** state) {
  (void)state;
  expect_json(BYTES(0x81, 0x81, 0x01, 0xc3, 0xc0),
              "{\"{\\\"1\\\":true}\":null}");
  expect_json(BYTES(0x81, 0x91, 0x81, 0xa1, 'x', 0xc0, 0xc0),
              "{\"[{\\\"x\\\":null}]\":null}");
  expect_failure(BYTES(0x81, 0x81, 0x81, 0xa1, '"', 0xc0, 0xc0, 0xc0));
  expect_failure(BYTES(0x81, 0x91, 0x81, 0x90, 0xc0, 0xc0));
  uint8_t deep[64];
  size_t n = 0;
  for (int i = 0; i < 22; i++)
    deep[n++] = 0x81;
  deep[n++] = 0xa1;
  deep[n++] = '"';
  for (int i = 0; i < 22; i++)
    deep[n++] = 0xc0;
  expect_failure(deep, n);
}

static void test_wide_containers_and_used_bytes(void** state) {
  (void)state;
  size_t used = 0, len;
  char* json;
  const uint8_t in[] = {0xdc, 0, 2, 1, 2, 0xde, 0, 0, 0xaa};
  assert_int_equal(
      kp_msgpack_to_json(in, sizeof(in), false, &json, &len, &used),
      KPACK_SUCCESS);
  assert_string_equal(json, "[1,2]");
  assert_int_equal(used, 5); /* the trailing map and byte are not read */
  free(json);
  expect_json(BYTES(0xdf, 0, 0, 0, 1, 0xa1, 'k', 0xa1, 'v'), "{\"k\":\"v\"}");
  expect_json(BYTES(0xdd, 0, 0, 0, 0), "[]");
}

static void test_truncated_and_malformed_input_fails(void** state) {
  (void)state;
  expect_failure(NULL, 0);
  expect_failure(BYTES(0xc1));                              /* never used */
  expect_failure(BYTES(0xcd, 0x01));                        /* short uint16 */
  expect_failure(BYTES(0xa3, 'a', 'b'));                    /* short fixstr */
  expect_failure(BYTES(0xdb, 0xff, 0xff, 0xff, 0xff, 'a')); /* 4 GiB str */
  expect_failure(BYTES(0xc6, 0, 0, 0, 9, 1));               /* short bin32 */
  expect_failure(BYTES(0xc7, 4, 1, 2));                     /* short ext8 */
  expect_failure(BYTES(0x92, 0x01));      /* array missing an item */
  expect_failure(BYTES(0x81, 0xa1, 'k')); /* map missing a value */
  expect_failure(BYTES(0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0)); /* lying count */
  expect_failure(BYTES(0xdf, 0x10, 0, 0, 0, 0xc0, 0xc0));    /* lying count */
}

static void test_nesting_is_bounded(void** state) {
  (void)state;
  uint8_t deep[KP_JSON_MAX_DEPTH + 2];
  memset(deep, 0x91, sizeof(deep) - 1);
  deep[sizeof(deep) - 1] = 0xc0;
  /* KP_JSON_MAX_DEPTH + 1 arrays around a nil: one level too many. */
  expect_failure(deep, sizeof(deep));
  /* KP_JSON_MAX_DEPTH levels render. */
  char* json = render(deep + 1, sizeof(deep) - 1, false);
  assert_int_equal(strlen(json), 2 * KP_JSON_MAX_DEPTH + 4);
  free(json);
  /* A million levels are refused without recursing a million times. */
  size_t n = 1u << 20;
  uint8_t* huge = malloc(n);
  assert_non_null(huge);
  memset(huge, 0x91, n);
  expect_failure(huge, n);
  free(huge);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scalars_of_every_width),
      cmocka_unit_test(test_strings_are_escaped_and_kept_valid_utf8),
      cmocka_unit_test(test_a_string_on_its_own_quotes_as_in_a_map),
      cmocka_unit_test(test_bin_and_ext_become_hex),
      cmocka_unit_test(test_containers_compact_and_pretty),
      cmocka_unit_test(test_non_string_keys_are_quoted),
      cmocka_unit_test(test_container_keys_inside_container_keys_are_refused),
      cmocka_unit_test(test_wide_containers_and_used_bytes),
      cmocka_unit_test(test_truncated_and_malformed_input_fails),
      cmocka_unit_test(test_nesting_is_bounded),
  };
  return cmocka_run_group_tests_name("msgpack_json", tests, NULL, NULL);
}
