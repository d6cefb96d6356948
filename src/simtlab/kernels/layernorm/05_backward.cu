// Rung 5 - the backward of LayerNorm (RMS 0) and RMSNorm (RMS 1); what changed from rung 3: the
// forward's register row now carries x and dy.
// With g = dy w and xhat the normalised row, dx = rstd (g - mean(g) - xhat mean(g xhat)) (RMSNorm:
// no mean(g)) - two more row reductions after the statistics, which are recomputed from x (no
// saved mean or rstd to read). dw = sum over rows of dy xhat, db = sum of dy: column sums. Rows in
// registers (VPT > 0): a persistent grid keeps each thread on the same columns for every row, its
// share of the column sums in registers, one partial row a block. Rows too long for that (VPT 0):
// a row's statistics in one read (phase 2), then blocks of columns walk the rows (dx; the column
// sums in registers). A last launch (phase 1) adds the partial rows.
// What it should buy: one read of x and dy and one write of dx (long rows: two reads).
#include "simtlab_io.cuh"
#include "simtlab_norms.cuh"
#include "simtlab_reduce.cuh"

// A group's share of the row's first statistic: its sum of squares (RMSNorm) or its sum (LayerNorm);
// the zeros loaded past the row's end add nothing.
template <int RMS>
__device__ __forceinline__ float first_sum(float4 v) {
  return RMS ? (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w) : (v.x + v.y) + (v.z + v.w);
}

// A group's squared deviations from `mean` added to `ss` one by one, of the columns inside the row
// (past its end there are none).
__device__ __forceinline__ void add_squared_deviations(float& ss, float4 v, float mean, int c, int cols) {
  const float d[4] = {v.x - mean, v.y - mean, v.z - mean, v.w - mean};
#pragma unroll
  for (int e = 0; e < 4; ++e) ss += c + e < cols ? d[e] * d[e] : 0.0f;
}

// A group of four columns' shares of dw and db handed to `put(column, dw part, db part)`, those
// inside the row.
template <typename Put>
__device__ __forceinline__ void share(int c, int cols, float4 a, float4 b, Put put) {
  const float as[4] = {a.x, a.y, a.z, a.w}, bs[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int e = 0; e < 4; ++e)
    if (c + e < cols) put(c + e, as[e], bs[e]);
}

