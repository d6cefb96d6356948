// Rung 8 - warp tiling: the block tile is split into warp tiles (WMxWN) and each
// warp tile into per-lane 4x4 sub-tiles repeated WMITERxWNITER times, mirroring
// block -> warp -> thread. A warp's fragment loads then touch a compact region:
// 4..8 distinct float4 of A (broadcast) and 128 consecutive bytes of B per
// LDS.128, and its C stores are whole 128-byte lines. Buys: conflict-free
// shared loads by construction and better register/L1 locality per warp; it is
// the structure tensor-core kernels use, and the unit rungs 9-10 pipeline.
#include "simtlab_gemm.cuh"

namespace simtlab {
namespace warptile {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int WMITER_, int WNITER_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
  static constexpr int WMITER = WMITER_, WNITER = WNITER_;
  static constexpr int WARPS_N = BN / WN;
  static constexpr int THREADS = (BM / WM) * WARPS_N * 32;
  static constexpr int SUB_M = WM / WMITER, SUB_N = WN / WNITER;  // one 4x4 per lane covers a sub-tile
  static constexpr int LANES_N = SUB_N / 4;
  static constexpr int TM = 4 * WMITER, TN = 4 * WNITER;           // outputs per thread
  static constexpr int AS = BM + 4;                                // padded stride of the transposed A tile
  static constexpr int A_TILE = BK * AS, B_TILE = BK * BN;         // floats per stage
  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must tile the block");
  static_assert((SUB_M / 4) * (SUB_N / 4) == 32, "a warp sub-tile must hold 32 lanes of 4x4");
  static_assert(BK % 4 == 0 && (BM * BK) % (4 * THREADS) == 0 && (BK * BN) % (4 * THREADS) == 0,
                "tile loads must divide evenly among the threads");
};

// Where a thread's outputs live inside the block tile.
struct Coord {
  int wm, wn;  // the warp tile's origin
  int lm, ln;  // the lane's 4x4 origin inside each warp sub-tile
};

template <class T>
__device__ __forceinline__ Coord coord(int tid) {
  const int warp = tid / 32, lane = tid % 32;
  return {(warp / T::WARPS_N) * T::WM, (warp % T::WARPS_N) * T::WN, (lane / T::LANES_N) * 4,
          (lane % T::LANES_N) * 4};
}

// A thread's operands at depth k of the slice: WMITER float4 of A, WNITER float4 of B.
template <class T>
__device__ __forceinline__ void fragments(const float* As, const float* Bs, const Coord& c, int k, float (&a)[T::TM],
                                          float (&b)[T::TN]) {
#pragma unroll
  for (int i = 0; i < T::WMITER; ++i)
    *reinterpret_cast<float4*>(&a[4 * i]) = *reinterpret_cast<const float4*>(&As[k * T::AS + c.wm + i * T::SUB_M + c.lm]);
#pragma unroll
  for (int j = 0; j < T::WNITER; ++j)
    *reinterpret_cast<float4*>(&b[4 * j]) = *reinterpret_cast<const float4*>(&Bs[k * T::BN + c.wn + j * T::SUB_N + c.ln]);
}

// One multiply-add into an accumulator: fp32 (one FFMA), or float64 (KAHAN 2: the product of two
// floats is exact in a double, so only the sum rounds, at 2^-53).
__device__ __forceinline__ float madd(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double madd(float a, float b, double c) { return fma((double)a, (double)b, c); }

// acc += A_slice x B_slice for one BK-deep slice held in shared memory (float or double sums).
// Float64 sums keep two depths in flight, not the whole slice: fully unrolled, each depth's fragments
// as doubles fill the 128 registers that two blocks an SM allow, and the build sat at that limit
// (spilling or not from one compile to the next).
template <class T, class Acc>
__device__ __forceinline__ void mma_slice(const float* As, const float* Bs, const Coord& c, Acc (&acc)[T::TM][T::TN]) {
  constexpr int DEPTHS = sizeof(Acc) == sizeof(double) ? 2 : T::BK;
#pragma unroll DEPTHS
  for (int k = 0; k < T::BK; ++k) {
    float a[T::TM], b[T::TN];
    fragments<T>(As, Bs, c, k, a, b);
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) acc[i][j] = madd(a[i], b[j], acc[i][j]);
  }
}

// The same slice with Kahan-compensated accumulation (the KAHAN option): per output a running
// sum s and the rounding error c of its last addition; each step adds (a*b - c), the product
// exact inside the FMA, and records the new error. Twice the accumulator registers and four
// instructions per multiply-add instead of one, for an error that stops growing with K.
template <class T>
__device__ __forceinline__ void mma_slice_kahan(const float* As, const float* Bs, const Coord& c,
                                                float (&acc)[T::TM][T::TN], float (&comp)[T::TM][T::TN]) {
#pragma unroll
  for (int k = 0; k < T::BK; ++k) {
    float a[T::TM], b[T::TN];
    fragments<T>(As, Bs, c, k, a, b);
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) {
        const float y = fmaf(a[i], b[j], -comp[i][j]);
        const float t = acc[i][j] + y;
        comp[i][j] = (t - acc[i][j]) - y;  // no fast-math: the compiler keeps this order
        acc[i][j] = t;
      }
  }
}

