// Rung 6 - Hopper, clusters of CM blocks sharing B by TMA multicast, and an epilogue through
// shared memory with TMA stores (sm_90a). What changed from rung 5:
//  * the CM blocks of a cluster compute vertically adjacent tiles (the same B panel): each
//    block loads its own A slice and 1/CM of the B slice, multicast into every block of the
//    cluster - L2-to-SM traffic per slice falls from (BM+BN) to (BM+BN/CM) rows, 48 -> 32 KiB
//    at 128x256 and CM 2. A slot may only be refilled when the consumers of *every* block of
//    the cluster have released it, so they arrive on each block's "empty" barrier (remote
//    arrivals through mapa) and a cluster barrier brackets the kernel;
//  * EPI 1: the consumers write each 64x32 piece of their accumulators into a swizzled staging
//    buffer in shared memory (conflict-free: 2 wavefronts a store) and one thread hands it to
//    the copy engine (cp.async.bulk.tensor store); two buffers per warpgroup, so the next
//    piece is written while the previous one is being copied out, and the warpgroup goes on
//    to its next tile without waiting for global memory. EPI 0 stores from registers as rung 5.
// CM 1, EPI 0 is rung 5's kernel. TF32 (DT 2) as rung 5: B^T rows split between the blocks.
// The body walks "units" (a cluster tile and a range of its K slices) that a schedule hands out:
// whole tiles, round robin over the clusters. (A stream-K schedule over the same body was
// measured slower: benchmarks/NOTES.md.)
#include "simtlab_hopper.cuh"

namespace simtlab {
namespace cluster_gemm {

// Units of work of the cluster tiles (CM tiles stacked) of the whole batch.
struct Shape {
  int work;  // cluster tiles
  int KT;    // K slices per tile
};

template <int DT, int BM, int BN, int CM>
__device__ __forceinline__ Shape shape(int M, int N, int K, int batch) {
  constexpr int BK = 128 / (DT == 2 ? 4 : 2);
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  return {(tiles_m + CM - 1) / CM * tiles_n * batch, (K + BK - 1) / BK};
}

// Data-parallel: cluster tiles cluster, cluster + clusters, ... each over all of K. A schedule is
// built by each role after setmaxnreg (from kernel arguments, which stay in constant memory),
// so none of its state has to live through the producer's 40-register budget.
struct WholeTiles {
  struct Args {};
  int cluster, clusters, work, KT;
  __device__ __forceinline__ WholeTiles(const Args&, Shape sh, int cm)
      : cluster(blockIdx.x / cm), clusters(gridDim.x / cm), work(sh.work), KT(sh.KT) {}
  __device__ __forceinline__ bool unit(int n, int& u, int& k0, int& k1) const {
    u = cluster + n * clusters;
    k0 = 0;
    k1 = KT;
    return u < work;
  }
  // After unit n's multiplies: true when this warpgroup's accumulators are the tile's final
  // values, to be stored (always, for whole tiles).
  template <int ACC>
  __device__ __forceinline__ bool finish(int, float (&)[ACC], int, int) const {
    return true;
  }
};

template <class Schedule, int DT, int BM, int BN, int STAGES, int GROUP_M, int CM, int EPI>
__device__ __forceinline__ void gemm(const typename Schedule::Args& args, int M, int N, int K, int batch,
                                     const void* map_a, const void* map_b, const void* map_c, float* C) {
  constexpr int ES = DT == 2 ? 4 : 2;  // bytes per input element
  constexpr int BK = 128 / ES;          // one 128-byte swizzle row of k per slice
  constexpr int CONSUMERS = BM / 64;
  constexpr int A_BYTES = BM * BK * ES, B_BYTES = BK * BN * ES, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_BLOCK = BK * 128;     // 16-bit B: one 64-column block of the slice
  constexpr int PIECE_BYTES = 64 * 32 * 4;  // EPI 1: 64 rows x 32 fp32 columns = one 128-byte swizzle row a row
  constexpr int EPI_BYTES = EPI ? CONSUMERS * 2 * PIECE_BYTES : 0;
  static_assert(BM % 64 == 0 && CONSUMERS <= 2, "one or two consumer warpgroups of 64 rows");
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N of 64, 128 or 256");
  static_assert(CM == 1 || CM == 2, "clusters of 1 or 2 blocks");
  static_assert(DT == 2 ? (BN / CM) % 8 == 0 : (BN / 64) % CM == 0, "B's slice splits evenly over the cluster");
  extern __shared__ unsigned char smem_raw[];
  // (the same offset in every block of a cluster: all blocks run this code on equal dynamic shared memory)
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  unsigned char* staging = smem + STAGES * STAGE_BYTES;  // 1024-aligned: STAGE_BYTES is a multiple of 1 KiB
  simtlab::u64* full = reinterpret_cast<simtlab::u64*>(staging + EPI_BYTES);
  simtlab::u64* empty = full + STAGES;

  const int tid = threadIdx.x, wg = tid / 128;
  const int rank = CM > 1 ? (int)simtlab::cluster_ctarank() : 0;

  // cluster tile u -> (batch z, this block's tile row, tile column): GROUP_M tile rows walked
  // column by column, as rung 5, in units of cluster tile rows
  auto tile_coords = [&](int u, int& z, int& tm, int& tn) {
    constexpr int G = GROUP_M / CM > 0 ? GROUP_M / CM : 1;
    // (worked out here, per tile, rather than kept live through the role split)
    const int tiles_n = (N + BN - 1) / BN;
    const int pairs_m = ((M + BM - 1) / BM + CM - 1) / CM;  // rows of cluster tiles (CM tiles stacked)
    z = u / (pairs_m * tiles_n);
    u -= z * pairs_m * tiles_n;
    const int per_group = G * tiles_n, first = (u / per_group) * G;
    const int rows = min(G, pairs_m - first);
    tm = (first + (u % per_group) % rows) * CM + rank;  // may be tiles_m when tiles_m is odd: zeros, no stores
    tn = (u % per_group) / rows;
  };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      simtlab::mbar_init(&full[s], 1);
      simtlab::mbar_init(&empty[s], CONSUMERS * CM);  // every consumer of the cluster releases every slot
    }
    simtlab::mbar_init_fence();
  }
  if constexpr (CM > 1)
    simtlab::cluster_sync();  // no block may signal a peer's barrier before the peer initialised it
  else
    __syncthreads();

