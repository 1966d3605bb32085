/* SPDX-License-Identifier: MIT
 *
 * The rules `kpack split --per-arch` places data files by: which files of
 * an install belong to one GPU processor by their path (Tensile libraries,
 * MIOpen databases...), read from rule files (docs/split.md, "Rules").
 */
#ifndef KPACK_PRODUCER_ARCH_RULES_H
#define KPACK_PRODUCER_ARCH_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/report.h"

/* One line of a rule file. `arch` is the processor the rule names (a
 * KIND that is a processor), NULL for a rule that captures it (<arch>)
 * or places files in the generic tree. */
typedef struct ar_rule {
  char* pattern;
  char* arch;
  bool generic;
  char* where; /* "FILE:LINE", for messages and --dry-run */
} ar_rule;

/* Rules in the order they were read; the first that matches decides. */
typedef struct ar_rules {
  ar_rule* items;
  size_t count, cap;
} ar_rules;

/* Appends the rules of `path`. A line is blank, a "#" comment, or
 *   KIND PATTERN
 * KIND: "arch" (PATTERN holds one <arch>, which names the processor),
 * "generic" (the file stays generic), or a processor ("gfx90a").
 * False, after an error of status `status` to `report` naming FILE:LINE,
 * on a syntax error, a pattern of more than 16 wildcards ("*", "**",
 * "{...}", <arch>), an unknown KIND or processor, or a file that cannot be
 * read; the rules before that line stay in `rules`. */
bool ar_rules_load(ar_rules* rules, const char* path, kp_report* report,
                   kpack_error_t status);

/* The first rule that matches `rel` (a path below a tree's root), or
 * NULL. For a rule other than "generic", `processor` (at least 32 bytes)
 * gets the processor it names. */
const ar_rule* ar_rules_match(const ar_rules* rules, const char* rel,
                              char* processor, size_t size);

void ar_rules_free(ar_rules* rules);

/* Whether PATTERN `pattern` matches `rel`: "*" any characters but "/",
 * "**" any characters, "**" followed by "/" also no directory at all,
 * "?" one character but "/", "{a,b,}" one of the alternatives (plain
 * characters and "?"), "<arch>" a known processor (the longest that lets
 * the rest match first); its place in `rel` goes to *arch_at and
 * *arch_len. Each wildcard is tried at each place of `rel` at most once
 * (for the first 16), so the time grows with the lengths, not
 * exponentially. */
bool ar_pattern_match(const char* pattern, const char* rel,
                      const char** arch_at, size_t* arch_len);

#endif /* KPACK_PRODUCER_ARCH_RULES_H */
