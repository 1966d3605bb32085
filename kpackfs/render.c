/* SPDX-License-Identifier: MIT
 *
 * What a kernel's code object shows beside it: the `kernels` and
 * `metadata.json` files and the user.kpack.target and user.kpack.kernels
 * attributes, rendered once by libkpack from a prefix of the kernel
 * (kpack_kernel_render(), the same bytes `kpack extract` writes) and kept
 * within a byte budget. Owns kfs_renders; ops.c pins a render while a file
 * or request needs it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

/* A kernel's text sizes, each stored plus one: 0 is "never rendered". A
 * size that does not fit is not remembered, and each `stat` of it renders
 * again (no code object's note comes near 4 GiB of text). */
struct kfs_render_slot {
  uint32_t kernels_size;
  uint32_t json_size;
};

#define MAP_FIRST 1024

int kfs_renders_init(kfs_renders* rs, size_t count, uint64_t budget) {
  rs->slots = calloc(count ? count : 1, sizeof(*rs->slots));
  rs->map = calloc(MAP_FIRST, sizeof(*rs->map));
  if (rs->slots == NULL || rs->map == NULL) {
    free(rs->slots);
    free(rs->map);
    rs->slots = NULL;
    return -ENOMEM;
  }
  rs->map_size = MAP_FIRST;
  rs->count = count;
  rs->budget = budget;
  pthread_mutex_init(&rs->lock, NULL);
  pthread_cond_init(&rs->done, NULL);
  pthread_cond_init(&rs->queued, NULL);
  return 0;
}

static void free_render(kfs_render* r) {
  if (r == NULL)
    return;
  kpack_co_render_free(&r->text);
  free(r);
}

void kfs_renders_free(kfs_renders* rs) {
  if (rs->slots == NULL)
    return; /* never initialised */
  pthread_mutex_lock(&rs->lock);
  rs->stopping = true;
  pthread_cond_broadcast(&rs->queued);
  pthread_mutex_unlock(&rs->lock);
  for (size_t i = 0; i < rs->worker_count; i++)
    pthread_join(rs->workers[i], NULL);
  for (size_t i = 0; i < rs->map_size; i++) {
    for (kfs_render *r = rs->map[i], *next; r != NULL; r = next) {
      next = r->map_next;
      free_render(r);
    }
  }
  free(rs->map);
  free(rs->slots);
  pthread_mutex_destroy(&rs->lock);
  pthread_cond_destroy(&rs->done);
  pthread_cond_destroy(&rs->queued);
  memset(rs, 0, sizeof(*rs));
}

/* ---- the map of held renders, by slot (under the lock) ------------------- */

static kfs_render** map_bucket(kfs_render** map, size_t size, uint32_t slot) {
  /* Fibonacci hashing: neighbouring slots spread over the buckets. */
  uint64_t h = (uint64_t)slot * 0x9e3779b97f4a7c15ull;
  return &map[(h >> 32) & (size - 1)];
}

static kfs_render* map_find(const kfs_renders* rs, uint32_t slot) {
  kfs_render* r = *map_bucket(rs->map, rs->map_size, slot);
  while (r != NULL && r->slot != slot)
    r = r->map_next;
  return r;
}

/* Doubles the buckets once there are more renders than buckets; if that
 * cannot be allocated the chains only grow longer. */
static void map_insert(kfs_renders* rs, kfs_render* r) {
  if (rs->held >= rs->map_size && rs->map_size <= SIZE_MAX / 2 / sizeof(r)) {
    size_t size = rs->map_size * 2;
    kfs_render** map = calloc(size, sizeof(*map));
    if (map != NULL) {
      for (size_t i = 0; i < rs->map_size; i++) {
        for (kfs_render *x = rs->map[i], *next; x != NULL; x = next) {
          next = x->map_next;
          kfs_render** b = map_bucket(map, size, x->slot);
          x->map_next = *b;
          *b = x;
        }
      }
      free(rs->map);
      rs->map = map;
      rs->map_size = size;
    }
  }
  kfs_render** b = map_bucket(rs->map, rs->map_size, r->slot);
  r->map_next = *b;
  *b = r;
  rs->held++;
}

static void map_remove(kfs_renders* rs, kfs_render* r) {
  kfs_render** p = map_bucket(rs->map, rs->map_size, r->slot);
  while (*p != r)
    p = &(*p)->map_next;
  *p = r->map_next;
  rs->held--;
}

/* ---- the LRU of released renders (under the lock) ------------------------ */

