// Rung 6 - single pass, warp-striped: what changed from rung 5: a warp owns 32 x ITEMS consecutive
// elements and lane l holds elements 4l..4l+3 of each 128-element group of them, so every 16-byte
// load and store instruction covers 512 consecutive bytes - whole 32-byte sectors - where rung 5's
// (a thread's ITEMS consecutive elements) spread a warp's 16 bytes a lane over 1 KiB, half of each
// sector an instruction, twice the sectors asked of L2 (Nsight Compute on rung 5: L2 86% busy, DRAM
// 58%). The price: a warp scan a group (ITEMS / 4 of them) instead of one a thread's run.
// ORDER 1 takes tile = blockIdx.x instead of an atomic ticket, so a block's loads leave at once
// instead of after a round trip to L2; it relies on blocks starting in index order (as CUB does) -
// a block never waits on one that has not started. ORDER 0 keeps the ticket.
#include "simtlab_scan.cuh"

// Up to 12 elements a lane on Hopper: a full SM, 32 registers a thread (int32 took 36 and three
// quarters of it; sm_80's ptxas spills at 32, so it keeps its own count).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SCAN_FULL_SM(BLOCK, ITEMS) ((ITEMS) <= 12 ? 2048 / (BLOCK) : 1)
#else
#define SCAN_FULL_SM(BLOCK, ITEMS) 1
#endif

template <int DT, int BLOCK, int ITEMS, int ORDER>
__global__ void __launch_bounds__(BLOCK, SCAN_FULL_SM(BLOCK, ITEMS))
scan_striped_lookback(const typename simtlab::scan::Elem<DT>::T* __restrict__ x, typename simtlab::scan::Elem<DT>::T* out,
                      unsigned long long* status, unsigned* counter, long long n) {
  using T = typename simtlab::scan::Elem<DT>::T;
  using V = typename simtlab::scan::Elem<DT>::V;
  using namespace simtlab::scan;
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  static_assert(ITEMS % 4 == 0, "ITEMS: 16-byte groups a lane");
  static_assert(ORDER == 0 || ORDER == 1, "ORDER: 0 an atomic ticket, 1 the block index");
  constexpr int GROUPS = ITEMS / 4;
  __shared__ T warp_sums[BLOCK / 32];
  __shared__ T block_prefix;
  __shared__ unsigned tile_shared;
  unsigned tile = blockIdx.x;
  if constexpr (ORDER == 0) {
    if (threadIdx.x == 0) tile_shared = atomicAdd(counter, 1u);
    __syncthreads();
    tile = tile_shared;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long first = ((long long)tile * BLOCK + warp * 32) * ITEMS;  // the warp's first element
  const bool vec = first + 32 * ITEMS <= n && ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(out)) & 15) == 0;
  V v[GROUPS];  // group g: elements first + 128 g + 4 lane ... + 3
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long at = first + 128 * g + 4 * lane;
    if (vec) {
      v[g] = reinterpret_cast<const V*>(x + first)[32 * g + lane];
    } else {
      v[g].x = at < n ? x[at] : T(0);
      v[g].y = at + 1 < n ? x[at + 1] : T(0);
      v[g].z = at + 2 < n ? x[at + 2] : T(0);
      v[g].w = at + 3 < n ? x[at + 3] : T(0);
    }
  }
  // Each group scanned across the warp; off[g]: what precedes the lane's group within the warp.
  T off[GROUPS];
  T carry = T(0);
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    v[g].y += v[g].x, v[g].z += v[g].y, v[g].w += v[g].z;
    const T inc = warp_inclusive_scan(v[g].w, lane);
    T excl = __shfl_up_sync(~0u, inc, 1);
    if (lane == 0) excl = T(0);
    off[g] = carry + excl;
    carry += __shfl_sync(~0u, inc, 31);
  }
  if (lane == 0) warp_sums[warp] = carry;
  __syncthreads();
  const T prefix = tile_and_warp_prefix<BLOCK>(warp_sums, block_prefix, status, tile, lane, warp);
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const T add = prefix + off[g];
    v[g].x += add, v[g].y += add, v[g].z += add, v[g].w += add;
    const long long at = first + 128 * g + 4 * lane;
    if (vec) {
      reinterpret_cast<V*>(out + first)[32 * g + lane] = v[g];
    } else {
      if (at < n) out[at] = v[g].x;
      if (at + 1 < n) out[at + 1] = v[g].y;
      if (at + 2 < n) out[at + 2] = v[g].z;
      if (at + 3 < n) out[at + 3] = v[g].w;
    }
  }
}
