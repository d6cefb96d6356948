// Rung 3 - persistent rows: each block (or warp, for rows up to 1024) walks many
// rows with a grid stride, so what is the same for every row is loaded once:
// weight and bias go to registers before the first row and stay there (rung 2
// reloaded them for every row - a third of its load instructions; WB=0 keeps
// that for rows too long to spare the registers). Loads are
// 16-byte chunks for both types (CHUNK = 8 bf16 values, LDG.128, where rung 2
// moved bf16 in 8-byte groups), so a bf16 row takes half the load instructions
// too. The grid is about one wave of resident blocks; the block reduction's
// shared slots alternate between rows so one barrier per row suffices.
// Same statistics as rung 2: per-thread exact moments merged by Chan/Welford.
#include "simtlab_io.cuh"

struct Moments {
  float n, mean, m2;
};

__device__ __forceinline__ Moments merge(Moments a, Moments b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean, fb = __fdividef(b.n, n);
  return {n, fmaf(d, fb, a.mean), a.m2 + b.m2 + d * d * a.n * fb};
}

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

// CHUNK consecutive values as CHUNK/4 groups of four in storage format. FAST (VEC and rows made
// of whole chunks, so every row start stays aligned and a chunk is either all in or all out): one
// 16-byte load (8 bf16 values: LDG.128) or a group of four; VEC alone (aligned rows of a multiple
// of four): groups of four; otherwise element loads. Zeros outside.
template <int DT, int CHUNK, bool FAST, bool VEC>
__device__ __forceinline__ void load_chunk(const typename simtlab::Io<DT>::T* p, int c, int cols,
                                           typename simtlab::Io<DT>::Raw4 (&out)[CHUNK / 4]) {
  using Io = simtlab::Io<DT>;
  if constexpr (FAST) {
    if constexpr (CHUNK == 8) {  // (bf16 only)
      const uint4 q = c < cols ? __ldg(reinterpret_cast<const uint4*>(p + c)) : make_uint4(0, 0, 0, 0);
      out[0] = make_uint2(q.x, q.y);
      out[1] = make_uint2(q.z, q.w);
    } else {
      out[0] = c < cols ? Io::load4_raw(p + c) : Io::pack4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  } else if constexpr (VEC) {  // 8 bf16 values a chunk, rows of a multiple of 4: 8-byte groups
#pragma unroll
    for (int k = 0; k < CHUNK / 4; ++k)
      out[k] = c + 4 * k < cols ? Io::load4_raw(p + c + 4 * k) : Io::pack4(0.0f, 0.0f, 0.0f, 0.0f);
  } else {
#pragma unroll
    for (int k = 0; k < CHUNK / 4; ++k) {
      const int e = c + 4 * k;
      out[k] = Io::pack4(e + 0 < cols ? Io::load(p + e + 0) : 0.0f, e + 1 < cols ? Io::load(p + e + 1) : 0.0f,
                         e + 2 < cols ? Io::load(p + e + 2) : 0.0f, e + 3 < cols ? Io::load(p + e + 3) : 0.0f);
    }
  }
}

// Hide a value from loop-invariant code motion: without it the compiler unpacks the bf16 weight
// and bias once, before the row loop, and keeps twice the registers live for every row.
__device__ __forceinline__ uint2 opaque(uint2 r) {
  asm volatile("" : "+r"(r.x), "+r"(r.y));
  return r;
}
__device__ __forceinline__ float4 opaque(float4 r) { return r; }  // fp32: nothing to unpack

// The rows one block (or warp) walks, for one load shape: FAST (whole 16-byte chunks) or not.
// (A device function rather than a generic lambda: NVRTC 13.0 rejects the lambda.)
template <int DT, int BLOCK, int VPT, int WARP_ROWS, int CHUNK, int WB, bool VEC, bool FAST>
__device__ __forceinline__ void persistent_rows(const typename simtlab::Io<DT>::T* __restrict__ x,
                                                const typename simtlab::Io<DT>::T* __restrict__ w,
                                                const typename simtlab::Io<DT>::T* __restrict__ b,
                                                typename simtlab::Io<DT>::T* __restrict__ y, int rows, int cols,
                                                float eps, Moments (&warp_moments)[2][32]) {
  using Io = simtlab::Io<DT>;
  constexpr int G = CHUNK / 4;                    // groups of four per chunk
  constexpr int LANES = WARP_ROWS ? 32 : BLOCK;  // threads sharing one row
  const int tid = threadIdx.x, lane = tid % 32;
  const int me = WARP_ROWS ? lane : tid;
  const int first = WARP_ROWS ? blockIdx.x * (BLOCK / 32) + tid / 32 : blockIdx.x;
  const int stride = WARP_ROWS ? gridDim.x * (BLOCK / 32) : gridDim.x;
  typename Io::Raw4 g[WB ? VPT : 1][G], h[WB ? VPT : 1][G];  // this thread's weight and bias (WB)
  if constexpr (WB) {
#pragma unroll
    for (int j = 0; j < VPT; ++j) {  // once, for every row this thread will see
      const int c = (me + LANES * j) * CHUNK;
      load_chunk<DT, CHUNK, FAST, VEC>(w, c, cols, g[j]);
      load_chunk<DT, CHUNK, FAST, VEC>(b, c, cols, h[j]);
    }
  }

  float n = 0.0f;  // how many of the row's values this thread holds: the same for every row
#pragma unroll
  for (int j = 0; j < VPT; ++j) n += (float)max(0, min(CHUNK, cols - (me + LANES * j) * CHUNK));

  int parity = 0;
  for (int row = first; row < rows; row += stride, parity ^= 1) {
    const typename Io::T* xr = x + (size_t)row * cols;
    typename Io::Raw4 v[VPT][G];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = (me + LANES * j) * CHUNK;
      load_chunk<DT, CHUNK, FAST, VEC>(xr, c, cols, v[j]);
    }
#pragma unroll
    for (int j = 0; j < VPT; ++j)
#pragma unroll
      for (int k = 0; k < G; ++k) {
        const float4 f = Io::unpack4(v[j][k]);
        sum += (f.x + f.y) + (f.z + f.w);  // padding is 0: adds nothing
      }
    Moments m = {n, n > 0.0f ? __fdividef(sum, n) : 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < VPT; ++j)
#pragma unroll
      for (int k = 0; k < G; ++k) {
        const int c = (me + LANES * j) * CHUNK + 4 * k;
        const float4 f = Io::unpack4(v[j][k]);
        const float dx = f.x - m.mean, dy = f.y - m.mean, dz = f.z - m.mean, dw = f.w - m.mean;
        m.m2 += (c + 0 < cols ? dx * dx : 0.0f) + (c + 1 < cols ? dy * dy : 0.0f) + (c + 2 < cols ? dz * dz : 0.0f) +
                (c + 3 < cols ? dw * dw : 0.0f);
      }
    m = warp_merge(m);
    if constexpr (!WARP_ROWS && BLOCK > 32) {
      // slots alternate by row: a warp writing row i+1's slot cannot disturb a slower warp still
      // reading row i's, and row i+2 reuses a slot only after everyone passed row i+1's barrier
      if (lane == 0) warp_moments[parity][tid / 32] = m;
      __syncthreads();
      m = lane < BLOCK / 32 ? warp_moments[parity][lane] : Moments{0.0f, 0.0f, 0.0f};
      m = warp_merge(m);
    }
    const float mean = m.mean, rstd = rsqrtf(m.m2 / cols + eps);
    typename Io::T* yr = y + (size_t)row * cols;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c0 = (me + LANES * j) * CHUNK;
      typename Io::Raw4 gr[G], hr[G];
      if constexpr (WB) {
#pragma unroll
        for (int k = 0; k < G; ++k) gr[k] = opaque(g[j][k]), hr[k] = opaque(h[j][k]);
      } else {  // long rows: no registers to spare, re-read at use (L1/L2 hits)
        load_chunk<DT, CHUNK, FAST, VEC>(w, c0, cols, gr);
        load_chunk<DT, CHUNK, FAST, VEC>(b, c0, cols, hr);
      }
      float4 o[G];
#pragma unroll
      for (int k = 0; k < G; ++k) {
        const float4 f = Io::unpack4(v[j][k]), gj = Io::unpack4(gr[k]), hj = Io::unpack4(hr[k]);
        o[k] = make_float4(fmaf((f.x - mean) * rstd, gj.x, hj.x), fmaf((f.y - mean) * rstd, gj.y, hj.y),
                           fmaf((f.z - mean) * rstd, gj.z, hj.z), fmaf((f.w - mean) * rstd, gj.w, hj.w));
      }
      if constexpr (FAST) {
        if (c0 < cols) {
          if constexpr (CHUNK == 8) {  // one STG.128 for 8 bf16 values
            const uint2 lo = Io::pack4(o[0].x, o[0].y, o[0].z, o[0].w), hi = Io::pack4(o[1].x, o[1].y, o[1].z, o[1].w);
            *reinterpret_cast<uint4*>(yr + c0) = make_uint4(lo.x, lo.y, hi.x, hi.y);
          } else {
            Io::store4(yr + c0, o[0]);
          }
        }
      } else if constexpr (VEC) {
#pragma unroll
        for (int k = 0; k < G; ++k)
          if (c0 + 4 * k < cols) Io::store4(yr + c0 + 4 * k, o[k]);
      } else {
#pragma unroll
        for (int k = 0; k < G; ++k) {
          const int c = c0 + 4 * k;
          if (c + 0 < cols) Io::store(yr + c + 0, o[k].x);
          if (c + 1 < cols) Io::store(yr + c + 1, o[k].y);
          if (c + 2 < cols) Io::store(yr + c + 2, o[k].z);
          if (c + 3 < cols) Io::store(yr + c + 3, o[k].w);
        }
      }
    }
  }
}

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int CHUNK, int WB, bool VEC>
// (the minimum of 2 blocks for small blocks changes nothing at these register counts, but without it
// ptxas spills 8 bytes on sm_80's scalar path)
__global__ void __launch_bounds__(BLOCK, BLOCK <= 256 ? 2 : 1)
layernorm_persistent(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
                     const typename simtlab::Io<DT>::T* __restrict__ b, typename simtlab::Io<DT>::T* __restrict__ y,
                     int rows, int cols, float eps) {
  static_assert(CHUNK == 4 || (CHUNK == 8 && DT == 1), "16-byte chunks: 4 fp32 or 8 bf16 values");
  __shared__ Moments warp_moments[2][32];
  // one code path per load shape, chosen once (uniform): whole chunks, or element loads
  if (VEC && cols % CHUNK == 0)
    persistent_rows<DT, BLOCK, VPT, WARP_ROWS, CHUNK, WB, VEC, true>(x, w, b, y, rows, cols, eps, warp_moments);
  else
    persistent_rows<DT, BLOCK, VPT, WARP_ROWS, CHUNK, WB, VEC, false>(x, w, b, y, rows, cols, eps, warp_moments);
}