static void lru_remove(kfs_renders* rs, kfs_render* r) {
  if (r->lru_next == r) {
    rs->lru = NULL;
  } else {
    r->lru_prev->lru_next = r->lru_next;
    r->lru_next->lru_prev = r->lru_prev;
    if (rs->lru == r)
      rs->lru = r->lru_next;
  }
  r->lru_prev = r->lru_next = NULL;
}

static void lru_push_front(kfs_renders* rs, kfs_render* r) {
  if (rs->lru == NULL) {
    r->lru_prev = r->lru_next = r;
  } else {
    r->lru_next = rs->lru;
    r->lru_prev = rs->lru->lru_prev;
    r->lru_prev->lru_next = r;
    rs->lru->lru_prev = r;
  }
  rs->lru = r;
}

/* Drops the least recently released renders while over budget; pinned ones
 * are not in the list and stay. Their sizes stay known. */
static void evict_over_budget(kfs_renders* rs) {
  while (rs->bytes > rs->budget && rs->lru != NULL) {
    kfs_render* victim = rs->lru->lru_prev;
    lru_remove(rs, victim);
    map_remove(rs, victim);
    rs->bytes -= victim->bytes;
    free_render(victim);
  }
}

/* ---- rendering ----------------------------------------------------------- */

/* Decodes only as much of the kernel as its metadata note needs; the
 * kernel cache is left to readers of the kernel itself. */
static kpack_error_t build(const kfs_tree* tree, const kfs_node* n,
                           kfs_render* r, uint64_t* decoded) {
  const kfs_source* src = &tree->sources[n->source];
  kpack_error_t err =
      kpack_kernel_render(src->archive, n->binary, n->arch, &r->text, decoded);
  if (err != KPACK_SUCCESS)
    return err;
  /* What the render holds in the heap, counting each allocation's malloc
   * overhead: most renders of a large install are a few bytes of text, and
   * counting their text alone let the budget hold twice its size. */
  const size_t chunk = 2 * sizeof(size_t);
  r->bytes = sizeof(*r) + chunk + r->text.kernels_size + 1 + chunk +
             r->text.metadata_json_size + 1 + chunk +
             (r->text.target ? strlen(r->text.target) + 1 + chunk : 0);
  return KPACK_SUCCESS;
}

/* Both sizes are remembered or neither (under the lock). */
static bool sizes_known(const kfs_render_slot* slot) {
  return slot->kernels_size != 0 && slot->json_size != 0;
}

/* Size + 1, or 0 when it does not fit (not remembered). */
static uint32_t stored_size(uint64_t size) {
  return size < UINT32_MAX ? (uint32_t)size + 1 : 0;
}

/* kfs_render_acquire(); `ahead` counts a render built in renders_ahead. */
static kpack_error_t acquire(kfs_renders* rs, const kfs_tree* tree,
                             const kfs_node* n, kfs_render** out, bool ahead) {
  *out = NULL;

  pthread_mutex_lock(&rs->lock);
  kfs_render* r;
  while ((r = map_find(rs, n->render)) != NULL && r->building) {
    /* Another thread is building it: take its result. If it failed, the
     * render left the map and this thread tries for itself. */
    pthread_cond_wait(&rs->done, &rs->lock);
  }
  if (r != NULL) {
    if (r->refs++ == 0)
      lru_remove(rs, r);
    pthread_mutex_unlock(&rs->lock);
    *out = r;
    return KPACK_SUCCESS;
  }
  r = calloc(1, sizeof(*r));
  if (r == NULL) {
    pthread_mutex_unlock(&rs->lock);
    return KPACK_ERROR_OUT_OF_MEMORY;
  }
  r->slot = n->render;
  r->refs = 1;
  r->building = true;
  map_insert(rs, r);
  pthread_mutex_unlock(&rs->lock);

  uint64_t decoded = 0;
  kpack_error_t err = build(tree, n, r, &decoded);

  pthread_mutex_lock(&rs->lock);
  rs->decoded += decoded;
  r->building = false;
  pthread_cond_broadcast(&rs->done);
  if (err != KPACK_SUCCESS) {
    rs->failures++;
    map_remove(rs, r);
    free_render(r);
  } else {
    kfs_render_slot* slot = &rs->slots[n->render];
    slot->kernels_size = stored_size(r->text.kernels_size);
    slot->json_size = stored_size(r->text.metadata_json_size);
    rs->bytes += r->bytes;
    rs->renders++;
    rs->ahead += ahead;
    evict_over_budget(rs);
    *out = r;
  }
  pthread_mutex_unlock(&rs->lock);
  return err;
}

kpack_error_t kfs_render_acquire(kfs_renders* rs, const kfs_tree* tree,
                                 const kfs_node* n, kfs_render** out) {
  return acquire(rs, tree, n, out, false);
}

