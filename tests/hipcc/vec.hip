// SPDX-License-Identifier: MIT
// A HIP shared library: device code, and a host function its program calls.
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void vec_add(const double* a, const double* b, double* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] + b[i];
}

extern "C" int vec_describe(char* out, int size) {
  return snprintf(out, (size_t)size, "libvec: vec_add for %d-element blocks",
                  256);
}
