/* SPDX-License-Identifier: MIT
 *
 * Archives whose TOC says what libkpack's writer never writes, for the
 * cmocka suites, the fuzz corpus generator and the benchmark: an archive's
 * TOC decoded by msgpack-c, changed in place and encoded back after the
 * bytes that precede it (the TOC is last in a kpack file, so nothing else
 * moves). Independent of any test framework; like fixture_fatbin.h, what
 * cannot allocate, or a TOC that does not decode, exits the process.
 */
#ifndef KPACK_TESTS_FIXTURE_TOC_H
#define KPACK_TESTS_FIXTURE_TOC_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* A decoded TOC. Its strings may point into the archive bytes it was
 * decoded from: keep them unchanged until fx_toc_encode() or fx_toc_free(). */
typedef struct fx_toc {
  msgpack_zone zone;   /* root's objects, and what fx_toc_add() adds */
  msgpack_object root; /* the TOC map */
} fx_toc;

/* The TOC offset in the header of archive[0, size); 0 if it has none. */
uint64_t fx_toc_offset(const uint8_t* archive, size_t size);

/* Decodes archive[toc_offset, size) as exactly one MessagePack object. */
void fx_toc_decode(fx_toc* t, const uint8_t* archive, size_t size,
                   uint64_t toc_offset);

/* The value under the str key `key` of `map` (of the last such pair), its
 * key in *key_out when that is not NULL; NULL if map is no map or has no
 * such key. */
msgpack_object* fx_toc_get(msgpack_object* map, const char* key,
                           msgpack_object** key_out);

/* The object at a path from the root: map values by key (fx_toc_get()),
 * array elements by decimal index; *key_out gets the last map key. NULL
 * where a step is missing. */
msgpack_object* fx_toc_at(fx_toc* t, const char* const* keys, size_t n,
                          msgpack_object** key_out);

/* Removes the pairs of `map` keyed `key`; how many there were. */
size_t fx_toc_drop(msgpack_object* map, const char* key);

/* Appends key: value to `map`; its pairs move into t's zone. */
void fx_toc_add(fx_toc* t, msgpack_object* map, const char* key,
                msgpack_object value);

/* A str object for s (not copied). */
msgpack_object fx_toc_str(const char* s);

/* Encodes the root as the TOC of the archive *archive (malloc'ed, *size
 * bytes): the bytes before toc_offset stay, the rest is replaced and the
 * buffer re-allocated to fit. Frees t. */
void fx_toc_encode(fx_toc* t, uint8_t** archive, size_t* size,
                   uint64_t toc_offset);

/* Frees t without encoding it. */
void fx_toc_free(fx_toc* t);

#endif /* KPACK_TESTS_FIXTURE_TOC_H */
