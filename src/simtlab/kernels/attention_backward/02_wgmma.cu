// Rung 2 - the backward on Hopper's warpgroup MMAs (sm_90a): what changed from rung 1: all five
// products are wgmma, reading their tiles from 128-byte-swizzled shared memory - rung 1 fed its
// mma.sync from ldmatrix (about one four-matrix load per MMA: the shared-memory bandwidth, not the
// tensor cores, bounded it). A block is two warpgroups and owns 128 keys (64 each); a step of 64
// queries runs in halves of 32: S^T = K Q^T and dP^T = V dO^T are m64n32 accumulators, P^T goes
// from them straight into the register A operand of dV += P^T dO, and dS^T is written swizzled once
// for both dK += dS^T Q and dQ = dS K (A read MN-major), whose fp32 sums take atomics as before.
// Q, dO and the statistics of later steps copy by cp.async into a ring of SLOTS (2 and 3 measured
// alike) while this one computes; the step's statistics are read while its products run, P^T's
// exponentials while the tensor cores make dP^T, and dQ's sums (two-float reductions) go out while
// they make dK.
// What it should buy: the tensor cores' rate instead of ldmatrix's, toward FlashAttention-3's backward.
#include "simtlab_async.cuh"
#include "simtlab_attention_bwd.cuh"
#include "simtlab_hopper.cuh"

