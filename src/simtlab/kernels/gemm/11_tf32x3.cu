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

// A (rows x cols, row-major, leading dimension lda) -> big and small (rows x ld, ld a multiple of
// 4), zero past cols. A thread takes 4-wide groups (one 16-byte load, two 16-byte stores where A's
// rows allow it) walking rows x ld/4 with a grid-wide stride, UNROLL groups loaded before any is
// split so that many loads are in flight; the row and column step without a division a group.
constexpr int SPLIT_UNROLL = 4;

extern "C" __global__ void __launch_bounds__(256) gemm_split_tf32(const float* __restrict__ A, int rows, int cols,
                                                                  int lda, int ld, float* __restrict__ big,
                                                                  float* __restrict__ small) {
  const int q = ld / 4;
  const long long n = (long long)rows * q, stride = (long long)gridDim.x * blockDim.x;
  const bool vec = lda % 4 == 0 && ((size_t)A & 15) == 0;  // (the whole call: a uniform branch)
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int r = (int)(first / q), g = (int)(first % q);
  const int step_r = (int)(stride / q), step_g = (int)(stride % q);
  for (long long i = first; i < n; i += SPLIT_UNROLL * stride) {
    float4 v[SPLIT_UNROLL];
    int rr[SPLIT_UNROLL], gg[SPLIT_UNROLL];
#pragma unroll
    for (int u = 0; u < SPLIT_UNROLL; ++u) {
      rr[u] = r, gg[u] = g;
      const int k = 4 * g;
      const float* a = A + (size_t)r * lda + k;
      v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i + u * stride < n) {
        if (vec && k + 3 < cols) {
          v[u] = *reinterpret_cast<const float4*>(a);
        } else {
          if (k < cols) v[u].x = a[0];
          if (k + 1 < cols) v[u].y = a[1];
          if (k + 2 < cols) v[u].z = a[2];
          if (k + 3 < cols) v[u].w = a[3];
        }
      }
      r += step_r, g += step_g;
      if (g >= q) g -= q, ++r;
    }
#pragma unroll
    for (int u = 0; u < SPLIT_UNROLL; ++u) {
      if (i + u * stride >= n) break;
      float4 hi, lo;
      split_tf32(v[u].x, hi.x, lo.x), split_tf32(v[u].y, hi.y, lo.y);
      split_tf32(v[u].z, hi.z, lo.z), split_tf32(v[u].w, hi.w, lo.w);
      const size_t at = (size_t)rr[u] * ld + 4 * gg[u];
      *reinterpret_cast<float4*>(big + at) = hi;
      *reinterpret_cast<float4*>(small + at) = lo;
    }
  }
}

// B (K x N, row-major, leading dimension ldb) -> B^T's big and small parts (N x ld, K contiguous,
// ld a multiple of 4), zero past K: 64x64 tiles through shared memory (one padding column). Each
// thread loads four 16-byte pieces of B's rows (all in flight at once) and stores four 16-byte
// pieces of each part's rows, so reads and writes move whole lines with a quarter of the
// instructions of one float a thread.
extern "C" __global__ void __launch_bounds__(256) gemm_split_tf32_transposed(const float* __restrict__ B, int K, int N,
                                                                             int ldb, int ld, float* __restrict__ big,
                                                                             float* __restrict__ small) {
  constexpr int T = 64;
  __shared__ float tile[T][T + 1];
  const int k0 = blockIdx.y * T, n0 = blockIdx.x * T, g = threadIdx.x % 16, row = threadIdx.x / 16;
  const bool vec = ldb % 4 == 0 && ((size_t)B & 15) == 0;
  float4 v[4];
#pragma unroll
  for (int p = 0; p < 4; ++p) {  // rows row, row + 16, ... of the tile; columns 4g..4g+3
    const int k = k0 + row + 16 * p, n = n0 + 4 * g;
    const float* b = B + (size_t)k * ldb + n;
    v[p] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k < K) {
      if (vec && n + 3 < N) {
        v[p] = *reinterpret_cast<const float4*>(b);
      } else {
        if (n < N) v[p].x = b[0];
        if (n + 1 < N) v[p].y = b[1];
        if (n + 2 < N) v[p].z = b[2];
        if (n + 3 < N) v[p].w = b[3];
      }
    }
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    float* t = &tile[row + 16 * p][4 * g];
    t[0] = v[p].x, t[1] = v[p].y, t[2] = v[p].z, t[3] = v[p].w;
  }
  __syncthreads();
#pragma unroll
  for (int p = 0; p < 4; ++p) {  // B^T rows n0 + row + 16p, k values 4g..4g+3 of the tile
    const int nl = row + 16 * p, n = n0 + nl, k = k0 + 4 * g;
    if (n < N && k < ld) {
      float4 hi, lo;
      split_tf32(tile[4 * g][nl], hi.x, lo.x), split_tf32(tile[4 * g + 1][nl], hi.y, lo.y);
      split_tf32(tile[4 * g + 2][nl], hi.z, lo.z), split_tf32(tile[4 * g + 3][nl], hi.w, lo.w);
      *reinterpret_cast<float4*>(big + (size_t)n * ld + k) = hi;
      *reinterpret_cast<float4*>(small + (size_t)n * ld + k) = lo;
    }
  }
}
