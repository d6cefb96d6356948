// Rung 6 - vectorized: the 2D-tiled kernel with 128-bit accesses. Global loads
// and C stores are float4 (one LDG.128/STG.128 instead of four), and A is stored
// TRANSPOSED in shared memory (As[k][m]) so a thread's TM values of A for one k
// are contiguous and come in with LDS.128 like B's. Buys: 4x fewer load/store
// instructions competing with the FMAs for issue slots.
// VEC=false is the predicated path for rows that are not 16-byte aligned
// (K or N not a multiple of 4, or an offset base pointer): scalar, bounds-checked.
#include "simtlab_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_vectorized(int M, int N, int K, float alpha, const float* __restrict__ A,
                const float* __restrict__ B, float beta, float* __restrict__ C) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  static_assert(BK % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 granularity");
  __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
  __shared__ __align__(16) float Bs[BK * BN];
  const int tid = threadIdx.x;
  const int tcol = tid % (BN / TN), trow = tid / (BN / TN);
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

  float acc[TM][TN] = {{0.0f}};
  float a[TM], b[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = tid; i < BM * BK / 4; i += THREADS) {
      const int r = i / (BK / 4), k = (i % (BK / 4)) * 4;
      const float4 v = simtlab::load4<VEC>(A + (size_t)(bm + r) * K + k0 + k, bm + r < M ? K - k0 - k : 0);
      As[(k + 0) * BM + r] = v.x;
      As[(k + 1) * BM + r] = v.y;
      As[(k + 2) * BM + r] = v.z;
      As[(k + 3) * BM + r] = v.w;
    }
#pragma unroll
    for (int i = tid; i < BK * BN / 4; i += THREADS) {
      const int k = i / (BN / 4), c = (i % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[k * BN + c]) =
          simtlab::load4<VEC>(B + (size_t)(k0 + k) * N + bn + c, k0 + k < K ? N - bn - c : 0);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; i += 4)
        *reinterpret_cast<float4*>(&a[i]) = *reinterpret_cast<const float4*>(&As[k * BM + trow * TM + i]);
#pragma unroll
      for (int j = 0; j < TN; j += 4)
        *reinterpret_cast<float4*>(&b[j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + tcol * TN + j]);
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
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int col = bn + tcol * TN + j;
      simtlab::store4<VEC>(C + (size_t)row * N + col, row < M ? N - col : 0,
                           make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta);
    }
  }
}
