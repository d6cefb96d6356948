// Rung 3 - tensor cores: what changed from rung 2: a block takes 64 query rows, 16 a warp, and
// the products are mma.sync m16n8k16 (fp32 sums). Q is held in registers as A fragments for the
// whole walk; K and V tiles of 64 keys come through a two-slot cp.async ring (the next tile's
// copies in flight while this one is used), rows padded by 16 bytes so ldmatrix reads 8 rows in
// 8 bank groups. Each warp owns its 16 rows whole (FlashAttention-2's split): the scores' row
// max and sum are four lanes' shuffles, never shared memory, and the probabilities go from the
// score accumulators straight into P V's A fragments (bf16 / fp16). exp2 with log2(e) folded
// into the scale; causal blocks stop at their last row's key.
#include "simtlab_async.cuh"
#include "simtlab_attention.cuh"
#include "simtlab_tc.cuh"

template <int DT, int D>
__global__ void __launch_bounds__(128)
attention_mma(const typename simtlab::Io<DT>::T* __restrict__ q, const typename simtlab::Io<DT>::T* __restrict__ k,
              const typename simtlab::Io<DT>::T* __restrict__ v, typename simtlab::Io<DT>::T* __restrict__ o,
              float* __restrict__ lse, int sq, int sk, float scale_log2, int causal) {
  using T = typename simtlab::Io<DT>::T;
  constexpr int TC = DT == 1 ? 1 : 0;  // (simtlab_tc.cuh's numbering: 0 fp16, 1 bf16)
  constexpr int BQ = 64, BK = 64, LD = D + 8, KSTEPS = D / 16, NT = BK / 8, DT8 = D / 8, CHUNKS = D / 8;
  static_assert(D % 16 == 0 && D <= 256, "head dims in steps of 16");
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = qs + BQ * LD;          // two slots of BK x LD
  T* vs = ks + 2 * BK * LD;      // two slots
  const float neg_inf = -__int_as_float(0x7f800000);
  const long long h = blockIdx.y;
  const int q0 = blockIdx.x * BQ, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const T* qh = q + h * sq * (long long)D;
  const T* kh = k + h * sk * (long long)D;
  const T* vh = v + h * sk * (long long)D;

  // 16-byte copies of `rows` rows starting at row r0 of a (n x D) matrix into a padded tile; rows past n zero-filled
  auto load_tile = [&](T* dst, const T* src, int r0, int n) {
    for (int c = tid; c < 64 * CHUNKS; c += 128) {
      const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
      const bool in = r0 + r < n;
      simtlab::cp_async16(dst + r * LD + col, in ? src + (long long)(r0 + r) * D + col : src, in);
    }
  };
  const int last = min(q0 + BQ, sq);  // (one past the block's last row)
  const int keys = causal ? min(sk, last) : sk;
  const int tiles = (keys + BK - 1) / BK;
  load_tile(qs, qh, q0, sq);
  if (tiles > 0) {
    load_tile(ks, kh, 0, sk);
    load_tile(vs, vh, 0, sk);
  }
  simtlab::cp_async_commit();

  unsigned qf[KSTEPS][4];
  float acc[DT8][4];
#pragma unroll
  for (int j = 0; j < DT8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f};
  const int row0 = q0 + warp * 16 + lane / 4;  // this thread's rows: row0 and row0 + 8

  for (int t = 0; t < tiles; ++t) {
    simtlab::cp_async_wait<0>();
    __syncthreads();  // tile t (and, the first time, Q) landed for every thread; slot (t+1)%2 is free
    if (t == 0) {
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk)
        simtlab::ldmatrix_x4(qf[kk], qs + (warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
    }
    if (t + 1 < tiles) {
      load_tile(ks + ((t + 1) % 2) * BK * LD, kh, (t + 1) * BK, sk);
      load_tile(vs + ((t + 1) % 2) * BK * LD, vh, (t + 1) * BK, sk);
    }
    simtlab::cp_async_commit();
    const T* kt = ks + (t % 2) * BK * LD;
    const T* vt = vs + (t % 2) * BK * LD;

    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
      for (int n = 0; n < NT; n += 2) {  // keys n*8 .. n*8+15: b0, b1 of two n-tiles in one ldmatrix
        unsigned b[4];
        simtlab::ldmatrix_x4(b, kt + (n * 8 + (lane / 16) * 8 + lane % 8) * LD + kk * 16 + ((lane / 8) % 2) * 8);
        simtlab::mma_16816<TC>(s[n], qf[kk], b[0], b[1]);
        simtlab::mma_16816<TC>(s[n + 1], qf[kk], b[2], b[3]);
      }
    }
    const int j0 = t * BK;
    const bool edge = j0 + BK > sk || (causal && j0 + BK - 1 > q0 + warp * 16);
    float bmax[2] = {neg_inf, neg_inf};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * scale_log2;
        if (edge) {
          const int i = row0 + (e / 2) * 8, j = j0 + n * 8 + 2 * (lane % 4) + e % 2;
          if (!simtlab::attention::visible(i, j, sk, causal)) x = neg_inf;
        }
        s[n][e] = x;
        bmax[e / 2] = fmaxf(bmax[e / 2], x);
      }
    }
    float shift[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float factor = simtlab::attention::online_step(m[r], l[r], bmax[r], shift[r]);
#pragma unroll
      for (int j = 0; j < DT8; ++j) acc[j][2 * r] *= factor, acc[j][2 * r + 1] *= factor;
    }
    unsigned pf[BK / 16][4];  // P as A fragments: keys kk*16 .. +15 from score tiles 2kk and 2kk+1
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[n][e] - shift[e / 2]);  // (-inf scores: zero)
        l[e / 2] += p[e];
      }
      pf[n / 2][(n % 2) * 2] = simtlab::attention::pack2<DT>(p[0], p[1]);
      pf[n / 2][(n % 2) * 2 + 1] = simtlab::attention::pack2<DT>(p[2], p[3]);
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < DT8; j += 2) {  // columns j*8 .. j*8+15 of V: b0, b1 of two n-tiles, transposed
        unsigned b[4];
        simtlab::ldmatrix_x4_trans(b, vt + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * LD + j * 8 + (lane / 16) * 8);
        simtlab::mma_16816<TC>(acc[j], pf[kk], b[0], b[1]);
        simtlab::mma_16816<TC>(acc[j + 1], pf[kk], b[2], b[3]);
      }
    }
  }
  simtlab::cp_async_wait<0>();
  simtlab::attention::store_rows<DT, D>([&](int j, int e) { return acc[j][e]; }, l, m, o, lse, h, sq, row0, lane % 4);
}
