// SPDX-License-Identifier: MIT
// A HIP program linked against libvec.so, with device code of its own.
#include <hip/hip_runtime.h>
#include <stdio.h>

extern "C" int vec_describe(char* out, int size);

__global__ void twice(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] *= 2;
}

int main(void) {
  char text[128];
  vec_describe(text, (int)sizeof(text));
  printf("vecapp: %s\n", text);
  return 0;
}
