/* SPDX-License-Identifier: MIT
 *
 * Bounded MessagePack decoding for the TOC and HIPK metadata. Only what the
 * kpack formats use is typed (maps, arrays, str, unsigned ints); everything
 * else can be skipped so unknown keys stay forward compatible.
 */
#include "common/msgpack_reader.h"

#include <string.h>

#include "common/byteorder.h"

/* Reads an n-byte big-endian length or value following the tag byte. */
static mp_status take_be(mp_cursor* c, unsigned n, uint64_t* out) {
  if (mp_remaining(c) < 1 + (size_t)n)
    return MP_TRUNCATED;
  *out = kp_load_be(c->pos + 1, n);
  c->pos += 1 + n;
  return MP_OK;
}

/* Container header: a count of `per_item` elements each needing >= 1 byte.
 * The cursor moves only on success. */
static mp_status read_container(mp_cursor* c, uint8_t fix_base, uint8_t fix_max,
                                uint8_t tag16, uint8_t tag32, unsigned per_item,
                                uint32_t* count) {
  if (c->pos >= c->end)
    return MP_TRUNCATED;
  mp_cursor next = *c;
  uint8_t tag = *c->pos;
  uint64_t n;
  if (tag >= fix_base && tag <= fix_max) {
    n = tag - fix_base;
    next.pos++;
  } else if (tag == tag16 || tag == tag32) {
    mp_status st = take_be(&next, tag == tag16 ? 2 : 4, &n);
    if (st != MP_OK)
      return st;
  } else {
    return MP_WRONG_TYPE;
  }
  if (n > mp_remaining(&next) / per_item)
    return MP_TRUNCATED;
  *count = (uint32_t)n;
  *c = next;
  return MP_OK;
}

mp_status mp_read_map(mp_cursor* c, uint32_t* count) {
  return read_container(c, 0x80, 0x8f, 0xde, 0xdf, 2, count);
}

mp_status mp_read_array(mp_cursor* c, uint32_t* count) {
  return read_container(c, 0x90, 0x9f, 0xdc, 0xdd, 1, count);
}

mp_status mp_read_str(mp_cursor* c, const char** str, uint32_t* len) {
  if (c->pos >= c->end)
    return MP_TRUNCATED;
  mp_cursor next = *c;
  uint8_t tag = *c->pos;
  uint64_t n;
  if (tag >= 0xa0 && tag <= 0xbf) {
    n = tag & 0x1f;
    next.pos++;
  } else if (tag >= 0xd9 && tag <= 0xdb) {
    mp_status st = take_be(&next, 1u << (tag - 0xd9), &n);
    if (st != MP_OK)
      return st;
  } else {
    return MP_WRONG_TYPE;
  }
  if (n > mp_remaining(&next))
    return MP_TRUNCATED;
  *str = (const char*)next.pos;
  *len = (uint32_t)n;
  next.pos += n;
  *c = next;
  return MP_OK;
}

mp_status mp_read_bin(mp_cursor* c, const uint8_t** data, uint32_t* len) {
  if (c->pos >= c->end)
    return MP_TRUNCATED;
  mp_cursor next = *c;
  uint8_t tag = *c->pos;
  uint64_t n;
  if (tag < 0xc4 || tag > 0xc6)
    return MP_WRONG_TYPE;
  mp_status st = take_be(&next, 1u << (tag - 0xc4), &n);
  if (st != MP_OK)
    return st;
  if (n > mp_remaining(&next))
    return MP_TRUNCATED;
  *data = next.pos;
  *len = (uint32_t)n;
  next.pos += n;
  *c = next;
  return MP_OK;
}

mp_status mp_read_uint(mp_cursor* c, uint64_t* value) {
  if (c->pos >= c->end)
    return MP_TRUNCATED;
  uint8_t tag = *c->pos;
  if (tag <= 0x7f) {
    *value = tag;
    c->pos++;
    return MP_OK;
  }
  unsigned width;
  bool is_signed;
  if (tag >= 0xcc && tag <= 0xcf) {
    width = 1u << (tag - 0xcc);
    is_signed = false;
  } else if (tag >= 0xd0 && tag <= 0xd3) {
    width = 1u << (tag - 0xd0);
    is_signed = true;
  } else {
    return MP_WRONG_TYPE;
  }
  if (mp_remaining(c) < 1 + (size_t)width)
    return MP_TRUNCATED;
  uint64_t v = kp_load_be(c->pos + 1, width);
  /* A signed encoding of a non-negative value is still a valid count. */
  if (is_signed && (v >> (width * 8 - 1)) & 1)
    return MP_WRONG_TYPE;
  c->pos += 1 + width;
  *value = v;
  return MP_OK;
}

bool mp_peek_nil(const mp_cursor* c) {
  return c->pos < c->end && *c->pos == 0xc0;
}

/* Size of the value at c->pos excluding nested elements: sets *payload to
 * the bytes that follow the header and *children to the nested values. */