void kfs_render_release(kfs_renders* rs, kfs_render* r) {
  if (r == NULL)
    return;
  pthread_mutex_lock(&rs->lock);
  if (--r->refs == 0) {
    lru_push_front(rs, r);
    evict_over_budget(rs);
  }
  pthread_mutex_unlock(&rs->lock);
}

/* ---- rendering ahead ----------------------------------------------------- */

/* Whether slot `slot`'s sizes are known, or its render is held or being
 * built (under the lock). */
static bool known_or_held(const kfs_renders* rs, uint32_t slot) {
  return sizes_known(&rs->slots[slot]) || map_find(rs, slot) != NULL;
}

static bool is_queued(const kfs_renders* rs, uint32_t slot) {
  size_t cap = sizeof(rs->queue) / sizeof(rs->queue[0]);
  for (size_t i = 0; i < rs->queue_count; i++)
    if (rs->queue[(rs->queue_head + i) % cap] == slot)
      return true;
  return false;
}

/* A worker: renders queued slots, and keeps only their sizes' and texts'
 * place in the budget (each render is released at once). */
static void* render_worker(void* arg) {
  kfs_renders* rs = arg;
  size_t cap = sizeof(rs->queue) / sizeof(rs->queue[0]);
  pthread_mutex_lock(&rs->lock);
  for (;;) {
    while (rs->queue_count == 0 && !rs->stopping)
      pthread_cond_wait(&rs->queued, &rs->lock);
    if (rs->stopping)
      break;
    uint32_t slot = rs->queue[rs->queue_head];
    rs->queue_head = (rs->queue_head + 1) % cap;
    rs->queue_count--;
    bool wanted = !known_or_held(rs, slot);
    pthread_mutex_unlock(&rs->lock);
    kfs_node n;
    kfs_render* r = NULL;
    if (wanted && kfs_tree_text_node(rs->tree, slot, &n) &&
        acquire(rs, rs->tree, &n, &r, true) == KPACK_SUCCESS)
      kfs_render_release(rs, r);
    pthread_mutex_lock(&rs->lock);
  }
  pthread_mutex_unlock(&rs->lock);
  return NULL;
}

void kfs_render_ahead(kfs_renders* rs, const kfs_tree* tree, uint32_t slot) {
  size_t cap = sizeof(rs->queue) / sizeof(rs->queue[0]);
  pthread_mutex_lock(&rs->lock);
  /* One text file read (cat kernels) is no walk: the second miss is. */
  if (++rs->misses < 2) {
    pthread_mutex_unlock(&rs->lock);
    return;
  }
  if (rs->worker_count == 0 && !rs->stopping) {
    rs->tree = tree;
    /* Without workers (no thread to be had) nothing is rendered ahead. */
    while (rs->worker_count < KFS_RENDER_WORKERS &&
           kfs_start_worker(&rs->workers[rs->worker_count], render_worker,
                            rs) == 0)
      rs->worker_count++;
  }
  size_t added = 0;
  for (uint64_t s = (uint64_t)slot + 1;
       s < rs->count && added < KFS_RENDER_AHEAD && rs->queue_count < cap &&
       rs->worker_count > 0;
       s++) {
    if (known_or_held(rs, (uint32_t)s) || is_queued(rs, (uint32_t)s))
      continue;
    rs->queue[(rs->queue_head + rs->queue_count) % cap] = (uint32_t)s;
    rs->queue_count++;
    added++;
  }
  if (added > 0)
    pthread_cond_broadcast(&rs->queued);
  pthread_mutex_unlock(&rs->lock);
}

bool kfs_render_size(kfs_renders* rs, const kfs_node* n, uint64_t* size) {
  pthread_mutex_lock(&rs->lock);
  const kfs_render_slot* slot = &rs->slots[n->render];
  uint32_t stored =
      n->kind == KFS_METADATA ? slot->json_size : slot->kernels_size;
  bool known = sizes_known(slot);
  if (known)
    *size = stored - 1;
  pthread_mutex_unlock(&rs->lock);
  return known;
}

int kfs_render_stats(kfs_renders* rs, char** text) {
  pthread_mutex_lock(&rs->lock);
  uint64_t renders = rs->renders, failures = rs->failures, bytes = rs->bytes;
  uint64_t decoded = rs->decoded, ahead = rs->ahead;
  pthread_mutex_unlock(&rs->lock);
  return asprintf(text,
                  "renders=%" PRIu64 "\nrender_failures=%" PRIu64
                  "\nrender_bytes=%" PRIu64 "\nrender_decoded_bytes=%" PRIu64
                  "\nrenders_ahead=%" PRIu64 "\n",
                  renders, failures, bytes, decoded, ahead);
}
