// Rung 5 - the backward of LayerNorm (RMS 0) and RMSNorm (RMS 1); what changed from rung 3: the
// forward's register row now carries x and dy.
// With g = dy w and xhat the normalised row, dx = rstd (g - mean(g) - xhat mean(g xhat)) (RMSNorm:
// no mean(g)) - two more row reductions after the statistics, which are recomputed from x (no
// saved mean or rstd to read). dw = sum over rows of dy xhat, db = sum of dy: column sums. A
// persistent grid keeps each thread on the same columns for every row it visits, so its share of
// the column sums stays in registers (VPT > 0; rows streamed through L2, VPT 0: in its own partial
// row) and each block writes one partial row at the end; a second launch (phase 1) adds those rows.
// What it should buy: one read of x and dy and one write of dx, the copy's rate for those bytes.
#include "simtlab_io.cuh"
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

// Phase 0: dx, and a partial row of the column sums a block.
template <int DT, int BLOCK, int VPT, int WARP_ROWS, int RMS, bool VEC>
__device__ __forceinline__ void rows_backward(const typename simtlab::Io<DT>::T* __restrict__ x,
                                              const typename simtlab::Io<DT>::T* __restrict__ w,
                                              const typename simtlab::Io<DT>::T* __restrict__ dy,
                                              typename simtlab::Io<DT>::T* __restrict__ dx, float* __restrict__ partial_w,
                                              float* __restrict__ partial_b, int rows, int cols, float eps) {
  static_assert(VPT > 0 || !WARP_ROWS, "streamed rows (VPT 0) take a block each");
  using Io = simtlab::Io<DT>;
  constexpr int LANES = WARP_ROWS ? 32 : BLOCK, SLOTS = WARP_ROWS ? BLOCK / 32 : 1, GROUPS = VPT > 0 ? VPT : 1;
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
  float4 pw[GROUPS], pb[RMS ? 1 : GROUPS];  // this thread's share of the column sums (VPT > 0)
#pragma unroll
  for (int j = 0; j < GROUPS; ++j) {
    pw[j] = zero;
    if constexpr (!RMS) pb[j] = zero;
  }
  bool first = true;  // (streamed: the block's partial row is written, then added to)
  for (int row = blockIdx.x * SLOTS + slot; row < rows; row += gridDim.x * SLOTS, first = false) {
    const typename Io::T* xr = x + (size_t)row * cols;
    const typename Io::T* gr = dy + (size_t)row * cols;
    typename Io::T* dr = dx + (size_t)row * cols;
    float mean = 0.0f, rstd, mg, mgx;
    if constexpr (VPT > 0) {  // the row's x and dy in registers: read once
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
    } else {  // rows too long for registers: streamed, later passes served by L2
      float s1 = 0.0f;
      for (int c = tid * 4; c < cols; c += BLOCK * 4) {
        s1 += first_sum<RMS>(simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f));
      }
      s1 = allsum(s1);
      if constexpr (RMS) {
        rstd = rsqrtf(s1 * inv_cols + eps);
      } else {
        mean = s1 * inv_cols;
        float ss = 0.0f;
        for (int c = tid * 4; c < cols; c += BLOCK * 4)
          add_squared_deviations(ss, simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f), mean, c, cols);
        rstd = rsqrtf(allsum(ss) * inv_cols + eps);
      }
      float sg = 0.0f, sgx = 0.0f;
      for (int c = tid * 4; c < cols; c += BLOCK * 4) {
        const float4 v = simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f), g = simtlab::load_group<DT, VEC>(gr, c, cols, 0.0f);
        const float4 wj = simtlab::load_group<DT, VEC>(w, c, cols, 0.0f);
        const float gw[4] = {g.x * wj.x, g.y * wj.y, g.z * wj.z, g.w * wj.w};
        const float xs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) sg += gw[e], sgx += gw[e] * (xs[e] - mean) * rstd;  // (past the end: dy 0)
      }
      mg = RMS ? 0.0f : allsum(sg) * inv_cols;
      mgx = allsum(sgx) * inv_cols;
      for (int c = tid * 4; c < cols; c += BLOCK * 4) {
        const float4 v = simtlab::load_group<DT, VEC>(xr, c, cols, 0.0f), g = simtlab::load_group<DT, VEC>(gr, c, cols, 0.0f);
        const float4 wj = simtlab::load_group<DT, VEC>(w, c, cols, 0.0f);
        const float xs[4] = {v.x, v.y, v.z, v.w}, gs[4] = {g.x, g.y, g.z, g.w}, ws[4] = {wj.x, wj.y, wj.z, wj.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (c + e >= cols) break;
          const float xh = (xs[e] - mean) * rstd;
          Io::store(dr + c + e, rstd * (gs[e] * ws[e] - mg - xh * mgx));
          pw_row[c + e] = (first ? 0.0f : pw_row[c + e]) + gs[e] * xh;
          if constexpr (!RMS) pb_row[c + e] = (first ? 0.0f : pb_row[c + e]) + gs[e];
        }
      }
    }
  }
  if constexpr (VPT > 0) {
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
  } else if (first) {  // a block that had no row: its partial row is zeros
    for (int c = tid; c < cols; c += BLOCK) {
      pw_row[c] = 0.0f;
      if constexpr (!RMS) pb_row[c] = 0.0f;
    }
  }
}