static mp_status value_shape(const mp_cursor* c, uint64_t* header,
                             uint64_t* payload, uint64_t* children) {
  const uint8_t* p = c->pos;
  size_t left = mp_remaining(c);
  if (left == 0)
    return MP_TRUNCATED;
  uint8_t tag = p[0];
  *header = 1;
  *payload = 0;
  *children = 0;
  if (tag <= 0x7f || tag >= 0xe0 || tag == 0xc0 || tag == 0xc2 || tag == 0xc3)
    return MP_OK;
  if (tag >= 0x80 && tag <= 0x8f) {
    *children = 2u * (tag & 0x0f);
    return MP_OK;
  }
  if (tag >= 0x90 && tag <= 0x9f) {
    *children = tag & 0x0f;
    return MP_OK;
  }
  if (tag >= 0xa0 && tag <= 0xbf) {
    *payload = tag & 0x1f;
    return MP_OK;
  }
  unsigned lenbytes = 0;
  switch (tag) {
    case 0xc1:
      return MP_MALFORMED; /* never used */
    case 0xc4:
    case 0xd9:
      lenbytes = 1;
      break; /* bin8, str8 */
    case 0xc5:
    case 0xda:
      lenbytes = 2;
      break;
    case 0xc6:
    case 0xdb:
      lenbytes = 4;
      break;
    case 0xc7:
      lenbytes = 1;
      *payload = 1;
      break; /* ext8: +type byte */
    case 0xc8:
      lenbytes = 2;
      *payload = 1;
      break;
    case 0xc9:
      lenbytes = 4;
      *payload = 1;
      break;
    case 0xca:
      *payload = 4;
      return MP_OK; /* float32 */
    case 0xcb:
      *payload = 8;
      return MP_OK;
    case 0xcc:
    case 0xd0:
      *payload = 1;
      return MP_OK;
    case 0xcd:
    case 0xd1:
      *payload = 2;
      return MP_OK;
    case 0xce:
    case 0xd2:
      *payload = 4;
      return MP_OK;
    case 0xcf:
    case 0xd3:
      *payload = 8;
      return MP_OK;
    case 0xd4:
      *payload = 2;
      return MP_OK; /* fixext: type + data */
    case 0xd5:
      *payload = 3;
      return MP_OK;
    case 0xd6:
      *payload = 5;
      return MP_OK;
    case 0xd7:
      *payload = 9;
      return MP_OK;
    case 0xd8:
      *payload = 17;
      return MP_OK;
    case 0xdc:
    case 0xde:
      lenbytes = 2;
      break;
    case 0xdd:
    case 0xdf:
      lenbytes = 4;
      break;
    default:
      return MP_MALFORMED;
  }
  if (left < 1 + (size_t)lenbytes)
    return MP_TRUNCATED;
  uint64_t n = kp_load_be(p + 1, lenbytes);
  *header = 1 + lenbytes;
  if (tag == 0xdc || tag == 0xdd)
    *children = n;
  else if (tag == 0xde || tag == 0xdf)
    *children = 2 * n;
  else
    *payload += n;
  return MP_OK;
}

mp_status mp_skip(mp_cursor* c) {
  /* Values still to skip. Each one takes at least a byte, so a pending count
   * above the bytes left is a truncated input, caught before it can grow. */
  uint64_t pending = 1;
  mp_cursor cur = *c;
  while (pending > 0) {
    uint64_t header, payload, children;
    mp_status st = value_shape(&cur, &header, &payload, &children);
    if (st != MP_OK)
      return st;
    size_t left = mp_remaining(&cur);
    if (header > left || payload > left - header)
      return MP_TRUNCATED;
    cur.pos += header + payload;
    pending--;
    if (children > mp_remaining(&cur) ||
        pending > mp_remaining(&cur) - children)
      return MP_TRUNCATED;
    pending += children;
  }
  *c = cur;
  return MP_OK;
}

static bool is_container(uint8_t tag) {
  return (tag >= 0x80 && tag <= 0x9f) || (tag >= 0xdc && tag <= 0xdf);
}

mp_status mp_skip_bounded(mp_cursor* c, unsigned max_depth) {
  /* left[d]: values still to skip at depth d. Each count was checked
   * against the bytes left when its container was read. */
  uint64_t left[MP_MAX_DEPTH + 1];
  unsigned depth = 0;
  mp_cursor cur = *c;
  if (max_depth > MP_MAX_DEPTH)
    max_depth = MP_MAX_DEPTH;
  left[0] = 1;
  for (;;) {
    while (depth > 0 && left[depth] == 0)
      depth--;
    if (left[depth] == 0)
      break;
    uint64_t header, payload, children;
    mp_status st = value_shape(&cur, &header, &payload, &children);
    if (st != MP_OK)
      return st;
    bool container = is_container(*cur.pos);
    size_t rest = mp_remaining(&cur);
    if (header > rest || payload > rest - header)
      return MP_TRUNCATED;
    cur.pos += header + payload;
    left[depth]--;
    if (!container)
      continue;
    if (depth >= max_depth)
      return MP_MALFORMED;
    if (children > mp_remaining(&cur))
      return MP_TRUNCATED;
    left[++depth] = children;
  }
  *c = cur;
  return MP_OK;
}
