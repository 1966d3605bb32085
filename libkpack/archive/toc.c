/* SPDX-License-Identifier: MIT
 *
 * Parses the MessagePack TOC into the compact kp_toc (archive.h): names
 * copied once into one string table (arch and type names once per archive),
 * binaries sorted for binary search, kernels grouped per binary and sorted
 * by arch, in fixed-size entries. Structural errors are
 * MSGPACK_PARSE_FAILED; values that are well-typed but impossible
 * (duplicates, embedded NULs) are INVALID_FORMAT.
 */
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "common/grow.h"
#include "common/msgpack_reader.h"

/* Top-level values located in the first pass; the last duplicate wins. */
typedef struct toc_fields {
  mp_cursor format_version, group_name, family, arches, scheme, toc, blobs,
      zstd_offset, zstd_size, zstd_frame_sizes;
  bool has_format_version, has_group_name, has_family, has_arches, has_scheme,
      has_toc, has_blobs, has_zstd_offset, has_zstd_size, has_zstd_frame_sizes;
  kpack_error_t toc_err; /* from parsing "toc", reported after the header */
} toc_fields;

/* The last few names interned of one kind, tried before the hash. */
enum { MEMO_NAMES = 4 };
typedef struct name_memo {
  uint32_t offset[MEMO_NAMES];
  uint32_t len[MEMO_NAMES]; /* 0 (never interned from here): none yet */
  unsigned next;
} name_memo;

typedef struct toc_builder {
  kp_toc* toc;
  size_t strings_cap;
  size_t kernel_cap;
  size_t metadata_cap;
  size_t metadata_bytes_size;
  size_t metadata_bytes_cap;
  /* Interned names (arches, types): open addressing over 1 + offset. */
  uint32_t* names;
  size_t names_mask;
  size_t names_count;
  uint32_t hsaco; /* offset of "hsaco", the usual type; UINT32_MAX unset */
  /* The last arches and types interned: an archive's entries mostly
   * repeat them (one arch in a per-arch archive, the arches in the same
   * order for each binary, "hsaco" throughout). */
  name_memo arch_memo, type_memo;
} toc_builder;

static kpack_error_t from_mp(mp_status st) {
  return st == MP_OK ? KPACK_SUCCESS : KPACK_ERROR_MSGPACK_PARSE_FAILED;
}