// Phase 0, rows in registers: dx, and a partial row of the column sums a block.
template <int DT, int BLOCK, int VPT, int WARP_ROWS, int RMS, bool VEC>
__device__ __forceinline__ void rows_backward(const typename simtlab::Io<DT>::T* __restrict__ x,
                                              const typename simtlab::Io<DT>::T* __restrict__ w,
                                              const typename simtlab::Io<DT>::T* __restrict__ dy,
                                              typename simtlab::Io<DT>::T* __restrict__ dx, float* __restrict__ partial_w,
                                              float* __restrict__ partial_b, int rows, int cols, float eps) {
  static_assert(VPT > 0, "rows in registers");
  using Io = simtlab::Io<DT>;
  constexpr int LANES = WARP_ROWS ? 32 : BLOCK, SLOTS = WARP_ROWS ? BLOCK / 32 : 1, GROUPS = VPT;
  const int tid = threadIdx.x, me = WARP_ROWS ? tid % 32 : tid, slot = WARP_ROWS ? tid / 32 : 0;
  __shared__ float warp_vals[32];
  // a warp a row: the block's warps add their column sums here before the block writes its row
  __shared__ float block_w[WARP_ROWS ? 32 * 4 * GROUPS : 1], block_b[WARP_ROWS && !RMS ? 32 * 4 * GROUPS : 1];
  auto allsum = [&](float s) {
    return WARP_ROWS ? simtlab::warp_allreduce<0>(s) : simtlab::block_allreduce<BLOCK, 0>(s, warp_vals);
  };
  auto col = [me](int j) { return (me + LANES * j) * 4; };
  const float inv_cols = 1.0f / cols;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float* pw_row = partial_w + (size_t)blockIdx.x * cols;
  float* pb_row = RMS ? nullptr : partial_b + (size_t)blockIdx.x * cols;
  float4 pw[GROUPS], pb[RMS ? 1 : GROUPS];  // this thread's share of the column sums
#pragma unroll
  for (int j = 0; j < GROUPS; ++j) {
    pw[j] = zero;
    if constexpr (!RMS) pb[j] = zero;
  }
  for (int row = blockIdx.x * SLOTS + slot; row < rows; row += gridDim.x * SLOTS) {
    const typename Io::T* xr = x + (size_t)row * cols;
    const typename Io::T* gr = dy + (size_t)row * cols;
    typename Io::T* dr = dx + (size_t)row * cols;
    float mean = 0.0f, rstd, mg, mgx;
    {  // the row's x and dy in registers: read once
      float4 v[VPT], g[VPT];
      float s1 = 0.0f;
#pragma unroll
      for (int j = 0; j < VPT; ++j) {  // (zeros past the row's end)
        v[j] = simtlab::load_group<DT, VEC>(xr, col(j), cols, 0.0f);
        g[j] = simtlab::load_group<DT, VEC>(gr, col(j), cols, 0.0f);
        s1 += first_sum<RMS>(v[j]);
      }
      s1 = allsum(s1);
      if constexpr (RMS) {
        rstd = rsqrtf(s1 * inv_cols + eps);
      } else {
        mean = s1 * inv_cols;
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < VPT; ++j) add_squared_deviations(ss, v[j], mean, col(j), cols);
        rstd = rsqrtf(allsum(ss) * inv_cols + eps);
      }
      float sg = 0.0f, sgx = 0.0f;  // sums of g = dy w and of g xhat
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int c = col(j);
        const float4 wj = simtlab::load_group<DT, VEC>(w, c, cols, 0.0f);  // (L1: the same columns each row)
        const float4 xh = c < cols ? make_float4((v[j].x - mean) * rstd, (v[j].y - mean) * rstd,
                                                 (v[j].z - mean) * rstd, (v[j].w - mean) * rstd) : zero;
        const float4 gw = make_float4(g[j].x * wj.x, g[j].y * wj.y, g[j].z * wj.z, g[j].w * wj.w);
        sg += (gw.x + gw.y) + (gw.z + gw.w);  // (past the end dy is 0, and so is xhat in a whole group;
        sgx += (gw.x * xh.x + gw.y * xh.y) + (gw.z * xh.z + gw.w * xh.w);  //  in a partial one dy is 0)
        pw[j] = make_float4(pw[j].x + g[j].x * xh.x, pw[j].y + g[j].y * xh.y, pw[j].z + g[j].z * xh.z,
                            pw[j].w + g[j].w * xh.w);
        if constexpr (!RMS) pb[j] = make_float4(pb[j].x + g[j].x, pb[j].y + g[j].y, pb[j].z + g[j].z, pb[j].w + g[j].w);
        v[j] = xh, g[j] = gw;
      }
      mg = RMS ? 0.0f : allsum(sg) * inv_cols;
      mgx = allsum(sgx) * inv_cols;
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int c = col(j);
        const float4 o = make_float4(rstd * (g[j].x - mg - v[j].x * mgx), rstd * (g[j].y - mg - v[j].y * mgx),
                                     rstd * (g[j].z - mg - v[j].z * mgx), rstd * (g[j].w - mg - v[j].w * mgx));
        simtlab::store_group<DT, VEC>(dr, c, cols, o);
      }
    }
  }
  if constexpr (WARP_ROWS) {  // the block's warps add their shares in turn (a fixed order: the same
#pragma unroll 1                 // sums every run); a warp's columns are all of the row's
    for (int turn = 0; turn < SLOTS; ++turn) {
      if (slot == turn) {
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const int c = col(j);
          share(c, cols, pw[j], pb[RMS ? 0 : j], [&](int i, float a, float b) {
            block_w[i] = (turn ? block_w[i] : 0.0f) + a;
            if constexpr (!RMS) block_b[i] = (turn ? block_b[i] : 0.0f) + b;
          });
        }
      }
      __syncthreads();
    }
    for (int c = tid; c < cols; c += BLOCK) {
      pw_row[c] = block_w[c];
      if constexpr (!RMS) pb_row[c] = block_b[c];
    }
  } else {
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = col(j);
      share(c, cols, pw[j], pb[RMS ? 0 : j], [&](int i, float a, float b) {
        pw_row[i] = a;
        if constexpr (!RMS) pb_row[i] = b;
      });
    }
  }
}

