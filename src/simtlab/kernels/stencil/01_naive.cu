// Rung 1 - naive 3D 7-point Jacobi step: one thread per grid point (a 2D block
// over x and y, the grid's z dimension over planes), each reading its point
// and six neighbours from global memory, zeros outside the grid. The x
// neighbours share cache lines with the point itself and the y neighbours with
// the rows of the threads above and below, but the z neighbours are a whole
// plane away: every point is fetched from L2 or DRAM up to seven times.
template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
stencil_naive(const float* __restrict__ u, float* __restrict__ out, int NX, int NY, int NZ, float c0, float c1) {
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y, z = blockIdx.z;
  if (x >= NX || y >= NY) return;
  const size_t plane = (size_t)NX * NY, i = z * plane + (size_t)y * NX + x;
  float s = 0.0f;
  if (x > 0) s += u[i - 1];
  if (x + 1 < NX) s += u[i + 1];
  if (y > 0) s += u[i - NX];
  if (y + 1 < NY) s += u[i + NX];
  if (z > 0) s += u[i - plane];
  if (z + 1 < NZ) s += u[i + plane];
  out[i] = fmaf(c1, s, c0 * u[i]);
}