template <int DT, int D, int SLOTS>
__global__ void __launch_bounds__(256, 1)
attention_bwd_wgmma(const typename simtlab::Io<DT>::T* __restrict__ q, const typename simtlab::Io<DT>::T* __restrict__ k,
                    const typename simtlab::Io<DT>::T* __restrict__ v,
                    const typename simtlab::Io<DT>::T* __restrict__ dout, const float* __restrict__ stats,
                    float* __restrict__ dqacc, typename simtlab::Io<DT>::T* __restrict__ dk,
                    typename simtlab::Io<DT>::T* __restrict__ dv, int sq, int sk, int sqp, float scale_log2, float scale,
                    int causal) {
  using T = typename simtlab::Io<DT>::T;
  constexpr int TC = DT == 1 ? 1 : 0;  // (the wgmma helpers' numbering: 0 fp16, 1 bf16)
  constexpr int BQ = simtlab::attention::BWD_BQ, BKV = 128, CB = D / 64, DT8 = D / 8;
  constexpr int KBLOCK = BKV * 128, QBLOCK = BQ * 128;  // bytes of a 64-column block of a K / V tile, a Q / dO tile
  constexpr int KV_BYTES = CB * KBLOCK, Q_BYTES = CB * QBLOCK, DS_BYTES = BKV * BQ * 2;
  static_assert(BQ == 64 && (D == 64 || D == 128), "64-query steps; head dims 64 and 128");
  static_assert(SLOTS == 2 || SLOTS == 3, "a ring of Q, dO and statistics one or two steps ahead");
  extern __shared__ unsigned char smem_raw[];
  // (1024-byte aligned: the swizzle pattern repeats every 8 rows of 128 bytes)
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  unsigned char* ks = smem;                      // CB blocks of BKV rows
  unsigned char* vs = ks + KV_BYTES;
  unsigned char* qs = vs + KV_BYTES;             // SLOTS slots of CB blocks of BQ rows
  unsigned char* dos = qs + SLOTS * Q_BYTES;     // SLOTS slots
  unsigned char* dst = dos + SLOTS * Q_BYTES;    // dS^T: BKV key rows of BQ queries (128 bytes), swizzled
  float* st = reinterpret_cast<float*>(dst + DS_BYTES);  // SLOTS slots of the step's LSE (log2) and D
  const long long h = blockIdx.y;
  const int j0 = blockIdx.x * BKV, tid = threadIdx.x, lane = tid % 32, wg = tid / 128, warp = (tid / 32) % 4;
  const int g = lane / 4, t4 = lane % 4;
  const int key0 = wg * 64 + warp * 16 + g;  // this thread's keys in the block: key0 and key0 + 8
  const T* qh = q + h * sq * (long long)D;
  const T* doh = dout + h * sq * (long long)D;
  const float* sth = stats + 2 * h * sqp;
  float* dqh = dqacc + h * sqp * (long long)D;

  auto load_tile = [&](unsigned char* to, const T* src, int r0, int n, int rows) {
    simtlab::attention::load_swizzled_rows<D, 256>(to, src, r0, n, rows, tid);
  };
  auto load_step = [&](int ib, int slot) {  // Q, dO and the statistics of query block ib
    load_tile(qs + slot * Q_BYTES, qh, ib * BQ, sq, BQ);
    load_tile(dos + slot * Q_BYTES, doh, ib * BQ, sq, BQ);
    if (tid < 2 * BQ / 4) {
      const int which = tid / (BQ / 4), c = tid % (BQ / 4);
      simtlab::cp_async16(st + slot * 2 * BQ + which * BQ + 4 * c, sth + which * sqp + ib * BQ + 4 * c);
    }
  };
  const int steps = (sq + BQ - 1) / BQ;
  const int first = causal ? j0 / BQ : 0;  // (causal: earlier queries see none of these keys)
  load_tile(ks, k + h * sk * (long long)D, j0, sk, BKV);
  load_tile(vs, v + h * sk * (long long)D, j0, sk, BKV);
  if (first < steps) load_step(first, 0);
  simtlab::cp_async_commit();
  if (SLOTS == 3) {
    if (first + 1 < steps) load_step(first + 1, 1);
    simtlab::cp_async_commit();
  }

  float dva[D / 2], dka[D / 2];  // this warpgroup's 64 keys x D of dV and dK (m64nD)
#pragma unroll
  for (int j = 0; j < D / 2; ++j) dva[j] = dka[j] = 0.0f;
  const unsigned k_at = simtlab::smem_u32addr(ks), v_at = simtlab::smem_u32addr(vs);
  const unsigned ds_at = simtlab::smem_u32addr(dst);
  // dQ's part a warpgroup: head dim 128 - all 128 keys, its half of the columns; 64 - its 64 keys, every column
  constexpr int DQ_KEYS = D == 128 ? BKV : 64;
  const int dq_key0 = D == 128 ? 0 : wg * 64, dq_col0 = D == 128 ? wg * 64 : 0;

  for (int ib = first, slot = 0; ib < steps; ++ib, slot = slot == SLOTS - 1 ? 0 : slot + 1) {
    simtlab::cp_async_wait<SLOTS - 2>();  // (a group a step: this step's landed, with 3 slots the next may fly)
    simtlab::fence_async_smem();  // (the copies' writes, visible to wgmma's reads)
    __syncthreads();  // this step's tiles landed (and K, V the first time); the last step's slot and dS^T are free
    if (ib + SLOTS - 1 < steps) load_step(ib + SLOTS - 1, slot == 0 ? SLOTS - 1 : slot - 1);
    simtlab::cp_async_commit();
    const int i0 = ib * BQ;
    const unsigned q_at = simtlab::smem_u32addr(qs + slot * Q_BYTES), do_at = simtlab::smem_u32addr(dos + slot * Q_BYTES);
    const float* lse2 = st + slot * 2 * BQ;  // log2 units; then D at + BQ

    // The step's queries in two halves of 32 (registers: S^T and dP^T of 64 would not fit beside dK, dV):
    // S^T = K Q^T and dP^T = V dO^T (this warpgroup's 64 keys x 32 queries, both operands K-major);
    // P^T = exp2(scale_log2 S^T - LSE2), zero where hidden, packed as dV's A operand (keys kk*16 .. from
    // score tiles 2kk, 2kk + 1); dS^T = P^T (dP^T - D) to shared memory (dK's and dQ's A); dV += P^T dO
    const int kw = j0 + wg * 64 + warp * 16;  // this warp's first key
    const bool edge = kw + 16 > sk || (causal && kw + 15 > i0);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      constexpr int HQ = BQ / 2;
      float s[HQ / 2], dp[HQ / 2];
      // S^T = K Q^T, then dP^T = V dO^T: a committed group each (keys_at: K or V, rows_at: Q or dO)
      auto keys_by_queries = [&](float (&acc)[HQ / 2], unsigned keys_at, unsigned rows_at) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          simtlab::wgmma<HQ, TC, 0, 0>(acc,
                                       simtlab::desc_sw128(keys_at + (kk / 4) * KBLOCK + wg * 64 * 128 + (kk % 4) * 32, 16,
                                                           1024),
                                       simtlab::desc_sw128(rows_at + (kk / 4) * QBLOCK + half * HQ * 128 + (kk % 4) * 32, 16,
                                                           1024),
                                       kk > 0);
        simtlab::wgmma_commit();
      };
      simtlab::wgmma_fence();  // (the first half's P V has finished reading pf: waited below)
      keys_by_queries(s, k_at, q_at);
      keys_by_queries(dp, v_at, do_at);
      float2 lse_n[HQ / 8];  // (read while the products run: the exponentials need them first)
#pragma unroll
      for (int n = 0; n < HQ / 8; ++n) lse_n[n] = *reinterpret_cast<const float2*>(lse2 + half * HQ + n * 8 + 2 * t4);
      simtlab::wgmma_wait<1>();  // S^T landed; dP^T still runs on the tensor cores
      simtlab::wgmma_hold(s);
      simtlab::wgmma_hold(dva);
      float2 d_n[HQ / 8];
#pragma unroll
      for (int n = 0; n < HQ / 8; ++n) d_n[n] = *reinterpret_cast<const float2*>(lse2 + BQ + half * HQ + n * 8 + 2 * t4);
#pragma unroll
      for (int n = 0; n < HQ / 8; ++n) {  // P^T in place of S^T while the tensor cores make dP^T
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = half * HQ + n * 8 + 2 * t4 + e % 2;
          s[4 * n + e] = exp2f(s[4 * n + e] * scale_log2 - (e % 2 ? lse_n[n].y : lse_n[n].x));
          if (edge && !simtlab::attention::visible(i0 + col, kw + g + (e / 2) * 8, sk, causal)) s[4 * n + e] = 0.0f;
        }
      }
      simtlab::wgmma_wait<0>();
      simtlab::wgmma_hold(dp);
      unsigned pf[HQ / 16][4];