// Phase 2, rows too long for registers: each row's statistics from one read of x and dy, a block a
// row, stats[row] = (mean, rstd, mean(g), mean(g xhat)). LayerNorm's sums are taken about a shift,
// the mean of the row's first BLOCK x 4 values: sum(d^2) / n - mean(d)^2 then cancels only as far as
// the row's mean lies from that estimate (a small fraction of a standard deviation), and
// sum(g (x - mean)) = sum(g d) - mean(d) sum(g).
template <int DT, int BLOCK, int RMS, bool VEC>
__device__ __forceinline__ void row_statistics(const typename simtlab::Io<DT>::T* __restrict__ x,
                                               const typename simtlab::Io<DT>::T* __restrict__ w,
                                               const typename simtlab::Io<DT>::T* __restrict__ dy,
                                               float4* __restrict__ stats, int rows, int cols, float eps) {
  __shared__ float warp_vals[32];
  const int tid = threadIdx.x;
  const float inv_cols = 1.0f / cols;
  auto allsum = [&](float s) { return simtlab::block_allreduce<BLOCK, 0>(s, warp_vals); };
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const typename simtlab::Io<DT>::T* xr = x + (size_t)row * cols;
    const typename simtlab::Io<DT>::T* gr = dy + (size_t)row * cols;
    float shift = 0.0f;
    if constexpr (!RMS) {  // (zeros past the row's end add nothing)
      const float4 v = simtlab::load_group<DT, VEC>(xr, tid * 4, cols, 0.0f);
      shift = allsum((v.x + v.y) + (v.z + v.w)) / (float)min(cols, BLOCK * 4);
    }
    float sd = 0.0f, sdd = 0.0f, sg = 0.0f, sgd = 0.0f;  // sums of d = x - shift, d^2, g = dy w, g d
#pragma unroll 2
    for (int c = tid * 4; c < cols; c += BLOCK * 4) {
      const float4 v = simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f), g = simtlab::load_group<DT, VEC>(gr, c, cols, 0.0f);
      const float4 wj = simtlab::load_group<DT, VEC>(w, c, cols, 0.0f);
      const float xs[4] = {v.x, v.y, v.z, v.w}, gw[4] = {g.x * wj.x, g.y * wj.y, g.z * wj.z, g.w * wj.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float d = c + e < cols ? xs[e] - shift : 0.0f;
        sd += d, sdd += d * d, sg += gw[e], sgd += gw[e] * d;  // (past the end: dy 0)
      }
    }
    sdd = allsum(sdd), sgd = allsum(sgd);
    float mean = 0.0f, mg = 0.0f, var = sdd * inv_cols;
    if constexpr (!RMS) {
      const float md = allsum(sd) * inv_cols;
      sg = allsum(sg);
      mean = shift + md, mg = sg * inv_cols;
      var = fmaxf(var - md * md, 0.0f);
      sgd -= md * sg;
    }
    const float rstd = rsqrtf(var + eps);
    if (tid == 0) stats[row] = make_float4(mean, rstd, mg, rstd * sgd * inv_cols);
  }
}

