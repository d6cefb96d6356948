// What the attention ladder's kernels share: the storage type of Q, K, V and O by number (DT 1 =
// bf16, 2 = fp16, simtlab_io.cuh's numbering), the causal rule, and the online softmax's update.
// Layout: Q, O (bh, sq, d), K, V (bh, sk, d), rows contiguous; LSE (bh, sq) fp32, the log of each
// row's sum of exponentials plus its max (what a backward recomputes the softmax from).
#pragma once
#include "simtlab_async.cuh"
#include "simtlab_io.cuh"

namespace simtlab {
namespace attention {

// Query i may see key j: every key, or (causal) j <= i - PyTorch's is_causal, the mask aligned to
// the top left (tril of an sq x sk matrix of ones).
__device__ __forceinline__ bool visible(int i, int j, int sk, int causal) { return j < sk && (!causal || j <= i); }

// A row's running max m and sum l after a block of scores whose max is `block_max`: returns the
// factor the old sum and accumulator are scaled by, and the max the new exponentials subtract.
// A row that has seen no visible key keeps m = -inf, and its exponentials are taken as zero.
__device__ __forceinline__ float rescale(float& m, float block_max, float& shift) {
  const float m_new = fmaxf(m, block_max);
  const float neg_inf = -__int_as_float(0x7f800000);
  shift = m_new == neg_inf ? 0.0f : m_new;
  const float factor = m == neg_inf ? 0.0f : __expf(m - m_new);
  m = m_new;
  return factor;
}

// A tile of scores in an mma fragment layout (n-tile n of 8 keys: s[4n + e], rows row0 + 8 (e / 2),
// key j0 + 8n + 2 t4 + e % 2) scaled to log2 units, -inf where the key is hidden (checked only for an
// `edge` tile: one that crosses the diagonal or the keys' end); bmax gets the thread's two rows' maxima.
template <int N>
__device__ __forceinline__ void scale_and_mask(float (&s)[N], float scale_log2, bool edge, int row0, int j0,
                                               int t4, int sk, int causal, float (&bmax)[2]) {
  const float neg_inf = -__int_as_float(0x7f800000);
  bmax[0] = bmax[1] = neg_inf;
#pragma unroll
  for (int n = 0; n < N / 4; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = s[4 * n + e] * scale_log2;
      if (edge && !visible(row0 + (e / 2) * 8, j0 + n * 8 + 2 * t4 + e % 2, sk, causal)) x = neg_inf;
      s[4 * n + e] = x;
      bmax[e / 2] = fmaxf(bmax[e / 2], x);
    }
  }
}

// The online softmax's step for one row of an mma fragment (four lanes hold it), in log2 units:
// the block's max gathered from the four lanes, the new running max m, and the factor the old sum
// l (scaled here) and the row's accumulators are multiplied by; `shift` is what the block's
// exponentials subtract (0 while the row has seen no visible key: its exponentials are zero).
__device__ __forceinline__ float online_step(float& m, float& l, float block_max, float& shift) {
  block_max = fmaxf(block_max, __shfl_xor_sync(~0u, block_max, 1));
  block_max = fmaxf(block_max, __shfl_xor_sync(~0u, block_max, 2));
  const float neg_inf = -__int_as_float(0x7f800000);
  const float m_new = fmaxf(m, block_max);
  shift = m_new == neg_inf ? 0.0f : m_new;
  const float factor = m == neg_inf ? 0.0f : exp2f(m - m_new);
  m = m_new;
  l *= factor;
  return factor;
}

// A fragment row's end: its sum gathered from its four lanes; returns 1 / sum (0 for a row that saw
// no key) and sets `lse` to the row's log-sum-exp in natural units (-inf for such a row).
__device__ __forceinline__ float finish_row(float l, float m, float& lse) {
  l += __shfl_xor_sync(~0u, l, 1);
  l += __shfl_xor_sync(~0u, l, 2);
  lse = l > 0.0f ? (m + __log2f(l)) * 0.6931471805599453f : -__int_as_float(0x7f800000);
  return l > 0.0f ? 1.0f / l : 0.0f;
}

// `rows` rows from row r0 of an (n x D) matrix into 64-column blocks of 128-byte rows by cp.async,
// 128-byte swizzled (16-byte chunk c of row r at chunk c ^ (r % 8): wgmma's layout), rows past n
// zero-filled; a block of THREADS threads shares the copies.
template <int D, int THREADS, typename T>
__device__ __forceinline__ void load_swizzled_rows(unsigned char* dst, const T* src, int r0, int n, int rows, int tid) {
  constexpr int CHUNKS = D / 8;
  for (int c = tid; c < rows * CHUNKS; c += THREADS) {
    const int r = c / CHUNKS, c8 = c % CHUNKS;
    const bool in = r0 + r < n;
    simtlab::cp_async16(dst + (c8 / 8) * rows * 128 + r * 128 + (((c8 % 8) ^ (r & 7)) << 4),
                        in ? src + (long long)(r0 + r) * D + c8 * 8 : src, in);
  }
}

// Two fp32 values as one 32-bit register of the storage type (low half first): a pair of an mma
// accumulator's columns as half of an A fragment, or two adjacent outputs for one store.
template <int DT>  // (simtlab_io.cuh's numbering: 1 bf16, 2 fp16)
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (DT == 1) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
}

