// Rung 6 - the backwards with rows staged by bulk copies and split over thread-block clusters; what
// changed from rung 5: a block owns BLOCK x 8 columns of each row it takes, one thread copies its
// slice of x and dy into shared memory STAGES rows ahead, and a row's statistics are merged once:
// each thread's count, mean, squared deviations about its own mean and the two sums dx needs
// (Chan's pairwise merge, no cancellation) joined by shuffles, then across the cluster through
// distributed shared memory where a long row is split over CLUSTER blocks (up to 8: 65536 values).
// Short rows: a cluster of GROUP blocks, each taking whole rows, adds its column sums before
// writing them (one partial row a cluster, few for the last launch to add).
// What it should buy: rung 5 waited on each row's loads and reductions in turn (a persistent block
// of 256 threads an SM) and read rows past 8192 values twice; here the next rows' copies are in
// flight while a row is merged, and every row is read once: near the copy at every length.
// Rows not in 16-byte pieces (VEC false): each thread copies its own groups into the stage.
#include "simtlab_hopper.cuh"
#include "simtlab_io.cuh"
#include "simtlab_norms.cuh"

namespace {

// A share of a row: its count n, the mean m of its x, m2 = sum (x - m)^2 (RMSNorm: sum x^2),
// sg = sum g, sgd = sum g (x - m) (RMSNorm: sum g x), with g = dy w.
struct Share {
  float n, m, m2, sg, sgd;
};

// Two shares joined, `a` the lower one: every thread that joins the same two gets the same bits.
template <int RMS>
__device__ __forceinline__ Share join(const Share& a, const Share& b) {
  if constexpr (RMS) {
    return {0.0f, 0.0f, a.m2 + b.m2, 0.0f, a.sgd + b.sgd};
  } else {
    const float n = a.n + b.n, fb = b.n * __frcp_rn(fmaxf(n, 1.0f)), fa = 1.0f - fb, d = b.m - a.m;  // (no division's slow path)
    return {n, fmaf(d, fb, a.m), a.m2 + b.m2 + d * d * a.n * fb, a.sg + b.sg, a.sgd + b.sgd + d * (fa * b.sg - fb * a.sg)};
  }
}

// The shares of a warp's first LANES lanes joined as a tree over the lanes in order (the lane with
// bit k clear is the lower one at level k): each of those lanes ends with the same share.
template <int RMS, int LANES = 32>
__device__ __forceinline__ Share warp_join(Share s) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 1; k < LANES; k <<= 1) {
    Share o;
    o.m2 = __shfl_xor_sync(0xffffffffu, s.m2, k);
    o.sgd = __shfl_xor_sync(0xffffffffu, s.sgd, k);
    if constexpr (!RMS) {
      o.n = __shfl_xor_sync(0xffffffffu, s.n, k);
      o.m = __shfl_xor_sync(0xffffffffu, s.m, k);
      o.sg = __shfl_xor_sync(0xffffffffu, s.sg, k);
    }
    const bool upper = lane & k;  // (operands chosen, then one join: no branch)
    const Share lo{upper ? o.n : s.n, upper ? o.m : s.m, upper ? o.m2 : s.m2, upper ? o.sg : s.sg, upper ? o.sgd : s.sgd};
    const Share hi{upper ? s.n : o.n, upper ? s.m : o.m, upper ? s.m2 : o.m2, upper ? s.sg : o.sg, upper ? s.sgd : o.sgd};
    s = join<RMS>(lo, hi);
  }
  return s;
}

// Lane 0's share in every lane.
template <int RMS>
__device__ __forceinline__ Share from_lane0(Share s) {
  s.m2 = __shfl_sync(0xffffffffu, s.m2, 0), s.sgd = __shfl_sync(0xffffffffu, s.sgd, 0);
  if constexpr (!RMS) {
    s.n = __shfl_sync(0xffffffffu, s.n, 0), s.m = __shfl_sync(0xffffffffu, s.m, 0);
    s.sg = __shfl_sync(0xffffffffu, s.sg, 0);
  }
  return s;
}

