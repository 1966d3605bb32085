/* SPDX-License-Identifier: MIT
 *
 * MessagePack to JSON. A recursive descent bounded by KP_JSON_MAX_DEPTH;
 * every length is checked against the bytes left before it is used, and
 * every container count before any element is rendered, so hostile input
 * costs at most a few output bytes per input byte.
 */
#include "common/msgpack_json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"
#include "rocm_kpack/kpack_render.h"

typedef struct js_out {
  char* data;
  size_t len, cap;
  bool failed; /* an allocation failed; later appends do nothing */
} js_out;

typedef struct js_in {
  const uint8_t* pos;
  const uint8_t* end;
  bool in_key; /* rendering a non-str map key (see render_key) */
} js_in;

static void put(js_out* o, const void* s, size_t n) {
  if (o->failed)
    return;
  if (n > o->cap - o->len - 1 || o->data == NULL) {
    size_t cap = o->cap ? o->cap : 256;
    while (n > cap - o->len - 1) {
      if (cap > SIZE_MAX / 2) {
        o->failed = true;
        return;
      }
      cap *= 2;
    }
    char* grown = realloc(o->data, cap);
    if (grown == NULL) {
      o->failed = true;
      return;
    }
    o->data = grown;
    o->cap = cap;
  }
  memcpy(o->data + o->len, s, n);
  o->len += n;
  o->data[o->len] = '\0';
}

static void put_str(js_out* o, const char* s) {
  put(o, s, strlen(s));
}

static void newline(js_out* o, bool pretty, unsigned depth) {
  if (!pretty)
    return;
  put(o, "\n", 1);
  for (unsigned i = 0; i < depth; i++)
    put(o, "  ", 2);
}

/* Takes n bytes from the input; NULL if fewer are left. */
static const uint8_t* take(js_in* in, uint64_t n) {
  if (n > (uint64_t)(in->end - in->pos))
    return NULL;
  const uint8_t* p = in->pos;
  in->pos += n;
  return p;
}

/* Length of the UTF-8 sequence at s[0, n), or 0 if it is not valid
 * (overlong forms, surrogates and values above U+10FFFF included). */
static size_t utf8_sequence(const uint8_t* s, size_t n) {
  uint8_t b = s[0];
  size_t len;
  uint32_t min, cp;
  if (b < 0x80)
    return 1;
  if ((b & 0xe0) == 0xc0) {
    len = 2, min = 0x80, cp = b & 0x1f;
  } else if ((b & 0xf0) == 0xe0) {
    len = 3, min = 0x800, cp = b & 0x0f;
  } else if ((b & 0xf8) == 0xf0) {
    len = 4, min = 0x10000, cp = b & 0x07;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

static void put_string(js_out* o, const uint8_t* s, size_t n) {
  put(o, "\"", 1);
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c;
      put(o, esc, 2);
      i++;
    } else if (c < 0x20) {
      const char* named = c == '\n'   ? "\\n"
                          : c == '\t' ? "\\t"
                          : c == '\r' ? "\\r"
                                      : NULL;
      if (named != NULL) {
        put_str(o, named);
      } else {
        snprintf(esc, sizeof(esc), "\\u%04x", c);
        put_str(o, esc);
      }
      i++;
    } else {
      size_t len = utf8_sequence(s + i, n - i);
      if (len == 0) {
        put_str(o, "\\ufffd");
        i++;
      } else {
        put(o, s + i, len);
        i += len;
      }
    }
  }
  put(o, "\"", 1);
}

