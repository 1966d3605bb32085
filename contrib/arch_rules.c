/* SPDX-License-Identifier: MIT
 *
 * Rule files for `kpack split --per-arch`: a strict line parser (every
 * error names FILE:LINE) and the path patterns the rules are written in.
 */
#include "arch_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define AR_ARCH "<arch>"
#define AR_ARCH_LEN 6
#define AR_MAX_PROCESSOR 24

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

static bool match_at(const char* p, const char* s, const char** arch_at,
                     size_t* arch_len) {
  for (;;) {
    if (*p == '\0')
      return *s == '\0';
    if (p[0] == '*' && p[1] == '*') {
      const char* rest = p + 2;
      /* "**" + "/": no directory at all is also a match. */
      if (*rest == '/' && match_at(rest + 1, s, arch_at, arch_len))
        return true;
      for (const char* t = s;; t++) {
        if (match_at(rest, t, arch_at, arch_len))
          return true;
        if (*t == '\0')
          return false;
      }
    }
    if (*p == '*') {
      for (const char* t = s;; t++) {
        if (match_at(p + 1, t, arch_at, arch_len))
          return true;
        if (*t == '\0' || *t == '/')
          return false;
      }
    }
    if (*p == '{') {
      const char* end = group_end(p);
      if (end == NULL)
        return false;
      /* Each alternative, followed by what comes after the group. */
      for (const char* alt = p + 1; alt <= end;) {
        size_t n = strcspn(alt, ",}");
        size_t len = n + strlen(end + 1);
        char* joined = malloc(len + 1);
        if (joined == NULL)
          return false;
        memcpy(joined, alt, n);
        strcpy(joined + n, end + 1);
        bool ok = match_at(joined, s, arch_at, arch_len);
        free(joined);
        if (ok)
          return true;
        alt += n + 1;
      }
      return false;
    }
    if (strncmp(p, AR_ARCH, AR_ARCH_LEN) == 0) {
      size_t max = strcspn(s, "/._:");
      if (max > AR_MAX_PROCESSOR)
        max = AR_MAX_PROCESSOR;
      for (size_t n = max; n >= 4; n--) {
        if (!kpack_processor_is_known(s, n))
          continue;
        if (match_at(p + AR_ARCH_LEN, s + n, arch_at, arch_len)) {
          if (arch_at != NULL) {
            *arch_at = s;
            *arch_len = n;
          }
          return true;
        }
      }
      return false;
    }
    if (*s == '\0' || *s == '/' ? *p != *s : (*p != '?' && *p != *s))
      return false;
    p++;
    s++;
  }
}

bool ar_pattern_match(const char* pattern, const char* rel,
                      const char** arch_at, size_t* arch_len) {
  return match_at(pattern, rel, arch_at, arch_len);
}

/* A syntax problem of `pattern`, or NULL. `captures` gets its <arch>
 * count. */
static const char* pattern_problem(const char* pattern, size_t* captures) {
  *captures = 0;
  if (pattern[0] == '/')
    return "a pattern is relative to the tree's root (no leading '/')";
  for (const char* p = pattern; *p; p++) {
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
    } else if (p[0] == '*' && p[1] == '*' && p[2] == '*') {
      return "'***' means nothing";
    }
  }
  return NULL;
}

static bool add_rule(ar_rules* rules, const char* where, const char* kind,
                     const char* pattern) {
  ar_rule* items =
      cli_grow(rules->items, rules->count, &rules->cap, sizeof(*items), 16);
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

bool ar_rules_load(ar_rules* rules, const char* path) {
  FILE* f = fopen(path, "r");
  char* line = NULL;
  size_t cap = 0, number = 0;
  bool ok = f != NULL;
  if (f == NULL)
    cli_error("%s: %s", path, strerror(errno));
  for (ssize_t n; ok && (n = getline(&line, &cap, f)) >= 0;) {
    char where[64 + 4096];
    number++;
    snprintf(where, sizeof(where), "%s:%zu", path, number);
    if (n > 0 && line[n - 1] == '\n')
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
        cli_error(
            "%s: '%s' is not a GPU processor (KIND is arch, generic or a "
            "processor such as gfx90a)",
            where, kind);
      else if (is_arch && captures != 1)
        cli_error("%s: an arch rule's pattern holds one <arch> (it has %zu)",
                  where, captures);
      else if (!is_arch && captures != 0)
        cli_error("%s: only an arch rule's pattern holds <arch>", where);
      else if (!add_rule(rules, where, kind, pattern))
        cli_error("out of memory");
      else
        continue;
      ok = false;
    } else {
      cli_error("%s: %s", where, problem);
      ok = false;
    }
  }
  if (ok && ferror(f)) {
    cli_error("%s: %s", path, strerror(errno));
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
    if (!match_at(r->pattern, rel, &at, &len))
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
