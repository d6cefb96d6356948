// Rung 6 - Hopper, clusters of two blocks sharing an operand by TMA multicast, and an epilogue
// through shared memory with TMA stores (sm_90a). What changed from rung 5:
//  * a cluster's two blocks compute neighbouring tiles that need the same slice of one operand
//    (stacked along M, CM 2: B); each loads its own slice of the other operand and half of the
//    shared one, multicast into both: a third less L2 traffic a slice;
//  * the consumers write each 64-row piece of their accumulators into a swizzled staging buffer
//    and the copy engine stores it (EPI 2: a store warp issues the stores; EPI 3: the last KEEP
//    pieces wait in registers and leave during the next tile's first slices), so no warpgroup
//    waits for global memory and half the store drain overlaps the multiplies;
//  * C in fp32, fp16 or bf16 (OUT), A and B row-major or transposed views (TA, TB), and the
//    tensor maps as __grid_constant__ parameters: a launch is one driver call (CUDA graphs).
//  (SPLIT, for the fp32 ladder's rung 11: K walked three times over TF32 parts, sums promoted.)
// What it should buy: cuBLAS's speed at 4096^3 and above. Every knob's measured outcome, and the
// ones tried and removed: docs/design/gemm_tc.md.
#include "simtlab_hopper.cuh"
#include "simtlab_tf32.cuh"

// Built with -DSIMTLAB_TIMELINE (benchmarks/rung6_timeline.py), each warpgroup's first thread
// records per tile: SM clock at the tile's start, cycles spent waiting on the pipeline's barriers,
// clock when its last slice is issued (producer) or multiplied (consumers), clock at the tile's
// end (after the epilogue), and the epilogue's (EPI 1) cycles in its four steps: waiting for
// earlier stores to read their staging buffer, the barrier before writing, writing (and the
// proxy fence), the barrier after; and the global timer (ns, the same on every SM) when the
// epilogue starts and ends, to see how many SMs store at once. Ordinary builds compile none of it.
#ifdef SIMTLAB_TIMELINE
#define SIMTLAB_TL(...) __VA_ARGS__
constexpr int TL_TILES = 64;
constexpr int TL_FIELDS = 10;
__device__ unsigned long long simtlab_timeline[264 * 3 * TL_TILES * TL_FIELDS];  // [block][warpgroup][tile][field]
__device__ __forceinline__ long long tl_globaltimer() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void tl_record(int wg, int tile, long long t0, long long waited, long long t1, long long t2,
                                          const long long (&epi)[4], long long g1, long long g2) {
  if (tile >= TL_TILES || blockIdx.x >= 264) return;
  unsigned long long* p = simtlab_timeline + ((blockIdx.x * 3 + wg) * TL_TILES + tile) * TL_FIELDS;
  p[0] = t0, p[1] = waited, p[2] = t1, p[3] = t2;
  for (int i = 0; i < 4; ++i) p[4 + i] = epi[i];
  p[8] = g1, p[9] = g2;
}
// (after step i of the epilogue: its cycles since the last mark)
#define SIMTLAB_TL_MARK(i) { const long long now_ = clock64(); epi[i] += now_ - mark_; mark_ = now_; }
// a barrier wait, its cycles added to `waited`
#define SIMTLAB_TL_WAIT(...) { const long long w_ = clock64(); __VA_ARGS__; waited += clock64() - w_; }
#else
#define SIMTLAB_TL(...)
#define SIMTLAB_TL_MARK(i)
#define SIMTLAB_TL_WAIT(...) __VA_ARGS__;
#endif

// SK 1: the cluster tiles walked whole - all but a partial last round's (`rest`)
__device__ __forceinline__ int simtlab_whole_tiles(int work, int clusters) { return work - work % clusters; }
// f(u, kb, ke, k) for each unit of a cluster's work, in order: cluster tile u, its slices [kb, ke)
// of KT, chunk k of them. Whole tiles round robin; with SK and `parts` > 1, the tiles of the last,
// partial round each cut into `parts` chunks, dealt out chunk by chunk after them (below).
template <int SK, class F>
__device__ __forceinline__ void simtlab_units(int cluster, int clusters, int work, int KT, int parts, const F& f) {
  if constexpr (!SK) {
    for (int u = cluster; u < work; u += clusters) f(u, 0, KT, 0);
  } else {  // (one loop, so the body is compiled once: two copies of it held the sums in other registers)
    const int rest = parts > 1 ? work - simtlab_whole_tiles(work, clusters) : 0, whole = work - rest;
    for (int j = cluster; j < whole + rest * parts; j += clusters) {
      int u = j, kb = 0, ke = KT, k = 0;
      if (j >= whole) {
        k = (j - whole) / rest;
        u = j - k * rest;
        kb = (int)((long long)k * KT / parts), ke = (int)((long long)(k + 1) * KT / parts);
      }
      f(u, kb, ke, k);
    }
  }
}

template <int DT, int BM, int BN, int STAGES, int GROUP_M, int CM, int CN, int EPI, int KEEP_, int OUT, int WIDE, int LEAN,
          int TA, int TB, int SPLIT = 0, int SK = 0, int AREG = 0>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(BM / 64 * 128 + 128, 1)
