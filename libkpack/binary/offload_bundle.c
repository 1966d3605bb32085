/* SPDX-License-Identifier: MIT
 *
 * The clang offload bundle reader: the plain "__CLANG_OFFLOAD_BUNDLE__"
 * entry table and the compressed "CCOB" envelope around it (zlib or zstd).
 * Input is untrusted bytes from a host binary, in memory or read from the
 * file a piece at a time; every count, offset and size is checked against
 * what is readable before it is used, and compressed payloads are streamed
 * through a small window unless the caller asks for the whole bundle.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "common/byteorder.h"
#include "binary/offload_bundle.h"

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
#define OB_CCOB_MAX_HEADER 32u

/* Decompressed sizes beyond this are rejected as nonsense before anything is
 * allocated; real bundles are far smaller. */
#define OB_MAX_UNCOMPRESSED ((uint64_t)SIZE_MAX / 4)

/* Reads from a file input: entry tables are first read this much at a time;
 * compressed payloads go through windows of this size each way. */
#define OB_TABLE_READ 4096u
#define OB_WINDOW ((size_t)256 * 1024)

/* A CCOB header. */
typedef struct ob_ccob {
  unsigned version, method;
  size_t header;     /* header bytes; the payload follows */
  uint64_t payload;  /* payload bytes: exact (v2/v3) or all readable (v1) */
  bool sized;        /* v2/v3: the payload ends exactly at `payload` */
  uint64_t expected; /* declared size of the decompressed bundle */
} ob_ccob;

struct kpack_bundle {
  kpack_bundle_info_t info;
  kpack_bundle_entry_t* entries;
  uint64_t* offsets; /* entry offsets in the (decompressed) bundle */
  char* strings;     /* NUL-terminated IDs, entries[i].id points here */
  uint8_t* owned;    /* bundle bytes read or decompressed for the entries */
  ob_ccob ccob;      /* compressed bundles: to read an entry again */
  kp_input source;   /* where the bundle was read from */
};

/* The target ID of a HIP AMDGPU entry ID, or NULL. Accepts the "hipv4-"
 * (code object v4+) and "hip-" kinds, and the triple with or without the
 * empty environment component ("amdgcn-amd-amdhsa--gfx90a" and the older
 * "amdgcn-amd-amdhsa-gfx906"), and "spirv64-amd-amdhsa--amdgcnspirv". */
static const char* entry_arch(const char* id) {
  static const char* const kinds[] = {"hipv4-", "hip-"};
  static const char triple[] = "amdgcn-amd-amdhsa-";
  static const char spirv[] = "spirv64-amd-amdhsa--amdgcnspirv";
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    size_t n = strlen(kinds[i]);
    if (strncmp(id, kinds[i], n) != 0)
      continue;
    const char* rest = id + n;
    /* Portable SPIR-V, which the runtime compiles for an agent that no
     * native code object serves: its target is "amdgcnspirv". */
    if (strcmp(rest, spirv) == 0)
      return rest + sizeof(spirv) - 1 - strlen("amdgcnspirv");
    if (strncmp(rest, triple, sizeof(triple) - 1) != 0)
      return NULL;
    rest += sizeof(triple) - 1;
    if (*rest == '-')
      rest++;
    return *rest != '\0' ? rest : NULL;
  }
  return NULL;
}

/* ---- the plain entry table ----------------------------------------------- */

/* Validates the plain bundle whose first `avail` bytes are at `d` and which
 * may occupy `limit` >= avail bytes, and computes its extent (the end of its
 * table or of its last entry, whichever is further). When the table runs
 * past `avail` but not past `limit`, sets *need to the bytes it needs at
 * least and returns success without filling anything: read more and call
 * again. With `out`, fills its entries, offsets and strings; entry data
 * points into `d` when `with_data` (then avail covers the extent). */
