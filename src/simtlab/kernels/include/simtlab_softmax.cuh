// The softmax family's output of one group of four values (rungs 5 and 6): from the row's inputs
// x (and g, the gradient, for the backwards) and its statistic (s0, s1), for operator OP - 0
// softmax (s0 max, s1 1 / sum), 1 log-softmax (s0 log-sum-exp), 2 softmax's backward
// dx = y (dy - <dy, y>) (s0 the dot product), 3 log-softmax's dx = dy - exp(y) sum(dy) (s0 the sum).
#pragma once

namespace simtlab {

template <int OP>
__device__ __forceinline__ float4 softmax_result(float4 x, float4 g, float s0, float s1) {
  if constexpr (OP == 0) return make_float4(__expf(x.x - s0) * s1, __expf(x.y - s0) * s1, __expf(x.z - s0) * s1,
                                             __expf(x.w - s0) * s1);
  else if constexpr (OP == 1) return make_float4(x.x - s0, x.y - s0, x.z - s0, x.w - s0);
  else if constexpr (OP == 2) return make_float4(x.x * (g.x - s0), x.y * (g.y - s0), x.z * (g.z - s0), x.w * (g.w - s0));
  else return make_float4(g.x - __expf(x.x) * s0, g.y - __expf(x.y) * s0, g.z - __expf(x.z) * s0,
                          g.w - __expf(x.w) * s0);
}

}  // namespace simtlab
