/* SPDX-License-Identifier: MIT
 *
 * MessagePack to JSON text, for the values people read: per-kernel TOC
 * metadata maps and the AMDGPU metadata note of a code object. Bounded like
 * msgpack_reader.h; the output is always valid UTF-8 JSON.
 */
#ifndef KPACK_MSGPACK_JSON_H
#define KPACK_MSGPACK_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "rocm_kpack/kpack_types.h"

/* Containers nested deeper than this are refused rather than recursed. */
#define KP_JSON_MAX_DEPTH 64

/* Renders the one MessagePack value at the start of data[0, size) as JSON
 * into a NUL-terminated malloc'ed string (*json, *json_len without the NUL).
 * `pretty` indents by two spaces per level with one member per line;
 * otherwise the text is compact. *used (when not NULL) receives the bytes
 * the value occupied; bytes after it are not looked at.
 *
 * Mapping: nil null, booleans, integers of any width and sign, floats
 * (%.17g; NaN and infinities become null), str as a JSON string (invalid
 * UTF-8 bytes become U+FFFD), bin as a string of lowercase hex digits, ext
 * as {"ext": type, "data": "<hex>"}; a map key that is not a str is
 * rendered to JSON and used as a string.
 *   MSGPACK_PARSE_FAILED  truncated or malformed input, nesting deeper
 *                         than KP_JSON_MAX_DEPTH, or a map or array key
 *                         inside another map or array key (its quoted text
 *                         would grow exponentially with the nesting)
 *   OUT_OF_MEMORY         allocation failed
 * On failure *json is NULL. */
kpack_error_t kp_msgpack_to_json(const void* data, size_t size, bool pretty,
                                 char** json, size_t* json_len, size_t* used);

#endif /* KPACK_MSGPACK_JSON_H */
