/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: bytes read as a HIP host binary's .hipFatBinSegment
 * records, their relocations and HIPK metadata (see kf_host_input()).
 * Seeds: corpus/host/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_host_input(data, size);
  return 0;
}
