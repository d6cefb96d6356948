// Rung 3 - weight and bias once per block: a block (or, for rows up to 1024, each
// warp of it) normalises ROWS rows one after another, and the weight and bias
// vectors are staged in shared memory once for all of them. Rung 2 read them
// from global memory for every row: two more 8-byte loads per 8-byte load of
// x in bf16, all through L1 and L2. Everything else is rung 2 - the row in
// registers in its storage format, moments merged by Chan/Welford - so the
// registers per thread and the blocks per SM stay where they were.
// Needs 2 * cols elements of shared memory (dynamic); longer rows (WSMEM=0) read
// weight and bias from global memory as rung 2 does - a long row amortises them.
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

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int ROWS, int WSMEM, bool VEC>
__global__ void __launch_bounds__(BLOCK)
layernorm_smem_weights(const typename simtlab::Io<DT>::T* __restrict__ x,
                       const typename simtlab::Io<DT>::T* __restrict__ w,
                       const typename simtlab::Io<DT>::T* __restrict__ b, typename simtlab::Io<DT>::T* __restrict__ y,
                       int rows, int cols, float eps) {
  using Io = simtlab::Io<DT>;
  using T = typename Io::T;
  constexpr int LANES = WARP_ROWS ? 32 : BLOCK;  // threads sharing one row
  constexpr int GROUPS = WARP_ROWS ? BLOCK / 32 : 1;  // rows in flight per block
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ws = reinterpret_cast<T*>(smem_raw);  // weight, then bias
  T* bs = ws + ((cols + 7) & ~7);          // (16-byte aligned)
  __shared__ Moments warp_moments[2][32];
  const int tid = threadIdx.x, lane = tid % 32;
  const int me = WARP_ROWS ? lane : tid;
  if constexpr (WSMEM) {  // once per block
    for (int c = tid; c < cols; c += BLOCK) ws[c] = w[c], bs[c] = b[c];
    __syncthreads();
  }
  const T* wp = WSMEM ? ws : w;  // (WSMEM=0, rows too long to stage: rung 2's global reads)
  const T* bp = WSMEM ? bs : b;

  const int base = blockIdx.x * GROUPS * ROWS + (WARP_ROWS ? tid / 32 : 0);
  for (int i = 0; i < ROWS; ++i) {
    const int row = base + i * GROUPS;  // warps of a block take neighbouring rows
    if (row >= rows) break;  // uniform: per warp (WARP_ROWS), else per block
    const T* xr = x + (size_t)row * cols;
    typename Io::Raw4 v[VPT];
    float sum = 0.0f, n = 0.0f;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = (me + LANES * j) * 4;
      if (VEC) {
        v[j] = c < cols ? Io::load4_raw(xr + c) : Io::pack4(0.0f, 0.0f, 0.0f, 0.0f);
      } else {
        v[j] = Io::pack4(c + 0 < cols ? Io::load(xr + c + 0) : 0.0f, c + 1 < cols ? Io::load(xr + c + 1) : 0.0f,
                         c + 2 < cols ? Io::load(xr + c + 2) : 0.0f, c + 3 < cols ? Io::load(xr + c + 3) : 0.0f);
      }
      const float4 f = Io::unpack4(v[j]);
      sum += (f.x + f.y) + (f.z + f.w);
      n += (float)max(0, min(4, cols - c));
    }
    Moments m = {n, n > 0.0f ? __fdividef(sum, n) : 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = (me + LANES * j) * 4;
      const float4 f = Io::unpack4(v[j]);
      const float dx = f.x - m.mean, dy = f.y - m.mean, dz = f.z - m.mean, dw = f.w - m.mean;
      m.m2 += (c + 0 < cols ? dx * dx : 0.0f) + (c + 1 < cols ? dy * dy : 0.0f) + (c + 2 < cols ? dz * dz : 0.0f) +
              (c + 3 < cols ? dw * dw : 0.0f);
    }
    m = warp_merge(m);
    if constexpr (!WARP_ROWS && BLOCK > 32) {  // slots alternate by row: one barrier per row
      if (lane == 0) warp_moments[i & 1][tid / 32] = m;
      __syncthreads();
      m = lane < BLOCK / 32 ? warp_moments[i & 1][lane] : Moments{0.0f, 0.0f, 0.0f};
      m = warp_merge(m);
    }
    const float mean = m.mean, rstd = rsqrtf(m.m2 / cols + eps);
    T* yr = y + (size_t)row * cols;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int c = (me + LANES * j) * 4;
      const float4 f = Io::unpack4(v[j]);
      if (VEC) {
        if (c < cols) {  // weight and bias from shared memory (LDS.64 for bf16, LDS.128 for fp32)
          const float4 gj = Io::unpack4(WSMEM ? *reinterpret_cast<const typename Io::Raw4*>(wp + c) : Io::load4_raw(wp + c));
          const float4 hj = Io::unpack4(WSMEM ? *reinterpret_cast<const typename Io::Raw4*>(bp + c) : Io::load4_raw(bp + c));
          Io::store4(yr + c, make_float4(fmaf((f.x - mean) * rstd, gj.x, hj.x), fmaf((f.y - mean) * rstd, gj.y, hj.y),
                                         fmaf((f.z - mean) * rstd, gj.z, hj.z), fmaf((f.w - mean) * rstd, gj.w, hj.w)));
        }
      } else {
        const float o[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (c + e < cols)
            Io::store(yr + c + e, fmaf((o[e] - mean) * rstd, WSMEM ? to_float(wp[c + e]) : Io::load(wp + c + e),
                                       WSMEM ? to_float(bp[c + e]) : Io::load(bp + c + e)));
      }
    }
  }
}
