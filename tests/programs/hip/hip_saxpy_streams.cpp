// Kernels on several streams, ordered by events, with a struct argument and shared memory.
#include <vector>

#include "hip_check.h"

struct Saxpy {
  float a;
  int n;
};

__global__ void SaxpyKernel(Saxpy p, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) y[i] = p.a * x[i] + y[i];
}

// Sums each block's values into out[blockIdx.x] through dynamic shared memory.
__global__ void BlockSum(const float* x, float* out, int n) {
  extern __shared__ float partial[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

int main() {
  const int kStreams = 3, n = 1 << 16, block = 128, grid = n / block;
  hipStream_t streams[kStreams];
  hipEvent_t done[kStreams];
  float *x[kStreams], *y[kStreams], *sums[kStreams];
  std::vector<float> hx(n), hy(n);
  for (int i = 0; i < n; ++i) {
    hx[i] = static_cast<float>(i % 17);
    hy[i] = 1.0f;
  }
  for (int s = 0; s < kStreams; ++s) {
    CHECK(hipStreamCreate(&streams[s]));
    CHECK(hipEventCreate(&done[s]));
    CHECK(hipMalloc(&x[s], n * sizeof(float)));
    CHECK(hipMalloc(&y[s], n * sizeof(float)));
    CHECK(hipMalloc(&sums[s], grid * sizeof(float)));
    CHECK(hipMemcpyAsync(x[s], hx.data(), n * sizeof(float), hipMemcpyHostToDevice, streams[s]));
    CHECK(hipMemcpyAsync(y[s], hy.data(), n * sizeof(float), hipMemcpyHostToDevice, streams[s]));
    SaxpyKernel<<<grid, block, 0, streams[s]>>>(Saxpy{static_cast<float>(s + 1), n}, x[s], y[s]);
    CHECK_LAUNCH("SaxpyKernel");
    CHECK(hipEventRecord(done[s], streams[s]));
  }
  // Stream 0 sums every stream's result once that stream is done.
  for (int s = 0; s < kStreams; ++s) {
    CHECK(hipStreamWaitEvent(streams[0], done[s], 0));
    BlockSum<<<grid, block, block * sizeof(float), streams[0]>>>(y[s], sums[s], n);
    CHECK_LAUNCH("BlockSum");
  }
  CHECK(hipStreamSynchronize(streams[0]));
  for (int s = 0; s < kStreams; ++s) {
    std::vector<float> hs(grid);
    CHECK(hipMemcpy(hs.data(), sums[s], grid * sizeof(float), hipMemcpyDeviceToHost));
    for (int b = 0; b < grid; ++b) {
      float expected = 0;
      for (int i = b * block; i < (b + 1) * block; ++i) expected += (s + 1) * hx[i] + 1.0f;
      EXPECT(hs[b] == expected);
    }
  }
  for (int s = 0; s < kStreams; ++s) {
    CHECK(hipStreamDestroy(streams[s]));
    CHECK(hipEventDestroy(done[s]));
    CHECK(hipFree(x[s]));
    CHECK(hipFree(y[s]));
    CHECK(hipFree(sums[s]));
  }
  puts("hip_saxpy_streams: ok");
  return 0;
}