// A thread's share of its two groups of four (x, g = dy w), `n[j]` values of group j inside the row
// (the others hold zeros, which add nothing to the sums but would to the squared deviations).
template <int RMS>
__device__ __forceinline__ Share own_share(const float4 (&v)[2], const float4 (&g)[2], const int (&n)[2]) {
  Share s{0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (RMS) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s.m2 += (v[j].x * v[j].x + v[j].y * v[j].y) + (v[j].z * v[j].z + v[j].w * v[j].w);
      s.sgd += (g[j].x * v[j].x + g[j].y * v[j].y) + (g[j].z * v[j].z + g[j].w * v[j].w);
    }
  } else {
    s.n = (float)(n[0] + n[1]);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      sum += (v[j].x + v[j].y) + (v[j].z + v[j].w);
      s.sg += (g[j].x + g[j].y) + (g[j].z + g[j].w);
    }
    s.m = sum * __frcp_rn(fmaxf(s.n, 1.0f));
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float xs[4] = {v[j].x, v[j].y, v[j].z, v[j].w}, gs[4] = {g[j].x, g[j].y, g[j].z, g[j].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float d = e < n[j] ? xs[e] - s.m : 0.0f;
        s.m2 += d * d, s.sgd += gs[e] * d;
      }
    }
  }
  return s;
}

}  // namespace