template <class T, bool VEC>
__device__ __forceinline__ void store_tile(float* C, int M, int N, int bm, int bn, const Coord& c,
                                           const float (&acc)[T::TM][T::TN], float alpha, float beta) {
#pragma unroll
  for (int i = 0; i < T::TM; ++i) {
    const int row = bm + c.wm + (i / 4) * T::SUB_M + c.lm + i % 4;
#pragma unroll
    for (int j = 0; j < T::WNITER; ++j) {
      const int col = bn + c.wn + j * T::SUB_N + c.ln;
      store4<VEC>(C + (size_t)row * N + col, row < M ? N - col : 0,
                  make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]), alpha, beta);
    }
  }
}

// Global -> registers -> shared copy of one BK slice (A transposed into the padded tile).
template <class T, bool VEC>
__device__ __forceinline__ void load_slice(const float* A, const float* B, int M, int N, int K, int bm, int bn,
                                           int k0, float* As, float* Bs, int tid) {
#pragma unroll
  for (int i = 0; i < T::BM * T::BK / 4 / T::THREADS; ++i) {
    const int idx = tid + i * T::THREADS;
    const int r = idx / (T::BK / 4), k = (idx % (T::BK / 4)) * 4;
    const float4 v = load4<VEC>(A + (size_t)(bm + r) * K + k0 + k, bm + r < M ? K - k0 - k : 0);
    As[(k + 0) * T::AS + r] = v.x;
    As[(k + 1) * T::AS + r] = v.y;
    As[(k + 2) * T::AS + r] = v.z;
    As[(k + 3) * T::AS + r] = v.w;
  }
#pragma unroll
  for (int i = 0; i < T::BK * T::BN / 4 / T::THREADS; ++i) {
    const int idx = tid + i * T::THREADS;
    const int k = idx / (T::BN / 4), n = (idx % (T::BN / 4)) * 4;
    *reinterpret_cast<float4*>(&Bs[k * T::BN + n]) =
        load4<VEC>(B + (size_t)(k0 + k) * N + bn + n, k0 + k < K ? N - bn - n : 0);
  }
}

}  // namespace warptile
}  // namespace simtlab

// KAHAN: fp32 sums (0), Kahan-compensated (1, mma_slice_kahan), or float64 sums (2, mma_slice on
// doubles: one rounding in all; what simtlab.gemm(precision="tf32x3") runs where K is too short
// for three TF32 products to match SGEMM) - the fp32 path's accuracy options.
template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int MINB, int KAHAN, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
gemm_warptiling(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                float beta, float* __restrict__ C) {
  static_assert(KAHAN >= 0 && KAHAN <= 2, "KAHAN: 0 fp32 sums, 1 Kahan-compensated, 2 float64 sums");
  using T = simtlab::warptile::Tile<BM, BN, BK, WM, WN, WMITER, WNITER>;
  __shared__ __align__(16) float As[T::A_TILE];
  __shared__ __align__(16) float Bs[T::B_TILE];
  const int tid = threadIdx.x;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const simtlab::warptile::Coord c = simtlab::warptile::coord<T>(tid);
  float acc[T::TM][T::TN] = {{0.0f}};
  float comp[KAHAN == 1 ? T::TM : 1][KAHAN == 1 ? T::TN : 1] = {{0.0f}};
  double wide[KAHAN == 2 ? T::TM : 1][KAHAN == 2 ? T::TN : 1] = {{0.0}};
  for (int k0 = 0; k0 < K; k0 += BK) {
    simtlab::warptile::load_slice<T, VEC>(A, B, M, N, K, bm, bn, k0, As, Bs, tid);
    __syncthreads();
    if constexpr (KAHAN == 1) {
      simtlab::warptile::mma_slice_kahan<T>(As, Bs, c, acc, comp);
    } else if constexpr (KAHAN == 2) {
      simtlab::warptile::mma_slice<T>(As, Bs, c, wide);  // (float64 sums: one rounding in all)
    } else {
      simtlab::warptile::mma_slice<T>(As, Bs, c, acc);
    }
    __syncthreads();
  }
  if constexpr (KAHAN == 1) {
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) acc[i][j] -= comp[KAHAN == 1 ? i : 0][KAHAN == 1 ? j : 0];  // the last error back
  }
  if constexpr (KAHAN == 2) {  // alpha applied in double: alpha * A@B rounds once
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) acc[i][j] = (float)((double)alpha * wide[KAHAN == 2 ? i : 0][KAHAN == 2 ? j : 0]);
  }
  simtlab::warptile::store_tile<T, VEC>(C, M, N, bm, bn, c, acc, KAHAN == 2 ? 1.0f : alpha, beta);
}
