// The cache and shared-memory configuration a program may set and read back: the device's cache
// preference round-trips (cudaDeviceSetCacheConfig / cudaDeviceGetCacheConfig), bad values are
// refused, function preferences and the shared memory bank size are accepted (four-byte banks on
// every device rgpu serves), and a kernel launched afterwards computes as before.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "rt_check.h"

__global__ void Square(int* v) { v[threadIdx.x] = threadIdx.x * threadIdx.x; }

int main() {
  cudaFuncCache cache = cudaFuncCachePreferL1;
  CHECK(cudaDeviceGetCacheConfig(&cache));
  EXPECT(cache == cudaFuncCachePreferNone, "initial preference %d", (int)cache);
  CHECK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
  CHECK(cudaDeviceGetCacheConfig(&cache));
  EXPECT(cache == cudaFuncCachePreferShared, "preference read back %d", (int)cache);
  EXPECT_ERROR(cudaDeviceSetCacheConfig(static_cast<cudaFuncCache>(17)), cudaErrorInvalidValue);
  (void)cudaGetLastError();  // clears that error
  CHECK(cudaFuncSetCacheConfig(Square, cudaFuncCachePreferL1));

  cudaSharedMemConfig banks = cudaSharedMemBankSizeEightByte;
  CHECK(cudaDeviceGetSharedMemConfig(&banks));
  EXPECT(banks == cudaSharedMemBankSizeFourByte, "bank size %d", (int)banks);
  CHECK(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte));
  CHECK(cudaFuncSetSharedMemConfig(Square, cudaSharedMemBankSizeFourByte));

  int* d = nullptr;
  CHECK(cudaMalloc(&d, 32 * sizeof(int)));
  Square<<<1, 32>>>(d);
  CHECK_SYNC();
  int h[32];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; ++i) EXPECT(h[i] == i * i, "element %d: %d", i, h[i]);
  CHECK(cudaFree(d));
  printf("rt_cache_config: OK\n");
  return 0;
}
