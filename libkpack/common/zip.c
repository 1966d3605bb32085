/* SPDX-License-Identifier: MIT
 *
 * Zip archives (PKWARE APPNOTE 6.3): the central directory read and checked
 * once at open, entries streamed on demand through zlib; and a writer whose
 * output depends only on the entries it is given. Every offset, size and
 * count read from the file is checked against the file before use.
 */
#include "common/zip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/byteorder.h"
#include "common/grow.h"
#include "common/input.h"
#include "common/pipe.h"

#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_CENTRAL_SIG 0x02014b50u
#define ZIP_END_SIG 0x06054b50u
#define ZIP64_END_SIG 0x06064b50u
#define ZIP64_LOCATOR_SIG 0x07064b50u
#define ZIP_LOCAL_SIZE 30
#define ZIP_CENTRAL_SIZE 46
#define ZIP_END_SIZE 22
#define ZIP64_END_SIZE 56
#define ZIP64_LOCATOR_SIZE 20
#define ZIP_MAX_COMMENT 65535
#define ZIP_CHUNK (64 * 1024)
/* 1980-01-01 00:00:00, the earliest date a zip entry can carry. */
#define ZIP_DOS_DATE 0x0021
#define ZIP_DOS_TIME 0
#define ZIP_MADE_BY_UNIX (3u << 8)

struct kp_zip {
  kp_input in;
  int fd; /* owned when opened from a path, else -1 */
  kp_zip_entry* entries;
  size_t count;
  uint64_t directory_offset; /* entries' data must end before it */
  char* names;               /* every name, NUL-separated */
};

static uint16_t zip_u16(const uint8_t* p) {
  return (uint16_t)kp_load_le(p, 2);
}

static uint32_t zip_u32(const uint8_t* p) {
  return (uint32_t)kp_load_le(p, 4);
}

/* ---- Reading ---------------------------------------------------------- */

static int zip_name_cmp(const void* a, const void* b) {
  const kp_zip_entry* const* x = a;
  const kp_zip_entry* const* y = b;
  return strcmp((*x)->name, (*y)->name);
}

/* INVALID_FORMAT if two entries share a name. */
static kpack_error_t zip_check_unique(const kp_zip* zip) {
  kpack_error_t err = KPACK_SUCCESS;
  if (zip->count < 2)
    return KPACK_SUCCESS;
  const kp_zip_entry** sorted = malloc(zip->count * sizeof(*sorted));
  if (sorted == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < zip->count; i++)
    sorted[i] = &zip->entries[i];
  qsort(sorted, zip->count, sizeof(*sorted), zip_name_cmp);
  for (size_t i = 1; i < zip->count; i++)
    if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
      err = KPACK_ERROR_INVALID_FORMAT;
  free(sorted);
  return err;
}

/* The ZIP64 extended information extra field of a central header: the
 * values whose 32-bit fields are all ones, in the order size, compressed
 * size, offset. */
static kpack_error_t zip_read_zip64(const uint8_t* extra, size_t len,
                                    kp_zip_entry* e, bool want_size,
                                    bool want_csize, bool want_offset) {
  while (len >= 4) {
    uint16_t id = zip_u16(extra);
    uint16_t n = zip_u16(extra + 2);
    if (n > len - 4)
      return KPACK_ERROR_INVALID_FORMAT;
    if (id == 0x0001) {
      const uint8_t* p = extra + 4;
      size_t left = n;
      uint64_t* fields[3] = {want_size ? &e->size : NULL,
                             want_csize ? &e->compressed_size : NULL,
                             want_offset ? &e->header_offset : NULL};
      for (unsigned i = 0; i < 3; i++) {
        if (fields[i] == NULL)
          continue;
        if (left < 8)
          return KPACK_ERROR_INVALID_FORMAT;
        *fields[i] = kp_load_le(p, 8);
        p += 8;
        left -= 8;
      }
      return KPACK_SUCCESS;
    }
    extra += 4 + n;
    len -= 4 + (size_t)n;
  }
  return want_size || want_csize || want_offset ? KPACK_ERROR_INVALID_FORMAT
                                                : KPACK_SUCCESS;
}

