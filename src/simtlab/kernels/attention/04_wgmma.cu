// Rung 4 - Hopper's wgmma: what changed from rung 3: both products are warpgroup MMAs (wgmma,
// sm_90a) that read their tiles straight from shared memory - no ldmatrix, no fragments of Q, K or
// V in registers. A block is two warpgroups, 64 query rows each (128 a block, sharing each K and V
// tile); a key tile is 128 keys. The tiles land in wgmma's 128-byte-swizzled layout (16-byte chunk
// c of row r at chunk c ^ (r % 8): conflict-free for the copies and the tensor cores) through a
// two-slot cp.async ring, fenced for the async proxy. S = Q K^T is one m64n128 accumulator a
// warpgroup (K read K-major); the online softmax runs on it in registers, and P goes from its
// accumulators straight into the register A operand of O += P V (V read MN-major).
#include "simtlab_async.cuh"
#include "simtlab_attention.cuh"
#include "simtlab_hopper.cuh"

template <int DT, int D>
__global__ void __launch_bounds__(256, 1)
attention_wgmma(const typename simtlab::Io<DT>::T* __restrict__ q, const typename simtlab::Io<DT>::T* __restrict__ k,
                const typename simtlab::Io<DT>::T* __restrict__ v, typename simtlab::Io<DT>::T* __restrict__ o,
                float* __restrict__ lse, int sq, int sk, float scale_log2, int causal) {
  using T = typename simtlab::Io<DT>::T;
  constexpr int TC = DT == 1 ? 1 : 0;  // (the wgmma helpers' numbering: 0 fp16, 1 bf16)
  constexpr int BQ = 128, BK = 128, CB = D / 64, NT = BK / 8, DT8 = D / 8;
  constexpr int QBLOCK = BQ * 128, TILE = BK * 128;  // bytes of a 64-column block of the Q tile / a K or V tile
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  extern __shared__ unsigned char smem_raw[];
  // (1024-byte aligned: the swizzle pattern repeats every 8 rows of 128 bytes)
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  unsigned char* qs = smem;                   // CB blocks of BQ rows
  unsigned char* ks = qs + CB * QBLOCK;       // two slots of CB blocks of BK rows
  unsigned char* vs = ks + 2 * CB * TILE;     // two slots
  const float neg_inf = -__int_as_float(0x7f800000);
  const long long h = blockIdx.y;
  const int q0 = blockIdx.x * BQ, tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  const int g = lane / 4, t4 = lane % 4;
  const T* qh = q + h * sq * (long long)D;
  const T* kh = k + h * sk * (long long)D;
  const T* vh = v + h * sk * (long long)D;

  auto load_tile = [&](unsigned char* dst, const T* src, int r0, int n, int rows) {
    simtlab::attention::load_swizzled_rows<D, 256>(dst, src, r0, n, rows, tid);
  };
  const int last = min(q0 + BQ, sq);  // (one past the block's last row)
  const int keys = causal ? min(sk, last) : sk;
  const int tiles = (keys + BK - 1) / BK;
  load_tile(qs, qh, q0, sq, BQ);
  if (tiles > 0) {
    load_tile(ks, kh, 0, sk, BK);
    load_tile(vs, vh, 0, sk, BK);
  }
  simtlab::cp_async_commit();

  float acc[D / 2];  // O: this warpgroup's 64 rows x D (m64nD)
#pragma unroll
  for (int j = 0; j < D / 2; ++j) acc[j] = 0.0f;
  float m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f};
  const int wrow = q0 + wg * 64 + (warp % 4) * 16;  // this warp's first row
  const int row0 = wrow + g;                        // this thread's rows: row0 and row0 + 8
  const unsigned q_at = simtlab::smem_u32addr(qs) + wg * 64 * 128;

  for (int t = 0; t < tiles; ++t) {
    simtlab::cp_async_wait<0>();
    simtlab::fence_async_smem();  // (the copies' writes, visible to wgmma's reads)
    __syncthreads();              // tile t landed for every thread; slot (t+1)%2 is free
    if (t + 1 < tiles) {
      load_tile(ks + ((t + 1) % 2) * CB * TILE, kh, (t + 1) * BK, sk, BK);
      load_tile(vs + ((t + 1) % 2) * CB * TILE, vh, (t + 1) * BK, sk, BK);
    }
    simtlab::cp_async_commit();
    const unsigned k_at = simtlab::smem_u32addr(ks + (t % 2) * CB * TILE);
    const unsigned v_at = simtlab::smem_u32addr(vs + (t % 2) * CB * TILE);

    float s[BK / 2];  // S: 64 rows x 128 keys
#pragma unroll
    for (int j = 0; j < BK / 2; ++j) s[j] = 0.0f;
    simtlab::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)  // k16 steps: 32 bytes along a 128-byte row, then the next column block
      simtlab::wgmma<BK, TC, 0, 0>(s, simtlab::desc_sw128(q_at + (kk / 4) * QBLOCK + (kk % 4) * 32, 16, 1024),
                                   simtlab::desc_sw128(k_at + (kk / 4) * TILE + (kk % 4) * 32, 16, 1024), 1);
    simtlab::wgmma_commit();
    simtlab::wgmma_wait<0>();

    const int j0 = t * BK;
    const bool edge = j0 + BK > sk || (causal && j0 + BK - 1 > wrow);
    float bmax[2];
    simtlab::attention::scale_and_mask(s, scale_log2, edge, row0, j0, t4, sk, causal, bmax);
    float shift[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float factor = simtlab::attention::online_step(m[r], l[r], bmax[r], shift[r]);
#pragma unroll
      for (int j = 0; j < DT8; ++j) acc[4 * j + 2 * r] *= factor, acc[4 * j + 2 * r + 1] *= factor;
    }
    unsigned pf[BK / 16][4];  // P as register A operands: keys kk*16 .. +15 from score tiles 2kk and 2kk+1
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[4 * n + e] - shift[e / 2]);  // (-inf scores: zero)
        l[e / 2] += p[e];
      }
      pf[n / 2][(n % 2) * 2] = simtlab::attention::pack2<DT>(p[0], p[1]);
      pf[n / 2][(n % 2) * 2 + 1] = simtlab::attention::pack2<DT>(p[2], p[3]);
    }
    simtlab::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)  // 16 keys a step: 16 rows of 128 bytes; V's column blocks TILE apart
      simtlab::wgmma_rs16<D, TC>(acc, pf[kk], simtlab::desc_sw128(v_at + kk * 2048, TILE, 1024), 1);
    simtlab::wgmma_commit();
    simtlab::wgmma_wait<0>();
  }
  simtlab::cp_async_wait<0>();
  simtlab::attention::store_rows<DT, D>([&](int j, int e) { return acc[4 * j + e]; }, l, m, o, lse, h, sq, row0, t4);
}