/* Room for `need` elements of `size` bytes in *data (of *cap), doubling. */
static kpack_error_t reserve(void** data, size_t* cap, size_t need,
                             size_t size) {
  while (need > *cap) {
    void* p = kp_grow(*data, *cap, cap, size, 64);
    if (p == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    *data = p;
  }
  return KPACK_SUCCESS;
}

/* Appends (s, len) and a NUL to the string table; *offset is where. */
static kpack_error_t append_string(toc_builder* b, const char* s, size_t len,
                                   uint32_t* offset) {
  kp_toc* t = b->toc;
  if (len >= KP_TOC_MAX_STRINGS - t->strings_size)
    return KPACK_ERROR_OUT_OF_MEMORY;
  void* strings = t->strings;
  kpack_error_t err =
      reserve(&strings, &b->strings_cap, t->strings_size + len + 1, 1);
  t->strings = strings;
  if (err != KPACK_SUCCESS)
    return err;
  memcpy(t->strings + t->strings_size, s, len);
  t->strings[t->strings_size + len] = '\0';
  *offset = (uint32_t)t->strings_size;
  t->strings_size += len + 1;
  return KPACK_SUCCESS;
}

static size_t name_hash(const char* s, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return (size_t)(h ^ (h >> 29));
}

/* The offset of name (s, len) in the string table, appended on first use:
 * an install's archives name a handful of arches and types for thousands
 * of kernels. */
static void memo_note(name_memo* memo, uint32_t offset, size_t len) {
  memo->offset[memo->next] = offset;
  memo->len[memo->next] = (uint32_t)len;
  memo->next = (memo->next + 1) % MEMO_NAMES;
}

static kpack_error_t intern(toc_builder* b, const char* s, size_t len,
                            name_memo* memo, uint32_t* offset) {
  for (size_t m = 0; m < MEMO_NAMES; m++) {
    if (memo->len[m] == len && len > 0 &&
        memcmp(kp_toc_str(b->toc, memo->offset[m]), s, len) == 0) {
      *offset = memo->offset[m];
      return KPACK_SUCCESS;
    }
  }
  if ((b->names_count + 1) * 2 > b->names_mask + 1) {
    size_t cap = b->names_mask ? (b->names_mask + 1) * 2 : 64;
    uint32_t* names = calloc(cap, sizeof(*names));
    if (names == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; b->names != NULL && i <= b->names_mask; i++) {
      if (b->names[i] == 0)
        continue;
      const char* name = kp_toc_str(b->toc, b->names[i] - 1);
      size_t j = name_hash(name, strlen(name)) & (cap - 1);
      while (names[j] != 0)
        j = (j + 1) & (cap - 1);
      names[j] = b->names[i];
    }
    free(b->names);
    b->names = names;
    b->names_mask = cap - 1;
  }
  size_t i = name_hash(s, len) & b->names_mask;
  for (; b->names[i] != 0; i = (i + 1) & b->names_mask) {
    const char* name = kp_toc_str(b->toc, b->names[i] - 1);
    if (strncmp(name, s, len) == 0 && name[len] == '\0') {
      *offset = b->names[i] - 1;
      memo_note(memo, *offset, len);
      return KPACK_SUCCESS;
    }
  }
  kpack_error_t err = append_string(b, s, len, offset);
  if (err != KPACK_SUCCESS)
    return err;
  if (*offset == UINT32_MAX)
    return KPACK_ERROR_OUT_OF_MEMORY; /* 1 + offset must fit */
  b->names[i] = *offset + 1;
  b->names_count++;
  memo_note(memo, *offset, len);
  return KPACK_SUCCESS;
}

/* Reads a msgpack str as a name: embedded NULs would make the C name
 * ambiguous. Interned with `memo` (arches, types) or, when it is NULL,
 * appended (binary names, which are unique anyway). */
static kpack_error_t read_name(toc_builder* b, mp_cursor* c, name_memo* memo,
                               uint32_t* offset) {
  const char* s;
  uint32_t len;
  kpack_error_t err = from_mp(mp_read_str(c, &s, &len));
  if (err != KPACK_SUCCESS)
    return err;
  if (memchr(s, '\0', len) != NULL)
    return KPACK_ERROR_INVALID_FORMAT;
  return memo != NULL ? intern(b, s, len, memo, offset)
                      : append_string(b, s, len, offset);
}

/* An entry's "metadata": kept byte for byte when it is a map. Any other
 * value is skipped like an unknown key: ROCm's reader ignores the field, so
 * an archive it loads must load here too. */
static kpack_error_t read_metadata(toc_builder* b, mp_cursor* c, kp_kernel* k) {
  kp_toc* t = b->toc;
  mp_cursor value = *c;
  uint32_t pairs;
  bool is_map = mp_read_map(&value, &pairs) == MP_OK;
  const uint8_t* start = c->pos;
  kpack_error_t err = from_mp(mp_skip(c));
  if (err != KPACK_SUCCESS || !is_map)
    return err;
  size_t len = (size_t)(c->pos - start);
  if (t->metadata_count >= KP_TOC_MAX_KERNELS)
    return KPACK_ERROR_OUT_OF_MEMORY;
  void* refs = t->metadata;
  void* bytes = t->metadata_bytes;
  err = reserve(&refs, &b->metadata_cap, t->metadata_count + 1,
                sizeof(*t->metadata));
  t->metadata = refs;
  if (err == KPACK_SUCCESS)
    err = reserve(&bytes, &b->metadata_bytes_cap, b->metadata_bytes_size + len,
                  1);
  t->metadata_bytes = bytes;
  if (err != KPACK_SUCCESS)
    return err;
  memcpy(t->metadata_bytes + b->metadata_bytes_size, start, len);
  t->metadata[t->metadata_count] = (kp_metadata){b->metadata_bytes_size, len};
  b->metadata_bytes_size += len;
  /* A duplicate "metadata" key: the last one wins, the first stays unused. */
  k->metadata = (uint32_t)++t->metadata_count;
  return KPACK_SUCCESS;
}

static kpack_error_t read_uint(mp_cursor c, uint64_t* value) {
  return from_mp(mp_read_uint(&c, value));
}

static kpack_error_t parse_binaries(toc_builder* b, mp_cursor* c);
static void reset_binaries(toc_builder* b);

/* One pass over the top-level map: each field's value is located for
 * parsing in a fixed order afterwards, except "toc", by far the largest,
 * which is parsed where it stands (walking it twice cost a quarter of an
 * open). Its error is kept for kp_toc_parse to report in turn, so the
 * status does not depend on where the key sits; a "toc" that fails to
 * parse is skipped like any value, to find the fields after it. */
static kpack_error_t locate_fields(toc_builder* b, mp_cursor* c,
                                   toc_fields* f) {
  uint32_t n;
  kpack_error_t err = from_mp(mp_read_map(c, &n));
  for (uint32_t i = 0; err == KPACK_SUCCESS && i < n; i++) {
    const char* key;
    uint32_t len;
    err = from_mp(mp_read_str(c, &key, &len));
    if (err != KPACK_SUCCESS)
      break;
    mp_cursor value = *c;
    if (mp_str_eq(key, len, "toc")) {
      f->toc = value;
      f->has_toc = true;
      reset_binaries(b); /* the last duplicate wins */
      f->toc_err = parse_binaries(b, c);
      if (f->toc_err == KPACK_SUCCESS)
        continue;
      *c = value;
    }
#define KP_FIELD(name, field)      \
  if (mp_str_eq(key, len, name)) { \
    f->field = value;              \
    f->has_##field = true;         \
  } else
    KP_FIELD("format_version", format_version)
    KP_FIELD("group_name", group_name)
    KP_FIELD("gfx_arch_family", family)
    KP_FIELD("gfx_arches", arches)
    KP_FIELD("compression_scheme", scheme)
    KP_FIELD("blobs", blobs)
    KP_FIELD("zstd_offset", zstd_offset)
    KP_FIELD("zstd_size", zstd_size)
    KP_FIELD("zstd_frame_sizes", zstd_frame_sizes) { /* unknown: skipped */
    }
#undef KP_FIELD
    err = from_mp(mp_skip(c));
  }
  return err;
}

static kpack_error_t parse_entry(toc_builder* b, mp_cursor* c, kp_kernel* k) {
  uint32_t n;
  bool has_ordinal = false;
  kpack_error_t err = from_mp(mp_read_map(c, &n));
  for (uint32_t i = 0; err == KPACK_SUCCESS && i < n; i++) {
    const char* key;
    uint32_t len;
    err = from_mp(mp_read_str(c, &key, &len));
    if (err != KPACK_SUCCESS)
      break;
    if (mp_str_eq(key, len, "ordinal")) {
      uint64_t v;
      err = from_mp(mp_read_uint(c, &v));
      /* An ordinal beyond u32 can have no blob or frame. */
      if (err == KPACK_SUCCESS && v > UINT32_MAX)
        err = KPACK_ERROR_INVALID_FORMAT;
      k->ordinal = (uint32_t)v;
      has_ordinal = true;
    } else if (mp_str_eq(key, len, "original_size")) {
      err = from_mp(mp_read_uint(c, &k->size));
      k->has_size = 1;
    } else if (mp_str_eq(key, len, "type")) {
      uint32_t type;
      err = read_name(b, c, &b->type_memo, &type);
      k->type = type;
    } else if (mp_str_eq(key, len, "metadata")) {
      err = read_metadata(b, c, k);
    } else {
      err = from_mp(mp_skip(c));
    }
  }
  if (err == KPACK_SUCCESS && !has_ordinal)
    err = KPACK_ERROR_INVALID_FORMAT;
  return err;
}

static kpack_error_t push_kernel(toc_builder* b, kp_kernel** out) {
  kp_toc* t = b->toc;
  kpack_error_t err;
  if (t->kernel_count >= KP_TOC_MAX_KERNELS)
    return KPACK_ERROR_OUT_OF_MEMORY;
  if (b->hsaco == UINT32_MAX &&
      (err = intern(b, "hsaco", 5, &b->type_memo, &b->hsaco)) != KPACK_SUCCESS)
    return err;
  void* kernels = t->kernels;
  err = reserve(&kernels, &b->kernel_cap, t->kernel_count + 1,
                sizeof(*t->kernels));
  t->kernels = kernels;
  if (err != KPACK_SUCCESS)
    return err;
  *out = &t->kernels[t->kernel_count++];
  memset(*out, 0, sizeof(**out));
  (*out)->type = b->hsaco;
  return KPACK_SUCCESS;
}

static int compare_kernel_arch(const void* a, const void* b, void* toc) {
  return strcmp(kp_toc_str(toc, ((const kp_kernel*)a)->arch),
                kp_toc_str(toc, ((const kp_kernel*)b)->arch));
}

static int compare_binary_name(const void* a, const void* b, void* toc) {
  return strcmp(kp_toc_str(toc, ((const kp_binary*)a)->name),
                kp_toc_str(toc, ((const kp_binary*)b)->name));
}

/* qsort, skipped when the TOC already lists them in order (as this
 * project's writer does): opening 20,000 binaries then costs n compares,
 * not n log n. */
static void sort_unless_sorted(void* base, size_t n, size_t size,
                               int (*compare)(const void*, const void*, void*),
                               kp_toc* toc) {
  const char* p = base;
  for (size_t i = 1; i < n; i++) {
    if (compare(p + (i - 1) * size, p + i * size, toc) > 0) {
      qsort_r(base, n, size, compare, toc);
      return;
    }
  }
}

static void reset_binaries(toc_builder* b) {
  kp_toc* t = b->toc;
  free(t->binaries);
  free(t->kernels);
  free(t->metadata);
  free(t->metadata_bytes);
  t->binaries = NULL;
  t->kernels = NULL;
  t->metadata = NULL;
  t->metadata_bytes = NULL;
  t->binary_count = t->kernel_count = t->metadata_count = 0;
  b->kernel_cap = b->metadata_cap = 0;
  b->metadata_bytes_size = b->metadata_bytes_cap = 0;
}

static kpack_error_t parse_binaries(toc_builder* b, mp_cursor* c) {
  kp_toc* t = b->toc;
  uint32_t n;
  kpack_error_t err = from_mp(mp_read_map(c, &n));
  if (err != KPACK_SUCCESS)
    return err;
  t->binaries = calloc(n ? n : 1, sizeof(*t->binaries));
  if (t->binaries == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  /* A kernel per binary at least, and exactly that in per-arch archives:
   * sized so, the array is not regrown and trimmed, which would leave a
   * hole in the heap per archive. */
  if (n > 0 && t->kernels == NULL) {
    t->kernels = kp_grow(NULL, 0, &b->kernel_cap, sizeof(*t->kernels), n);
    if (t->kernels == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
  }
  for (uint32_t i = 0; i < n; i++) {
    kp_binary* bin = &t->binaries[t->binary_count];
    uint32_t arches;
    if ((err = read_name(b, c, NULL, &bin->name)) != KPACK_SUCCESS)
      return err;
    if ((err = from_mp(mp_read_map(c, &arches))) != KPACK_SUCCESS)
      return err;
    if (arches == 0)
      continue; /* only binaries with a kernel are listed */
    bin->first = (uint32_t)t->kernel_count;
    bin->count = arches;
    t->binary_count++;
    for (uint32_t j = 0; j < arches; j++) {
      kp_kernel* k;
      uint32_t arch;
      if ((err = push_kernel(b, &k)) != KPACK_SUCCESS)
        return err;
      if ((err = read_name(b, c, &b->arch_memo, &arch)) != KPACK_SUCCESS)
        return err;
      k->arch = arch;
      if ((err = parse_entry(b, c, k)) != KPACK_SUCCESS)
        return err;
    }
    kp_kernel* own = t->kernels + bin->first;
    sort_unless_sorted(own, bin->count, sizeof(*own), compare_kernel_arch, t);
    /* Interned: equal names have equal offsets. */
    for (size_t j = 1; j < bin->count; j++)
      if (own[j - 1].arch == own[j].arch)
        return KPACK_ERROR_INVALID_FORMAT;
  }
  sort_unless_sorted(t->binaries, t->binary_count, sizeof(*t->binaries),
                     compare_binary_name, t);
  for (size_t i = 1; i < t->binary_count; i++)
    if (strcmp(kp_toc_str(t, t->binaries[i - 1].name),
               kp_toc_str(t, t->binaries[i].name)) == 0)
      return KPACK_ERROR_INVALID_FORMAT;
  return KPACK_SUCCESS;
}

/* gfx_arches, as offsets for now: the string table may still move. */
static kpack_error_t parse_arches(toc_builder* b, mp_cursor c,
                                  uint32_t** offsets) {
  kp_toc* t = b->toc;
  uint32_t n;
  kpack_error_t err = from_mp(mp_read_array(&c, &n));
  if (err != KPACK_SUCCESS)
    return err;
  *offsets = calloc(n ? n : 1, sizeof(**offsets));
  if (*offsets == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (uint32_t i = 0; i < n && err == KPACK_SUCCESS; i++) {
    err = read_name(b, &c, &b->arch_memo, &(*offsets)[i]);
    t->arch_count += err == KPACK_SUCCESS;
  }
  return err;
}

static kpack_error_t parse_blobs(kp_toc* t, mp_cursor c) {
  uint32_t n;
  kpack_error_t err = from_mp(mp_read_array(&c, &n));
  if (err != KPACK_SUCCESS)
    return err;
  t->extents = calloc(n ? n : 1, sizeof(*t->extents));
  if (t->extents == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  t->extent_count = n;
  for (uint32_t i = 0; i < n && err == KPACK_SUCCESS; i++) {
    uint32_t fields;
    bool has_offset = false, has_size = false;
    err = from_mp(mp_read_map(&c, &fields));
    for (uint32_t j = 0; j < fields && err == KPACK_SUCCESS; j++) {
      const char* key;
      uint32_t len;
      err = from_mp(mp_read_str(&c, &key, &len));
      if (err != KPACK_SUCCESS)
        break;
      if (mp_str_eq(key, len, "offset")) {
        err = from_mp(mp_read_uint(&c, &t->extents[i].offset));
        has_offset = true;
      } else if (mp_str_eq(key, len, "size")) {
        err = from_mp(mp_read_uint(&c, &t->extents[i].size));
        has_size = true;
      } else {
        err = from_mp(mp_skip(&c));
      }
    }
    if (err == KPACK_SUCCESS && !(has_offset && has_size))
      err = KPACK_ERROR_INVALID_FORMAT;
  }
  return err;
}

static kpack_error_t parse_scheme(mp_cursor c, kpack_compression_scheme_t* s) {
  const char* str;
  uint32_t len;
  kpack_error_t err = from_mp(mp_read_str(&c, &str, &len));
  if (err != KPACK_SUCCESS)
    return err;
  if (mp_str_eq(str, len, "none"))
    *s = KPACK_COMPRESSION_NOOP;
  else if (mp_str_eq(str, len, "zstd-per-kernel"))
    *s = KPACK_COMPRESSION_ZSTD_PER_KERNEL;
  else
    return KPACK_ERROR_UNSUPPORTED_VERSION;
  return KPACK_SUCCESS;
}

/* The frame-size table, if it is a bin; any other type is ignored
 * (docs/format.md). Its shape is checked against the region by frame_table.c.
 */
static void find_frame_sizes(const toc_fields* f, const uint8_t** sizes,
                             size_t* len) {
  mp_cursor c = f->zstd_frame_sizes;
  uint32_t n;
  if (f->has_zstd_frame_sizes && mp_read_bin(&c, sizes, &n) == MP_OK) {
    *len = n;
  } else {
    *sizes = NULL;
    *len = 0;
  }
}

/* The arrays were grown by doubling: give back what is unused, now that
 * they are final (a failed shrink keeps the larger block). */
static void* shrink(void* data, size_t count, size_t size) {
  void* p = data != NULL && count > 0 ? realloc(data, count * size) : NULL;
  return p != NULL ? p : data;
}

/* Once the string table is final: names become pointers, arrays shrink. */
static kpack_error_t finish(toc_builder* b, const toc_fields* f, uint32_t group,
                            uint32_t family, const uint32_t* arches) {
  kp_toc* t = b->toc;
  t->strings = shrink(t->strings, t->strings_size, 1);
  t->kernels = shrink(t->kernels, t->kernel_count, sizeof(*t->kernels));
  t->binaries = shrink(t->binaries, t->binary_count, sizeof(*t->binaries));
  t->metadata = shrink(t->metadata, t->metadata_count, sizeof(*t->metadata));
  t->metadata_bytes = shrink(t->metadata_bytes, b->metadata_bytes_size, 1);
  if (f->has_group_name)
    t->group_name = kp_toc_str(t, group);
  if (f->has_family)
    t->family = kp_toc_str(t, family);
  if (t->arch_count > 0) {
    t->arches = calloc(t->arch_count, sizeof(*t->arches));
    if (t->arches == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < t->arch_count; i++)
      t->arches[i] = kp_toc_str(t, arches[i]);
  }
  t->names_by_address = true;
  for (size_t i = 1; i < t->binary_count && t->names_by_address; i++)
    t->names_by_address = t->binaries[i - 1].name < t->binaries[i].name;
  return KPACK_SUCCESS;
}

kpack_error_t kp_toc_parse(const uint8_t* data, size_t size, kp_toc* toc,
                           const uint8_t** frame_sizes,
                           size_t* frame_sizes_len) {
  toc_fields f;
  toc_builder b = {
      .toc = toc,
      .hsaco = UINT32_MAX,
  };
  mp_cursor c = mp_cursor_make(data, size);
  uint32_t group = 0, family = 0, *arches = NULL;
  kpack_error_t err;

  memset(toc, 0, sizeof(*toc));
  memset(&f, 0, sizeof(f));
  *frame_sizes = NULL;
  *frame_sizes_len = 0;
  toc->group_name = "";
  toc->family = "";
  toc->scheme = KPACK_COMPRESSION_NOOP;

  if ((err = locate_fields(&b, &c, &f)) != KPACK_SUCCESS)
    goto fail;
  if (f.has_format_version) {
    uint64_t v;
    if ((err = read_uint(f.format_version, &v)) != KPACK_SUCCESS)
      goto fail;
    if (v != KPACK_CURRENT_VERSION) {
      err = KPACK_ERROR_UNSUPPORTED_VERSION;
      goto fail;
    }
  }
  if (f.has_scheme && (err = parse_scheme(f.scheme, &toc->scheme)))
    goto fail;
  if (f.has_group_name && (err = read_name(&b, &f.group_name, NULL, &group)))
    goto fail;
  if (f.has_family && (err = read_name(&b, &f.family, NULL, &family)))
    goto fail;
  if (f.has_arches && (err = parse_arches(&b, f.arches, &arches)))
    goto fail;
  if (!f.has_toc) {
    err = KPACK_ERROR_INVALID_FORMAT;
    goto fail;
  }
  if ((err = f.toc_err))
    goto fail;

  if (toc->scheme == KPACK_COMPRESSION_NOOP) {
    if (f.has_blobs && (err = parse_blobs(toc, f.blobs)))
      goto fail;
  } else if (f.has_zstd_offset && f.has_zstd_size) {
    if ((err = read_uint(f.zstd_offset, &toc->region_offset)))
      goto fail;
    if ((err = read_uint(f.zstd_size, &toc->region_size)))
      goto fail;
    toc->has_region = true;
    find_frame_sizes(&f, frame_sizes, frame_sizes_len);
  } else if (toc->kernel_count > 0) {
    err = KPACK_ERROR_INVALID_FORMAT; /* kernels, but no frames to hold them */
    goto fail;
  }
  if ((err = finish(&b, &f, group, family, arches)))
    goto fail;
  free(arches);
  free(b.names);
  return KPACK_SUCCESS;

fail:
  free(arches);
  free(b.names);
  kp_toc_free(toc);
  return err;
}

void kp_toc_free(kp_toc* toc) {
  free(toc->strings);
  free(toc->arches);
  free(toc->binaries);
  free(toc->kernels);
  free(toc->metadata);
  free(toc->metadata_bytes);
  free(toc->extents);
  memset(toc, 0, sizeof(*toc));
}

/* Programs that list an archive pass its own strings back (the names
 * kpack_get_binary() and kpack_get_binary_arch() return): those are found
 * by address first, with no string read, which is most of the cost of
 * walking a large TOC. Any other string is found by its bytes. */
const kp_binary* kp_toc_find_binary(const kp_toc* toc, const char* name) {
  size_t lo = 0, hi = toc->binary_count;
  if (toc->names_by_address && name >= toc->strings &&
      name < toc->strings + toc->strings_size) {
    uint32_t p = (uint32_t)(name - toc->strings);
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      uint32_t at = toc->binaries[mid].name;
      if (p == at)
        return &toc->binaries[mid];
      if (p < at)
        hi = mid;
      else
        lo = mid + 1;
    }
    lo = 0;
    hi = toc->binary_count;
  }
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(name, kp_toc_str(toc, toc->binaries[mid].name));
    if (cmp == 0)
      return &toc->binaries[mid];
    if (cmp < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

const kp_kernel* kp_toc_find_kernel(const kp_toc* toc, const char* binary,
                                    const char* arch) {
  const kp_binary* bin = kp_toc_find_binary(toc, binary);
  if (bin == NULL)
    return NULL;
  const kp_kernel* k = toc->kernels + bin->first;
  /* A binary has a handful of arches: its own strings are checked first. */
  for (size_t i = 0; i < bin->count && i < 16; i++)
    if (kp_toc_str(toc, k[i].arch) == arch)
      return &k[i];
  size_t lo = 0, hi = bin->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(arch, kp_toc_str(toc, k[mid].arch));
    if (cmp == 0)
      return &k[mid];
    if (cmp < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}
