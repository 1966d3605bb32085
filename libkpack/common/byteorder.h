/* SPDX-License-Identifier: MIT
 *
 * Fixed-width integers in a byte array: little-endian for the kpack header,
 * zstd frame sizes, ELF and offload bundles, big-endian for MessagePack.
 * Callers check the bounds first; these only assemble the bytes.
 */
#ifndef KPACK_BYTEORDER_H
#define KPACK_BYTEORDER_H

#include <stdint.h>
#include <string.h>

/* The n-byte (n <= 8) little-endian value at p. On a little-endian host a
 * copy: with n known at the call, one unaligned load. */
static inline uint64_t kp_load_le(const uint8_t* p, unsigned n) {
  uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(&v, p, n);
#else
  for (unsigned i = n; i-- > 0;)
    v = (v << 8) | p[i];
#endif
  return v;
}

/* Stores the low n bytes (n <= 8) of v at p, little-endian. */
static inline void kp_store_le(uint8_t* p, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* The n-byte (n <= 8) big-endian value at p. */
static inline uint64_t kp_load_be(const uint8_t* p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++)
    v = (v << 8) | p[i];
  return v;
}

#endif /* KPACK_BYTEORDER_H */
