// Rung 11 - fp32 on the tensor cores: 3xTF32 (sm_90a). What changed from rung 10:
//  * the tensor cores multiply TF32 (10 mantissa bits): each operand x is split into big = tf32(x)
//    and small = tf32(x - big), rounded to nearest, and a*b = big*big + big*small + small*big (the
//    dropped small*small lies ~2^-22 below the product). A pre-pass makes the parts: A's row-major,
//    B's transposed to K-major, as wgmma's tf32 form reads both, 12 bytes moved an input element;
//  * the main loop is the tensor-core ladder's rung 6 (gemm_tc_wgmma_cluster, included below,
//    with SPLIT) walking K three times, the small products first; alpha and beta in its epilogue;
//  * the tensor cores round each k-step into their accumulators with a bias: every SPLIT slices
//    the sums move into a second set of registers (rounded to nearest) and the tensor cores start
//    afresh - the error no longer grows with K; 128x128 tiles leave the registers for it.
// What it should buy: errors under SGEMM's at ~2x its speed. Inf and NaN ride in the small part
// (big 0) and reach C as in SGEMM, but an infinity times an infinity gives NaN. Values below
// ~2^-115 lose their small part (subnormal: the tensor cores flush it). docs/design/gemm.md.
#include "gemm_tc/06_wgmma_cluster.cu"
#include "simtlab_tf32.cuh"

using simtlab::split_tf32;

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
