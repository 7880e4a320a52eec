// Managed and mapped memory through the runtime, with CUDA's rules for a device without
// concurrent managed access: cudaMallocManaged memory written on the host, updated by kernels,
// read back on the host after synchronizing (several rounds, some pages untouched in between);
// a __managed__ array shared by host code and kernels;
// prefetches both ways; hints read back with cudaMemRangeGetAttribute; the pointer's attributes;
// cudaMemcpy into and out of managed memory; mapped pinned memory (cudaHostAlloc with
// cudaHostAllocMapped) that a kernel reads and writes in place (zero copy); each result compared
// with the CPU.
#include <vector>

#include "rt_check.h"

// A __managed__ variable: the same array for host code and kernels.
__managed__ int tally[8] = {1, 2, 3, 4, 5, 6, 7, 8};

__global__ void Tally(int* through_pointer) {
  atomicAdd(&tally[threadIdx.x % 8], 1);
  if (threadIdx.x == 0) atomicAdd(&through_pointer[7], 1000);  // the host pointer works there too
}

__global__ void AddRound(int* data, size_t n, int round) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    data[i] = data[i] * 2 + round;
  }
}

__global__ void Saxpy(const float* x, float* y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  int managed = 0, concurrent = -1, can_map = 0;
  CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
  CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0));
  CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, 0));
  EXPECT(managed == 1 && concurrent == 0 && can_map == 1,
         "managed %d, concurrent managed access %d, can map host memory %d", managed, concurrent,
         can_map);

  // The __managed__ variable: initial values on the host, kernels and host update it in turn.
  EXPECT(tally[0] == 1 && tally[7] == 8, "initial tally %d %d", tally[0], tally[7]);
  tally[0] = 100;
  Tally<<<2, 64>>>(tally);
  CHECK_SYNC();
  for (int i = 0; i < 8; ++i) {
    const int expect = (i == 0 ? 100 : i + 1) + 16 + (i == 7 ? 2000 : 0);
    EXPECT(tally[i] == expect, "tally[%d] = %d, want %d", i, tally[i], expect);
  }

  // Host writes, kernels update, host reads: three rounds.
  const size_t n = 3 << 20;  // 12 MiB of ints
  int* data = nullptr;
  CHECK(cudaMallocManaged(&data, n * sizeof(int)));
  std::vector<int> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = data[i] = static_cast<int>(i % 1000) - 500;
  for (int round = 1; round <= 3; ++round) {
    AddRound<<<64, 256>>>(data, n, round);
    CHECK_SYNC();
    for (size_t i = 0; i < n; ++i) want[i] = want[i] * 2 + round;
    // Round 2 reads only every 1000th element: most pages stay on the device.
    const size_t step = round == 2 ? 1000 : 1;
    for (size_t i = 0; i < n; i += step) {
      if (data[i] != want[i]) {
        fprintf(stderr, "round %d: data[%zu] = %d, want %d\n", round, i, data[i], want[i]);
        return 1;
      }
    }
    if (round == 2) {  // the host changes a few elements before the next round
      for (size_t i = 7; i < n; i += 4099) want[i] = data[i] = -static_cast<int>(i);
    }
  }

  // Pointer attributes.
  cudaPointerAttributes attributes;
  CHECK(cudaPointerGetAttributes(&attributes, data + 10));
  EXPECT(attributes.type == cudaMemoryTypeManaged, "managed memory's type is %d",
         static_cast<int>(attributes.type));
  EXPECT(attributes.devicePointer == data + 10 && attributes.hostPointer == data + 10,
         "managed memory has one address");

  // Prefetches: to the device (the host's writes go with it), then back to the host.
  for (size_t i = 0; i < n; i += 3) want[i] = data[i] = 11;
  cudaMemLocation device = {};
  device.type = cudaMemLocationTypeDevice;
  device.id = 0;
  cudaMemLocation host = {};
  host.type = cudaMemLocationTypeHost;
  CHECK(cudaMemPrefetchAsync(data, n * sizeof(int), device, 0, 0));
  AddRound<<<64, 256>>>(data, n, 0);
  CHECK(cudaGetLastError());
  CHECK(cudaMemPrefetchAsync(data, n * sizeof(int), host, 0, 0));
  CHECK(cudaDeviceSynchronize());
  for (size_t i = 0; i < n; ++i) want[i] *= 2;
  ExpectEqualArrays("after prefetches", data, want.data(), n);
  int last = 0;
  CHECK(cudaMemRangeGetAttribute(&last, sizeof last, cudaMemRangeAttributeLastPrefetchLocation,
                                 data, n * sizeof(int)));
  EXPECT(last == cudaCpuDeviceId, "last prefetch location %d", last);

  // Hints read back.
  CHECK(cudaMemAdvise(data, 4096 * 4, cudaMemAdviseSetReadMostly, device));
  int read_mostly = 0;
  CHECK(cudaMemRangeGetAttribute(&read_mostly, sizeof read_mostly, cudaMemRangeAttributeReadMostly,
                                 data, 4096 * 4));
  EXPECT(read_mostly == 1, "read mostly %d", read_mostly);
  CHECK(cudaMemRangeGetAttribute(&read_mostly, sizeof read_mostly, cudaMemRangeAttributeReadMostly,
                                 data, n * sizeof(int)));
  EXPECT(read_mostly == 0, "read mostly over a mixed range %d", read_mostly);

  // cudaMemcpy into and out of managed memory.
  std::vector<int> ones(1000, 1), back(1000, 0);
  CHECK(cudaMemcpy(data + 500, ones.data(), 1000 * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(back.data(), data + 400, 1000 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 1000; ++i) {
    const int expect = i >= 100 ? 1 : want[400 + i];
    EXPECT(back[i] == expect, "copied back[%d] = %d, want %d", i, back[i], expect);
  }
  EXPECT(data[600] == 1 && data[499] == want[499], "host view after copies: %d %d", data[600],
         data[499]);
  // 2D copies whose host side is managed memory a kernel just wrote (explicit kinds): the copy
  // takes the device's bytes, never the host's stale ones.
  for (int i = 0; i < 64; ++i) data[i] = 3500 + i;
  AddRound<<<1, 64>>>(data, 64, 1000 - 64);  // 2 * (3500 + i) + 936 = 7936 + 2i
  CHECK_SYNC();
  int* pitched = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, 8 * sizeof(int), 8));
  CHECK(cudaMemcpy2D(pitched, pitch, data, 8 * sizeof(int), 8 * sizeof(int), 8,
                     cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2D(data + 100, 8 * sizeof(int), pitched, pitch, 8 * sizeof(int), 8,
                     cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; ++i) {
    EXPECT(data[100 + i] == 7936 + 2 * i, "2D copy [%d] = %d", i, data[100 + i]);
  }
  CHECK(cudaFree(pitched));
  CHECK(cudaFree(data));

  // Mapped pinned memory: the kernel reads x and writes y in place.
  const int m = 100000;
  float *x = nullptr, *y = nullptr;
  CHECK(cudaHostAlloc(&x, m * sizeof(float), cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&y, m * sizeof(float), cudaHostAllocMapped));
  for (int i = 0; i < m; ++i) {
    x[i] = 0.5f * i;
    y[i] = 3.0f;
  }
  float *dx = nullptr, *dy = nullptr;
  CHECK(cudaHostGetDevicePointer(&dx, x, 0));
  CHECK(cudaHostGetDevicePointer(&dy, y, 0));
  Saxpy<<<(m + 255) / 256, 256>>>(dx, dy, 2.0f, m);
  CHECK_SYNC();
  for (int i = 0; i < m; ++i) {
    const float expect = 2.0f * (0.5f * i) + 3.0f;
    EXPECT(y[i] == expect, "y[%d] = %g, want %g", i, y[i], expect);
  }
  unsigned flags = 0;
  CHECK(cudaHostGetFlags(&flags, x));
  EXPECT(flags & cudaHostAllocMapped, "flags %u", flags);
  CHECK(cudaFreeHost(x));
  CHECK(cudaFreeHost(y));
  printf("rt_managed: OK\n");
  return 0;
}
