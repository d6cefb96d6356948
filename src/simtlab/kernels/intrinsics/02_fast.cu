// Rung 2 - the fast spellings of rung 1's operations: __expf (one FMUL and a
// bare MUFU.EX2: error grows with |x|), multiplication by a reciprocal
// computed once per thread instead of a division per element (up to ~1.5 ulp
// instead of 0.5), and a shift and a mask instead of / and % by a power of two
// (exact for non-negative values; for negative ones >> rounds toward -inf
// where / rounds toward zero, so the trick needs the sign known). The same
// chain as rung 1: the table puts each one's speed beside its measured error.
#include "simtlab_chain.cuh"

struct FastOps {
  __device__ __forceinline__ static float exp(float v) { return __expf(v); }
  __device__ __forceinline__ static float div(float v, float, float rd) { return v * rd; }
  __device__ __forceinline__ static int idiv(int v, int, int log2D) { return v >> log2D; }
  __device__ __forceinline__ static int imod(int v, int D, int) { return v & (D - 1); }
};

template <int OP, int REPS>
__global__ void __launch_bounds__(256)
intrinsics_fast(const float* __restrict__ x, float* __restrict__ y, int n, float d, int D, int log2D,
                   int sentinel) {
  simtlab::chain<FastOps, OP, REPS>(x, y, n, d, D, log2D, sentinel);
}
