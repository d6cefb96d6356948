// Rung 6 - rung 5's operators with rows staged by bulk copies and split over thread-block clusters;
// what changed from rung 5: a block owns BLOCK x 4 VPT columns of each row it takes, one thread
// copying its slice of the row (and of dy, for the backwards) into shared memory STAGES rows ahead.
// A row's statistic - (max, sum of exponentials about it) pairs for the forwards, merged in one
// pass; one sum for the backwards - is added once: shuffles in a warp, shared memory in the block,
// and where a long row is split over CLUSTER blocks (up to 8), asynchronous remote stores to every
// block of the cluster that count their bytes on its mbarrier (no cluster barrier a row). With
// three stages, a row's statistic goes out before the last row's output is made.
// What it should buy: rung 5 read rows past its registers (32768 values, 16384 for the backwards)
// twice, and at long rows (one block of 1024 threads an SM) waited on each row's loads and
// reductions in turn; here the next rows' copies are in flight while a row is reduced and every
// row is read once: the copy's rate at every length.
// Rows not in 16-byte pieces (VEC false): each thread copies its own groups into the stage.
#include "simtlab_hopper.cuh"
#include "simtlab_io.cuh"
#include "simtlab_softmax.cuh"

namespace {

// Two shares of a row's statistic merged. Forwards (OP 0, 1): (max, sum of exp(x - max)) pairs, the
// sums rescaled to the larger max (equal maxima, -inf's included, are not rescaled: no -inf - -inf);
// a NaN anywhere stays in the sum. Backwards (OP 2, 3): sums in x. Symmetric bit for bit: a
// butterfly leaves every lane the same pair.
template <int OP>
__device__ __forceinline__ float2 merge(float2 a, float2 b) {
  if constexpr (OP >= 2) {
    return make_float2(a.x + b.x, 0.0f);
  } else {
    const float m = fmaxf(a.x, b.x);
    return make_float2(m, (a.x == m ? a.y : a.y * __expf(a.x - m)) + (b.x == m ? b.y : b.y * __expf(b.x - m)));
  }
}

template <int OP>
__device__ __forceinline__ float2 warp_merge(float2 s) {
#pragma unroll
  for (int k = 16; k > 0; k >>= 1) {
    const float2 o = make_float2(__shfl_xor_sync(0xffffffffu, s.x, k),
                                 OP <= 1 ? __shfl_xor_sync(0xffffffffu, s.y, k) : 0.0f);
    s = merge<OP>(s, o);
  }
  return s;
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

}  // namespace

template <int DT, int BLOCK, int VPT, int CLUSTER, int STAGES, int OP, bool VEC>
__global__ void __cluster_dims__(CLUSTER, 1, 1)
__launch_bounds__(BLOCK, (2048 / VPT / BLOCK) > 0 ? 2048 / VPT / BLOCK : 1)  // (64 registers a thread at VPT 2, 128 at 4)
softmax_cluster(const typename simtlab::Io<DT>::T* __restrict__ a, const typename simtlab::Io<DT>::T* __restrict__ b,
                typename simtlab::Io<DT>::T* __restrict__ out, int rows, int cols) {
  static_assert(OP >= 0 && OP <= 3, "OP: 0 softmax, 1 log-softmax, 2 softmax backward, 3 log-softmax backward");
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps");
  using Io = simtlab::Io<DT>;
  using T = typename Io::T;
  using Raw = typename Io::Raw4;
  constexpr int SLICE = BLOCK * 4 * VPT, WARPS = BLOCK / 32, STREAMS = OP >= 2 ? 2 : 1;
  constexpr int BUFS = 4;  // rows whose statistics are in flight at once (see publish)
  const float NEG = -__int_as_float(0x7f800000), PAD = OP <= 1 ? NEG : 0.0f;  // (past the row's end)
  const float2 NONE = make_float2(PAD, 0.0f);                                   // a share of no values
  extern __shared__ __align__(128) unsigned char stage_bytes[];  // STAGES x STREAMS slices
  __shared__ __align__(8) simtlab::u64 full[STAGES], got[BUFS];
  __shared__ __align__(8) float2 warp_stats[BUFS][WARPS];
  __shared__ __align__(8) float2 block_stats[BUFS][CLUSTER];  // each block's share of a row, CLUSTER > 1
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const unsigned rank = CLUSTER > 1 ? simtlab::cluster_ctarank() : 0;
  const int team = blockIdx.x / CLUSTER, teams = gridDim.x / CLUSTER;  // a cluster takes rows as one
  const int base = rank * SLICE, len = min(SLICE, cols - base);      // this block's columns (len > 0)
  const int taken = team < rows ? (rows - 1 - team) / teams + 1 : 0;
  auto stage = [&](int s) { return reinterpret_cast<T*>(stage_bytes) + (size_t)s * STREAMS * SLICE; };
  auto row_start = [&](int i) { return (size_t)(team + (size_t)i * teams) * cols; };
  auto issue = [&](int i, int s) {  // the team's row i into stage s (one thread)
    const unsigned bytes = len * sizeof(T);
    simtlab::mbar_arrive_expect_tx(&full[s], STREAMS * bytes);
    simtlab::bulk_load(stage(s), a + row_start(i) + base, bytes, &full[s]);
    if constexpr (STREAMS == 2) simtlab::bulk_load(stage(s) + SLICE, b + row_start(i) + base, bytes, &full[s]);
  };
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) simtlab::mbar_init(&full[s], 1);
#pragma unroll
    for (int k = 0; k < BUFS; ++k) simtlab::mbar_init(&got[k], 1);
    simtlab::mbar_init_fence();
  }
  // (every block's barriers initialised before any block sends it a row's share)
  if constexpr (CLUSTER > 1) simtlab::cluster_sync(); else __syncthreads();
  if (VEC && tid == 0)
    for (int i = 0; i < min(STAGES, taken); ++i) issue(i, i);
  int col[VPT];  // this thread's VPT groups of four: their columns in the block's slice
