// SPDX-License-Identifier: MIT
// A HIP program that makes no HIP call: its kernels are registered at
// start-up but never launched, so it runs without a GPU.
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

__global__ void fill(int* p, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = v + i;
}

#ifdef BIG_DATA
// 256 KiB of initialized data, loaded after the device code: more than
// the device code leaves behind.
volatile int big_data[65536] = {1};
#endif

int main(int argc, char** argv) {
  (void)argv;
#ifdef BIG_DATA
  printf("app: data %d\n", big_data[0] + big_data[65535]);
#endif
  printf("app: %d argument%s, kernels at %s\n", argc - 1, argc == 2 ? "" : "s",
         (void*)axpy != NULL && (void*)fill != NULL ? "known addresses" : "?");
  return 0;
}
