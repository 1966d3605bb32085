/* SPDX-License-Identifier: MIT
 *
 * Python wheels: file names, METADATA, WHEEL and RECORD, and the two moves
 * a wheel split makes, unpacking a wheel into a directory (checked against
 * its RECORD) and packing a directory into a wheel (deterministically).
 * The zip container is common/zip.c's.
 */
#include "producer/wheel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/input.h"
#include "common/pipe.h"
#include "common/sha256.h"
#include "common/zip.h"

#define WHEEL_MAX_METADATA (16u << 20) /* METADATA, WHEEL */
#define WHEEL_MAX_RECORD (256u << 20)
/* "sha256=" and 43 characters of unpadded base64url. */
#define WHEEL_HASH_SIZE (7 + 43 + 1)

/* ---- Text helpers -------------------------------------------------------- */

/* A growing string. `failed` is set once an append runs out of memory. */
typedef struct wheel_text {
  char* data;
  size_t size, cap;
  bool failed;
} wheel_text;

static void text_put(wheel_text* t, const char* s, size_t n) {
  if (t->failed)
    return;
  if (n >= t->cap - t->size || t->data == NULL) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap - t->size <= n) {
      if (cap > SIZE_MAX / 2) {
        t->failed = true;
        return;
      }
      cap *= 2;
    }
    char* grown = realloc(t->data, cap);
    if (grown == NULL) {
      t->failed = true;
      return;
    }
    t->data = grown;
    t->cap = cap;
  }
  memcpy(t->data + t->size, s, n);
  t->size += n;
  t->data[t->size] = '\0';
}

static void text_str(wheel_text* t, const char* s) {
  text_put(t, s, strlen(s));
}

static char* wheel_strndup(const char* s, size_t n) {
  char* d = malloc(n + 1);
  if (d != NULL) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

static char* wheel_join(const char* a, const char* sep, const char* b) {
  size_t na = strlen(a), ns = strlen(sep), nb = strlen(b);
  char* s = malloc(na + ns + nb + 1);
  if (s != NULL) {
    memcpy(s, a, na);
    memcpy(s + na, sep, ns);
    memcpy(s + na + ns, b, nb + 1);
  }
  return s;
}

static bool wheel_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* ---- File names ---------------------------------------------------------- */

static bool wheel_part_ok(const char* s, size_t n) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!wheel_ascii_alnum(s[i]) && strchr("._+!", s[i]) == NULL)
      return false;
  return true;
}

void kp_wheel_name_free(kp_wheel_name* name) {
  if (name == NULL)
    return;
  free(name->distribution);
  free(name->version);
  free(name->build);
  free(name->tags);
  memset(name, 0, sizeof(*name));
}

