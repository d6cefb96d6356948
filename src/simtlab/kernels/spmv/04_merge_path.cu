// Rung 4 - merge-path CSR (load-balanced): what changed from rung 3: no row gets a thread, a group
// or a slice of its own. The n row ends and the nnz nonzeros are merged into one path of n + nnz
// items, cut into equal pieces: a block takes BLOCK * IPT items, a thread IPT, whatever the rows'
// lengths - a 20000-nonzero row is spread over many threads, empty rows cost one item each. A
// first launch finds every piece's corner by binary search (and sets y to beta * y); a block
// stages its products vals[k] * x[cols[k]] (coalesced) and row ends in shared memory, and each
// thread walks its IPT items there. A row inside one thread is written once, a row cut between
// threads gets its pieces by atomicAdd. What it should buy: the same speed on power-law rows as
// on uniform ones, in CSR as it is.

// How many row ends (i) and nonzeros (diag - i) lie before item `diag` of the merge path: the
// largest i with row_end[i - 1] <= diag - i, ties to the row end (a row ends before nonzero k when
// its end offset is k).
__device__ __forceinline__ int merge_rows_before(int diag, const int* __restrict__ row_ptr, int n, int nnz) {
  int lo = max(0, diag - nnz), hi = min(diag, n);
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (row_ptr[mid + 1] <= diag - mid - 1) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The first launch: y = beta * y (0 where beta == 0: y is not read), and the rows before each
// tile's first item (corners[b], b = 0 .. tiles; a tile is `tile` items of the path).
extern "C" __global__ void spmv_merge_prepare(int n, const int* __restrict__ row_ptr, int tile, int tiles,
                                              float beta, float* __restrict__ y, int* __restrict__ corners) {
  const int nnz = row_ptr[n];
  const long long total = (long long)n + nnz;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < max(n, tiles + 1); i += gridDim.x * blockDim.x) {
    if (i < n) y[i] = beta != 0.0f ? beta * y[i] : 0.0f;
    if (i <= tiles) corners[i] = merge_rows_before((int)min((long long)i * tile, total), row_ptr, n, nnz);
  }
}

// The same for simtlab.spmv, whose y is the caller's and stays unchanged: y_out = beta * y_in (y_in
// unread where beta == 0), the corners as above.
extern "C" __global__ void spmv_merge_prepare_into(int n, const int* __restrict__ row_ptr, int tile, int tiles,
                                                   float beta, const float* __restrict__ y_in, float* __restrict__ y_out,
                                                   int* __restrict__ corners) {
  const int nnz = row_ptr[n];
  const long long total = (long long)n + nnz;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < max(n, tiles + 1); i += gridDim.x * blockDim.x) {
    if (i < n) y_out[i] = beta != 0.0f ? beta * y_in[i] : 0.0f;
    if (i <= tiles) corners[i] = merge_rows_before((int)min((long long)i * tile, total), row_ptr, n, nnz);
  }
}

template <int BLOCK, int IPT>
__global__ void __launch_bounds__(BLOCK) spmv_merge_path(int n, const int* __restrict__ row_ptr,
                                                         const int* __restrict__ cols, const float* __restrict__ vals,
                                                         const float* __restrict__ x, float alpha,
                                                         const int* __restrict__ corners, float* __restrict__ y) {
  constexpr int TILE = BLOCK * IPT;
  static_assert(8 * TILE + 8 <= 48 * 1024, "BLOCK * IPT: the tile's products and row ends in 48 KiB of static shared memory");
  __shared__ float prod[TILE];     // the tile's products, nonzero j at prod[j - k0]
  __shared__ int ends[TILE + 2];   // ends[t] = row_ptr[r0 + t] - k0: row r0 + t spans ends[t] .. ends[t + 1]
  const int nnz = row_ptr[n];
  const long long total = (long long)n + nnz;
  const int d0 = (int)((long long)blockIdx.x * TILE), d1 = (int)min((long long)d0 + TILE, total);
  const int r0 = corners[blockIdx.x], k0 = d0 - r0, r1 = corners[blockIdx.x + 1], k1 = d1 - r1;
  for (int j = k0 + threadIdx.x; j < k1; j += BLOCK) prod[j - k0] = vals[j] * __ldg(x + cols[j]);
  for (int t = threadIdx.x; t <= r1 - r0 + 1; t += BLOCK)
    ends[t] = r0 + t <= n ? row_ptr[r0 + t] - k0 : 0x7fffffff;  // (past the last row: never reached)
  __syncthreads();
  // this thread's items: the same search within the tile (rows r0.. against nonzeros k0..)
  const int rows = r1 - r0, items = k1 - k0;
  const int ld = min((int)threadIdx.x * IPT, rows + items), le = min(ld + IPT, rows + items);
  int lo = max(0, ld - items), hi = min(ld, rows);
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (ends[mid + 1] <= ld - mid - 1) lo = mid + 1;
    else hi = mid;
  }
  int t = lo, j = ld - lo;
  bool whole = j == ends[t];  // nothing of row r0 + t was taken before this thread
  float sum = 0.0f;
  for (int d = ld; d < le; ++d) {
    if (j < ends[t + 1]) {  // the next item is a nonzero of row r0 + t
      sum += prod[j++];
    } else {                // the next item is row r0 + t's end
      float* out = y + r0 + t;
      if (whole) *out += alpha * sum;  // (only this thread touches the row)
      else atomicAdd(out, alpha * sum);
      sum = 0.0f, whole = true, ++t;
    }
  }
  if (j > ends[t] && r0 + t < n) atomicAdd(y + r0 + t, alpha * sum);  // a row this thread leaves unfinished
}