/* Finds the end record (the last one whose comment ends the file) and,
 * when its fields say so, the ZIP64 end record; *count, *dir_offset and
 * *dir_size describe the central directory, *end_offset where the records
 * after it begin. */
static kpack_error_t zip_find_end(const kp_input* in, uint64_t* count,
                                  uint64_t* dir_offset, uint64_t* dir_size,
                                  uint64_t* end_offset) {
  kp_scratch scratch = {0};
  const uint8_t* tail;
  kpack_error_t err = KPACK_ERROR_INVALID_FORMAT;
  if (in->size < ZIP_END_SIZE)
    return KPACK_ERROR_INVALID_FORMAT;
  uint64_t span = in->size < ZIP_END_SIZE + ZIP_MAX_COMMENT
                      ? in->size
                      : ZIP_END_SIZE + ZIP_MAX_COMMENT;
  uint64_t base = in->size - span;
  err = kp_input_view(in, base, (size_t)span, &scratch, &tail);
  if (err != KPACK_SUCCESS)
    goto done;
  err = KPACK_ERROR_INVALID_FORMAT;
  size_t at = (size_t)span - ZIP_END_SIZE;
  for (;; at--) {
    if (zip_u32(tail + at) == ZIP_END_SIG &&
        zip_u16(tail + at + 20) == span - at - ZIP_END_SIZE)
      break;
    if (at == 0)
      goto done;
  }
  const uint8_t* end = tail + at;
  uint64_t end_pos = base + at;
  if (zip_u16(end + 4) != 0 || zip_u16(end + 6) != 0 ||
      zip_u16(end + 8) != zip_u16(end + 10))
    goto done; /* several disks */
  *count = zip_u16(end + 10);
  *dir_size = zip_u32(end + 12);
  *dir_offset = zip_u32(end + 16);
  *end_offset = end_pos;
  if (*count == 0xffff || *dir_size == 0xffffffffu ||
      *dir_offset == 0xffffffffu) {
    uint8_t loc[ZIP64_LOCATOR_SIZE], rec[ZIP64_END_SIZE];
    if (end_pos < ZIP64_LOCATOR_SIZE)
      goto done;
    err = kp_input_read(in, end_pos - ZIP64_LOCATOR_SIZE, loc, sizeof(loc));
    if (err != KPACK_SUCCESS)
      goto done;
    err = KPACK_ERROR_INVALID_FORMAT;
    uint64_t rec_pos = kp_load_le(loc + 8, 8);
    if (zip_u32(loc) != ZIP64_LOCATOR_SIG || zip_u32(loc + 4) != 0 ||
        zip_u32(loc + 16) > 1 || rec_pos > end_pos - ZIP64_LOCATOR_SIZE ||
        end_pos - ZIP64_LOCATOR_SIZE - rec_pos < ZIP64_END_SIZE)
      goto done;
    err = kp_input_read(in, rec_pos, rec, sizeof(rec));
    if (err != KPACK_SUCCESS)
      goto done;
    err = KPACK_ERROR_INVALID_FORMAT;
    if (zip_u32(rec) != ZIP64_END_SIG || zip_u32(rec + 16) != 0 ||
        zip_u32(rec + 20) != 0 ||
        kp_load_le(rec + 24, 8) != kp_load_le(rec + 32, 8))
      goto done;
    *count = kp_load_le(rec + 32, 8);
    *dir_size = kp_load_le(rec + 40, 8);
    *dir_offset = kp_load_le(rec + 48, 8);
    *end_offset = rec_pos;
  }
  if (*dir_offset > *end_offset || *dir_size > *end_offset - *dir_offset ||
      *count > *dir_size / ZIP_CENTRAL_SIZE)
    goto done;
  err = KPACK_SUCCESS;
done:
  kp_scratch_free(&scratch);
  return err;
}

