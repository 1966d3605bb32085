/* SPDX-License-Identifier: MIT
 *
 * Driver of the rule files of `kpack split --per-arch` (see fuzz_drivers.h):
 * a rule file is loaded and paths are placed by it, and each placement is
 * checked against what libkpack/producer/arch_rules.h promises. Apart from
 * fuzz_drivers.c because only its harness and the replay suite reach that
 * internal header.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_drivers.h"
#include "producer/arch_rules.h"
#include "rocm_kpack/kpack_ext.h"

/* ar_rules_match() needs at least 32 bytes; the byte after the buffer
 * shows whether it wrote past them. */
#define KF_PROCESSOR_SIZE 32
#define KF_UNWRITTEN '\x7f'

/* Paths the shipped rules (contrib/split-rules.conf) are written for, and
 * a few they must leave alone, tried with every rule file. */
static const char* const fixed_paths[] = {
    "opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx90a.dat",
    "opt/rocm/lib/rocblas/library/Kernels.so-000-gfx942-xnack-.hsaco",
    "opt/rocm/lib/hipblaslt/library/TensileLibrary_Type_HH_fallback.dat",
    "opt/rocm/lib/hipsparselt/library/gfx1100/extop.co",
    "opt/rocm/share/miopen/db/gfx90a68.kdb",
    "opt/rocm/share/miopen/db/gfx1030_36.HIP.fdb.txt",
    "opt/rocm/lib/libMIOpenCK_convfwd_gfx942.so.1",
    "opt/rocm/lib/aotriton.images/amd-gfx942/flash/attn_fwd.aks2",
    "opt/rocm/lib/libdevice_conv_operations_gfx90a_xnackp.a",
    "opt/rocm/share/hipkernelprovider/engines/test_arch_content/x/gfx1100/a",
    "opt/rocm/lib/librocblas.so.4",
    "gfx90a",
    "",
};

/* A broken promise is a finding: abort() so libFuzzer records the input. */
static void require(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "kpack fuzz: broken invariant: %s\n", what);
    abort();
  }
}

static size_t count_captures(const char* pattern) {
  size_t n = 0;
  for (const char* p = pattern; (p = strstr(p, "<arch>")) != NULL; p++)
    n++;
  return n;
}

/* What the loader promises of every rule it kept, failed load or not. */
static void check_rules(const ar_rules* rules, const char* path) {
  size_t path_len = strlen(path);
  for (size_t i = 0; i < rules->count; i++) {
    const ar_rule* r = &rules->items[i];
    require(r->pattern != NULL && r->pattern[0] != '\0', "a rule's pattern");
    require(r->where != NULL && strncmp(r->where, path, path_len) == 0 &&
                r->where[path_len] == ':',
            "a rule's FILE:LINE");
    require(!(r->generic && r->arch != NULL), "a generic rule's processor");
    if (r->arch != NULL)
      require(kpack_processor_is_known(r->arch, strlen(r->arch)),
              "a rule naming an unknown processor");
    bool captures = !r->generic && r->arch == NULL;
    require(count_captures(r->pattern) == (captures ? 1 : 0),
            "an arch rule without one <arch>, or another rule with one");
  }
}

/* Places `rel` by `rules` and checks the answer against a walk of
 * ar_pattern_match(). Returns whether a rule matched. */
static bool check_placement(const ar_rules* rules, const char* rel) {
  const ar_rule* first = NULL;
  const char* at = NULL;
  size_t len = 0;
  for (size_t i = 0; i < rules->count && first == NULL; i++) {
    at = NULL;
    len = 0;
    if (ar_pattern_match(rules->items[i].pattern, rel, &at, &len))
      first = &rules->items[i];
  }
  char processor[KF_PROCESSOR_SIZE + 1];
  memset(processor, KF_UNWRITTEN, sizeof(processor));
  const ar_rule* r = ar_rules_match(rules, rel, processor, KF_PROCESSOR_SIZE);
  require(r == first, "the rule matched is not the first that matches");
  require(processor[KF_PROCESSOR_SIZE] == KF_UNWRITTEN,
          "the processor written past its buffer");
  if (r == NULL || r->generic) {
    require(processor[0] == KF_UNWRITTEN, "a processor for a generic file");
    return r != NULL;
  }
  size_t n = strnlen(processor, KF_PROCESSOR_SIZE);
  require(n < KF_PROCESSOR_SIZE, "a processor that does not fit its buffer");
  require(kpack_processor_is_known(processor, n), "an unknown processor");
  if (r->arch != NULL) {
    require(strcmp(processor, r->arch) == 0, "not the rule's processor");
    return true;
  }
  size_t rel_len = strlen(rel);
  require(at != NULL && at >= rel && len <= rel_len &&
              (size_t)(at - rel) <= rel_len - len,
          "<arch> matched outside the path");
  require(len == n && memcmp(processor, at, n) == 0,
          "the processor is not what <arch> matched");
  return true;
}

static int rules_fd = -1;
static char rules_path[64];

size_t kf_rules_input(const uint8_t* data, size_t size) {
  if (rules_fd < 0) {
    rules_fd = memfd_create("kpack-fuzz-rules", MFD_CLOEXEC);
    require(rules_fd >= 0, "memfd_create");
    snprintf(rules_path, sizeof(rules_path), "/proc/self/fd/%d", rules_fd);
  }
  const uint8_t* nul = memchr(data, '\0', size);
  size_t text_size = nul != NULL ? (size_t)(nul - data) : size;
  require(ftruncate(rules_fd, 0) == 0, "truncating the rule file");
  for (size_t done = 0; done < text_size;) {
    ssize_t n = pwrite(rules_fd, data + done, text_size - done, (off_t)done);
    if (n < 0 && errno == EINTR)
      continue;
    require(n > 0, "writing the rule file");
    done += (size_t)n;
  }

  /* A refused file is a normal outcome; the rules before its bad line
   * must still hold what the header promises. */
  ar_rules rules = {0};
  kp_report silent = {0};
  ar_rules_load(&rules, rules_path, &silent, KPACK_ERROR_INVALID_ARGUMENT);
  check_rules(&rules, rules_path);

  size_t matched = 0;
  for (size_t i = 0; i < sizeof(fixed_paths) / sizeof(fixed_paths[0]); i++)
    matched += check_placement(&rules, fixed_paths[i]);
  /* Each path in a buffer of its own size, so an over-read is caught. */
  const uint8_t* p = nul != NULL ? nul + 1 : data + size;
  const uint8_t* end = data + size;
  for (size_t count = 0; p < end && count < KF_RULES_MAX_PATHS; count++) {
    const uint8_t* eol = memchr(p, '\n', (size_t)(end - p));
    size_t len = (size_t)((eol != NULL ? eol : end) - p);
    char* rel = malloc(len + 1);
    require(rel != NULL, "out of memory");
    memcpy(rel, p, len);
    rel[len] = '\0';
    matched += check_placement(&rules, rel);
    free(rel);
    p += len + 1;
  }
  ar_rules_free(&rules);
  return matched;
}
