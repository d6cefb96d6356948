// Rung 5 - warp specialisation: what changed from rung 4: a third warpgroup is the producer - one
// thread issues TMA copies of the Q, K and V tiles (128-byte swizzled, zeros past a head's rows)
// into a ring whose slots are handed over by mbarriers, so no consumer copies or waits at a
// block-wide barrier, and it gives its registers to the two consumer warpgroups (setmaxnreg).
// The consumers take turns at the tensor cores (two named barriers, "ping-pong"): one issues its
// tile's Q K^T and P V while the other runs its softmax. Within a warpgroup, S of the next tile is
// issued before P V of this one, and the next softmax runs while P V is in flight.
// What it should buy: the tensor cores busy through the softmax - FlashAttention-3's schedule.
#include "simtlab_attention_ws.cuh"

template <int DT, int D>
__global__ void __launch_bounds__(384, 1)
attention_ws(const __grid_constant__ simtlab::TensorMap mq, const __grid_constant__ simtlab::TensorMap mk,
             const __grid_constant__ simtlab::TensorMap mv, typename simtlab::Io<DT>::T* __restrict__ o,
             float* __restrict__ lse, int sq, int sk, float scale_log2, int causal) {
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
  __shared__ __align__(8) simtlab::u64 q_full, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
  // (causal: the last query blocks, which see the most keys, start first - the short ones fill the tail)
  const int tid = threadIdx.x, wg = tid / 128, h = blockIdx.y;
  const int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BQ;
  const int last = min(q0 + BQ, sq);  // (one past the block's last row)
  const int tiles = ((causal ? min(sk, last) : sk) + BK - 1) / BK;
  if (tid == 0) {
    simtlab::mbar_init(&q_full, 1);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      simtlab::mbar_init(&k_full[s], 1), simtlab::mbar_init(&v_full[s], 1);
      simtlab::mbar_init(&k_empty[s], 256), simtlab::mbar_init(&v_empty[s], 256);  // (every consumer thread)
    }
    simtlab::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // the producer: one thread issues every copy
    simtlab::setmaxnreg_dec<24>();
    if (tid == 0) {
      simtlab::tensormap_prefetch(mq), simtlab::tensormap_prefetch(mk), simtlab::tensormap_prefetch(mv);
      simtlab::mbar_arrive_expect_tx(&q_full, Q_BYTES);
#pragma unroll
      for (int c = 0; c < CB; ++c) simtlab::tma_load_3d(qs + c * QBLOCK, &mq, &q_full, c * 64, q0, h);
      for (int t = 0; t < tiles; ++t)
        simtlab::attention::produce_kv<CB, BK, STAGES>(ks, vs, mk, mv, k_full, k_empty, v_full, v_empty, t, t * BK, h);
    }
    return;
  }

  simtlab::setmaxnreg_inc<240>();
  const int cw = wg - 1, lane = tid % 32, warp = (tid / 32) % 4;  // consumer warpgroup 0 or 1: 64 rows each
  const int g = lane / 4, t4 = lane % 4;
  const int wrow = q0 + cw * 64 + warp * 16;  // this warp's first row
  const int row0 = wrow + g;                  // this thread's rows: row0 and row0 + 8
  const unsigned q_at = simtlab::smem_u32addr(qs) + cw * 64 * 128;
  const unsigned k_base = simtlab::smem_u32addr(ks), v_base = simtlab::smem_u32addr(vs);
  // The turns: consumer cw waits on barrier 1 + cw, then (its products issued) lets the other go.
  // Consumer 1's first arrival gives consumer 0 the first turn; it skips its last one (the counts
  // then match: no arrival is left waiting when the block ends).
  if (cw == 1) simtlab::named_arrive(1, 256);
  auto my_turn = [&] { simtlab::named_sync(1 + cw, 256); };
  auto your_turn = [&](int t) {
    if (cw == 0 || t + 1 < tiles) simtlab::named_arrive(2 - cw, 256);
  };

  float acc[D / 2];  // O: this warpgroup's 64 rows x D (m64nD)
#pragma unroll
  for (int j = 0; j < D / 2; ++j) acc[j] = 0.0f;
  float s[BK / 2];        // S of a tile (64 rows x 128 keys), then its probabilities in place
  unsigned pf[BK / 16][4];  // the probabilities as P V's register A operand
  float m[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}, l[2] = {0.0f, 0.0f}, factor[2];
  const bool fold = scale_log2 > 0.0f;

  auto issue_scores = [&](int t) {
    simtlab::attention::issue_scores<TC, D, BQ, BK>(s, q_at, k_base + (t % STAGES) * KV_BYTES);
  };
  auto issue_values = [&](int t) {
    simtlab::attention::issue_values<TC, D, BK>(acc, pf, v_base + (t % STAGES) * KV_BYTES);
  };
  auto softmax = [&](int t) {
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

  simtlab::mbar_wait(&q_full, 0);
  simtlab::mbar_wait(&k_full[0], 0);
  my_turn();
  issue_scores(0);
  your_turn(0);
  simtlab::wgmma_wait<0>();
  simtlab::wgmma_hold(s);
  simtlab::mbar_arrive(&k_empty[0]);
  softmax(0);
  pack();
  for (int t = 1; t < tiles; ++t) {
    simtlab::mbar_wait(&k_full[t % STAGES], (t / STAGES) & 1);
    my_turn();
    issue_scores(t);  // (S's registers are free: the last tile's probabilities are packed)
    rescale();        // (by the last softmax's factors, before its P V adds to O)
    simtlab::mbar_wait(&v_full[(t - 1) % STAGES], ((t - 1) / STAGES) & 1);
    issue_values(t - 1);
    your_turn(t);
    simtlab::wgmma_wait<1>();  // S_t done, P V in flight
    simtlab::wgmma_hold(s);
    simtlab::mbar_arrive(&k_empty[t % STAGES]);
    softmax(t);
    simtlab::wgmma_wait<0>();
    simtlab::wgmma_hold(acc);
    simtlab::mbar_arrive(&v_empty[(t - 1) % STAGES]);
    pack();  // (pf is free: the last P V is done)
  }
  rescale();
  simtlab::mbar_wait(&v_full[(tiles - 1) % STAGES], ((tiles - 1) / STAGES) & 1);
  issue_values(tiles - 1);
  simtlab::wgmma_wait<0>();
  simtlab::wgmma_hold(acc);
  simtlab::attention::store_rows<DT, D>([&](int j, int e) { return acc[4 * j + e]; }, l, m, o, lse, h, sq, row0, t4);
}
