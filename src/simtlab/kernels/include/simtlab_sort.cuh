// What the sort ladder's kernels share: the key a sort compares, and a block's exclusive scan.
#pragma once

namespace simtlab {
namespace sort {

// The unsigned key whose order is the sort's order: uint32 as it is; float32's bits (FLOAT bit 0)
// mapped so that unsigned order is numeric order (negatives flipped, positives' sign bit set),
// -0.0 equal to +0.0 and every NaN above +inf - NumPy's and torch's order (NaNs last); int32's
// (bit 2) with the sign bit flipped. Bit 1 sorts descending: every key inverted, so equal keys
// stay equal (a stable sort keeps their input order, as torch.sort(stable=True) does) and NaNs
// come first. A stable sort of these bits gives exactly the libraries' stable result.
template <int FLOAT>
__device__ __forceinline__ unsigned sort_key(unsigned bits) {
  unsigned k = bits;
  if (FLOAT & 1) {
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      k = 0xffffffffu;  // NaN, any sign or payload
    } else {
      if (bits == 0x80000000u) bits = 0u;  // -0.0 sorts as +0.0
      k = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    }
  } else if (FLOAT & 4) {
    k = bits ^ 0x80000000u;
  }
  return (FLOAT & 2) ? ~k : k;
}

// Exclusive scan of one value a thread across the block (BLOCK threads, whole warps); `total`
// gets the block's sum. `warp_sums` holds BLOCK / 32 values; the caller syncs before reusing it.
template <int BLOCK>
__device__ __forceinline__ unsigned block_exclusive_scan(unsigned v, unsigned* warp_sums, unsigned& total) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned x = v;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const unsigned y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    unsigned w = lane < BLOCK / 32 ? warp_sums[lane] : 0u;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const unsigned y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    if (lane < BLOCK / 32) warp_sums[lane] = w;
  }
  __syncthreads();
  total = warp_sums[BLOCK / 32 - 1];
  return x - v + (warp > 0 ? warp_sums[warp - 1] : 0u);
}

}  // namespace sort
}  // namespace simtlab