// A block's end: each of the thread's two fragment rows (row0 and row0 + 8 of head h) divided by
// its sum and stored - columns 8j + 2 t4 and the next as one 32-bit store, rows past sq skipped -
// and its log-sum-exp written by the row's first lane. at(j, e) is accumulator e of n-tile j (each
// rung keeps its accumulators in its own shape).
template <int DT, int D, typename At>
__device__ __forceinline__ void store_rows(At at, const float (&l)[2], const float (&m)[2], typename Io<DT>::T* o,
                                           float* lse, long long h, int sq, int row0, int t4) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float row_lse;
    const float inv = finish_row(l[r], m[r], row_lse);
    const int i = row0 + r * 8;
    if (i >= sq) continue;
    typename Io<DT>::T* out = o + (h * sq + i) * (long long)D + 2 * t4;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<unsigned*>(out + j * 8) = pack2<DT>(at(j, 2 * r) * inv, at(j, 2 * r + 1) * inv);
    if (t4 == 0) lse[h * sq + i] = row_lse;
  }
}

// Rungs 5 and 6: a tile of scores S_t (an m64n128 accumulator) scaled, masked and exponentiated in place; the
// rows' running max m, sum l and the factor their accumulators are scaled by. MASK: only a tile
// that crosses the diagonal or the keys' end tests each key (the others skip five instructions a
// score). FOLD (a positive scale, the usual case): the max is taken over the raw scores and the
// scale folded into the exponent's one FFMA, exp2(s scale - max).
template <bool MASK, bool FOLD, int N>
__device__ __forceinline__ void softmax_tile(float (&s)[N], float (&m)[2], float (&l)[2], float (&factor)[2],
                                             float scale_log2, int row0, int j0, int t4, int sk, int causal) {
  const float neg_inf = -__int_as_float(0x7f800000);
  float bmax[2] = {neg_inf, neg_inf}, shift[2];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    float x = FOLD ? s[j] : s[j] * scale_log2;
    if (MASK && !visible(row0 + ((j % 4) / 2) * 8, j0 + (j / 4) * 8 + 2 * t4 + j % 2, sk, causal))
      x = neg_inf;
    s[j] = x;
    bmax[(j % 4) / 2] = fmaxf(bmax[(j % 4) / 2], x);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (FOLD) bmax[r] *= scale_log2;  // (-inf stays -inf)
    factor[r] = online_step(m[r], l[r], bmax[r], shift[r]);
  }
#pragma unroll
  for (int j = 0; j < N; ++j) {
    s[j] = exp2f(FOLD ? fmaf(s[j], scale_log2, -shift[(j % 4) / 2]) : s[j] - shift[(j % 4) / 2]);  // (-inf: zero)
    l[(j % 4) / 2] += s[j];
  }
}

}  // namespace attention
}  // namespace simtlab