#pragma unroll
  for (int j = 0; j < VPT; ++j) col[j] = (tid + BLOCK * j) * 4;
  const float4 pad4 = make_float4(PAD, PAD, PAD, PAD);
  auto values = [&](int s, float4 (&v)[VPT], float4 (&g)[VPT]) {  // the row's groups (and dy's), from the stage
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      v[j] = col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(stage(s) + col[j])) : pad4;
      g[j] = STREAMS == 2 && col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(stage(s) + SLICE + col[j])) : pad4;
    }
  };
  // Row r's statistic, this thread's share (its stage waited for, or filled by this thread).
  auto own_share = [&](int r) {
    const int s = r % STAGES;
    if constexpr (VEC) {
      simtlab::mbar_wait(&full[s], (r / STAGES) & 1);
    } else {  // (each thread copies its own groups, padded, into the stage: both passes then read it alike)
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (col[j] < len) {
          const float4 v = simtlab::load_group<DT, false>(a + row_start(r) + base, col[j], len, PAD);
          *reinterpret_cast<Raw*>(stage(s) + col[j]) = Io::pack4(v.x, v.y, v.z, v.w);
          if constexpr (STREAMS == 2) {
            const float4 g = simtlab::load_group<DT, false>(b + row_start(r) + base, col[j], len, 0.0f);
            *reinterpret_cast<Raw*>(stage(s) + SLICE + col[j]) = Io::pack4(g.x, g.y, g.z, g.w);
          }
        }
    }
    float4 v[VPT], g[VPT];
    values(s, v, g);
    if constexpr (OP <= 1) {
      float m = NEG, sum = 0.0f;
#pragma unroll
      for (int j = 0; j < VPT; ++j) m = fmaxf(m, max4(v[j]));
      if (m != NEG)  // (a share of -inf's only adds nothing: -inf - -inf would be NaN)
#pragma unroll
        for (int j = 0; j < VPT; ++j)
          sum += (__expf(v[j].x - m) + __expf(v[j].y - m)) + (__expf(v[j].z - m) + __expf(v[j].w - m));
      return make_float2(m, sum);
    } else {
      float d = 0.0f;
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        d += OP == 2 ? (v[j].x * g[j].x + v[j].y * g[j].y) + (v[j].z * g[j].z + v[j].w * g[j].w)
                     : (g[j].x + g[j].y) + (g[j].z + g[j].w);
      return make_float2(d, 0.0f);
    }
  };
  // Skewed by a row where three stages fit: row i + 1's share goes out before row i's output is made,
  // so the exchange's latency (barrier, remote stores) is spent on row i's work.
  constexpr bool SKEW = STAGES >= 3;
  constexpr int LAG = SKEW ? 2 : 1;  // the row whose stage every thread is done with at publish(r): r - LAG
  // Row r's share out: the warps' into shared memory, then (CLUSTER > 1) the block's to every block of
  // the cluster. Its barrier is also where the stage of row r - LAG is refilled. Four buffers: a block
  // may send row r's share while another, three rows behind at the skew, still reads row r - 3's.
  auto publish = [&](int r, float2 share) {
    const int k = r % BUFS;
    if (CLUSTER > 1 && tid == 0) simtlab::mbar_arrive_expect_tx(&got[k], CLUSTER * 8);  // (the blocks' shares)
    share = warp_merge<OP>(share);
    if (lane == 0) warp_stats[k][warp] = share;
    __syncthreads();
    if (VEC && tid == 0 && r >= LAG && r - LAG + STAGES < taken) issue(r - LAG + STAGES, (r - LAG) % STAGES);
    if constexpr (CLUSTER > 1) {
      if (warp == 0) {
        const float2 mine = warp_merge<OP>(lane < WARPS ? warp_stats[k][lane] : NONE);
        if (lane < CLUSTER) simtlab::send_f32x2(&block_stats[k][rank], &got[k], lane, mine);
      }
    }
  };
  // Row r's statistic: every block's share (CLUSTER > 1, in rank order) or every warp's, in order -
  // the same bits in every block of the cluster.
  auto total = [&](int r) {
    const int k = r % BUFS;
    float2 st;
    if constexpr (CLUSTER > 1) {
      simtlab::mbar_wait(&got[k], (r / BUFS) & 1);
      st = block_stats[k][0];
#pragma unroll
      for (int q = 1; q < CLUSTER; ++q) st = merge<OP>(st, block_stats[k][q]);
    } else {
      st = warp_stats[k][0];
#pragma unroll 4
      for (int q = 1; q < WARPS; ++q) st = merge<OP>(st, warp_stats[k][q]);
    }
    return st;
  };
  if (SKEW && taken > 0) publish(0, own_share(0));
  for (int i = 0; i < taken; ++i) {
    if constexpr (SKEW) {
      if (i + 1 < taken) publish(i + 1, own_share(i + 1));
    } else {
      publish(i, own_share(i));
    }
    const float2 st = total(i);
    const float s0 = OP == 1 ? st.x + __logf(st.y) : st.x, s1 = OP == 0 ? 1.0f / st.y : 0.0f;
    float4 v[VPT], g[VPT];
    values(i % STAGES, v, g);  // (again: from the stage, not held in registers through the exchange)
    T* o = out + row_start(i) + base;
#pragma unroll
    for (int j = 0; j < VPT; ++j)
      simtlab::store_group<DT, VEC>(o, col[j], len, simtlab::softmax_result<OP>(v[j], g[j], s0, s1));
  }
  if constexpr (CLUSTER > 1) simtlab::cluster_sync();  // no block leaves while another may still send to it
}
