/* SPDX-License-Identifier: MIT
 *
 * The shared decompressed-kernel cache (kpack_kcache_*): a hash table of
 * kernels keyed by (archive, ordinal, size), pins for readers, an LRU list of
 * released kernels trimmed to a byte budget, single-flight loading, and
 * buffers of evicted kernels recycled for the kernels that replace them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack_ext.h"

typedef enum { KC_LOADING, KC_READY, KC_FAILED } kc_state;

struct kpack_kcache_entry {
  /* The key. Two TOC entries sharing an ordinal (and size) share bytes. */
  kpack_archive_t archive;
  uint32_t ordinal;
  uint64_t size;
  uint64_t hash;
  /* Bytes allocated behind `data`: `size`, or a little more when the buffer
   * was recycled from an evicted kernel. This is what the budget charges. */
  uint64_t cap;

  kc_state state;
  kpack_error_t error; /* of a FAILED load, handed to its waiters */
  unsigned pins;
  bool in_table; /* false once evicted, purged or failed: dies unpinned */
  struct kpack_kcache_entry* chain; /* next in the hash bucket */
  /* On the LRU list exactly when in_table, READY and unpinned; `next` also
   * links entries that are about to be freed. */
  struct kpack_kcache_entry* prev;
  struct kpack_kcache_entry* next;
  /* Written only by the loading thread before it publishes READY under the
   * lock, read-only afterwards. */
  void* data;
};

typedef struct kpack_kcache_entry kc_entry;

struct kpack_kcache {
  /* Protects the table, the LRU list, the stats and every entry field
   * except the bytes behind `data`. Never held while decompressing or
   * freeing kernel memory. */
  pthread_mutex_t lock;
  pthread_cond_t loaded; /* broadcast when an entry leaves KC_LOADING */
  kc_entry** buckets;
  size_t bucket_count; /* a power of two */
  size_t table_count;
  kc_entry lru; /* sentinel: lru.next is the least recently used */
  kpack_kcache_stats_t stats;
};

#define KC_INITIAL_BUCKETS 64

/* Recycling a buffer saves faulting in (and zeroing) fresh pages for every
 * miss, which costs about as much as decompressing the kernel; below this
 * size malloc's own free lists already do that. */
#define KC_RECYCLE_MIN (64u << 10)

