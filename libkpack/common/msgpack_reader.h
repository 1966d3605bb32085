/* SPDX-License-Identifier: MIT
 *
 * A bounded, allocation-free MessagePack reader. A cursor walks a byte
 * range; every read checks the bytes it needs against the end, and every
 * declared container size against the bytes left (each element takes at
 * least one byte), so hostile input can neither over-read nor make a caller
 * allocate for elements that cannot exist.
 */
#ifndef KPACK_MSGPACK_READER_H
#define KPACK_MSGPACK_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct mp_cursor {
  const uint8_t* pos;
  const uint8_t* end;
} mp_cursor;

/* Outcome of a read. MP_TRUNCATED and MP_MALFORMED mean the input is broken;
 * MP_WRONG_TYPE means a well-formed value of another type is next (the
 * cursor has not moved). */
typedef enum {
  MP_OK = 0,
  MP_TRUNCATED,
  MP_MALFORMED,
  MP_WRONG_TYPE,
} mp_status;

static inline mp_cursor mp_cursor_make(const void* data, size_t size) {
  mp_cursor c = {(const uint8_t*)data, (const uint8_t*)data + size};
  return c;
}

static inline size_t mp_remaining(const mp_cursor* c) {
  return (size_t)(c->end - c->pos);
}

/* Containers: the element count (pairs for a map). */
mp_status mp_read_map(mp_cursor* c, uint32_t* count);
mp_status mp_read_array(mp_cursor* c, uint32_t* count);
/* A str (fixstr, str8/16/32): pointer into the input, not terminated. */
mp_status mp_read_str(mp_cursor* c, const char** str, uint32_t* len);
/* A bin (bin8/16/32): pointer into the input. */
mp_status mp_read_bin(mp_cursor* c, const uint8_t** data, uint32_t* len);
/* Any non-negative integer of any width. Negative ints are MP_WRONG_TYPE. */
mp_status mp_read_uint(mp_cursor* c, uint64_t* value);
/* Skips one complete value of any type, iteratively (no recursion depth). */
mp_status mp_skip(mp_cursor* c);
/* True if the next value is nil (does not consume it). */
bool mp_peek_nil(const mp_cursor* c);

/* Convenience: does the str (str, len) equal the C string `lit`? Inline,
 * so that a literal's length is known at compile time. */
static inline bool mp_str_eq(const char* str, uint32_t len, const char* lit) {
  size_t n = strlen(lit);
  return n == len && memcmp(str, lit, n) == 0;
}

/* Like mp_skip(), but also refuses (MP_MALFORMED) a container nested deeper
 * than `max_depth` (at most MP_MAX_DEPTH): the top-level value has depth 0,
 * the elements of a container one more than the container. Readers that
 * later recurse over the value check it with this first. */
#define MP_MAX_DEPTH 64
mp_status mp_skip_bounded(mp_cursor* c, unsigned max_depth);

#endif /* KPACK_MSGPACK_READER_H */
