/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: bytes parsed as a clang offload bundle (plain or CCOB)
 * and as a HIP host ELF with .hip_fatbin (see kf_bundle_input()). Seeds:
 * corpus/bundle/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_bundle_input(data, size);
  return 0;
}
