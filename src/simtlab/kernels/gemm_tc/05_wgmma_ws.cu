// Rung 5 - Hopper, warp-specialised and persistent (sm_90a). What changed from rung 4:
//  * roles: warpgroup 0 is the producer (one thread issues the TMA copies), the
//    other BM/64 warpgroups only multiply. setmaxnreg moves registers from the
//    producer (40) to the consumers (232), which hold the 64xBN accumulators;
//  * no block-wide __syncthreads in the main loop: a slot is handed back by an
//    "empty" mbarrier that each consumer warpgroup arrives on once its wgmma
//    reading the slot has finished, and the producer waits on it - loads and
//    multiplies of different warpgroups run fully decoupled;
//  * persistent grid: one block per SM walks the output tiles (grouped GROUP_M
//    tile rows at a time so neighbouring blocks share A and B panels in L2), and
//    the producer already fetches the next tile's slices while the consumers
//    store the previous tile's results.
// Same tensor maps, swizzle, descriptors and padding rule as rung 4.
// TF32 (DT 2): 32 fp32 inputs a 128-byte row, so a slice is BK = 32 deep; wgmma's tf32 form
// reads both operands K-major, so B comes transposed (B^T, N x K) in one BN-row box.
#include "simtlab_hopper.cuh"

template <int DT, int BM, int BN, int STAGES, int GROUP_M>
__global__ void __launch_bounds__(BM / 64 * 128 + 128, 1)
gemm_tc_wgmma_ws(int M, int N, int K, int batch, const void* __restrict__ map_a, const void* __restrict__ map_b,
                 float* __restrict__ C) {
  constexpr int ES = DT == 2 ? 4 : 2;  // bytes per input element
  constexpr int BK = 128 / ES;          // one 128-byte swizzle row of k per slice
  constexpr int CONSUMERS = BM / 64;
  constexpr int A_BYTES = BM * BK * ES, B_BYTES = BK * BN * ES, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_BLOCK = BK * 128;     // 16-bit B: one 64-column block of the slice
  static_assert(BM % 64 == 0 && CONSUMERS <= 2, "one or two consumer warpgroups of 64 rows");
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N of 64, 128 or 256");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  simtlab::u64* full = reinterpret_cast<simtlab::u64*>(smem + STAGES * STAGE_BYTES);
  simtlab::u64* empty = full + STAGES;

  const int tid = threadIdx.x, wg = tid / 128;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n * batch, KT = (K + BK - 1) / BK;

  // tile t -> (batch z, tile row, tile column): GROUP_M tile rows walked column by column
  auto tile_coords = [&](int t, int& z, int& tm, int& tn) {
    z = t / (tiles_m * tiles_n);
    t -= z * tiles_m * tiles_n;
    const int per_group = GROUP_M * tiles_n, first = (t / per_group) * GROUP_M;
    const int rows = min(GROUP_M, tiles_m - first);
    tm = first + (t % per_group) % rows;
    tn = (t % per_group) / rows;
  };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      simtlab::mbar_init(&full[s], 1);
      simtlab::mbar_init(&empty[s], CONSUMERS);
    }
    simtlab::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // producer
    simtlab::setmaxnreg_dec<40>();
    if (tid == 0) {
      simtlab::tensormap_acquire(map_a);
      simtlab::tensormap_acquire(map_b);
      int it = 0;  // slices issued so far, over all tiles: slot and phase
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int z, tm, tn;
        tile_coords(t, z, tm, tn);
        for (int kt = 0; kt < KT; ++kt, ++it) {
          const int slot = it % STAGES;
          simtlab::mbar_wait(&empty[slot], ((it / STAGES) & 1) ^ 1);  // first round passes at once
          unsigned char* a = smem + slot * STAGE_BYTES;
          simtlab::mbar_arrive_expect_tx(&full[slot], STAGE_BYTES);
          simtlab::tma_load_3d(a, map_a, &full[slot], kt * BK, tm * BM, z);
          if constexpr (DT == 2) {  // B^T: BN rows of K
            simtlab::tma_load_3d(a + A_BYTES, map_b, &full[slot], kt * BK, tn * BN, z);
          } else {
#pragma unroll
            for (int j = 0; j < BN / 64; ++j)
              simtlab::tma_load_3d(a + A_BYTES + j * B_BLOCK, map_b, &full[slot], tn * BN + 64 * j, kt * BK, z);
          }
        }
      }
    }
  } else {  // consumers: warpgroup c multiplies rows 64(c-1) .. 64c-1 of each tile
    simtlab::setmaxnreg_inc<232>();
    const int c = wg - 1, warp = (tid % 128) / 32, lane = tid % 32;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int z, tm, tn;
      tile_coords(t, z, tm, tn);
      float acc[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int slot = it % STAGES;
        simtlab::mbar_wait(&full[slot], (it / STAGES) & 1);
        const unsigned a = simtlab::smem_u32addr(smem + slot * STAGE_BYTES) + c * 64 * 128;
        const unsigned b = simtlab::smem_u32addr(smem + slot * STAGE_BYTES + A_BYTES);
        simtlab::wgmma_fence();
        simtlab::wgmma_slice<BN, DT, BK>(acc, a, b, B_BLOCK);
        simtlab::wgmma_commit();
        simtlab::wgmma_wait<1>();  // the previous slice's multiplies are done: hand its slot back
        if (kt > 0 && tid % 128 == 0) simtlab::mbar_arrive(&empty[(it - 1) % STAGES]);
      }
      simtlab::wgmma_wait<0>();
      if (KT > 0 && tid % 128 == 0) simtlab::mbar_arrive(&empty[(it - 1) % STAGES]);

      simtlab::store_accumulators<BN>(C + (size_t)z * M * N, acc, tm * BM + c * 64 + warp * 16 + lane / 4,
                                      tn * BN + 2 * (lane % 4), M, N);
    }
  }
}
