// SPDX-License-Identifier: MIT
// Objects of a static archive (libk.a) that a HIP program links in.
#include <hip/hip_runtime.h>

__global__ void lib_x_kernel(double* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = p[i] * p[i];
}

int lib_x_host(void) { return 10; }
