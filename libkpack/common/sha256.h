/* SPDX-License-Identifier: MIT
 *
 * SHA-256 (FIPS 180-4), for the hashes a wheel's RECORD lists. Incremental:
 * kp_sha256_init(), kp_sha256_update() any number of times, then
 * kp_sha256_final(). A context is the caller's; nothing is allocated.
 */
#ifndef KPACK_SHA256_H
#define KPACK_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define KP_SHA256_SIZE 32

typedef struct kp_sha256 {
  uint32_t state[8];
  uint64_t length; /* bytes hashed so far */
  uint8_t block[64];
  size_t used; /* bytes of `block` filled */
} kp_sha256_ctx;

void kp_sha256_init(kp_sha256_ctx* ctx);
void kp_sha256_update(kp_sha256_ctx* ctx, const void* data, size_t size);
void kp_sha256_final(kp_sha256_ctx* ctx, uint8_t digest[KP_SHA256_SIZE]);

/* The digest of data[0, size) in one call. */
void kp_sha256(const void* data, size_t size, uint8_t digest[KP_SHA256_SIZE]);

#endif /* KPACK_SHA256_H */