  if (wg == 0) {  // producer
    simtlab::setmaxnreg_dec<40>();
    if (tid == 0) {
      const Schedule sched(args, shape<DT, BM, BN, CM>(M, N, K, batch), CM);
      simtlab::tensormap_acquire(map_a);
      simtlab::tensormap_acquire(map_b);
      int it = 0;  // slices issued so far, over all units: slot and phase
      int u, k0, k1;
      for (int n = 0; sched.unit(n, u, k0, k1); ++n) {
        int z, tm, tn;
        tile_coords(u, z, tm, tn);
        for (int kt = k0; kt < k1; ++kt, ++it) {
          const int slot = it % STAGES;
          simtlab::mbar_wait(&empty[slot], ((it / STAGES) & 1) ^ 1);  // first round passes at once
          unsigned char* a = smem + slot * STAGE_BYTES;
          simtlab::mbar_arrive_expect_tx(&full[slot], STAGE_BYTES);  // own A + every block's share of B
          simtlab::tma_load_3d(a, map_a, &full[slot], kt * BK, tm * BM, z);
          if constexpr (DT == 2) {  // B^T: this block's BN/CM of the tile's BN rows
            constexpr int ROWS = BN / CM;
            unsigned char* dst = a + A_BYTES + rank * ROWS * 128;
            if constexpr (CM > 1)
              simtlab::tma_load_3d_multicast(dst, map_b, &full[slot], kt * BK, tn * BN + rank * ROWS, z,
                                             (1 << CM) - 1);
            else
              simtlab::tma_load_3d(dst, map_b, &full[slot], kt * BK, tn * BN, z);
          } else {
            constexpr int BLOCKS = BN / 64 / CM;  // this block's 64-column blocks of B
#pragma unroll
            for (int i = 0; i < BLOCKS; ++i) {
              const int j = rank * BLOCKS + i;
              if constexpr (CM > 1)
                simtlab::tma_load_3d_multicast(a + A_BYTES + j * B_BLOCK, map_b, &full[slot], tn * BN + 64 * j,
                                               kt * BK, z, (1 << CM) - 1);
              else
                simtlab::tma_load_3d(a + A_BYTES + j * B_BLOCK, map_b, &full[slot], tn * BN + 64 * j, kt * BK, z);
            }
          }
        }
      }
    }
  } else {  // consumers: warpgroup c multiplies rows 64(c-1) .. 64c-1 of each tile
    simtlab::setmaxnreg_inc<232>();
    const Schedule sched(args, shape<DT, BM, BN, CM>(M, N, K, batch), CM);
    const int c = wg - 1, warp = (tid % 128) / 32, lane = tid % 32;
    const bool leader = tid % 128 == 0;
    unsigned empty_at[CM];  // each block's "empty" barrier array, as cluster addresses
#pragma unroll
    for (int r = 0; r < CM; ++r)
      empty_at[r] = CM > 1 ? simtlab::cluster_map(simtlab::smem_u32addr(empty), r) : simtlab::smem_u32addr(empty);
    auto release = [&](int slot) {  // this warpgroup is done reading `slot` (in every block's copy)
#pragma unroll
      for (int r = 0; r < CM; ++r) {
        if constexpr (CM > 1)
          simtlab::mbar_arrive_cluster(empty_at[r] + 8 * slot);
        else
          simtlab::mbar_arrive(&empty[slot]);
      }
    };
    if (EPI && leader) simtlab::tensormap_acquire(map_c);
    int it = 0;
    int u, k0, k1;
    for (int n = 0; sched.unit(n, u, k0, k1); ++n) {
      int z, tm, tn;
      tile_coords(u, z, tm, tn);
      float acc[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
      for (int kt = k0; kt < k1; ++kt, ++it) {
        const int slot = it % STAGES;
        simtlab::mbar_wait(&full[slot], (it / STAGES) & 1);
        const unsigned a = simtlab::smem_u32addr(smem + slot * STAGE_BYTES) + c * 64 * 128;
        const unsigned b = simtlab::smem_u32addr(smem + slot * STAGE_BYTES + A_BYTES);
        simtlab::wgmma_fence();
        simtlab::wgmma_slice<BN, DT, BK>(acc, a, b, B_BLOCK);
        simtlab::wgmma_commit();
        simtlab::wgmma_wait<1>();  // the previous slice's multiplies are done: hand its slot back
        if (kt > k0 && leader) release((it - 1) % STAGES);
      }
      simtlab::wgmma_wait<0>();
      if (k1 > k0 && leader) release((it - 1) % STAGES);
      if (!sched.finish(n, acc, c, tid % 128)) continue;  // (a partial sum, kept for another block)

      if constexpr (EPI) {  // 64x32 pieces through two swizzled staging buffers, stored by TMA
        unsigned char* mine = staging + c * 2 * PIECE_BYTES;
#pragma unroll
        for (int q = 0; q < BN / 32; ++q) {
          unsigned char* buf = mine + (q % 2) * PIECE_BYTES;
          if (leader) simtlab::bulk_wait_read<1>();  // the store that last read `buf` is done with it
          simtlab::named_sync(1 + c, 128);
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int j = 4 * q + jj, r = warp * 16 + lane / 4 + 8 * h;
              const int chunk = (2 * jj + (lane % 4) / 2) ^ (r % 8);  // 128-byte swizzle: 16-byte chunk ^ row
              *reinterpret_cast<float2*>(buf + r * 128 + chunk * 16 + (lane % 2) * 8) =
                  make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            }
          simtlab::fence_async_smem();
          simtlab::named_sync(1 + c, 128);
          if (leader) {
            simtlab::tma_store_3d(map_c, buf, tn * BN + 32 * q, tm * BM + c * 64, z);
            simtlab::bulk_commit();
          }
        }
      } else {
        float* Ct = C + (size_t)z * M * N;
        const int row = tm * BM + c * 64 + warp * 16 + lane / 4, col = tn * BN + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = row + 8 * h, cc = col + 8 * j;
            if (r < M && cc < N)
              *reinterpret_cast<float2*>(Ct + (size_t)r * N + cc) =
                  make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
          }
      }
    }
    if (EPI && leader) simtlab::bulk_wait<0>();  // the staging buffers are read before the block ends
  }
  // A peer may still arrive on this block's barriers: no block of the cluster leaves before all are done.
  if constexpr (CM > 1) simtlab::cluster_sync();
}

}  // namespace cluster_gemm
}  // namespace simtlab

template <int DT, int BM, int BN, int STAGES, int GROUP_M, int CM, int EPI>
__global__ void __cluster_dims__(CM, 1, 1) __launch_bounds__(BM / 64 * 128 + 128, 1)
gemm_tc_wgmma_cluster(int M, int N, int K, int batch, const void* __restrict__ map_a,
                      const void* __restrict__ map_b, const void* __restrict__ map_c, float* __restrict__ C) {
  namespace cg = simtlab::cluster_gemm;
  cg::gemm<cg::WholeTiles, DT, BM, BN, STAGES, GROUP_M, CM, EPI>({}, M, N, K, batch, map_a, map_b, map_c, C);
}
