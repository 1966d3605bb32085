/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: bytes taken for a HIP host ELF and run through the
 * host-ELF transform (see kf_transform_input()); what it writes must pass
 * the host reader's checks. Seeds: corpus/transform/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_transform_input(data, size);
  return 0;
}
