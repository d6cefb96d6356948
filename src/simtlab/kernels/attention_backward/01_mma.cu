// Rung 1 - FlashAttention-2's backward on the tensor cores (mma.sync m16n8k16, fp32 sums): a block
// of 8 warps owns 64 keys and walks the 64-query blocks that see them, recomputing each tile's
// probabilities from the forward's log-sum-exp instead of reading an sq x sk matrix. Per step:
// S^T = K Q^T and dP^T = V dO^T (a warp: 16 keys x 16 queries at a time), P^T and dS^T = P^T
// (dP^T - D) to shared memory in the storage type; dV += P^T dO and dK += dS^T Q (a warp: 16 keys
// x half the head dim, accumulators in registers for the whole walk); dQ = dS K, summed over every
// key block, added to fp32 sums with atomics (dS read back transposed by ldmatrix) while the next
// step's Q and dO copies are in flight. 128 registers: two blocks an SM. Two small launches around
// it: D = rowsum(dO O) and the statistics in log2 units (the sums zeroed), then dQ.
#include "simtlab_async.cuh"
#include "simtlab_attention_bwd.cuh"
#include "simtlab_tc.cuh"

template <int DT, int D>
__global__ void __launch_bounds__(256, 2)
attention_bwd_mma(const typename simtlab::Io<DT>::T* __restrict__ q, const typename simtlab::Io<DT>::T* __restrict__ k,
                  const typename simtlab::Io<DT>::T* __restrict__ v, const typename simtlab::Io<DT>::T* __restrict__ dout,
                  const float* __restrict__ stats, float* __restrict__ dqacc, typename simtlab::Io<DT>::T* __restrict__ dk,
                  typename simtlab::Io<DT>::T* __restrict__ dv, int sq, int sk, int sqp, float scale_log2, float scale,
                  int causal) {
  using T = typename simtlab::Io<DT>::T;
  constexpr int TC = DT == 1 ? 1 : 0;  // (simtlab_tc.cuh's numbering: 0 fp16, 1 bf16)
  constexpr int BQ = simtlab::attention::BWD_BQ, BKV = 64, THREADS = 256;
  constexpr int LD = D + 8, LDS = BQ + 8, KSTEPS = D / 16, CHUNKS = D / 8, HALF = D / 2;
  constexpr int SUB = 16;  // queries of a warp's S^T and dP^T at a time (32: past 128 registers at D 128)
  static_assert(D % 32 == 0 && D <= 256, "head dims in steps of 32");
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + BKV * LD;
  T* qs = vs + BKV * LD;
  T* dos = qs + BQ * LD;
  T* pts = dos + BQ * LD;                                     // P^T: BKV keys x BQ queries
  T* dst = pts + BKV * LDS;                                   // dS^T
  float* st = reinterpret_cast<float*>(dst + BKV * LDS);      // the step's LSE (log2) and D, BQ each
  const long long h = blockIdx.y;
  const int j0 = blockIdx.x * BKV, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t4 = lane % 4;
  // a warp's parts: 16 of the block's keys (or of the step's queries), and a half (of the step's
  // queries for S^T and dP^T, of the head dim for dK, dV and dQ)
  const int part = warp % 4, half = warp / 4;
  const T* qh = q + h * sq * (long long)D;
  const T* doh = dout + h * sq * (long long)D;
  const float* sth = stats + 2 * h * sqp;
  float* dqh = dqacc + h * sqp * (long long)D;

  // `rows` rows from row r0 of an (n x D) matrix into a padded tile; rows past n zero-filled
  auto load_tile = [&](T* to, const T* src, int r0, int n, int rows) {
    for (int c = tid; c < rows * CHUNKS; c += THREADS) {
      const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
      const bool in = r0 + r < n;
      simtlab::cp_async16(to + r * LD + col, in ? src + (long long)(r0 + r) * D + col : src, in);
    }
  };
  auto load_step = [&](int ib) {  // Q, dO and the statistics of query block ib
    load_tile(qs, qh, ib * BQ, sq, BQ);
    load_tile(dos, doh, ib * BQ, sq, BQ);
    if (tid < 2 * BQ / 4) {
      const int which = tid / (BQ / 4), c = tid % (BQ / 4);
      simtlab::cp_async16(st + which * BQ + 4 * c, sth + which * sqp + ib * BQ + 4 * c);
    }
  };
  const int steps = (sq + BQ - 1) / BQ;
  const int first = causal ? j0 / BQ : 0;  // (causal: earlier queries see none of these keys)
  load_tile(ks, k + h * sk * (long long)D, j0, sk, BKV);
  load_tile(vs, v + h * sk * (long long)D, j0, sk, BKV);
  if (first < steps) load_step(first);
  simtlab::cp_async_commit();

  float dka[HALF / 8][4], dva[HALF / 8][4];  // keys part*16.., head dim columns half*HALF..
#pragma unroll
  for (int j = 0; j < HALF / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dka[j][e] = dva[j][e] = 0.0f;

  for (int ib = first; ib < steps; ++ib) {
    simtlab::cp_async_wait<0>();
    __syncthreads();  // this step's Q, dO and statistics (and, the first time, K and V) landed
    const int i0 = ib * BQ, qc = half * (BQ / 2);
#pragma unroll 1
    for (int sub = qc; sub < qc + BQ / 2; sub += SUB) {
      // S^T and dP^T (keys part*16.., queries sub..sub+SUB-1) = K Q^T, V dO^T; P^T and dS^T to shared memory
      constexpr int NS = SUB / 8;
      float s[NS][4], dp[NS][4];
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk) {
        unsigned ka[4], va[4];
        simtlab::ldmatrix_x4(ka, ks + (part * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
        simtlab::ldmatrix_x4(va, vs + (part * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int n = 0; n < NS; n += 2) {  // queries n*8 .. n*8+15: b0, b1 of two n-tiles in one ldmatrix
          const int off = (sub + n * 8 + (lane / 16) * 8 + lane % 8) * LD + kk * 16 + ((lane / 8) % 2) * 8;
          unsigned b[4];
          simtlab::ldmatrix_x4(b, qs + off);
          simtlab::mma_16816<TC>(s[n], ka, b[0], b[1]);
          simtlab::mma_16816<TC>(s[n + 1], ka, b[2], b[3]);
          simtlab::ldmatrix_x4(b, dos + off);
          simtlab::mma_16816<TC>(dp[n], va, b[0], b[1]);
          simtlab::mma_16816<TC>(dp[n + 1], va, b[2], b[3]);
        }
      }
      // P^T = exp2(scale_log2 S^T - LSE2), zero where masked; dS^T = P^T (dP^T - D)
      const bool edge = j0 + BKV > sk || (causal && j0 + part * 16 + 15 > i0 + sub);
#pragma unroll
      for (int n = 0; n < NS; ++n) {
        float p[4], ds[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = sub + n * 8 + 2 * t4 + e % 2;
          p[e] = exp2f(s[n][e] * scale_log2 - st[col]);
          if (edge && !simtlab::attention::visible(i0 + col, j0 + part * 16 + g + (e / 2) * 8, sk, causal)) p[e] = 0.0f;
          ds[e] = p[e] * (dp[n][e] - st[BQ + col]);
        }
        const int at = (part * 16 + g) * LDS + sub + n * 8 + 2 * t4;
        *reinterpret_cast<unsigned*>(pts + at) = simtlab::attention::pack2<DT>(p[0], p[1]);
        *reinterpret_cast<unsigned*>(pts + at + 8 * LDS) = simtlab::attention::pack2<DT>(p[2], p[3]);
        *reinterpret_cast<unsigned*>(dst + at) = simtlab::attention::pack2<DT>(ds[0], ds[1]);
        *reinterpret_cast<unsigned*>(dst + at + 8 * LDS) = simtlab::attention::pack2<DT>(ds[2], ds[3]);
      }
    }
    __syncthreads();  // P^T and dS^T whole
    // dV += P^T dO, dK += dS^T Q: keys part*16.., columns half*HALF.. (A from P^T, dS^T; B from dO and
    // Q read transposed: k = queries, n = head dim)
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
      unsigned pa[4], da[4];
      const int a_at = (part * 16 + lane % 16) * LDS + kk * 16 + (lane / 16) * 8;
      simtlab::ldmatrix_x4(pa, pts + a_at);
      simtlab::ldmatrix_x4(da, dst + a_at);
#pragma unroll
      for (int j = 0; j < HALF / 8; j += 2) {
        const int off = (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * LD + half * HALF + j * 8 + (lane / 16) * 8;
        unsigned b[4];
        simtlab::ldmatrix_x4_trans(b, dos + off);
        simtlab::mma_16816<TC>(dva[j], pa, b[0], b[1]);
        simtlab::mma_16816<TC>(dva[j + 1], pa, b[2], b[3]);
        simtlab::ldmatrix_x4_trans(b, qs + off);
        simtlab::mma_16816<TC>(dka[j], da, b[0], b[1]);
        simtlab::mma_16816<TC>(dka[j + 1], da, b[2], b[3]);
      }
    }
    __syncthreads();  // Q and dO read by every warp: the next step's copies may land
    if (ib + 1 < steps) load_step(ib + 1);
    simtlab::cp_async_commit();
    // dQ (queries part*16.., columns half*HALF..) += dS K over this block's keys: A = dS, read
    // transposed from dS^T; B = K transposed (k = keys, n = head dim). 32 columns at a time.
#pragma unroll 1
    for (int cc = 0; cc < HALF; cc += 32) {
      float dq[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < BKV / 16; ++kk) {
        unsigned a[4];
        simtlab::ldmatrix_x4_trans(a, dst + (kk * 16 + (lane / 16) * 8 + lane % 8) * LDS + part * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int j = 0; j < 4; j += 2) {
          unsigned b[4];
          simtlab::ldmatrix_x4_trans(b, ks + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * LD + half * HALF + cc + j * 8 +
                                            (lane / 16) * 8);
          simtlab::mma_16816<TC>(dq[j], a, b[0], b[1]);
          simtlab::mma_16816<TC>(dq[j + 1], a, b[2], b[3]);
        }
      }
      float* row = dqh + (long long)(i0 + part * 16 + g) * D + half * HALF + cc + 2 * t4;  // (sums padded to sqp rows)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        atomicAdd(row + j * 8, dq[j][0]);
        atomicAdd(row + j * 8 + 1, dq[j][1]);
        atomicAdd(row + 8 * D + j * 8, dq[j][2]);
        atomicAdd(row + 8 * D + j * 8 + 1, dq[j][3]);
      }
    }
  }
  simtlab::cp_async_wait<0>();
  // this warp's keys and columns of dK (scaled) and dV
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = j0 + part * 16 + g + 8 * r;
    if (key >= sk) continue;
    T* kout = dk + (h * sk + key) * (long long)D + half * HALF + 2 * t4;
    T* vout = dv + (h * sk + key) * (long long)D + half * HALF + 2 * t4;
#pragma unroll
    for (int j = 0; j < HALF / 8; ++j) {
      *reinterpret_cast<unsigned*>(kout + j * 8) =
          simtlab::attention::pack2<DT>(dka[j][2 * r] * scale, dka[j][2 * r + 1] * scale);
      *reinterpret_cast<unsigned*>(vout + j * 8) = simtlab::attention::pack2<DT>(dva[j][2 * r], dva[j][2 * r + 1]);
    }
  }
}
