// Rung 9 - multistage cp.async pipeline: rung 8's warp tiling, but tiles move
// global -> shared with cp.async (no trip through registers) into STAGES ring
// buffers. While the warps compute on slice k, the copies for slices k+1 ..
// k+STAGES-1 are in flight, so memory latency hides behind FMAs instead of
// stalling at a barrier. One __syncthreads per slice (was two).
// A is copied 4 bytes at a time so it lands transposed; B 16 bytes at a time
// (VEC) or 4 (unaligned rows). Out-of-range elements are zero-filled by the
// copy engine (src-size 0), so edge tiles need no extra branches in the math.
#include "simtlab_async.cuh"
#include "gemm/08_warptiling.cu"

namespace simtlab {
namespace multistage {

// Issues the cp.async copies of one BK slice. The per-thread addresses and
// row/column bounds are worked out once per tile (constructor); a slice then
// costs one add and one compare per copy, keeping integer work away from the FMA pipe.
template <class T, bool VEC>
struct SliceLoader {
  static constexpr int A_COPIES = T::BM * T::BK / T::THREADS;   // 4-byte copies of A per thread
  static constexpr int A_ROW_STEP = T::THREADS / T::BK;         // rows between a thread's copies
  static constexpr int B_COPIES = T::BK * T::BN / 4 / T::THREADS;
  static constexpr int B_ROW_STEP = T::THREADS / (T::BN / 4);
  static_assert(T::THREADS % T::BK == 0 && T::THREADS % (T::BN / 4) == 0, "copy layout must tile the slice");
  static_assert(A_COPIES <= 32, "row mask holds 32 copies");

  const float* a;     // &A[bm + tid/BK][tid%BK]: consecutive threads walk k (32-byte sectors)
  const float* b;     // &B[tid/(BN/4)][bn + 4*(tid%(BN/4))] (VEC path)
  size_t a_step, b_step;
  unsigned a_rows_ok; // bit i: copy i's row of A is inside the matrix
  int a_k, b_k;       // this thread's k offset inside a slice, for A and for B
  bool b_col_ok;
  int a_dst, b_dst;   // this thread's first shared-memory offsets
  const float* B0;
  int M, N, K, bn, tid;

  __device__ __forceinline__ SliceLoader(const float* A, const float* B, int M_, int N_, int K_, int bm, int bn_, int tid_)
      : B0(B), M(M_), N(N_), K(K_), bn(bn_), tid(tid_) {
    const int am = tid / T::BK;
    a_k = tid % T::BK;
    a = A + (size_t)(bm + am) * K + a_k;
    a_step = (size_t)A_ROW_STEP * K;
    a_rows_ok = 0;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) a_rows_ok |= (bm + am + i * A_ROW_STEP < M ? 1u : 0u) << i;
    a_dst = a_k * T::AS + am;
    b_k = tid / (T::BN / 4);
    const int bn4 = (tid % (T::BN / 4)) * 4;
    b = B + (size_t)b_k * N + bn + bn4;
    b_step = (size_t)B_ROW_STEP * N;
    b_col_ok = bn + bn4 < N;
    b_dst = b_k * T::BN + bn4;
  }

  // A slice known to lie inside the matrices (the block's tile inside M and N, the slice inside
  // K; 16-byte rows): the same copies without bounds predicates or fallback addresses. In the
  // general load() each copy costs ~9 instructions and ~28 cycles of fixed stalls (a predicate
  // rewritten while the previous copy still reads it, the fallback address moved into place);
  // here an address and the copy.
  __device__ __forceinline__ void load_interior(int k0, float* As, float* Bs) const {
    const float* ak = a + k0;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) cp_async4(As + a_dst + i * A_ROW_STEP, ak + i * a_step);  // lands transposed
    const float* bk = b + (size_t)k0 * N;
#pragma unroll
    for (int i = 0; i < B_COPIES; ++i) cp_async16(Bs + b_dst + i * B_ROW_STEP * T::BN, bk + i * b_step);
  }