gemm_tc_wgmma_cluster(int M, int N, int K, int batch, const __grid_constant__ simtlab::TensorMap map_a,
                      const __grid_constant__ simtlab::TensorMap map_b, const __grid_constant__ simtlab::TensorMap map_c,
                      float* __restrict__ C, const __grid_constant__ simtlab::TensorMap map_a2,
                      const __grid_constant__ simtlab::TensorMap map_b2, float alpha, float beta,
                      const int* __restrict__ scale, float* __restrict__ partials, int* __restrict__ flags,
                      int parts) {
  constexpr int ES = DT == 2 ? 4 : 2;  // bytes per input element
  constexpr int BK = 128 / ES;          // one 128-byte swizzle row of k per slice
  constexpr int CONSUMERS = BM / 64, WG_ROWS = 64;  // consumer warpgroups, 64 rows each
  constexpr int CS = CM * CN;           // blocks per cluster
  // blocks whose slots a block's copies fill, itself included: its tile row (A) and column (B) of
  // the cluster - all of a cluster of 2, three of a 2x2 (the diagonal block shares nothing)
  constexpr int PEERS = CM + CN - 1;
  constexpr int A_BYTES = BM * BK * ES, B_BYTES = BK * BN * ES, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_BLOCK = BK * 128;     // MN-major operand (16-bit B, or A with TA 1): one 64-wide block of the slice
  // K-major B (B^T rows): TF32 always (the host transposes B), 16-bit B when it is a transposed view
  constexpr bool B_KMAJOR = DT == 2 || TB == 1;
  static_assert(TA == 0 || TA == 1, "TA: 0 A row-major (K contiguous), 1 A a transposed view (M contiguous)");
  static_assert(TB == 0 || TB == 1, "TB: 0 B row-major (N contiguous), 1 B a transposed view (K contiguous)");
  static_assert(DT < 2 || (TA == 0 && TB == 0), "TF32 takes row-major operands (wgmma's tf32 form has no transposes)");
  static_assert(TA == 0 || (BM / 64) % CN == 0, "A^T's 64-row blocks split evenly over the cluster");
  // EPI 1-3: a piece is 64 rows of one 128-byte swizzle row each: 32 fp32 columns, or 64 of a
  // 16-bit C (OUT 1, 2; WIDE 1) - half as many pieces, hand-overs and stores a tile, in the same
  // 8 KiB buffers (WIDE 0: 32 16-bit columns, 64-byte rows in the 64-byte swizzle, half a buffer)
  static_assert(WIDE == 0 || WIDE == 1, "WIDE: 16-bit C in 64x32 (0) or 64x64 (1) pieces");
  constexpr int PIECE_BYTES = 64 * 128, PW = OUT && WIDE ? 64 : 32, VP = PW / 2;  // columns, values a thread
  static_assert(OUT >= 0 && OUT <= 2, "OUT: 0 fp32, 1 fp16, 2 bf16");
  static_assert(LEAN == 0 || LEAN == 1, "LEAN: 0 slot, phase and descriptors worked out each slice, 1 stepped");
  static_assert(OUT == 0 || EPI >= 1, "16-bit C (OUT 1, 2) leaves through the staging buffers: EPI 1-3");
  constexpr int BUFS = 2;  // staging buffers per consumer warpgroup (4 left the main loop only 3 stages)
  constexpr int EPI_BYTES = EPI ? CONSUMERS * BUFS * PIECE_BYTES : 0;
  static_assert(BM == 64 || BM == 128, "64 or 128 rows: one or two consumer warpgroups");
  static_assert(EPI >= 0 && EPI <= 3, "EPI 0 (stores from registers), 1 (staging, TMA stores), 2 (... issued by a store "
                                      "warp) or 3 (... the last KEEP of a tile's pieces during the next tile)");
  // EPI 2, 3: "the piece in buffer b is written" is a named barrier between a consumer warpgroup
  // (128 threads) and the store warp (32); "buffer b has been read by its store" an mbarrier
  // (freed[]: named barriers run out at 16)
  constexpr int PIECES = BN / PW;  // pieces a consumer warpgroup stores a tile
  // KEEP_ counts 16-value (64x32) blocks of registers: a 16-bit C's pieces are kept in pairs of them
  // (SK 1: at most 3 - the hand-over of a tile's partial sums needs the registers of a fourth)
  constexpr int KEEP_SK = SK && KEEP_ > 3 ? 3 : KEEP_;
  constexpr int KEEP = EPI != 3 ? 0 : KEEP_SK * 16 / VP < PIECES ? KEEP_SK * 16 / VP : PIECES;  // (small tiles: all)
  static_assert(KEEP_ >= 0 && BN / 2 + VP * KEEP <= 208, "KEEP: registers beside the accumulators");
  // Registers a thread after setmaxnreg: the producer warpgroup needs 40 for the timeline's
  // stamps (SIMTLAB_TIMELINE) but fits in 24 without them; 128 x 24 + 256 x 240 (or 40 and
  // 232) is what the block was given at launch (384 x 168). Only keeping more than 4 pieces
  // needs the 240 (and its instrumented build spills a few stamps).
  constexpr int PRODUCER_REGS = VP * KEEP > 64 ? 24 : 40, CONSUMER_REGS = VP * KEEP > 64 ? 240 : 232;
  auto bar_written = [](int c, int b) { return 3 + BUFS * c + b; };
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N of 64, 128 or 256");
  static_assert((CM == 1 || CM == 2) && (CN == 1 || CN == 2), "clusters of 1, 2 (along M or N) or 2x2 blocks");
  static_assert(DT == 2 ? (BN / CM) % 8 == 0 : (BN / 64) % CM == 0, "B's slice splits evenly over the cluster");
  static_assert((BM / CN) % 8 == 0, "A's slice splits evenly over the cluster");
  extern __shared__ unsigned char smem_raw[];
  // (the same offset in every block of a cluster: all blocks run this code on equal dynamic shared memory)
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  unsigned char* staging = smem + STAGES * STAGE_BYTES;  // 1024-aligned: STAGE_BYTES is a multiple of 1 KiB
  auto buffer = [&](int c, int b) { return staging + (c * BUFS + b) * PIECE_BYTES; };  // consumer c's b-th
  simtlab::u64* full = reinterpret_cast<simtlab::u64*>(staging + EPI_BYTES);
  simtlab::u64* empty = full + STAGES;
  simtlab::u64* freed = empty + STAGES;  // [CONSUMERS][BUFS], EPI 2, 3

  const int tid = threadIdx.x, wg = tid / 128;

  // cluster tile u -> (batch z, this block's tile row and column): GROUP_M tile rows walked column
  // by column, as rung 5, in units of cluster tiles (CM x CN tiles). Worked out per tile, from
  // the kernel arguments, rather than kept live through the producer's 40-register budget.
  // A block's place in its cluster: rank = rm + CM * rn, rm its tile row, rn its tile column
  // within the cluster tile. Blocks with the same rm share A slices, those with the same rn B.
  auto place = [](int& rm, int& rn) {
    const int rank = CS > 1 ? (int)simtlab::cluster_ctarank() : 0;
    rm = CS == 4 ? rank % 2 : CM > 1 ? rank : 0;  // (clusters of 2: the rank itself, 0 or 1)
    rn = CS == 4 ? rank / 2 : CN > 1 ? rank : 0;
  };
  auto tile_coords = [&](int u, int& z, int& tm, int& tn) {
    constexpr int G = GROUP_M / CM > 0 ? GROUP_M / CM : 1;
    int rm, rn;
    place(rm, rn);
    const int pairs_m = ((M + BM - 1) / BM + CM - 1) / CM, pairs_n = ((N + BN - 1) / BN + CN - 1) / CN;
    z = u / (pairs_m * pairs_n);
    u -= z * pairs_m * pairs_n;
    const int per_group = G * pairs_n, first = (u / per_group) * G;
    const int rows = min(G, pairs_m - first);
    // (past the matrix when the tile count is odd: zeros in, nothing stored)
    tm = (first + (u % per_group) % rows) * CM + rm;
    tn = (u % per_group) / rows * CN + rn;
  };
  auto work = [&]() {
    return ((M + BM - 1) / BM + CM - 1) / CM * (((N + BN - 1) / BN + CN - 1) / CN) * batch;
  };
  const int cluster = blockIdx.x / CS, clusters = gridDim.x / CS;
  // SPLIT >= 1 (3xTF32, the fp32 ladder's rung 11): K is walked three times - A's big parts times
  // B's small parts (map_a, map_b2), A's small times B's big (map_a2, map_b), then big times big -
  // the small products summed first; alpha and beta in the epilogue. The tensor cores add into
  // their fp32 accumulators with truncation, an error that grows with K: at the end of a window
  // the accumulators are added (rounded to nearest) into a second set and the tensor cores start
  // afresh. Windows are SPLIT slices in the big x big pass; in the two small passes, whose sums
  // lie ~2^-12 under the product and whose truncation is as far under SGEMM's rounding, they are
  // SMALL_WINDOW slices and the last ends where big x big begins - a third of the waits.
  // AREG 1: A comes in as fp32 (map_a: the caller's A itself, no pre-pass for it) and each pass
  // splits the part it needs in registers - wgmma's tf32 form takes A from registers. A thread's
  // fragment values for a slice are 8 consecutive floats of each of its two rows (B's parts are
  // laid out in that k order: simtlab::slice_row_of), two conflict-free 16-byte loads a row;
  // rows of A the rescaling pass gave an exponent are scaled by it as they are split.
  static_assert(AREG == 0 || (SPLIT && LEAN && BK == 32), "AREG: 3xTF32 (SPLIT) with LEAN bookkeeping");
  static_assert(SPLIT >= 0 && SPLIT <= 8, "SPLIT: 0 one pass; 1-8 3xTF32, promoting every SPLIT slices of big x big");
  static_assert(SPLIT == 0 || ((DT == 2 || (DT == 0 && TA == 0 && TB == 1)) && OUT == 0),
                "split products: TF32 parts (DT 2), or fp16 parts (DT 0, rung 13: B^T's K-major copy), fp32 out");
  static_assert(DT == 2 || (SK == 0 && AREG == 0), "rung 13 (fp16 parts): whole tiles, both operands from the split");
  // rung 13's small parts are stored times 2^11 (kept in fp16's normal range): their windows' sums
  // come back down by 2^-11 as they are promoted (exact: a power of two)
  constexpr float SMALL_SCALE = DT == 2 ? 1.0f : 1.0f / 2048.0f;
  constexpr int SMALL_WINDOW = DT == 2 ? 16 : 8;  // (512 k either way)
  const int KP = (K + BK - 1) / BK;  // slices of one pass over K
  const int KT = SPLIT ? 3 * KP : KP;
  // SK 1 (split-K over the last round): where the tiles leave a partial last round of `rest` on
  // the clusters, each of those is cut into `parts` chunks of its slices (the host picks the count
  // that ends soonest, counting each chunk's hand-over) and the rest x parts units are dealt out
  // round robin, chunk by chunk: the clusters running at once work at the same depth of tiles
  // that share operand panels, as whole tiles do, so L2 serves them together (contiguous shares
  // of slices, stream-K proper, started each cluster at another depth and ran 11-27% slower:
  // docs/design/gemm.md). A chunk's sums go to `partials`, then a flag; the last chunk's unit
  // waits for the others' flags, adds their sums and stores the tile.
  static_assert(SK == 0 || SK == 1, "SK: 0 whole tiles, round robin; 1 the last round's tiles in chunks of K");
  // (SPLIT: slice kt closes a window - its sums go into the second set after it)
  auto window_end = [&](int kt) {
    if (kt >= 2 * KP) return (kt - 2 * KP) % (SPLIT ? SPLIT : 1) == (SPLIT ? SPLIT : 1) - 1;
    return kt == 2 * KP - 1 || kt % SMALL_WINDOW == SMALL_WINDOW - 1;
  };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      simtlab::mbar_init(&full[s], 1);
      simtlab::mbar_init(&empty[s], CONSUMERS * PEERS);  // the consumers of every block sharing a slice with it
    }
    if constexpr (EPI >= 2)