KPACK_API kpack_error_t kpack_json_quote(const char* text, size_t size,
                                         char** json) {
  if (json == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *json = NULL;
  if (text == NULL && size > 0)
    return KPACK_ERROR_INVALID_ARGUMENT;
  js_out o = {0};
  put_string(&o, (const uint8_t*)text, size);
  if (o.failed) {
    free(o.data);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  *json = o.data;
  return KPACK_SUCCESS;
}

static void put_hex_string(js_out* o, const uint8_t* s, size_t n) {
  static const char digits[] = "0123456789abcdef";
  put(o, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    char pair[2] = {digits[s[i] >> 4], digits[s[i] & 15]};
    put(o, pair, 2);
  }
  put(o, "\"", 1);
}

static void put_double(js_out* o, double v) {
  char buf[40];
  if (isnan(v) || isinf(v)) {
    put_str(o, "null");
    return;
  }
  snprintf(buf, sizeof(buf), "%.17g", v);
  put_str(o, buf);
}

static bool render(js_in* in, js_out* o, bool pretty, unsigned depth);

/* Renders a map key: a str as itself, anything else as its JSON text
 * quoted. Quoting escapes that text once more, so a map or array key inside
 * another such key would double the output per level of nesting: it is
 * refused, which keeps the output linear in the input. */
static bool render_key(js_in* in, js_out* o, unsigned depth) {
  uint8_t tag = in->pos < in->end ? *in->pos : 0;
  bool is_str = (tag >= 0xa0 && tag <= 0xbf) || (tag >= 0xd9 && tag <= 0xdb);
  bool is_container =
      (tag >= 0x80 && tag <= 0x9f) || (tag >= 0xdc && tag <= 0xdf);
  if (is_str)
    return render(in, o, false, depth);
  if (is_container && in->in_key)
    return false;
  bool outer = !in->in_key;
  in->in_key = true;
  js_out key = {0};
  bool ok = render(in, &key, false, depth);
  if (outer)
    in->in_key = false;
  if (ok && !key.failed)
    put_string(o, (const uint8_t*)key.data, key.len);
  o->failed |= key.failed;
  free(key.data);
  return ok;
}

static bool render_container(js_in* in, js_out* o, bool pretty, unsigned depth,
                             uint64_t count, bool is_map) {
  /* Each element takes at least one byte: a count beyond the input is a
   * lie, caught before anything is rendered for it. */
  if (count > (uint64_t)(in->end - in->pos) / (is_map ? 2 : 1))
    return false;
  if (depth >= KP_JSON_MAX_DEPTH)
    return false;
  put(o, is_map ? "{" : "[", 1);
  for (uint64_t i = 0; i < count; i++) {
    if (i > 0)
      put(o, ",", 1);
    newline(o, pretty, depth + 1);
    if (is_map) {
      if (!render_key(in, o, depth + 1))
        return false;
      put_str(o, pretty ? ": " : ":");
    }
    if (!render(in, o, pretty, depth + 1))
      return false;
  }
  if (count > 0)
    newline(o, pretty, depth);
  put(o, is_map ? "}" : "]", 1);
  return true;
}

static bool render(js_in* in, js_out* o, bool pretty, unsigned depth) {
  const uint8_t* p = take(in, 1);
  if (p == NULL)
    return false;
  uint8_t tag = *p;
  char buf[32];
  if (tag <= 0x7f || tag >= 0xe0) {
    snprintf(buf, sizeof(buf), "%d", tag <= 0x7f ? (int)tag : (int)(int8_t)tag);
    put_str(o, buf);
    return true;
  }
  if (tag >= 0x80 && tag <= 0x8f)
    return render_container(in, o, pretty, depth, tag & 0x0f, true);
  if (tag >= 0x90 && tag <= 0x9f)
    return render_container(in, o, pretty, depth, tag & 0x0f, false);
  if (tag >= 0xa0 && tag <= 0xbf) {
    const uint8_t* s = take(in, tag & 0x1f);
    if (s == NULL)
      return false;
    put_string(o, s, tag & 0x1f);
    return true;
  }
  /* Tags with a big-endian length or value after them. */
  unsigned width;
  switch (tag) {
    case 0xc0:
      put_str(o, "null");
      return true;
    case 0xc2:
    case 0xc3:
      put_str(o, tag == 0xc3 ? "true" : "false");
      return true;
    case 0xc4: /* bin 8/16/32 */
    case 0xc5:
    case 0xc6:
    case 0xd9: /* str 8/16/32 */
    case 0xda:
    case 0xdb: {
      width = tag >= 0xd9 ? 1u << (tag - 0xd9) : 1u << (tag - 0xc4);
      const uint8_t* l = take(in, width);
      if (l == NULL)
        return false;
      uint64_t n = kp_load_be(l, width);
      const uint8_t* s = take(in, n);
      if (s == NULL)
        return false;
      if (tag >= 0xd9)
        put_string(o, s, (size_t)n);
      else
        put_hex_string(o, s, (size_t)n);
      return true;
    }
    case 0xc7: /* ext 8/16/32 */
    case 0xc8:
    case 0xc9:
    case 0xd4: /* fixext 1/2/4/8/16 */
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: {
      uint64_t n;
      if (tag >= 0xd4) {
        n = 1u << (tag - 0xd4);
      } else {
        width = 1u << (tag - 0xc7);
        const uint8_t* l = take(in, width);
        if (l == NULL)
          return false;
        n = kp_load_be(l, width);
      }
      const uint8_t* type = take(in, 1);
      const uint8_t* s = type ? take(in, n) : NULL;
      if (s == NULL)
        return false;
      snprintf(buf, sizeof(buf), "{\"ext\":%d,\"data\":", (int)(int8_t)*type);
      put_str(o, buf);
      put_hex_string(o, s, (size_t)n);
      put(o, "}", 1);
      return true;
    }
    case 0xca:
    case 0xcb: {
      const uint8_t* v = take(in, tag == 0xca ? 4 : 8);
      if (v == NULL)
        return false;
      if (tag == 0xca) {
        uint32_t bits = (uint32_t)kp_load_be(v, 4);
        float f;
        memcpy(&f, &bits, sizeof(f));
        put_double(o, f);
      } else {
        uint64_t bits = kp_load_be(v, 8);
        double d;
        memcpy(&d, &bits, sizeof(d));
        put_double(o, d);
      }
      return true;
    }
    case 0xcc: /* uint 8/16/32/64 */
    case 0xcd:
    case 0xce:
    case 0xcf:
    case 0xd0: /* int 8/16/32/64 */
    case 0xd1:
    case 0xd2:
    case 0xd3: {
      bool is_signed = tag >= 0xd0;
      width = 1u << (tag - (is_signed ? 0xd0 : 0xcc));
      const uint8_t* v = take(in, width);
      if (v == NULL)
        return false;
      uint64_t u = kp_load_be(v, width);
      if (is_signed && width < 8 && (u >> (width * 8 - 1)) & 1)
        u |= ~(uint64_t)0 << (width * 8); /* sign-extend */
      if (is_signed && (int64_t)u < 0)
        snprintf(buf, sizeof(buf), "%lld", (long long)(int64_t)u);
      else
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)u);
      put_str(o, buf);
      return true;
    }
    case 0xdc: /* array 16/32 */
    case 0xdd:
    case 0xde: /* map 16/32 */
    case 0xdf: {
      width = tag == 0xdc || tag == 0xde ? 2 : 4;
      const uint8_t* l = take(in, width);
      if (l == NULL)
        return false;
      return render_container(in, o, pretty, depth, kp_load_be(l, width),
                              tag >= 0xde);
    }
    default: /* 0xc1 is never used */
      return false;
  }
}

kpack_error_t kp_msgpack_to_json(const void* data, size_t size, bool pretty,
                                 char** json, size_t* json_len, size_t* used) {
  if (json == NULL || json_len == NULL || (data == NULL && size > 0))
    return KPACK_ERROR_INVALID_ARGUMENT;
  *json = NULL;
  *json_len = 0;
  js_in in = {data, (const uint8_t*)data + size, false};
  js_out out = {0};
  bool ok = data != NULL && render(&in, &out, pretty, 0);
  if (!ok || out.failed) {
    free(out.data);
    return ok ? KPACK_ERROR_OUT_OF_MEMORY : KPACK_ERROR_MSGPACK_PARSE_FAILED;
  }
  *json = out.data;
  *json_len = out.len;
  if (used != NULL)
    *used = (size_t)(in.pos - (const uint8_t*)data);
  return KPACK_SUCCESS;
}