kpack_error_t kp_wheel_name_parse(const char* file_name, kp_wheel_name* name) {
  const char* parts[6];
  size_t lens[6], n = 0;
  if (name != NULL)
    memset(name, 0, sizeof(*name));
  if (file_name == NULL || name == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const char* base = strrchr(file_name, '/');
  base = base ? base + 1 : file_name;
  size_t len = strlen(base);
  if (len < 4 || strcmp(base + len - 4, ".whl") != 0)
    return KPACK_ERROR_INVALID_FORMAT;
  len -= 4;
  for (size_t start = 0, i = 0; i <= len; i++) {
    if (i < len && base[i] != '-')
      continue;
    if (n == 6)
      return KPACK_ERROR_INVALID_FORMAT;
    parts[n] = base + start;
    lens[n++] = i - start;
    start = i + 1;
  }
  if (n < 5)
    return KPACK_ERROR_INVALID_FORMAT;
  for (size_t i = 0; i < n; i++)
    if (!wheel_part_ok(parts[i], lens[i]))
      return KPACK_ERROR_INVALID_FORMAT;
  if (n == 6 && !(parts[2][0] >= '0' && parts[2][0] <= '9'))
    return KPACK_ERROR_INVALID_FORMAT;
  name->distribution = wheel_strndup(parts[0], lens[0]);
  name->version = wheel_strndup(parts[1], lens[1]);
  name->build = n == 6 ? wheel_strndup(parts[2], lens[2]) : NULL;
  const char* tags = parts[n - 3];
  name->tags = wheel_strndup(tags, (size_t)(base + len - tags));
  if (name->distribution == NULL || name->version == NULL ||
      name->tags == NULL || (n == 6 && name->build == NULL)) {
    kp_wheel_name_free(name);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  return KPACK_SUCCESS;
}

char* kp_wheel_escape_name(const char* project) {
  if (project == NULL)
    return NULL;
  char* out = malloc(strlen(project) + 1);
  size_t n = 0;
  if (out == NULL)
    return NULL;
  for (const char* p = project; *p; p++) {
    if (strchr("-_.", *p) != NULL) {
      if (n == 0 || out[n - 1] != '_')
        out[n++] = '_';
    } else {
      out[n++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
    }
  }
  out[n] = '\0';
  return out;
}

/* A project name as PEP 508 allows it: letters and digits at both ends,
 * '-', '_' and '.' between. */
static bool wheel_project_ok(const char* s) {
  size_t n = strlen(s);
  if (n == 0 || !wheel_ascii_alnum(s[0]) || !wheel_ascii_alnum(s[n - 1]))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!wheel_ascii_alnum(s[i]) && strchr("-_.", s[i]) == NULL)
      return false;
  return true;
}

/* Three '-'-separated parts of tag characters. */
static bool wheel_tags_ok(const char* tags) {
  size_t parts = 0, start = 0, n = strlen(tags);
  for (size_t i = 0; i <= n; i++) {
    if (i < n && tags[i] != '-')
      continue;
    if (!wheel_part_ok(tags + start, i - start))
      return false;
    parts++;
    start = i + 1;
  }
  return parts == 3;
}

kpack_error_t kp_wheel_file_name(const char* project, const char* version,
                                 const char* build, const char* tags,
                                 char** file_name) {
  wheel_text t = {0};
  if (file_name != NULL)
    *file_name = NULL;
  if (project == NULL || version == NULL || tags == NULL || file_name == NULL ||
      !wheel_project_ok(project) || !wheel_tags_ok(tags) ||
      version[0] == '\0' ||
      (build != NULL && (!wheel_part_ok(build, strlen(build)) ||
                         build[0] < '0' || build[0] > '9')))
    return KPACK_ERROR_INVALID_ARGUMENT;
  for (const char* p = version; *p; p++)
    if (!wheel_ascii_alnum(*p) && strchr("._+!-", *p) == NULL)
      return KPACK_ERROR_INVALID_ARGUMENT;
  char* escaped = kp_wheel_escape_name(project);
  if (escaped == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  text_str(&t, escaped);
  text_str(&t, "-");
  for (const char* p = version; *p; p++)
    text_put(&t, *p == '-' ? "_" : p, 1);
  if (build != NULL) {
    text_str(&t, "-");
    text_str(&t, build);
  }
  text_str(&t, "-");
  text_str(&t, tags);
  text_str(&t, ".whl");
  free(escaped);
  if (t.failed) {
    free(t.data);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  *file_name = t.data;
  return KPACK_SUCCESS;
}

/* ---- METADATA ------------------------------------------------------------ */

void kp_metadata_free(kp_metadata* md) {
  if (md == NULL)
    return;
  for (size_t i = 0; i < md->count; i++) {
    free(md->fields[i].name);
    free(md->fields[i].value);
  }
  free(md->fields);
  free(md->body);
  memset(md, 0, sizeof(*md));
}

/* Inserts name: value at position `at`. */
static kpack_error_t md_insert(kp_metadata* md, size_t at, const char* name,
                               size_t name_len, const char* value,
                               size_t value_len) {
  kp_metadata_field* grown =
      kp_grow(md->fields, md->count, &md->cap, sizeof(*md->fields), 16);
  if (grown == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  md->fields = grown;
  char* n = wheel_strndup(name, name_len);
  char* v = wheel_strndup(value, value_len);
  if (n == NULL || v == NULL) {
    free(n);
    free(v);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  memmove(&md->fields[at + 1], &md->fields[at],
          (md->count - at) * sizeof(*md->fields));
  md->fields[at] = (kp_metadata_field){n, v};
  md->count++;
  return KPACK_SUCCESS;
}

/* A field name: printable ASCII without spaces or ':'. */
static bool md_name_ok(const char* s, size_t n) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] <= ' ' || s[i] > '~' || s[i] == ':')
      return false;
  return true;
}

kpack_error_t kp_metadata_parse(const char* text, size_t size,
                                kp_metadata* md) {
  kpack_error_t err = KPACK_ERROR_INVALID_METADATA;
  if (text == NULL || md == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  memset(md, 0, sizeof(*md));
  if (memchr(text, '\0', size) != NULL)
    goto fail;
  size_t at = 0;
  while (at < size) {
    const char* line = text + at;
    const char* nl = memchr(line, '\n', size - at);
    size_t len = nl ? (size_t)(nl - line) : size - at;
    size_t next = at + len + (nl ? 1 : 0);
    size_t trimmed = len > 0 && line[len - 1] == '\r' ? len - 1 : len;
    if (trimmed == 0) { /* the blank line: the body follows */
      at = next;
      md->body = wheel_strndup(text + at, size - at);
      if (md->body == NULL) {
        err = KPACK_ERROR_OUT_OF_MEMORY;
        goto fail;
      }
      break;
    }
    if (line[0] == ' ' || line[0] == '\t') { /* continues the last value */
      if (md->count == 0)
        goto fail;
      kp_metadata_field* f = &md->fields[md->count - 1];
      char* joined = malloc(strlen(f->value) + 1 + trimmed + 1);
      if (joined == NULL) {
        err = KPACK_ERROR_OUT_OF_MEMORY;
        goto fail;
      }
      sprintf(joined, "%s\n%.*s", f->value, (int)trimmed, line);
      free(f->value);
      f->value = joined;
      at = next;
      continue;
    }
    const char* colon = memchr(line, ':', trimmed);
    if (colon == NULL || !md_name_ok(line, (size_t)(colon - line)))
      goto fail;
    const char* value = colon + 1;
    while (value < line + trimmed && (*value == ' ' || *value == '\t'))
      value++;
    err = md_insert(md, md->count, line, (size_t)(colon - line), value,
                    (size_t)(line + trimmed - value));
    if (err != KPACK_SUCCESS)
      goto fail;
    err = KPACK_ERROR_INVALID_METADATA;
    at = next;
  }
  if (kp_metadata_get(md, "Name") == NULL ||
      kp_metadata_get(md, "Version") == NULL)
    goto fail;
  return KPACK_SUCCESS;
fail:
  kp_metadata_free(md);
  return err;
}

const char* kp_metadata_get(const kp_metadata* md, const char* name) {
  for (size_t i = 0; md != NULL && name != NULL && i < md->count; i++)
    if (strcasecmp(md->fields[i].name, name) == 0)
      return md->fields[i].value;
  return NULL;
}

kpack_error_t kp_metadata_set(kp_metadata* md, const char* name,
                              const char* value) {
  if (md == NULL || name == NULL || value == NULL ||
      !md_name_ok(name, strlen(name)) || strchr(value, '\n') != NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < md->count; i++) {
    if (strcasecmp(md->fields[i].name, name) == 0) {
      char* v = strdup(value);
      if (v == NULL)
        return KPACK_ERROR_OUT_OF_MEMORY;
      free(md->fields[i].value);
      md->fields[i].value = v;
      return KPACK_SUCCESS;
    }
  }
  return md_insert(md, md->count, name, strlen(name), value, strlen(value));
}

kpack_error_t kp_metadata_add_line(kp_metadata* md, const char* line) {
  if (md == NULL || line == NULL || strchr(line, '\n') != NULL ||
      strchr(line, '\r') != NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const char* colon = strchr(line, ':');
  if (colon == NULL || !md_name_ok(line, (size_t)(colon - line)))
    return KPACK_ERROR_INVALID_ARGUMENT;
  size_t name_len = (size_t)(colon - line);
  const char* value = colon + 1;
  while (*value == ' ' || *value == '\t')
    value++;
  size_t at = md->count;
  for (size_t i = md->count; i-- > 0;) {
    if (strlen(md->fields[i].name) == name_len &&
        strncasecmp(md->fields[i].name, line, name_len) == 0) {
      at = i + 1;
      break;
    }
  }
  return md_insert(md, at, line, name_len, value, strlen(value));
}

kpack_error_t kp_metadata_format(const kp_metadata* md, char** text,
                                 size_t* size) {
  wheel_text t = {0};
  if (text != NULL)
    *text = NULL;
  if (md == NULL || text == NULL || size == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  text_put(&t, "", 0);
  for (size_t i = 0; i < md->count; i++) {
    text_str(&t, md->fields[i].name);
    text_str(&t, ": ");
    text_str(&t, md->fields[i].value);
    text_str(&t, "\n");
  }
  if (md->body != NULL) {
    text_str(&t, "\n");
    text_str(&t, md->body);
  }
  if (t.failed) {
    free(t.data);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  *text = t.data;
  *size = t.size;
  return KPACK_SUCCESS;
}

/* ---- RECORD -------------------------------------------------------------- */

/* "sha256=" and the digest in base64url without padding, as RECORD and
 * pip write it. */
static void record_hash(const uint8_t digest[KP_SHA256_SIZE],
                        char out[WHEEL_HASH_SIZE]) {
  static const char b64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t n = 0;
  memcpy(out, "sha256=", 7);
  n = 7;
  for (size_t i = 0; i < KP_SHA256_SIZE; i += 3) {
    uint32_t v = (uint32_t)digest[i] << 16;
    size_t left = KP_SHA256_SIZE - i;
    if (left > 1)
      v |= (uint32_t)digest[i + 1] << 8;
    if (left > 2)
      v |= digest[i + 2];
    out[n++] = b64[(v >> 18) & 63];
    out[n++] = b64[(v >> 12) & 63];
    if (left > 1)
      out[n++] = b64[(v >> 6) & 63];
    if (left > 2)
      out[n++] = b64[v & 63];
  }
  out[n] = '\0';
}

/* A RECORD field, quoted the way Python's csv module quotes it. */
static void record_field(wheel_text* t, const char* s) {
  if (strpbrk(s, ",\"\r\n") == NULL) {
    text_str(t, s);
    return;
  }
  text_str(t, "\"");
  for (; *s; s++) {
    text_put(t, s, 1);
    if (*s == '"')
      text_put(t, "\"", 1); /* a quote is doubled */
  }
  text_str(t, "\"");
}

typedef struct record_row {
  char* path;
  char* hash;
  char* size;
  bool seen;
} record_row;

typedef struct record {
  record_row* rows;
  size_t count, cap;
} record;

static void record_free(record* r) {
  for (size_t i = 0; i < r->count; i++) {
    free(r->rows[i].path);
    free(r->rows[i].hash);
    free(r->rows[i].size);
  }
  free(r->rows);
  memset(r, 0, sizeof(*r));
}

/* One CSV field of line[*at, end): quoted ("" for a quote) or plain, up
 * to the next ',' (consumed). NULL with *bad set when malformed. */
static char* record_next_field(const char* line, size_t end, size_t* at,
                               bool* bad, bool* oom) {
  wheel_text t = {0};
  size_t i = *at;
  text_put(&t, "", 0);
  if (i < end && line[i] == '"') {
    for (i++;; i++) {
      if (i >= end) {
        *bad = true;
        free(t.data);
        return NULL;
      }
      if (line[i] == '"') {
        if (i + 1 < end && line[i + 1] == '"') {
          text_put(&t, "\"", 1);
          i++;
          continue;
        }
        i++;
        break;
      }
      text_put(&t, line + i, 1);
    }
    if (i < end && line[i] != ',') {
      *bad = true;
      free(t.data);
      return NULL;
    }
  } else {
    size_t start = i;
    while (i < end && line[i] != ',')
      i++;
    text_put(&t, line + start, i - start);
  }
  if (i < end)
    i++; /* the ',' */
  else
    i = end + 1; /* no field follows */
  *at = i;
  if (t.failed) {
    *oom = true;
    free(t.data);
    return NULL;
  }
  return t.data;
}

static int record_cmp(const void* a, const void* b) {
  return strcmp(((const record_row*)a)->path, ((const record_row*)b)->path);
}

/* Parses RECORD: one row per line, three fields (path, hash, size). Rows
 * end sorted by path. */
static kpack_error_t record_parse(const char* text, size_t size, record* r) {
  kpack_error_t err = KPACK_ERROR_INVALID_METADATA;
  memset(r, 0, sizeof(*r));
  if (memchr(text, '\0', size) != NULL)
    goto fail;
  for (size_t at = 0; at < size;) {
    const char* nl = memchr(text + at, '\n', size - at);
    size_t end = nl ? (size_t)(nl - text) : size;
    size_t next = nl ? end + 1 : size;
    if (end > at && text[end - 1] == '\r')
      end--;
    if (end == at) {
      at = next;
      continue;
    }
    bool bad = false, oom = false;
    char* fields[3] = {NULL, NULL, NULL};
    size_t i = at, n = 0;
    while (i <= end && n < 3 && !bad && !oom) {
      fields[n] = record_next_field(text, end, &i, &bad, &oom);
      if (fields[n] != NULL)
        n++;
    }
    if (oom || bad || n != 3 || i <= end || fields[0][0] == '\0') {
      free(fields[0]);
      free(fields[1]);
      free(fields[2]);
      err = oom ? KPACK_ERROR_OUT_OF_MEMORY : KPACK_ERROR_INVALID_METADATA;
      goto fail;
    }
    record_row* grown =
        kp_grow(r->rows, r->count, &r->cap, sizeof(*r->rows), 64);
    if (grown == NULL) {
      free(fields[0]);
      free(fields[1]);
      free(fields[2]);
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto fail;
    }
    r->rows = grown;
    r->rows[r->count++] = (record_row){fields[0], fields[1], fields[2], false};
    at = next;
  }
  if (r->count > 1)
    qsort(r->rows, r->count, sizeof(*r->rows), record_cmp);
  for (size_t i = 1; i < r->count; i++)
    if (strcmp(r->rows[i - 1].path, r->rows[i].path) == 0)
      goto fail;
  return KPACK_SUCCESS;
fail:
  record_free(r);
  return err;
}

static record_row* record_find(record* r, const char* path) {
  record_row key = {.path = (char*)path};
  if (r->count == 0)
    return NULL; /* an empty RECORD: no rows to search */
  return bsearch(&key, r->rows, r->count, sizeof(*r->rows), record_cmp);
}

/* RECORD itself and its signatures carry no hash. */
static bool record_is_unhashed(const char* dist_info, const char* path) {
  size_t n = strlen(dist_info);
  if (strncmp(path, dist_info, n) != 0 || path[n] != '/')
    return false;
  const char* base = path + n + 1;
  return strcmp(base, "RECORD") == 0 || strcmp(base, "RECORD.jws") == 0 ||
         strcmp(base, "RECORD.p7s") == 0;
}

/* ---- WHEEL --------------------------------------------------------------- */

static kpack_error_t wheel_parse_wheel_file(const char* text, size_t size,
                                            kp_wheel* w) {
  kp_metadata md = {0};
  size_t tags = 0;
  /* The same "Field: value" lines as METADATA, without Name or Version:
   * parsed with stand-ins for those two. */
  wheel_text t = {0};
  text_str(&t, "Name: -\nVersion: -\n");
  text_put(&t, text, size);
  if (t.failed) {
    free(t.data);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  kpack_error_t err = kp_metadata_parse(t.data, t.size, &md);
  free(t.data);
  if (err != KPACK_SUCCESS)
    return err;
  const char* version = kp_metadata_get(&md, "Wheel-Version");
  const char* purelib = kp_metadata_get(&md, "Root-Is-Purelib");
  err = KPACK_ERROR_INVALID_METADATA;
  if (version == NULL || purelib == NULL)
    goto done;
  if (strncmp(version, "1.", 2) != 0) {
    err = KPACK_ERROR_UNSUPPORTED_VERSION;
    goto done;
  }
  w->root_is_purelib = strcasecmp(purelib, "true") == 0;
  for (size_t i = 0; i < md.count; i++)
    tags += strcasecmp(md.fields[i].name, "Tag") == 0;
  w->tags = calloc(tags ? tags : 1, sizeof(*w->tags));
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if (w->tags == NULL)
    goto done;
  for (size_t i = 0; i < md.count; i++) {
    if (strcasecmp(md.fields[i].name, "Tag") != 0)
      continue;
    w->tags[w->tag_count] = strdup(md.fields[i].value);
    if (w->tags[w->tag_count] == NULL)
      goto done;
    w->tag_count++;
  }
  err = KPACK_SUCCESS;
done:
  kp_metadata_free(&md);
  return err;
}

/* ---- Unpacking ----------------------------------------------------------- */

void kp_wheel_free(kp_wheel* w) {
  if (w == NULL)
    return;
  kp_wheel_name_free(&w->name);
  free(w->dist_info);
  kp_metadata_free(&w->metadata);
  for (size_t i = 0; i < w->tag_count; i++)
    free(w->tags[i]);
  free(w->tags);
  for (size_t i = 0; i < w->file_count; i++)
    free(w->files[i].path);
  free(w->files);
  free(w);
}

/* An entry name a directory may hold: relative, every component a real
 * name (no "", "." or ".."); a trailing '/' marks a directory. */
static bool wheel_entry_name_ok(const char* name) {
  if (name[0] == '/' || name[0] == '\0')
    return false;
  for (const char* p = name; *p;) {
    const char* slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0 || (n == 1 && p[0] == '.') ||
        (n == 2 && p[0] == '.' && p[1] == '.'))
      return false;
    if (slash == NULL || slash[1] == '\0')
      break;
    p = slash + 1;
  }
  return true;
}

/* The one top-level "*.dist-info" directory of the entries. */
static kpack_error_t wheel_find_dist_info(const kp_zip* zip, char** dist_info) {
  *dist_info = NULL;
  for (size_t i = 0; i < kp_zip_count(zip); i++) {
    const char* name = kp_zip_entry_at(zip, i)->name;
    const char* slash = strchr(name, '/');
    if (slash == NULL || slash - name < 10 ||
        strncmp(slash - 10, ".dist-info", 10) != 0)
      continue;
    size_t n = (size_t)(slash - name);
    if (*dist_info != NULL) {
      if (strlen(*dist_info) == n && strncmp(*dist_info, name, n) == 0)
        continue;
      free(*dist_info);
      *dist_info = NULL;
      return KPACK_ERROR_INVALID_FORMAT; /* two of them */
    }
    *dist_info = wheel_strndup(name, n);
    if (*dist_info == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
  }
  return *dist_info ? KPACK_SUCCESS : KPACK_ERROR_INVALID_FORMAT;
}

/* Whether "<dist>-<version>.dist-info" names the wheel of `name`: the same
 * escaped distribution and the same version. */
static bool wheel_dist_info_matches(const char* dist_info,
                                    const kp_wheel_name* name) {
  const char* dash = strchr(dist_info, '-');
  if (dash == NULL)
    return false;
  char* dist = wheel_strndup(dist_info, (size_t)(dash - dist_info));
  char* a = kp_wheel_escape_name(dist);
  char* b = kp_wheel_escape_name(name->distribution);
  size_t vlen = strlen(dash + 1) - 10;
  bool same = a != NULL && b != NULL && strcmp(a, b) == 0 &&
              strlen(name->version) == vlen &&
              strncmp(dash + 1, name->version, vlen) == 0;
  free(dist);
  free(a);
  free(b);
  return same;
}

/* Reads the dist-info file `base` into *text. */
static kpack_error_t wheel_read_dist_file(kp_zip* zip, const char* dist_info,
                                          const char* base, size_t max,
                                          char** text, size_t* size) {
  char* path = wheel_join(dist_info, "/", base);
  if (path == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  size_t index = kp_zip_find(zip, path);
  free(path);
  if (index == SIZE_MAX)
    return KPACK_ERROR_INVALID_METADATA;
  kpack_error_t err = kp_zip_read_alloc(zip, index, max, text, size);
  return err == KPACK_ERROR_INVALID_FORMAT ? KPACK_ERROR_INVALID_METADATA : err;
}

/* mkdir -p of path's directories below root_fd; a component that exists
 * and is not a directory is INVALID_FORMAT (a file and a directory of one
 * name in the wheel). */
static kpack_error_t wheel_make_parents(int root_fd, const char* path) {
  char* copy = strdup(path);
  kpack_error_t err = KPACK_SUCCESS;
  if (copy == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (char* slash = strchr(copy, '/'); slash != NULL;
       slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    if (mkdirat(root_fd, copy, 0755) != 0 && errno != EEXIST) {
      err = KPACK_ERROR_IO_ERROR;
      break;
    }
    struct stat st;
    if (fstatat(root_fd, copy, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      err = KPACK_ERROR_IO_ERROR;
      break;
    }
    if (!S_ISDIR(st.st_mode)) {
      err = KPACK_ERROR_INVALID_FORMAT;
      break;
    }
    *slash = '/';
  }
  free(copy);
  return err;
}

/* Where an entry goes: its file, hashed as it is written (by the pipe's
 * thread, when there is a pipe, until it is finished). */
typedef struct wheel_sink {
  int fd;
  uint64_t written;
  kp_sha256_ctx digest;
  kp_pipe* pipe;
} wheel_sink;

static kpack_error_t wheel_write_piece(void* user, const void* data,
                                       size_t size) {
  wheel_sink* s = user;
  kp_sha256_update(&s->digest, data, size);
  kpack_error_t err = kp_pwrite_all(s->fd, data, size, s->written);
  s->written += size;
  return err;
}

/* What the entry's reader hands on: to the pipe's thread, for a large
 * entry, while this one inflates the next piece. */
static kpack_error_t wheel_pass_piece(void* user, const void* data,
                                      size_t size) {
  wheel_sink* s = user;
  return kp_pipe_call(s->pipe, wheel_write_piece, s, data, size);
}

/* Whether a RECORD row says what was written: its hash (padding ignored)
 * and its size. */
static bool wheel_row_matches(const record_row* row,
                              const uint8_t digest[KP_SHA256_SIZE],
                              uint64_t size) {
  char hash[WHEEL_HASH_SIZE], want[32];
  record_hash(digest, hash);
  size_t n = strlen(row->hash);
  while (n > 0 && row->hash[n - 1] == '=')
    n--;
  snprintf(want, sizeof(want), "%llu", (unsigned long long)size);
  return n == strlen(hash) && strncmp(row->hash, hash, n) == 0 &&
         strcmp(row->size, want) == 0;
}

/* Opens `dir` for unpacking: made if missing, else it must be empty. */
static kpack_error_t wheel_open_target(const char* dir, int* fd) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return errno == ENOENT ? KPACK_ERROR_FILE_NOT_FOUND : KPACK_ERROR_IO_ERROR;
  *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0)
    return KPACK_ERROR_IO_ERROR;
  DIR* d = fdopendir(dup(*fd));
  if (d == NULL) {
    close(*fd);
    return KPACK_ERROR_IO_ERROR;
  }
  struct dirent* e;
  bool empty = true;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      empty = false;
  closedir(d);
  if (!empty) {
    close(*fd);
    return KPACK_ERROR_INVALID_ARGUMENT;
  }
  return KPACK_SUCCESS;
}

/* Writes entry `index` as `name` below root_fd and checks it against its
 * RECORD row (none for RECORD itself). */
static kpack_error_t wheel_extract(kp_zip* zip, size_t index, int root_fd,
                                   kp_wheel* w, record* rec) {
  const kp_zip_entry* e = kp_zip_entry_at(zip, index);
  kpack_error_t err = wheel_make_parents(root_fd, e->name);
  if (err != KPACK_SUCCESS)
    return err;
  size_t len = strlen(e->name);
  if (e->name[len - 1] == '/') { /* a directory entry */
    if (mkdirat(root_fd, e->name, 0755) != 0 && errno != EEXIST)
      return KPACK_ERROR_IO_ERROR;
    return KPACK_SUCCESS;
  }
  record_row* row = NULL;
  if (!record_is_unhashed(w->dist_info, e->name)) {
    row = record_find(rec, e->name);
    if (row == NULL)
      return KPACK_ERROR_INVALID_METADATA;
    row->seen = true;
  }
  uint32_t mode = (e->mode & 0111) != 0 ? 0755 : 0644;
  wheel_sink s = {.written = 0};
  s.fd = openat(root_fd, e->name,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (s.fd < 0)
    return errno == EEXIST || errno == EISDIR ? KPACK_ERROR_INVALID_FORMAT
                                              : KPACK_ERROR_IO_ERROR;
  kp_sha256_init(&s.digest);
  if (e->size >= KP_PIPE_MIN_SIZE)
    s.pipe = kp_pipe_start();
  err = kp_zip_read(zip, index, wheel_pass_piece, &s);
  int saved = errno; /* the reason for err, unless it is the pipe's */
  kpack_error_t piped = kp_pipe_finish(s.pipe);
  if (err == KPACK_SUCCESS)
    err = piped;
  else
    errno = saved;
  if (close(s.fd) != 0 && err == KPACK_SUCCESS)
    err = KPACK_ERROR_IO_ERROR;
  if (err != KPACK_SUCCESS)
    return err;
  uint8_t digest[KP_SHA256_SIZE];
  kp_sha256_final(&s.digest, digest);
  if (row != NULL && !wheel_row_matches(row, digest, s.written))
    return KPACK_ERROR_INVALID_FORMAT;
  kp_wheel_file* grown =
      realloc(w->files, (w->file_count + 1) * sizeof(*grown));
  if (grown == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  w->files = grown;
  kp_wheel_file* f = &w->files[w->file_count];
  f->path = strdup(e->name);
  if (f->path == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  f->mode = mode;
  f->size = s.written;
  w->file_count++;
  return KPACK_SUCCESS;
}

kpack_error_t kp_wheel_unpack(const char* path, const char* dir,
                              kp_wheel** out) {
  kp_zip* zip = NULL;
  kp_wheel* w = NULL;
  record rec = {0};
  char* text = NULL;
  size_t size = 0;
  int root_fd = -1;
  kpack_error_t err;
  if (out != NULL)
    *out = NULL;
  if (path == NULL || dir == NULL || out == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  w = calloc(1, sizeof(*w));
  if (w == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  err = kp_zip_open(path, &zip);
  if (err != KPACK_SUCCESS)
    goto fail;
  err = kp_wheel_name_parse(path, &w->name);
  if (err != KPACK_SUCCESS)
    goto fail;
  for (size_t i = 0; i < kp_zip_count(zip); i++)
    if (!wheel_entry_name_ok(kp_zip_entry_at(zip, i)->name)) {
      err = KPACK_ERROR_INVALID_FORMAT;
      goto fail;
    }
  err = wheel_find_dist_info(zip, &w->dist_info);
  if (err != KPACK_SUCCESS)
    goto fail;
  if (!wheel_dist_info_matches(w->dist_info, &w->name)) {
    err = KPACK_ERROR_INVALID_FORMAT;
    goto fail;
  }
  err = wheel_read_dist_file(zip, w->dist_info, "METADATA", WHEEL_MAX_METADATA,
                             &text, &size);
  if (err == KPACK_SUCCESS)
    err = kp_metadata_parse(text, size, &w->metadata);
  free(text);
  text = NULL;
  if (err != KPACK_SUCCESS)
    goto fail;
  err = wheel_read_dist_file(zip, w->dist_info, "WHEEL", WHEEL_MAX_METADATA,
                             &text, &size);
  if (err == KPACK_SUCCESS)
    err = wheel_parse_wheel_file(text, size, w);
  free(text);
  text = NULL;
  if (err != KPACK_SUCCESS)
    goto fail;
  err = wheel_read_dist_file(zip, w->dist_info, "RECORD", WHEEL_MAX_RECORD,
                             &text, &size);
  if (err == KPACK_SUCCESS)
    err = record_parse(text, size, &rec);
  free(text);
  text = NULL;
  if (err != KPACK_SUCCESS)
    goto fail;
  err = wheel_open_target(dir, &root_fd);
  if (err != KPACK_SUCCESS)
    goto fail;
  for (size_t i = 0; i < kp_zip_count(zip); i++) {
    err = wheel_extract(zip, i, root_fd, w, &rec);
    if (err != KPACK_SUCCESS)
      goto fail;
  }
  /* Every row names a file of the wheel (RECORD's own row included). */
  err = KPACK_ERROR_INVALID_METADATA;
  for (size_t i = 0; i < rec.count; i++)
    if (!rec.rows[i].seen &&
        !record_is_unhashed(w->dist_info, rec.rows[i].path))
      goto fail;
  err = KPACK_SUCCESS;
  *out = w;
  w = NULL;
fail:
  if (root_fd >= 0)
    close(root_fd);
  record_free(&rec);
  kp_zip_close(zip);
  kp_wheel_free(w);
  return err;
}

/* ---- Packing ------------------------------------------------------------- */

/* One file of the wheel being packed. */
typedef struct pack_item {
  char* name;       /* its path in the wheel */
  char* source;     /* the file to read, or NULL for `data` */
  const char* data; /* generated content (METADATA, WHEEL) */
  size_t data_size;
  int group; /* 0 files, 1 .dist-info, 2 RECORD: the order */
} pack_item;

typedef struct pack_state {
  const char* root;
  char* old_dist_info; /* the directory's own top-level .dist-info */
  char* old_data;      /* and .data */
  pack_item* items;
  size_t count, cap;
} pack_state;

static void pack_free(pack_state* s) {
  for (size_t i = 0; i < s->count; i++) {
    free(s->items[i].name);
    free(s->items[i].source);
  }
  free(s->items);
  free(s->old_dist_info);
  free(s->old_data);
}

static kpack_error_t pack_add(pack_state* s, char* name, char* source,
                              int group) {
  pack_item* grown =
      kp_grow(s->items, s->count, &s->cap, sizeof(*s->items), 64);
  if (grown == NULL || name == NULL || (source == NULL && group == 0)) {
    free(name);
    free(source);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  s->items = grown;
  s->items[s->count++] = (pack_item){name, source, NULL, 0, group};
  return KPACK_SUCCESS;
}

/* Notes a top-level directory named "*<suffix>" in *slot; a second one is
 * INVALID_ARGUMENT. */
static kpack_error_t pack_note_top(const char* name, const char* suffix,
                                   char** slot) {
  size_t n = strlen(name), k = strlen(suffix);
  if (n <= k || strcmp(name + n - k, suffix) != 0)
    return KPACK_SUCCESS;
  if (*slot != NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *slot = strdup(name);
  return *slot ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
}

static int pack_dirent_cmp(const struct dirent** a, const struct dirent** b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int pack_skip_dots(const struct dirent* e) {
  return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

/* Adds every regular file below root/rel (rel "" for the root). */
static kpack_error_t pack_walk(pack_state* s, const char* rel) {
  struct dirent** names = NULL;
  kpack_error_t err = KPACK_SUCCESS;
  char* dir = rel[0] ? wheel_join(s->root, "/", rel) : strdup(s->root);
  if (dir == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  int n = scandir(dir, &names, pack_skip_dots, pack_dirent_cmp);
  if (n < 0) {
    free(dir);
    return errno == ENOENT ? KPACK_ERROR_FILE_NOT_FOUND : KPACK_ERROR_IO_ERROR;
  }
  for (int i = 0; i < n; i++) {
    const char* base = names[i]->d_name;
    char* path = NULL;
    char* child = NULL;
    struct stat st;
    if (err != KPACK_SUCCESS)
      goto next;
    path = wheel_join(dir, "/", base);
    child = rel[0] ? wheel_join(rel, "/", base) : strdup(base);
    if (path == NULL || child == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto next;
    }
    if (lstat(path, &st) != 0) {
      err = KPACK_ERROR_IO_ERROR;
      goto next;
    }
    if (S_ISDIR(st.st_mode)) {
      if (rel[0] == '\0') {
        err = pack_note_top(base, ".dist-info", &s->old_dist_info);
        if (err == KPACK_SUCCESS)
          err = pack_note_top(base, ".data", &s->old_data);
      }
      if (err == KPACK_SUCCESS)
        err = pack_walk(s, child);
      goto next;
    }
    if (S_ISLNK(st.st_mode) && stat(path, &st) != 0) {
      err = KPACK_ERROR_IO_ERROR;
      goto next;
    }
    if (!S_ISREG(st.st_mode)) {
      err = KPACK_ERROR_INVALID_ARGUMENT;
      goto next;
    }
    err = pack_add(s, child, path, 0);
    child = path = NULL;
  next:
    free(path);
    free(child);
    free(names[i]);
  }
  free(names);
  free(dir);
  return err;
}

/* Files of the directory's own .dist-info that a wheel does not carry
 * over: written anew, or belonging to an installation. */
static bool pack_dropped(const char* base) {
  static const char* const dropped[] = {
      "METADATA",   "WHEEL",     "RECORD",    "RECORD.jws",
      "RECORD.p7s", "INSTALLER", "REQUESTED", "direct_url.json"};
  for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
    if (strcmp(base, dropped[i]) == 0)
      return true;
  return false;
}

/* Moves files of the old top-level directory `old` below `new_name`;
 * `dist_info` says which group they join. */
static kpack_error_t pack_rehome(pack_state* s, const char* old,
                                 const char* new_name, bool dist_info) {
  if (old == NULL)
    return KPACK_SUCCESS;
  size_t n = strlen(old);
  for (size_t i = 0; i < s->count; i++) {
    pack_item* it = &s->items[i];
    if (it->source == NULL || strncmp(it->name, old, n) != 0 ||
        it->name[n] != '/')
      continue;
    const char* rest = it->name + n + 1;
    if (dist_info && strchr(rest, '/') == NULL && pack_dropped(rest)) {
      free(it->name);
      it->name = NULL; /* removed below */
      continue;
    }
    char* name = wheel_join(new_name, "/", rest);
    if (name == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    free(it->name);
    it->name = name;
    it->group = dist_info ? 1 : 0;
  }
  size_t kept = 0;
  for (size_t i = 0; i < s->count; i++) {
    if (s->items[i].name == NULL)
      free(s->items[i].source);
    else
      s->items[kept++] = s->items[i];
  }
  s->count = kept;
  return KPACK_SUCCESS;
}

static int pack_item_cmp(const void* a, const void* b) {
  const pack_item* x = a;
  const pack_item* y = b;
  if (x->group != y->group)
    return x->group < y->group ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* The METADATA text of the new wheel. */
static kpack_error_t pack_metadata(const pack_state* s,
                                   const kp_wheel_pack_options* o, char** text,
                                   size_t* size) {
  kp_metadata md = {0};
  kpack_error_t err = KPACK_SUCCESS;
  const kp_metadata* from = o->metadata;
  char* old_text = NULL;
  if (from == NULL && s->old_dist_info != NULL) {
    char* dir = wheel_join(s->root, "/", s->old_dist_info);
    char* path = dir ? wheel_join(dir, "/", "METADATA") : NULL;
    free(dir);
    if (path == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    FILE* f = fopen(path, "rb");
    free(path);
    if (f != NULL) {
      wheel_text t = {0};
      char buf[8192];
      size_t n;
      text_put(&t, "", 0);
      while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && !t.failed &&
             t.size <= WHEEL_MAX_METADATA)
        text_put(&t, buf, n);
      bool read_failed = ferror(f) != 0;
      fclose(f);
      if (t.failed || read_failed) {
        free(t.data);
        return t.failed ? KPACK_ERROR_OUT_OF_MEMORY : KPACK_ERROR_IO_ERROR;
      }
      err = t.size > WHEEL_MAX_METADATA
                ? KPACK_ERROR_INVALID_METADATA
                : kp_metadata_parse(t.data, t.size, &md);
      old_text = t.data;
      if (err != KPACK_SUCCESS)
        goto done;
      from = &md;
    }
  }
  kp_metadata out = {0};
  if (from != NULL) {
    for (size_t i = 0; i < from->count && err == KPACK_SUCCESS; i++)
      err = md_insert(&out, out.count, from->fields[i].name,
                      strlen(from->fields[i].name), from->fields[i].value,
                      strlen(from->fields[i].value));
    if (err == KPACK_SUCCESS && from->body != NULL) {
      out.body = strdup(from->body);
      if (out.body == NULL)
        err = KPACK_ERROR_OUT_OF_MEMORY;
    }
  } else {
    err = kp_metadata_set(&out, "Metadata-Version", "2.1");
  }
  if (err == KPACK_SUCCESS)
    err = kp_metadata_set(&out, "Name", o->project);
  if (err == KPACK_SUCCESS)
    err = kp_metadata_set(&out, "Version", o->version);
  for (size_t i = 0; i < o->extra_metadata_count && err == KPACK_SUCCESS; i++)
    err = o->extra_metadata[i] == NULL
              ? KPACK_ERROR_INVALID_ARGUMENT
              : kp_metadata_add_line(&out, o->extra_metadata[i]);
  if (err == KPACK_SUCCESS)
    err = kp_metadata_format(&out, text, size);
  kp_metadata_free(&out);
done:
  kp_metadata_free(&md);
  free(old_text);
  return err;
}

/* The WHEEL text: every tag of the (possibly compressed) tag set. */
static kpack_error_t pack_wheel_file(const kp_wheel_pack_options* o,
                                     char** text, size_t* size) {
  wheel_text t = {0};
  char* parts[3] = {NULL, NULL, NULL};
  const char* p = o->tags;
  for (int i = 0; i < 3; i++) {
    const char* dash = i < 2 ? strchr(p, '-') : p + strlen(p);
    parts[i] = wheel_strndup(p, (size_t)(dash - p));
    p = dash + 1;
  }
  text_str(&t, "Wheel-Version: 1.0\nGenerator: kpack " KPACK_VERSION_STRING
               "\nRoot-Is-Purelib: ");
  text_str(&t, o->root_is_purelib ? "true\n" : "false\n");
  for (char* py = parts[0]; py != NULL && *py;) {
    size_t np = strcspn(py, ".");
    for (char* abi = parts[1]; abi != NULL && *abi;) {
      size_t na = strcspn(abi, ".");
      for (char* plat = parts[2]; plat != NULL && *plat;) {
        size_t nl = strcspn(plat, ".");
        text_str(&t, "Tag: ");
        text_put(&t, py, np);
        text_str(&t, "-");
        text_put(&t, abi, na);
        text_str(&t, "-");
        text_put(&t, plat, nl);
        text_str(&t, "\n");
        plat += nl + (plat[nl] == '.');
      }
      abi += na + (abi[na] == '.');
    }
    py += np + (py[np] == '.');
  }
  if (o->build != NULL) {
    text_str(&t, "Build: ");
    text_str(&t, o->build);
    text_str(&t, "\n");
  }
  bool failed = t.failed || !parts[0] || !parts[1] || !parts[2];
  free(parts[0]);
  free(parts[1]);
  free(parts[2]);
  if (failed) {
    free(t.data);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  *text = t.data;
  *size = t.size;
  return KPACK_SUCCESS;
}

/* Writes the items to `fd` as a zip, RECORD last. */
static kpack_error_t pack_write(pack_state* s, int fd, const char* dist_info,
                                int level, const char* stored_suffix) {
  kp_zip_writer* zw = NULL;
  wheel_text record_text = {0};
  kpack_error_t err = kp_zip_writer_create(fd, &zw);
  if (err != KPACK_SUCCESS)
    return err;
  text_put(&record_text, "", 0);
  for (size_t i = 0; i < s->count && err == KPACK_SUCCESS; i++) {
    pack_item* it = &s->items[i];
    uint8_t digest[KP_SHA256_SIZE];
    uint64_t size = it->data_size;
    uint32_t mode = 0644;
    int in = -1;
    if (it->group == 2)
      continue; /* RECORD, below */
    if (it->source != NULL) {
      struct stat st;
      in = open(it->source, O_RDONLY | O_CLOEXEC);
      if (in < 0 || fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (in >= 0)
          close(in);
        err = KPACK_ERROR_IO_ERROR;
        break;
      }
      size = (uint64_t)st.st_size;
      mode = (st.st_mode & 0111) != 0 ? 0755 : 0644;
    }
    size_t name_len = strlen(it->name);
    bool store =
        stored_suffix != NULL && stored_suffix[0] != '\0' &&
        name_len >= strlen(stored_suffix) &&
        strcmp(it->name + name_len - strlen(stored_suffix), stored_suffix) == 0;
    err = kp_zip_writer_add(zw, it->name, mode, in, it->data, size,
                            store ? 0 : level, digest);
    if (in >= 0)
      close(in);
    char hash[WHEEL_HASH_SIZE], size_text[32];
    record_hash(digest, hash);
    snprintf(size_text, sizeof(size_text), "%llu", (unsigned long long)size);
    record_field(&record_text, it->name);
    text_str(&record_text, ",");
    text_str(&record_text, hash);
    text_str(&record_text, ",");
    text_str(&record_text, size_text);
    text_str(&record_text, "\n");
  }
  char* record_name = wheel_join(dist_info, "/", "RECORD");
  if (err == KPACK_SUCCESS && (record_name == NULL || record_text.failed))
    err = KPACK_ERROR_OUT_OF_MEMORY;
  if (err == KPACK_SUCCESS) {
    record_field(&record_text, record_name);
    text_str(&record_text, ",,\n");
    err = record_text.failed
              ? KPACK_ERROR_OUT_OF_MEMORY
              : kp_zip_writer_add(zw, record_name, 0644, -1, record_text.data,
                                  record_text.size, level, NULL);
  }
  if (err == KPACK_SUCCESS)
    err = kp_zip_writer_finish(zw);
  free(record_name);
  free(record_text.data);
  kp_zip_writer_free(zw);
  return err;
}

kpack_error_t kp_wheel_pack(const char* dir, const char* out_dir,
                            const kp_wheel_pack_options* o, char** out_path) {
  pack_state s = {.root = dir};
  char *file_name = NULL, *escaped = NULL, *prefix = NULL;
  char *dist_info = NULL, *data_dir = NULL, *final = NULL, *tmp = NULL;
  char *metadata = NULL, *wheel_file = NULL;
  size_t metadata_size = 0, wheel_size = 0;
  int fd = -1;
  kpack_error_t err;
  if (out_path != NULL)
    *out_path = NULL;
  if (dir == NULL || out_dir == NULL || o == NULL || o->level < 0 ||
      o->level > 9 || (o->extra_metadata == NULL && o->extra_metadata_count))
    return KPACK_ERROR_INVALID_ARGUMENT;
  err =
      kp_wheel_file_name(o->project, o->version, o->build, o->tags, &file_name);
  if (err != KPACK_SUCCESS)
    return err;
  /* "<dist>-<version>", as the file name starts. */
  escaped = kp_wheel_escape_name(o->project);
  prefix = escaped ? wheel_strndup(file_name,
                                   strlen(escaped) + 1 + strlen(o->version))
                   : NULL;
  dist_info = prefix ? wheel_join(prefix, "", ".dist-info") : NULL;
  data_dir = prefix ? wheel_join(prefix, "", ".data") : NULL;
  final = wheel_join(out_dir, "/", file_name);
  err = KPACK_ERROR_OUT_OF_MEMORY;
  if (dist_info == NULL || data_dir == NULL || final == NULL ||
      asprintf(&tmp, "%s/.%s.%ld.tmp", out_dir, file_name, (long)getpid()) <
          0) {
    tmp = NULL;
    goto done;
  }
  err = pack_walk(&s, "");
  if (err == KPACK_SUCCESS)
    err = pack_rehome(&s, s.old_dist_info, dist_info, true);
  if (err == KPACK_SUCCESS)
    err = pack_rehome(&s, s.old_data, data_dir, false);
  if (err == KPACK_SUCCESS)
    err = pack_metadata(&s, o, &metadata, &metadata_size);
  if (err == KPACK_SUCCESS)
    err = pack_wheel_file(o, &wheel_file, &wheel_size);
  if (err == KPACK_SUCCESS)
    err = pack_add(&s, wheel_join(dist_info, "/", "METADATA"), NULL, 1);
  if (err == KPACK_SUCCESS) {
    s.items[s.count - 1].data = metadata;
    s.items[s.count - 1].data_size = metadata_size;
    err = pack_add(&s, wheel_join(dist_info, "/", "WHEEL"), NULL, 1);
  }
  if (err != KPACK_SUCCESS)
    goto done;
  s.items[s.count - 1].data = wheel_file;
  s.items[s.count - 1].data_size = wheel_size;
  qsort(s.items, s.count, sizeof(*s.items), pack_item_cmp);
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    err = KPACK_ERROR_IO_ERROR;
    goto done;
  }
  err = pack_write(&s, fd, dist_info, o->level, o->stored_suffix);
  if (err == KPACK_SUCCESS && fsync(fd) != 0)
    err = KPACK_ERROR_IO_ERROR;
  if (close(fd) != 0 && err == KPACK_SUCCESS)
    err = KPACK_ERROR_IO_ERROR;
  fd = -1;
  if (err == KPACK_SUCCESS && rename(tmp, final) != 0)
    err = KPACK_ERROR_IO_ERROR;
  if (err != KPACK_SUCCESS) {
    int saved = errno;
    unlink(tmp);
    errno = saved;
    goto done;
  }
  int dfd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  if (out_path != NULL) {
    *out_path = final;
    final = NULL;
  }
done:
  if (fd >= 0) {
    close(fd);
    unlink(tmp);
  }
  pack_free(&s);
  free(file_name);
  free(escaped);
  free(prefix);
  free(dist_info);
  free(data_dir);
  free(final);
  free(tmp);
  free(metadata);
  free(wheel_file);
  return err;
}
