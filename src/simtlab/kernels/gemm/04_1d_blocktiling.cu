// Rung 4 - 1D block tiling: each thread computes a column of TM outputs. One
// value of B, read once from shared memory into a register, feeds TM FMAs, so
// shared loads per FMA fall from 2 to (1 + TM)/TM. The block tile grows to
// BMxBN with a thin BK slice of K staged per step.
#include "simtlab_gemm.cuh"

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__((BM / TM) * BN)
gemm_1d_blocktiling(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
  constexpr int THREADS = (BM / TM) * BN;
  static_assert(THREADS % BK == 0 && THREADS % BN == 0, "tile loads must divide evenly");
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % BN, trow = tid / BN;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

  float acc[TM] = {0.0f};
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = tid; i < BM * BK; i += THREADS) {
      const int r = i / BK, k = i % BK;
      As[i] = (bm + r < M && k0 + k < K) ? A[(size_t)(bm + r) * K + k0 + k] : 0.0f;
    }
#pragma unroll
    for (int i = tid; i < BK * BN; i += THREADS) {
      const int k = i / BN, c = i % BN;
      Bs[i] = (k0 + k < K && bn + c < N) ? B[(size_t)(k0 + k) * N + bn + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k * BN + tcol];
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[(trow * TM + i) * BK + k] * b;
    }
    __syncthreads();
  }
  const int col = bn + tcol;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = bm + trow * TM + i;
    if (row < M && col < N) {
      float* c = C + (size_t)row * N + col;
      *c = simtlab::axpby(acc[i], alpha, beta, c);
    }
  }
}
