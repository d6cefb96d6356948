// What the attention backward's rungs share: the statistics launch (D = rowsum(dO O), the LSE in
// log2 units padded to the walk's 64-row steps, dQ's fp32 sums zeroed) and the dQ launch (the sums
// scaled into the storage type) - extern "C" kernels every rung's module carries - and BWD_BQ.
#pragma once
#include "simtlab_attention.cuh"

namespace simtlab {
namespace attention {

constexpr int BWD_BQ = 64;  // query rows a step of the walk (the statistics' padding)

// Row i of head h (a warp a row): D = sum_c dO[i][c] O[i][c]; the LSE as log2 units, +inf past sq
// (and for a row that saw no key) so its probabilities are zero; dQ's fp32 sums zeroed.
template <int DT>
__device__ void bwd_prep_row(const void* o_, const void* dout_, const float* lse, float* stats, float* dqacc, int h,
                             int i, int sq, int sqp, int d, int lane) {
  using T = typename Io<DT>::T;
  const T* o = static_cast<const T*>(o_) + ((long long)h * sq + i) * d;
  const T* dout = static_cast<const T*>(dout_) + ((long long)h * sq + i) * d;
  float dsum = 0.0f;
  if (i < sq)
    for (int c = 2 * lane; c < d; c += 64)
      dsum += Io<DT>::load(o + c) * Io<DT>::load(dout + c) + Io<DT>::load(o + c + 1) * Io<DT>::load(dout + c + 1);
#pragma unroll
  for (int s = 16; s > 0; s /= 2) dsum += __shfl_xor_sync(~0u, dsum, s);
  if (lane == 0) {
    const float inf = __int_as_float(0x7f800000);
    const float l = i < sq ? lse[(long long)h * sq + i] : -inf;
    stats[(2LL * h) * sqp + i] = l == -inf ? inf : l * 1.4426950408889634f;
    stats[(2LL * h + 1) * sqp + i] = dsum;
  }
  float4* row = reinterpret_cast<float4*>(dqacc + ((long long)h * sqp + i) * d);
  for (int c = lane; c < d / 4; c += 32) row[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// dQ = scale * (the fp32 sums), in the storage type, rows below sq only.
template <int DT>
__device__ void bwd_dq_rows(const float* dqacc, void* dq_, int bh, int sq, int sqp, int d, float scale) {
  using T = typename Io<DT>::T;
  T* dq = static_cast<T*>(dq_);
  const long long quads = (long long)bh * sq * d / 4;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < quads; e += (long long)gridDim.x * blockDim.x) {
    const long long flat = 4 * e, row = flat / d, c = flat % d;
    const long long h = row / sq, i = row % sq;
    const float4 s = *reinterpret_cast<const float4*>(dqacc + (h * sqp + i) * d + c);
    uint2 out;
    out.x = pack2<DT>(s.x * scale, s.y * scale);
    out.y = pack2<DT>(s.z * scale, s.w * scale);
    *reinterpret_cast<uint2*>(dq + flat) = out;
  }
}

}  // namespace attention
}  // namespace simtlab

extern "C" __global__ void attention_bwd_prep(const void* o, const void* dout, const float* lse, float* stats,
                                              float* dqacc, int bh, int sq, int sqp, int d, int dt) {
  const int lane = threadIdx.x % 32;
  for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; r < (long long)bh * sqp;
       r += (long long)gridDim.x * blockDim.x / 32) {
    const int h = (int)(r / sqp), i = (int)(r % sqp);
    if (dt == 1)
      simtlab::attention::bwd_prep_row<1>(o, dout, lse, stats, dqacc, h, i, sq, sqp, d, lane);
    else
      simtlab::attention::bwd_prep_row<2>(o, dout, lse, stats, dqacc, h, i, sq, sqp, d, lane);
  }
}

extern "C" __global__ void attention_bwd_dq(const float* dqacc, void* dq, int bh, int sq, int sqp, int d, float scale,
                                            int dt) {
  if (dt == 1)
    simtlab::attention::bwd_dq_rows<1>(dqacc, dq, bh, sq, sqp, d, scale);
  else
    simtlab::attention::bwd_dq_rows<2>(dqacc, dq, bh, sq, sqp, d, scale);
}
