/* SPDX-License-Identifier: MIT
 *
 * The clang offload bundle reader: the plain "__CLANG_OFFLOAD_BUNDLE__"
 * entry table and the compressed "CCOB" envelope around it (zlib or zstd).
 * Input is untrusted bytes from a host binary; every count, offset and size
 * is checked against what is readable before it is used.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "offload_bundle.h"

/* Plain bundle: magic, u64 entry count, then per entry u64 offset, u64 size,
 * u64 ID length and the ID bytes. */
#define OB_HEADER_SIZE (OB_MAGIC_SIZE + 8u)
#define OB_ENTRY_FIXED 24u

/* CCOB: magic, u16 version, u16 method, then by version
 *   1: u32 uncompressed size, u64 hash                        (20 bytes)
 *   2: u32 total size, u32 uncompressed size, u64 hash        (24 bytes)
 *   3: u64 total size, u64 uncompressed size, u64 hash        (32 bytes)
 * "total size" counts the header and the compressed payload. */
#define OB_CCOB_METHOD_ZLIB 0u
#define OB_CCOB_METHOD_ZSTD 1u

/* Decompressed sizes beyond this are rejected as nonsense before anything is
 * allocated; real bundles are far smaller. */
#define OB_MAX_UNCOMPRESSED ((uint64_t)SIZE_MAX / 4)

struct kpack_bundle {
  kpack_bundle_info_t info;
  kpack_bundle_entry_t* entries;
  char* strings;  /* NUL-terminated IDs, entries[i].id points here */
  uint8_t* owned; /* decompressed bundle; NULL when entries point at input */
};

/* The target ID of a HIP AMDGPU entry ID, or NULL. Accepts the "hipv4-"
 * (code object v4+) and "hip-" kinds, and the triple with or without the
 * empty environment component ("amdgcn-amd-amdhsa--gfx90a" and the older
 * "amdgcn-amd-amdhsa-gfx906"). */
static const char* entry_arch(const char* id) {
  static const char* const kinds[] = {"hipv4-", "hip-"};
  static const char triple[] = "amdgcn-amd-amdhsa-";
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    size_t n = strlen(kinds[i]);
    if (strncmp(id, kinds[i], n) != 0)
      continue;
    const char* rest = id + n;
    if (strncmp(rest, triple, sizeof(triple) - 1) != 0)
      return NULL;
    rest += sizeof(triple) - 1;
    if (*rest == '-')
      rest++;
    return *rest != '\0' ? rest : NULL;
  }
  return NULL;
}

/* Validates the plain bundle at d[0, size) and computes its extent (the end
 * of its header or of its last entry, whichever is further). With `out`, also
 * fills its entries and strings, pointing the entry data into `d`. */
