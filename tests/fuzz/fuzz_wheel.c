/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: a Python wheel, read as a zip, its METADATA parsed and
 * the whole unpacked (see kf_wheel_input()). Seeds: corpus/wheel/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_wheel_input(data, size);
  return 0;
}
