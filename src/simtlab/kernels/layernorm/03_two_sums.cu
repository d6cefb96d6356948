// Rung 3 - two plain sums instead of one Chan merge. Nsight Compute on rung 2
// at 32768x4096 bf16: 86% of issue slots busy and DRAM at 57% - the kernel is
// bound by instructions, not bytes (~40 per element). A thread holds only
// 16-32 values of a 4096-long row, and rung 2 spends more on merging
// (count, mean, M2) triples - three shuffles, a division and a branch per
// step, two levels - than on the values themselves. The row is in registers
// anyway, so the exact two-pass method costs no extra memory traffic here:
// sum -> mean (one-value all-reduce), then the squared deviations from that
// mean -> variance (a second one), as stable as Welford with a few
// instructions per step. Each value is unpacked once (bf16 -> fp32 kept in
// registers) and replaced by its deviation in the second pass, then scaled
// (a multiply and one FFMA with w, b). Groups of four past the row's end are
// skipped whole. EARLY loads weight and bias before the reductions, as in
// rung 2 (their latency then hides behind the reductions, for registers).
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int EARLY, bool VEC>
__global__ void __launch_bounds__(BLOCK)
layernorm_two_sums(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
                   const typename simtlab::Io<DT>::T* __restrict__ b, typename simtlab::Io<DT>::T* __restrict__ y,
                   int rows, int cols, float eps) {
  using Io = simtlab::Io<DT>;
  const simtlab::RowShare<BLOCK, WARP_ROWS> share;
  __shared__ float warp_vals[32];
  const int row = share.row;
  if (share.idle(rows)) return;
  const typename Io::T* xr = x + (size_t)row * cols;
  float4 v[VPT];  // the row's values, fp32; zeros past its end
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    v[j] = simtlab::load_group<DT, VEC>(xr, share.col(j), cols, 0.0f);
    sum += (v[j].x + v[j].y) + (v[j].z + v[j].w);
  }
  float4 g[EARLY ? VPT : 1], h[EARLY ? VPT : 1];
  if constexpr (EARLY && VEC) {
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = share.col(j);
      if (c < cols) g[j] = Io::load4(w + c), h[j] = Io::load4(b + c);
    }
  }
  sum = WARP_ROWS ? simtlab::warp_allreduce<0>(sum) : simtlab::block_allreduce<BLOCK, 0>(sum, warp_vals);
  const float mean = sum / cols;
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    if (c >= cols) continue;  // a whole group past the end (VPT is rounded up)
    const float dx = v[j].x - mean, dy = v[j].y - mean, dz = v[j].z - mean, dw = v[j].w - mean;
    v[j] = make_float4(dx, dy, dz, dw);  // the output needs the deviations, not the values
    if (VEC || c + 3 < cols) {
      ss += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    } else {  // the last, partial group of an unaligned row
      ss += dx * dx + (c + 1 < cols ? dy * dy : 0.0f) + (c + 2 < cols ? dz * dz : 0.0f);
    }
  }
  ss = WARP_ROWS ? simtlab::warp_allreduce<0>(ss) : simtlab::block_allreduce<BLOCK, 0>(ss, warp_vals);
  const float rstd = rsqrtf(ss / cols + eps);
  typename Io::T* yr = y + (size_t)row * cols;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    if (VEC) {
      if (c < cols) {
        const float4 gj = EARLY ? g[EARLY ? j : 0] : Io::load4(w + c), hj = EARLY ? h[EARLY ? j : 0] : Io::load4(b + c);
        Io::store4(yr + c, make_float4(fmaf(v[j].x * rstd, gj.x, hj.x), fmaf(v[j].y * rstd, gj.y, hj.y),
                                       fmaf(v[j].z * rstd, gj.z, hj.z), fmaf(v[j].w * rstd, gj.w, hj.w)));
      }
    } else {
      const float o[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c + e < cols) Io::store(yr + c + e, fmaf(o[e] * rstd, Io::load(w + c + e), Io::load(b + c + e)));
    }
  }
}
