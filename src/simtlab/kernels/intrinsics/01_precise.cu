// Rung 1 - the accurate spellings: expf (a range reduction and polynomial
// around MUFU.EX2, within 2 ulp over its whole range), IEEE division a / d
// (a reciprocal refined by Newton steps, with a slow path for awkward
// operands: correctly rounded), and integer / and % by a divisor known only at
// run time (a multiply-high sequence of a dozen instructions). Each thread
// writes f(x) once - what the accuracy check reads - and then applies f REPS
// more times in a dependent chain kept alive by a never-true test, so the
// timing measures the operation's throughput rather than the memory.
// OP 0 = exp, 1 = divide by a run-time d, 2 = int / and % by a run-time power of two.
#include "simtlab_chain.cuh"

struct PreciseOps {
  __device__ __forceinline__ static float exp(float v) { return expf(v); }
  __device__ __forceinline__ static float div(float v, float d, float) { return v / d; }
  __device__ __forceinline__ static int idiv(int v, int D, int) { return v / D; }
  __device__ __forceinline__ static int imod(int v, int D, int) { return v % D; }
};

template <int OP, int REPS>
__global__ void __launch_bounds__(256)
intrinsics_precise(const float* __restrict__ x, float* __restrict__ y, int n, float d, int D, int log2D,
                   int sentinel) {
  simtlab::chain<PreciseOps, OP, REPS>(x, y, n, d, D, log2D, sentinel);
}
