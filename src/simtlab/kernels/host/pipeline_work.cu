// The compute stage of the copy/compute pipeline (simtlab.host.transfers): y =
// a recurrence of ITERS dependent FMAs per element, so the kernel's time can be
// set to match the copies' and the overlap is worth measuring. Grid-stride, so
// one launch shape serves the whole array and each chunk of it.
extern "C" __global__ void __launch_bounds__(256)
pipeline_work(const float* __restrict__ x, float* __restrict__ y, long long n, int iters) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float v = x[i];
    float acc = v;
    for (int k = 0; k < iters; ++k) acc = fmaf(acc, 0.999f, v);
    y[i] = acc;
  }
}
