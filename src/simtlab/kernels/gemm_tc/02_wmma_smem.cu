// Rung 2 - WMMA with shared-memory block tiles: a BMxBN block
// tile computed by WARPS_M x WARPS_N warps, each holding a (BM/WARPS_M) x
// (BN/WARPS_N) grid of 16x16 accumulator fragments. The block stages BK-deep
// slices of A and B in shared memory (rows padded by 8 elements so fragment
// loads spread over the banks) and every fragment loaded from there feeds
// several HMMAs: global traffic falls by the tile size, as it did for the
// fp32 ladder's rung 3. VEC=false (K or N not a multiple of 8, unaligned rows)
// loads element by element with bounds checks.
#include <mma.h>
#include "simtlab_tc.cuh"

template <int DT, int BM, int BN, int BK, int WARPS_M, int WARPS_N, bool VEC>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, 1)
gemm_tc_wmma_smem(int M, int N, int K, const typename simtlab::Elem<DT>::T* __restrict__ A,
                  const typename simtlab::Elem<DT>::T* __restrict__ B, float* __restrict__ C) {
  using namespace nvcuda;
  using T = typename simtlab::Elem<DT>::T;
  A += (size_t)blockIdx.z * M * K, B += (size_t)blockIdx.z * K * N, C += (size_t)blockIdx.z * M * N;  // batch z
  constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;  // warp tile
  constexpr int FM = WTM / 16, FN = WTN / 16;            // fragments per warp
  constexpr int LDA = BK + 8, LDB = BN + 8;              // padded rows (multiples of 8 elements)
  static_assert(WTM % 16 == 0 && WTN % 16 == 0 && BK % 16 == 0, "whole 16x16x16 fragments");
  static_assert((BM * BK / 8) % THREADS == 0 && (BK * BN / 8) % THREADS == 0, "8-element chunks divide among threads");
  static_assert(BM * LDA * (int)sizeof(T) >= 32 * WARPS_M * WARPS_N * 8 * (int)sizeof(float),
                "the A tile doubles as the epilogue's staging area");
  __shared__ __align__(32) T As[BM * LDA];
  __shared__ __align__(32) T Bs[BK * LDB];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = tid; i < BM * BK / 8; i += THREADS) {  // A slice: BM rows of BK, 8 elements per chunk
      const int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
      const int gr = m0 + r, gk = k0 + c;
      T* dst = As + r * LDA + c;
      if (VEC) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (gr < M && gk < K) v = *reinterpret_cast<const uint4*>(A + (size_t)gr * K + gk);
        *reinterpret_cast<uint4*>(dst) = v;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          dst[e] = (gr < M && gk + e < K) ? A[(size_t)gr * K + gk + e] : simtlab::Elem<DT>::zero();
      }
    }
#pragma unroll
    for (int i = tid; i < BK * BN / 8; i += THREADS) {  // B slice: BK rows of BN
      const int r = i / (BN / 8), c = (i % (BN / 8)) * 8;
      const int gk = k0 + r, gn = n0 + c;
      T* dst = Bs + r * LDB + c;
      if (VEC) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (gk < K && gn < N) v = *reinterpret_cast<const uint4*>(B + (size_t)gk * N + gn);
        *reinterpret_cast<uint4*>(dst) = v;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          dst[e] = (gk < K && gn + e < N) ? B[(size_t)gk * N + gn + e] : simtlab::Elem<DT>::zero();
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], As + (wm + 16 * i) * LDA + kk, LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], Bs + kk * LDB + wn + 16 * j, LDB);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: full, aligned fragments go straight to C; edge ones through a per-warp staging tile.
  float* stage = reinterpret_cast<float*>(As) + warp * 16 * 16;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      const int r0 = m0 + wm + 16 * i, c0 = n0 + wn + 16 * j;
      if (r0 >= M || c0 >= N) continue;
      if (VEC && r0 + 16 <= M && c0 + 16 <= N) {
        wmma::store_matrix_sync(C + (size_t)r0 * N + c0, acc[i][j], N, wmma::mem_row_major);
      } else {
        wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 256; e += 32) {
          const int r = e / 16, c = e % 16;
          if (r0 + r < M && c0 + c < N) C[(size_t)(r0 + r) * N + c0 + c] = stage[e];
        }
        __syncwarp();
      }
    }
}
