// Rung 2 - coalesced: the same one-thread-per-output kernel, but threadIdx.x now
// walks the COLUMNS of C. A warp reads 32 consecutive floats of B (one 128-byte
// line) and writes 32 consecutive floats of C, and all 32 threads share one A
// element (a broadcast). Buys: several times fewer memory transactions per FMA;
// still no reuse beyond what L1/L2 happen to catch.
#include "simtlab_gemm.cuh"

template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
gemm_coalesced(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
  const int col = blockIdx.x * BX + threadIdx.x;
  const int row = blockIdx.y * BY + threadIdx.y;
  if (row >= M || col >= N) return;
  const float* a = A + (size_t)row * K;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc += a[k] * B[(size_t)k * N + col];
  }
  float* c = C + (size_t)row * N + col;
  *c = simtlab::axpby(acc, alpha, beta, c);
}
