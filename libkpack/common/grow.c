/* SPDX-License-Identifier: MIT
 *
 * Doubling arrays (see grow.h).
 */
#include "common/grow.h"

#include <stdint.h>
#include <stdlib.h>

void* kp_grow(void* items, size_t count, size_t* cap, size_t size,
              size_t first) {
  if (count < *cap)
    return items;
  size_t next = *cap ? *cap : first;
  if (*cap > SIZE_MAX / 2 || size == 0 || next > SIZE_MAX / 2 / size)
    return NULL;
  if (*cap)
    next = *cap * 2;
  void* grown = realloc(items, next * size);
  if (grown != NULL)
    *cap = next;
  return grown;
}
