/* SPDX-License-Identifier: MIT
 *
 * HIPK metadata parsing. The pointer comes from a binary's fat binary
 * wrapper with no length, so the read is bounded twice: by a fixed
 * look-ahead and by the end of the memory mapping that holds it.
 */
#include "loader/hipk.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/msgpack_reader.h"
#include "loader/procmaps.h"

/* A msgpack str as a C string; NULL for an embedded NUL. *err tells an
 * allocation failure apart. */
static char* copy_str(const char* s, uint32_t len, kpack_error_t* err) {
  if (memchr(s, '\0', len) != NULL) {
    *err = KPACK_ERROR_INVALID_METADATA;
    return NULL;
  }
  char* copy = strndup(s, len);
  *err = copy != NULL ? KPACK_SUCCESS : KPACK_ERROR_OUT_OF_MEMORY;
  return copy;
}

static kpack_error_t read_search_paths(mp_cursor* c, kp_strlist* out) {
  uint32_t n;
  if (mp_read_array(c, &n) != MP_OK || n == 0)
    return KPACK_ERROR_INVALID_METADATA;
  for (uint32_t i = 0; i < n; i++) {
    const char* s;
    uint32_t len;
    kpack_error_t err;
    if (mp_read_str(c, &s, &len) != MP_OK)
      return KPACK_ERROR_INVALID_METADATA;
    char* path = copy_str(s, len, &err);
    if (path == NULL)
      return err;
    if ((err = kp_strlist_push_owned(out, path)) != KPACK_SUCCESS)
      return err;
  }
  return KPACK_SUCCESS;
}

/* kpack_arches: what tools read to know which arches a binary was split
 * for. Checked as strictly as the required keys, so that a tool never acts
 * on a list it half understood. */
static kpack_error_t read_arches(mp_cursor* c, kp_strlist* out) {
  uint32_t n;
  if (mp_read_array(c, &n) != MP_OK || n == 0 || n > KP_HIPK_MAX_ARCHES)
    return KPACK_ERROR_INVALID_METADATA;
  for (uint32_t i = 0; i < n; i++) {
    const char* s;
    uint32_t len;
    kpack_error_t err;
    if (mp_read_str(c, &s, &len) != MP_OK || len == 0 ||
        len > KP_HIPK_MAX_ARCH_LEN)
      return KPACK_ERROR_INVALID_METADATA;
    char* arch = copy_str(s, len, &err);
    if (arch == NULL)
      return err;
    if ((err = kp_strlist_push_owned(out, arch)) != KPACK_SUCCESS)
      return err;
  }
  return KPACK_SUCCESS;
}

/* kpack_record_arches: per record, positions in kpack_arches, kept as
 * positions (stored in the pointer slots) until the whole map is read and
 * resolved by resolve_record_arches(). */
