// Rung 6 - the backwards with rows staged by bulk copies and split over thread-block clusters; what
// changed from rung 5: a block owns BLOCK x 4 VPT columns of each row it takes, one thread copying its
// slice of x and dy into shared memory STAGES rows ahead; a row's sums (taken about a shift, the
// mean of its first 16 bytes) are added once: by shuffles in a warp, through shared memory in the
// block, and, where a long row is split over CLUSTER blocks (up to 8: 65536 values), sent to every
// block of the cluster by asynchronous remote stores that count their bytes on its mbarrier (no
// cluster barrier a row); with three stages, a row's sums go out before the last row's dx is made.
// Short rows: a cluster of GROUP blocks, each taking whole rows, adds its column sums before
// writing them (one partial row a cluster, few for the last launch to add).
// What it should buy: rung 5 waited on each row's loads and reductions in turn (a persistent block
// of 256 threads an SM) and read rows past 8192 values twice; here the next rows' copies are in
// flight while a row is summed, and every row is read once: near the copy at every length.
// Rows not in 16-byte pieces (VEC false): each thread copies its own groups into the stage.
#include "simtlab_hopper.cuh"
#include "simtlab_io.cuh"
#include "simtlab_norms.cuh"

namespace {

// A row's four sums about its shift: d = x - shift, sd = sum d, sdd = sum d^2, sg = sum g, sgd =
// sum g d (g = dy w); RMSNorm: sdd = sum x^2, sgd = sum g x (no shift, no sd, no sg).
template <int RMS>
__device__ __forceinline__ float4 warp_sum(float4 s) {
#pragma unroll
  for (int k = 16; k > 0; k >>= 1) {  // (a butterfly: every lane adds the same two, the same bits)
    s.y += __shfl_xor_sync(0xffffffffu, s.y, k);
    s.w += __shfl_xor_sync(0xffffffffu, s.w, k);
    if constexpr (!RMS) {
      s.x += __shfl_xor_sync(0xffffffffu, s.x, k);
      s.z += __shfl_xor_sync(0xffffffffu, s.z, k);
    }
  }
  return s;
}

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

}  // namespace

