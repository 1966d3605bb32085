/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: GPU target matching, the rule `kpack verify` and
 * `kpack resolve` apply to say whether a code object may be filed under an
 * archive architecture.
 */
#ifndef ROCM_KPACK_TARGET_H
#define ROCM_KPACK_TARGET_H

#include <stdbool.h>

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
 * "gfx908:xnack-"; a "gfx90a" object fits every gfx90a arch. False if
 * either is NULL or names no processor. */
KPACK_API bool kpack_target_serves(const char* target, const char* arch);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_TARGET_H */
