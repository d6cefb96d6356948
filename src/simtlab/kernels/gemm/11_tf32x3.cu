// Rung 11 - fp32 on the tensor cores: 3xTF32 (sm_90a). What changed from rung 10:
//  * the CUDA cores are left for the tensor cores, which multiply TF32 (fp32 with 10 mantissa
//    bits); each operand x is split into big = tf32(x) and small = tf32(x - big), rounded to
//    nearest, and a*b = big*big + big*small + small*big: the dropped small*small lies ~2^-22
//    below the product, under fp32's own rounding (in a pre-pass: A's parts row-major, B's
//    transposed to K-major, as wgmma's tf32 form reads both);
//  * the main loop is the tensor-core ladder's rung 6 (gemm_tc_wgmma_cluster with SPLIT 1: TMA,
//    wgmma, clusters, warp specialisation; included below) walking K three times: the two small
//    products first, summed while the accumulators are small, then big times big; alpha, beta.
// What it should buy: fp32-accurate results at ~2x cuBLAS SGEMM, for 3x the tensor-core work and
// a pre-pass moving 12 bytes a fp32 input. Inf and NaN ride in the small part (big 0), so they
// reach C as SGEMM's would, except where both operands of one product are infinite (NaN).
#include "gemm_tc/06_wgmma_cluster.cu"

namespace {
// x -> (big, small), both exact TF32 values (low 13 bits zero): big rounded to nearest (ties away,
// as cvt.rna.tf32), truncated where rounding would overflow; small = x - big (exact) rounded again.
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
}  // namespace

// A (rows x cols, row-major, leading dimension lda) -> big and small (rows x ld), zero past cols.
extern "C" __global__ void gemm_split_tf32(const float* __restrict__ A, int rows, int cols, int lda, int ld,
                                           float* __restrict__ big, float* __restrict__ small) {
  const size_t n = (size_t)rows * ld;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const int r = (int)(i / ld), k = (int)(i % ld);
    float b = 0.0f, s = 0.0f;
    if (k < cols) split_tf32(A[(size_t)r * lda + k], b, s);
    big[i] = b, small[i] = s;
  }
}

// B (K x N, row-major, leading dimension ldb) -> B^T's big and small parts (N x ld, K contiguous),
// zero past K: 32x32 tiles through shared memory (one padding column: no bank conflicts), so both
// the reads of B's rows and the writes of B^T's rows are whole 128-byte lines.
extern "C" __global__ void __launch_bounds__(256) gemm_split_tf32_transposed(const float* __restrict__ B, int K, int N,
                                                                             int ldb, int ld, float* __restrict__ big,
                                                                             float* __restrict__ small) {
  __shared__ float tile[32][33];
  const int k0 = blockIdx.y * 32, n0 = blockIdx.x * 32, tx = threadIdx.x % 32, ty = threadIdx.x / 32;
#pragma unroll
  for (int i = ty; i < 32; i += 8) {
    const int k = k0 + i, n = n0 + tx;
    tile[i][tx] = k < K && n < N ? B[(size_t)k * ldb + n] : 0.0f;
  }
  __syncthreads();
#pragma unroll
  for (int i = ty; i < 32; i += 8) {
    const int n = n0 + i, k = k0 + tx;
    if (n < N && k < ld) {
      float b, s;
      split_tf32(tile[tx][i], b, s);
      big[(size_t)n * ld + k] = b, small[(size_t)n * ld + k] = s;
    }
  }
}