#pragma unroll
      for (int n = 0; n < HQ / 8; ++n) {
        const float* p = s + 4 * n;
        float ds[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) ds[e] = p[e] * (dp[4 * n + e] - (e % 2 ? d_n[n].y : d_n[n].x));
        pf[n / 2][(n % 2) * 2] = simtlab::attention::pack2<DT>(p[0], p[1]);
        pf[n / 2][(n % 2) * 2 + 1] = simtlab::attention::pack2<DT>(p[2], p[3]);
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // dS^T row key0 + 8r, queries half*32 + n*8 + 2t4, +1: swizzled chunk
          const int row = key0 + 8 * r, chunk = half * (HQ / 8) + n;
          *reinterpret_cast<unsigned*>(dst + row * 128 + ((chunk ^ (row & 7)) << 4) + 4 * t4) =
              simtlab::attention::pack2<DT>(ds[2 * r], ds[2 * r + 1]);
        }
      }
      // dV += P^T dO: k = this half's queries (16 rows of 128 bytes a step), B read MN-major
      simtlab::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < HQ / 16; ++kk)
        simtlab::wgmma_rs16<D, TC>(dva, pf[kk], simtlab::desc_sw128(do_at + (half * HQ / 16 + kk) * 2048, QBLOCK, 1024), 1);
      simtlab::wgmma_commit();
      simtlab::wgmma_hold(dva);
      if (half == 0) {
        simtlab::wgmma_wait<0>();  // (pf is rewritten by the second half)
        simtlab::wgmma_hold(dva);
      }
    }

    simtlab::fence_async_smem();  // (dS^T's plain stores, visible to wgmma's reads)
    __syncthreads();              // both warpgroups' dS^T whole
    // dQ (the step's 64 queries x 64 columns) = dS K: A = dS read MN-major from dS^T, B = K read
    // MN-major (k = keys, 16 rows of 128 bytes a step); committed first, so its atomics go out while
    // the tensor cores make dK += dS^T Q (A = this warpgroup's 64 rows of dS^T, K-major: 32 bytes of
    // queries a step; B = Q read MN-major)
    float dq[32];
    simtlab::wgmma_hold(dka);
    simtlab::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < DQ_KEYS / 16; ++kk)
      simtlab::wgmma<64, TC, 1, 1>(dq, simtlab::desc_sw128(ds_at + (dq_key0 + kk * 16) * 128, 16, 1024),
                                   simtlab::desc_sw128(k_at + (dq_col0 / 64) * KBLOCK + (dq_key0 + kk * 16) * 128, KBLOCK,
                                                       1024),
                                   kk > 0);
    simtlab::wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk)
      simtlab::wgmma<D, TC, 0, 1>(dka, simtlab::desc_sw128(ds_at + wg * 64 * 128 + kk * 32, 16, 1024),
                                  simtlab::desc_sw128(q_at + kk * 2048, QBLOCK, 1024), 1);
    simtlab::wgmma_commit();
    simtlab::wgmma_hold(dka);
    simtlab::wgmma_wait<1>();  // (the second half's dV and dQ; dK still running)
    simtlab::wgmma_hold(dq);
    simtlab::wgmma_hold(dva);
    float* row = dqh + (long long)(i0 + warp * 16 + g) * D + dq_col0 + 2 * t4;  // (sums padded to sqp rows)
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // (sm_90's two-float reductions: half the instructions of scalar ones)
      atomicAdd(reinterpret_cast<float2*>(row + j * 8), make_float2(dq[4 * j], dq[4 * j + 1]));
      atomicAdd(reinterpret_cast<float2*>(row + 8 * D + j * 8), make_float2(dq[4 * j + 2], dq[4 * j + 3]));
    }
    simtlab::wgmma_wait<0>();  // (dK: dS^T and this slot of Q free for the next step)
    simtlab::wgmma_hold(dka);
  }
  simtlab::cp_async_wait<0>();
  // this thread's keys of dK (scaled) and dV
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = j0 + key0 + 8 * r;
    if (key >= sk) continue;
    T* kout = dk + (h * sk + key) * (long long)D + 2 * t4;
    T* vout = dv + (h * sk + key) * (long long)D + 2 * t4;
#pragma unroll
    for (int j = 0; j < DT8; ++j) {
      *reinterpret_cast<unsigned*>(kout + j * 8) =
          simtlab::attention::pack2<DT>(dka[4 * j + 2 * r] * scale, dka[4 * j + 2 * r + 1] * scale);
      *reinterpret_cast<unsigned*>(vout + j * 8) = simtlab::attention::pack2<DT>(dva[4 * j + 2 * r], dva[4 * j + 2 * r + 1]);
    }
  }
}
