// SPDX-License-Identifier: MIT
#include <hip/hip_runtime.h>

__device__ float tu_b_scale(float v) { return v * 2.0f; }

__global__ void tu_b_kernel(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = tu_b_scale(p[i]) + 1.0f;
}

int tu_b_host(void) { return 2; }
