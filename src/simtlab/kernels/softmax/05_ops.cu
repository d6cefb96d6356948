// Rung 5 - rung 4's row as the skeleton of the family's other operators: OP 1 log-softmax, y =
// x - (max + log sum exp(x - max)) (no division; a tiny probability's log keeps its digits where
// log(softmax) rounds it to -inf); OP 2 softmax's backward, dx = y (dy - <dy, y>); OP 3
// log-softmax's, dx = dy - exp(y) sum(dy) (OP 0: softmax itself). Each one reduction or two of
// one or two streams. VPT > 0: the row in registers, read once, as rung 4. VPT 0: rows too long
// for a block's registers (two streams of 32768 values) are streamed - statistics in one pass
// (max and sum together, online, for the forward), then the output, the second read served by L2.
// What it should buy: the operators PyTorch users call, forward and backward, at the device
// copy's rate for the bytes they must move.
#include "simtlab_io.cuh"
#include "simtlab_softmax.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int BLOCK, int VPT, int WARP_ROWS, int OP, bool VEC>
__global__ void __launch_bounds__(BLOCK, 1)  // (ptxas may otherwise hold a block to half the registers)
softmax_ops(const typename simtlab::Io<DT>::T* __restrict__ a, const typename simtlab::Io<DT>::T* __restrict__ b,
            typename simtlab::Io<DT>::T* __restrict__ out, int rows, int cols) {
  static_assert(OP >= 0 && OP <= 3, "OP: 0 softmax, 1 log-softmax, 2 softmax backward, 3 log-softmax backward");
  static_assert(VPT > 0 || !WARP_ROWS, "streamed rows (VPT 0) take a block each");
  using Io = simtlab::Io<DT>;
  using T = typename Io::T;
  constexpr int GROUPS = VPT > 0 ? VPT : 1;
  const simtlab::RowShare<BLOCK, WARP_ROWS> share;
  __shared__ float warp_vals[32];
  const int row = share.row;
  if (share.idle(rows)) return;
  const float NEG = -__int_as_float(0x7f800000);
  auto allsum = [&](float s) {
    return WARP_ROWS ? simtlab::warp_allreduce<0>(s) : simtlab::block_allreduce<BLOCK, 0>(s, warp_vals);
  };
  auto allmax = [&](float s) {
    return WARP_ROWS ? simtlab::warp_allreduce<1>(s) : simtlab::block_allreduce<BLOCK, 1>(s, warp_vals);
  };
  const T* ar = a + (size_t)row * cols;
  const T* br = OP >= 2 ? b + (size_t)row * cols : nullptr;
  T* orow = out + (size_t)row * cols;
  auto put = [&](int c, float4 o) { simtlab::store_group<DT, VEC>(orow, c, cols, o); };
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float s0 = 0.0f, s1 = 0.0f;
  if constexpr (VPT > 0) {  // the row in registers: read once
    float4 v[GROUPS], g[OP >= 2 ? GROUPS : 1];
    if constexpr (OP <= 1) {
      float m = NEG;
#pragma unroll
      for (int j = 0; j < GROUPS; ++j) {
        v[j] = simtlab::load_group<DT, VEC>(ar, share.col(j), cols, NEG);
        m = fmaxf(m, fmaxf(fmaxf(v[j].x, v[j].y), fmaxf(v[j].z, v[j].w)));
      }
      m = allmax(m);
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < GROUPS; ++j)  // (past the row's end: -inf, exp 0)
        s += (__expf(v[j].x - m) + __expf(v[j].y - m)) + (__expf(v[j].z - m) + __expf(v[j].w - m));
      s = allsum(s);
      s0 = OP == 0 ? m : m + __logf(s), s1 = 1.0f / s;
    } else {
      float d = 0.0f;
#pragma unroll
      for (int j = 0; j < GROUPS; ++j) {  // (past the row's end: zeros, adding nothing)
        v[j] = simtlab::load_group<DT, VEC>(ar, share.col(j), cols, 0.0f);
        g[j] = simtlab::load_group<DT, VEC>(br, share.col(j), cols, 0.0f);
        d += OP == 2 ? (v[j].x * g[j].x + v[j].y * g[j].y) + (v[j].z * g[j].z + v[j].w * g[j].w)
                     : (g[j].x + g[j].y) + (g[j].z + g[j].w);
      }
      s0 = allsum(d);
    }
#pragma unroll
    for (int j = 0; j < GROUPS; ++j)
      put(share.col(j), simtlab::softmax_result<OP>(v[j], OP >= 2 ? g[OP >= 2 ? j : 0] : zero, s0, s1));
  } else {  // streamed: the statistics in one pass (online max and sum for the forward), then the output
    float m = NEG, s = 0.0f;
    for (int c = threadIdx.x * 4; c < cols; c += BLOCK * 4) {
      const float4 x = simtlab::load_group<DT, VEC>(ar, c, cols, OP <= 1 ? NEG : 0.0f);
      if constexpr (OP <= 1) {
        const float mc = fmaxf(fmaxf(x.x, x.y), fmaxf(x.z, x.w)), mn = fmaxf(m, mc);
        if (mn != NEG) {  // (until a finite value comes, there is nothing to add: -inf - -inf is NaN)
          s = (m == NEG ? 0.0f : s * __expf(m - mn)) +
              ((__expf(x.x - mn) + __expf(x.y - mn)) + (__expf(x.z - mn) + __expf(x.w - mn)));
          m = mn;
        }
      } else {
        const float4 g = simtlab::load_group<DT, VEC>(br, c, cols, 0.0f);
        s += OP == 2 ? (x.x * g.x + x.y * g.y) + (x.z * g.z + x.w * g.w) : (g.x + g.y) + (g.z + g.w);
      }
    }
    if constexpr (OP <= 1) {
      const float mr = allmax(m);
      const float sr = allsum(m == NEG ? 0.0f : s * __expf(m - mr));  // (a thread with no values adds none)
      s0 = OP == 0 ? mr : mr + __logf(sr), s1 = 1.0f / sr;
    } else {
      s0 = allsum(s);
    }
    for (int c = threadIdx.x * 4; c < cols; c += BLOCK * 4) {
      const float4 x = simtlab::load_group<DT, VEC>(ar, c, cols, 0.0f);
      const float4 g = OP >= 2 ? simtlab::load_group<DT, VEC>(br, c, cols, 0.0f) : zero;
      put(c, simtlab::softmax_result<OP>(x, g, s0, s1));
    }
  }
}
