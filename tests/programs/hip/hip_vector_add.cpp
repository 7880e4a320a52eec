// The compiler's launch path: kernel<<<grid, block>>>(args) and hipLaunchKernelGGL.
#include <vector>

#include "hip_check.h"

__global__ void VectorAdd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void Scale(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

int main() {
  const int n = 100000;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = i * 0.5f;
    b[i] = 3.0f - i;
  }
  float *da, *db, *dc;
  CHECK(hipMalloc(&da, n * sizeof(float)));
  CHECK(hipMalloc(&db, n * sizeof(float)));
  CHECK(hipMalloc(&dc, n * sizeof(float)));
  CHECK(hipMemcpy(da, a.data(), n * sizeof(float), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(db, b.data(), n * sizeof(float), hipMemcpyHostToDevice));
  const int block = 256, grid = (n + block - 1) / block;
  VectorAdd<<<grid, block>>>(da, db, dc, n);
  CHECK_LAUNCH("VectorAdd");
  hipLaunchKernelGGL(Scale, dim3(grid), dim3(block), 0, 0, dc, 2.0f, n);
  CHECK_LAUNCH("Scale");
  CHECK(hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(c[i] == 2.0f * (a[i] + b[i]));
  // What the device says of the kernel.
  hipFuncAttributes attributes;
  CHECK(hipFuncGetAttributes(&attributes, reinterpret_cast<const void*>(VectorAdd)));
  EXPECT(attributes.maxThreadsPerBlock >= block);
  int min_grid = 0, best_block = 0;
  CHECK(hipOccupancyMaxPotentialBlockSize(&min_grid, &best_block, VectorAdd, 0, 0));
  EXPECT(best_block > 0 && best_block <= attributes.maxThreadsPerBlock && min_grid > 0);
  int resident = 0;
  CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&resident, VectorAdd, block, 0));
  EXPECT(resident > 0);
  CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(Scale),
                            hipFuncAttributeMaxDynamicSharedMemorySize, 4096));
  CHECK(hipFuncSetCacheConfig(reinterpret_cast<const void*>(Scale), hipFuncCachePreferL1));
  hipLaunchKernelGGL(Scale, dim3(grid), dim3(block), 4096, 0, dc, 0.5f, n);
  CHECK_LAUNCH("Scale with dynamic shared memory");
  CHECK(hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(c[i] == a[i] + b[i]);
  CHECK(hipFree(da));
  CHECK(hipFree(db));
  CHECK(hipFree(dc));
  puts("hip_vector_add: ok");
  return 0;
}
