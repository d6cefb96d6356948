// Shared by the SpMV rungs: a long row's piece summed by one warp (rungs 5 and 6).
#pragma once

namespace simtlab {
namespace spmv {

// The warp's sum of csr_vals[k] * x[csr_cols[k]] over k in [begin, end): lanes stride by 32 (coalesced
// reads of the piece), then a shuffle sum - every lane returns it.
__device__ __forceinline__ float warp_piece_sum(int begin, int end, int lane, const int* __restrict__ csr_cols,
                                                const float* __restrict__ csr_vals, const float* __restrict__ x) {
  float sum = 0.0f;
#pragma unroll 4
  for (int k = begin + lane; k < end; k += 32) sum += csr_vals[k] * __ldg(x + csr_cols[k]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

}  // namespace spmv
}  // namespace simtlab
