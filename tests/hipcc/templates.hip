// SPDX-License-Identifier: MIT
// Hundreds of template instantiations: a fat binary of several MB.
#include <hip/hip_runtime.h>
#include <stdio.h>

template <int N, typename T>
__global__ void poly(T* p, T x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  T acc = (T)0;
#pragma unroll
  for (int k = 0; k < 64; k++)
    acc = acc * x + (T)(N * 31 + k);
  if (i < n)
    p[i] = acc + p[i];
}

template <int N>
struct instantiate {
  static int go() {
    (void)&poly<N, float>;
    (void)&poly<N, double>;
    (void)&poly<N, int>;
    (void)&poly<N, long>;
    return 4 + instantiate<N - 1>::go();
  }
};
template <>
struct instantiate<0> {
  static int go() { return 0; }
};

int main(void) {
  printf("templates: %d kernels\n", instantiate<100>::go());
  return 0;
}
