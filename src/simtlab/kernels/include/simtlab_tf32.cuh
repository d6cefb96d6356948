// 3xTF32's split of an fp32 value into two TF32 parts (the fp32 ladder's rungs 11 and 12).
#pragma once

namespace simtlab {

// x -> (big, small), both exact TF32 values (low 13 bits zero): big rounded to nearest (ties away,
// as cvt.rna.tf32), truncated where rounding would overflow; small = x - big (exact) rounded again.
// Inf and NaN go whole into small (big 0), so they reach the sums as in SGEMM.
// (rounding without the overflow guard: for values under 2^127)
__device__ __forceinline__ float tf32_rna_plain(float v) {
  return __uint_as_float((__float_as_uint(v) + 0x1000u) & 0xffffe000u);
}
__device__ __forceinline__ float tf32_rna(float v) {
  const float r = tf32_rna_plain(v);
  return isinf(r) ? __uint_as_float(__float_as_uint(v) & 0xffffe000u) : r;
}
__device__ __forceinline__ void split_tf32(float x, float& big, float& small) {
  if (!isfinite(x)) {
    big = 0.0f, small = x;
    return;
  }
  big = tf32_rna(x);
  small = tf32_rna(x - big);
}
// split_tf32's parts one at a time (the same values): where only one is wanted, as each of
// rung 11's passes over K wants one of A's parts (AREG 1).
__device__ __forceinline__ float tf32_big(float x) { return isfinite(x) ? tf32_rna(x) : 0.0f; }
__device__ __forceinline__ float tf32_small(float x) { return isfinite(x) ? tf32_rna(x - tf32_rna(x)) : x; }

// AREG 1: within each 32-deep slice of K, the order in which B's parts are laid out, so that the
// k values a thread's wgmma fragments of A take are 8 consecutive floats of its rows: the part's
// position 8 s + q (wgmma k step s, fragment column q) holds B's row 8 (q % 4) + 2 s + q / 4.
__device__ __forceinline__ int slice_row_of(int position) {
  const int p = position & 31, s = p >> 3, q = p & 7;
  return (position & ~31) | ((q & 3) << 3) | (s << 1) | (q >> 2);
}
__device__ __forceinline__ int slice_position_of(int row) {
  const int p = row & 31;
  return (row & ~31) | (((p >> 1) & 3) << 3) | (p >> 3) | ((p & 1) << 2);
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

// Values this close to the smallest normal (2^-126) have small parts within 2^-14 of it, where
// TF32 keeps few bits or the tensor cores flush them. The 3xTF32 rungs note whether any input is
// below TINY (the flag cleared before the call); where one is, each row of A and column of B whose
// largest finite magnitude m is below TINY is scaled by 2^-e, e = ilogb(m) (exact), and the
// epilogue undoes it with ldexpf(sum, e_row + e_column).
constexpr float TINY = 0x1p-100f;

__device__ __forceinline__ bool is_tiny(float x) { return x != 0.0f && fabsf(x) < TINY; }

// (*flag |= bit when any lane of the warp saw a value `mine` says: one atomic a warp at most)
__device__ __forceinline__ void note_in_warp(bool mine, int* flag, int bit) {
  unsigned lt;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  const unsigned seen = __ballot_sync(__activemask(), mine);
  if (mine && (seen & lt) == 0) atomicOr(flag, bit);  // (the first lane that saw one)
}
// bit 1 of *flag: a tiny value
__device__ __forceinline__ void note_tiny(const float4& v, int* flag) {
  note_in_warp(is_tiny(v.x) || is_tiny(v.y) || is_tiny(v.z) || is_tiny(v.w), flag, 1);
}
// bit 2 (rung 11's AREG 1): a value the main loop's unguarded split cannot take - Inf, NaN, or a
// magnitude from 2^127, where rounding to TF32 could overflow (tf32_big and tf32_small guard them)
__device__ __forceinline__ bool is_special(float x) { return (__float_as_uint(x) & 0x7fffffffu) >= 0x7f000000u; }
__device__ __forceinline__ void note_special(const float4& v, int* flag) {
  note_in_warp(is_special(v.x) || is_special(v.y) || is_special(v.z) || is_special(v.w), flag, 2);
}
// split_tf32's small part of a value that is not special: rounding without the guards (its big
// part: tf32_rna_plain)
__device__ __forceinline__ float tf32_small_plain(float x) { return tf32_rna_plain(x - tf32_rna_plain(x)); }

__device__ __forceinline__ int scale_exponent(float m) { return m > 0.0f && m < TINY ? ilogbf(m) : 0; }

__device__ __forceinline__ float finite_abs(float x) { return isfinite(x) ? fabsf(x) : 0.0f; }

// The exponent of row a[0..K) (every thread of the block calls it; red: a word a warp).
__device__ __forceinline__ int row_exponent(const float* a, int K, float* red) {
  float m = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) m = fmaxf(m, finite_abs(a[k]));
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __syncthreads();  // (red reused by the next row)
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = 0.0f;
  for (int w = 0; w < (int)blockDim.x / 32; ++w) m = fmaxf(m, red[w]);
  return scale_exponent(m);
}

// The exponent of column n of B (K x N, leading dimension ldb) for a block of 256 threads over 32
// columns: lane = the column, warp = a k residue class; 0 past N.
__device__ __forceinline__ int column_exponent(const float* B, int K, int N, int ldb, int n, float (&col_max)[8][32]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float m = 0.0f;
  if (n < N)
    for (int k = warp; k < K; k += 8) m = fmaxf(m, finite_abs(B[(size_t)k * ldb + n]));
  __syncthreads();  // (col_max reused by the next strip)
  col_max[warp][lane] = m;
  __syncthreads();
  for (int w = 0; w < 8; ++w) m = fmaxf(m, col_max[w][lane]);
  return scale_exponent(m);
}

}  // namespace simtlab
