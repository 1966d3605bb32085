/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: a whole .kpack file, opened with kpack_open() and read
 * kernel by kernel (see kf_archive_input()). Seeds: corpus/archive/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_archive_input(data, size);
  return 0;
}
