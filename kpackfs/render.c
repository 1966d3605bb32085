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

#include "ops.h"

enum {
  SLOT_KNOWN = 1,     /* the sizes below are valid, for good */
  SLOT_RENDERING = 2, /* a thread is building the render */
};

struct kfs_render_slot {
  kfs_render* render; /* held (pinned or in the LRU), or NULL */
  uint64_t kernels_size;
  uint64_t json_size;
  uint8_t flags;
};

int kfs_renders_init(kfs_renders* rs, size_t count, uint64_t budget) {
  rs->slots = calloc(count ? count : 1, sizeof(*rs->slots));
  if (rs->slots == NULL)
    return -ENOMEM;
  rs->count = count;
  rs->budget = budget;
  pthread_mutex_init(&rs->lock, NULL);
  pthread_cond_init(&rs->done, NULL);
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
  for (size_t i = 0; i < rs->count; i++)
    free_render(rs->slots[i].render);
  free(rs->slots);
  pthread_mutex_destroy(&rs->lock);
  pthread_cond_destroy(&rs->done);
  memset(rs, 0, sizeof(*rs));
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
    rs->slots[victim->slot].render = NULL;
    rs->bytes -= victim->bytes;
    free_render(victim);
  }
}

/* ---- rendering ----------------------------------------------------------- */

/* Decodes only as much of the kernel as its metadata note needs; the
 * kernel cache is left to readers of the kernel itself. */
static kpack_error_t build(kfs_fs* fs, const kfs_node* n, kfs_render** out,
                           uint64_t* decoded) {
  const kfs_source* src = &fs->tree.sources[n->source];
  kfs_render* r = calloc(1, sizeof(*r));
  if (r == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  kpack_error_t err =
      kpack_kernel_render(src->archive, n->binary, n->arch, &r->text, decoded);
  if (err != KPACK_SUCCESS) {
    free(r);
    return err;
  }
  /* What the render holds in the heap, counting each allocation's malloc
   * overhead: most renders of a large install are a few bytes of text, and
   * counting their text alone let the budget hold twice its size. */
  const size_t chunk = 2 * sizeof(size_t);
  r->bytes = sizeof(*r) + chunk + r->text.kernels_size + 1 + chunk +
             r->text.metadata_json_size + 1 + chunk +
             (r->text.target ? strlen(r->text.target) + 1 + chunk : 0);
  *out = r;
  return KPACK_SUCCESS;
}

kpack_error_t kfs_render_acquire(kfs_fs* fs, const kfs_node* n,
                                 kfs_render** out) {
  kfs_renders* rs = &fs->renders;
  kfs_render_slot* slot = &rs->slots[n->render];
  kfs_render* r = NULL;
  *out = NULL;

  pthread_mutex_lock(&rs->lock);
  for (;;) {
    if (slot->render != NULL) {
      r = slot->render;
      if (r->refs++ == 0)
        lru_remove(rs, r);
      pthread_mutex_unlock(&rs->lock);
      *out = r;
      return KPACK_SUCCESS;
    }
    if (!(slot->flags & SLOT_RENDERING))
      break;
    /* Another thread is building it: take its result. If it failed, the
     * loop finds neither and this thread tries for itself. */
    pthread_cond_wait(&rs->done, &rs->lock);
  }
  slot->flags |= SLOT_RENDERING;
  pthread_mutex_unlock(&rs->lock);

  uint64_t decoded = 0;
  kpack_error_t err = build(fs, n, &r, &decoded);

  pthread_mutex_lock(&rs->lock);
  rs->decoded += decoded;
  slot->flags &= (uint8_t)~SLOT_RENDERING;
  pthread_cond_broadcast(&rs->done);
  if (err != KPACK_SUCCESS) {
    rs->failures++;
  } else {
    r->slot = n->render;
    r->refs = 1;
    slot->render = r;
    slot->kernels_size = r->text.kernels_size;
    slot->json_size = r->text.metadata_json_size;
    slot->flags |= SLOT_KNOWN;
    rs->bytes += r->bytes;
    rs->renders++;
    evict_over_budget(rs);
    *out = r;
  }
  pthread_mutex_unlock(&rs->lock);
  return err;
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

bool kfs_render_size(kfs_renders* rs, const kfs_node* n, uint64_t* size) {
  pthread_mutex_lock(&rs->lock);
  const kfs_render_slot* slot = &rs->slots[n->render];
  bool known = (slot->flags & SLOT_KNOWN) != 0;
  if (known)
    *size = n->kind == KFS_METADATA ? slot->json_size : slot->kernels_size;
  pthread_mutex_unlock(&rs->lock);
  return known;
}

int kfs_render_stats(kfs_renders* rs, char** text) {
  pthread_mutex_lock(&rs->lock);
  uint64_t renders = rs->renders, failures = rs->failures, bytes = rs->bytes;
  uint64_t decoded = rs->decoded;
  pthread_mutex_unlock(&rs->lock);
  return asprintf(text,
                  "renders=%" PRIu64 "\nrender_failures=%" PRIu64
                  "\nrender_bytes=%" PRIu64 "\nrender_decoded_bytes=%" PRIu64
                  "\n",
                  renders, failures, bytes, decoded);
}