// Phase 1: dw (and db) = the column sums of phase 0's `parts` partial rows, in the weight's type:
// a block takes 32 columns, its BLOCK / 32 warps strided slices of the partial rows, the slices
// then added in shared memory in a fixed order (the same sums every run).
template <int DT, int BLOCK, int RMS>
__device__ __forceinline__ void column_sums(const float* __restrict__ partial_w, const float* __restrict__ partial_b,
                                            int parts, int cols, typename simtlab::Io<DT>::T* __restrict__ dw,
                                            typename simtlab::Io<DT>::T* __restrict__ db) {
  using Io = simtlab::Io<DT>;
  constexpr int SLICES = BLOCK / 32;
  __shared__ float sw[SLICES][33], sb[RMS ? 1 : SLICES][33];
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32, c = blockIdx.x * 32 + lane;
  float a = 0.0f, b = 0.0f;
  if (c < cols)
    for (int p = slice; p < parts; p += SLICES) {
      a += partial_w[(size_t)p * cols + c];
      if constexpr (!RMS) b += partial_b[(size_t)p * cols + c];
    }
  sw[slice][lane] = a;
  if constexpr (!RMS) sb[slice][lane] = b;
  __syncthreads();
  if (slice == 0 && c < cols) {
    float tw = 0.0f, tb = 0.0f;
#pragma unroll
    for (int s = 0; s < SLICES; ++s) {
      tw += sw[s][lane];
      if constexpr (!RMS) tb += sb[s][lane];
    }
    Io::store(dw + c, tw);
    if constexpr (!RMS) Io::store(db + c, tb);
  }
}

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int RMS, bool VEC>
__global__ void __launch_bounds__(BLOCK, 1)  // (without the 1, ptxas held blocks to half the registers and spilled)
layernorm_backward(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
                   const typename simtlab::Io<DT>::T* __restrict__ dy, typename simtlab::Io<DT>::T* __restrict__ dx,
                   float* __restrict__ partial_w, float* __restrict__ partial_b, int rows, int cols, float eps, int parts,
                   typename simtlab::Io<DT>::T* __restrict__ dw, typename simtlab::Io<DT>::T* __restrict__ db,
                   int phase) {
  if (phase == 0)
    rows_backward<DT, BLOCK, VPT, WARP_ROWS, RMS, VEC>(x, w, dy, dx, partial_w, partial_b, rows, cols, eps);
  else
    column_sums<DT, BLOCK, RMS>(partial_w, partial_b, parts, cols, dw, db);
}
