/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: GPU target matching, the rule `kpack verify` and
 * `kpack resolve` apply to say whether a code object may be filed under an
 * archive architecture.
 */
#ifndef ROCM_KPACK_TARGET_H
#define ROCM_KPACK_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a code object built for `target` can run on every agent that the
 * loader sends to archive architecture `arch` (an agent reaches `arch` when
 * `arch` is its processor with a subset of its own feature settings, as
 * docs/loader.md describes). That holds exactly when the processors are equal
 * and each feature setting `target` states (xnack+, sramecc-...) is stated the
 * same way by `arch`; a feature `target` leaves unstated (any) is fine whatever
 * `arch` says. A leading "amdgcn-amd-amdhsa--" is ignored on either side.
 * So a "gfx90a:xnack-" object fits "gfx90a:xnack-" and
 * "gfx90a:sramecc+:xnack-", but not "gfx90a" (xnack+ agents reach it) nor
 * "gfx908:xnack-"; a "gfx90a" object fits every gfx90a arch. A generic
 * target (gfx9-generic, gfx9-4-generic, gfx10-1-generic, gfx10-3-generic,
 * gfx11-generic, gfx12-generic) counts as each concrete processor LLVM's
 * generic-target table puts in its family: a "gfx9-generic:xnack-" object
 * fits "gfx906:xnack-" (kpack_code_object_serves() also checks the generic
 * version a code object carries). False if either is NULL or names no
 * processor. */
KPACK_API bool kpack_target_serves(const char* target, const char* arch);

/* Whether a code object built for `target` can be served to at least one of
 * the agents `agent` describes: `agent` is an agent's target ID whose
 * feature settings may be partial, a feature it leaves out standing for
 * either setting (the rule of `kpack split --arch` and `kpack create
 * --arch`). That holds when the processors are equal, or `target` is a
 * generic target whose family holds `agent`'s processor, and no feature is
 * set one way by `target` and the other way by `agent`; a feature `target`
 * leaves out runs with either setting. A leading "amdgcn-amd-amdhsa--" is
 * ignored on either side. So the agent "gfx90a" may be served "gfx90a",
 * "gfx90a:xnack-", "gfx90a:xnack+" and "gfx90a:sramecc+:xnack-"; the agent
 * "gfx90a:xnack-" all of these but "gfx90a:xnack+"; the agent "gfx906" also
 * "gfx9-generic"; the agent "gfx9-generic" only gfx9-generic objects. False
 * if either is NULL or names no processor. */
KPACK_API bool kpack_target_may_serve(const char* target, const char* agent);

/* Whether `target` names a GPU target: a processor libkpack knows
 * (kpack_processor_is_known(): gfx90a, gfx1100, gfx9-generic...), then at
 * most one setting of each feature that processor has, as ":sramecc+",
 * ":sramecc-", ":xnack+" or ":xnack-", sramecc first; optionally after
 * "amdgcn-amd-amdhsa--" or "hipv4-amdgcn-amd-amdhsa--", the way the HIP
 * runtime names an agent. "amdgcnspirv" (portable SPIR-V device code,
 * optionally after "spirv64-amd-amdhsa--" or "hipv4-spirv64-amd-amdhsa--")
 * is one too. Every command of the kpack tool that takes an architecture
 * or an agent asks this first, so that "gfx90a:xnak-" is refused instead
 * of matching nothing, or every gfx90a. When false and `why` is not NULL,
 * `why` (of `why_size` bytes) gets one phrase saying what is wrong, e.g.
 * "'xnak-' is not a target feature (the features are sramecc and xnack,
 * each followed by + or -)" or "gfx1030 has no xnack setting". False for
 * NULL. */
KPACK_API bool kpack_target_check(const char* target, char* why,
                                  size_t why_size);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_TARGET_H */
