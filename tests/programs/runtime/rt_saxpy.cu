// SAXPY y = a*x + y in single precision, with a grid-stride loop launched on a small grid, run
// three times in a row on the same data, compared with the CPU within a tolerance (the GPU may
// contract a*x+y into one fused multiply-add).
#include "rt_check.h"

#include <vector>

__global__ void Saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}

int main() {
  const int n = 1 << 16;
  std::vector<float> x(n), y(n), want(n);
  for (int i = 0; i < n; ++i) {
    x[i] = sinf((float)i * 0.001f);
    y[i] = (float)(i % 100) * 0.01f;
    want[i] = y[i];
  }
  float *dx = nullptr, *dy = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const float as[3] = {2.0f, -0.75f, 3.1415926f};
  for (float a : as) {
    Saxpy<<<32, 256>>>(n, a, dx, dy);  // 8192 threads, 8 elements each
    CHECK_LAUNCH();
    for (int i = 0; i < n; ++i) want[i] = a * x[i] + want[i];
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  ExpectNearArrays("saxpy", y.data(), want.data(), n, 1e-5, 1e-5);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  printf("rt_saxpy: OK\n");
  return 0;
}
