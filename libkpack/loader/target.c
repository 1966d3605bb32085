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

/* LLVM's generic targets (AMDGPUUsage, "Generic Processors"): a code
 * object built for one (code object v6 and later) runs on every concrete
 * processor of its family. e_flags carry its generic version
 * (EF_AMDGPU_GENERIC_VERSION, bits 24-31), raised by LLVM whenever code
 * generation for the family changes incompatibly; `since` is the first
 * version that covers the members listed (every family is at 1 today). */
// clang-format off
static const struct {
  const char* generic;
  unsigned since;
  const char* members[9];
} generic_targets[] = {
    {"gfx9-generic", 1,
     {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}},
    {"gfx9-4-generic", 1, {"gfx940", "gfx941", "gfx942", "gfx950"}},
    {"gfx10-1-generic", 1, {"gfx1010", "gfx1011", "gfx1012", "gfx1013"}},
    {"gfx10-3-generic", 1,
     {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035",
      "gfx1036"}},
    {"gfx11-generic", 1,
     {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
      "gfx1152", "gfx1153"}},
    {"gfx12-generic", 1, {"gfx1200", "gfx1201"}},
};
// clang-format on

static bool name_is(const char* s, size_t len, const char* name) {
  return strlen(name) == len && memcmp(s, name, len) == 0;
}

bool kp_target_is_generic(const char* processor, size_t len) {
  for (size_t g = 0; g < sizeof(generic_targets) / sizeof(*generic_targets);
       g++)
    if (name_is(processor, len, generic_targets[g].generic))
      return true;
  return false;
}

/* Whether processor `t` (a generic name) covers concrete processor `a` at
 * generic version `version` (0: not known, taken as current). */
static bool generic_covers(const char* t, size_t t_len, const char* a,
                           size_t a_len, unsigned version) {
  for (size_t g = 0; g < sizeof(generic_targets) / sizeof(*generic_targets);
       g++) {
    if (!name_is(t, t_len, generic_targets[g].generic))
      continue;
    if (version != 0 && version < generic_targets[g].since)
      return false;
    for (size_t m = 0; m < 9 && generic_targets[g].members[m] != NULL; m++)
      if (name_is(a, a_len, generic_targets[g].members[m]))
        return true;
  }
  return false;
}

/* A device reaches `arch` when `arch` is its processor plus a subset of its
 * own flags; a device may set every flag `arch` leaves out either way. So a
 * code object runs on all of them exactly when its processor is `arch`'s
 * (or a generic target covering it) and each flag it requires is one `arch`
 * fixes too. */
bool kp_target_serves(const char* target, const char* arch) {
  return kp_target_serves_version(target, 0, arch);
}

/* What both matches below start with: `target` and `arch` stripped of
 * their triple and split into features. False with *matched set when that
 * decides: an empty name never matches, names that do not split match only
 * as equal strings, and a processor other than `arch`'s matches only when
 * it is a generic one covering it. True when the features decide. */
static bool processors_match(const char* target, const char* arch,
                             unsigned generic_version, const char** t,
                             feature_split* ts, const char** a,
                             feature_split* as, bool* matched) {
  *t = kp_target_strip_prefix(target);
  *a = kp_target_strip_prefix(arch);
  *matched = false;
  if (**t == '\0' || **t == ':' || **a == '\0' || **a == ':')
    return false;
  if (!split_features(*t, ts) || !split_features(*a, as)) {
    *matched = strcmp(*t, *a) == 0;
    return false;
  }
  bool same = ts->proc_len == as->proc_len && memcmp(*t, *a, ts->proc_len) == 0;
  return same ||
         generic_covers(*t, ts->proc_len, *a, as->proc_len, generic_version);
}

bool kp_target_serves_version(const char* target, unsigned generic_version,
                              const char* arch) {
  const char *t, *a;
  feature_split ts, as;
  bool matched;
  if (!processors_match(target, arch, generic_version, &t, &ts, &a, &as,
                        &matched))
    return matched;
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

/* The length of a feature's name: "xnack" of "xnack+" or "xnack-". */
static size_t feature_name_len(const char* feature, size_t len) {
  return len > 0 && (feature[len - 1] == '+' || feature[len - 1] == '-')
             ? len - 1
             : len;
}

/* Some agent `agent` describes could be served `target`: the loader would
 * reach an archive of `target` from that agent's compatible targets, or
 * `target` is a generic target covering its processor. The features `agent`
 * states are the agent's; those it leaves out may be set either way. So the
 * processors match (or `target`'s is generic and covers `agent`'s) and no
 * feature `target` states is set the other way by `agent`. */
bool kp_target_may_serve(const char* target, const char* agent) {
  const char *t, *a;
  feature_split ts, as;
  bool matched;
  if (!processors_match(target, agent, 0, &t, &ts, &a, &as, &matched))
    return matched;
  for (size_t i = 0; i < ts.count; i++) {
    const char* tf = t + ts.start[i];
    size_t name = feature_name_len(tf, ts.len[i]);
    for (size_t j = 0; j < as.count; j++) {
      const char* af = a + as.start[j];
      bool same_feature =
          feature_name_len(af, as.len[j]) == name && memcmp(tf, af, name) == 0;
      if (same_feature &&
          (as.len[j] != ts.len[i] || memcmp(tf, af, ts.len[i]) != 0))
        return false;
    }
  }
  return true;
}

KPACK_API bool kpack_target_may_serve(const char* target, const char* agent) {
  return target != NULL && agent != NULL && kp_target_may_serve(target, agent);
}

KPACK_API bool kpack_target_serves(const char* target, const char* arch) {
  return target != NULL && arch != NULL && kp_target_serves(target, arch);
}

KPACK_API bool kpack_target_may_serve_any(const char* target,
                                          const char* const* agents,
                                          size_t count, bool* matched) {
  bool keep = count == 0;
  for (size_t i = 0; target != NULL && agents != NULL && i < count; i++)
    if (kpack_target_may_serve(target, agents[i])) {
      keep = true;
      if (matched == NULL)
        break;
      matched[i] = true;
    }
  return keep;
}