  __device__ __forceinline__ void load(int k0, float* As, float* Bs) const {
    const bool ak_ok = k0 + a_k < K;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i) {
      const bool ok = ak_ok && ((a_rows_ok >> i) & 1u);
      cp_async4(As + a_dst + i * A_ROW_STEP, ok ? a + i * a_step + k0 : a, ok);  // lands transposed
    }
    if (VEC) {
#pragma unroll
      for (int i = 0; i < B_COPIES; ++i) {
        const bool ok = b_col_ok && k0 + b_k + i * B_ROW_STEP < K;
        cp_async16(Bs + b_dst + i * B_ROW_STEP * T::BN, ok ? b + i * b_step + (size_t)k0 * N : B0, ok);
      }
    } else {  // rows of B not 16-byte aligned: element-wise copies, each bounds-checked
#pragma unroll
      for (int i = 0; i < T::BK * T::BN / T::THREADS; ++i) {
        const int idx = tid + i * T::THREADS;
        const int k = idx / T::BN, n = idx % T::BN;
        const bool ok = k0 + k < K && bn + n < N;
        cp_async4(Bs + k * T::BN + n, ok ? B0 + (size_t)(k0 + k) * N + bn + n : B0, ok);
      }
    }
  }
};

// Computes the BMxBN tile of C at (bm, bn). smem holds STAGES A tiles then STAGES B tiles.
// INTERIOR (rung 10): slices that lie inside the matrices are copied by load_interior.
template <class T, int STAGES, bool VEC, bool INTERIOR = false>
__device__ __forceinline__ void tile(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                     float* C, int bm, int bn, float* smem) {
  static_assert(STAGES >= 2, "a pipeline needs at least two stages");
  const int tid = threadIdx.x;
  float* As = smem;
  float* Bs = smem + STAGES * T::A_TILE;
  const warptile::Coord c = warptile::coord<T>(tid);
  const SliceLoader<T, VEC> loader(A, B, M, N, K, bm, bn, tid);
  float acc[T::TM][T::TN] = {{0.0f}};
  const int slices = (K + T::BK - 1) / T::BK;
  // slices before this one need no bounds checks (0 for an edge tile or without INTERIOR)
  const int inside = INTERIOR && VEC && bm + T::BM <= M && bn + T::BN <= N ? K / T::BK : 0;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < slices) loader.load(s * T::BK, As + s * T::A_TILE, Bs + s * T::B_TILE);
    cp_async_commit();  // always commit, so group counting stays uniform
  }
  for (int kt = 0; kt < slices; ++kt) {
    cp_async_wait<STAGES - 2>();  // slice kt has landed (for this thread) ...
    __syncthreads();              // ... for all threads; and everyone is done with slice kt-1
    const int next = kt + STAGES - 1;
    if (next < slices) {
      const int s = next % STAGES;  // the stage slice kt-1 used: free after the barrier above
      if (next < inside)
        loader.load_interior(next * T::BK, As + s * T::A_TILE, Bs + s * T::B_TILE);
      else
        loader.load(next * T::BK, As + s * T::A_TILE, Bs + s * T::B_TILE);
    }
    cp_async_commit();
    const int s = kt % STAGES;
    warptile::mma_slice<T>(As + s * T::A_TILE, Bs + s * T::B_TILE, c, acc);
  }
  warptile::store_tile<T, VEC>(C, M, N, bm, bn, c, acc, alpha, beta);
}

}  // namespace multistage
}  // namespace simtlab

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int STAGES, int MINB, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
gemm_multistage(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                float beta, float* __restrict__ C) {
  using T = simtlab::warptile::Tile<BM, BN, BK, WM, WN, WMITER, WNITER>;
  extern __shared__ float4 smem4[];  // STAGES * (A_TILE + B_TILE) floats, 16-byte aligned
  simtlab::multistage::tile<T, STAGES, VEC>(M, N, K, alpha, A, B, beta, C, blockIdx.y * BM, blockIdx.x * BN,
                                            reinterpret_cast<float*>(smem4));
}
