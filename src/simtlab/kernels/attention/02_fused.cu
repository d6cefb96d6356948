// Rung 2 - fused: what changed from rung 1: one launch and no score matrix. A block takes 16
// query rows (4 warps, 4 rows a warp) and walks the keys 32 at a time through shared memory
// (fp32, K rows padded by one float: lane j reading key j's column c hits bank (j + c) % 32); lane
// j scores key j against the warp's rows, the rows' running max and sum are updated online (the
// accumulator rescaled by exp(m_old - m_new)), then each lane adds the 32 keys' values into its
// D/32 output columns. S never leaves the SM: HBM traffic is Q, K, V, O - K and V once per 16 rows.
#include "simtlab_attention.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int D>
__global__ void __launch_bounds__(128)
attention_fused(const typename simtlab::Io<DT>::T* __restrict__ q, const typename simtlab::Io<DT>::T* __restrict__ k,
                const typename simtlab::Io<DT>::T* __restrict__ v, typename simtlab::Io<DT>::T* __restrict__ o,
                float* __restrict__ lse, int sq, int sk, float scale, int causal) {
  using Io = simtlab::Io<DT>;
  constexpr int ROWS = 4, COLS = D / 32, BQ = 4 * ROWS;
  static_assert(D % 32 == 0 && D <= 128, "head dims of 32 to 128, whole warps of columns");
  __shared__ float qs[BQ][D];
  __shared__ float ks[32][D + 1];
  __shared__ float vs[32][D];
  const long long h = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int q0 = blockIdx.x * BQ;
  for (int e = threadIdx.x; e < BQ * D; e += 128) {
    const int r = e / D, c = e % D;
    qs[r][c] = q0 + r < sq ? Io::load(q + (h * sq + q0 + r) * D + c) * scale : 0.0f;
  }
  float m[ROWS], l[ROWS], acc[ROWS][COLS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    m[r] = -__int_as_float(0x7f800000), l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < COLS; ++c) acc[r][c] = 0.0f;
  }
  const int last_row = min(q0 + BQ, sq) - 1;
  const int keys = causal ? min(sk, last_row + 1) : sk;  // (keys past the block's last row are hidden from all)
  for (int j0 = 0; j0 < keys; j0 += 32) {
    __syncthreads();  // (the last tile's readers are done; the first time, qs is written)
    for (int e = threadIdx.x; e < 32 * D; e += 128) {
      const int j = e / D, c = e % D;
      const bool in = j0 + j < sk;
      ks[j][c] = in ? Io::load(k + (h * sk + j0 + j) * D + c) : 0.0f;
      vs[j][c] = in ? Io::load(v + (h * sk + j0 + j) * D + c) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int i = q0 + warp * ROWS + r;
      float score = 0.0f;
#pragma unroll 8
      for (int c = 0; c < D; ++c) score += qs[warp * ROWS + r][c] * ks[lane][c];
      if (!simtlab::attention::visible(i, j0 + lane, sk, causal)) score = -__int_as_float(0x7f800000);
      float shift;
      const float factor = simtlab::attention::rescale(m[r], simtlab::warp_allreduce<1>(score), shift);
      const float p = score == -__int_as_float(0x7f800000) ? 0.0f : __expf(score - shift);
      l[r] = l[r] * factor + simtlab::warp_allreduce<0>(p);
#pragma unroll
      for (int c = 0; c < COLS; ++c) acc[r][c] *= factor;
#pragma unroll 4
      for (int j = 0; j < 32; ++j) {
        const float pj = __shfl_sync(~0u, p, j);
#pragma unroll
        for (int c = 0; c < COLS; ++c) acc[r][c] += pj * vs[j][lane + 32 * c];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int i = q0 + warp * ROWS + r;
    if (i >= sq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int c = 0; c < COLS; ++c) Io::store(o + (h * sq + i) * D + lane + 32 * c, acc[r][c] * inv);
    if (lane == 0) lse[h * sq + i] = l[r] > 0.0f ? m[r] + __logf(l[r]) : -__int_as_float(0x7f800000);
  }
}