/* Parses the central directory of zip->in into zip->entries. */
static kpack_error_t zip_parse(kp_zip* zip) {
  uint64_t count, dir_offset, dir_size, end_offset;
  kp_scratch scratch = {0};
  const uint8_t* dir;
  size_t names_used = 0;
  kpack_error_t err =
      zip_find_end(&zip->in, &count, &dir_offset, &dir_size, &end_offset);
  if (err != KPACK_SUCCESS)
    return err;
  if (dir_size > SIZE_MAX)
    return KPACK_ERROR_OUT_OF_MEMORY;
  err = kp_input_view(&zip->in, dir_offset, (size_t)dir_size, &scratch, &dir);
  if (err != KPACK_SUCCESS)
    goto done;
  err = KPACK_ERROR_OUT_OF_MEMORY;
  /* count <= dir_size / 46: both allocations are bounded by the file. */
  zip->entries = calloc(count ? (size_t)count : 1, sizeof(*zip->entries));
  zip->names = malloc((size_t)dir_size + 1);
  if (zip->entries == NULL || zip->names == NULL)
    goto done;
  zip->directory_offset = dir_offset;
  size_t at = 0;
  for (uint64_t i = 0; i < count; i++) {
    err = KPACK_ERROR_INVALID_FORMAT;
    if (dir_size - at < ZIP_CENTRAL_SIZE)
      goto done;
    const uint8_t* h = dir + at;
    if (zip_u32(h) != ZIP_CENTRAL_SIG)
      goto done;
    uint16_t made_by = zip_u16(h + 4), flags = zip_u16(h + 8);
    uint16_t name_len = zip_u16(h + 28), extra_len = zip_u16(h + 30);
    uint16_t comment_len = zip_u16(h + 32);
    size_t record =
        (size_t)ZIP_CENTRAL_SIZE + name_len + extra_len + comment_len;
    if (record > dir_size - at || name_len == 0 || zip_u16(h + 34) != 0 ||
        (flags & 0x0001) != 0 || memchr(h + 46, 0, name_len) != NULL)
      goto done;
    kp_zip_entry* e = &zip->entries[i];
    e->method = zip_u16(h + 10);
    e->crc32 = zip_u32(h + 16);
    e->compressed_size = zip_u32(h + 20);
    e->size = zip_u32(h + 24);
    e->header_offset = zip_u32(h + 42);
    e->mode = (made_by >> 8) == 3 ? zip_u32(h + 38) >> 16 : 0;
    err = zip_read_zip64(
        h + 46 + name_len, extra_len, e, e->size == 0xffffffffu,
        e->compressed_size == 0xffffffffu, e->header_offset == 0xffffffffu);
    if (err != KPACK_SUCCESS)
      goto done;
    if (e->method != KP_ZIP_STORED && e->method != KP_ZIP_DEFLATED) {
      err = KPACK_ERROR_UNSUPPORTED_VERSION;
      goto done;
    }
    err = KPACK_ERROR_INVALID_FORMAT;
    if (e->header_offset > dir_offset ||
        dir_offset - e->header_offset < ZIP_LOCAL_SIZE ||
        (e->method == KP_ZIP_STORED && e->size != e->compressed_size))
      goto done;
    memcpy(zip->names + names_used, h + 46, name_len);
    e->name = zip->names + names_used;
    names_used += name_len;
    zip->names[names_used++] = '\0';
    at += record;
  }
  zip->count = (size_t)count;
  err = zip_check_unique(zip);
done:
  kp_scratch_free(&scratch);
  return err;
}

static kpack_error_t zip_finish_open(kp_zip* zip, kp_zip** out) {
  kpack_error_t err = zip_parse(zip);
  if (err != KPACK_SUCCESS) {
    kp_zip_close(zip);
    return err;
  }
  *out = zip;
  return KPACK_SUCCESS;
}

