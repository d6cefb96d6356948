// The norms' backward rungs' last launch: dw (and db) as column sums of the partial rows each
// block (or cluster) of the rows launch wrote, in a fixed order (the same sums every run).
#pragma once
#include "simtlab_io.cuh"

namespace simtlab {

// dw (and db) = the column sums of phase 0's `parts` partial rows, in the weight's type:
// a block takes 32 columns, its BLOCK / 32 warps strided slices of the partial rows, the slices
// then added in shared memory in a fixed order (the same sums every run).
template <int DT, int BLOCK, int RMS>
__device__ __forceinline__ void column_sums(const float* __restrict__ partial_w, const float* __restrict__ partial_b,
                                            int parts, int cols, typename simtlab::Io<DT>::T* __restrict__ dw,
                                            typename simtlab::Io<DT>::T* __restrict__ db) {
  using Io = simtlab::Io<DT>;
  constexpr int SLICES = BLOCK / 32;
  __shared__ float sw[SLICES][33], sb[RMS ? 1 : SLICES][33];
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32, c = blockIdx.x * 32 + lane;
  float a = 0.0f, b = 0.0f;
  if (c < cols)
    for (int p = slice; p < parts; p += SLICES) {
      a += partial_w[(size_t)p * cols + c];
      if constexpr (!RMS) b += partial_b[(size_t)p * cols + c];
    }
  sw[slice][lane] = a;
  if constexpr (!RMS) sb[slice][lane] = b;
  __syncthreads();
  if (slice == 0 && c < cols) {
    float tw = 0.0f, tb = 0.0f;
#pragma unroll
    for (int s = 0; s < SLICES; ++s) {
      tw += sw[s][lane];
      if constexpr (!RMS) tb += sb[s][lane];
    }
    Io::store(dw + c, tw);
    if constexpr (!RMS) Io::store(db + c, tb);
  }
}

}  // namespace simtlab