template <int DT, int BLOCK, int VPT, int CLUSTER, int GROUP, int STAGES, int RMS, bool VEC>
__global__ void __cluster_dims__(CLUSTER * GROUP, 1, 1)
__launch_bounds__(BLOCK, (2048 / VPT / BLOCK) > 0 ? 2048 / VPT / BLOCK : 1)  // (64 registers a thread at VPT 2, 128 at 4)
layernorm_backward_cluster(const typename simtlab::Io<DT>::T* __restrict__ x,
                           const typename simtlab::Io<DT>::T* __restrict__ w,
                           const typename simtlab::Io<DT>::T* __restrict__ dy, typename simtlab::Io<DT>::T* __restrict__ dx,
                           float* __restrict__ partial_w, float* __restrict__ partial_b, int rows, int cols, float eps,
                           int parts, typename simtlab::Io<DT>::T* __restrict__ dw,
                           typename simtlab::Io<DT>::T* __restrict__ db, int phase) {
  using Io = simtlab::Io<DT>;
  using T = typename Io::T;
  using Raw = typename Io::Raw4;
  constexpr int SLICE = BLOCK * 4 * VPT, WARPS = BLOCK / 32, HEAD = 16 / sizeof(T);  // (HEAD: values in 16 bytes)
  constexpr int BUFS = 4;  // rows whose sums are in flight at once
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps");
  static_assert(CLUSTER == 1 || GROUP == 1, "a cluster splits rows across its blocks, or holds teams of whole rows");
  if (phase == 1) {  // (a grid of whole clusters of at most 256 threads: its shared memory is not the rows')
    simtlab::column_sums<DT, (BLOCK < 256 ? BLOCK : 256), RMS>(partial_w, partial_b, parts, cols, dw, db);
    return;
  }
  extern __shared__ __align__(128) unsigned char stage_bytes[];  // STAGES x (x slice, dy slice), the w slice
  __shared__ __align__(8) simtlab::u64 full[STAGES], got[BUFS];
  __shared__ __align__(16) T heads[STAGES][HEAD];          // a row's first 16 bytes (its shift), CLUSTER > 1
  __shared__ __align__(16) float4 warp_sums[BUFS][WARPS];   // (four rows': see publish)
  __shared__ __align__(16) float4 block_sums[BUFS][CLUSTER];   // each block's sums of a row, CLUSTER > 1
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // The cluster's blocks: CLUSTER column blocks of one team (a long row split), or GROUP teams of
  // one block each (short rows), whose column sums are added before they are written.
  const unsigned rank = simtlab::cluster_ctarank();
  const int cluster = blockIdx.x / (CLUSTER * GROUP), clusters = gridDim.x / (CLUSTER * GROUP);
  const int team = cluster * GROUP + rank / CLUSTER, teams = clusters * GROUP;
  const int base = (rank % CLUSTER) * SLICE, len = min(SLICE, cols - base);  // this block's columns (len > 0)
  const int taken = team < rows ? (rows - 1 - team) / teams + 1 : 0;  // rows this team takes
  auto xs = [&](int s) { return reinterpret_cast<T*>(stage_bytes) + (size_t)s * 2 * SLICE; };
  auto row_start = [&](int i) { return (size_t)(team + (size_t)i * teams) * cols; };
  auto issue = [&](int i, int s) {  // the team's row i into stage s (one thread)
    const unsigned bytes = len * sizeof(T);
    simtlab::mbar_arrive_expect_tx(&full[s], 2 * bytes + (CLUSTER > 1 ? 16 : 0));
    simtlab::bulk_load(xs(s), x + row_start(i) + base, bytes, &full[s]);
    simtlab::bulk_load(xs(s) + SLICE, dy + row_start(i) + base, bytes, &full[s]);
    if constexpr (CLUSTER > 1) simtlab::bulk_load(heads[s], x + row_start(i), 16, &full[s]);
  };
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) simtlab::mbar_init(&full[s], 1);
    for (int k = 0; k < BUFS; ++k) simtlab::mbar_init(&got[k], 1);
    simtlab::mbar_init_fence();
  }
  // (every block's barriers initialised before any block sends it a row's sums)
  if constexpr (CLUSTER > 1) simtlab::cluster_sync(); else __syncthreads();
  if (VEC && tid == 0)
    for (int i = 0; i < min(STAGES, taken); ++i) issue(i, i);
  int col[VPT], n[VPT];  // this thread's VPT groups of four: their columns in the block's slice, values inside it
  T* ws = xs(STAGES);  // the block's slice of w, read each row from here (not held: 64 registers a thread)
  float4 pw[VPT], pb[VPT];
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto weight = [&](int j) {  // (zeros past the row's end: 0 x whatever the memory holds could be NaN)
    return col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(ws + col[j])) : zero;
  };
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    col[j] = (tid + BLOCK * j) * 4;
    n[j] = min(max(len - col[j], 0), 4);
    const float4 wj = simtlab::load_group<DT, VEC>(w + base, col[j], len, 0.0f);
    if (col[j] < len) *reinterpret_cast<Raw*>(ws + col[j]) = Io::pack4(wj.x, wj.y, wj.z, wj.w);
    pw[j] = pb[j] = zero;
  }
  auto values = [&](int s, float4 (&v)[VPT], float4 (&g)[VPT]) {  // x and dy of the row's groups, from the stage
#pragma unroll
    for (int j = 0; j < VPT; ++j) {  // (groups past the row's end read nothing)
      v[j] = col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(xs(s) + col[j])) : zero;
      g[j] = col[j] < len ? Io::unpack4(*reinterpret_cast<const Raw*>(xs(s) + SLICE + col[j])) : zero;
    }
  };
  const int head = min(cols, HEAD);
  const float inv_cols = 1.0f / cols;
  // Row r's sums, this thread's share (its stage waited for): returns them, `shift` set.
  auto own_sums = [&](int r, float& shift) {
    const int s = r % STAGES;
    shift = 0.0f;  // the mean of the row's first 16 bytes: sums about it cancel only as far as the row's
    if constexpr (VEC) {  // mean lies from it
      simtlab::mbar_wait(&full[s], (r / STAGES) & 1);
      if constexpr (!RMS) {
        const T* h = CLUSTER > 1 ? heads[s] : xs(s);
#pragma unroll
        for (int q = 0; q < HEAD / 4; ++q) {  // (shared memory: read as groups, not by Io::load's __ldg)
          const float4 f = Io::unpack4(*reinterpret_cast<const Raw*>(h + 4 * q));
          const float fs[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) shift += 4 * q + e < head ? fs[e] : 0.0f;
        }
      }
    } else {  // (each thread copies its own groups into the stage: both passes then read it alike)
#pragma unroll
      for (int j = 0; j < VPT; ++j)
        if (col[j] < len) {
          const float4 v = simtlab::load_group<DT, false>(x + row_start(r) + base, col[j], len, 0.0f);
          const float4 g = simtlab::load_group<DT, false>(dy + row_start(r) + base, col[j], len, 0.0f);
          *reinterpret_cast<Raw*>(xs(s) + col[j]) = Io::pack4(v.x, v.y, v.z, v.w);
          *reinterpret_cast<Raw*>(xs(s) + SLICE + col[j]) = Io::pack4(g.x, g.y, g.z, g.w);
        }
      if constexpr (!RMS)
#pragma unroll
        for (int e = 0; e < HEAD; ++e) shift += e < head ? Io::load(x + row_start(r) + e) : 0.0f;
    }
    shift /= head;
    float4 sums = zero;  // (sd, sdd, sg, sgd)
    float4 v[VPT], g[VPT];
    values(s, v, g);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const float4 wj = weight(j);
      const float xv[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
      const float gv[4] = {g[j].x * wj.x, g[j].y * wj.y, g[j].z * wj.z, g[j].w * wj.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float d = RMS ? xv[e] : (e < n[j] ? xv[e] - shift : 0.0f);  // (past the end: dy 0, x 0)
        sums.x += d, sums.y += d * d, sums.z += gv[e], sums.w += gv[e] * d;
      }
    }
    return sums;
  };
  // Skewed by a row where three stages fit: row i + 1's sums go out before row i's dx is made, so the
  // exchange's latency (barrier, remote stores) is spent on row i's work (two rows' stages in use).
  constexpr bool SKEW = STAGES >= 3;
  constexpr int LAG = SKEW ? 2 : 1;  // the row whose stage every thread is done with at publish(r): r - LAG
  // Row r's sums out: the warps' into shared memory, then (CLUSTER > 1) the block's to every block of
  // the cluster. Its barrier is also where the stage of row r - LAG is refilled.
  auto publish = [&](int r, float4 sums) {
    // (four buffers: a block may send row r's sums while another, three rows behind at the skew,
    // still reads row r - 3's)
    const int b = r % BUFS;
    if (CLUSTER > 1 && tid == 0) simtlab::mbar_arrive_expect_tx(&got[b], CLUSTER * 16);  // (the blocks' sums)
    sums = warp_sum<RMS>(sums);
    if (lane == 0) warp_sums[b][warp] = sums;
    __syncthreads();
    if (VEC && tid == 0 && r >= LAG && r - LAG + STAGES < taken) issue(r - LAG + STAGES, (r - LAG) % STAGES);
    if constexpr (CLUSTER > 1) {
      if (warp == 0) {
        float4 mine = lane < WARPS ? warp_sums[b][lane] : zero;
        mine = warp_sum<RMS>(mine);
        if (lane < CLUSTER) simtlab::send_f32x4(&block_sums[b][rank], &got[b], lane, mine);
      }
    }
  };
  // Row r's sums in: every block's (CLUSTER > 1, in rank order) or every warp's, in order.
  auto total = [&](int r) {
    const int b = r % BUFS;
    float4 sums;
    if constexpr (CLUSTER > 1) {
      simtlab::mbar_wait(&got[b], (r / BUFS) & 1);
      sums = block_sums[b][0];
#pragma unroll 4
      for (int k = 1; k < CLUSTER; ++k) sums = add4(sums, block_sums[b][k]);
    } else {
      sums = warp_sums[b][0];
#pragma unroll 4  // (not all at once: 16 warps' sums would take 64 registers)
      for (int k = 1; k < WARPS; ++k) sums = add4(sums, warp_sums[b][k]);
    }
    return sums;
  };
  float shift = 0.0f, next_shift = 0.0f;
  if (SKEW && taken > 0) publish(0, own_sums(0, shift));
  for (int i = 0; i < taken; ++i) {
    if constexpr (SKEW) {
      if (i + 1 < taken) publish(i + 1, own_sums(i + 1, next_shift));
    } else {
      publish(i, own_sums(i, shift));
    }
    const float4 sums = total(i);
    float mean, rstd, mg = 0.0f, mgx;
    if constexpr (RMS) {
      mean = 0.0f, rstd = rsqrtf(sums.y * inv_cols + eps), mgx = rstd * sums.w * inv_cols;
    } else {
      const float md = sums.x * inv_cols;
      mean = shift + md, mg = sums.z * inv_cols;
      rstd = rsqrtf(fmaxf(sums.y * inv_cols - md * md, 0.0f) + eps);
      mgx = rstd * (sums.w - md * sums.z) * inv_cols;  // (sum g (x - mean) = sum g d - mean(d) sum g)
    }
    if constexpr (SKEW) shift = next_shift;
    float4 v[VPT], g[VPT];
    values(i % STAGES, v, g);  // (again: from the stage, not held in registers through the sums)
    T* out = dx + row_start(i) + base;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
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
  float* mine_w = reinterpret_cast<float*>(stage_bytes);  // (GROUP > 1: in the stages, once every thread
  float* mine_b = mine_w + SLICE;                          //  has made its last row's dx from them)
  if constexpr (GROUP > 1) __syncthreads();
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
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