static kpack_error_t parse_table(const uint8_t* d, size_t avail, uint64_t limit,
                                 bool with_data, struct kpack_bundle* out,
                                 uint64_t* extent, size_t* need) {
  kpack_error_t err = KPACK_ERROR_INVALID_FORMAT;
  size_t string_bytes = 0;
  uint64_t end;
  *need = 0;
  if (limit < OB_HEADER_SIZE)
    return KPACK_ERROR_INVALID_FORMAT;
  if (avail < OB_HEADER_SIZE) {
    *need = OB_HEADER_SIZE;
    return KPACK_SUCCESS;
  }
  if (memcmp(d, OB_MAGIC, OB_MAGIC_SIZE) != 0)
    return KPACK_ERROR_INVALID_FORMAT;
  uint64_t count = kp_load_le(d + OB_MAGIC_SIZE, 8);
  /* Every entry needs at least its fixed fields: this bounds the count
   * before it sizes any allocation. */
  if (count > (limit - OB_HEADER_SIZE) / OB_ENTRY_FIXED)
    return KPACK_ERROR_INVALID_FORMAT;

  /* Pass 1: bounds of the table, the entries and the ID bytes. */
  size_t pos = OB_HEADER_SIZE;
  end = OB_HEADER_SIZE;
  for (uint64_t i = 0; i < count; i++) {
    if (limit - pos < OB_ENTRY_FIXED)
      return KPACK_ERROR_INVALID_FORMAT;
    if (avail - pos < OB_ENTRY_FIXED) {
      *need = pos + OB_ENTRY_FIXED;
      return KPACK_SUCCESS;
    }
    uint64_t offset = kp_load_le(d + pos, 8);
    uint64_t length = kp_load_le(d + pos + 8, 8);
    uint64_t id_size = kp_load_le(d + pos + 16, 8);
    pos += OB_ENTRY_FIXED;
    if (id_size > limit - pos || offset > limit || length > limit - offset)
      return KPACK_ERROR_INVALID_FORMAT;
    if (id_size > avail - pos) {
      *need = pos + (size_t)id_size;
      return KPACK_SUCCESS;
    }
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
  out->offsets = calloc(count ? (size_t)count : 1, sizeof(*out->offsets));
  out->strings = malloc(string_bytes ? string_bytes : 1);
  if (out->entries == NULL || out->offsets == NULL || out->strings == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  char* s = out->strings;
  pos = OB_HEADER_SIZE;
  for (size_t i = 0; i < (size_t)count; i++) {
    kpack_bundle_entry_t* e = &out->entries[i];
    out->offsets[i] = kp_load_le(d + pos, 8);
    e->size = kp_load_le(d + pos + 8, 8);
    size_t id_size = (size_t)kp_load_le(d + pos + 16, 8);
    pos += OB_ENTRY_FIXED;
    memcpy(s, d + pos, id_size);
    s[id_size] = '\0';
    e->id = s;
    e->arch = entry_arch(s);
    e->data = with_data ? d + out->offsets[i] : NULL;
    s += id_size + 1;
    pos += id_size;
  }
  out->info.entry_count = (size_t)count;
  out->info.bundle_size = end;
  return KPACK_SUCCESS;

fail:
  free(out->entries);
  free(out->offsets);
  free(out->strings);
  out->entries = NULL;
  out->offsets = NULL;
  out->strings = NULL;
  return err;
}

/* The table of the plain bundle at the start of `in`, read a little more at
 * a time until it is whole. */
static kpack_error_t read_table(const kp_input* in, struct kpack_bundle* out,
                                uint64_t* extent) {
  kpack_error_t err;
  kp_scratch scratch = {0};
  size_t want = in->size < OB_TABLE_READ ? (size_t)in->size : OB_TABLE_READ;
  for (;;) {
    const uint8_t* d;
    size_t need;
    if ((err = kp_input_view(in, 0, want, &scratch, &d)) != KPACK_SUCCESS)
      break;
    err = parse_table(d, want, in->size, false, out, extent, &need);
    if (err != KPACK_SUCCESS || need == 0)
      break;
    /* need <= in->size: parse_table checked it against the limit. */
    size_t more = want < in->size / 4 ? want * 4 : (size_t)in->size;
    want = need > more ? need : more;
  }
  kp_scratch_free(&scratch);
  return err;
}

/* ---- CCOB envelopes ------------------------------------------------------ */

static kpack_error_t read_ccob_header(const kp_input* in, ob_ccob* c) {
  uint8_t h[OB_CCOB_MAX_HEADER];
  uint64_t total = 0;
  if (in->size < 8)
    return KPACK_ERROR_INVALID_FORMAT;
  kpack_error_t err = kp_input_read(in, 0, h, 8);
  if (err != KPACK_SUCCESS)
    return err;
  c->version = (unsigned)kp_load_le(h + 4, 2);
  c->method = (unsigned)kp_load_le(h + 6, 2);
  switch (c->version) {
    case 1:
      c->header = 20;
      break;
    case 2:
      c->header = 24;
      break;
    case 3:
      c->header = 32;
      break;
    default:
      return KPACK_ERROR_UNSUPPORTED_VERSION;
  }
  if (c->method != OB_CCOB_METHOD_ZLIB && c->method != OB_CCOB_METHOD_ZSTD)
    return KPACK_ERROR_UNSUPPORTED_VERSION;
  if (in->size < c->header)
    return KPACK_ERROR_INVALID_FORMAT;
  if ((err = kp_input_read(in, 0, h, c->header)) != KPACK_SUCCESS)
    return err;
  if (c->version == 1) {
    c->expected = kp_load_le(h + 8, 4);
  } else if (c->version == 2) {
    total = kp_load_le(h + 8, 4);
    c->expected = kp_load_le(h + 12, 4);
  } else {
    total = kp_load_le(h + 8, 8);
    c->expected = kp_load_le(h + 16, 8);
  }
  c->sized = c->version >= 2;
  if (c->sized && (total < c->header || total > in->size))
    return KPACK_ERROR_INVALID_FORMAT;
  if (c->expected > OB_MAX_UNCOMPRESSED)
    return KPACK_ERROR_INVALID_FORMAT;
  c->payload = (c->sized ? total : in->size) - c->header;
  return KPACK_SUCCESS;
}

/* What to keep of a decompressed stream. */
typedef struct ob_take {
  /* Whole mode: every byte, into a buffer that output (not the header)
   * grows, up to expected + 1 so that overlong output is caught. */
  bool whole;
  uint8_t* buf;
  size_t cap;
  /* Range mode: bytes [from, to) into dst (NULL: keep nothing). */
  uint64_t from, to;
  uint8_t* dst;
  /* Run to the end of the payload, checking its size (else stop at `to`). */
  bool to_end;
  /* A stream that ends before `to` is no error: the caller looks at how
   * much was produced. */
  bool partial_ok;
  /* Results. */
  uint64_t produced; /* decompressed bytes seen */
  uint64_t consumed; /* payload bytes the stream took */
} ob_take;

/* Feeds the payload: in memory as it is, from a file a window at a time. */
typedef struct ob_feed {
  kp_input payload;
  uint64_t fed; /* payload bytes handed out so far */
  uint8_t* chunk;
} ob_feed;

static kpack_error_t feed_next(ob_feed* f, const uint8_t** p, size_t* n) {
  uint64_t left = f->payload.size - f->fed;
  if (f->payload.mem != NULL) {
    /* Views, capped so that zlib's 32-bit counters never overflow. */
    *n = left < (1u << 30) ? (size_t)left : (size_t)1 << 30;
    *p = f->payload.mem + f->fed;
  } else {
    *n = left < OB_WINDOW ? (size_t)left : OB_WINDOW;
    kpack_error_t err = kp_input_read(&f->payload, f->fed, f->chunk, *n);
    if (err != KPACK_SUCCESS)
      return err;
    *p = f->chunk;
  }
  f->fed += *n;
  return KPACK_SUCCESS;
}

static bool feed_done(const ob_feed* f) {
  return f->fed == f->payload.size;
}

/* Room for more output: the whole-mode buffer grown, or the window. */
static kpack_error_t out_space(ob_take* t, uint64_t expected, uint8_t* window,
                               uint8_t** at, size_t* room) {
  if (!t->whole) {
    *at = window;
    *room = OB_WINDOW;
    return KPACK_SUCCESS;
  }
  if (t->produced == t->cap) {
    size_t limit = (size_t)expected + 1;
    if (t->cap >= limit)
      return KPACK_ERROR_DECOMPRESSION_FAILED; /* more than declared */
    size_t next = t->cap < limit / 2 ? t->cap * 2 : limit;
    if (next < 65536)
      next = 65536 < limit ? 65536 : limit;
    uint8_t* p = realloc(t->buf, next);
    if (p == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    t->buf = p;
    t->cap = next;
  }
  *at = t->buf + t->produced;
  *room = t->cap - (size_t)t->produced;
  return KPACK_SUCCESS;
}

/* Accounts for `n` new bytes at `at`; in range mode copies the part that
 * falls in [from, to). */
static void took(ob_take* t, const uint8_t* at, size_t n) {
  if (!t->whole && t->dst != NULL) {
    uint64_t lo = t->produced > t->from ? t->produced : t->from;
    uint64_t hi = t->produced + n < t->to ? t->produced + n : t->to;
    if (lo < hi)
      memcpy(t->dst + (lo - t->from), at + (lo - t->produced),
             (size_t)(hi - lo));
  }
  t->produced += n;
}

static bool satisfied(const ob_take* t) {
  return !t->whole && !t->to_end && t->produced >= t->to;
}

/* zstd frames until, for a sized payload, the input is used up, or else
 * until `expected` bytes are out. */
static kpack_error_t inflate_zstd(const ob_ccob* c, ob_feed* f, ob_take* t,
                                  uint8_t* window) {
  kpack_error_t err = KPACK_ERROR_DECOMPRESSION_FAILED;
  ZSTD_DStream* ds = ZSTD_createDStream();
  ZSTD_inBuffer in = {NULL, 0, 0};
  if (ds == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (;;) {
    uint8_t* at;
    size_t room;
    if (in.pos == in.size && !feed_done(f)) {
      const uint8_t* p;
      size_t n;
      if ((err = feed_next(f, &p, &n)) != KPACK_SUCCESS)
        goto done;
      in = (ZSTD_inBuffer){p, n, 0};
    }
    if ((err = out_space(t, c->expected, window, &at, &room)) != KPACK_SUCCESS)
      goto done;
    err = KPACK_ERROR_DECOMPRESSION_FAILED;
    ZSTD_outBuffer out = {at, room, 0};
    size_t ret = ZSTD_decompressStream(ds, &out, &in);
    if (ZSTD_isError(ret))
      goto done;
    took(t, at, out.pos);
    if (t->produced > c->expected)
      goto done;
    if (satisfied(t))
      break;
    bool input_gone = in.pos == in.size && feed_done(f);
    if (ret == 0) { /* a frame ended */
      if (input_gone || (!c->sized && t->produced == c->expected))
        break;
    } else if (input_gone && out.pos < out.size) {
      goto done; /* wants input that is not there: truncated */
    }
  }
  t->consumed = f->fed - (in.size - in.pos);
  err = KPACK_SUCCESS;
done:
  ZSTD_freeDStream(ds);
  return err;
}

/* The zlib counterpart: one zlib stream; input after its end is ignored. */
static kpack_error_t inflate_zlib(const ob_ccob* c, ob_feed* f, ob_take* t,
                                  uint8_t* window) {
  kpack_error_t err = KPACK_ERROR_DECOMPRESSION_FAILED;
  z_stream zs;
  memset(&zs, 0, sizeof(zs));
  if (inflateInit(&zs) != Z_OK)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (;;) {
    uint8_t* at;
    size_t room;
    if (zs.avail_in == 0 && !feed_done(f)) {
      const uint8_t* p;
      size_t n;
      if ((err = feed_next(f, &p, &n)) != KPACK_SUCCESS)
        goto done;
      zs.next_in = (Bytef*)(uintptr_t)p;
      zs.avail_in = (uInt)n;
    }
    if ((err = out_space(t, c->expected, window, &at, &room)) != KPACK_SUCCESS)
      goto done;
    err = KPACK_ERROR_DECOMPRESSION_FAILED;
    zs.next_out = at;
    zs.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
    uInt given = zs.avail_out;
    int ret = inflate(&zs, Z_NO_FLUSH);
    took(t, at, given - zs.avail_out);
    if (t->produced > c->expected)
      goto done;
    if (ret == Z_STREAM_END || satisfied(t))
      break;
    if (ret == Z_BUF_ERROR && zs.avail_in == 0 && feed_done(f))
      goto done; /* truncated */
    if (ret != Z_OK && ret != Z_BUF_ERROR)
      goto done;
  }
  t->consumed = f->fed - zs.avail_in;
  err = KPACK_SUCCESS;
done:
  inflateEnd(&zs);
  return err;
}

/* Runs the payload of the envelope at the start of `in` through its
 * decompressor, keeping what `t` asks for. Unless stopped early, the
 * output must be exactly the declared size. */
static kpack_error_t ccob_inflate(const kp_input* in, const ob_ccob* c,
                                  ob_take* t) {
  kpack_error_t err;
  ob_feed f = {.fed = 0};
  uint8_t* window = NULL;
  t->produced = t->consumed = 0;
  if ((err = kp_input_slice(in, c->header, c->payload, &f.payload)) !=
      KPACK_SUCCESS)
    return err;
  if (in->mem == NULL && (f.chunk = malloc(OB_WINDOW)) == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  if (!t->whole && (window = malloc(OB_WINDOW)) == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  if (t->whole && t->buf == NULL) {
    /* Start near a typical ratio; output grows it from there. */
    uint64_t guess =
        c->payload < OB_MAX_UNCOMPRESSED / 4 ? c->payload * 4 : c->expected + 1;
    t->cap = (size_t)(guess < c->expected + 1 ? guess : c->expected + 1);
    if (t->cap == 0)
      t->cap = 1;
    if ((t->buf = malloc(t->cap)) == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto done;
    }
  }
  err = c->method == OB_CCOB_METHOD_ZSTD ? inflate_zstd(c, &f, t, window)
                                         : inflate_zlib(c, &f, t, window);
  if (err == KPACK_SUCCESS && !satisfied(t) && t->produced != c->expected &&
      !t->partial_ok)
    err = KPACK_ERROR_DECOMPRESSION_FAILED;
done:
  free(window);
  free(f.chunk);
  return err;
}

/* The bytes a CCOB envelope occupies: its total size, or for version 1
 * the header plus whatever the stream consumed. */
static uint64_t ccob_extent(const ob_ccob* c, const ob_take* t) {
  return c->sized ? c->header + c->payload : c->header + t->consumed;
}

static bool is_ccob(const kp_input* in, kpack_error_t* err) {
  uint8_t magic[OB_CCOB_MAGIC_SIZE];
  *err = KPACK_SUCCESS;
  if (in->size < OB_CCOB_MAGIC_SIZE)
    return false;
  *err = kp_input_read(in, 0, magic, sizeof(magic));
  return *err == KPACK_SUCCESS &&
         memcmp(magic, OB_CCOB_MAGIC, OB_CCOB_MAGIC_SIZE) == 0;
}

/* ---- entry points -------------------------------------------------------- */

static void set_compression(struct kpack_bundle* b, const ob_ccob* c) {
  b->info.compression =
      c->method == OB_CCOB_METHOD_ZSTD ? KPACK_BUNDLE_ZSTD : KPACK_BUNDLE_ZLIB;
  b->info.ccob_version = c->version;
  b->ccob = *c;
}

kpack_error_t ob_parse(const kp_input* in, kpack_bundle_t** bundle) {
  kpack_error_t err;
  struct kpack_bundle* b = calloc(1, sizeof(*b));
  uint64_t extent = 0, inner;
  size_t need;
  *bundle = NULL;
  if (b == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;

  if (is_ccob(in, &err)) {
    ob_ccob c;
    ob_take t = {.whole = true, .to_end = true};
    if ((err = read_ccob_header(in, &c)) != KPACK_SUCCESS)
      goto fail;
    err = ccob_inflate(in, &c, &t);
    b->owned = t.buf;
    if (err != KPACK_SUCCESS)
      goto fail;
    set_compression(b, &c);
    /* Only a plain bundle may sit inside an envelope: nesting would let a
     * few bytes unfold recursively. */
    err = parse_table(b->owned, (size_t)t.produced, t.produced, true, b, &inner,
                      &need);
    if (err == KPACK_SUCCESS && need != 0)
      err = KPACK_ERROR_INVALID_FORMAT;
    if (err != KPACK_SUCCESS)
      goto fail;
    b->info.bundle_size = t.produced;
    extent = ccob_extent(&c, &t);
  } else if (err != KPACK_SUCCESS) {
    goto fail;
  } else if (in->mem != NULL) {
    err = parse_table(in->mem, (size_t)in->size, in->size, true, b, &extent,
                      &need);
    if (err == KPACK_SUCCESS && need != 0)
      err = KPACK_ERROR_INVALID_FORMAT;
    if (err != KPACK_SUCCESS)
      goto fail;
  } else {
    /* From a file: the table says how far the bundle runs; read that. */
    if ((err = read_table(in, NULL, &extent)) != KPACK_SUCCESS)
      goto fail;
    if ((b->owned = malloc(extent ? (size_t)extent : 1)) == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto fail;
    }
    if ((err = kp_input_read(in, 0, b->owned, (size_t)extent)) != KPACK_SUCCESS)
      goto fail;
    err = parse_table(b->owned, (size_t)extent, extent, true, b, &inner, &need);
    if (err == KPACK_SUCCESS && need != 0)
      err = KPACK_ERROR_INVALID_FORMAT; /* the file changed underneath */
    if (err != KPACK_SUCCESS)
      goto fail;
  }
  b->info.extent = extent;
  b->source = *in;
  *bundle = b;
  return KPACK_SUCCESS;

fail:
  kpack_bundle_free(b);
  return err;
}

/* The table of a compressed bundle: its first bytes decompressed, more
 * until the table is whole. Version 1 is run to its end to find where it
 * stops, capturing the table on the way. */
static kpack_error_t list_ccob(const kp_input* in, struct kpack_bundle* b) {
  kpack_error_t err;
  ob_ccob c;
  uint8_t* head = NULL;
  uint64_t inner;
  size_t need;
  if ((err = read_ccob_header(in, &c)) != KPACK_SUCCESS)
    return err;
  size_t want = c.expected < 65536 ? (size_t)c.expected : 65536;
  for (;;) {
    uint8_t* p = realloc(head, want ? want : 1);
    if (p == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      break;
    }
    head = p;
    /* A stream shorter than declared still lists if its table is whole;
     * the entries past its end fail when read. */
    ob_take t = {
        .to = want, .dst = head, .to_end = !c.sized, .partial_ok = c.sized};
    if ((err = ccob_inflate(in, &c, &t)) != KPACK_SUCCESS)
      break;
    size_t got = t.produced < want ? (size_t)t.produced : want;
    err = parse_table(head, got, c.expected, false, b, &inner, &need);
    if (err != KPACK_SUCCESS)
      break;
    if (need != 0 && got < want) { /* the stream ended inside the table */
      err = KPACK_ERROR_DECOMPRESSION_FAILED;
      break;
    }
    if (need == 0) {
      set_compression(b, &c);
      b->info.bundle_size = c.expected;
      b->info.extent = ccob_extent(&c, &t);
      break;
    }
    size_t more = want < c.expected / 4 ? want * 4 : (size_t)c.expected;
    want = need > more ? need : more;
  }
  free(head);
  return err;
}

kpack_error_t ob_list(const kp_input* in, kpack_bundle_t** bundle) {
  kpack_error_t err;
  struct kpack_bundle* b = calloc(1, sizeof(*b));
  *bundle = NULL;
  if (b == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  if (is_ccob(in, &err)) {
    err = list_ccob(in, b);
  } else if (err == KPACK_SUCCESS) {
    err = read_table(in, b, &b->info.extent);
  }
  if (err != KPACK_SUCCESS) {
    kpack_bundle_free(b);
    return err;
  }
  b->source = *in;
  *bundle = b;
  return KPACK_SUCCESS;
}

kpack_error_t ob_read_entry(const kpack_bundle_t* b, size_t index, void* buf) {
  const kpack_bundle_entry_t* e = &b->entries[index];
  const kp_input* in = &b->source;
  uint64_t offset = b->offsets[index];
  if (e->size == 0)
    return KPACK_SUCCESS;
  if (e->data != NULL) {
    memcpy(buf, e->data, (size_t)e->size);
    return KPACK_SUCCESS;
  }
  if (b->info.compression == KPACK_BUNDLE_UNCOMPRESSED)
    return kp_input_read(in, offset, buf, (size_t)e->size);
  ob_take t = {.from = offset, .to = offset + e->size, .dst = buf};
  kpack_error_t err = ccob_inflate(in, &b->ccob, &t);
  if (err == KPACK_SUCCESS && t.produced < t.to)
    err = KPACK_ERROR_DECOMPRESSION_FAILED; /* the stream ended first */
  return err;
}

kpack_error_t ob_measure(const kp_input* in, uint64_t* extent) {
  kpack_error_t err;
  if (is_ccob(in, &err)) {
    ob_ccob c;
    if ((err = read_ccob_header(in, &c)) != KPACK_SUCCESS)
      return err;
    if (c.sized) { /* steps over without decompressing */
      *extent = c.header + c.payload;
      return KPACK_SUCCESS;
    }
    /* Version 1 records no size: run the stream to its end. */
    kpack_bundle_t* b;
    if ((err = ob_list(in, &b)) == KPACK_SUCCESS) {
      *extent = b->info.extent;
      kpack_bundle_free(b);
    }
    return err;
  }
  if (err != KPACK_SUCCESS)
    return err;
  return read_table(in, NULL, extent);
}

KPACK_API kpack_error_t kpack_bundle_parse(const void* data, size_t size,
                                           kpack_bundle_t** bundle) {
  kp_input in;
  if (bundle != NULL)
    *bundle = NULL;
  if (bundle == NULL || !kp_input_memory(data, size, &in))
    return KPACK_ERROR_INVALID_ARGUMENT;
  return ob_parse(&in, bundle);
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

KPACK_API kpack_error_t kpack_bundle_read_entry(const kpack_bundle_t* bundle,
                                                size_t index, void* buffer,
                                                size_t size) {
  if (bundle == NULL || buffer == NULL || index >= bundle->info.entry_count ||
      size < bundle->entries[index].size)
    return KPACK_ERROR_INVALID_ARGUMENT;
  return ob_read_entry(bundle, index, buffer);
}

KPACK_API void kpack_bundle_free(kpack_bundle_t* bundle) {
  if (bundle == NULL)
    return;
  free(bundle->entries);
  free(bundle->offsets);
  free(bundle->strings);
  free(bundle->owned);
  free(bundle);
}
