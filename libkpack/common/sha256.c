/* SPDX-License-Identifier: MIT
 *
 * SHA-256 as FIPS 180-4 specifies it: 64-byte blocks, big-endian words,
 * the message padded with 0x80, zeros and its length in bits. On x86-64
 * processors with the SHA extensions (asked of CPUID at each update) the
 * blocks go through SHA256RNDS2/MSG1/MSG2, about ten times faster: a wheel
 * split hashes every byte of the wheel twice.
 */
#include "common/sha256.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SHA_NI 1
#endif

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t sha_rotr(uint32_t x, unsigned n) {
  return (x >> n) | (x << (32 - n));
}

static void sha_block(uint32_t state[8], const uint8_t* p) {
  uint32_t w[64];
  for (unsigned i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (unsigned i = 16; i < 64; i++) {
    uint32_t s0 =
        sha_rotr(w[i - 15], 7) ^ sha_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 =
        sha_rotr(w[i - 2], 17) ^ sha_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (unsigned i = 0; i < 64; i++) {
    uint32_t t1 = h + (sha_rotr(e, 6) ^ sha_rotr(e, 11) ^ sha_rotr(e, 25)) +
                  ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
    uint32_t t2 = (sha_rotr(a, 2) ^ sha_rotr(a, 13) ^ sha_rotr(a, 22)) +
                  ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

#ifdef SHA_NI
static bool sha_have_ni(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 29)))
    return false; /* SHA */
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) &&
         (c & (1u << 9)); /* SSE4.1, SSSE3 */
}

/* `count` blocks with the SHA extensions. The state is kept as ABEF and
 * CDGH, the order SHA256RNDS2 takes; each group of four rounds adds the
 * next four constants to four message words, SHA256MSG1/MSG2 extending
 * the message schedule from the four groups before. */
__attribute__((target("sha,sse4.1,ssse3"))) static void sha_blocks_ni(
    uint32_t state[8], const uint8_t* p, size_t count) {
  const __m128i swap =
      _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i*)&state[0]),
                                  0xB1); /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i*)&state[4]),
                                 0x1B);     /* EFGH */
  __m128i s0 = _mm_alignr_epi8(tmp, s1, 8); /* ABEF */
  s1 = _mm_blend_epi16(s1, tmp, 0xF0);      /* CDGH */
  for (; count > 0; count--, p += 64) {
    __m128i abef = s0, cdgh = s1, w[4];
    for (unsigned g = 0; g < 16; g++) {
      __m128i m;
      if (g < 4) {
        m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)(p + 16 * g)),
                             swap);
      } else {
        m = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
        m = _mm_add_epi32(m,
                          _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
        m = _mm_sha256msg2_epu32(m, w[(g + 3) % 4]);
      }
      w[g % 4] = m;
      __m128i k =
          _mm_add_epi32(m, _mm_loadu_si128((const __m128i*)&sha_k[4 * g]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, k);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  tmp = _mm_shuffle_epi32(s0, 0x1B); /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);  /* DCHG */
  _mm_storeu_si128((__m128i*)&state[0], _mm_blend_epi16(tmp, s1, 0xF0));
  _mm_storeu_si128((__m128i*)&state[4], _mm_alignr_epi8(s1, tmp, 8));
}
#endif

/* Whole blocks at p. */
static void sha_blocks(uint32_t state[8], const uint8_t* p, size_t count) {
#ifdef SHA_NI
  if (sha_have_ni()) {
    sha_blocks_ni(state, p, count);
    return;
  }
#endif
  for (; count > 0; count--, p += 64)
    sha_block(state, p);
}

void kp_sha256_init(kp_sha256_ctx* ctx) {
  static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                      0xa54ff53a, 0x510e527f, 0x9b05688c,
                                      0x1f83d9ab, 0x5be0cd19};
  memcpy(ctx->state, initial, sizeof(initial));
  ctx->length = 0;
  ctx->used = 0;
}

void kp_sha256_update(kp_sha256_ctx* ctx, const void* data, size_t size) {
  const uint8_t* p = data;
  ctx->length += size;
  if (ctx->used > 0) {
    size_t take = 64 - ctx->used < size ? 64 - ctx->used : size;
    memcpy(ctx->block + ctx->used, p, take);
    ctx->used += take;
    p += take;
    size -= take;
    if (ctx->used < 64)
      return;
    sha_blocks(ctx->state, ctx->block, 1);
    ctx->used = 0;
  }
  sha_blocks(ctx->state, p, size / 64);
  p += size / 64 * 64;
  size %= 64;
  memcpy(ctx->block, p, size);
  ctx->used = size;
}

void kp_sha256_final(kp_sha256_ctx* ctx, uint8_t digest[KP_SHA256_SIZE]) {
  uint64_t bits = ctx->length * 8;
  uint8_t tail[72] = {0x80};
  size_t pad = (ctx->used < 56 ? 56 : 120) - ctx->used;
  for (unsigned i = 0; i < 8; i++)
    tail[pad + i] = (uint8_t)(bits >> (56 - 8 * i));
  kp_sha256_update(ctx, tail, pad + 8);
  for (unsigned i = 0; i < 8; i++) {
    digest[4 * i] = (uint8_t)(ctx->state[i] >> 24);
    digest[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
    digest[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
    digest[4 * i + 3] = (uint8_t)ctx->state[i];
  }
}

void kp_sha256(const void* data, size_t size, uint8_t digest[KP_SHA256_SIZE]) {
  kp_sha256_ctx ctx;
  kp_sha256_init(&ctx);
  kp_sha256_update(&ctx, data, size);
  kp_sha256_final(&ctx, digest);
}
