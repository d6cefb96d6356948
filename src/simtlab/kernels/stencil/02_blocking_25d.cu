// Rung 2 - 2.5D blocking: a block owns a BX x BY column of the grid and marches
// along z through ZC planes. The current plane sits in shared memory with a
// one-point halo in x and y (the x and y neighbours come from there), and the
// planes below and above are the thread's own registers (prev, next), so each
// plane is read from global memory once: per point one load of the next plane
// plus the halo ring's 2(BX+BY)+4 loads shared by the block, against up to
// seven in rung 1. Zeros outside the grid, any size.
template <int BX, int BY, int ZC>
__global__ void __launch_bounds__(BX * BY)
stencil_25d(const float* __restrict__ u, float* __restrict__ out, int NX, int NY, int NZ, float c0, float c1) {
  __shared__ float t[BY + 2][BX + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int bx = blockIdx.x * BX, by = blockIdx.y * BY, x = bx + tx, y = by + ty;
  const int z0 = blockIdx.z * ZC, z1 = min(z0 + ZC, NZ);
  const size_t plane = (size_t)NX * NY;
  auto at = [&](int xx, int yy, int zz) -> float {
    return (xx >= 0 && xx < NX && yy >= 0 && yy < NY && zz >= 0 && zz < NZ) ? u[zz * plane + (size_t)yy * NX + xx]
                                                                             : 0.0f;
  };
  float prev = at(x, y, z0 - 1), cur = at(x, y, z0);
  for (int z = z0; z < z1; ++z) {
    const float next = at(x, y, z + 1);  // issued before the barrier: in flight while the ring loads
    __syncthreads();                     // the last plane's neighbours have been read
    t[ty + 1][tx + 1] = cur;
    for (int k = ty * BX + tx; k < 2 * (BX + 2) + 2 * BY; k += BX * BY) {  // the halo ring
      int rx, ry;
      if (k < BX + 2) {
        rx = k - 1, ry = -1;
      } else if (k < 2 * (BX + 2)) {
        rx = k - (BX + 2) - 1, ry = BY;
      } else if (k < 2 * (BX + 2) + BY) {
        rx = -1, ry = k - 2 * (BX + 2);
      } else {
        rx = BX, ry = k - 2 * (BX + 2) - BY;
      }
      t[ry + 1][rx + 1] = at(bx + rx, by + ry, z);
    }
    __syncthreads();
    if (x < NX && y < NY) {
      const float s = t[ty + 1][tx] + t[ty + 1][tx + 2] + t[ty][tx + 1] + t[ty + 2][tx + 1] + prev + next;
      out[z * plane + (size_t)y * NX + x] = fmaf(c1, s, c0 * cur);
    }
    prev = cur;
    cur = next;
  }
}
