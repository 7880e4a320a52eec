// The asynchronous pipeline keeps CUDA's semantics: launches and copies from several host threads
// on their own streams all execute exactly once and in stream order; device-to-host copies into
// pinned memory land in stream order and are complete after synchronization; a kernel's fault is
// reported at the next synchronizing call, not at the (posted) launch.
#include <thread>

#include "check.h"

static CUfunction g_add, g_set, g_read;

static void Worker(CUcontext ctx, CUdeviceptr counter, int id, int launches) {
  CHECK(cuCtxSetCurrent(ctx));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < launches; ++i) {
    int value = id + 1;
    void* args[] = {&counter, &value};
    CHECK(cuLaunchKernel(g_add, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr));
  }
  CHECK(cuStreamSynchronize(s));
  CHECK(cuStreamDestroy(s));
}

int main() {
  CUcontext ctx = InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CHECK(cuModuleGetFunction(&g_add, m, "add_to"));
  CHECK(cuModuleGetFunction(&g_set, m, "set_all"));
  CHECK(cuModuleGetFunction(&g_read, m, "read_at"));

  // Four threads, 500 launches each: every launch runs exactly once.
  CUdeviceptr counter;
  CHECK(cuMemAlloc(&counter, sizeof(int)));
  CHECK(cuMemsetD32(counter, 0, 1));
  const int threads = 4, launches = 500;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(Worker, ctx, counter, t, launches);
  for (auto& t : pool) t.join();
  int total = 0;
  CHECK(cuMemcpyDtoH(&total, counter, sizeof total));
  EXPECT_TRUE(total == launches * (1 + 2 + 3 + 4));

  // Stream order between kernels and pinned device-to-host copies: each round overwrites the
  // buffer, then copies it out; every copy must see its own round's value.
  const int n = 4096, rounds = 16;
  CUdeviceptr d;
  CHECK(cuMemAlloc(&d, n * sizeof(int)));
  int* pinned = nullptr;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned), rounds * n * sizeof(int)));
  CUstream s;
  CHECK(cuStreamCreate(&s, 0));
  for (int r = 0; r < rounds; ++r) {
    int value = 1000 + r, count = n;
    void* args[] = {&d, &value, &count};
    CHECK(cuLaunchKernel(g_set, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    CHECK(cuMemcpyDtoHAsync(pinned + r * n, d, n * sizeof(int), s));
  }
  CHECK(cuStreamSynchronize(s));
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < n; ++i) EXPECT_TRUE(pinned[r * n + i] == 1000 + r);
  }

  // The same with copies large enough to move straight between the network and device memory
  // (rgpu-server's direct path, >= 1 MiB): each round a kernel fills the buffer, a host-to-device
  // copy on the same stream overwrites it, and a device-to-host copy reads it back; the copies
  // must run after the kernel (the read sees the host's data, not the kernel's). Then the legacy
  // default stream's order: a synchronous copy follows a kernel on a blocking stream.
  const int big_n = 512 * 1024, big_rounds = 4;
  const size_t big_bytes = big_n * sizeof(int);
  CUdeviceptr big;
  CHECK(cuMemAlloc(&big, big_bytes));
  int *src = nullptr, *dst = nullptr;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&src), big_rounds * big_bytes));
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&dst), big_rounds * big_bytes));
  for (int r = 0; r < big_rounds; ++r) {
    for (int i = 0; i < big_n; ++i) src[r * big_n + i] = 2000 + r + i;
  }
  for (int r = 0; r < big_rounds; ++r) {
    int value = 1000 + r, count = big_n;
    void* args[] = {&big, &value, &count};
    CHECK(cuLaunchKernel(g_set, big_n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    CHECK(cuMemcpyHtoDAsync(big, src + r * big_n, big_bytes, s));
    CHECK(cuMemcpyDtoHAsync(dst + r * big_n, big, big_bytes, s));
  }
  CHECK(cuStreamSynchronize(s));
  for (int r = 0; r < big_rounds; ++r) {
    for (int i = 0; i < big_n; ++i) EXPECT_TRUE(dst[r * big_n + i] == 2000 + r + i);
  }
  {
    int value = 7, count = big_n;
    void* args[] = {&big, &value, &count};
    CHECK(cuLaunchKernel(g_set, big_n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    CHECK(cuMemcpyHtoD(big, src, big_bytes));
    CHECK(cuMemcpyDtoH(dst, big, big_bytes));
    for (int i = 0; i < big_n; ++i) EXPECT_TRUE(dst[i] == 2000 + i);
    CHECK(cuLaunchKernel(g_set, big_n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    CHECK(cuMemcpyDtoH(dst, big, big_bytes));
    for (int i = 0; i < big_n; ++i) EXPECT_TRUE(dst[i] == 7);
  }
  CHECK(cuMemFreeHost(src));
  CHECK(cuMemFreeHost(dst));
  CHECK(cuMemFree(big));

  // A faulting kernel: its launch is posted and succeeds; the fault surfaces at the next
  // synchronizing call, and from then on every call on the context reports it.
  long long offset = 1ll << 32;
  CUdeviceptr out = d;
  void* args[] = {&d, &offset, &out};
  EXPECT_TRUE(cuLaunchKernel(g_read, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);
  EXPECT_TRUE(cuStreamSynchronize(s) == CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_TRUE(cuMemsetD32(d, 0, 1) == CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_TRUE(cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(cuMemFreeHost(pinned));
  CHECK(cuCtxDestroy(ctx));
  printf("pipeline: OK\n");
  return 0;
}
