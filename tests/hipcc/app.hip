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

int main(int argc, char** argv) {
  (void)argv;
  printf("app: %d argument%s, kernels at %s\n", argc - 1, argc == 2 ? "" : "s",
         (void*)axpy != NULL && (void*)fill != NULL ? "known addresses" : "?");
  return 0;
}
