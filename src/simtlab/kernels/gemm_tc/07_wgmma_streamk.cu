// Rung 7 - Hopper, stream-K (sm_90a): rung 6's clusters, multicast and TMA-store epilogue, with
// the last waves' work split along K so that every SM finishes at the same time. What changed:
//  * whole tiles leave a ragged last wave: 4096^3 at 128x256 is 256 cluster tiles for 66
//    clusters, 3.88 waves, so for the last quarter of the time 8 clusters are idle (8192^3:
//    15.5 waves). Here all but the last one-plus-a-bit waves stay whole tiles; the K slices of
//    the remaining tiles are dealt out evenly, each cluster a contiguous run of them that may
//    start and end in the middle of a tile;
//  * a tile cut between clusters is summed by the cluster holding its first slices (k = 0):
//    it runs that piece last, while the others run their piece of it first, write the partial
//    accumulators to a global workspace (coalesced, one 16-byte store per 4 values) and raise
//    a flag (release at GPU scope); the finishing warpgroup waits for each flag (acquire),
//    adds the partials and stores the tile as rung 6 does. Every cluster has at most one such
//    leading piece, so the workspace holds one partial tile per block; flags carry the launch's
//    epoch, so they need no clearing between launches.
// All clusters must be resident at once (one block per SM, as many clusters as SMs allow).
#include "gemm_tc/06_wgmma_cluster.cu"

namespace simtlab {
namespace cluster_gemm {

template <int CONSUMERS, int BN>
struct StreamK {
  struct Args {
    float4* partials;
    int* flags;
    int epoch;
  };
  int cluster, clusters, KT;
  int dp;           // cluster tiles done whole (round robin) before the stream-K region
  int whole;        // how many of them this cluster does
  int base, extra;  // stream-K slices per cluster: base, one more for the first `extra`
  int s, e;         // this cluster's stream-K run: slices [s, e) of the region
  int block, cm;
  float4* partials;  // [blocks][CONSUMERS][BN/8][128]: one partial tile per block
  int* flags;        // [blocks][CONSUMERS]: the epoch of the launch whose partial is there
  int epoch;

  __device__ __forceinline__ int start(int c) const { return c * base + min(c, extra); }

  __device__ __forceinline__ StreamK(const Args& a, Shape sh, int cm)
      : cluster(blockIdx.x / cm), clusters(gridDim.x / cm), KT(sh.KT), block(blockIdx.x), cm(cm), partials(a.partials),
        flags(a.flags), epoch(a.epoch) {
    const int work = sh.work;
    // whole tiles for all but the last (one wave + the remainder); all whole when the waves are even
    dp = work % clusters == 0 ? work : max(0, work / clusters - 1) * clusters;
    whole = cluster < dp ? (dp - cluster + clusters - 1) / clusters : 0;
    const int sk = (work - dp) * KT;  // stream-K slices
    base = sk / clusters;
    extra = sk % clusters;
    s = start(cluster);
    e = start(cluster + 1);
  }

  // Unit n of this cluster: whole tiles first, then the stream-K run [s, e).
  __device__ __forceinline__ bool unit(int n, int& u, int& k0, int& k1) const {
    if (n < whole) {
      u = cluster + n * clusters;
      k0 = 0;
      k1 = KT;
      return true;
    }
    const int t = s / KT + (n - whole);  // stream-K tile
    k0 = n == whole ? s % KT : 0;
    k1 = min(KT, e - t * KT);
    u = dp + t;
    return t * KT + k0 < e;
  }

  template <int ACC>
  __device__ __forceinline__ bool finish(int n, float (&acc)[ACC], int c, int t) const {
    static_assert(ACC == BN / 2, "a warpgroup's 64xBN accumulators");
    if (n < whole) return true;
    const int tile = s / KT + (n - whole);
    const int k0 = n == whole ? s % KT : 0;
    if (k0 != 0) {  // a later piece of a tile another cluster finishes: leave the partial sum there
      float4* out = partials + (size_t)(block * CONSUMERS + c) * (BN / 8) * 128 + t;
#pragma unroll
      for (int i = 0; i < BN / 8; ++i)
        out[i * 128] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
      simtlab::named_sync(1 + c, 128);  // the warpgroup's stores come before the flag
      if (t == 0) {
        int* f = flags + block * CONSUMERS + c;
        asm volatile("fence.acq_rel.gpu;\nst.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(f), "r"(epoch) : "memory");
      }
      return false;
    }
    // k = 0: add the later pieces of this tile, from the clusters whose runs start inside it
    const int end = (tile + 1) * KT;
    for (int other = cluster + 1; other < clusters && start(other) < end; ++other) {
      const int b = block + (other - cluster) * cm;  // the same rank in that cluster
      if (t == 0) {
        const int* f = flags + b * CONSUMERS + c;
        int seen;
        do {
          asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(f) : "memory");
        } while (seen != epoch);
      }
      simtlab::named_sync(1 + c, 128);
      const float4* in = partials + (size_t)(b * CONSUMERS + c) * (BN / 8) * 128 + t;
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
        const float4 v = __ldcg(in + i * 128);
        acc[4 * i] += v.x;
        acc[4 * i + 1] += v.y;
        acc[4 * i + 2] += v.z;
        acc[4 * i + 3] += v.w;
      }
    }
    return true;
  }
};

}  // namespace cluster_gemm
}  // namespace simtlab

template <int DT, int BM, int BN, int STAGES, int GROUP_M, int CM, int EPI>
__global__ void __cluster_dims__(CM, 1, 1) __launch_bounds__(BM / 64 * 128 + 128, 1)
gemm_tc_wgmma_streamk(int M, int N, int K, int batch, const void* __restrict__ map_a,
                      const void* __restrict__ map_b, const void* __restrict__ map_c, float* __restrict__ C,
                      float4* __restrict__ partials, int* __restrict__ flags, int epoch) {
  namespace cg = simtlab::cluster_gemm;
  using Schedule = cg::StreamK<BM / 64, BN>;
  cg::gemm<Schedule, DT, BM, BN, STAGES, GROUP_M, CM, EPI>({partials, flags, epoch}, M, N, K, batch, map_a, map_b,
                                                           map_c, C);
}
