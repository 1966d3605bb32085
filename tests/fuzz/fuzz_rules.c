/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: a rule file of `kpack split --per-arch` and paths to
 * place by it (see kf_rules_input()). Seeds: corpus/rules/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_rules_input(data, size);
  return 0;
}