static uint64_t kc_hash(kpack_archive_t archive, uint32_t ordinal,
                        uint64_t size) {
  /* splitmix64 finaliser over the three key parts. */
  uint64_t x = (uint64_t)(uintptr_t)archive ^ ((uint64_t)ordinal << 32) ^
               (size * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static kc_entry* kc_find(kpack_kcache_t* c, kpack_archive_t archive,
                         uint32_t ordinal, uint64_t size, uint64_t hash) {
  kc_entry* e = c->buckets[hash & (c->bucket_count - 1)];
  while (e != NULL &&
         (e->archive != archive || e->ordinal != ordinal || e->size != size))
    e = e->chain;
  return e;
}

/* Doubles the bucket array; on allocation failure chains just get longer. */
static void kc_grow(kpack_kcache_t* c) {
  size_t count = c->bucket_count * 2;
  kc_entry** buckets = calloc(count, sizeof(*buckets));
  if (buckets == NULL)
    return;
  for (size_t i = 0; i < c->bucket_count; i++) {
    kc_entry* e = c->buckets[i];
    while (e != NULL) {
      kc_entry* chain = e->chain;
      e->chain = buckets[e->hash & (count - 1)];
      buckets[e->hash & (count - 1)] = e;
      e = chain;
    }
  }
  free(c->buckets);
  c->buckets = buckets;
  c->bucket_count = count;
}

static void kc_table_insert(kpack_kcache_t* c, kc_entry* e) {
  if (c->table_count >= c->bucket_count)
    kc_grow(c);
  kc_entry** slot = &c->buckets[e->hash & (c->bucket_count - 1)];
  e->chain = *slot;
  *slot = e;
  e->in_table = true;
  c->table_count++;
}

static void kc_table_remove(kpack_kcache_t* c, kc_entry* e) {
  if (!e->in_table)
    return;
  kc_entry** slot = &c->buckets[e->hash & (c->bucket_count - 1)];
  while (*slot != e)
    slot = &(*slot)->chain;
  *slot = e->chain;
  e->chain = NULL;
  e->in_table = false;
  c->table_count--;
}

static void kc_lru_unlink(kc_entry* e) {
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->prev = e->next = NULL;
}

static void kc_lru_push(kpack_kcache_t* c, kc_entry* e) {
  e->prev = c->lru.prev;
  e->next = &c->lru;
  c->lru.prev->next = e;
  c->lru.prev = e;
}

/* Takes an entry out of the accounting and onto `doomed`, a list the caller
 * frees once the lock is dropped. The entry is out of the table, off the LRU
 * list and unpinned. Only READY entries hold bytes. */
static void kc_retire(kpack_kcache_t* c, kc_entry* e, kc_entry** doomed) {
  if (e->state == KC_READY)
    c->stats.bytes -= e->cap;
  c->stats.entries--;
  e->next = *doomed;
  *doomed = e;
}

static void kc_free_list(kc_entry* e) {
  while (e != NULL) {
    kc_entry* next = e->next;
    kpack_free_kernel(e->data);
    free(e);
    e = next;
  }
}

/* Evicts least recently used released kernels until the budget holds or
 * only pinned kernels are left. */
static void kc_trim(kpack_kcache_t* c, kc_entry** doomed) {
  while (c->stats.bytes > c->stats.capacity && c->lru.next != &c->lru) {
    kc_entry* victim = c->lru.next;
    kc_lru_unlink(victim);
    kc_table_remove(c, victim);
    c->stats.evictions++;
    kc_retire(c, victim, doomed);
  }
}

/* Makes room for a kernel of `size` bytes about to be decompressed: evicts
 * the least recently used released kernels that its arrival would evict
 * anyway, before it is decompressed rather than after, and returns the
 * buffer of the victim that fits it best (at most a quarter larger), or
 * NULL. Other victims go on `doomed`, to be freed before the decompression
 * allocates. A kernel the budget cannot keep evicts nothing, so a size that
 * the frame then refutes costs at most the cached kernels, never memory. */
static void* kc_make_room(kpack_kcache_t* c, uint64_t size, uint64_t* cap,
                          kc_entry** doomed) {
  kc_entry* best = NULL;
  if (size > c->stats.capacity)
    return NULL;
  while (c->stats.bytes > c->stats.capacity - size && c->lru.next != &c->lru) {
    kc_entry* victim = c->lru.next;
    kc_lru_unlink(victim);
    kc_table_remove(c, victim);
    c->stats.evictions++;
    kc_retire(c, victim, doomed);
    if (size >= KC_RECYCLE_MIN && victim->cap >= size &&
        victim->cap - size <= size / 4 &&
        (best == NULL || victim->cap < best->cap))
      best = victim;
  }
  if (best == NULL)
    return NULL;
  void* buffer = best->data;
  *cap = best->cap;
  best->data = NULL; /* now the new kernel's; kc_free_list skips it */
  return buffer;
}

static void kc_pin(kpack_kcache_t* c, kc_entry* e) {
  if (e->pins++ == 0) {
    c->stats.pinned++;
    if (e->prev != NULL)
      kc_lru_unlink(e);
  }
}

static void kc_unpin(kpack_kcache_t* c, kc_entry* e, kc_entry** doomed) {
  if (--e->pins > 0)
    return;
  c->stats.pinned--;
  if (!e->in_table) {
    kc_retire(c, e, doomed);
  } else if (e->cap > c->stats.capacity) {
    /* Kept only while someone reads it; caching it would evict everything
     * else and still not fit. */
    kc_table_remove(c, e);
    c->stats.evictions++;
    kc_retire(c, e, doomed);
  } else {
    kc_lru_push(c, e);
    kc_trim(c, doomed);
  }
}

KPACK_API kpack_error_t kpack_kcache_create(uint64_t capacity,
                                            kpack_kcache_t** cache) {
  kpack_kcache_t* c = NULL;

  if (cache == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *cache = NULL;
  c = calloc(1, sizeof(*c));
  if (c == NULL)
    goto fail;
  c->buckets = calloc(KC_INITIAL_BUCKETS, sizeof(*c->buckets));
  if (c->buckets == NULL)
    goto fail;
  c->bucket_count = KC_INITIAL_BUCKETS;
  c->lru.prev = c->lru.next = &c->lru;
  c->stats.capacity = capacity;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->loaded, NULL);
  *cache = c;
  return KPACK_SUCCESS;

fail:
  free(c);
  return KPACK_ERROR_OUT_OF_MEMORY;
}

KPACK_API void kpack_kcache_destroy(kpack_kcache_t* cache) {
  if (cache == NULL)
    return;
  for (size_t i = 0; i < cache->bucket_count; i++) {
    kc_entry* e = cache->buckets[i];
    while (e != NULL) {
      kc_entry* chain = e->chain;
      kpack_free_kernel(e->data);
      free(e);
      e = chain;
    }
  }
  free(cache->buckets);
  pthread_cond_destroy(&cache->loaded);
  pthread_mutex_destroy(&cache->lock);
  free(cache);
}

/* Decompresses the entry's kernel, outside the lock, into `recycled` (of
 * `cap` bytes) when there is one. Otherwise kpack_get_kernel() allocates,
 * and only once the stored bytes agree with the TOC size, so a lying TOC
 * cannot make the cache ask for terabytes. On failure the buffer is freed. */
static kpack_error_t kc_load(kc_entry* e, const char* binary_name,
                             const char* arch, void* recycled, uint64_t cap) {
  size_t got = 0;
  void* data = recycled;
  kpack_error_t err =
      recycled != NULL
          ? kpack_read_kernel(e->archive, binary_name, arch, recycled,
                              (size_t)cap, &got)
          : kpack_get_kernel(e->archive, binary_name, arch, &data, &got);
  if (err == KPACK_SUCCESS && got != e->size)
    err = KPACK_ERROR_DECOMPRESSION_FAILED;
  if (err != KPACK_SUCCESS) {
    kpack_free_kernel(data);
    return err;
  }
  e->data = data;
  e->cap = recycled != NULL ? cap : e->size;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_kcache_acquire(kpack_kcache_t* cache,
                                             kpack_archive_t archive,
                                             const char* binary_name,
                                             const char* arch,
                                             kpack_kcache_entry_t** entry,
                                             const void** data, size_t* size) {
  kpack_kernel_info_t info;
  kc_entry *e, *fresh = NULL, *doomed = NULL;
  kpack_error_t err;

  if (entry != NULL)
    *entry = NULL;
  if (data != NULL)
    *data = NULL;
  if (size != NULL)
    *size = 0;
  if (cache == NULL || archive == NULL || binary_name == NULL || arch == NULL ||
      entry == NULL || data == NULL || size == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  /* The TOC is immutable after open: no lock needed to read it. */
  err = kpack_get_kernel_info(archive, binary_name, arch, &info);
  if (err != KPACK_SUCCESS)
    return err;
  if (info.size > SIZE_MAX - 1)
    return KPACK_ERROR_OUT_OF_MEMORY;
  uint64_t hash = kc_hash(archive, info.ordinal, info.size);
  /* Allocated before locking; freed unused on a hit. */
  fresh = calloc(1, sizeof(*fresh));
  if (fresh == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;

  pthread_mutex_lock(&cache->lock);
  e = kc_find(cache, archive, info.ordinal, info.size, hash);
  if (e != NULL) {
    kc_pin(cache, e);
    cache->stats.hits++;
    if (e->state == KC_LOADING) {
      cache->stats.waits++;
      while (e->state == KC_LOADING)
        pthread_cond_wait(&cache->loaded, &cache->lock);
    }
    err = e->state == KC_READY ? KPACK_SUCCESS : e->error;
  } else {
    e = fresh;
    fresh = NULL;
    e->archive = archive;
    e->ordinal = info.ordinal;
    e->size = info.size;
    e->hash = hash;
    e->state = KC_LOADING;
    kc_table_insert(cache, e);
    cache->stats.entries++;
    cache->stats.misses++;
    kc_pin(cache, e);
    uint64_t cap = 0;
    void* recycled = kc_make_room(cache, info.size, &cap, &doomed);
    if (recycled != NULL)
      cache->stats.recycled++;
    pthread_mutex_unlock(&cache->lock);

    kc_free_list(doomed);
    doomed = NULL;
    err = kc_load(e, binary_name, arch, recycled, cap);

    pthread_mutex_lock(&cache->lock);
    e->error = err;
    if (err == KPACK_SUCCESS) {
      /* Bytes are charged once they exist: a size the frame then refutes
       * never evicts anything. */
      e->state = KC_READY;
      cache->stats.bytes += e->cap;
      cache->stats.decompressions++;
      cache->stats.bytes_decompressed += e->size;
      kc_trim(cache, &doomed);
    } else {
      /* Not cached: the next acquire tries again. */
      e->state = KC_FAILED;
      cache->stats.failures++;
      kc_table_remove(cache, e);
    }
    pthread_cond_broadcast(&cache->loaded);
  }
  if (err != KPACK_SUCCESS)
    kc_unpin(cache, e, &doomed);
  pthread_mutex_unlock(&cache->lock);

  kc_free_list(doomed);
  free(fresh);
  if (err != KPACK_SUCCESS)
    return err;
  *entry = e;
  *data = e->data;
  *size = (size_t)e->size;
  return KPACK_SUCCESS;
}

KPACK_API void kpack_kcache_release(kpack_kcache_t* cache,
                                    kpack_kcache_entry_t* entry) {
  kc_entry* doomed = NULL;

  if (cache == NULL || entry == NULL)
    return;
  pthread_mutex_lock(&cache->lock);
  kc_unpin(cache, entry, &doomed);
  pthread_mutex_unlock(&cache->lock);
  kc_free_list(doomed);
}

KPACK_API void kpack_kcache_purge(kpack_kcache_t* cache,
                                  kpack_archive_t archive) {
  kc_entry* doomed = NULL;

  if (cache == NULL)
    return;
  pthread_mutex_lock(&cache->lock);
  for (size_t i = 0; i < cache->bucket_count; i++) {
    kc_entry* e = cache->buckets[i];
    while (e != NULL) {
      kc_entry* chain = e->chain;
      if (archive == NULL || e->archive == archive) {
        kc_table_remove(cache, e);
        /* Pinned (or loading) entries die at their last release. */
        if (e->pins == 0) {
          kc_lru_unlink(e);
          kc_retire(cache, e, &doomed);
        }
      }
      e = chain;
    }
  }
  pthread_mutex_unlock(&cache->lock);
  kc_free_list(doomed);
}

KPACK_API kpack_error_t kpack_kcache_get_stats(kpack_kcache_t* cache,
                                               kpack_kcache_stats_t* stats) {
  if (cache == NULL || stats == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&cache->lock);
  *stats = cache->stats;
  pthread_mutex_unlock(&cache->lock);
  return KPACK_SUCCESS;
}
