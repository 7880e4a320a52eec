// Stream-ordered allocation through the runtime: cudaMallocAsync / cudaFreeAsync on streams,
// the default pool's release threshold and statistics, a pool of its own with
// cudaMallocFromPoolAsync, memory reused across streams ordered by an event, and the data right
// every time.
#include <cstdint>
#include <vector>

#include "rt_check.h"

__global__ void Fill(int* v, int n, int value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = value + i;
}

__global__ void AddInto(const int* a, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += a[i];
}

int main() {
  int supported = 0;
  CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
  if (!supported) {
    fprintf(stderr, "memory pools not supported\n");
    return 1;
  }
  const int n = 1 << 16;
  const size_t bytes = n * sizeof(int);
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));

  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  cudaMemPool_t current;
  CHECK(cudaDeviceGetMemPool(&current, 0));
  if (current != pool) return 1;
  uint64_t threshold = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

  int* out = nullptr;
  CHECK(cudaMalloc(&out, bytes));
  CHECK(cudaMemset(out, 0, bytes));
  for (int round = 0; round < 4; ++round) {
    int* a = nullptr;
    CHECK(cudaMallocAsync(&a, bytes, s1));
    Fill<<<n / 256, 256, 0, s1>>>(a, n, round * 1000);
    CHECK_LAUNCH();
    cudaEvent_t filled;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    CHECK(cudaEventRecord(filled, s1));
    CHECK(cudaStreamWaitEvent(s2, filled, 0));
    AddInto<<<n / 256, 256, 0, s2>>>(a, out, n);
    CHECK_LAUNCH();
    CHECK(cudaFreeAsync(a, s2));  // freed on another stream than it was allocated on
    CHECK(cudaEventDestroy(filled));
  }
  CHECK(cudaStreamSynchronize(s2));
  std::vector<int> host(n);
  CHECK(cudaMemcpy(host.data(), out, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const int want = 4 * i + (0 + 1000 + 2000 + 3000);
    if (host[i] != want) {
      fprintf(stderr, "element %d: %d, want %d\n", i, host[i], want);
      return 1;
    }
  }
  // With the threshold at its maximum, the pool kept its memory past the synchronization.
  uint64_t reserved = 0, used = 1;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  if (reserved < bytes || used != 0) {
    fprintf(stderr, "reserved %llu, used %llu\n", (unsigned long long)reserved,
            (unsigned long long)used);
    return 1;
  }
  CHECK(cudaMemPoolTrimTo(pool, 0));
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  if (reserved != 0) return 1;

  // A pool of its own.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t own;
  CHECK(cudaMemPoolCreate(&own, &props));
  int* b = nullptr;
  CHECK(cudaMallocFromPoolAsync(&b, bytes, own, s1));
  Fill<<<n / 256, 256, 0, s1>>>(b, n, 7);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(host.data(), b, bytes, cudaMemcpyDeviceToHost, s1));
  CHECK(cudaFreeAsync(b, s1));
  CHECK(cudaFreeAsync(nullptr, s1));  // a null pointer frees nothing, as cuSPARSE relies on
  CHECK(cudaStreamSynchronize(s1));
  for (int i = 0; i < n; ++i) {
    if (host[i] != 7 + i) return 1;
  }
  CHECK(cudaMemPoolDestroy(own));
  // Shareable handles: POSIX file descriptors are offered (driver_ipc shares them between
  // processes); a pool made without a handle type exports none; other types are refused.
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  CHECK(cudaMemPoolCreate(&own, &props));
  CHECK(cudaMemPoolDestroy(own));
  props.handleTypes = cudaMemHandleTypeNone;
  CHECK(cudaMemPoolCreate(&own, &props));
  int fd = -1;
  EXPECT_ERROR(
      cudaMemPoolExportToShareableHandle(&fd, own, cudaMemHandleTypePosixFileDescriptor, 0),
      cudaErrorInvalidValue);
  CHECK(cudaMemPoolDestroy(own));
  props.handleTypes = cudaMemHandleTypeFabric;
  EXPECT_ERROR(cudaMemPoolCreate(&own, &props), cudaErrorNotSupported);

  CHECK(cudaFree(out));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  printf("rt_mem_pools: OK\n");
  return 0;
}
