// Rung 7 - bank-conflict-free: rung 6 with two shared-memory fixes.
//  * Stores: the transposed A tile gets 4 floats of padding per k-row (stride
//    BM+4), so the threads writing As[k][m] for neighbouring (k, m) land in 32
//    different banks instead of pairing up two-way.
//  * Loads: a thread's TN columns are no longer contiguous (tcol*TN ... which
//    puts neighbouring threads' float4s 32 bytes apart, two-way conflicted) but
//    TN/4 float4 chunks spaced BN/(TN/4) apart, so a quarter-warp reads 128
//    consecutive bytes. Rows of A are split the same way.
// Buys: fewer shared-memory wavefronts per LDS/STS; ncu's l1tex bank-conflict
// counters for this kernel drop to ~0 (`simtlab profile gemm 7` records them).
#include "simtlab_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_bank_conflict_free(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  constexpr int AS = BM + 4;               // padded row stride of the transposed A tile
  constexpr int MSTEP = BM / (TM / 4);     // distance between a thread's float4 chunks of A
  constexpr int NSTEP = BN / (TN / 4);     // ... and of B / C
  static_assert(BK % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 granularity");
  __shared__ __align__(16) float As[BK * AS];
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
      As[(k + 0) * AS + r] = v.x;
      As[(k + 1) * AS + r] = v.y;
      As[(k + 2) * AS + r] = v.z;
      As[(k + 3) * AS + r] = v.w;
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
      for (int i = 0; i < TM / 4; ++i)
        *reinterpret_cast<float4*>(&a[4 * i]) = *reinterpret_cast<const float4*>(&As[k * AS + i * MSTEP + trow * 4]);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j)
        *reinterpret_cast<float4*>(&b[4 * j]) = *reinterpret_cast<const float4*>(&Bs[k * BN + j * NSTEP + tcol * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = bm + (i / 4) * MSTEP + trow * 4 + i % 4;
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const int col = bn + j * NSTEP + tcol * 4;
      simtlab::store4<VEC>(C + (size_t)row * N + col, row < M ? N - col : 0,
                           make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]),
                           alpha, beta);
    }
  }
}