#pragma unroll
      for (int b = 0; b < CONSUMERS * BUFS; ++b) simtlab::mbar_init(&freed[b], 1);  // the store warp's lane 0
    simtlab::mbar_init_fence();
  }
  if constexpr (CS > 1)
    simtlab::cluster_sync();  // no block may signal a peer's barrier before the peer initialised it
  else
    __syncthreads();

  if (wg == 0) {  // producer
    simtlab::setmaxnreg_dec<PRODUCER_REGS>();
    if (EPI >= 2 && tid / 32 == 1) {
      // The store warp: for each piece the consumers have written, one TMA store, so the
      // consumers never wait for a store to be issued; a buffer is handed back once the store
      // issued after its own has been issued and it has been read (one store still in flight).
      const int lane = tid % 32;
      if (lane == 0) simtlab::tensormap_prefetch(map_c);
      int g = 0, prev_c = -1, prev_g = 0;  // g: pieces per consumer so far
      simtlab_units<SK>(cluster, clusters, work(), KT, parts, [&](int u, int, int ke, int) {
        if (ke < KT) return;  // (a chunk before a tile's last stores nothing)
        int z, tm, tn;
        tile_coords(u, z, tm, tn);
        for (int p = 0; p < PIECES; ++p, ++g)
          for (int c = 0; c < CONSUMERS; ++c) {
            simtlab::named_sync(bar_written(c, g % BUFS), 160);
            if (lane == 0) {
              simtlab::tma_store_3d(&map_c, buffer(c, g % BUFS), tn * BN + PW * p, tm * BM + c * WG_ROWS, z);
              simtlab::bulk_commit();
              if (prev_c >= 0) {  // the previous store has read its buffer: hand it back
                simtlab::bulk_wait_read<1>();
                simtlab::mbar_arrive(&freed[prev_c * BUFS + prev_g % BUFS]);
              }
            }
            __syncwarp();  // (the next bar.sync is warp-aligned)
            prev_c = c, prev_g = g;
          }
      });
      if (lane == 0) simtlab::bulk_wait<0>();
    }
    if (tid == 0) {
      simtlab::tensormap_prefetch(map_a);
      simtlab::tensormap_prefetch(map_b);
      if constexpr (SPLIT) {
        simtlab::tensormap_prefetch(map_a2);
        simtlab::tensormap_prefetch(map_b2);
      }
      int rm, rn;
      place(rm, rn);
      // the blocks an A slice goes to (this tile row: rm + CM * j) and a B slice (this column)
      // (clusters of 2: both blocks)
      const unsigned short a_mask = CS == 4 ? 5 << rm : 3, b_mask = CS == 4 ? 3 << (2 * rn) : 3;
      int it = 0;  // slices issued so far, over all tiles: slot and phase (LEAN 0)
      simtlab::Ring<STAGES> ring;  // (LEAN 1)
      SIMTLAB_TL(int tile = 0;)
      simtlab_units<SK>(cluster, clusters, work(), KT, parts, [&](int u, int kb, int ke, int) {
        int z, tm, tn;
        tile_coords(u, z, tm, tn);
        SIMTLAB_TL(long long t0 = clock64(), waited = 0;)
        const void* pa = &map_a;
        const void* pb = SPLIT ? (const void*)&map_b2 : (const void*)&map_b;
        int ks = kb;
        if constexpr (SPLIT && SK) {  // (a chunk may start in the second or third pass)
          if (ks >= KP) ks -= KP, pa = AREG ? &map_a : &map_a2, pb = &map_b;
          if (ks >= KP) ks -= KP, pa = &map_a;
        }
        for (int kt = kb; kt < ke; ++kt, ++it, ring.advance()) {
          if (SPLIT && ks == KP) {  // (the next pass: A's small parts with B's big, then big with big)
            ks = 0;
            pa = !AREG && pb == &map_b2 ? (const void*)&map_a2 : (const void*)&map_a;
            pb = &map_b;
          }
          const int slot = LEAN ? (int)ring.slot : it % STAGES;
          const unsigned parity = LEAN ? ring.phase : (it / STAGES) & 1;
          SIMTLAB_TL_WAIT(simtlab::mbar_wait(&empty[slot], parity ^ 1))  // first round passes at once
          unsigned char* a = smem + slot * STAGE_BYTES;
          const int k0 = (SPLIT ? ks++ : kt) * BK;
          simtlab::mbar_arrive_expect_tx(&full[slot], STAGE_BYTES);  // every block's share of A and B
          if constexpr (TA == 1) {  // A^T: 64-row blocks of m, BK rows of k each; this block's share of them
            constexpr int BLOCKS = BM / 64 / CN;
#pragma unroll
            for (int i = 0; i < BLOCKS; ++i) {
              const int j = rn * BLOCKS + i;
              if constexpr (CN > 1)
                simtlab::tma_load_3d_multicast(a + j * B_BLOCK, pa, &full[slot], tm * BM + 64 * j, k0, z,
                                               a_mask);
              else
                simtlab::tma_load_3d(a + j * B_BLOCK, pa, &full[slot], tm * BM + 64 * j, k0, z);
            }
          } else if constexpr (CN > 1) {  // A shared: this block's BM/2 rows, multicast along its tile row
            constexpr int ROWS = BM / CN;
            simtlab::tma_load_3d_multicast(a + rn * ROWS * 128, pa, &full[slot], k0, tm * BM + rn * ROWS, z,
                                           a_mask);
          } else {
            simtlab::tma_load_3d(a, pa, &full[slot], k0, tm * BM, z);
          }
          if constexpr (B_KMAJOR) {  // B^T: this block's BN/CM of the tile's BN rows
            constexpr int ROWS = BN / CM;
            unsigned char* dst = a + A_BYTES + rm * ROWS * 128;
            if constexpr (CM > 1)
              simtlab::tma_load_3d_multicast(dst, pb, &full[slot], k0, tn * BN + rm * ROWS, z, b_mask);
            else
              simtlab::tma_load_3d(dst, pb, &full[slot], k0, tn * BN, z);
          } else {
            constexpr int BLOCKS = BN / 64 / CM;  // this block's 64-column blocks of B
#pragma unroll
            for (int i = 0; i < BLOCKS; ++i) {
              const int j = rm * BLOCKS + i;
              if constexpr (CM > 1)
                simtlab::tma_load_3d_multicast(a + A_BYTES + j * B_BLOCK, pb, &full[slot], tn * BN + 64 * j,
                                               k0, z, b_mask);
              else
                simtlab::tma_load_3d(a + A_BYTES + j * B_BLOCK, pb, &full[slot], tn * BN + 64 * j, k0, z);
            }
          }
        }
        SIMTLAB_TL(tl_record(0, tile++, t0, waited, clock64(), 0, {0, 0, 0, 0}, 0, 0);)
      });
    }
  } else {  // consumers: warpgroup c multiplies rows WG_ROWS*c .. WG_ROWS*(c+1)-1 of each tile
    simtlab::setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1, warp = (tid % 128) / 32, lane = tid % 32;
    const bool leader = tid % 128 == 0;
    // the "empty" barrier arrays of the blocks this one shares slices with (peers; cluster
    // addresses): a slot may be refilled once all their consumers have released it
    unsigned empty_at[PEERS];
    if constexpr (PEERS == CS) {  // a cluster of 1 or 2: every block
#pragma unroll
      for (int r = 0; r < CS; ++r)
        empty_at[r] = CS > 1 ? simtlab::cluster_map(simtlab::smem_u32addr(empty), r) : simtlab::smem_u32addr(empty);
    } else {  // 2x2 (rank = rm + 2 rn): itself, the block beside it in its column (B), in its row (A)
      const unsigned rank = simtlab::cluster_ctarank();
#pragma unroll
      for (int r = 0; r < PEERS; ++r) empty_at[r] = simtlab::cluster_map(simtlab::smem_u32addr(empty), rank ^ r);
    }
    auto release = [&](int slot) {  // this warpgroup is done reading `slot` (in every peer's copy)
#pragma unroll
      for (int r = 0; r < PEERS; ++r) {
        if constexpr (CS > 1)
          simtlab::mbar_arrive_cluster(empty_at[r] + 8 * slot);
        else
          simtlab::mbar_arrive(&empty[slot]);
      }
    };
    if (EPI == 1 && leader) simtlab::tensormap_prefetch(map_c);
    int it = 0;  // slices multiplied so far, over all tiles: slot and phase (LEAN 0)
    // LEAN 1: the ring position stepped, the slot this warpgroup last read kept for its release,
    // and the descriptors' low words of slot 0 worked out once (a slot's are STAGE_BYTES on)
    simtlab::Ring<STAGES> ring;
    unsigned last = 0;
    // (c read back through a warp reduction, whose result ptxas knows is the same in every lane:
    // the descriptors can then live in uniform registers, as wgmma wants them)
    const int c_uniform = LEAN ? (int)__reduce_or_sync(~0u, (unsigned)c) : c;
    // (A^T: warpgroup c's rows start at its first 64-row block, c * WG_ROWS / 64 blocks of B_BLOCK
    // bytes - the same offset as WG_ROWS rows of 128 bytes, since a 16-bit block is 64 x 128 bytes)
    const unsigned a_lo0 = simtlab::desc_sw128_lo(simtlab::smem_u32addr(smem) + c_uniform * WG_ROWS * 128,
                                                  TA ? B_BLOCK : 16);
    const unsigned b_lo0 = simtlab::desc_sw128_lo(simtlab::smem_u32addr(smem + A_BYTES), B_KMAJOR ? 16 : B_BLOCK);
    int piece = 0;  // EPI 2, 3: pieces this warpgroup has handed to the store warp (buffer = piece % BUFS)
    // EPI 3: the last KEEP of a tile's pieces wait in registers (VP values each, beside the 128
    // accumulators, in the 232-240 a consumer thread has after setmaxnreg) and go out one piece a
    // slice during the next tile's first slices, while the tensor cores work: the stores (~30
    // bytes a clock an SM) drain behind the multiplies instead of holding up the epilogue.
    float keep[KEEP > 0 ? VP * KEEP : 1];
    bool kept = false;  // keep[] holds the previous tile's last KEEP pieces
    // one piece (VP values a thread: PW / 8 groups of 8 columns x 2 rows x 2 columns) into a
    // staging buffer, in the 128-byte swizzle the TMA store reads: 16-byte chunk ^ row % 8
    // (fp32: 2 wavefronts a store; 16-bit: 1)
    auto write_piece = [&](unsigned char* buf, const float* v) {
#pragma unroll
      for (int jj = 0; jj < PW / 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = warp * 16 + lane / 4 + 8 * e;
          if constexpr (OUT == 0) {
            const int chunk = (2 * jj + (lane % 4) / 2) ^ (r % 8);
            *reinterpret_cast<float2*>(buf + r * 128 + chunk * 16 + (lane % 2) * 8) =
                make_float2(v[4 * jj + 2 * e], v[4 * jj + 2 * e + 1]);
          } else if constexpr (WIDE) {  // 16-bit C: columns 8 jj .. 8 jj + 7 are 16-byte chunk jj of the row
            *reinterpret_cast<unsigned*>(buf + r * 128 + (jj ^ (r % 8)) * 16 + (lane % 4) * 4) =
                simtlab::pack_half2<OUT>(v[4 * jj + 2 * e], v[4 * jj + 2 * e + 1]);
          } else {  // 16-bit C, WIDE 0: 16-byte chunk jj of a 64-byte row, 64-byte swizzle (chunk ^ (row / 2) % 4)
            *reinterpret_cast<unsigned*>(buf + r * 64 + (jj ^ ((r >> 1) & 3)) * 16 + (lane % 4) * 4) =
                simtlab::pack_half2<OUT>(v[4 * jj + 2 * e], v[4 * jj + 2 * e + 1]);
          }
        }
      simtlab::fence_async_smem();  // (before the copy engine, another proxy, reads it)
    };
    // EPI 2, 3: a piece into the next staging buffer once the store warp has freed it (its
    // (piece / BUFS)-th release), then tell the store warp and go on
    auto hand_over = [&](const float* v) {
      const int b = piece % BUFS;
      if (piece >= BUFS) simtlab::mbar_wait(&freed[c * BUFS + b], (piece / BUFS - 1) & 1);
      write_piece(buffer(c, b), v);
      simtlab::named_arrive(bar_written(c, b), 160);
      ++piece;
    };
    SIMTLAB_TL(int tile = 0;)
    // Zeroed once (so nothing undefined is ever read): each tile's first multiply ignores them
    // (scale-d 0), so no tile spends 128 instructions a thread clearing them.
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    float total[SPLIT ? BN / 2 : 1];  // SPLIT: the sums promoted out of the tensor cores' accumulators
#pragma unroll
    for (int i = 0; i < (SPLIT ? BN / 2 : 1); ++i) total[i] = 0.0f;
    simtlab_units<SK>(cluster, clusters, work(), KT, parts, [&](int u, int kb, int ke, int k) {
      SIMTLAB_TL(long long t0 = clock64(), waited = 0;)
      float f0 = 1.0f, f1 = 1.0f;  // AREG: this thread's two rows of A scaled by these as they are split
      // AREG: A's values all plain (no tiny, Inf, NaN or huge one noted): split without guards
      const bool plain = !AREG || scale == nullptr || scale[0] == 0;
      if constexpr (AREG) {
        if (scale != nullptr && (scale[0] & 1)) {
          int z, tm, tn;
          tile_coords(u, z, tm, tn);
          const int r = tm * BM + c * WG_ROWS + warp * 16 + lane / 4;
          if (r < M) f0 = ldexpf(1.0f, -scale[1 + r]);
          if (r + 8 < M) f1 = ldexpf(1.0f, -scale[1 + r + 8]);
        }
      }
      // AREG: A's fragments in two sets of registers, slice by slice in turn, so that one slice's
      // are made while the tensor cores still read the other's
      constexpr int A_STEPS = AREG ? BK / 8 : 1;
      unsigned frag0[A_STEPS][4], frag1[A_STEPS][4];
      auto slice = [&](int kt, unsigned (&a)[A_STEPS][4]) {
        const int slot = LEAN ? (int)ring.slot : it % STAGES;
        SIMTLAB_TL_WAIT(simtlab::mbar_wait(&full[slot], LEAN ? ring.phase : (it / STAGES) & 1))
        // descriptors built once a slice, then stepped by a k step: +32 bytes along a K-major
        // operand's rows (2 in the descriptor's 16-byte units: A, B^T), +16 k rows (2 KiB) of an
        // MN-major one (16-bit B, A^T) - the field cannot carry, shared addresses stay below 256 KiB
        constexpr int STEPS = DT == 2 ? BK / 8 : BK / 16, B_STEP = B_KMAJOR ? 2 : 128, A_STEP = TA ? 128 : 2;
        constexpr int TRANS_B = B_KMAJOR ? 0 : 1;
        const bool fresh = SPLIT && (kt == kb || window_end(kt - 1));  // (SPLIT: the first slice of a window)
        if constexpr (AREG) {
          constexpr unsigned HI = simtlab::desc_sw128_hi(1024);
          const unsigned b_lo = b_lo0 + slot * (STAGE_BYTES / 16);
          const int g = lane / 4, t = lane % 4;
          // chunks 2t and 2t + 1 of rows g and g + 8 of this warp's 16 (128-byte rows, chunk ^ row % 8)
          const unsigned char* row = smem + slot * STAGE_BYTES + (c_uniform * WG_ROWS + warp * 16 + g) * 128;
          const float4 p0 = *reinterpret_cast<const float4*>(row + ((2 * t) ^ g) * 16);
          const float4 q0 = *reinterpret_cast<const float4*>(row + ((2 * t + 1) ^ g) * 16);
          const float4 p1 = *reinterpret_cast<const float4*>(row + 1024 + ((2 * t) ^ g) * 16);
          const float4 q1 = *reinterpret_cast<const float4*>(row + 1024 + ((2 * t + 1) ^ g) * 16);
          const float v0[8] = {p0.x, p0.y, p0.z, p0.w, q0.x, q0.y, q0.z, q0.w};
          const float v1[8] = {p1.x, p1.y, p1.z, p1.w, q1.x, q1.y, q1.z, q1.w};
          // k step s takes floats 2s (column t) and 2s + 1 (column t + 4): a0 a1 rows g, g + 8 at t
          // (the part each pass needs; the guarded forms only where the note pass saw A's special values)
#define SIMTLAB_AREG_FILL(PART, F0, F1)                                      \
  _Pragma("unroll") for (int s = 0; s < STEPS; ++s)                          \
    _Pragma("unroll") for (int j = 0; j < 2; ++j) {                          \
      a[s][2 * j] = __float_as_uint(PART(v0[2 * s + j] F0));                 \
      a[s][2 * j + 1] = __float_as_uint(PART(v1[2 * s + j] F1));             \
    }
          const bool small_pass = kt >= KP && kt < 2 * KP;
          if (plain) {
            if (small_pass) {
              SIMTLAB_AREG_FILL(simtlab::tf32_small_plain, , )
            } else {
              SIMTLAB_AREG_FILL(simtlab::tf32_rna_plain, , )
            }
          } else if (small_pass) {
            SIMTLAB_AREG_FILL(simtlab::tf32_small, * f0, * f1)
          } else {
            SIMTLAB_AREG_FILL(simtlab::tf32_big, * f0, * f1)
          }
#undef SIMTLAB_AREG_FILL
          simtlab::wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < STEPS; ++kk)
            simtlab::wgmma_tf32_rs<BN>(acc, a[kk], simtlab::desc_join(b_lo + B_STEP * kk, HI),
                                       fresh ? kk > 0 : kt > kb || kk > 0);
        } else if constexpr (LEAN) {  // 32-bit steps of the low words; the high words are constants
          constexpr unsigned HI = simtlab::desc_sw128_hi(1024);
          const unsigned a_lo = a_lo0 + slot * (STAGE_BYTES / 16), b_lo = b_lo0 + slot * (STAGE_BYTES / 16);
          simtlab::wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < STEPS; ++kk)
            simtlab::wgmma<BN, DT, TA, TRANS_B>(acc, simtlab::desc_join(a_lo + A_STEP * kk, HI),
                                                simtlab::desc_join(b_lo + B_STEP * kk, HI), fresh ? kk > 0 : kt > kb || kk > 0);
        } else {
          const unsigned a = simtlab::smem_u32addr(smem + slot * STAGE_BYTES) + c * WG_ROWS * 128;
          const unsigned b = simtlab::smem_u32addr(smem + slot * STAGE_BYTES + A_BYTES);
          const simtlab::u64 da = simtlab::desc_sw128(a, TA ? B_BLOCK : 16, 1024);
          const simtlab::u64 db = simtlab::desc_sw128(b, B_KMAJOR ? 16 : B_BLOCK, 1024);
          simtlab::wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < STEPS; ++kk)
            simtlab::wgmma<BN, DT, TA, TRANS_B>(acc, da + A_STEP * kk, db + B_STEP * kk, fresh ? kk > 0 : kt > kb || kk > 0);
        }
        simtlab::wgmma_commit();
        simtlab::wgmma_wait<1>();  // the previous slice's multiplies are done: hand its slot back
        if (kt > kb && leader) release(LEAN ? (int)last : (it - 1) % STAGES);
        last = slot;
        if constexpr (SPLIT) {
          if (window_end(kt) && kt < ke - 1) {  // the window's sums into `total` (the last: below)
            simtlab::wgmma_wait<0>();
            if (DT != 2 && kt < 2 * KP) {
#pragma unroll
              for (int i = 0; i < BN / 2; ++i) total[i] += acc[i] * SMALL_SCALE;
            } else {
#pragma unroll
              for (int i = 0; i < BN / 2; ++i) total[i] += acc[i];
            }
          }
        }
        if constexpr (EPI == 3) {  // kept piece i leaves at slice i + 1, this slice's multiplies in flight
          // (LEAN 1: one test a slice for "a kept piece is due", not one per piece)
          if (!LEAN || (kept && (unsigned)(kt - kb - 1) < (unsigned)KEEP)) {
#pragma unroll
            for (int i = 0; i < KEEP; ++i)
              if (kept && kt - kb == i + 1) hand_over(&keep[VP * i]);
          }
        }
      };
      if constexpr (AREG) {
        for (int kt = kb; kt < ke; kt += 2) {
          slice(kt, frag0);
          ++it, ring.advance();
          if (kt + 1 < ke) {
            slice(kt + 1, frag1);
            ++it, ring.advance();
          }
        }
      } else {
        for (int kt = kb; kt < ke; ++kt, ++it, ring.advance()) slice(kt, frag0);
      }
      simtlab::wgmma_wait<0>();
      if (ke > kb && leader) release(LEAN ? (int)last : (it - 1) % STAGES);
      int z, tm, tn;  // (worked out here, not held through the main loop)
      tile_coords(u, z, tm, tn);
      if constexpr (SPLIT) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] += total[i], total[i] = 0.0f;
      }
      if constexpr (SK) {
        if (kb > 0 || ke < KT) {  // a chunk of a tile of the last round
          // this warpgroup's sums of chunk q < parts - 1: [tile][chunk][block of the cluster][consumer],
          // 16-byte group j of thread i at j * 128 + i (whole lines a store)
          const int first = (u - simtlab_whole_tiles(work(), clusters)) * (parts - 1);
          auto slot = [&](int q) { return ((first + q) * CS + (int)(blockIdx.x % CS)) * CONSUMERS + c; };
          auto sums = [&](int q) { return reinterpret_cast<float4*>(partials) + (size_t)slot(q) * (BN / 8) * 128 + tid % 128; };
          if (ke < KT) {  // not the last chunk: its sums out, then the flag; the tile is the last's to store
            float4* out = sums(k);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
              __stcg(out + j * 128, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
            __threadfence();
            simtlab::named_sync(1 + c, 128);
            if (leader) simtlab::flag_release(flags + slot(k), 1);
            if constexpr (EPI == 3) {  // kept pieces this short unit had no slice for; it keeps none
#pragma unroll
              for (int i = 0; i < KEEP; ++i)
                if (kept && i + 1 >= ke - kb) hand_over(&keep[VP * i]);
              kept = false;
            }
            return;
          }
          // the last chunk (dealt out after the others): their sums, each once its flag is up
          if (leader)
            for (int q = 0; q < parts - 1; ++q)
              while (simtlab::flag_acquire(flags + slot(q)) == 0) {
              }
          simtlab::named_sync(1 + c, 128);
          for (int q = 0; q < parts - 1; ++q) {
            const float4* in = sums(q);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
              const float4 v = __ldcg(in + j * 128);
              acc[4 * j] += v.x, acc[4 * j + 1] += v.y, acc[4 * j + 2] += v.z, acc[4 * j + 3] += v.w;
            }
          }
        }
      }
      if constexpr (SPLIT) {  // C = alpha * A@B + beta * C (C read only where beta != 0, as BLAS does)
        const float* Cz = C + (size_t)z * M * N;
        // (scale[0] & 1: the split scaled A's rows by 2^-scale[1 + r] and B's columns by
        // 2^-scale[1 + M + col] - operands near the smallest normal; undone here, exactly)
        const bool scaled = scale != nullptr && (scale[0] & 1);
#pragma unroll
        for (int jj = 0; jj < BN / 8; ++jj)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int r = tm * BM + c * WG_ROWS + warp * 16 + lane / 4 + 8 * e, col = tn * BN + 8 * jj + 2 * (lane % 4);
            float c0 = 0.0f, c1 = 0.0f;
            if (beta != 0.0f && r < M) {
              if (col < N) c0 = Cz[(size_t)r * N + col];
              if (col + 1 < N) c1 = Cz[(size_t)r * N + col + 1];
            }
            if (scaled && r < M) {
              const int er = scale[1 + r];
              if (col < N) acc[4 * jj + 2 * e] = ldexpf(acc[4 * jj + 2 * e], er + scale[1 + M + col]);
              if (col + 1 < N) acc[4 * jj + 2 * e + 1] = ldexpf(acc[4 * jj + 2 * e + 1], er + scale[1 + M + col + 1]);
            }
            acc[4 * jj + 2 * e] = alpha * acc[4 * jj + 2 * e] + beta * c0;
            acc[4 * jj + 2 * e + 1] = alpha * acc[4 * jj + 2 * e + 1] + beta * c1;
          }
      }
      SIMTLAB_TL(const long long t1 = clock64(), g1 = tl_globaltimer(); long long epi[4] = {0, 0, 0, 0};)
      if constexpr (EPI >= 2) {
        // (EPI 3: first the kept pieces a short main loop had no slice for) this tile's pieces
        // in order; EPI 3 keeps the last KEEP in registers for the next tile's first slices
#pragma unroll
        for (int i = 0; i < KEEP; ++i)
          if (kept && i + 1 >= ke - kb) hand_over(&keep[VP * i]);
#pragma unroll
        for (int p = 0; p < PIECES; ++p) {
          const float* v = &acc[VP * p];
          if (p < PIECES - KEEP) {
            hand_over(v);
          } else {
#pragma unroll
            for (int k = 0; k < VP; ++k) keep[VP * (p - (PIECES - KEEP)) + k] = v[k];
          }
        }
        kept = true;
      } else {
        const int row0 = tm * BM + c * WG_ROWS;  // this warpgroup's first row
        if constexpr (EPI == 1) {  // pieces through two swizzled staging buffers, stored by TMA
#pragma unroll
          for (int q = 0; q < PIECES; ++q) {
            unsigned char* buf = buffer(c, q % BUFS);
            SIMTLAB_TL(long long mark_ = clock64();)
            if (leader) simtlab::bulk_wait_read<BUFS - 1>();  // the store that last read `buf` is done with it
            SIMTLAB_TL_MARK(0)
            simtlab::named_sync(1 + c, 128);
            SIMTLAB_TL_MARK(1)
            write_piece(buf, &acc[VP * q]);
            SIMTLAB_TL_MARK(2)
            simtlab::named_sync(1 + c, 128);
            SIMTLAB_TL_MARK(3)
            if (leader) {
              simtlab::tma_store_3d(&map_c, buf, tn * BN + PW * q, row0, z);
              simtlab::bulk_commit();
            }
          }
        } else {
          simtlab::store_accumulators<BN, SPLIT != 0>(C + (size_t)z * M * N, acc, row0 + warp * 16 + lane / 4,
                                          tn * BN + 2 * (lane % 4), M, N);
        }
      }
      SIMTLAB_TL(if (leader) tl_record(1 + c, tile++, t0, waited, t1, clock64(), epi, g1, tl_globaltimer());)
    });
    if constexpr (EPI == 3) {  // the last tile's kept pieces
#pragma unroll
      for (int i = 0; i < KEEP; ++i)
        if (kept) hand_over(&keep[VP * i]);
    }
    if (EPI == 1 && leader) simtlab::bulk_wait<0>();  // the staging buffers are read before the block ends
  }
  // A peer may still arrive on this block's barriers: no block of the cluster leaves before all are done.
  if constexpr (CS > 1) simtlab::cluster_sync();
}
