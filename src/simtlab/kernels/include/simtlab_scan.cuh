// Shared by the scan rungs: the element type a DT argument names, and the carry step of the
// three-launch scans (each tile after the first adds the scanned total of the tiles before it).
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

}  // namespace scan
}  // namespace simtlab
