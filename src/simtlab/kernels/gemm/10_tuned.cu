// Rung 10 - tuned: rung 9's pipeline with three changes.
//  * Grouped tile order: a 1D grid walks the tiles of C in column strips of
//    GROUP_M tile-rows, so blocks running together share panels of A and B in
//    L2 instead of streaming all of B once per tile-row.
//  * Parameters (tile shape, stages, occupancy bound) come from the tuner's
//    store for this device and size when it holds a verified result, else from
//    the per-architecture defaults in the catalog (measured on the H200).
//  * INTERIOR 1 (default): a block whose tile lies inside M and N copies its slices that lie
//    inside K without bounds predicates or fallback addresses. In the general copy ptxas spends
//    ~9 instructions and ~28 cycles of fixed stalls per 4-byte copy of A (8 a slice), all warps
//    at once right after the barrier; the interior copy is an address and the copy (37
//    instructions and 83 stall cycles a slice instead of ~130 and ~250). Measured +0.3 to +1.0
//    points of cuBLAS at every aligned size on the H200, the FMAs' registers unchanged.
//    (Fragments double-buffered in registers across slices, the barrier moved into the last
//    depth as CUTLASS's multistage loop does, measured 9 points slower: 243 registers and a
//    worse assignment for the FMAs - benchmarks/NOTES.md.)
#include "gemm/09_multistage.cu"

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int STAGES, int MINB, int GROUP_M, int INTERIOR,
          bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
gemm_tuned(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
           float* __restrict__ C) {
  using T = simtlab::warptile::Tile<BM, BN, BK, WM, WN, WMITER, WNITER>;
  extern __shared__ float4 smem4[];
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
  const int first_m = group * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);  // the last group can be short
  const int tm = first_m + in_group % rows, tn = in_group / rows;
  simtlab::multistage::tile<T, STAGES, VEC, INTERIOR == 1>(M, N, K, alpha, A, B, beta, C, tm * BM, tn * BN,
                                            reinterpret_cast<float*>(smem4));
}