static kpack_error_t parse_plain(const uint8_t* d, size_t size,
                                 struct kpack_bundle* out, uint64_t* extent) {
  kpack_error_t err = KPACK_ERROR_INVALID_FORMAT;
  size_t string_bytes = 0;
  uint64_t end;
  if (size < OB_HEADER_SIZE || memcmp(d, OB_MAGIC, OB_MAGIC_SIZE) != 0)
    return KPACK_ERROR_INVALID_FORMAT;
  uint64_t count = ob_load_le(d + OB_MAGIC_SIZE, 8);
  /* Every entry needs at least its fixed fields: this bounds the count
   * before it sizes any allocation. */
  if (count > (size - OB_HEADER_SIZE) / OB_ENTRY_FIXED)
    return KPACK_ERROR_INVALID_FORMAT;

  /* Pass 1: bounds of the table, the entries and the ID bytes. */
  size_t pos = OB_HEADER_SIZE;
  end = OB_HEADER_SIZE;
  for (uint64_t i = 0; i < count; i++) {
    if (size - pos < OB_ENTRY_FIXED)
      return KPACK_ERROR_INVALID_FORMAT;
    uint64_t offset = ob_load_le(d + pos, 8);
    uint64_t length = ob_load_le(d + pos + 8, 8);
    uint64_t id_size = ob_load_le(d + pos + 16, 8);
    pos += OB_ENTRY_FIXED;
    if (id_size > size - pos || offset > size || length > size - offset)
      return KPACK_ERROR_INVALID_FORMAT;
    /* An ID is a C string to every consumer: an embedded NUL would let two
     * different entries print alike. */
    if (memchr(d + pos, '\0', (size_t)id_size) != NULL)
      return KPACK_ERROR_INVALID_FORMAT;
    pos += (size_t)id_size;
    string_bytes += (size_t)id_size + 1;
    if (offset + length > end)
      end = offset + length;
  }
  if (pos > end)
    end = pos;
  *extent = end;
  if (out == NULL)
    return KPACK_SUCCESS;

  /* Pass 2: the table is known to be well-formed. */
  out->entries = calloc(count ? (size_t)count : 1, sizeof(*out->entries));
  out->strings = malloc(string_bytes ? string_bytes : 1);
  if (out->entries == NULL || out->strings == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  char* s = out->strings;
  pos = OB_HEADER_SIZE;
  for (size_t i = 0; i < (size_t)count; i++) {
    kpack_bundle_entry_t* e = &out->entries[i];
    uint64_t offset = ob_load_le(d + pos, 8);
    e->size = ob_load_le(d + pos + 8, 8);
    size_t id_size = (size_t)ob_load_le(d + pos + 16, 8);
    pos += OB_ENTRY_FIXED;
    memcpy(s, d + pos, id_size);
    s[id_size] = '\0';
    e->id = s;
    e->arch = entry_arch(s);
    e->data = d + offset;
    s += id_size + 1;
    pos += id_size;
  }
  out->info.entry_count = (size_t)count;
  out->info.bundle_size = end;
  return KPACK_SUCCESS;

fail:
  free(out->entries);
  free(out->strings);
  out->entries = NULL;
  out->strings = NULL;
  return err;
}

/* Grows a decompression buffer, never beyond `limit` bytes. Output drives the
 * growth, so a header that lies about a huge size costs nothing until the
 * payload really produces that much. */
static kpack_error_t grow(uint8_t** buf, size_t* cap, size_t limit) {
  size_t next = *cap < limit / 2 ? *cap * 2 : limit;
  uint8_t* p = realloc(*buf, next);
  if (p == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  *buf = p;
  *cap = next;
  return KPACK_SUCCESS;
}

/* Decompresses zstd frames from src until, for a sized payload (`sized`), the
 * input is used up, or otherwise until `expected` bytes are out. The buffer
 * may hold one byte more than expected so that overlong output is caught. */
static kpack_error_t inflate_zstd(const uint8_t* src, size_t src_size,
                                  bool sized, size_t expected, uint8_t** buf,
                                  size_t* cap, size_t* produced,
                                  size_t* consumed) {
  kpack_error_t err = KPACK_ERROR_DECOMPRESSION_FAILED;
  ZSTD_DStream* ds = ZSTD_createDStream();
  if (ds == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  ZSTD_inBuffer in = {src, src_size, 0};
  size_t total = 0;
  for (;;) {
    if (total == *cap) {
      if (*cap > expected)
        goto done; /* more output than declared */
      if ((err = grow(buf, cap, expected + 1)) != KPACK_SUCCESS)
        goto done;
      err = KPACK_ERROR_DECOMPRESSION_FAILED;
    }
    ZSTD_outBuffer out = {*buf, *cap, total};
    size_t ret = ZSTD_decompressStream(ds, &out, &in);
    if (ZSTD_isError(ret))
      goto done;
    total = out.pos;
    if (total > expected)
      goto done;
    if (ret == 0) { /* a frame ended */
      if (in.pos == in.size || (!sized && total == expected))
        break;
    } else if (in.pos == in.size && out.pos < out.size) {
      goto done; /* wants input that is not there: truncated */
    }
  }
  if (total == expected) {
    *produced = total;
    *consumed = in.pos;
    err = KPACK_SUCCESS;
  }
done:
  ZSTD_freeDStream(ds);
  return err;
}

/* The zlib counterpart: one zlib stream; input after its end is ignored. */
static kpack_error_t inflate_zlib(const uint8_t* src, size_t src_size,
                                  size_t expected, uint8_t** buf, size_t* cap,
                                  size_t* produced, size_t* consumed) {
  kpack_error_t err = KPACK_ERROR_DECOMPRESSION_FAILED;
  z_stream zs;
  memset(&zs, 0, sizeof(zs));
  if (inflateInit(&zs) != Z_OK)
    return KPACK_ERROR_OUT_OF_MEMORY;
  size_t in_pos = 0, total = 0;
  for (;;) {
    if (total == *cap) {
      if (*cap > expected)
        goto done;
      if ((err = grow(buf, cap, expected + 1)) != KPACK_SUCCESS)
        goto done;
      err = KPACK_ERROR_DECOMPRESSION_FAILED;
    }
    /* zlib counts in uInt: feed at most UINT_MAX bytes each way per call. */
    size_t in_avail = src_size - in_pos, out_avail = *cap - total;
    zs.next_in = (Bytef*)(uintptr_t)(src + in_pos);
    zs.avail_in = in_avail > UINT_MAX ? UINT_MAX : (uInt)in_avail;
    zs.next_out = *buf + total;
    zs.avail_out = out_avail > UINT_MAX ? UINT_MAX : (uInt)out_avail;
    uInt in_given = zs.avail_in, out_given = zs.avail_out;
    int ret = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_given - zs.avail_in;
    total += out_given - zs.avail_out;
    if (total > expected)
      goto done;
    if (ret == Z_STREAM_END)
      break;
    if (ret == Z_BUF_ERROR && in_pos == src_size)
      goto done; /* truncated */
    if (ret != Z_OK && ret != Z_BUF_ERROR)
      goto done;
  }
  if (total == expected) {
    *produced = total;
    *consumed = in_pos;
    err = KPACK_SUCCESS;
  }
done:
  inflateEnd(&zs);
  return err;
}

/* Reads a CCOB envelope: on success *plain (malloc'ed) holds the
 * decompressed bundle of *plain_size bytes and *extent the envelope's size. */
static kpack_error_t open_ccob(const uint8_t* d, size_t size,
                               kpack_bundle_info_t* info, uint8_t** plain,
                               size_t* plain_size, uint64_t* extent) {
  kpack_error_t err;
  size_t header;
  uint64_t total = 0, expected;
  uint8_t* buf = NULL;
  size_t cap, produced = 0, consumed = 0;

  if (size < 8)
    return KPACK_ERROR_INVALID_FORMAT;
  unsigned version = (unsigned)ob_load_le(d + 4, 2);
  unsigned method = (unsigned)ob_load_le(d + 6, 2);
  switch (version) {
    case 1:
      header = 20;
      break;
    case 2:
      header = 24;
      break;
    case 3:
      header = 32;
      break;
    default:
      return KPACK_ERROR_UNSUPPORTED_VERSION;
  }
  if (method != OB_CCOB_METHOD_ZLIB && method != OB_CCOB_METHOD_ZSTD)
    return KPACK_ERROR_UNSUPPORTED_VERSION;
  if (size < header)
    return KPACK_ERROR_INVALID_FORMAT;
  if (version == 1) {
    expected = ob_load_le(d + 8, 4);
  } else if (version == 2) {
    total = ob_load_le(d + 8, 4);
    expected = ob_load_le(d + 12, 4);
  } else {
    total = ob_load_le(d + 8, 8);
    expected = ob_load_le(d + 16, 8);
  }
  if (version >= 2 && (total < header || total > size))
    return KPACK_ERROR_INVALID_FORMAT;
  if (expected > OB_MAX_UNCOMPRESSED)
    return KPACK_ERROR_INVALID_FORMAT;
  size_t payload_size = (version >= 2 ? (size_t)total : size) - header;

  /* Start near a typical ratio; grow() takes it from there. */
  cap = payload_size < (SIZE_MAX / 4) ? payload_size * 4 : SIZE_MAX;
  if (cap < 65536)
    cap = 65536;
  if (cap > (size_t)expected + 1)
    cap = (size_t)expected + 1;
  buf = malloc(cap);
  if (buf == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  if (method == OB_CCOB_METHOD_ZSTD)
    err = inflate_zstd(d + header, payload_size, version >= 2, (size_t)expected,
                       &buf, &cap, &produced, &consumed);
  else
    err = inflate_zlib(d + header, payload_size, (size_t)expected, &buf, &cap,
                       &produced, &consumed);
  if (err != KPACK_SUCCESS)
    goto fail;

  info->compression =
      method == OB_CCOB_METHOD_ZSTD ? KPACK_BUNDLE_ZSTD : KPACK_BUNDLE_ZLIB;
  info->ccob_version = version;
  *plain = buf;
  *plain_size = produced;
  *extent = version >= 2 ? total : header + consumed;
  return KPACK_SUCCESS;

fail:
  free(buf);
  return err;
}

KPACK_API kpack_error_t kpack_bundle_parse(const void* data, size_t size,
                                           kpack_bundle_t** bundle) {
  kpack_error_t err;
  struct kpack_bundle* b = NULL;
  const uint8_t* d = data;
  uint64_t extent = 0, inner_extent;
  size_t plain_size;

  if (bundle == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *bundle = NULL;
  if (data == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  b = calloc(1, sizeof(*b));
  if (b == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;

  if (size >= OB_CCOB_MAGIC_SIZE &&
      memcmp(d, OB_CCOB_MAGIC, OB_CCOB_MAGIC_SIZE) == 0) {
    err = open_ccob(d, size, &b->info, &b->owned, &plain_size, &extent);
    if (err != KPACK_SUCCESS)
      goto fail;
    /* Only a plain bundle may sit inside an envelope: nesting would let a
     * few bytes unfold recursively. */
    err = parse_plain(b->owned, plain_size, b, &inner_extent);
    if (err != KPACK_SUCCESS)
      goto fail;
    b->info.bundle_size = plain_size;
  } else {
    err = parse_plain(d, size, b, &extent);
    if (err != KPACK_SUCCESS)
      goto fail;
  }
  b->info.extent = extent;
  *bundle = b;
  return KPACK_SUCCESS;

fail:
  kpack_bundle_free(b);
  return err;
}

kpack_error_t ob_measure(const uint8_t* data, size_t size, uint64_t* extent) {
  kpack_bundle_t* b;
  if (size >= OB_CCOB_MAGIC_SIZE &&
      memcmp(data, OB_CCOB_MAGIC, OB_CCOB_MAGIC_SIZE) == 0) {
    /* A sized envelope needs no decompression to be stepped over. */
    unsigned version = size >= 8 ? (unsigned)ob_load_le(data + 4, 2) : 0;
    if (version == 2 && size >= 24) {
      uint64_t total = ob_load_le(data + 8, 4);
      if (total < 24 || total > size)
        return KPACK_ERROR_INVALID_FORMAT;
      *extent = total;
      return KPACK_SUCCESS;
    }
    if (version == 3 && size >= 32) {
      uint64_t total = ob_load_le(data + 8, 8);
      if (total < 32 || total > size)
        return KPACK_ERROR_INVALID_FORMAT;
      *extent = total;
      return KPACK_SUCCESS;
    }
    kpack_error_t err = kpack_bundle_parse(data, size, &b);
    if (err == KPACK_SUCCESS) {
      *extent = b->info.extent;
      kpack_bundle_free(b);
    }
    return err;
  }
  return parse_plain(data, size, NULL, extent);
}

KPACK_API kpack_error_t kpack_bundle_get_info(const kpack_bundle_t* bundle,
                                              kpack_bundle_info_t* info) {
  if (bundle == NULL || info == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *info = bundle->info;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_bundle_get_entry(const kpack_bundle_t* bundle,
                                               size_t index,
                                               kpack_bundle_entry_t* entry) {
  if (bundle == NULL || entry == NULL || index >= bundle->info.entry_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *entry = bundle->entries[index];
  return KPACK_SUCCESS;
}

KPACK_API void kpack_bundle_free(kpack_bundle_t* bundle) {
  if (bundle == NULL)
    return;
  free(bundle->entries);
  free(bundle->strings);
  free(bundle->owned);
  free(bundle);
}
