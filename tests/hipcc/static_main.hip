// SPDX-License-Identifier: MIT
#include <hip/hip_runtime.h>
#include <stdio.h>

int lib_x_host(void);
int lib_y_host(void);

__global__ void main_kernel(int* p) { p[threadIdx.x] = (int)threadIdx.x; }

int main(void) {
  printf("static: x=%d y=%d\n", lib_x_host(), lib_y_host());
  return 0;
}
