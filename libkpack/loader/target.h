/* SPDX-License-Identifier: MIT
 *
 * ISA target compatibility (docs/loader.md): which archive architectures can
 * serve a device ISA name. Owned by target.c; the lists it returns belong
 * to the caller.
 */
#ifndef KPACK_TARGET_H
#define KPACK_TARGET_H

#include <stddef.h>

#include "rocm_kpack/kpack_types.h"

/* Names with more feature flags than this yield only themselves: every
 * subset would be 2^n candidates, which hostile input must not force. */
#define KP_TARGET_MAX_FEATURES 8
/* Portable SPIR-V device code: the target the loader searches last. */
#define KP_SPIRV_TARGET "amdgcnspirv"

/* Compatible targets of one ISA name, most specific first. All strings live
 * in the one allocation `names` points at. */
typedef struct kp_target_list {
  char** names;
  size_t count;
} kp_target_list;

/* Fills *out with the targets of `isa`: the leading "amdgcn-amd-amdhsa--" or
 * "hipv4-amdgcn-amd-amdhsa--" stripped, then every subset of its ":" feature
 * flags (larger subsets first; same size in lexicographic order of feature
 * positions; flags keep their order), ending with the bare processor.
 * Duplicates are dropped. A name with no processor yields an empty list; one
 * with an empty or excess feature yields only itself.
 *   OUT_OF_MEMORY  allocation failed (*out is then empty) */
kpack_error_t kp_target_compatible(const char* isa, kp_target_list* out);
void kp_target_list_free(kp_target_list* list);

/* `isa` without a recognised triple prefix (a suffix of `isa`). */
const char* kp_target_strip_prefix(const char* isa);

/* True when a code object built for `target` runs on every device whose
 * compatible targets (kp_target_compatible) include `arch`: same processor,
 * and each feature flag of `target` also a flag of `arch` (kpack verify,
 * kpack_target_serves). Names whose flags cannot be split compare whole. A
 * generic target serves the concrete processors of its family. */
bool kp_target_serves(const char* target, const char* arch);
/* The same for a code object whose e_flags carry `generic_version` (0 when
 * they carry none): a generic target (gfx9-generic...) serves an `arch`
 * whose processor its family covers, from the version that covers it. */
bool kp_target_serves_version(const char* target, unsigned generic_version,
                              const char* arch);
/* True when a code object built for `target` can run on at least one agent
 * `agent` describes (kpack_target_may_serve): processors equal or `target` a
 * generic target covering `agent`'s, and no feature stated both ways. */
bool kp_target_may_serve(const char* target, const char* agent);
/* True when processor[0, len) names one of LLVM's generic targets. */
bool kp_target_is_generic(const char* processor, size_t len);

#endif /* KPACK_TARGET_H */
