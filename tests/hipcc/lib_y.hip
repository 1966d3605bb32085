// SPDX-License-Identifier: MIT
#include <hip/hip_runtime.h>

__global__ void lib_y_kernel(long* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = p[i] + (long)i;
}

int lib_y_host(void) { return 20; }
