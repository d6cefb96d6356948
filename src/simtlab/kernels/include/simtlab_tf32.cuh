// 3xTF32's split of an fp32 value into two TF32 parts (the fp32 ladder's rungs 11 and 12).
#pragma once

namespace simtlab {

// x -> (big, small), both exact TF32 values (low 13 bits zero): big rounded to nearest (ties away,
// as cvt.rna.tf32), truncated where rounding would overflow; small = x - big (exact) rounded again.
// Inf and NaN go whole into small (big 0), so they reach the sums as in SGEMM.
__device__ __forceinline__ void split_tf32(float x, float& big, float& small) {
  if (!isfinite(x)) {
    big = 0.0f, small = x;
    return;
  }
  auto rna = [](float v) {
    const unsigned u = __float_as_uint(v), r = (u + 0x1000u) & 0xffffe000u;
    return isinf(__uint_as_float(r)) ? __uint_as_float(u & 0xffffe000u) : __uint_as_float(r);
  };
  big = rna(x);
  small = rna(x - big);
}

// split_tf32 over a fragment's values, the parts as the bit patterns mma.sync takes.
template <int N>
__device__ __forceinline__ void split_tf32_bits(const float (&v)[N], unsigned (&big)[N], unsigned (&small)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    float hi, lo;
    split_tf32(v[e], hi, lo);
    big[e] = __float_as_uint(hi), small[e] = __float_as_uint(lo);
  }
}

}  // namespace simtlab
