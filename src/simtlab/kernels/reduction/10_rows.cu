// Rung 10 - many reductions in one launch: what changed from rung 9: the array is cut into
// segments (rows of a matrix, or chunks of one row) and each segment is reduced by a warp
// (short rows, WARP_ROWS 1) or a block, UNROLL 16-byte loads in flight per thread, a scalar head
// to reach alignment so any row length takes the vector path. A whole-array reduction is two
// launches of it - chunks to fp32 partials, then the partials - so no ticket, no atomics: the
// order is fixed and no state outlives a launch (two streams may run one plan at once).
// DT / ODT: input / output storage (0 fp32, 1 bf16, 2 fp16), math in fp32. OP 2 is torch.amax's
// max (NaN wins). VEC: x 16-byte aligned (fp32) or 8-byte (16-bit): four elements a load.
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int ODT, int BLOCK, int WARP_ROWS, int OP, bool VEC>
__global__ void __launch_bounds__(BLOCK)
reduce_rows(const typename simtlab::Io<DT>::T* __restrict__ x, typename simtlab::Io<ODT>::T* __restrict__ out,
            long long segments, int per_row, long long chunk, long long cols) {
  using R = simtlab::Reduce<OP>;
  using In = simtlab::Io<DT>;
  constexpr int UNROLL = 4;
  constexpr int T = WARP_ROWS ? 32 : BLOCK;  // threads a segment
  constexpr int PER_BLOCK = BLOCK / T;       // segments a block at a time
  __shared__ float warp_vals[BLOCK / 32];
  const int lane = threadIdx.x % T;
  for (long long base = (long long)blockIdx.x * PER_BLOCK; base < segments; base += (long long)gridDim.x * PER_BLOCK) {
    const long long s = base + threadIdx.x / T;
    const bool live = s < segments;  // (a warp past the end still takes part in the block's loop)
    const long long row = live ? s / per_row : 0, part = live ? s % per_row : 0;
    const long long start = row * cols + part * chunk;
    const long long len = live ? min(chunk, cols - part * chunk) : 0;
    const auto* p = x + start;
    float acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc[u] = R::identity();
    long long done = 0;
    if (VEC) {
      const long long head = min((long long)((4 - (start & 3)) & 3), len);
      if (lane < head) acc[0] = R::apply(acc[0], In::load(p + lane));
      const long long groups = (len - head) / 4;
      const auto* q = p + head;
      long long g = lane;
      for (; g + (UNROLL - 1) * T < groups; g += UNROLL * T) {  // UNROLL loads issued before any use
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = In::load4(q + 4 * (g + u * T));
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc[u] = R::apply(acc[u], R::apply(R::apply(v[u].x, v[u].y), R::apply(v[u].z, v[u].w)));
      }
#pragma unroll 1
      for (; g < groups; g += T) {
        const float4 v = In::load4(q + 4 * g);
        acc[1] = R::apply(acc[1], R::apply(R::apply(v.x, v.y), R::apply(v.z, v.w)));
      }
      done = head + 4 * groups;
    }
    long long i = done + lane;
    for (; i + (UNROLL - 1) * T < len; i += UNROLL * T) {
      float v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = In::load(p + i + u * T);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) acc[u] = R::apply(acc[u], v[u]);
    }
#pragma unroll 1
    for (; i < len; i += T) acc[2] = R::apply(acc[2], In::load(p + i));
    float v = R::apply(R::apply(acc[0], acc[1]), R::apply(acc[2], acc[3]));
    if (WARP_ROWS) {
      v = simtlab::warp_reduce<OP>(v);
    } else {
      v = simtlab::block_reduce<BLOCK, OP>(v, warp_vals);
      __syncthreads();  // warp 0 has read warp_vals before the next segment writes it
    }
    if (live && lane == 0) simtlab::Io<ODT>::store(out + s, v);
  }
}
