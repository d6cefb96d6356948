// Rung 6 - persistent blocks: what changed from rung 5: one block an SM, each walking query blocks
// (items) in a fixed stride instead of one block an item. The producer loads the next item's Q as
// soon as both consumers' last Q K^T of this one is done (a q_empty barrier) and its K and V tiles
// continue the same ring, so the next item's first products wait for nothing while the consumers
// still finish this one's last P V and store its rows; the barriers, the tensor-map prefetch and
// the block's start are paid once an SM. Causal items go longest first across every head (each
// stride round of similar lengths); full ones a head's query blocks together (its K and V shared
// in L2 by the blocks running them).
// What it should buy: short sequences (four tiles an item at 512 keys), where rung 5's prologue and
// epilogue were a quarter of a block's time. Measured: full attention gains where items outnumber SMs
// several times; causal loses (0.81x rung 5): a fixed stride cannot balance items of unequal length.
#include "simtlab_attention_ws.cuh"

template <int DT, int D>
__global__ void __launch_bounds__(384, 1)
attention_persistent(const __grid_constant__ simtlab::TensorMap mq, const __grid_constant__ simtlab::TensorMap mk,
                     const __grid_constant__ simtlab::TensorMap mv, typename simtlab::Io<DT>::T* __restrict__ o,
                     float* __restrict__ lse, int sq, int sk, float scale_log2, int causal, int bh) {
  constexpr int TC = DT == 1 ? 1 : 0;  // (the wgmma helpers' numbering: 0 fp16, 1 bf16)
  constexpr int BQ = 128, BK = 128, CB = D / 64, STAGES = 2;
  constexpr int QBLOCK = BQ * 128, TILE = BK * 128;  // bytes of a 64-column block of the Q tile / a K or V tile
  constexpr unsigned Q_BYTES = CB * QBLOCK, KV_BYTES = CB * TILE;
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  unsigned char* qs = smem;                    // CB blocks of BQ rows
  unsigned char* ks = qs + Q_BYTES;            // STAGES slots of CB blocks of BK rows
  unsigned char* vs = ks + STAGES * KV_BYTES;  // STAGES slots
  __shared__ __align__(8) simtlab::u64 q_full, q_empty, k_full[STAGES], k_empty[STAGES], v_full[STAGES],
      v_empty[STAGES];
  const int tid = threadIdx.x, wg = tid / 128;
  const int blocks = (sq + BQ - 1) / BQ, items = blocks * bh;
  // item i: causal - query block blocks-1-i/bh of head i%bh (the most keys first, every head's);
  // full - query block i%blocks of head i/blocks
  auto item_block = [&](int i) { return causal ? blocks - 1 - i / bh : i % blocks; };
  auto item_head = [&](int i) { return causal ? i % bh : i / blocks; };
  auto item_tiles = [&](int q0) { return ((causal ? min(sk, min(q0 + BQ, sq)) : sk) + BK - 1) / BK; };
  if (tid == 0) {
    simtlab::mbar_init(&q_full, 1), simtlab::mbar_init(&q_empty, 256);  // (every consumer thread)
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      simtlab::mbar_init(&k_full[s], 1), simtlab::mbar_init(&v_full[s], 1);
      simtlab::mbar_init(&k_empty[s], 256), simtlab::mbar_init(&v_empty[s], 256);
    }
    simtlab::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // the producer: one thread issues every copy of every item
    simtlab::setmaxnreg_dec<24>();
    if (tid == 0) {
      simtlab::tensormap_prefetch(mq), simtlab::tensormap_prefetch(mk), simtlab::tensormap_prefetch(mv);
      int g = 0;  // tiles loaded so far: the ring's slot and fill number
      for (int i = blockIdx.x, n = 0; i < items; i += gridDim.x, ++n) {
        const int q0 = item_block(i) * BQ, h = item_head(i), tiles = item_tiles(q0);
        if (n > 0) simtlab::mbar_wait(&q_empty, (n - 1) & 1);  // (the last item's Q K^T all done)
        simtlab::mbar_arrive_expect_tx(&q_full, Q_BYTES);
#pragma unroll
        for (int c = 0; c < CB; ++c) simtlab::tma_load_3d(qs + c * QBLOCK, &mq, &q_full, c * 64, q0, h);
        for (int t = 0; t < tiles; ++t, ++g)  // (g: the ring's tile count, across items)
          simtlab::attention::produce_kv<CB, BK, STAGES>(ks, vs, mk, mv, k_full, k_empty, v_full, v_empty, g, t * BK, h);
      }
    }
    return;
  }

  simtlab::setmaxnreg_inc<240>();
  const int cw = wg - 1, lane = tid % 32, warp = (tid / 32) % 4;  // consumer warpgroup 0 or 1: 64 rows each
  const int g4 = lane / 4, t4 = lane % 4;
  const unsigned q_at = simtlab::smem_u32addr(qs) + cw * 64 * 128;
  const unsigned k_base = simtlab::smem_u32addr(ks), v_base = simtlab::smem_u32addr(vs);
  // The turns (rung 5's ping-pong) run on across items: consumer 1's first arrival gives consumer 0
  // the first turn, and it skips only its very last one (the block's last tile of its last item).
  if (cw == 1) simtlab::named_arrive(1, 256);
  auto my_turn = [&] { simtlab::named_sync(1 + cw, 256); };
  auto your_turn = [&](bool last) {
    if (cw == 0 || !last) simtlab::named_arrive(2 - cw, 256);
  };

  float acc[D / 2];         // O: this warpgroup's 64 rows x D (m64nD)
  float s[BK / 2];          // S of a tile (64 rows x 128 keys), then its probabilities in place
  unsigned pf[BK / 16][4];  // the probabilities as P V's register A operand
  float m[2], l[2], factor[2];
  const bool fold = scale_log2 > 0.0f;

  auto issue_scores = [&](int g) {
    simtlab::attention::issue_scores<TC, D, BQ, BK>(s, q_at, k_base + (g % STAGES) * KV_BYTES);
  };
  auto issue_values = [&](int g) {
    simtlab::attention::issue_values<TC, D, BK>(acc, pf, v_base + (g % STAGES) * KV_BYTES);
  };
  auto softmax = [&](int t, int wrow, int row0) {
    const bool edge = (t + 1) * BK > sk || (causal && (t + 1) * BK - 1 > wrow);
    if (edge)
      fold ? simtlab::attention::softmax_tile<true, true>(s, m, l, factor, scale_log2, row0, t * BK, t4, sk, causal)
           : simtlab::attention::softmax_tile<true, false>(s, m, l, factor, scale_log2, row0, t * BK, t4, sk, causal);
    else
      fold ? simtlab::attention::softmax_tile<false, true>(s, m, l, factor, scale_log2, row0, t * BK, t4, sk, causal)
           : simtlab::attention::softmax_tile<false, false>(s, m, l, factor, scale_log2, row0, t * BK, t4, sk, causal);
  };
  auto pack = [&] { simtlab::attention::pack_probabilities<DT, BK>(pf, s); };
  auto rescale = [&] { simtlab::attention::rescale_rows<D>(acc, factor); };

  int g = 0;  // tiles consumed so far (the producer's count)
  for (int i = blockIdx.x, n = 0; i < items; i += gridDim.x, ++n) {
    const int q0 = item_block(i) * BQ, h = item_head(i), tiles = item_tiles(q0);
    const bool last_item = i + gridDim.x >= items;
    const int wrow = q0 + cw * 64 + warp * 16;  // this warp's first row
    const int row0 = wrow + g4;                 // this thread's rows: row0 and row0 + 8
#pragma unroll
    for (int j = 0; j < D / 2; ++j) acc[j] = 0.0f;
    m[0] = m[1] = -__int_as_float(0x7f800000), l[0] = l[1] = 0.0f;

    simtlab::mbar_wait(&q_full, n & 1);
    simtlab::mbar_wait(&k_full[g % STAGES], (g / STAGES) & 1);
    my_turn();
    issue_scores(g);
    your_turn(last_item && tiles == 1);
    simtlab::wgmma_wait<0>();
    simtlab::wgmma_hold(s);
    simtlab::mbar_arrive(&k_empty[g % STAGES]);
    if (tiles == 1) simtlab::mbar_arrive(&q_empty);  // (this item's last Q K^T is done: Q may be replaced)
    softmax(0, wrow, row0);
    pack();
    for (int t = 1; t < tiles; ++t) {
      const int gt = g + t;
      simtlab::mbar_wait(&k_full[gt % STAGES], (gt / STAGES) & 1);
      my_turn();
      issue_scores(gt);  // (S's registers are free: the last tile's probabilities are packed)
      rescale();         // (by the last softmax's factors, before its P V adds to O)
      simtlab::mbar_wait(&v_full[(gt - 1) % STAGES], ((gt - 1) / STAGES) & 1);
      issue_values(gt - 1);
      your_turn(last_item && t + 1 == tiles);
      simtlab::wgmma_wait<1>();  // S_t done, P V in flight
      simtlab::wgmma_hold(s);
      simtlab::mbar_arrive(&k_empty[gt % STAGES]);
      if (t + 1 == tiles) simtlab::mbar_arrive(&q_empty);
      softmax(t, wrow, row0);
      simtlab::wgmma_wait<0>();
      simtlab::wgmma_hold(acc);
      simtlab::mbar_arrive(&v_empty[(gt - 1) % STAGES]);
      pack();  // (pf is free: the last P V is done)
    }
    const int gl = g + tiles - 1;
    rescale();
    simtlab::mbar_wait(&v_full[gl % STAGES], (gl / STAGES) & 1);
    issue_values(gl);
    simtlab::wgmma_wait<0>();
    simtlab::wgmma_hold(acc);
    simtlab::mbar_arrive(&v_empty[gl % STAGES]);  // (the slot goes on to the next item's tiles)
    simtlab::attention::store_rows<DT, D>([&](int j, int e) { return acc[4 * j + e]; }, l, m, o, lse, h, sq, row0, t4);
    g += tiles;
  }
}
