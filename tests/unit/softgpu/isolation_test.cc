// Faults and ownership: a kernel's illegal access poisons only its own context, and no context
// can name another's memory.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::KernelTest;

class IsolationTest : public KernelTest {
 protected:
  CUresult StoreAt(CUfunction f, CUdeviceptr p, long long index, int value) {
    return Launch(f, 1, 1, {&p, &index, &value});
  }
};

TEST_F(IsolationTest, IllegalAddressIsStickyAndContained) {
  // A second context with the same module, made before the fault.
  CUcontext bystander;
  CU_ASSERT_OK(cuCtxCreate(&bystander, nullptr, 0, 0));
  CUmodule bystander_module;
  CU_ASSERT_OK(cuModuleLoadData(&bystander_module, ptx_.c_str()));
  CUfunction bystander_add;
  CU_ASSERT_OK(cuModuleGetFunction(&bystander_add, bystander_module, "vec_add"));
  CU_ASSERT_OK(cuCtxPopCurrent(nullptr));

  CUdeviceptr buffer;
  CU_ASSERT_OK(cuMemAlloc(&buffer, 256));
  CUstream named;  // made before the fault, queried after it
  CU_ASSERT_OK(cuStreamCreate(&named, CU_STREAM_NON_BLOCKING));
  CUfunction store = Function("store_at");
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(StoreAt(store, buffer, 1 << 20, 1));  // asynchronous: the launch succeeds
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("out-of-bounds"), std::string::npos) << err;
  EXPECT_NE(err.find("store_at"), std::string::npos) << err;
  EXPECT_NE(err.find("(PTX line "), std::string::npos) << err;  // where in the kernel

  CUdeviceptr p;
  int host = 0;
  CUstream s;
  CUevent e;
  CU_EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(cuMemcpyHtoD(buffer, &host, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(cuMemcpyDtoH(&host, buffer, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(StoreAt(store, buffer, 0, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(cuStreamCreate(&s, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(cuEventCreate(&e, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(cuStreamSynchronize(nullptr), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_EXPECT_EQ(cuStreamQuery(named), CUDA_ERROR_ILLEGAL_ADDRESS);  // idle, but its context is not
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);

  // The other context is unaffected.
  CU_ASSERT_OK(cuCtxPushCurrent(bystander));
  size_t free_before, total;
  CU_ASSERT_OK(cuMemGetInfo(&free_before, &total));
  std::vector<float> a = {1, 2, 3};
  CUdeviceptr da = Upload(a), dc;
  CU_ASSERT_OK(cuMemAlloc(&dc, 12));
  int n = 3;
  CU_ASSERT_OK(Launch(bystander_add, 1, 32, {&da, &da, &dc, &n}));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<float>(dc, 3), (std::vector<float>{2, 4, 6}));
  CU_ASSERT_OK(cuMemGetInfo(&free_before, &total));

  // Destroying the faulted context works and returns its memory.
  CU_ASSERT_OK(cuCtxDestroy(ctx_));
  ctx_ = nullptr;
  size_t free_after;
  CU_ASSERT_OK(cuMemGetInfo(&free_after, &total));
  EXPECT_GE(free_after, free_before + 256);
  CU_ASSERT_OK(cuCtxDestroy(bystander));
}

TEST_F(IsolationTest, NullFreedAndMisalignedAccesses) {
  CUfunction store = Function("store_at");
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(StoreAt(store, 0, 0, 1));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_ASSERT_OK(cuCtxDestroy(ctx_));

  CU_ASSERT_OK(cuCtxCreate(&ctx_, nullptr, 0, 0));
  CU_ASSERT_OK(cuModuleLoadData(&module_, ptx_.c_str()));
  store = Function("store_at");
  CUdeviceptr p;
  CU_ASSERT_OK(cuMemAlloc(&p, 64));
  CU_ASSERT_OK(StoreAt(store, p + 2, 0, 1));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_MISALIGNED_ADDRESS);
  CU_ASSERT_OK(cuCtxDestroy(ctx_));

  CU_ASSERT_OK(cuCtxCreate(&ctx_, nullptr, 0, 0));
  CU_ASSERT_OK(cuModuleLoadData(&module_, ptx_.c_str()));
  store = Function("store_at");
  CU_ASSERT_OK(cuMemAlloc(&p, 64));
  CU_ASSERT_OK(cuMemFree(p));
  CU_ASSERT_OK(StoreAt(store, p, 0, 1));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
}

TEST_F(IsolationTest, ForeignPointersAreRejected) {
  CUdeviceptr mine;
  CU_ASSERT_OK(cuMemAlloc(&mine, 64));
  CU_ASSERT_OK(cuMemsetD32(mine, 0x01020304, 16));
  CUfunction my_store = Function("store_at");

  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  int host = 0;
  CU_EXPECT_EQ(cuMemcpyHtoD(mine, &host, 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyDtoH(&host, mine, 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemsetD8(mine, 0, 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemFree(mine), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr theirs;
  CU_ASSERT_OK(cuMemAlloc(&theirs, 64));  // refusals are not sticky
  CU_EXPECT_EQ(cuMemcpyDtoD(theirs, mine, 4), CUDA_ERROR_INVALID_VALUE);
  // A function of the first context cannot be launched here.
  CU_EXPECT_EQ(StoreAt(my_store, theirs, 0, 1), CUDA_ERROR_INVALID_HANDLE);
  // A kernel of this context that dereferences the foreign pointer faults.
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx_.c_str()));
  CUfunction store;
  CU_ASSERT_OK(cuModuleGetFunction(&store, m, "store_at"));
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(StoreAt(store, mine, 0, 99));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  CU_ASSERT_OK(cuCtxDestroy(other));

  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  EXPECT_EQ(Download<int>(mine, 1)[0], 0x01020304);
  CU_ASSERT_OK(cuCtxSynchronize());
}

// softgpu's extension (softgpu/memory.h): kernels reach no page-locked memory, which rgpu's
// server asks for; CUDA's unified addressing, the default, lets every context's kernels reach
// every context's. Copies reach it either way.
extern "C" CUresult softgpuSetKernelHostAccess(int reach);

TEST_F(IsolationTest, KernelsReachPageLockedMemoryUnlessTheProcessSaysOtherwise) {
  int* host = nullptr;
  CU_ASSERT_OK(cuMemHostAlloc(reinterpret_cast<void**>(&host), 16, 0));
  memset(host, 0, 16);
  const CUdeviceptr at = reinterpret_cast<CUdeviceptr>(host);
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx_.c_str()));
  CUfunction store;
  CU_ASSERT_OK(cuModuleGetFunction(&store, m, "store_at"));
  CU_ASSERT_OK(StoreAt(store, at, 0, 7));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(host[0], 7);
  CU_ASSERT_OK(softgpuSetKernelHostAccess(0));
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(StoreAt(store, at, 1, 8));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(host[1], 0);
  CU_ASSERT_OK(cuCtxDestroy(other));
  // Nor does the context that allocated it; a copy from it still works.
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  CUdeviceptr device;
  CU_ASSERT_OK(cuMemAlloc(&device, 16));
  CU_ASSERT_OK(cuMemcpyHtoD(device, host, 16));
  EXPECT_EQ(Download<int>(device, 1)[0], 7);
  CU_ASSERT_OK(cuMemFree(device));
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(StoreAt(Function("store_at"), at, 2, 9));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(host[2], 0);
  CU_ASSERT_OK(softgpuSetKernelHostAccess(1));
  CU_ASSERT_OK(cuMemFreeHost(host));
}

// Page-locked memory goes with the context it was allocated in, as CUDA frees it: a server that
// stages copies in each session's context does not keep every session's bytes.
TEST_F(IsolationTest, PageLockedMemoryGoesWithItsContext) {
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  void* host = nullptr;
  CU_ASSERT_OK(cuMemHostAlloc(&host, 4096, 0));
  void* registered = malloc(4096);
  CU_ASSERT_OK(cuMemHostRegister(registered, 4096, 0));
  unsigned flags = 0;
  CU_ASSERT_OK(cuMemHostGetFlags(&flags, host));
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  CU_EXPECT_EQ(cuMemHostGetFlags(&flags, host), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemHostUnregister(registered), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  free(registered);
  // This context's own is untouched.
  void* mine = nullptr;
  CU_ASSERT_OK(cuMemHostAlloc(&mine, 64, 0));
  CU_ASSERT_OK(cuMemHostGetFlags(&flags, mine));
  CU_ASSERT_OK(cuMemFreeHost(mine));
}

TEST_F(IsolationTest, ConcurrentContextsOnManyThreads) {
  // Tenants on their own threads: each creates a context, runs kernels and copies, and one of
  // them faults; everyone else's results stay right.
  std::atomic<int> failures{0};
  auto tenant = [&](int id) {
    CUcontext ctx;
    if (cuCtxCreate(&ctx, nullptr, 0, 0) != CUDA_SUCCESS) return failures.fetch_add(1), void();
    CUmodule m;
    CUfunction add, store;
    bool ok = cuModuleLoadData(&m, ptx_.c_str()) == CUDA_SUCCESS &&
              cuModuleGetFunction(&add, m, "vec_add") == CUDA_SUCCESS &&
              cuModuleGetFunction(&store, m, "store_at") == CUDA_SUCCESS;
    const int n = 4096;
    std::vector<float> a(n, static_cast<float>(id)), c(n);
    CUdeviceptr da = 0, dc = 0;
    ok = ok && cuMemAlloc(&da, n * 4) == CUDA_SUCCESS && cuMemAlloc(&dc, n * 4) == CUDA_SUCCESS &&
         cuMemcpyHtoD(da, a.data(), n * 4) == CUDA_SUCCESS;
    CUstream s;
    ok = ok && cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
    for (int round = 0; ok && round < 20; ++round) {
      int count = n;
      void* args[] = {&da, &da, &dc, &count};
      ok = cuLaunchKernel(add, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS &&
           cuMemcpyDtoHAsync(c.data(), dc, n * 4, s) == CUDA_SUCCESS &&
           cuStreamSynchronize(s) == CUDA_SUCCESS;
      for (int i = 0; ok && i < n; ++i) ok = c[i] == 2.0f * id;
    }
    if (id == 0 && ok) {  // the faulting tenant
      long long index = 1 << 24;
      int value = 1;
      void* args[] = {&da, &index, &value};
      ok = cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS &&
           cuStreamSynchronize(s) == CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    if (!ok) failures.fetch_add(1);
    if (cuCtxDestroy(ctx) != CUDA_SUCCESS) failures.fetch_add(1);
  };
  testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int id = 0; id < 6; ++id) threads.emplace_back(tenant, id);
  for (std::thread& t : threads) t.join();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(IsolationTest, DestroyingAContextStopsARunawayKernel) {
  CUdeviceptr flag;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(Launch(Function("spin_until"), 4, 64, {&flag}, 0, s));
  CU_ASSERT_OK(Launch(Function("spin_until"), 4, 64, {&flag}, 0, s));  // queued behind it
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  const auto start = std::chrono::steady_clock::now();
  CU_ASSERT_OK(cuCtxDestroy(ctx_));
  ctx_ = nullptr;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
