/* SPDX-License-Identifier: MIT
 *
 * libFuzzer harness: HIPK metadata handed to kpack_load_code_object() over a
 * fixed set of archives written at start-up (see kf_hipk_input()). Seeds:
 * corpus/hipk/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_drivers.h"

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  kf_hipk_setup();
  atexit(kf_hipk_teardown); /* the fixture lives in $TMPDIR */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kf_hipk_input(data, size);
  return 0;
}
