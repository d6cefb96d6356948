// Rung 2 - one read: the row is held in registers (groups of four, LDG.128 for
// fp32 and LDG.64 for bf16), a warp per row up to 1024 values and a block per
// row beyond, as in softmax rung 4. Each thread computes the exact mean and
// sum of squared deviations of its own values (two passes over registers,
// free), and threads merge their (count, mean, M2) triples with Chan's
// parallel form of Welford's update - one shuffle reduction of three values
// instead of rung 1's two reductions and three reads, and as stable. With
// EARLY, weight and bias load before the reduction so their latency overlaps
// it. The output is written from the same registers: 1 read + 1 write.
#include "simtlab_io.cuh"

struct Moments {
  float n, mean, m2;
};

// Chan et al.: merge two partial (count, mean, M2); an empty side changes nothing. The counts
// are small exact integers, so the fast division (MUFU.RCP and a multiply, within 2 ulp) is
// enough: an IEEE division here costs a slow-path check per merge, and ten merges per row is
// what bounds short rows.
__device__ __forceinline__ Moments merge(Moments a, Moments b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean, fb = __fdividef(b.n, n);
  return {n, fmaf(d, fb, a.mean), a.m2 + b.m2 + d * d * a.n * fb};
}

// Butterfly over the warp; both partners merge (lower lane, upper lane) in that order, so every
// lane ends with bit-identical moments and the row is normalised with one mean and one rstd.
__device__ __forceinline__ Moments warp_merge(Moments m) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Moments o = {__shfl_xor_sync(0xffffffffu, m.n, offset), __shfl_xor_sync(0xffffffffu, m.mean, offset),
                       __shfl_xor_sync(0xffffffffu, m.m2, offset)};
    m = (lane & offset) ? merge(o, m) : merge(m, o);
  }
  return m;
}

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int EARLY, bool VEC>
__global__ void __launch_bounds__(BLOCK)
layernorm_welford(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
                  const typename simtlab::Io<DT>::T* __restrict__ b, typename simtlab::Io<DT>::T* __restrict__ y,
                  int rows, int cols, float eps) {
  using Io = simtlab::Io<DT>;
  const simtlab::RowShare<BLOCK, WARP_ROWS> share;
  __shared__ Moments warp_moments[32];
  const int tid = threadIdx.x, lane = tid % 32, row = share.row;
  if (share.idle(rows)) return;
  const typename Io::T* xr = x + (size_t)row * cols;
  // The row (and, EARLY, weight and bias) stay in their storage format: bf16 takes half the
  // registers of fp32, so more rows fit on an SM and more bytes are in flight.
  typename Io::Raw4 v[VPT];
  float sum = 0.0f, n = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    if (VEC) {
      v[j] = c < cols ? Io::load4_raw(xr + c) : Io::pack4(0.0f, 0.0f, 0.0f, 0.0f);
    } else {
      v[j] = Io::pack4(c + 0 < cols ? Io::load(xr + c + 0) : 0.0f, c + 1 < cols ? Io::load(xr + c + 1) : 0.0f,
                       c + 2 < cols ? Io::load(xr + c + 2) : 0.0f, c + 3 < cols ? Io::load(xr + c + 3) : 0.0f);
    }
    const float4 f = Io::unpack4(v[j]);
    sum += (f.x + f.y) + (f.z + f.w);  // padding is 0: adds nothing
    n += (float)max(0, min(4, cols - c));
  }
  Moments m = {n, n > 0.0f ? __fdividef(sum, n) : 0.0f, 0.0f};
  // EARLY: weight and bias issued now, so their latency hides behind the reduction, for 2 Raw4
  // per group more registers (at VPT 8 a 1024-thread block has only 64 per thread: they load after).
  typename Io::Raw4 g[EARLY ? VPT : 1], h[EARLY ? VPT : 1];
  if constexpr (EARLY && VEC) {
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = share.col(j);
      if (c < cols) g[j] = Io::load4_raw(w + c), h[j] = Io::load4_raw(b + c);
    }
  }
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    const float4 f = Io::unpack4(v[j]);
    const float dx = f.x - m.mean, dy = f.y - m.mean, dz = f.z - m.mean, dw = f.w - m.mean;
    m.m2 += (c + 0 < cols ? dx * dx : 0.0f) + (c + 1 < cols ? dy * dy : 0.0f) + (c + 2 < cols ? dz * dz : 0.0f) +
            (c + 3 < cols ? dw * dw : 0.0f);
  }
  m = warp_merge(m);
  if constexpr (!WARP_ROWS && BLOCK > 32) {
    if (lane == 0) warp_moments[tid / 32] = m;
    __syncthreads();
    m = lane < BLOCK / 32 ? warp_moments[lane] : Moments{0.0f, 0.0f, 0.0f};
    m = warp_merge(m);
  }
  const float mean = m.mean, rstd = rsqrtf(m.m2 / cols + eps);
  typename Io::T* yr = y + (size_t)row * cols;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    const float4 f = Io::unpack4(v[j]);
    if (VEC) {
      if (c < cols) {
        const float4 gj = Io::unpack4(EARLY ? g[EARLY ? j : 0] : Io::load4_raw(w + c));
        const float4 hj = Io::unpack4(EARLY ? h[EARLY ? j : 0] : Io::load4_raw(b + c));
        Io::store4(yr + c, make_float4(fmaf((f.x - mean) * rstd, gj.x, hj.x), fmaf((f.y - mean) * rstd, gj.y, hj.y),
                                       fmaf((f.z - mean) * rstd, gj.z, hj.z), fmaf((f.w - mean) * rstd, gj.w, hj.w)));
      }
    } else {
      const float o[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c + e < cols) Io::store(yr + c + e, fmaf((o[e] - mean) * rstd, Io::load(w + c + e), Io::load(b + c + e)));
    }
  }
}
