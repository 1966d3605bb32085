/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the shared cache of decompressed kernels that kpackfs
 * reads through; usable by any client that serves kernels repeatedly.
 */
#ifndef ROCM_KPACK_KCACHE_H
#define ROCM_KPACK_KCACHE_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Shared decompressed-kernel cache ------------------------------------ */
/* A byte-budgeted cache of decompressed kernels, shared by any number of
 * threads and archives (kpackfs serves every file through one). Acquiring a
 * kernel finds it or decompresses it, and pins it until it is released:
 * pinned kernels are never evicted and their bytes never move. Released
 * kernels stay cached in LRU order and are evicted once the bytes held
 * exceed the capacity. Concurrent first acquires of one kernel decompress it
 * once; the other callers wait for that result (success or error). A kernel
 * larger than the capacity is still served, and dropped at its last release.
 * A miss that must evict to fit evicts first and decompresses into the
 * buffer of an evicted kernel of about its size, so a full cache reuses its
 * memory instead of faulting in fresh pages for every miss.
 * Entries are keyed by archive handle: the cache never opens or closes an
 * archive, and an archive must outlive its entries (kpack_kcache_purge()).
 * Every function is thread-safe. */
typedef struct kpack_kcache kpack_kcache_t;

/* One pinned kernel, owned by the cache; valid until released. */
typedef struct kpack_kcache_entry kpack_kcache_entry_t;

typedef struct kpack_kcache_stats {
  uint64_t capacity;           /* byte budget */
  uint64_t bytes;              /* bytes held for kernels, pinned or not (a
                                  recycled buffer may exceed its kernel by
                                  up to a quarter) */
  uint64_t entries;            /* kernels held or being decompressed */
  uint64_t pinned;             /* kernels held with at least one pin */
  uint64_t hits;               /* acquires that found the kernel cached or
                                  being decompressed by another caller */
  uint64_t misses;             /* acquires that started a decompression */
  uint64_t waits;              /* hits that waited for another caller's
                                  decompression of the same kernel */
  uint64_t evictions;          /* kernels dropped to honour the budget */
  uint64_t decompressions;     /* decompressions that succeeded */
  uint64_t bytes_decompressed; /* bytes those produced */
  uint64_t failures;           /* decompressions that failed */
  uint64_t recycled;           /* misses decompressed into the buffer of a
                                  kernel evicted to make room for them */
} kpack_kcache_stats_t;

/* Creates a cache that keeps at most `capacity` bytes of released kernels
 * (0 keeps none). Free it with kpack_kcache_destroy().
 *   INVALID_ARGUMENT  cache is NULL
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_kcache_create(uint64_t capacity,
                                            kpack_kcache_t** cache);

/* Frees the cache and every kernel it holds. NULL is a no-op. Every entry
 * must have been released and no other thread may be using the cache. */
KPACK_API void kpack_kcache_destroy(kpack_kcache_t* cache);

/* Finds the kernel for (binary_name, arch) of `archive`, decompressing it on
 * a miss, and pins it. *data (non-NULL, even for an empty kernel) and *size
 * stay valid until kpack_kcache_release(cache, *entry); the bytes belong to
 * the cache and must not be written. The lock is not held while a kernel
 * decompresses. On failure *entry and *data are NULL and nothing is cached.
 *   INVALID_ARGUMENT      a pointer is NULL
 *   KERNEL_NOT_FOUND      no such binary or arch in the archive
 *   DECOMPRESSION_FAILED  corrupt frame or size mismatch
 *   IO_ERROR              the archive could not be read (e.g. it shrank)
 *   OUT_OF_MEMORY         allocation failed
 * Callers that waited for another caller's decompression get its status. */
KPACK_API kpack_error_t kpack_kcache_acquire(kpack_kcache_t* cache,
                                             kpack_archive_t archive,
                                             const char* binary_name,
                                             const char* arch,
                                             kpack_kcache_entry_t** entry,
                                             const void** data, size_t* size);

/* Drops one pin taken by kpack_kcache_acquire(). The kernel stays cached if
 * the budget allows. A NULL entry is a no-op. */
KPACK_API void kpack_kcache_release(kpack_kcache_t* cache,
                                    kpack_kcache_entry_t* entry);

/* Forgets the kernels of `archive` (every archive if NULL): released ones are
 * freed now, pinned ones at their last release, and later acquires
 * decompress afresh. Call it before closing an archive the cache has seen.
 * NULL cache is a no-op. */
KPACK_API void kpack_kcache_purge(kpack_kcache_t* cache,
                                  kpack_archive_t archive);

/* A consistent snapshot of the counters.
 *   INVALID_ARGUMENT  a pointer is NULL */
KPACK_API kpack_error_t kpack_kcache_get_stats(kpack_kcache_t* cache,
                                               kpack_kcache_stats_t* stats);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_KCACHE_H */
