/* SPDX-License-Identifier: MIT
 *
 * Rule files for `kpack split --per-arch`: a strict line parser (every
 * error names FILE:LINE) and the path patterns the rules are written in.
 */
#include "producer/arch_rules.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "rocm_kpack/kpack_ext.h"

#define AR_ARCH "<arch>"
#define AR_ARCH_LEN 6
#define AR_MAX_PROCESSOR 24
/* Wildcards ("*", "**", "{...}", <arch>) a pattern may hold: each costs the
 * matcher a bit per character of a path. */
#define AR_MAX_WILDCARDS 16
#define AR_STRING(x) #x
#define AR_NUMBER(x) AR_STRING(x)

/* The end of the "{...}" group that opens at `p`, at its "}"; NULL when
 * it is not closed or nests. */
static const char* group_end(const char* p) {
  for (p++; *p; p++) {
    if (*p == '}')
      return p;
    if (*p == '{')
      return NULL;
  }
  return NULL;
}

/* A match remembers where the rest of the pattern failed, so that each
 * wildcard is tried at each place of the path once: without it,
 * "*a*a*a*a*a*b" against a long name of a's backtracks exponentially.
 * Failures only: whether the pattern matches on from a wildcard at a place
 * does not depend on how the match got there, and a success ends it. */
typedef struct ar_matcher {
  const char* rel;
  size_t stride; /* bits a wildcard has: one per place, strlen(rel) + 1 */
  const char* wildcards[AR_MAX_WILDCARDS]; /* in the order first reached */
  size_t wildcard_count;
  unsigned char* failed; /* stride bits a wildcard; NULL until one is met */
  bool no_memory;        /* then the match goes on without remembering */
  const char** arch_at;
  size_t* arch_len;
} ar_matcher;

/* The wildcard at `p`'s row of m->failed, or SIZE_MAX when there is none
 * to keep (more wildcards than a loaded pattern may hold, no memory). */
static size_t wildcard_row(ar_matcher* m, const char* p) {
  for (size_t i = 0; i < m->wildcard_count; i++)
    if (m->wildcards[i] == p)
      return i;
  if (m->wildcard_count == AR_MAX_WILDCARDS || m->no_memory)
    return SIZE_MAX;
  if (m->failed == NULL) {
    m->failed = calloc((AR_MAX_WILDCARDS * m->stride + 7) / 8, 1);
    if (m->failed == NULL) {
      m->no_memory = true;
      return SIZE_MAX;
    }
  }
  m->wildcards[m->wildcard_count] = p;
  return m->wildcard_count++;
}

static bool known_failed(const ar_matcher* m, size_t row, const char* s) {
  if (row == SIZE_MAX)
    return false;
  size_t bit = row * m->stride + (size_t)(s - m->rel);
  return (m->failed[bit / 8] >> (bit % 8)) & 1;
}

static void remember_failed(ar_matcher* m, size_t row, const char* s) {
  if (row == SIZE_MAX)
    return;
  size_t bit = row * m->stride + (size_t)(s - m->rel);
  m->failed[bit / 8] |= (unsigned char)(1u << (bit % 8));
}

/* One character of the pattern against one of the path: "?" is any but
 * "/"; the end of the path matches nothing. */
static bool char_matches(char p, char s) {
  if (s == '\0' || s == '/')
    return p == s;
  return p == '?' || p == s;
}

static bool match_at(ar_matcher* m, const char* p, const char* s);

/* "*" (or "**" when `any`) at `p`, `rest` after it, from `s` on: the rest
 * at each place the wildcard can stop at, the nearest first. The places
 * from `s` up to where it stops all fail together: from a later one the
 * wildcard reaches no other place. */
static bool match_star(ar_matcher* m, const char* p, const char* rest, bool any,
                       const char* s) {
  size_t row = wildcard_row(m, p);
  const char* t = s;
  for (;; t++) {
    if (known_failed(m, row, t))
      break;
    if (match_at(m, rest, t))
      return true;
    if (*t == '\0' || (!any && *t == '/'))
      break;
  }
  for (const char* u = s; u <= t; u++)
    remember_failed(m, row, u);
  return false;
}

