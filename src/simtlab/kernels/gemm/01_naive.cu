// Rung 1 - naive: one thread per element of C, threadIdx.x walks the ROWS of C.
// Each thread streams a full row of A and column of B from global memory. The 32
// threads of a warp sit on 32 different rows, so their A loads are K*4 bytes apart
// (one 32-byte sector per thread, no coalescing) and nothing is reused on chip.
// Buys: nothing - this is the baseline the ladder is measured from.
#include "simtlab_gemm.cuh"

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK * BLOCK)
gemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A,
           const float* __restrict__ B, float beta, float* __restrict__ C) {
  const int row = blockIdx.x * BLOCK + threadIdx.x;
  const int col = blockIdx.y * BLOCK + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
  }
  float* c = C + (size_t)row * N + col;
  *c = simtlab::axpby(acc, alpha, beta, c);
}
