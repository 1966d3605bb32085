/* SPDX-License-Identifier: MIT
 *
 * TOC editing through msgpack-c (see fixture_toc.h).
 */
#include "fixture_toc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_TOC_HEADER 16u

static void die(const char* what) {
  fprintf(stderr, "fixture_toc: %s\n", what);
  exit(1);
}

uint64_t fx_toc_offset(const uint8_t* archive, size_t size) {
  uint64_t offset = 0;
  if (size < FX_TOC_HEADER)
    return 0;
  for (int i = 7; i >= 0; i--)
    offset = offset << 8 | archive[8 + i];
  return offset;
}

void fx_toc_decode(fx_toc* t, const uint8_t* archive, size_t size,
                   uint64_t toc_offset) {
  size_t off = 0;
  if (toc_offset > size)
    die("the TOC offset lies past the archive");
  if (!msgpack_zone_init(&t->zone, 4096))
    die("out of memory");
  if (msgpack_unpack((const char*)archive + toc_offset, size - toc_offset, &off,
                     &t->zone, &t->root) != MSGPACK_UNPACK_SUCCESS)
    die("the TOC is not one MessagePack object");
}

static bool key_is(const msgpack_object* k, const char* s) {
  return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
         memcmp(k->via.str.ptr, s, k->via.str.size) == 0;
}

msgpack_object* fx_toc_get(msgpack_object* map, const char* key,
                           msgpack_object** key_out) {
  msgpack_object* value = NULL;
  if (map->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (uint32_t i = 0; i < map->via.map.size; i++)
    if (key_is(&map->via.map.ptr[i].key, key)) {
      value = &map->via.map.ptr[i].val;
      if (key_out != NULL)
        *key_out = &map->via.map.ptr[i].key;
    }
  return value;
}

msgpack_object* fx_toc_at(fx_toc* t, const char* const* keys, size_t n,
                          msgpack_object** key_out) {
  msgpack_object* o = &t->root;
  for (size_t i = 0; i < n && o != NULL; i++) {
    if (o->type == MSGPACK_OBJECT_ARRAY) {
      size_t at = (size_t)strtoul(keys[i], NULL, 10);
      o = at < o->via.array.size ? &o->via.array.ptr[at] : NULL;
    } else {
      o = fx_toc_get(o, keys[i], key_out);
    }
  }
  return o;
}

size_t fx_toc_drop(msgpack_object* map, const char* key) {
  msgpack_object_map* m = &map->via.map;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < m->size; i++)
    if (!key_is(&m->ptr[i].key, key))
      m->ptr[kept++] = m->ptr[i];
  size_t dropped = m->size - kept;
  m->size = kept;
  return dropped;
}

msgpack_object fx_toc_str(const char* s) {
  msgpack_object o;
  o.type = MSGPACK_OBJECT_STR;
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)strlen(s);
  return o;
}

void fx_toc_add(fx_toc* t, msgpack_object* map, const char* key,
                msgpack_object value) {
  msgpack_object_map* m = &map->via.map;
  msgpack_object_kv* kv =
      msgpack_zone_malloc(&t->zone, sizeof(*kv) * (m->size + 1));
  if (kv == NULL)
    die("out of memory");
  if (m->size > 0)
    memcpy(kv, m->ptr, sizeof(*kv) * m->size);
  kv[m->size].key = fx_toc_str(key);
  kv[m->size].val = value;
  m->ptr = kv;
  m->size++;
}

void fx_toc_encode(fx_toc* t, uint8_t** archive, size_t* size,
                   uint64_t toc_offset) {
  msgpack_sbuffer buf;
  msgpack_packer pk;
  if (toc_offset > *size)
    die("the TOC offset lies past the archive");
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  /* Packed before the archive moves: the objects point into it. */
  if (msgpack_pack_object(&pk, t->root) != 0)
    die("out of memory");
  uint8_t* grown = realloc(*archive, toc_offset + buf.size);
  if (grown == NULL)
    die("out of memory");
  memcpy(grown + toc_offset, buf.data, buf.size);
  *archive = grown;
  *size = toc_offset + buf.size;
  msgpack_sbuffer_destroy(&buf);
  fx_toc_free(t);
}

void fx_toc_free(fx_toc* t) {
  msgpack_zone_destroy(&t->zone);
}
