// Rung 4 - RMSNorm, rung 3's register row with one reduction instead of two: y = x w /
// sqrt(mean(x^2) + eps), no mean subtracted and no bias (the norm LLMs use). One read of x and
// w, one write, one all-reduce a row; its rows in registers as rung 3's (VPT 0: rows longer
// than a block's registers hold are streamed twice, the second read mostly from L2).
// What it should buy: RMSNorm at the device copy's rate, where PyTorch composes it of
// several kernels unless compiled.
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int BLOCK, int VPT, int WARP_ROWS, bool VEC>
__global__ void __launch_bounds__(BLOCK, 1)  // (ptxas may otherwise hold a block to half the registers)
layernorm_rms(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
              typename simtlab::Io<DT>::T* __restrict__ y, int rows, int cols, float eps) {
  static_assert(VPT > 0 || !WARP_ROWS, "streamed rows (VPT 0) take a block each");
  using Io = simtlab::Io<DT>;
  const simtlab::RowShare<BLOCK, WARP_ROWS> share;
  __shared__ float warp_vals[32];
  const int row = share.row;
  if (share.idle(rows)) return;
  const typename Io::T* xr = x + (size_t)row * cols;
  typename Io::T* yr = y + (size_t)row * cols;
  if constexpr (VPT == 0) {  // streamed (a block a row)
    float ss = 0.0f;
    for (int c = threadIdx.x * 4; c < cols; c += BLOCK * 4) {
      const float4 v = simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f);
      ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
    }
    const float rstd = rsqrtf(simtlab::block_allreduce<BLOCK, 0>(ss, warp_vals) / cols + eps);
    for (int c = threadIdx.x * 4; c < cols; c += BLOCK * 4) {
      const float4 v = simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f), g = simtlab::load_group<DT, VEC>(w, c, cols, 0.0f);
      const float4 o = make_float4(v.x * rstd * g.x, v.y * rstd * g.y, v.z * rstd * g.z, v.w * rstd * g.w);
      if (VEC) {
        Io::store4(yr + c, o);
      } else {
        const float os[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (c + e < cols) Io::store(yr + c + e, os[e]);
      }
    }
    return;
  }
  constexpr int GROUPS = VPT > 0 ? VPT : 1;
  float4 v[GROUPS];  // zeros past the row's end: they add nothing to the sum of squares
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    v[j] = simtlab::load_group<DT, VEC>(xr, share.col(j), cols, 0.0f);
    ss += (v[j].x * v[j].x + v[j].y * v[j].y) + (v[j].z * v[j].z + v[j].w * v[j].w);
  }
  ss = WARP_ROWS ? simtlab::warp_allreduce<0>(ss) : simtlab::block_allreduce<BLOCK, 0>(ss, warp_vals);
  const float rstd = rsqrtf(ss / cols + eps);
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    if (VEC) {
      if (c < cols) {
        const float4 g = Io::load4(w + c);
        Io::store4(yr + c, make_float4(v[j].x * rstd * g.x, v[j].y * rstd * g.y, v[j].z * rstd * g.z,
                                       v[j].w * rstd * g.w));
      }
    } else {
      const float o[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c + e < cols) Io::store(yr + c + e, o[e] * rstd * Io::load(w + c + e));
    }
  }
}
