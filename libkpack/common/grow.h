/* SPDX-License-Identifier: MIT
 *
 * Arrays that grow by doubling as elements are appended, the one way every
 * module of the library makes room.
 */
#ifndef KPACK_GROW_H
#define KPACK_GROW_H

#include <stddef.h>

/* Makes room for element `count` of an array of `*cap` elements of `size`
 * bytes: returns `items` itself while count < *cap, else the array moved to
 * twice its capacity (`first` elements when it has none) with *cap updated.
 * NULL when that allocation fails or its size would overflow: `items` and
 * *cap are then unchanged and still the caller's. */
void* kp_grow(void* items, size_t count, size_t* cap, size_t size,
              size_t first);

#endif /* KPACK_GROW_H */
