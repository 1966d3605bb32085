// SPDX-License-Identifier: MIT
// Three translation units: built one code object each, or (-fgpu-rdc)
// linked into one, where tu_a's kernel calls tu_b's device function.
#include <hip/hip_runtime.h>
#include <stdio.h>

#ifdef RDC
extern __device__ float tu_b_scale(float v);
#else
static __device__ float tu_b_scale(float v) { return v * 2.0f; }
#endif

__global__ void tu_a_kernel(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = tu_b_scale(p[i]);
}

int tu_b_host(void);
int tu_c_host(void);

int main(void) {
  printf("tu: a=%d b=%d c=%d\n", 1, tu_b_host(), tu_c_host());
  return 0;
}
