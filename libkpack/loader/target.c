/* SPDX-License-Identifier: MIT
 *
 * Target matching: expands a device ISA name into the archive architectures
 * that may serve it, most specific first, so the loader can prefer an exact
 * "gfx942:sramecc+:xnack-" build and fall back to plain "gfx942".
 */
#include "loader/target.h"

#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack_target.h"

/* Longer names yield only themselves: real ISA names are a few dozen bytes,
 * and the subset strings of a long name would multiply its size by 2^n. */
#define KP_TARGET_MAX_NAME 255

static const char* const triple_prefixes[] = {
    "hipv4-amdgcn-amd-amdhsa--",
    "amdgcn-amd-amdhsa--",
};

const char* kp_target_strip_prefix(const char* isa) {
  for (size_t i = 0; i < sizeof(triple_prefixes) / sizeof(*triple_prefixes);
       i++) {
    size_t n = strlen(triple_prefixes[i]);
    if (strncmp(isa, triple_prefixes[i], n) == 0)
      return isa + n;
  }
  return isa;
}

/* Where each ":" feature flag of a name starts and how long it is. */
typedef struct feature_split {
  size_t proc_len;
  size_t count;
  size_t start[KP_TARGET_MAX_FEATURES];
  size_t len[KP_TARGET_MAX_FEATURES];
} feature_split;

/* False when the name has an empty feature or too many to expand. */
static bool split_features(const char* name, feature_split* s) {
  s->proc_len = strcspn(name, ":");
  s->count = 0;
  size_t pos = s->proc_len;
  while (name[pos] == ':') {
    pos++;
    size_t len = strcspn(name + pos, ":");
    if (len == 0 || s->count == KP_TARGET_MAX_FEATURES)
      return false;
    s->start[s->count] = pos;
    s->len[s->count] = len;
    s->count++;
    pos += len;
  }
  return true;
}

/* Appends `str` unless an equal name is already listed (possible when a
 * name repeats a flag). `area` has room: every name fits in the input's
 * length, reserved per slot. */
static void add_name(kp_target_list* list, char** area, const char* str,
                     size_t len) {
  for (size_t i = 0; i < list->count; i++)
    if (strlen(list->names[i]) == len && memcmp(list->names[i], str, len) == 0)
      return;
  memcpy(*area, str, len);
  (*area)[len] = '\0';
  list->names[list->count++] = *area;
  *area += len + 1;
}

kpack_error_t kp_target_compatible(const char* isa, kp_target_list* out) {
  const char* name = kp_target_strip_prefix(isa);
  size_t name_len = strlen(name);
  feature_split split;
  bool expand = name_len <= KP_TARGET_MAX_NAME && split_features(name, &split);

  out->names = NULL;
  out->count = 0;
  if (name_len == 0 || name[0] == ':')
    return KPACK_SUCCESS; /* no processor: nothing can match */
  size_t slots = expand ? (size_t)1 << split.count : 1;
  /* The pointer array, then `slots` strings of at most name_len bytes. */
  out->names = malloc(slots * sizeof(char*) + slots * (name_len + 1));
  if (out->names == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  char* area = (char*)(out->names + slots);
  if (!expand) {
    add_name(out, &area, name, name_len);
    return KPACK_SUCCESS;
  }

  char buf[KP_TARGET_MAX_NAME + 1];
  size_t n = split.count;
  for (size_t k = n + 1; k-- > 0;) {
    /* k-subsets of feature positions in lexicographic order. */
    size_t pick[KP_TARGET_MAX_FEATURES];
    for (size_t i = 0; i < k; i++)
      pick[i] = i;
    for (;;) {
      size_t len = split.proc_len;
      memcpy(buf, name, len);
      for (size_t i = 0; i < k; i++) {
        buf[len++] = ':';
        memcpy(buf + len, name + split.start[pick[i]], split.len[pick[i]]);
        len += split.len[pick[i]];
      }
      add_name(out, &area, buf, len);
      /* Advance the rightmost position that still has room. */
      size_t i = k;
      while (i > 0 && pick[i - 1] == n - k + i - 1)
        i--;
      if (i == 0)
        break;
      pick[i - 1]++;
      for (size_t j = i; j < k; j++)
        pick[j] = pick[j - 1] + 1;
    }
  }
  return KPACK_SUCCESS;
}

void kp_target_list_free(kp_target_list* list) {
  free(list->names);
  list->names = NULL;
  list->count = 0;
}

/* A device reaches `arch` when `arch` is its processor plus a subset of its
 * own flags; a device may set every flag `arch` leaves out either way. So a
 * code object runs on all of them exactly when each flag it requires is one
 * `arch` fixes too. */
bool kp_target_serves(const char* target, const char* arch) {
  const char* t = kp_target_strip_prefix(target);
  const char* a = kp_target_strip_prefix(arch);
  feature_split ts, as;
  if (*t == '\0' || *t == ':' || *a == '\0' || *a == ':')
    return false;
  if (!split_features(t, &ts) || !split_features(a, &as))
    return strcmp(t, a) == 0;
  if (ts.proc_len != as.proc_len || memcmp(t, a, ts.proc_len) != 0)
    return false;
  for (size_t i = 0; i < ts.count; i++) {
    bool found = false;
    for (size_t j = 0; j < as.count && !found; j++)
      found = ts.len[i] == as.len[j] &&
              memcmp(t + ts.start[i], a + as.start[j], ts.len[i]) == 0;
    if (!found)
      return false;
  }
  return true;
}

KPACK_API bool kpack_target_serves(const char* target, const char* arch) {
  return target != NULL && arch != NULL && kp_target_serves(target, arch);
}
