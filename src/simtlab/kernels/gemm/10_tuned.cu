// Rung 10 - tuned: rung 9's pipeline with three changes.
//  * Grouped tile order: a 1D grid walks the tiles of C in column strips of GROUP_M tile-rows,
//    so blocks running together share panels of A and B in L2 instead of streaming all of B
//    once per tile-row.
//  * Parameters (tile shape, stages, occupancy bound) come from the tuner's store for this
//    device and size when it holds a verified result, else from the per-architecture defaults.
//  * INTERIOR 1 (default): a block whose tile lies inside M and N copies its slices that lie
//    inside K without bounds predicates or fallback addresses (~37 instead of ~130 instructions
//    a slice). Measurements and the ideas tried here: docs/design/gemm.md.
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
