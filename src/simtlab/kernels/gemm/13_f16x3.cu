// Rung 13 - fp32 from three fp16 products, scaled (sm_90a). What changed from rung 11:
//  * the parts are fp16, not TF32: the same 11 significant bits, half the bytes, and the tensor
//    cores multiply fp16 at twice TF32's rate - three passes cost what 1.5 TF32 passes do;
//  * fp16 holds only 2^-24..65504, so a first pass finds each row of A's and column of B's largest
//    finite magnitude and the split scales the row (column) by a power of two that puts it just
//    under 2^15 - undone exactly in the epilogue, as rung 11 undoes its rescaling;
//  * the small part x - big is stored times 2^11, in fp16's normal range for every value within
//    2^27 of its row's largest (below, absolute error 2^-49 of that largest); the small passes'
//    sums come back down by 2^-11 as they are promoted out of the tensor cores;
//  * the main loop is rung 11's (gemm_tc_wgmma_cluster with SPLIT) over fp16 parts, B's transposed
//    to K-major (any N); windows cover rung 11's k (SPLIT 64-deep slices of big x big); no SK.
//  Should buy: rung 11's error at up to 1.5x its speed. Inf and NaN ride in the small part.
#include "gemm_tc/06_wgmma_cluster.cu"

#include <cuda_fp16.h>

// The exponent that scales a row (column) whose largest finite magnitude has bits `m` to just
// under 2^15 (0 for a row of zeros, Inf or NaN): x * 2^-e then keeps fp16's range.
__device__ __forceinline__ int f16x3_exponent(unsigned m) {
  return m == 0 ? 0 : ilogbf(__uint_as_float(m)) - 14;
}

// |x|'s bits where x is finite, else 0 (NaN and Inf do not set a scale)
__device__ __forceinline__ unsigned finite_bits(float x) {
  const unsigned u = __float_as_uint(x) & 0x7fffffffu;
  return u < 0x7f800000u ? u : 0u;
}

// x (already scaled) -> big = fp16(x) and small = fp16((x - big) * 2^11), rounded to nearest; Inf
// and NaN go whole into the small part (big 0) and so reach C as SGEMM's do.
__device__ __forceinline__ void split_f16(float x, __half& big, __half& small) {
  if (!(fabsf(x) <= 3.0e38f)) {
    big = __float2half_rn(0.0f), small = __float2half_rn(x);
    return;
  }
  big = __float2half_rn(x);
  small = __float2half_rn((x - __half2float(big)) * 2048.0f);
}

// Pass 1: blocks [0, a_blocks) a warp a row of A (its largest finite magnitude into amax[r]), the
// rest a 32-column strip of B over 256 rows of k (atomicMax into bmax[n], zeroed by the caller).
extern "C" __global__ void __launch_bounds__(256) gemm_f16x3_max(
    const float* __restrict__ A, int M, int K, int lda, const float* __restrict__ B, int N, int ldb,
    unsigned* __restrict__ amax, unsigned* __restrict__ bmax, int a_blocks, int strips) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if ((int)blockIdx.x < a_blocks) {
    for (int r = blockIdx.x * 8 + warp; r < M; r += a_blocks * 8) {
      const float* a = A + (size_t)r * lda;
      unsigned m = 0;
      for (int k = lane; k < K; k += 32) m = max(m, finite_bits(a[k]));
      m = __reduce_max_sync(0xffffffffu, m);
      if (lane == 0) amax[r] = m;
    }
    return;
  }
  __shared__ unsigned part[8][32];
  const int t = blockIdx.x - a_blocks, n = (t % strips) * 32 + lane, k0 = (t / strips) * 256;
  unsigned m = 0;
  if (n < N)
    for (int k = k0 + warp; k < min(K, k0 + 256); k += 8) m = max(m, finite_bits(B[(size_t)k * ldb + n]));
  part[warp][lane] = m;
  __syncthreads();
  if (warp == 0 && n < N) {
#pragma unroll
    for (int w = 1; w < 8; ++w) m = max(m, part[w][lane]);
    if (m) atomicMax(bmax + n, m);
  }
}

constexpr int F16X3_TILE = 64;

// Pass 2: blocks [0, a_blocks) A's rows in 4-wide groups (grid-stride), the rest one 64x64 tile of
// B each, transposed through shared memory into B^T's parts (N x ld, K contiguous); zeros past K.
// scale[0] = 1 (the epilogue undoes the exponents), scale[1 + r] and scale[1 + M + n] the exponents.
extern "C" __global__ void __launch_bounds__(256) gemm_f16x3_split(
    const float* __restrict__ A, int M, int K, int lda, const float* __restrict__ B, int N, int ldb, int ld,
    __half* __restrict__ a_big, __half* __restrict__ a_small, __half* __restrict__ b_big,
    __half* __restrict__ b_small, const unsigned* __restrict__ amax, const unsigned* __restrict__ bmax,
    int* __restrict__ scale, int a_blocks, int tiles_n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) scale[0] = 1;
  if ((int)blockIdx.x < a_blocks) {
    const int q = ld / 4;
    const long long n = (long long)M * q, stride = (long long)a_blocks * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
      const int r = (int)(i / q), g = (int)(i % q), e = f16x3_exponent(amax[r]);
      if (g == 0) scale[1 + r] = e;
      const float* a = A + (size_t)r * lda + 4 * g;
      __half hi[4], lo[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) split_f16(4 * g + j < K ? ldexpf(a[j], -e) : 0.0f, hi[j], lo[j]);
      const size_t at = (size_t)r * ld + 4 * g;
      *reinterpret_cast<uint2*>(a_big + at) = *reinterpret_cast<const uint2*>(hi);
      *reinterpret_cast<uint2*>(a_small + at) = *reinterpret_cast<const uint2*>(lo);
    }
    return;
  }
  __shared__ float tile[F16X3_TILE][F16X3_TILE + 1];
  const int t = blockIdx.x - a_blocks, k0 = (t / tiles_n) * F16X3_TILE, n0 = (t % tiles_n) * F16X3_TILE;
  const int g = threadIdx.x % 16, row = threadIdx.x / 16;
#pragma unroll
  for (int p = 0; p < 4; ++p) {  // rows row + 16p of the tile, columns 4g..4g+3 (zeros outside B)
    const int k = k0 + row + 16 * p;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int nn = n0 + 4 * g + j;
      tile[row + 16 * p][4 * g + j] = k < K && nn < N ? B[(size_t)k * ldb + nn] : 0.0f;
    }
  }
  __syncthreads();
#pragma unroll
  for (int p = 0; p < 4; ++p) {  // B^T row n0 + nl, k values 4g..4g+3 of the tile
    const int nl = row + 16 * p, nn = n0 + nl, k = k0 + 4 * g;
    if (nn < N && k < ld) {
      const int e = f16x3_exponent(bmax[nn]);
      if (k == 0) scale[1 + M + nn] = e;
      __half hi[4], lo[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) split_f16(ldexpf(tile[4 * g + j][nl], -e), hi[j], lo[j]);
      const size_t at = (size_t)nn * ld + k;
      *reinterpret_cast<uint2*>(b_big + at) = *reinterpret_cast<const uint2*>(hi);
      *reinterpret_cast<uint2*>(b_small + at) = *reinterpret_cast<const uint2*>(lo);
    }
  }
}
