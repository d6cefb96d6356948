// Rung 5 - 2D block tiling: each thread computes a TMxTN register tile as an
// outer product: per k it loads TM values of A and TN of B from shared memory
// and does TM*TN FMAs. Shared loads per FMA fall to (TM+TN)/(TM*TN) (1/4 for
// 8x8) and arithmetic intensity per block rises with the 128x128 block tile.
#include "simtlab_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_2d_blocktiling(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "tile loads must divide evenly");
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

  float acc[TM][TN] = {{0.0f}};
  float a[TM], b[TN];
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
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[(trow * TM + i) * BK + k];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = bm + trow * TM + i;
    if (row >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = bn + tcol * TN + j;
      if (col < N) {
        float* c = C + (size_t)row * N + col;
        *c = simtlab::axpby(acc[i][j], alpha, beta, c);
      }
    }
  }
}
