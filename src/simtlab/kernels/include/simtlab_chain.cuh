// The harness both intrinsics rungs share: y = f(x) once per element (checked
// for accuracy), then REPS further applications of f in four independent
// dependent chains per thread (throughput, not latency), whose result is
// stored only if all four equal `sentinel`, a run-time argument the host sets
// to a value no chain reaches (a NaN payload, above 2^30 as an int): the
// compiler cannot prove the store dead, so it keeps the chains.
// OP 2 reads and writes int32 through the same pointers.
#pragma once

namespace simtlab {

template <class Ops, int OP>
__device__ __forceinline__ float apply(float v, float d, float rd, int D, int log2D) {
  if constexpr (OP == 0) {
    return Ops::exp(v);
  } else if constexpr (OP == 1) {
    return Ops::div(v, d, rd);
  } else {
    const int i = __float_as_int(v);
    return __int_as_float(Ops::idiv(i, D, log2D) + Ops::imod(i, D, log2D));
  }
}

// One step of a chain: keeps values in range (exp of a value near 0, quotients near a fixed point,
// non-negative integers below 2^30) so no step takes a special-value path.
template <class Ops, int OP>
__device__ __forceinline__ float step(float v, float d, float rd, int D, int log2D) {
  if constexpr (OP == 0) {
    return apply<Ops, OP>(fmaf(v, 0.25f, -0.5f), d, rd, D, log2D);
  } else if constexpr (OP == 1) {
    return apply<Ops, OP>(v + 1.0f, d, rd, D, log2D);
  } else {
    return __int_as_float(__float_as_int(apply<Ops, OP>(v, d, rd, D, log2D)) * 3 + 1 & 0x3fffffff);
  }
}

template <class Ops, int OP, int REPS>
__device__ __forceinline__ void chain(const float* __restrict__ x, float* __restrict__ y, int n, float d, int D,
                                      int log2D, int sentinel) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float rd = 1.0f / d;  // once per thread: the fast rung's whole saving for division
  const float v0 = x[i];
  const float out = apply<Ops, OP>(v0, d, rd, D, log2D);
  if constexpr (REPS > 0) {
    float c[4] = {out, v0, out + v0, out - v0};
    if constexpr (OP == 2) {
      c[2] = __int_as_float(__float_as_int(v0) ^ 0x5555), c[3] = __int_as_float(__float_as_int(v0) >> 1);
    }
#pragma unroll 4
    for (int r = 0; r < REPS; ++r)
#pragma unroll
      for (int k = 0; k < 4; ++k) c[k] = step<Ops, OP>(c[k], d, rd, D, log2D);
    if (__float_as_int(c[0]) == sentinel && __float_as_int(c[1]) == sentinel && __float_as_int(c[2]) == sentinel &&
        __float_as_int(c[3]) == sentinel) {
      y[i] = c[0] + c[1] + c[2] + c[3];  // never happens
      return;
    }
  }
  y[i] = out;
}

}  // namespace simtlab
