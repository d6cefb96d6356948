// Shared by the scan rungs: the element type a DT argument names, the carry step of the
// three-launch scans (each tile after the first adds the scanned total of the tiles before it), the
// register pieces of rungs 3 and 5 (a thread's ITEMS elements in and out, a warp's scan, and the
// two halves of a tile's scan around what comes before its warp), and the look-back of rungs 5-6.
#pragma once

namespace simtlab {
namespace scan {

template <int DT> struct Elem { using T = float; using V = float4; };
template <> struct Elem<1> { using T = int; using V = int4; };

template <typename T>
__device__ __forceinline__ void add_carry(T* __restrict__ out, const T* __restrict__ carry, long long n, int tile) {
  if (blockIdx.x == 0) return;
  const T c = carry[blockIdx.x - 1];
  const long long base = (long long)blockIdx.x * tile;
  for (int i = threadIdx.x; i < tile; i += blockDim.x) {
    if (base + i < n) out[base + i] += c;
  }
}

// A thread's ITEMS consecutive elements from x + base: 16-byte loads where `vec`, zeros past n.
template <int DT, int ITEMS>
__device__ __forceinline__ void load_items(const typename Elem<DT>::T* __restrict__ x, long long base, long long n,
                                           bool vec, typename Elem<DT>::T (&v)[ITEMS]) {
  using T = typename Elem<DT>::T;
  using V = typename Elem<DT>::V;
  if (vec) {
#pragma unroll
    for (int q = 0; q < ITEMS / 4; ++q) {
      const V w = reinterpret_cast<const V*>(x + base)[q];
      v[4 * q] = w.x, v[4 * q + 1] = w.y, v[4 * q + 2] = w.z, v[4 * q + 3] = w.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) v[j] = base + j < n ? x[base + j] : T(0);
  }
}

// ... and back to out + base, nothing past n.
template <int DT, int ITEMS>
__device__ __forceinline__ void store_items(typename Elem<DT>::T* out, long long base, long long n, bool vec,
                                            const typename Elem<DT>::T (&v)[ITEMS]) {
  using V = typename Elem<DT>::V;
  if (vec) {
#pragma unroll
    for (int q = 0; q < ITEMS / 4; ++q) {
      V w;
      w.x = v[4 * q], w.y = v[4 * q + 1], w.z = v[4 * q + 2], w.w = v[4 * q + 3];
      reinterpret_cast<V*>(out + base)[q] = w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
      if (base + j < n) out[base + j] = v[j];
  }
}

// The inclusive scan of `value` over the warp's lanes (every lane takes part).
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T value, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(~0u, value, o);
    if (lane >= o) value += y;
  }
  return value;
}

// The first half of a tile's scan in rungs 3 and 5: the thread's ITEMS elements (from x + base,
// 16-byte loads where `vec`) scanned in registers, the threads' totals scanned across the warp,
// each warp's total in warp_sums[warp], then a barrier. Returns the thread's exclusive prefix
// within its warp; what comes before the warp is the caller's (warp_sums, scanned by warp 0).
template <int DT, int ITEMS>
__device__ __forceinline__ typename Elem<DT>::T scan_thread_and_warp(const typename Elem<DT>::T* __restrict__ x,
                                                                     long long base, long long n, bool vec,
                                                                     typename Elem<DT>::T (&v)[ITEMS],
                                                                     typename Elem<DT>::T* warp_sums, int lane,
                                                                     int warp) {
  using T = typename Elem<DT>::T;
  load_items<DT, ITEMS>(x, base, n, vec, v);
#pragma unroll
  for (int j = 1; j < ITEMS; ++j) v[j] += v[j - 1];
  const T inc = warp_inclusive_scan(v[ITEMS - 1], lane);  // the thread's total, scanned across the warp
  T excl = __shfl_up_sync(~0u, inc, 1);  // (the threads before this one in the warp)
  if (lane == 0) excl = T(0);
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  return excl;
}

// ... and the last: every element plus the thread's whole prefix, back to out + base.
template <int DT, int ITEMS>
__device__ __forceinline__ void add_prefix_and_store(typename Elem<DT>::T* out, long long base, long long n, bool vec,
                                                     typename Elem<DT>::T (&v)[ITEMS], typename Elem<DT>::T prefix) {
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) v[j] += prefix;
  store_items<DT, ITEMS>(out, base, n, vec, v);
}