/* "{a,b,}" at `p` from `s`: each alternative (plain characters and "?",
 * as the loader allows), followed by what comes after the group. */
static bool match_group(ar_matcher* m, const char* p, const char* s) {
  const char* end = group_end(p);
  if (end == NULL)
    return false;
  size_t row = wildcard_row(m, p);
  if (known_failed(m, row, s))
    return false;
  for (const char* alt = p + 1; alt <= end;) {
    size_t n = strcspn(alt, ",}");
    size_t same = 0;
    while (same < n && char_matches(alt[same], s[same]))
      same++;
    if (same == n && match_at(m, end + 1, s + n))
      return true;
    alt += n + 1;
  }
  remember_failed(m, row, s);
  return false;
}

/* "<arch>" at `p` from `s`: the longest known processor that lets the
 * rest match. */
static bool match_arch(ar_matcher* m, const char* p, const char* s) {
  size_t row = wildcard_row(m, p);
  if (known_failed(m, row, s))
    return false;
  size_t max = strcspn(s, "/._:");
  if (max > AR_MAX_PROCESSOR)
    max = AR_MAX_PROCESSOR;
  for (size_t n = max; n >= 4; n--) {
    if (!kpack_processor_is_known(s, n))
      continue;
    if (match_at(m, p + AR_ARCH_LEN, s + n)) {
      if (m->arch_at != NULL) {
        *m->arch_at = s;
        *m->arch_len = n;
      }
      return true;
    }
  }
  remember_failed(m, row, s);
  return false;
}

static bool match_at(ar_matcher* m, const char* p, const char* s) {
  for (;;) {
    if (*p == '\0')
      return *s == '\0';
    if (*p == '*') {
      bool any = p[1] == '*';
      const char* rest = p + (any ? 2 : 1);
      /* "**" + "/": no directory at all is also a match. */
      if (any && *rest == '/' && match_at(m, rest + 1, s))
        return true;
      return match_star(m, p, rest, any, s);
    }
    if (*p == '{')
      return match_group(m, p, s);
    if (strncmp(p, AR_ARCH, AR_ARCH_LEN) == 0)
      return match_arch(m, p, s);
    if (!char_matches(*p, *s))
      return false;
    p++;
    s++;
  }
}

bool ar_pattern_match(const char* pattern, const char* rel,
                      const char** arch_at, size_t* arch_len) {
  ar_matcher m = {.rel = rel,
                  .stride = strlen(rel) + 1,
                  .arch_at = arch_at,
                  .arch_len = arch_len};
  bool ok = match_at(&m, pattern, rel);
  free(m.failed);
  return ok;
}

/* A syntax problem of `pattern`, or NULL. `captures` gets its <arch>
 * count. */
static const char* pattern_problem(const char* pattern, size_t* captures) {
  size_t wildcards = 0;
  *captures = 0;
  if (pattern[0] == '/')
    return "a pattern is relative to the tree's root (no leading '/')";
  for (const char* p = pattern; *p; p++) {
    if (*p == '{' || *p == '<' || *p == '*')
      wildcards++;
    if (*p == '{') {
      const char* end = group_end(p);
      if (end == NULL)
        return "a '{' without its '}' (groups do not nest)";
      for (const char* q = p; q < end; q++)
        if (*q == '<' || *q == '*')
          return "'*' and <arch> cannot be inside '{...}'";
      p = end;
    } else if (*p == '}') {
      return "a '}' without its '{'";
    } else if (*p == '<') {
      if (strncmp(p, AR_ARCH, AR_ARCH_LEN) != 0)
        return "'<' opens nothing but <arch>";
      ++*captures;
      p += AR_ARCH_LEN - 1;
    } else if (p[0] == '*' && p[1] == '*') {
      if (p[2] == '*')
        return "'***' means nothing";
      p++;
    }
  }
  if (wildcards > AR_MAX_WILDCARDS)
    return "more than " AR_NUMBER(
        AR_MAX_WILDCARDS) " wildcards ('*', '**', '{...}' and <arch>)";
  return NULL;
}

