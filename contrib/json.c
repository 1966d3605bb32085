/* SPDX-License-Identifier: MIT
 *
 * The tool's JSON writer (json.h): separators and nesting kept in one
 * place, so that no output can be written without its commas or its
 * closing brackets.
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

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

void cli_json_string(FILE* out, const char* s) {
  char* quoted;
  if (kpack_json_quote(s, strlen(s), &quoted) != KPACK_SUCCESS) {
    cli_error("out of memory");
    exit(CLI_FAIL);
  }
  fputs(quoted, out);
  free(quoted);
}