static kpack_error_t read_record_arches(mp_cursor* c, kp_hipk* out) {
  uint32_t n;
  size_t total = 0, cap = 0;
  if (mp_read_array(c, &n) != MP_OK || n == 0 ||
      n > KP_HIPK_MAX_SIZE) /* each record takes a byte at least */
    return KPACK_ERROR_INVALID_METADATA;
  if ((out->record_start = malloc(((size_t)n + 1) * sizeof(uint32_t))) == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  out->record_count = n;
  for (uint32_t r = 0; r < n; r++) {
    uint32_t m;
    out->record_start[r] = (uint32_t)total;
    if (mp_read_array(c, &m) != MP_OK || m > KP_HIPK_MAX_ARCHES)
      return KPACK_ERROR_INVALID_METADATA;
    for (uint32_t i = 0; i < m; i++) {
      uint64_t at;
      if (mp_read_uint(c, &at) != MP_OK || at >= KP_HIPK_MAX_ARCHES)
        return KPACK_ERROR_INVALID_METADATA;
      if (total == cap) {
        size_t grown = cap ? 2 * cap : 16;
        const char** list = realloc(out->record_arches, grown * sizeof(*list));
        if (list == NULL)
          return KPACK_ERROR_OUT_OF_MEMORY;
        out->record_arches = list;
        cap = grown;
      }
      out->record_arches[total++] = (const char*)(uintptr_t)at;
    }
  }
  out->record_start[n] = (uint32_t)total;
  return KPACK_SUCCESS;
}

/* Positions into the strings of kpack_arches, each checked. */
static kpack_error_t resolve_record_arches(kp_hipk* out) {
  size_t total =
      out->record_count > 0 ? out->record_start[out->record_count] : 0;
  for (size_t i = 0; i < total; i++) {
    uintptr_t at = (uintptr_t)out->record_arches[i];
    if (at >= out->arches.count)
      return KPACK_ERROR_INVALID_METADATA;
    out->record_arches[i] = out->arches.items[at];
  }
  return KPACK_SUCCESS;
}

/* One key and its value. HIPK fields are checked; anything else skipped. */
static kpack_error_t read_entry(mp_cursor* c, kp_hipk* out, bool* have_paths,
                                bool* have_arches) {
  const char* key;
  uint32_t len;
  kpack_error_t err;
  mp_status st = mp_read_str(c, &key, &len);
  if (st == MP_WRONG_TYPE) {
    /* A non-string key is no HIPK field; skip it like an unknown one. */
    st = mp_skip(c);
    return st == MP_OK && mp_skip(c) == MP_OK ? KPACK_SUCCESS
                                              : KPACK_ERROR_INVALID_METADATA;
  }
  if (st != MP_OK)
    return KPACK_ERROR_INVALID_METADATA;
  if (mp_str_eq(key, len, "kernel_name")) {
    const char* s;
    uint32_t slen;
    if (out->kernel_name != NULL || mp_read_str(c, &s, &slen) != MP_OK ||
        slen == 0)
      return KPACK_ERROR_INVALID_METADATA;
    out->kernel_name = copy_str(s, slen, &err);
    return err;
  }
  if (mp_str_eq(key, len, "kpack_search_paths")) {
    if (*have_paths)
      return KPACK_ERROR_INVALID_METADATA;
    *have_paths = true;
    return read_search_paths(c, &out->search_paths);
  }
  if (mp_str_eq(key, len, "kpack_arches")) {
    if (*have_arches)
      return KPACK_ERROR_INVALID_METADATA;
    *have_arches = true;
    return read_arches(c, &out->arches);
  }
  if (mp_str_eq(key, len, "kpack_record_arches")) {
    if (out->record_start != NULL)
      return KPACK_ERROR_INVALID_METADATA;
    return read_record_arches(c, out);
  }
  return mp_skip(c) == MP_OK ? KPACK_SUCCESS : KPACK_ERROR_INVALID_METADATA;
}

kpack_error_t kp_hipk_parse(const void* data, size_t size, kp_hipk* out) {
  kpack_error_t err = KPACK_ERROR_INVALID_METADATA;
  mp_cursor c = mp_cursor_make(data, size);
  bool have_paths = false, have_arches = false;
  uint32_t n;
  memset(out, 0, sizeof(*out));
  if (mp_read_map(&c, &n) != MP_OK)
    goto fail;
  for (uint32_t i = 0; i < n; i++)
    if ((err = read_entry(&c, out, &have_paths, &have_arches)) != KPACK_SUCCESS)
      goto fail;
  if (out->kernel_name == NULL || !have_paths ||
      (out->record_count > 0 && !have_arches)) {
    err = KPACK_ERROR_INVALID_METADATA;
    goto fail;
  }
  if ((err = resolve_record_arches(out)) != KPACK_SUCCESS)
    goto fail;
  return KPACK_SUCCESS;

fail:
  kp_hipk_free(out);
  return err;
}

/* Metadata is a few hundred bytes and rarely crosses a page, and the page
 * holding the pointer lies wholly inside the pointer's mapping. Reading it
 * with process_vm_readv (which reports an unreadable address as an error,
 * not a fault) settles most loads without formatting and parsing
 * /proc/self/maps, which costs more the more a process has mapped. True if
 * it settled the load, with *err; false to take the slow path (metadata
 * running past the page, no such syscall, a seccomp filter, anything). */
static bool read_within_page(const void* metadata, kp_hipk* out,
                             kpack_error_t* err) {
  uint8_t copy[4096];
  uintptr_t addr = (uintptr_t)metadata;
  size_t n = sizeof(copy) - addr % sizeof(copy); /* to a 4 KiB boundary */
  struct iovec local = {copy, n};
  struct iovec remote = {(void*)addr, n};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)n)
    return false;
  *err = kp_hipk_parse(copy, n, out);
  return *err != KPACK_ERROR_INVALID_METADATA;
}

kpack_error_t kp_hipk_read(const void* metadata, kp_hipk* out) {
  kpack_error_t err = KPACK_ERROR_INVALID_METADATA;
  char* line = NULL;
  kp_mapping m;
  uintptr_t addr = (uintptr_t)metadata;
  if (read_within_page(metadata, out, &err))
    return err;
  memset(out, 0, sizeof(*out));
  if (kp_procmaps_find(addr, &m, &line) != KPACK_SUCCESS || !m.readable)
    goto done;
  size_t bound = m.end - addr; /* addr < m.end: the mapping contains it */
  if (bound > KP_HIPK_MAX_SIZE)
    bound = KP_HIPK_MAX_SIZE;
  err = kp_hipk_parse(metadata, bound, out);
done:
  free(line);
  return err;
}

void kp_hipk_free(kp_hipk* hipk) {
  free(hipk->kernel_name);
  hipk->kernel_name = NULL;
  kp_strlist_free(&hipk->search_paths);
  kp_strlist_free(&hipk->arches);
  free(hipk->record_arches);
  free(hipk->record_start);
  hipk->record_arches = NULL;
  hipk->record_start = NULL;
  hipk->record_count = 0;
}

void kp_hipk_record_arches(const kp_hipk* hipk, uint64_t co_index,
                           const char* const** arches, size_t* count) {
  *arches = (const char* const*)hipk->arches.items;
  *count = hipk->arches.count;
  if (hipk->record_count == 0)
    return;
  if (co_index >= hipk->record_count) {
    *arches = NULL;
    *count = 0;
    return;
  }
  uint32_t from = hipk->record_start[co_index];
  *count = hipk->record_start[co_index + 1] - from;
  *arches = *count > 0 ? hipk->record_arches + from : NULL;
}
