// Rung 7 - rows, and sums wider than their input: what changed from rung 6: the array is rows
// (torch.cumsum along the last dimension: one scan a row, any number of rows), and the sum has its
// own type (int32 in, int64 out, as torch promotes it). Where rows fill the GPU a block walks its
// row tile by tile, its carry in a register: one launch, read once, written once. Where few long
// rows cannot, three launches - each tile's total (PHASE 2), each row's totals scanned (1), each
// tile scanned from its carry (0): x read twice, no look-back state to clear or to outlive the call.
// Each warp's accesses are rung 6's (lane l: elements 4l..4l+3 of each 128-element group).
// IT / OT: input / sum type (0 float, 1 int32, 2 int64). VEC: x and out aligned, rows of 4k.
#include "simtlab_scan.cuh"

namespace simtlab {
namespace scan {

template <int K> struct Num { using T = float; };
template <> struct Num<1> { using T = int; };
template <> struct Num<2> { using T = long long; };

// Four consecutive elements of x + at (16-byte aligned where `vec`; past `len` from the row's start: zero).
template <typename In, typename Out>
__device__ __forceinline__ void load4(const In* __restrict__ x, long long at, long long end, bool vec, Out (&v)[4]) {
  if (vec && at + 3 < end) {
    In w[4];
    if constexpr (sizeof(In) == 4) {
      const int4 raw = __ldg(reinterpret_cast<const int4*>(x + at));
      memcpy(w, &raw, 16);
    } else {
      const longlong2 a = __ldg(reinterpret_cast<const longlong2*>(x + at));
      const longlong2 b = __ldg(reinterpret_cast<const longlong2*>(x + at) + 1);
      memcpy(w, &a, 16), memcpy(w + 2, &b, 16);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = Out(w[j]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = at + j < end ? Out(x[at + j]) : Out(0);
  }
}

template <typename Out>
__device__ __forceinline__ void store4(Out* out, long long at, long long end, bool vec, const Out (&v)[4]) {
  if (vec && at + 3 < end) {
    if constexpr (sizeof(Out) == 4) {
      int4 raw;
      memcpy(&raw, v, 16);
      *reinterpret_cast<int4*>(out + at) = raw;
    } else {
      longlong2 a, b;
      memcpy(&a, v, 16), memcpy(&b, v + 2, 16);
      reinterpret_cast<longlong2*>(out + at)[0] = a;
      reinterpret_cast<longlong2*>(out + at)[1] = b;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (at + j < end) out[at + j] = v[j];
  }
}

// Each warp's total in, after a barrier: what precedes this warp (plus `before`, the carry into the
// block's values), and into `total` the block's sum. Barriers first, so that warp_sums is free.
template <int BLOCK, typename T>
__device__ __forceinline__ T warps_before(T warp_total, T before, T& total, T* warp_sums, int lane, int warp,
                                          int writer) {
  __syncthreads();  // (the last round's readers of warp_sums are done)
  if (lane == writer) warp_sums[warp] = warp_total;
  __syncthreads();
  total = T(0);
#pragma unroll
  for (int w = 0; w < BLOCK / 32; ++w) {
    const T s = warp_sums[w];
    if (w < warp) before += s;
    total += s;
  }
  return before;
}

// One tile of a row scanned from `carry` (what precedes it in the row) into out; returns the
// tile's total to every thread. `start`: the tile's first element; `end`: the row's end.
template <int BLOCK, int ITEMS, typename In, typename Out>
__device__ __forceinline__ Out scan_tile(const In* __restrict__ x, Out* out, long long start, long long end,
                                         bool vec, Out carry, Out* warp_sums, int lane, int warp) {
  constexpr int GROUPS = ITEMS / 4;
  const long long first = start + (long long)warp * 32 * ITEMS;
  Out v[GROUPS][4];
  Out off[GROUPS];
  Out run = Out(0);
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) load4(x, first + 128 * g + 4 * lane, end, vec, v[g]);
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    v[g][1] += v[g][0], v[g][2] += v[g][1], v[g][3] += v[g][2];
    const Out inc = warp_inclusive_scan(v[g][3], lane);
    Out excl = __shfl_up_sync(~0u, inc, 1);
    if (lane == 0) excl = Out(0);
    off[g] = run + excl;
    run += __shfl_sync(~0u, inc, 31);
  }
  Out total;
  const Out before = warps_before<BLOCK>(run, carry, total, warp_sums, lane, warp, 0);
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const Out add = before + off[g];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[g][j] += add;
    store4(out, first + 128 * g + 4 * lane, end, vec, v[g]);
  }
  return total;
}

}  // namespace scan
}  // namespace simtlab

