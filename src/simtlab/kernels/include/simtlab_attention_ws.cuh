// The consumer warpgroups' steps that attention rungs 5 and 6 share: their tiles are rung 4's
// (a Q block of 128 rows, K and V tiles of BK keys, 64-column blocks of 128-byte swizzled rows).
#pragma once
#include "simtlab_attention.cuh"
#include "simtlab_hopper.cuh"

namespace simtlab {
namespace attention {

// The producer's copy of the ring's g-th K and V tiles (keys key0 .., head h) into slot g % STAGES,
// each once the slot's last readers let it go: g / STAGES is the slot's fill number, its barriers'
// phase (the first STAGES fills wait for nothing).
template <int CB, int BK, int STAGES>
__device__ __forceinline__ void produce_kv(unsigned char* ks, unsigned char* vs, const TensorMap& mk,
                                           const TensorMap& mv, u64* k_full, u64* k_empty, u64* v_full, u64* v_empty,
                                           int g, int key0, int h) {
  constexpr int TILE = BK * 128;
  constexpr unsigned KV_BYTES = CB * TILE;
  const int s = g % STAGES;
  const unsigned fill = g / STAGES;
  if (g >= STAGES) mbar_wait(&k_empty[s], (fill - 1) & 1);
  mbar_arrive_expect_tx(&k_full[s], KV_BYTES);
#pragma unroll
  for (int c = 0; c < CB; ++c) tma_load_3d(ks + (s * CB + c) * TILE, &mk, &k_full[s], c * 64, key0, h);
  if (g >= STAGES) mbar_wait(&v_empty[s], (fill - 1) & 1);
  mbar_arrive_expect_tx(&v_full[s], KV_BYTES);
#pragma unroll
  for (int c = 0; c < CB; ++c) tma_load_3d(vs + (s * CB + c) * TILE, &mv, &v_full[s], c * 64, key0, h);
}

// S = Q K^T of one tile for this warpgroup's 64 rows (q_at: its rows of the Q block), K read
// K-major: k16 steps of 32 bytes along a 128-byte row, the next 64 columns a block further.
template <int TC, int D, int BQ, int BK>
__device__ __forceinline__ void issue_scores(float (&s)[BK / 2], unsigned q_at, unsigned k_at) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmma<BK, TC, 0, 0>(s, desc_sw128(q_at + (kk / 4) * BQ * 128 + (kk % 4) * 32, 16, 1024),
                        desc_sw128(k_at + (kk / 4) * BK * 128 + (kk % 4) * 32, 16, 1024), kk > 0);
  wgmma_commit();
  wgmma_hold(s);
}

// O += P V of one tile: P from registers (pf), 16 keys a step - 16 rows of 128 bytes of V, whose
// column blocks lie a tile apart.
template <int TC, int D, int BK>
__device__ __forceinline__ void issue_values(float (&acc)[D / 2], const unsigned (&pf)[BK / 16][4], unsigned v_at) {
  wgmma_hold(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) wgmma_rs16<D, TC>(acc, pf[kk], desc_sw128(v_at + kk * 2048, BK * 128, 1024), 1);
  wgmma_commit();
  wgmma_hold(acc);
}

// The probabilities (in place of S) as P V's register A operand: keys kk*16 .. +15 from score tiles
// 2kk and 2kk+1.
template <int DT, int BK>
__device__ __forceinline__ void pack_probabilities(unsigned (&pf)[BK / 16][4], const float (&s)[BK / 2]) {
#pragma unroll
  for (int n = 0; n < BK / 8; ++n) {
    pf[n / 2][(n % 2) * 2] = pack2<DT>(s[4 * n], s[4 * n + 1]);
    pf[n / 2][(n % 2) * 2 + 1] = pack2<DT>(s[4 * n + 2], s[4 * n + 3]);
  }
}

// O's rows scaled by the last softmax's factors (before its P V adds to them).
template <int D>
__device__ __forceinline__ void rescale_rows(float (&acc)[D / 2], const float (&factor)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    acc[4 * j] *= factor[0], acc[4 * j + 1] *= factor[0];
    acc[4 * j + 2] *= factor[1], acc[4 * j + 3] *= factor[1];
  }
}

}  // namespace attention
}  // namespace simtlab
