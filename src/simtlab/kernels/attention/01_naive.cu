// Rung 1 - naive: three launches, as the formula reads. Phase 0 writes every score S = scale Q K^T
// (fp32, bh x sq x sk: the matrix the later rungs never store) through 16x16 shared tiles; phase 1
// turns each row into probabilities in place (max, sum of exponentials, divide; the row's
// log-sum-exp to LSE); phase 2 multiplies P by V the same way. S is written once and read three
// times: 16 sq sk bytes a head beside the 8 (sq + sk) d of Q, K, V and O - what fusion saves.
#include "simtlab_attention.cuh"
#include "simtlab_reduce.cuh"

template <int DT>
__global__ void __launch_bounds__(256)
attention_naive(const typename simtlab::Io<DT>::T* __restrict__ q, const typename simtlab::Io<DT>::T* __restrict__ k,
                const typename simtlab::Io<DT>::T* __restrict__ v, typename simtlab::Io<DT>::T* __restrict__ o,
                float* __restrict__ s, float* __restrict__ lse, int sq, int sk, int d, float scale, int causal,
                int phase) {
  using Io = simtlab::Io<DT>;
  __shared__ float a[16][17], b[16][17];
  __shared__ float warp_vals[8];
  const long long h = blockIdx.z;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  if (phase == 1) {  // a block a row: probabilities in place
    const int i = blockIdx.x;
    float* row = s + (h * sq + i) * (long long)sk;
    float m = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < sk; j += 256) m = fmaxf(m, row[j]);
    m = simtlab::block_allreduce<256, 1>(m, warp_vals);
    const float shift = m == -__int_as_float(0x7f800000) ? 0.0f : m;  // (a row with no visible key: zeros)
    float l = 0.0f;
    for (int j = threadIdx.x; j < sk; j += 256) l += __expf(row[j] - shift);
    l = simtlab::block_allreduce<256, 0>(l, warp_vals);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int j = threadIdx.x; j < sk; j += 256) row[j] = __expf(row[j] - shift) * inv;
    if (threadIdx.x == 0) lse[h * sq + i] = l > 0.0f ? shift + __logf(l) : -__int_as_float(0x7f800000);
    return;
  }
  const int i = blockIdx.y * 16 + ty;
  if (phase == 0) {  // S[i][j] = scale <q_i, k_j>, -inf where j is not visible from i
    const int j = blockIdx.x * 16 + tx;
    const int jl = blockIdx.x * 16 + ty;  // (the key row this thread loads)
    float acc = 0.0f;
    for (int c0 = 0; c0 < d; c0 += 16) {
      a[ty][tx] = i < sq && c0 + tx < d ? Io::load(q + (h * sq + i) * d + c0 + tx) : 0.0f;
      b[ty][tx] = jl < sk && c0 + tx < d ? Io::load(k + (h * sk + jl) * d + c0 + tx) : 0.0f;
      __syncthreads();
#pragma unroll
      for (int c = 0; c < 16; ++c) acc += a[ty][c] * b[tx][c];
      __syncthreads();
    }
    if (i < sq && j < sk)
      s[(h * sq + i) * (long long)sk + j] =
          simtlab::attention::visible(i, j, sk, causal) ? acc * scale : -__int_as_float(0x7f800000);
    return;
  }
  // phase 2: O[i][c] = sum_j P[i][j] V[j][c]
  const int c = blockIdx.x * 16 + tx;
  float acc = 0.0f;
  for (int j0 = 0; j0 < sk; j0 += 16) {
    a[ty][tx] = i < sq && j0 + tx < sk ? s[(h * sq + i) * (long long)sk + j0 + tx] : 0.0f;
    const int jv = j0 + ty;
    b[ty][tx] = jv < sk && c < d ? Io::load(v + (h * sk + jv) * d + c) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < 16; ++t) acc += a[ty][t] * b[t][tx];
    __syncthreads();
  }
  if (i < sq && c < d) Io::store(o + (h * sq + i) * d + c, acc);
}