kpack_error_t kp_zip_open(const char* path, kp_zip** out) {
  if (out != NULL)
    *out = NULL;
  if (path == NULL || out == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kp_zip* zip = calloc(1, sizeof(*zip));
  if (zip == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = kp_input_open(path, &zip->in);
  if (err != KPACK_SUCCESS) {
    free(zip);
    return err;
  }
  zip->fd = zip->in.fd;
  return zip_finish_open(zip, out);
}

kpack_error_t kp_zip_open_memory(const void* data, size_t size, kp_zip** out) {
  if (out != NULL)
    *out = NULL;
  if (data == NULL || out == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kp_zip* zip = calloc(1, sizeof(*zip));
  if (zip == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kp_input_memory(data, size, &zip->in);
  zip->fd = -1;
  return zip_finish_open(zip, out);
}

size_t kp_zip_count(const kp_zip* zip) {
  return zip ? zip->count : 0;
}

const kp_zip_entry* kp_zip_entry_at(const kp_zip* zip, size_t index) {
  return zip != NULL && index < zip->count ? &zip->entries[index] : NULL;
}

size_t kp_zip_find(const kp_zip* zip, const char* name) {
  for (size_t i = 0; zip != NULL && name != NULL && i < zip->count; i++)
    if (strcmp(zip->entries[i].name, name) == 0)
      return i;
  return SIZE_MAX;
}

/* Where entry e's data starts, from its local header. */
static kpack_error_t zip_data_offset(const kp_zip* zip, const kp_zip_entry* e,
                                     uint64_t* offset) {
  uint8_t h[ZIP_LOCAL_SIZE];
  kpack_error_t err = kp_input_read(&zip->in, e->header_offset, h, sizeof(h));
  if (err != KPACK_SUCCESS)
    return err;
  if (zip_u32(h) != ZIP_LOCAL_SIG)
    return KPACK_ERROR_INVALID_FORMAT;
  uint64_t start =
      e->header_offset + ZIP_LOCAL_SIZE + zip_u16(h + 26) + zip_u16(h + 28);
  if (start > zip->directory_offset ||
      e->compressed_size > zip->directory_offset - start)
    return KPACK_ERROR_INVALID_FORMAT;
  *offset = start;
  return KPACK_SUCCESS;
}

kpack_error_t kp_zip_read(kp_zip* zip, size_t index, kp_zip_sink_fn sink,
                          void* user) {
  z_stream zs;
  bool inflating = false;
  uint8_t *in_buf = NULL, *out_buf = NULL;
  uint64_t offset, produced = 0;
  uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
  kpack_error_t err;
  if (zip == NULL || sink == NULL || index >= zip->count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_zip_entry* e = &zip->entries[index];
  err = zip_data_offset(zip, e, &offset);
  if (err != KPACK_SUCCESS)
    return err;
  in_buf = malloc(ZIP_CHUNK);
  out_buf = malloc(ZIP_CHUNK);
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if (in_buf == NULL || out_buf == NULL)
    goto done;
  if (e->method == KP_ZIP_DEFLATED) {
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
      goto done;
    inflating = true;
  }
  uint64_t left = e->compressed_size;
  bool ended = e->method == KP_ZIP_STORED;
  while (left > 0) {
    size_t n = left < ZIP_CHUNK ? (size_t)left : ZIP_CHUNK;
    err = kp_input_read(&zip->in, offset, in_buf, n);
    if (err != KPACK_SUCCESS)
      goto done;
    offset += n;
    left -= n;
    if (!inflating) {
      crc = (uint32_t)crc32(crc, in_buf, (uInt)n);
      produced += n;
      err = sink(user, in_buf, n);
      if (err != KPACK_SUCCESS)
        goto done;
      continue;
    }
    err = KPACK_ERROR_DECOMPRESSION_FAILED;
    if (ended)
      goto done; /* bytes after the end of the stream */
    zs.next_in = in_buf;
    zs.avail_in = (uInt)n;
    /* Until this input is used up and inflate has nothing more to give
     * (it may hold output back when the buffer fills). */
    do {
      zs.next_out = out_buf;
      zs.avail_out = ZIP_CHUNK;
      int rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_BUF_ERROR && zs.avail_in == 0)
        rc = Z_OK; /* wants the next piece */
      if (rc != Z_OK && rc != Z_STREAM_END) {
        err = rc == Z_MEM_ERROR ? KPACK_ERROR_OUT_OF_MEMORY
                                : KPACK_ERROR_DECOMPRESSION_FAILED;
        goto done;
      }
      size_t out = ZIP_CHUNK - zs.avail_out;
      if (out > e->size - produced)
        goto done; /* more than the directory says */
      crc = (uint32_t)crc32(crc, out_buf, (uInt)out);
      produced += out;
      if (out > 0) {
        err = sink(user, out_buf, out);
        if (err != KPACK_SUCCESS)
          goto done;
        err = KPACK_ERROR_DECOMPRESSION_FAILED;
      }
      ended = rc == Z_STREAM_END;
    } while (!ended && (zs.avail_in > 0 || zs.avail_out == 0));
    if (ended && zs.avail_in > 0)
      goto done; /* bytes after the end of the stream */
  }
  err = KPACK_ERROR_DECOMPRESSION_FAILED;
  if (!ended || produced != e->size || crc != e->crc32)
    goto done;
  err = KPACK_SUCCESS;
done:
  if (inflating)
    inflateEnd(&zs);
  free(in_buf);
  free(out_buf);
  return err;
}

typedef struct zip_buffer {
  char* data;
  size_t size;
} zip_buffer;

static kpack_error_t zip_append(void* user, const void* data, size_t size) {
  zip_buffer* b = user;
  memcpy(b->data + b->size, data, size); /* size checked by kp_zip_read */
  b->size += size;
  return KPACK_SUCCESS;
}

kpack_error_t kp_zip_read_alloc(kp_zip* zip, size_t index, size_t max_size,
                                char** data, size_t* size) {
  if (data != NULL)
    *data = NULL;
  if (zip == NULL || data == NULL || size == NULL || index >= zip->count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  uint64_t n = zip->entries[index].size;
  if (n > max_size || n >= SIZE_MAX)
    return KPACK_ERROR_INVALID_FORMAT;
  zip_buffer b = {malloc((size_t)n + 1), 0};
  if (b.data == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err = kp_zip_read(zip, index, zip_append, &b);
  if (err != KPACK_SUCCESS) {
    free(b.data);
    return err;
  }
  b.data[b.size] = '\0';
  *data = b.data;
  *size = b.size;
  return KPACK_SUCCESS;
}

void kp_zip_close(kp_zip* zip) {
  if (zip == NULL)
    return;
  if (zip->fd >= 0)
    close(zip->fd);
  free(zip->entries);
  free(zip->names);
  free(zip);
}

/* ---- Writing ---------------------------------------------------------- */

typedef struct zip_written {
  char* name;
  uint32_t mode, crc32;
  uint16_t method;
  uint64_t compressed_size, size, header_offset;
} zip_written;

struct kp_zip_writer {
  int fd;
  uint64_t offset; /* where the next byte goes */
  zip_written* entries;
  size_t count, cap;
  kpack_error_t failed; /* the first failure; later calls return it */
};

kpack_error_t kp_zip_writer_create(int fd, kp_zip_writer** writer) {
  if (writer != NULL)
    *writer = NULL;
  if (writer == NULL || fd < 0)
    return KPACK_ERROR_INVALID_ARGUMENT;
  kp_zip_writer* w = calloc(1, sizeof(*w));
  if (w == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->fd = fd;
  *writer = w;
  return KPACK_SUCCESS;
}

static kpack_error_t zip_emit(kp_zip_writer* w, const void* data, size_t n) {
  kpack_error_t err = kp_pwrite_all(w->fd, data, n, w->offset);
  if (err == KPACK_SUCCESS)
    w->offset += n;
  return err;
}

static bool zip_name_is_ascii(const char* name) {
  for (; *name; name++)
    if ((unsigned char)*name >= 0x80)
      return false;
  return true;
}

/* A local header: sizes of 0xffffffff and a ZIP64 field with both sizes
 * when `zip64`, so that the header keeps its length when it is rewritten
 * with the real sizes. */
static size_t zip_local_header(uint8_t* h, const zip_written* e, bool zip64) {
  size_t name_len = strlen(e->name);
  kp_store_le(h, ZIP_LOCAL_SIG, 4);
  kp_store_le(h + 4, zip64 ? 45 : 20, 2);
  kp_store_le(h + 6, zip_name_is_ascii(e->name) ? 0 : 0x0800, 2);
  kp_store_le(h + 8, e->method, 2);
  kp_store_le(h + 10, ZIP_DOS_TIME, 2);
  kp_store_le(h + 12, ZIP_DOS_DATE, 2);
  kp_store_le(h + 14, e->crc32, 4);
  kp_store_le(h + 18, zip64 ? 0xffffffffu : (uint32_t)e->compressed_size, 4);
  kp_store_le(h + 22, zip64 ? 0xffffffffu : (uint32_t)e->size, 4);
  kp_store_le(h + 26, (uint16_t)name_len, 2);
  kp_store_le(h + 28, zip64 ? 20 : 0, 2);
  memcpy(h + 30, e->name, name_len);
  if (!zip64)
    return 30 + name_len;
  uint8_t* x = h + 30 + name_len;
  kp_store_le(x, 0x0001, 2);
  kp_store_le(x + 2, 16, 2);
  kp_store_le(x + 4, e->size, 8);
  kp_store_le(x + 12, e->compressed_size, 8);
  return 30 + name_len + 20;
}

/* Reads the next piece of an entry's input. */
static kpack_error_t zip_input(int fd, const uint8_t* data, uint64_t at,
                               uint8_t* buf, size_t n, const uint8_t** piece) {
  if (fd < 0) {
    *piece = n > 0 ? data + at : buf;
    return KPACK_SUCCESS;
  }
  *piece = buf;
  return kp_pread_all(fd, buf, n, at);
}

/* What the pipe of a large entry does: hashes what goes in and, stored,
 * writes it out. */
typedef struct zip_piece_sink {
  kp_zip_writer* w;
  kp_sha256_ctx* digest;
} zip_piece_sink;

static kpack_error_t zip_hash_piece(void* user, const void* data, size_t n) {
  zip_piece_sink* s = user;
  kp_sha256_update(s->digest, data, n);
  return KPACK_SUCCESS;
}

static kpack_error_t zip_hash_emit_piece(void* user, const void* data,
                                         size_t n) {
  zip_piece_sink* s = user;
  kp_sha256_update(s->digest, data, n);
  return zip_emit(s->w, data, n);
}

kpack_error_t kp_zip_writer_add(kp_zip_writer* w, const char* name,
                                uint32_t mode, int fd, const void* data,
                                uint64_t size, int level,
                                uint8_t sha256[KP_SHA256_SIZE]) {
  uint8_t* header = NULL;
  uint8_t *in_buf = NULL, *out_buf = NULL;
  z_stream zs;
  kp_sha256_ctx digest;
  kp_pipe* pipe = NULL;
  bool deflating = false;
  kpack_error_t err;
  if (w == NULL || name == NULL || name[0] == '\0' || strlen(name) > 0xffff ||
      (fd < 0 && data == NULL && size > 0) || level < 0 || level > 9)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (w->failed != KPACK_SUCCESS)
    return w->failed;
  zip_written* grown =
      kp_grow(w->entries, w->count, &w->cap, sizeof(*w->entries), 64);
  if (grown == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->entries = grown;
  zip_written* e = &w->entries[w->count];
  memset(e, 0, sizeof(*e));
  e->name = strdup(name);
  header = malloc(30 + strlen(name) + 20);
  in_buf = malloc(ZIP_CHUNK);
  out_buf = malloc(ZIP_CHUNK);
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if (e->name == NULL || header == NULL || in_buf == NULL || out_buf == NULL)
    goto fail;
  e->mode = mode & 07777;
  e->method = level > 0 ? KP_ZIP_DEFLATED : KP_ZIP_STORED;
  e->size = size;
  e->header_offset = w->offset;
  e->crc32 = (uint32_t)crc32(0L, Z_NULL, 0);
  /* Deflate may grow incompressible input a little: ZIP64 well before the
   * 32-bit limits. */
  bool zip64 = size >= 0xf0000000u;
  size_t header_len = zip_local_header(header, e, zip64);
  err = zip_emit(w, header, header_len);
  if (err != KPACK_SUCCESS)
    goto fail;
  if (level > 0) {
    memset(&zs, 0, sizeof(zs));
    err = KPACK_ERROR_OUT_OF_MEMORY;
    if (deflateInit2(&zs, level, Z_DEFLATED, -MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
      goto fail;
    deflating = true;
  }
  kp_sha256_init(&digest);
  /* A large entry is hashed (and, stored, written) on a second thread
   * while this one reads, sums and deflates: until the pipe is finished,
   * the digest (and, stored, w->offset) are the pipe's. */
  zip_piece_sink sink = {.w = w, .digest = &digest};
  if (size >= KP_PIPE_MIN_SIZE)
    pipe = kp_pipe_start();
  uint64_t at = 0;
  do {
    size_t n = size - at < ZIP_CHUNK ? (size_t)(size - at) : ZIP_CHUNK;
    const uint8_t* piece = in_buf;
    err = zip_input(fd, data, at, in_buf, n, &piece);
    if (err != KPACK_SUCCESS)
      goto fail;
    at += n;
    e->crc32 = (uint32_t)crc32(e->crc32, piece, (uInt)n);
    if (!deflating) {
      err = kp_pipe_call(pipe, zip_hash_emit_piece, &sink, piece, n);
      if (err != KPACK_SUCCESS)
        goto fail;
      e->compressed_size += n;
      continue;
    }
    err = kp_pipe_call(pipe, zip_hash_piece, &sink, piece, n);
    if (err != KPACK_SUCCESS)
      goto fail;
    zs.next_in = (Bytef*)piece;
    zs.avail_in = (uInt)n;
    int flush = at == size ? Z_FINISH : Z_NO_FLUSH;
    int rc;
    do {
      zs.next_out = out_buf;
      zs.avail_out = ZIP_CHUNK;
      rc = deflate(&zs, flush);
      size_t out = ZIP_CHUNK - zs.avail_out;
      err = zip_emit(w, out_buf, out);
      if (err != KPACK_SUCCESS)
        goto fail;
      e->compressed_size += out;
    } while (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  } while (at < size);
  err = kp_pipe_finish(pipe);
  pipe = NULL;
  if (err != KPACK_SUCCESS)
    goto fail;
  /* The real CRC and sizes, in a header of the same length. */
  zip_local_header(header, e, zip64);
  err = kp_pwrite_all(w->fd, header, header_len, e->header_offset);
  if (err != KPACK_SUCCESS)
    goto fail;
  if (!zip64 && (e->compressed_size >= 0xffffffffu)) {
    err = KPACK_ERROR_IO_ERROR; /* cannot happen below 0xf0000000 bytes */
    goto fail;
  }
  if (sha256 != NULL)
    kp_sha256_final(&digest, sha256);
  w->count++;
  err = KPACK_SUCCESS;
  goto done;
fail:
  if (pipe != NULL) {
    /* Its error, if any, is err or came after it: errno stays err's. */
    int saved = errno;
    kp_pipe_finish(pipe);
    errno = saved;
  }
  free(e->name);
  w->failed = err;
done:
  if (deflating)
    deflateEnd(&zs);
  free(header);
  free(in_buf);
  free(out_buf);
  return err;
}

kpack_error_t kp_zip_writer_finish(kp_zip_writer* w) {
  uint8_t* h = NULL;
  kpack_error_t err;
  if (w == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (w->failed != KPACK_SUCCESS)
    return w->failed;
  uint64_t dir_offset = w->offset;
  h = malloc(ZIP_CENTRAL_SIZE + 0xffff + 28);
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if (h == NULL)
    goto done;
  for (size_t i = 0; i < w->count; i++) {
    const zip_written* e = &w->entries[i];
    size_t name_len = strlen(e->name);
    bool big_size = e->size >= 0xffffffffu || e->compressed_size >= 0xffffffffu;
    bool big_offset = e->header_offset >= 0xffffffffu;
    /* The local header used ZIP64 for these sizes; say so here too. */
    bool zip64_sizes = big_size || e->size >= 0xf0000000u;
    uint8_t* x = h + ZIP_CENTRAL_SIZE + name_len;
    size_t extra = 0;
    if (zip64_sizes) {
      kp_store_le(x + 4 + extra, e->size, 8);
      kp_store_le(x + 4 + extra + 8, e->compressed_size, 8);
      extra += 16;
    }
    if (big_offset) {
      kp_store_le(x + 4 + extra, e->header_offset, 8);
      extra += 8;
    }
    if (extra > 0) {
      kp_store_le(x, 0x0001, 2);
      kp_store_le(x + 2, (uint16_t)extra, 2);
      extra += 4;
    }
    kp_store_le(h, ZIP_CENTRAL_SIG, 4);
    kp_store_le(h + 4, (uint16_t)(ZIP_MADE_BY_UNIX | 45), 2);
    kp_store_le(h + 6, extra > 0 ? 45 : 20, 2);
    kp_store_le(h + 8, zip_name_is_ascii(e->name) ? 0 : 0x0800, 2);
    kp_store_le(h + 10, e->method, 2);
    kp_store_le(h + 12, ZIP_DOS_TIME, 2);
    kp_store_le(h + 14, ZIP_DOS_DATE, 2);
    kp_store_le(h + 16, e->crc32, 4);
    kp_store_le(h + 20,
                zip64_sizes ? 0xffffffffu : (uint32_t)e->compressed_size, 4);
    kp_store_le(h + 24, zip64_sizes ? 0xffffffffu : (uint32_t)e->size, 4);
    kp_store_le(h + 28, (uint16_t)name_len, 2);
    kp_store_le(h + 30, (uint16_t)extra, 2);
    kp_store_le(h + 32, 0, 2);
    kp_store_le(h + 34, 0, 2);
    kp_store_le(h + 36, 0, 2);
    kp_store_le(h + 38, (uint32_t)(S_IFREG | e->mode) << 16, 4);
    kp_store_le(h + 42, big_offset ? 0xffffffffu : (uint32_t)e->header_offset,
                4);
    memcpy(h + ZIP_CENTRAL_SIZE, e->name, name_len);
    err = zip_emit(w, h, ZIP_CENTRAL_SIZE + name_len + extra);
    if (err != KPACK_SUCCESS)
      goto done;
  }
  uint64_t dir_size = w->offset - dir_offset;
  bool zip64 = w->count >= 0xffff || dir_offset >= 0xffffffffu ||
               dir_size >= 0xffffffffu;
  if (zip64) {
    uint8_t rec[ZIP64_END_SIZE + ZIP64_LOCATOR_SIZE];
    uint64_t rec_pos = w->offset;
    kp_store_le(rec, ZIP64_END_SIG, 4);
    kp_store_le(rec + 4, ZIP64_END_SIZE - 12, 8);
    kp_store_le(rec + 12, (uint16_t)(ZIP_MADE_BY_UNIX | 45), 2);
    kp_store_le(rec + 14, 45, 2);
    kp_store_le(rec + 16, 0, 4);
    kp_store_le(rec + 20, 0, 4);
    kp_store_le(rec + 24, w->count, 8);
    kp_store_le(rec + 32, w->count, 8);
    kp_store_le(rec + 40, dir_size, 8);
    kp_store_le(rec + 48, dir_offset, 8);
    uint8_t* loc = rec + ZIP64_END_SIZE;
    kp_store_le(loc, ZIP64_LOCATOR_SIG, 4);
    kp_store_le(loc + 4, 0, 4);
    kp_store_le(loc + 8, rec_pos, 8);
    kp_store_le(loc + 16, 1, 4);
    err = zip_emit(w, rec, sizeof(rec));
    if (err != KPACK_SUCCESS)
      goto done;
  }
  uint8_t end[ZIP_END_SIZE];
  uint16_t count16 = zip64 ? 0xffff : (uint16_t)w->count;
  kp_store_le(end, ZIP_END_SIG, 4);
  kp_store_le(end + 4, 0, 2);
  kp_store_le(end + 6, 0, 2);
  kp_store_le(end + 8, count16, 2);
  kp_store_le(end + 10, count16, 2);
  kp_store_le(end + 12, zip64 ? 0xffffffffu : (uint32_t)dir_size, 4);
  kp_store_le(end + 16, zip64 ? 0xffffffffu : (uint32_t)dir_offset, 4);
  kp_store_le(end + 20, 0, 2);
  err = zip_emit(w, end, sizeof(end));
done:
  if (err != KPACK_SUCCESS)
    w->failed = err;
  free(h);
  return err;
}

void kp_zip_writer_free(kp_zip_writer* w) {
  if (w == NULL)
    return;
  for (size_t i = 0; i < w->count; i++)
    free(w->entries[i].name);
  free(w->entries);
  free(w);
}