// Phase 0, rows too long for registers: a block's threads own four columns each (a grid of column
// blocks x `gridDim.y` row slices) and walk their slice's rows: dx from the row's statistics, and
// the columns' shares of dw and db in registers, written as the slice's partial row at the end.
template <int DT, int BLOCK, int RMS, bool VEC>
__device__ __forceinline__ void column_walk(const typename simtlab::Io<DT>::T* __restrict__ x,
                                            const typename simtlab::Io<DT>::T* __restrict__ w,
                                            const typename simtlab::Io<DT>::T* __restrict__ dy,
                                            typename simtlab::Io<DT>::T* __restrict__ dx,
                                            const float4* __restrict__ stats, float* __restrict__ partial_w,
                                            float* __restrict__ partial_b, int rows, int cols) {
  const int c = (blockIdx.x * BLOCK + threadIdx.x) * 4;
  if (c >= cols) return;
  const float4 wj = simtlab::load_group<DT, VEC>(w, c, cols, 0.0f);
  float4 pw = make_float4(0.0f, 0.0f, 0.0f, 0.0f), pb = pw;
#pragma unroll 4
  for (int row = blockIdx.y; row < rows; row += gridDim.y) {
    const float4 st = __ldg(stats + row);  // (mean, rstd, mean(g), mean(g xhat))
    const size_t at = (size_t)row * cols;
    const float4 v = simtlab::load_group<DT, VEC>(x + at, c, cols, 0.0f);
    const float4 g = simtlab::load_group<DT, VEC>(dy + at, c, cols, 0.0f);
    const float4 xh = make_float4((v.x - st.x) * st.y, (v.y - st.x) * st.y, (v.z - st.x) * st.y, (v.w - st.x) * st.y);
    const float4 o = make_float4(st.y * (g.x * wj.x - st.z - xh.x * st.w), st.y * (g.y * wj.y - st.z - xh.y * st.w),
                                 st.y * (g.z * wj.z - st.z - xh.z * st.w), st.y * (g.w * wj.w - st.z - xh.w * st.w));
    simtlab::store_group<DT, VEC>(dx + at, c, cols, o);
    pw = make_float4(pw.x + g.x * xh.x, pw.y + g.y * xh.y, pw.z + g.z * xh.z, pw.w + g.w * xh.w);
    if constexpr (!RMS) pb = make_float4(pb.x + g.x, pb.y + g.y, pb.z + g.z, pb.w + g.w);
  }
  float* pw_row = partial_w + (size_t)blockIdx.y * cols;
  float* pb_row = RMS ? nullptr : partial_b + (size_t)blockIdx.y * cols;
  share(c, cols, pw, pb, [&](int i, float a, float b) {
    pw_row[i] = a;
    if constexpr (!RMS) pb_row[i] = b;
  });
}

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int RMS, bool VEC>
__global__ void __launch_bounds__(BLOCK, VPT > 0 ? 1 : 2)  // (rows in registers: without the 1, ptxas held blocks
                                                             // to half the registers and spilled; streamed: two
                                                             // blocks an SM, 1024 threads for the loads in flight)
layernorm_backward(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
                   const typename simtlab::Io<DT>::T* __restrict__ dy, typename simtlab::Io<DT>::T* __restrict__ dx,
                   float* __restrict__ partial_w, float* __restrict__ partial_b, float4* __restrict__ stats, int rows,
                   int cols, float eps, int parts, typename simtlab::Io<DT>::T* __restrict__ dw,
                   typename simtlab::Io<DT>::T* __restrict__ db, int phase) {
  if (phase == 1) {
    simtlab::column_sums<DT, BLOCK, RMS>(partial_w, partial_b, parts, cols, dw, db);
    return;
  }
  if constexpr (VPT > 0)
    rows_backward<DT, BLOCK, VPT, WARP_ROWS, RMS, VEC>(x, w, dy, dx, partial_w, partial_b, rows, cols, eps);
  else if (phase == 2)
    row_statistics<DT, BLOCK, RMS, VEC>(x, w, dy, stats, rows, cols, eps);
  else
    column_walk<DT, BLOCK, RMS, VEC>(x, w, dy, dx, stats, partial_w, partial_b, rows, cols);
}
