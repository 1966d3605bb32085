// SPDX-License-Identifier: MIT
#include <hip/hip_runtime.h>

__global__ void tu_c_kernel(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = p[i] ^ 0x5a;
}

int tu_c_host(void) { return 3; }