template <int DT, int BLOCK, int CLUSTER, int GROUP, int STAGES, int RMS, bool VEC>
__global__ void __cluster_dims__(CLUSTER * GROUP, 1, 1) __launch_bounds__(BLOCK, 1024 / BLOCK)  // (64 registers)
layernorm_backward_cluster(const typename simtlab::Io<DT>::T* __restrict__ x,
                           const typename simtlab::Io<DT>::T* __restrict__ w,
                           const typename simtlab::Io<DT>::T* __restrict__ dy, typename simtlab::Io<DT>::T* __restrict__ dx,
                           float* __restrict__ partial_w, float* __restrict__ partial_b, int rows, int cols, float eps,
                           int parts, typename simtlab::Io<DT>::T* __restrict__ dw,
                           typename simtlab::Io<DT>::T* __restrict__ db, int phase) {
  using Io = simtlab::Io<DT>;
  using T = typename Io::T;
  constexpr int SLICE = BLOCK * 8, WARPS = BLOCK / 32;
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps");
  static_assert(CLUSTER == 1 || GROUP == 1, "a cluster splits rows across its blocks, or holds teams of whole rows");
  if (phase == 1) {  // (a grid of whole clusters: the blocks past the last column do nothing)
    simtlab::column_sums<DT, BLOCK, RMS>(partial_w, partial_b, parts, cols, dw, db);
    return;
  }
  extern __shared__ __align__(128) unsigned char stage_bytes[];  // STAGES x (x slice, dy slice), the w slice
  __shared__ __align__(8) simtlab::u64 full[STAGES];
  __shared__ Share warp_shares[WARPS];
  __shared__ float block_share[2][5];  // (two, one row apart: one is read while the next is written)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // The cluster's blocks: CLUSTER column blocks of one team (a long row split), or GROUP teams of
  // one block each (short rows), whose column sums are added before they are written.
  const unsigned rank = simtlab::cluster_ctarank();
  const int cluster = blockIdx.x / (CLUSTER * GROUP), clusters = gridDim.x / (CLUSTER * GROUP);
  const int team = cluster * GROUP + rank / CLUSTER, teams = clusters * GROUP;
  const int base = (rank % CLUSTER) * SLICE, len = min(SLICE, cols - base);  // this block's columns (len > 0)
  const int taken = team < rows ? (rows - 1 - team) / teams + 1 : 0;  // rows this team takes
  auto xs = [&](int s) { return reinterpret_cast<T*>(stage_bytes) + (size_t)s * 2 * SLICE; };
  auto row_of = [&](int i) { return (size_t)(team + (size_t)i * teams) * cols + base; };
  auto issue = [&](int i, int s) {  // the team's row i into stage s (one thread)
    const unsigned bytes = len * sizeof(T);
    simtlab::mbar_arrive_expect_tx(&full[s], 2 * bytes);
    simtlab::bulk_load(xs(s), x + row_of(i), bytes, &full[s]);
    simtlab::bulk_load(xs(s) + SLICE, dy + row_of(i), bytes, &full[s]);
  };
  if constexpr (VEC) {
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < STAGES; ++s) simtlab::mbar_init(&full[s], 1);
      simtlab::mbar_init_fence();
    }
    __syncthreads();
    if (tid == 0)
      for (int i = 0; i < min(STAGES, taken); ++i) issue(i, i);
  }
  int col[2], n[2];  // this thread's two groups of four: their columns in the block's slice, values inside it
  T* ws = xs(STAGES);  // the block's slice of w, read each row from here (not held: 64 registers a thread)
  float4 pw[2], pb[2];
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto weight = [&](int j) {  // (zeros past the row's end: 0 x whatever the memory holds could be NaN)
    return col[j] < len ? Io::unpack4(*reinterpret_cast<const typename Io::Raw4*>(ws + col[j])) : zero;
  };
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    col[j] = (tid + BLOCK * j) * 4;
    n[j] = min(max(len - col[j], 0), 4);
    const float4 wj = simtlab::load_group<DT, VEC>(w + base, col[j], len, 0.0f);
    if (col[j] < len) *reinterpret_cast<typename Io::Raw4*>(ws + col[j]) = Io::pack4(wj.x, wj.y, wj.z, wj.w);
    pw[j] = pb[j] = zero;
  }
  const float inv_cols = 1.0f / cols;
  using Raw = typename Io::Raw4;
  auto values = [&](int s, float4 (&v)[2], float4 (&g)[2]) {  // x and dy of the row's groups, from the stage
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // (groups past the row's end read nothing)
      v[j] = col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(xs(s) + col[j])) : zero;
      g[j] = col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(xs(s) + SLICE + col[j])) : zero;
    }
  };
  for (int i = 0; i < taken; ++i) {
    const int s = i % STAGES;
    if constexpr (VEC) {
      simtlab::mbar_wait(&full[s], (i / STAGES) & 1);
    } else {  // (each thread copies its own groups into the stage: both passes then read it alike)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        if (col[j] < len) {
          const float4 v = simtlab::load_group<DT, false>(x + row_of(i), col[j], len, 0.0f);
          const float4 g = simtlab::load_group<DT, false>(dy + row_of(i), col[j], len, 0.0f);
          *reinterpret_cast<Raw*>(xs(s) + col[j]) = Io::pack4(v.x, v.y, v.z, v.w);
          *reinterpret_cast<Raw*>(xs(s) + SLICE + col[j]) = Io::pack4(g.x, g.y, g.z, g.w);
        }
    }
    Share share;
    {
      float4 v[2], g[2];
      values(s, v, g);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float4 wj = weight(j);
        g[j] = make_float4(g[j].x * wj.x, g[j].y * wj.y, g[j].z * wj.z, g[j].w * wj.w);
      }
      share = warp_join<RMS>(own_share<RMS>(v, g, n));
    }
    if (lane == 0) warp_shares[warp] = share;
    __syncthreads();  // (every thread is past the last row: its stage may be refilled, STAGES rows on)
    if (VEC && tid == 0 && i >= 1 && i - 1 + STAGES < taken) issue(i - 1 + STAGES, (i - 1) % STAGES);
    if (warp == 0) {
      share = warp_join<RMS, WARPS>(lane < WARPS ? warp_shares[lane] : Share{0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      if (lane == 0) {
        block_share[i & 1][0] = share.n, block_share[i & 1][1] = share.m, block_share[i & 1][2] = share.m2;
        block_share[i & 1][3] = share.sg, block_share[i & 1][4] = share.sgd;
      }
    }
    // The row's share from each of its blocks, joined in rank order (the same statistics in every
    // block); warp_shares may be written again past this barrier, block_share[i & 1] two rows on.
    Share row;
    if constexpr (CLUSTER > 1) {
      simtlab::cluster_sync();
      Share b{0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (lane < CLUSTER) {  // (lane r reads block r's share)
        const unsigned there = simtlab::cluster_map(simtlab::smem_u32addr(&block_share[i & 1][0]), lane);
        b.m2 = simtlab::ld_cluster_f32(there + 8), b.sgd = simtlab::ld_cluster_f32(there + 16);
        if constexpr (!RMS) {
          b.n = simtlab::ld_cluster_f32(there), b.m = simtlab::ld_cluster_f32(there + 4);
          b.sg = simtlab::ld_cluster_f32(there + 12);
        }
      }
      row = from_lane0<RMS>(warp_join<RMS, CLUSTER>(b));
    } else {
      __syncthreads();
      row = {block_share[i & 1][0], block_share[i & 1][1], block_share[i & 1][2], block_share[i & 1][3],
             block_share[i & 1][4]};
    }
    const float mean = RMS ? 0.0f : row.m, rstd = rsqrtf(row.m2 * inv_cols + eps);
    const float mg = RMS ? 0.0f : row.sg * inv_cols, mgx = rstd * row.sgd * inv_cols;
    float4 v[2], g[2];
    values(s, v, g);  // (again: from the stage, not held in registers through the merge)
    T* out = dx + row_of(i);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float4 wj = weight(j);
      const float4 xh = make_float4((v[j].x - mean) * rstd, (v[j].y - mean) * rstd, (v[j].z - mean) * rstd,
                                    (v[j].w - mean) * rstd);
      const float4 o = make_float4(rstd * (g[j].x * wj.x - mg - xh.x * mgx), rstd * (g[j].y * wj.y - mg - xh.y * mgx),
                                   rstd * (g[j].z * wj.z - mg - xh.z * mgx), rstd * (g[j].w * wj.w - mg - xh.w * mgx));
      simtlab::store_group<DT, VEC>(out, col[j], len, o);
      pw[j] = make_float4(pw[j].x + g[j].x * xh.x, pw[j].y + g[j].y * xh.y, pw[j].z + g[j].z * xh.z,
                          pw[j].w + g[j].w * xh.w);
      if constexpr (!RMS) pb[j] = make_float4(pb[j].x + g[j].x, pb[j].y + g[j].y, pb[j].z + g[j].z, pb[j].w + g[j].w);
    }
  }
  // The cluster's partial row of the column sums: a long row's blocks write their own columns; a
  // cluster of teams adds its teams' shares first (through distributed shared memory, in rank order).
  float* pw_row = partial_w + (size_t)cluster * cols + base;
  float* pb_row = RMS ? nullptr : partial_b + (size_t)cluster * cols + base;
  float* mine_w = reinterpret_cast<float*>(stage_bytes);  // (GROUP > 1: the stages are free now)
  float* mine_b = mine_w + SLICE;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float a[4] = {pw[j].x, pw[j].y, pw[j].z, pw[j].w}, b[4] = {pb[j].x, pb[j].y, pb[j].z, pb[j].w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (col[j] + e >= len) continue;
      if constexpr (GROUP > 1) {
        mine_w[col[j] + e] = a[e];
        if constexpr (!RMS) mine_b[col[j] + e] = b[e];
      } else {
        pw_row[col[j] + e] = a[e];
        if constexpr (!RMS) pb_row[col[j] + e] = b[e];
      }
    }
  }
  if constexpr (GROUP > 1) {
    simtlab::cluster_sync();
    if (rank == 0) {
      const unsigned at_w = simtlab::smem_u32addr(mine_w), at_b = simtlab::smem_u32addr(mine_b);
      for (int c = tid; c < len; c += BLOCK) {
        float a = 0.0f, b = 0.0f;
#pragma unroll
        for (int r = 0; r < GROUP; ++r) {
          a += simtlab::ld_cluster_f32(simtlab::cluster_map(at_w, r) + 4 * c);
          if constexpr (!RMS) b += simtlab::ld_cluster_f32(simtlab::cluster_map(at_b, r) + 4 * c);
        }
        pw_row[c] = a;
        if constexpr (!RMS) pb_row[c] = b;
      }
    }
  }
  if constexpr (CLUSTER * GROUP > 1) simtlab::cluster_sync();  // no block leaves while another reads its memory
}
