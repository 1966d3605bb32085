/* SPDX-License-Identifier: MIT
 *
 * The AMDGCN processors libkpack knows (processor.c): each one's
 * EF_AMDGPU_MACH value and the target features it has. The code-object
 * reader derives targets from it, and kpack_target_check() judges target
 * names by it.
 */
#ifndef KPACK_BINARY_PROCESSOR_H
#define KPACK_BINARY_PROCESSOR_H

#include <stddef.h>
#include <stdint.h>

/* Target features, as bits of kp_processor.features. */
enum { KP_XNACK = 1, KP_SRAMECC = 2 };

typedef struct kp_processor {
  uint8_t mach;
  uint8_t features;
  const char* name;
} kp_processor;

/* The processor with EF_AMDGPU_MACH value `mach`, or NULL. */
const kp_processor* kp_processor_by_mach(uint32_t mach);

/* The processor named name[0, len) ("gfx90a", no features), or NULL. */
const kp_processor* kp_processor_by_name(const char* name, size_t len);

#endif /* KPACK_BINARY_PROCESSOR_H */
