/* SPDX-License-Identifier: MIT
 *
 * Internal interface of the offload bundle reader (offload_bundle.c) for the
 * fat binary reader (fatbin.c), which must find where one bundle ends and
 * the next begins without keeping the bundle. Both modules are stateless
 * apart from the handles they return.
 */
#ifndef KPACK_OFFLOAD_BUNDLE_H
#define KPACK_OFFLOAD_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocm_kpack/kpack_ext.h"

#define OB_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define OB_MAGIC_SIZE 24u
#define OB_CCOB_MAGIC "CCOB"
#define OB_CCOB_MAGIC_SIZE 4u

/* Number of bytes the bundle at `data` occupies (at most `size`), without
 * keeping its entries. A CCOB version 1 envelope records no size, so its
 * payload is decompressed to find where it ends. Errors as
 * kpack_bundle_parse(). */
kpack_error_t ob_measure(const uint8_t* data, size_t size, uint64_t* extent);

/* Little-endian loads; the caller has checked the bounds. */
static inline uint64_t ob_load_le(const uint8_t* p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = n; i-- > 0;)
    v = (v << 8) | p[i];
  return v;
}

#endif /* KPACK_OFFLOAD_BUNDLE_H */
