// Unified virtual addressing: the device reports unifiedAddressing; cudaPointerGetAttributes tells
// device, pinned-host and ordinary host pointers apart (interior pointers too); cudaMemcpyDefault
// and cudaMemcpyAsync(..., cudaMemcpyDefault) infer the direction for every pair of pageable host,
// pinned host and device memory, at offsets; cudaMemcpy2D with cudaMemcpyDefault.
#include "rt_check.h"

#include <cstring>
#include <vector>

__global__ void Negate(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = -p[i];
}

int main() {
  int uva = 0;
  CHECK(cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, 0));
  EXPECT(uva == 1, "unified addressing %d", uva);

  const int n = 10000;
  const size_t bytes = n * sizeof(int);
  int *dev = nullptr, *dev2 = nullptr, *pinned = nullptr;
  CHECK(cudaMalloc(&dev, bytes));
  CHECK(cudaMalloc(&dev2, bytes));
  CHECK(cudaMallocHost(&pinned, bytes));
  std::vector<int> pageable(n), back(n);

  cudaPointerAttributes a;
  CHECK(cudaPointerGetAttributes(&a, dev));
  EXPECT(a.type == cudaMemoryTypeDevice, "device pointer type %d", (int)a.type);
  EXPECT(a.device == 0, "device pointer on device %d", a.device);
  EXPECT(a.devicePointer == dev, "devicePointer %p, want %p", a.devicePointer, (void*)dev);
  EXPECT(a.hostPointer == nullptr, "device memory has a host pointer %p", a.hostPointer);
  CHECK(cudaPointerGetAttributes(&a, dev + 1234));
  EXPECT(a.type == cudaMemoryTypeDevice && a.devicePointer == dev + 1234,
         "interior device pointer: type %d pointer %p", (int)a.type, a.devicePointer);
  CHECK(cudaPointerGetAttributes(&a, pinned + 5));
  EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == pinned + 5, "pinned: type %d host %p",
         (int)a.type, a.hostPointer);
  CHECK(cudaPointerGetAttributes(&a, pageable.data()));
  EXPECT(a.type == cudaMemoryTypeUnregistered, "pageable memory type %d", (int)a.type);
  EXPECT(a.devicePointer == nullptr, "pageable memory has a device pointer %p", a.devicePointer);
  EXPECT(dev != dev2 && (void*)dev != (void*)pinned, "addresses overlap");

  // pageable -> device -> device -> pinned -> pageable, all with cudaMemcpyDefault.
  for (int i = 0; i < n; ++i) pageable[i] = i * 11 - 5000;
  CHECK(cudaMemcpy(dev, pageable.data(), bytes, cudaMemcpyDefault));
  Negate<<<GridFor(n, 256), 256>>>(dev, n);
  CHECK_LAUNCH();
  CHECK(cudaMemcpy(dev2, dev, bytes, cudaMemcpyDefault));
  CHECK(cudaMemcpy(pinned, dev2, bytes, cudaMemcpyDefault));
  CHECK(cudaMemcpy(back.data(), pinned, bytes, cudaMemcpyDefault));
  for (int i = 0; i < n; ++i)
    EXPECT(back[i] == -(i * 11 - 5000), "chain: back[%d] = %d", i, back[i]);

  // pinned -> device and device -> pageable, async on a stream, at offsets.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int i = 0; i < n; ++i) pinned[i] = 3 * i;
  CHECK(cudaMemcpyAsync(dev + 100, pinned + 200, 5000 * sizeof(int), cudaMemcpyDefault, s));
  Negate<<<GridFor(5000, 256), 256, 0, s>>>(dev + 100, 5000);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(back.data(), dev + 100, 5000 * sizeof(int), cudaMemcpyDefault, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < 5000; ++i)
    EXPECT(back[i] == -3 * (i + 200), "async: back[%d] = %d", i, back[i]);

  // Host to host with cudaMemcpyDefault, pinned and pageable.
  for (int i = 0; i < n; ++i) pageable[i] = i ^ 0x3C3C;
  CHECK(cudaMemcpy(pinned, pageable.data(), bytes, cudaMemcpyDefault));
  EXPECT(memcmp(pinned, pageable.data(), bytes) == 0, "pageable -> pinned differs");

  // A 2D copy whose direction is inferred: 20 rows of 30 ints from a 50-int-wide host array.
  std::vector<int> wide(50 * 20), narrow(30 * 20, 0);
  for (int k = 0; k < 50 * 20; ++k) wide[k] = k;
  CHECK(cudaMemcpy2D(dev2, 30 * sizeof(int), wide.data(), 50 * sizeof(int), 30 * sizeof(int), 20,
                     cudaMemcpyDefault));
  CHECK(cudaMemcpy(narrow.data(), dev2, narrow.size() * sizeof(int), cudaMemcpyDefault));
  for (int r = 0; r < 20; ++r)
    for (int c = 0; c < 30; ++c)
      EXPECT(narrow[r * 30 + c] == r * 50 + c, "2D (%d,%d) = %d", r, c, narrow[r * 30 + c]);

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(dev));
  CHECK(cudaFree(dev2));
  printf("rt_unified_addressing: OK\n");
  return 0;
}