// The single-pass rungs' look-back state: a tile's word holds a flag and a value together, so a
// reader never sees one without the other.
enum : unsigned { NOT_READY = 0, AGGREGATE = 1, PREFIX = 2 };

__device__ __forceinline__ unsigned bits_of(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned bits_of(int v) { return (unsigned)v; }
__device__ __forceinline__ void from_bits(unsigned b, float& v) { v = __uint_as_float(b); }
__device__ __forceinline__ void from_bits(unsigned b, int& v) { v = (int)b; }

template <typename T>
__device__ __forceinline__ unsigned long long pack(unsigned flag, T value) {
  return ((unsigned long long)flag << 32) | bits_of(value);
}

template <typename T>
__device__ __forceinline__ T unpack(unsigned long long word) {
  T value;
  from_bits((unsigned)word, value);
  return value;
}

// Decoupled look-back, by one whole warp for tile `tile` whose own total is `total`: publish the
// total, read the 32 nearest predecessors' words at once - totals (keep walking) up to the nearest
// inclusive prefix (stop) - then publish this tile's inclusive prefix. Every lane returns the sum
// of the tiles before this one.
template <typename T>
__device__ __forceinline__ T look_back(unsigned long long* status, unsigned tile, T total, int lane) {
  if (tile == 0) {
    if (lane == 0) atomicExch(&status[0], pack(PREFIX, total));
    return T(0);
  }
  if (lane == 0) atomicExch(&status[tile], pack(AGGREGATE, total));
  T before = T(0);
  for (long long last = (long long)tile - 1;; last -= 32) {
    const long long j = last - lane;  // lane 0 the nearest predecessor
    unsigned long long word = j >= 0 ? *reinterpret_cast<volatile unsigned long long*>(&status[j])
                                     : pack(PREFIX, T(0));  // (before tile 0: a prefix of nothing)
    while (__any_sync(~0u, (word >> 32) == NOT_READY)) {
      if ((word >> 32) == NOT_READY) word = *reinterpret_cast<volatile unsigned long long*>(&status[j]);
    }
    const unsigned prefixes = __ballot_sync(~0u, (word >> 32) == PREFIX);
    const int stop = prefixes ? __ffs(prefixes) - 1 : 31;  // the nearest inclusive prefix ends the walk
    T part = lane <= stop ? unpack<T>(word) : T(0);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(~0u, part, o);
    before += part;
    if (prefixes) break;
  }
  if (lane == 0) atomicExch(&status[tile], pack(PREFIX, before + total));
  return before;
}

// What comes before a warp's elements in the single-pass rungs, once every warp's total is in
// warp_sums[warp]: warp 0 scans the totals and looks back for the tiles before this one; then a
// barrier; every thread gets the tiles' sum before this one plus the warps' before its own.
template <int BLOCK, typename T>
__device__ __forceinline__ T tile_and_warp_prefix(T* warp_sums, T& block_prefix, unsigned long long* status,
                                                  unsigned tile, int lane, int warp) {
  if (warp == 0) {
    const T w = warp_inclusive_scan(lane < BLOCK / 32 ? warp_sums[lane] : T(0), lane);
    if (lane < BLOCK / 32) warp_sums[lane] = w;
    const T total = __shfl_sync(~0u, w, BLOCK / 32 - 1);
    const T before = look_back(status, tile, total, lane);
    if (lane == 0) block_prefix = before;
  }
  __syncthreads();
  return block_prefix + (warp > 0 ? warp_sums[warp - 1] : T(0));
}

}  // namespace scan
}  // namespace simtlab
