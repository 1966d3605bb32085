/* SPDX-License-Identifier: MIT
 *
 * The one JSON writer of the kpack tool: every `--json` output goes through
 * it. It places the commas, the ": " after a key and the closing brackets
 * itself, and escapes strings (invalid UTF-8 included), so that what it
 * writes parses whatever happens between two calls: a command that fails
 * half-way through an object closes back to a depth it saved
 * (cli_json_depth(), cli_json_close_to()) instead of leaving the object
 * open.
 */
#ifndef KPACK_CLI_JSON_H
#define KPACK_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How deep containers may nest; a deeper one is written as null, and what
 * is written inside it is dropped. */
#define CLI_JSON_MAX_DEPTH 16

/* Layout of a container's members: all on one line ("[a, b]"), or each on
 * a line of its own, indented by `indent` spaces. */
#define CLI_JSON_INLINE (-1)

typedef struct cli_json_level {
  bool object;        /* members are key: value */
  bool empty;         /* nothing written in it yet */
  bool close_on_line; /* lines layout: the bracket on a line of its own */
  int indent;         /* CLI_JSON_INLINE, or spaces before each member */
} cli_json_level;

typedef struct cli_json {
  FILE* out;
  size_t depth;
  size_t too_deep; /* containers opened beyond CLI_JSON_MAX_DEPTH */
  bool after_key;  /* a key was written: the value comes without comma */
  int next_break;  /* spaces of a new line before the next member, or -1 */
  cli_json_level level[CLI_JSON_MAX_DEPTH];
} cli_json;

/* A writer on `out`, at depth 0 (one value to write). */
void cli_json_init(cli_json* w, FILE* out);

/* Opens an array or object as the next value. With `indent` >= 0 every
 * member starts on a new line with that many spaces; `close_on_line` then
 * puts the closing bracket of a non-empty container on a new line,
 * indented two spaces less. */
void cli_json_array(cli_json* w, int indent, bool close_on_line);
void cli_json_object(cli_json* w, int indent, bool close_on_line);
/* Closes the innermost container. */
void cli_json_end(cli_json* w);
/* The current depth, and closing every container opened since. */
size_t cli_json_depth(const cli_json* w);
void cli_json_close_to(cli_json* w, size_t depth);

/* The next member of an inline container starts on a new line with
 * `indent` spaces (the comma stays on the line before). */
void cli_json_break(cli_json* w, int indent);

/* A member's key, inside an object; its value follows. */
void cli_json_key(cli_json* w, const char* key);

/* Values: a string (NULL writes null), numbers, booleans, null, and text
 * that already is one JSON value (libkpack's metadata renderings). */
void cli_json_str(cli_json* w, const char* s);
void cli_json_uint(cli_json* w, uint64_t v);
void cli_json_bool(cli_json* w, bool v);
void cli_json_null(cli_json* w);
void cli_json_raw(cli_json* w, const char* json);

/* Key and value at once. */
void cli_json_key_str(cli_json* w, const char* key, const char* s);
void cli_json_key_uint(cli_json* w, const char* key, uint64_t v);
void cli_json_key_bool(cli_json* w, const char* key, bool v);

/* Closes whatever is open and ends the line. */
void cli_json_finish(cli_json* w);

/* A JSON string literal on its own, escaped by kpack_json_quote() as
 * libkpack writes strings; exits the tool when out of memory. */
void cli_json_string(FILE* out, const char* s);

#endif /* KPACK_CLI_JSON_H */
