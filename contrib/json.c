/* SPDX-License-Identifier: MIT
 *
 * The tool's JSON writer (json.h): separators and nesting kept in one
 * place, so that no output can be written without its commas or its
 * closing brackets.
 */
#include "json.h"

void cli_json_init(cli_json* w, FILE* out) {
  *w = (cli_json){.out = out, .next_break = -1};
}

static void newline(FILE* out, int indent) {
  fputc('\n', out);
  for (int i = 0; i < indent; i++)
    fputc(' ', out);
}

/* What comes before a value or a key: the comma and the layout of the
 * container it goes into. False when it must be dropped (too deep). */
static bool before_member(cli_json* w) {
  if (w->too_deep > 0)
    return false;
  if (w->after_key) {
    w->after_key = false;
    return true;
  }
  if (w->depth == 0)
    return true;
  cli_json_level* l = &w->level[w->depth - 1];
  if (!l->empty)
    fputc(',', w->out);
  if (l->indent >= 0)
    newline(w->out, l->indent);
  else if (w->next_break >= 0)
    newline(w->out, w->next_break);
  else if (!l->empty)
    fputc(' ', w->out);
  w->next_break = -1;
  l->empty = false;
  return true;
}

static void open_container(cli_json* w, char bracket, bool object, int indent,
                           bool close_on_line) {
  if (!before_member(w)) {
    w->too_deep++;
    return;
  }
  if (w->depth == CLI_JSON_MAX_DEPTH) {
    fputs("null", w->out);
    w->too_deep++;
    return;
  }
  fputc(bracket, w->out);
  w->level[w->depth++] = (cli_json_level){.object = object,
                                          .empty = true,
                                          .close_on_line = close_on_line,
                                          .indent = indent};
}

void cli_json_array(cli_json* w, int indent, bool close_on_line) {
  open_container(w, '[', false, indent, close_on_line);
}

void cli_json_object(cli_json* w, int indent, bool close_on_line) {
  open_container(w, '{', true, indent, close_on_line);
}

void cli_json_end(cli_json* w) {
  if (w->too_deep > 0) {
    w->too_deep--;
    return;
  }
  if (w->depth == 0)
    return;
  if (w->after_key) { /* a key without its value */
    fputs("null", w->out);
    w->after_key = false;
  }
  cli_json_level* l = &w->level[--w->depth];
  if (l->close_on_line && l->indent >= 0 && !l->empty)
    newline(w->out, l->indent >= 2 ? l->indent - 2 : 0);
  fputc(l->object ? '}' : ']', w->out);
  w->next_break = -1;
}

size_t cli_json_depth(const cli_json* w) {
  return w->depth + w->too_deep;
}

void cli_json_close_to(cli_json* w, size_t depth) {
  while (cli_json_depth(w) > depth)
    cli_json_end(w);
}

void cli_json_break(cli_json* w, int indent) {
  w->next_break = indent;
}

void cli_json_key(cli_json* w, const char* key) {
  if (w->depth == 0 || !w->level[w->depth - 1].object) {
    return; /* only objects have keys; the value stands alone */
  }
  if (!before_member(w))
    return;
  cli_json_string(w->out, key);
  fputs(": ", w->out);
  w->after_key = true;
}

void cli_json_str(cli_json* w, const char* s) {
  if (!before_member(w))
    return;
  if (s == NULL)
    fputs("null", w->out);
  else
    cli_json_string(w->out, s);
}

void cli_json_uint(cli_json* w, uint64_t v) {
  if (before_member(w))
    fprintf(w->out, "%llu", (unsigned long long)v);
}

void cli_json_bool(cli_json* w, bool v) {
  if (before_member(w))
    fputs(v ? "true" : "false", w->out);
}

void cli_json_null(cli_json* w) {
  if (before_member(w))
    fputs("null", w->out);
}

void cli_json_raw(cli_json* w, const char* json) {
  if (before_member(w))
    fputs(json, w->out);
}

void cli_json_key_str(cli_json* w, const char* key, const char* s) {
  cli_json_key(w, key);
  cli_json_str(w, s);
}

void cli_json_key_uint(cli_json* w, const char* key, uint64_t v) {
  cli_json_key(w, key);
  cli_json_uint(w, v);
}

void cli_json_key_bool(cli_json* w, const char* key, bool v) {
  cli_json_key(w, key);
  cli_json_bool(w, v);
}

void cli_json_finish(cli_json* w) {
  cli_json_close_to(w, 0);
  fputc('\n', w->out);
}

/* Length of the UTF-8 sequence at s (NUL-terminated), or 0 if it is not
 * valid (overlong forms, surrogates and values above U+10FFFF included):
 * JSON text is UTF-8, and TOC names are whatever bytes an archive holds. */
static size_t utf8_sequence(const unsigned char* s) {
  unsigned char b = s[0];
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
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

void cli_json_string(FILE* out, const char* s) {
  fputc('"', out);
  for (const unsigned char* p = (const unsigned char*)s; *p;) {
    size_t len = 1;
    switch (*p) {
      case '"':
        fputs("\\\"", out);
        break;
      case '\\':
        fputs("\\\\", out);
        break;
      case '\n':
        fputs("\\n", out);
        break;
      case '\t':
        fputs("\\t", out);
        break;
      case '\r':
        fputs("\\r", out);
        break;
      default:
        if (*p < 0x20) {
          fprintf(out, "\\u%04x", *p);
        } else if ((len = utf8_sequence(p)) == 0) {
          fputs("\\ufffd", out); /* as libkpack renders metadata */
          len = 1;
        } else {
          fwrite(p, 1, len, out);
        }
    }
    p += len;
  }
  fputc('"', out);
}