static bool add_rule(ar_rules* rules, const char* where, const char* kind,
                     const char* pattern) {
  ar_rule* items =
      kp_grow(rules->items, rules->count, &rules->cap, sizeof(*items), 16);
  if (items == NULL)
    return false;
  rules->items = items;
  ar_rule* r = &rules->items[rules->count];
  *r = (ar_rule){.pattern = strdup(pattern),
                 .where = strdup(where),
                 .generic = strcmp(kind, "generic") == 0};
  bool ok = r->pattern != NULL && r->where != NULL;
  if (ok && !r->generic && strcmp(kind, "arch") != 0)
    ok = (r->arch = strdup(kind)) != NULL;
  if (!ok) {
    free(r->pattern);
    free(r->where);
    return false;
  }
  rules->count++;
  return true;
}

bool ar_rules_load(ar_rules* rules, const char* path, kp_report* report,
                   kpack_error_t status) {
  FILE* f = fopen(path, "r");
  char* line = NULL;
  size_t cap = 0, number = 0;
  bool ok = f != NULL;
  if (f == NULL)
    kp_error(report, path, status, errno, "%s: %s", path, strerror(errno));
  for (ssize_t n; ok && (n = getline(&line, &cap, f)) >= 0;) {
    char where[64 + 4096];
    number++;
    snprintf(where, sizeof(where), "%s:%zu", path, number);
    if (n > 0 && line[n - 1] == '\n')
      line[--n] = '\0';
    if (n > 0 && line[n - 1] == '\r') /* a file saved with CRLF endings */
      line[--n] = '\0';
    char* p = line + strspn(line, " \t");
    if (*p == '\0' || *p == '#')
      continue;
    char* kind = p;
    p += strcspn(p, " \t");
    if (*p != '\0')
      *p++ = '\0';
    p += strspn(p, " \t");
    char* pattern = p;
    p += strcspn(p, " \t");
    char* extra = p + strspn(p, " \t");
    *p = '\0';
    size_t captures = 0;
    const char* problem = NULL;
    if (*pattern == '\0')
      problem = "a rule is KIND PATTERN; no PATTERN";
    else if (*extra != '\0' && *extra != '#')
      problem = "text after the pattern (patterns hold no blanks)";
    else
      problem = pattern_problem(pattern, &captures);
    if (problem == NULL) {
      bool is_arch = strcmp(kind, "arch") == 0;
      bool is_generic = strcmp(kind, "generic") == 0;
      if (!is_arch && !is_generic &&
          !kpack_processor_is_known(kind, strlen(kind)))
        kp_error(report, path, status, 0,
                 "%s: '%s' is not a GPU processor (KIND is arch, generic or "
                 "a processor such as gfx90a)",
                 where, kind);
      else if (is_arch && captures != 1)
        kp_error(report, path, status, 0,
                 "%s: an arch rule's pattern holds one <arch> (it has %zu)",
                 where, captures);
      else if (!is_arch && captures != 0)
        kp_error(report, path, status, 0,
                 "%s: only an arch rule's pattern holds <arch>", where);
      else if (!add_rule(rules, where, kind, pattern))
        kp_out_of_memory(report);
      else
        continue;
      ok = false;
    } else {
      kp_error(report, path, status, 0, "%s: %s", where, problem);
      ok = false;
    }
  }
  if (ok && ferror(f)) {
    kp_error(report, path, status, errno, "%s: %s", path, strerror(errno));
    ok = false;
  }
  free(line);
  if (f != NULL)
    fclose(f);
  return ok;
}

const ar_rule* ar_rules_match(const ar_rules* rules, const char* rel,
                              char* processor, size_t size) {
  for (size_t i = 0; i < rules->count; i++) {
    const ar_rule* r = &rules->items[i];
    const char* at = NULL;
    size_t len = 0;
    if (!ar_pattern_match(r->pattern, rel, &at, &len))
      continue;
    if (r->arch != NULL)
      snprintf(processor, size, "%s", r->arch);
    else if (!r->generic)
      snprintf(processor, size, "%.*s", (int)len, at);
    return r;
  }
  return NULL;
}

void ar_rules_free(ar_rules* rules) {
  for (size_t i = 0; i < rules->count; i++) {
    free(rules->items[i].pattern);
    free(rules->items[i].arch);
    free(rules->items[i].where);
  }
  free(rules->items);
  *rules = (ar_rules){0};
}
