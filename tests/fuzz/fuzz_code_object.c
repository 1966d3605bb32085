/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: bytes parsed as an AMDGPU code object (ELF header,
 * note segments and sections, the NT_AMDGPU_METADATA note) with every
 * kernel and the note's JSON walked (see kf_code_object_input()). Seeds:
 * corpus/code_object/.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_drivers.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_code_object_input(data, size);
  return 0;
}