enum : int { ROWS_SCAN = 0, ROWS_TOTALS = 1, ROWS_REDUCE = 2, ROWS_WHOLE = 3 };

// Rows of `cols`, each cut into `per_row` chunks of `chunk` elements (a multiple of the tile; the
// last shorter). ROWS_WHOLE: chunk = cols, a block a row (grid-stride). ROWS_REDUCE / ROWS_SCAN: a
// block a chunk (blockIdx.x = row * per_row + chunk), tile after tile; ROWS_TOTALS: a block a row
// of the chunks' totals.
template <int IT, int OT, int BLOCK, int ITEMS, bool VEC>
__global__ void __launch_bounds__(BLOCK)
scan_rows(const typename simtlab::scan::Num<IT>::T* __restrict__ x, typename simtlab::scan::Num<OT>::T* out,
          typename simtlab::scan::Num<OT>::T* totals, long long rows, long long cols, long long chunk, int per_row,
          int phase) {
  using namespace simtlab::scan;
  using Out = typename Num<OT>::T;
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024 && ITEMS % 4 == 0, "whole warps; 16-byte groups a lane");
  constexpr int TILE = BLOCK * ITEMS;
  __shared__ Out warp_sums[BLOCK / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (phase == ROWS_TOTALS) {  // each row's chunk totals, exclusive-scanned in place
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
      Out* t = totals + r * per_row;
      Out carry = Out(0);
      for (int base = 0; base < per_row; base += BLOCK) {
        const int i = base + threadIdx.x;
        const Out value = i < per_row ? t[i] : Out(0);
        const Out inc = warp_inclusive_scan(value, lane);
        Out total;
        const Out before = warps_before<BLOCK>(inc, carry, total, warp_sums, lane, warp, 31);
        if (i < per_row) t[i] = before + inc - value;
        carry += total;
      }
    }
    return;
  }
  const bool whole = phase == ROWS_WHOLE;
  const long long count = whole ? rows : rows * per_row;
  for (long long s = blockIdx.x; s < count; s += gridDim.x) {
    const long long r = whole ? s : s / per_row, k = whole ? 0 : s % per_row;
    const long long start = r * cols + k * chunk, stop = min(start + chunk, (r + 1) * cols);
    if (phase == ROWS_REDUCE) {
      constexpr int GROUPS = ITEMS / 4;
      Out sum = Out(0);
      for (long long at = start; at < stop; at += TILE) {
        const long long first = at + (long long)warp * 32 * ITEMS;
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
          Out v[4];
          load4(x, first + 128 * g + 4 * lane, stop, VEC, v);
          sum += (v[0] + v[1]) + (v[2] + v[3]);
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(~0u, sum, o);
      Out total;
      warps_before<BLOCK>(sum, Out(0), total, warp_sums, lane, warp, 0);
      if (threadIdx.x == 0) totals[s] = total;
      continue;
    }
    Out carry = whole ? Out(0) : totals[s];
    for (long long at = start; at < stop; at += TILE)
      carry += scan_tile<BLOCK, ITEMS>(x, out, at, stop, VEC, carry, warp_sums, lane, warp);
  }
}
