// CUDA IPC between two contexts of one process (each context plays the part of a CUDA process):
// memory handles (cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle) and event
// handles (cuIpcGetEventHandle / cuIpcOpenEventHandle).
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::KernelFile;

// A host function that blocks its stream until the test opens it.
class Gate {
 public:
  static void Wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    std::unique_lock lock(g->mu_);
    g->cv_.wait(lock, [&] { return g->open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Two contexts on device 0: A (the exporter) and B (the importer). Neither is current after
// SetUp; Use() makes one current on the calling thread.
class IpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CU_ASSERT_OK(cuInit(0));
    CU_ASSERT_OK(cuCtxCreate(&a_, nullptr, 0, 0));
    CU_ASSERT_OK(cuCtxCreate(&b_, nullptr, 0, 0));
    CU_ASSERT_OK(cuCtxSetCurrent(nullptr));
    CU_ASSERT_OK(cuCtxSetCurrent(nullptr));
  }
  void TearDown() override {
    for (CUcontext c : {c_, b_, a_}) {
      if (c != nullptr) {
        EXPECT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);
      }
    }
  }

  void Use(CUcontext c) { ASSERT_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS); }

  // Loads test_kernels.ptx into the current context; false if the kernels were not built.
  bool LoadKernels(CUmodule* m) {
    const std::string ptx = KernelFile("test_kernels.ptx");
    if (ptx.empty()) return false;
    EXPECT_EQ(cuModuleLoadData(m, ptx.c_str()), CUDA_SUCCESS);
    return true;
  }
  static CUfunction Function(CUmodule m, const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, m, name), CUDA_SUCCESS) << name;
    return f;
  }
  static CUresult Launch(CUfunction f, unsigned grid, unsigned block, std::vector<void*> args,
                         CUstream stream = nullptr) {
    return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, args.data(), nullptr);
  }

  // Allocates `count` ints in the current context holding first, first + 1, ...
  CUdeviceptr AllocInts(size_t count, int first) {
    std::vector<int> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = first + static_cast<int>(i);
    CUdeviceptr d = 0;
    EXPECT_EQ(cuMemAlloc(&d, count * sizeof(int)), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyHtoD(d, host.data(), count * sizeof(int)), CUDA_SUCCESS);
    return d;
  }
  static std::vector<int> Read(CUdeviceptr d, size_t count) {
    std::vector<int> host(count, -1);
    EXPECT_EQ(cuMemcpyDtoH(host.data(), d, count * sizeof(int)), CUDA_SUCCESS);
    return host;
  }
  static std::vector<int> Ints(size_t count, int first) {
    std::vector<int> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = first + static_cast<int>(i);
    return v;
  }
  static size_t FreeBytes() {
    size_t free = 0, total = 0;
    EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    return free;
  }

  CUcontext a_ = nullptr;
  CUcontext b_ = nullptr;
  CUcontext c_ = nullptr;  // a third context, for the tests that need one
};

TEST_F(IpcTest, DeviceReportsIpcEvents) {
  int v = -1;
  CU_ASSERT_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0));
  EXPECT_EQ(v, 1);
}

TEST_F(IpcTest, OpenedMemoryIsTheExportersMemory) {
  constexpr size_t kCount = 1000;
  Use(a_);
  const CUdeviceptr shared = AllocInts(kCount, 1);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  // Exporting again gives the same handle.
  CUipcMemHandle again;
  CU_ASSERT_OK(cuIpcGetMemHandle(&again, shared));
  EXPECT_EQ(memcmp(&handle, &again, sizeof(handle)), 0);

  Use(b_);
  // Before opening, B does not own the address.
  int probe;
  CU_EXPECT_EQ(cuMemcpyDtoH(&probe, shared, 4), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr opened = 0;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  EXPECT_EQ(opened, shared);  // the same device address in both contexts
  EXPECT_EQ(Read(opened, kCount), Ints(kCount, 1));
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_ASSERT_OK(cuMemGetAddressRange(&base, &size, opened + 40));
  EXPECT_EQ(base, shared);
  EXPECT_EQ(size, kCount * sizeof(int));
  // B writes; A sees it.
  const std::vector<int> fresh = Ints(kCount, 5000);
  CU_ASSERT_OK(cuMemcpyHtoD(opened, fresh.data(), kCount * sizeof(int)));
  CU_ASSERT_OK(cuMemsetD32(opened + 4 * 10, 0xdead, 1));
  Use(a_);
  std::vector<int> want = fresh;
  want[10] = 0xdead;
  EXPECT_EQ(Read(shared, kCount), want);
  // A device-to-device copy in B between its own memory and the opened memory.
  Use(b_);
  const CUdeviceptr own = AllocInts(kCount, -100);
  CU_ASSERT_OK(cuMemcpyDtoD(opened, own, 16));
  Use(a_);
  EXPECT_EQ(Read(shared, 4), Ints(4, -100));
  Use(b_);
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  CU_EXPECT_EQ(cuMemcpyDtoH(&probe, shared, 4), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemFree(own));
  Use(a_);
  EXPECT_EQ(Read(shared, 4), Ints(4, -100));  // closing never touches the exporter's memory
  CU_ASSERT_OK(cuMemFree(shared));
}

TEST_F(IpcTest, KernelsReadAndWriteThroughTheOpenedMemory) {
  Use(b_);
  CUmodule module;
  if (!LoadKernels(&module)) GTEST_SKIP() << "test kernels were not built (no nvcc)";
  constexpr int kCount = 300;
  Use(a_);
  std::vector<float> xs(kCount);
  for (int i = 0; i < kCount; ++i) xs[i] = static_cast<float>(i);
  CUdeviceptr shared;
  CU_ASSERT_OK(cuMemAlloc(&shared, kCount * sizeof(float)));
  CU_ASSERT_OK(cuMemcpyHtoD(shared, xs.data(), kCount * sizeof(float)));
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));

  Use(b_);
  CUdeviceptr opened;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  // Read: out = shared + shared, in B's own memory.
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, kCount * sizeof(float)));
  int n = kCount;
  CU_ASSERT_OK(Launch(Function(module, "vec_add"), 3, 128, {&opened, &opened, &out, &n}));
  std::vector<float> got(kCount);
  CU_ASSERT_OK(cuMemcpyDtoH(got.data(), out, kCount * sizeof(float)));
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(got[i], 2.0f * i) << i;
  // Write: shared = 3 * out + shared = 7 * x, seen by A.
  float three = 3;
  CU_ASSERT_OK(Launch(Function(module, "saxpy"), 2, 64, {&three, &out, &opened, &n}));
  CU_ASSERT_OK(cuCtxSynchronize());
  Use(a_);
  CU_ASSERT_OK(cuMemcpyDtoH(got.data(), shared, kCount * sizeof(float)));
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(got[i], 7.0f * i) << i;
  Use(b_);
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  // After closing, a kernel's access is a fault in B.
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(Launch(Function(module, "vec_add"), 3, 128, {&opened, &opened, &out, &n}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
}

TEST_F(IpcTest, OpenTwiceIsOneMappingWithTwoReferences) {
  Use(a_);
  const CUdeviceptr shared = AllocInts(64, 7);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  Use(b_);
  CUdeviceptr first = 0, second = 0;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&first, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  CU_ASSERT_OK(cuIpcOpenMemHandle(&second, handle, 0));
  EXPECT_EQ(first, shared);
  EXPECT_EQ(second, first);
  CU_ASSERT_OK(cuIpcCloseMemHandle(first));
  EXPECT_EQ(Read(first, 64), Ints(64, 7));  // one reference left
  CU_ASSERT_OK(cuIpcCloseMemHandle(second));
  int probe;
  CU_EXPECT_EQ(cuMemcpyDtoH(&probe, first, 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcCloseMemHandle(first), CUDA_ERROR_INVALID_VALUE);
  // It can be opened again afterwards.
  CUdeviceptr third = 0;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&third, handle, 0));
  EXPECT_EQ(third, shared);
  EXPECT_EQ(Read(third, 64), Ints(64, 7));
  CU_ASSERT_OK(cuIpcCloseMemHandle(third));
}

TEST_F(IpcTest, CloseAndFreeRefuseWhatIsNotAnOpenedMapping) {
  Use(a_);
  const CUdeviceptr shared = AllocInts(64, 1);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  // The exporter cannot close its own allocation as if opened.
  CU_EXPECT_EQ(cuIpcCloseMemHandle(shared), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(shared, 64), Ints(64, 1));
  Use(b_);
  const CUdeviceptr own = AllocInts(16, 100);
  CU_EXPECT_EQ(cuIpcCloseMemHandle(own), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcCloseMemHandle(0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcCloseMemHandle(shared), CUDA_ERROR_INVALID_VALUE);  // not opened yet
  EXPECT_EQ(Read(own, 16), Ints(16, 100));
  CUdeviceptr opened;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  CU_EXPECT_EQ(cuIpcCloseMemHandle(opened + 4), CUDA_ERROR_INVALID_VALUE);  // not the base
  // Opened memory is released with cuIpcCloseMemHandle, never cuMemFree.
  CU_EXPECT_EQ(cuMemFree(opened), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(opened, 64), Ints(64, 1));
  // Memory opened from another context is not exported again.
  CUipcMemHandle reexport;
  CU_EXPECT_EQ(cuIpcGetMemHandle(&reexport, opened), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  Use(a_);
  EXPECT_EQ(Read(shared, 64), Ints(64, 1));
}

TEST_F(IpcTest, GetMemHandleTakesOnlyTheBaseOfDeviceAllocations) {
  Use(a_);
  CUipcMemHandle handle;
  const CUdeviceptr p = AllocInts(64, 0);
  CU_EXPECT_EQ(cuIpcGetMemHandle(nullptr, p), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcGetMemHandle(&handle, p + 256), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcGetMemHandle(&handle, 0), CUDA_ERROR_INVALID_VALUE);
  // Another context's allocation.
  Use(b_);
  CU_EXPECT_EQ(cuIpcGetMemHandle(&handle, p), CUDA_ERROR_INVALID_VALUE);
  // Pitched memory is exportable; a module variable is not memory the caller allocated.
  CUdeviceptr pitched;
  size_t pitch;
  CU_ASSERT_OK(cuMemAllocPitch(&pitched, &pitch, 100, 4, 4));
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, pitched));
  CU_ASSERT_OK(cuMemFree(pitched));
  CUmodule module;
  if (LoadKernels(&module)) {
    CUdeviceptr global;
    size_t bytes;
    CU_ASSERT_OK(cuModuleGetGlobal(&global, &bytes, module, "device_counter"));
    CU_EXPECT_EQ(cuIpcGetMemHandle(&handle, global), CUDA_ERROR_INVALID_VALUE);
  }
  // No current context.
  CU_ASSERT_OK(cuCtxSetCurrent(nullptr));
  CU_EXPECT_EQ(cuIpcGetMemHandle(&handle, p), CUDA_ERROR_INVALID_CONTEXT);
  CUdeviceptr opened;
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, handle, 0), CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuIpcCloseMemHandle(p), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(IpcTest, OpeningInTheExportingContextIsRefused) {
  Use(a_);
  const CUdeviceptr shared = AllocInts(16, 0);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  CUdeviceptr opened = 0;
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, handle, 0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(opened, 0u);
  // Still exported: B can open it.
  Use(b_);
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
}

TEST_F(IpcTest, ForgedAndAlteredHandlesAreRefused) {
  Use(a_);
  const CUdeviceptr shared = AllocInts(16, 3);
  const CUdeviceptr other = AllocInts(16, 4);
  CUipcMemHandle handle, other_handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  CU_ASSERT_OK(cuIpcGetMemHandle(&other_handle, other));
  EXPECT_NE(memcmp(&handle, &other_handle, sizeof(handle)), 0);
  Use(b_);
  CUdeviceptr opened = 0;
  // Random bytes.
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 100; ++trial) {
    CUipcMemHandle forged;
    for (char& c : forged.reserved) c = static_cast<char>(rng());
    CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, forged, 0), CUDA_ERROR_INVALID_VALUE);
  }
  CUipcMemHandle zeros{};
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, zeros, 0), CUDA_ERROR_INVALID_VALUE);
  // The valid handle with any one bit flipped.
  for (size_t byte = 0; byte < sizeof(handle.reserved); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      CUipcMemHandle altered = handle;
      altered.reserved[byte] = static_cast<char>(altered.reserved[byte] ^ (1 << bit));
      SCOPED_TRACE(testing::Message() << "byte " << byte << " bit " << bit);
      CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, altered, 0), CUDA_ERROR_INVALID_VALUE);
    }
  }
  // One allocation's address with the other's nonce (bytes 32..47).
  CUipcMemHandle spliced = handle;
  memcpy(spliced.reserved + 32, other_handle.reserved + 32, 16);
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, spliced, 0), CUDA_ERROR_INVALID_VALUE);
  // Flags other than CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&opened, handle, 2), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcOpenMemHandle(nullptr, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(opened, 0u);
  // The genuine handles still open.
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  EXPECT_EQ(Read(opened, 16), Ints(16, 3));
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, other_handle, 0));
  EXPECT_EQ(Read(opened, 16), Ints(16, 4));
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
}

TEST_F(IpcTest, FreeRevokesTheHandleButOpenedMappingsLive) {
  constexpr size_t kBytes = 1 << 20;
  Use(b_);
  CUmodule module = nullptr;
  const bool kernels = LoadKernels(&module);
  Use(a_);
  const size_t free0 = FreeBytes();
  const CUdeviceptr shared = AllocInts(kBytes / sizeof(int), 11);
  EXPECT_EQ(FreeBytes(), free0 - kBytes);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  Use(b_);
  CUdeviceptr opened;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  EXPECT_EQ(FreeBytes(), free0 - kBytes);  // opening charges nothing more

  Use(a_);
  CU_ASSERT_OK(cuMemFree(shared));
  int probe;
  CU_EXPECT_EQ(cuMemcpyDtoH(&probe, shared, 4), CUDA_ERROR_INVALID_VALUE);
  // Revoked: no new opens, in B (which has it open) or in a third context.
  Use(b_);
  CUdeviceptr again = 0;
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&again, handle, 0), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuCtxCreate(&c_, nullptr, 0, 0));
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&again, handle, 0), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuCtxPopCurrent(nullptr));
  // B's mapping still holds the bytes, and they still count as used.
  Use(b_);
  EXPECT_EQ(Read(opened, 8), Ints(8, 11));
  const std::vector<int> tail = Read(opened + kBytes - 16, 4);
  EXPECT_EQ(tail, Ints(4, 11 + static_cast<int>(kBytes / sizeof(int)) - 4));
  const float value = 2.5f;
  unsigned bits;
  memcpy(&bits, &value, 4);
  CU_ASSERT_OK(cuMemsetD32(opened, bits, 4));
  EXPECT_EQ(Read(opened, 4), std::vector<int>(4, static_cast<int>(bits)));
  if (kernels) {
    // A kernel in B still uses it (and what the kernel pinned is let go when it ends).
    CUdeviceptr out;
    CU_ASSERT_OK(cuMemAlloc(&out, 16));
    int n = 4;
    CU_ASSERT_OK(Launch(Function(module, "vec_add"), 1, 32, {&opened, &opened, &out, &n}));
    std::vector<float> sum(4);
    CU_ASSERT_OK(cuMemcpyDtoH(sum.data(), out, 16));
    EXPECT_EQ(sum, std::vector<float>(4, 5.0f));
    CU_ASSERT_OK(cuMemFree(out));
  }
  EXPECT_EQ(FreeBytes(), free0 - kBytes);
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  EXPECT_EQ(FreeBytes(), free0);  // the last reference is gone
}

TEST_F(IpcTest, ExporterDestroyedOpenedMappingsLive) {
  constexpr size_t kBytes = 64 << 10;
  Use(a_);
  const size_t free0 = FreeBytes();
  const CUdeviceptr shared = AllocInts(kBytes / sizeof(int), 21);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  Use(b_);
  CUdeviceptr opened;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  CU_ASSERT_OK(cuCtxDestroy(a_));
  a_ = nullptr;
  EXPECT_EQ(Read(opened, 16), Ints(16, 21));
  EXPECT_EQ(FreeBytes(), free0 - kBytes);
  CU_ASSERT_OK(cuCtxCreate(&c_, nullptr, 0, 0));
  CUdeviceptr again;
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&again, handle, 0), CUDA_ERROR_INVALID_VALUE);
  Use(b_);
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  EXPECT_EQ(FreeBytes(), free0);
}

TEST_F(IpcTest, ImporterDestroyedReleasesItsReference) {
  constexpr size_t kBytes = 64 << 10;
  Use(a_);
  const size_t free0 = FreeBytes();
  const CUdeviceptr shared = AllocInts(kBytes / sizeof(int), 0);
  CUipcMemHandle handle;
  CU_ASSERT_OK(cuIpcGetMemHandle(&handle, shared));
  Use(b_);
  CUdeviceptr opened;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, handle, 0));
  CU_ASSERT_OK(cuCtxDestroy(b_));  // never closed
  b_ = nullptr;
  Use(a_);
  EXPECT_EQ(Read(shared, 4), Ints(4, 0));
  CU_ASSERT_OK(cuMemFree(shared));
  EXPECT_EQ(FreeBytes(), free0);
}

// B and C open and close A's memory from their own threads while A exports more and frees it.
TEST_F(IpcTest, ConcurrentOpenCloseAndFree) {
  Use(a_);
  const size_t free0 = FreeBytes();
  constexpr int kAllocations = 40;
  std::vector<CUdeviceptr> ptrs(kAllocations);
  std::vector<CUipcMemHandle> handles(kAllocations);
  for (int i = 0; i < kAllocations; ++i) {
    ptrs[i] = AllocInts(256, i * 1000);
    CU_ASSERT_OK(cuIpcGetMemHandle(&handles[i], ptrs[i]));
  }
  CU_ASSERT_OK(cuCtxCreate(&c_, nullptr, 0, 0));
  CU_ASSERT_OK(cuCtxPopCurrent(nullptr));
  std::atomic<int> unexpected{0};
  std::atomic<int> progress{0};
  auto importer = [&](CUcontext ctx) {
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) ++unexpected;
    for (int round = 0; round < 20; ++round) {
      for (int i = 0; i < kAllocations; ++i) {
        ++progress;
        CUdeviceptr p = 0;
        const CUresult r = cuIpcOpenMemHandle(&p, handles[i], 0);
        if (r == CUDA_ERROR_INVALID_VALUE) continue;  // A freed it meanwhile
        if (r != CUDA_SUCCESS || p != ptrs[i]) {
          ++unexpected;
          continue;
        }
        int v = -1;
        if (cuMemcpyDtoH(&v, p + 4, 4) != CUDA_SUCCESS || v != i * 1000 + 1) ++unexpected;
        if (cuIpcCloseMemHandle(p) != CUDA_SUCCESS) ++unexpected;
      }
    }
    cuCtxSetCurrent(nullptr);
  };
  std::thread tb(importer, b_), tc(importer, c_);
  for (int i = 0; i < kAllocations; ++i) {
    // Spread A's calls over the importers' run.
    while (progress.load() < i * 10) std::this_thread::yield();
    CUipcMemHandle h;
    if (cuIpcGetMemHandle(&h, ptrs[i]) != CUDA_SUCCESS) ++unexpected;
    if (memcmp(&h, &handles[i], sizeof(h)) != 0) ++unexpected;
    if (i % 2 == 0 && cuMemFree(ptrs[i]) != CUDA_SUCCESS) ++unexpected;
  }
  tb.join();
  tc.join();
  EXPECT_EQ(unexpected.load(), 0);
  for (int i = 1; i < kAllocations; i += 2) CU_ASSERT_OK(cuMemFree(ptrs[i]));
  EXPECT_EQ(FreeBytes(), free0);
}

TEST_F(IpcTest, EventsShareTheirRecordsAcrossContexts) {
  Use(b_);
  CUmodule module_b;
  if (!LoadKernels(&module_b)) GTEST_SKIP() << "test kernels were not built (no nvcc)";
  Use(a_);
  CUmodule module_a;
  ASSERT_TRUE(LoadKernels(&module_a));
  // Shared memory for the kernels: data[0] written by B, data[1] copied by A.
  const CUdeviceptr data = AllocInts(2, 0);
  CU_ASSERT_OK(cuMemsetD32(data, 0, 2));
  CUipcMemHandle mem;
  CU_ASSERT_OK(cuIpcGetMemHandle(&mem, data));
  CUevent event_a;
  CU_ASSERT_OK(cuEventCreate(&event_a, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUipcEventHandle handle;
  CU_ASSERT_OK(cuIpcGetEventHandle(&handle, event_a));
  CUstream stream_a;  // non-blocking: A's synchronous copies must not wait for it
  CU_ASSERT_OK(cuStreamCreate(&stream_a, CU_STREAM_NON_BLOCKING));

  Use(b_);
  CUevent event_b;
  CU_ASSERT_OK(cuIpcOpenEventHandle(&event_b, handle));
  EXPECT_NE(event_b, event_a);
  CUdeviceptr opened;
  CU_ASSERT_OK(cuIpcOpenMemHandle(&opened, mem, 0));
  CUstream stream_b;
  CU_ASSERT_OK(cuStreamCreate(&stream_b, 0));
  // B: wait at a gate, then a kernel stores 77 into data[0], then the record.
  Gate gate;
  CU_ASSERT_OK(cuLaunchHostFunc(stream_b, &Gate::Wait, &gate));
  long long index = 0;
  int value = 77;
  CU_ASSERT_OK(Launch(Function(module_b, "store_at"), 1, 1, {&opened, &index, &value}, stream_b));
  CU_ASSERT_OK(cuEventRecord(event_b, stream_b));

  // A sees B's record through its own handle.
  Use(a_);
  CU_EXPECT_EQ(cuEventQuery(event_a), CUDA_ERROR_NOT_READY);
  CU_ASSERT_OK(cuStreamWaitEvent(stream_a, event_a, 0));
  CUdeviceptr src = data, dst = data + 4;
  CU_ASSERT_OK(Launch(Function(module_a, "copy_flag"), 1, 1, {&src, &dst}, stream_a));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CU_EXPECT_EQ(cuStreamQuery(stream_a), CUDA_ERROR_NOT_READY);  // held by B's record
  EXPECT_EQ(Read(data, 2), (std::vector<int>{0, 0}));
  gate.Open();
  CU_ASSERT_OK(cuEventSynchronize(event_a));
  CU_ASSERT_OK(cuEventQuery(event_a));
  EXPECT_EQ(Read(data, 1), std::vector<int>{77});
  CU_ASSERT_OK(cuStreamSynchronize(stream_a));
  EXPECT_EQ(Read(data, 2), (std::vector<int>{77, 77}));  // A's copy ran after B's store

  // The other way: A records, B waits through its handle.
  Gate gate2;
  CU_ASSERT_OK(cuLaunchHostFunc(stream_a, &Gate::Wait, &gate2));
  CU_ASSERT_OK(cuEventRecord(event_a, stream_a));
  Use(b_);
  CU_EXPECT_EQ(cuEventQuery(event_b), CUDA_ERROR_NOT_READY);
  gate2.Open();
  CU_ASSERT_OK(cuEventSynchronize(event_b));
  CU_ASSERT_OK(cuEventQuery(event_b));
  // Timing is disabled on both handles.
  float ms;
  CU_EXPECT_EQ(cuEventElapsedTime(&ms, event_b, event_b), CUDA_ERROR_INVALID_HANDLE);

  // Destroying A's handle leaves B's working (and revokes the export).
  Use(a_);
  CU_ASSERT_OK(cuEventDestroy(event_a));
  Use(b_);
  Gate gate3;
  CU_ASSERT_OK(cuLaunchHostFunc(stream_b, &Gate::Wait, &gate3));
  CU_ASSERT_OK(cuEventRecord(event_b, stream_b));
  CU_EXPECT_EQ(cuEventQuery(event_b), CUDA_ERROR_NOT_READY);
  gate3.Open();
  CU_ASSERT_OK(cuEventSynchronize(event_b));
  CU_ASSERT_OK(cuEventQuery(event_b));
  CU_ASSERT_OK(cuCtxCreate(&c_, nullptr, 0, 0));
  CUevent revoked;
  CU_EXPECT_EQ(cuIpcOpenEventHandle(&revoked, handle), CUDA_ERROR_INVALID_VALUE);
  Use(b_);
  CU_EXPECT_EQ(cuIpcOpenEventHandle(&revoked, handle), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuIpcCloseMemHandle(opened));
  CU_ASSERT_OK(cuEventDestroy(event_b));
  CU_ASSERT_OK(cuStreamDestroy(stream_b));
}

TEST_F(IpcTest, EventStateOutlivesTheExportingContext) {
  Use(a_);
  CUevent event_a;
  CU_ASSERT_OK(cuEventCreate(&event_a, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUipcEventHandle handle;
  CU_ASSERT_OK(cuIpcGetEventHandle(&handle, event_a));
  // A record made through A's handle before A goes.
  CU_ASSERT_OK(cuEventRecord(event_a, nullptr));
  Use(b_);
  CUevent event_b;
  CU_ASSERT_OK(cuIpcOpenEventHandle(&event_b, handle));
  CU_ASSERT_OK(cuCtxDestroy(a_));
  a_ = nullptr;
  Use(b_);
  CU_ASSERT_OK(cuEventSynchronize(event_b));
  CU_ASSERT_OK(cuEventQuery(event_b));
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  CU_ASSERT_OK(cuStreamWaitEvent(s, event_b, 0));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  Gate gate;
  CU_ASSERT_OK(cuLaunchHostFunc(s, &Gate::Wait, &gate));
  CU_ASSERT_OK(cuEventRecord(event_b, s));
  CU_EXPECT_EQ(cuEventQuery(event_b), CUDA_ERROR_NOT_READY);
  gate.Open();
  CU_ASSERT_OK(cuEventSynchronize(event_b));
  // The export went with its context.
  CUevent again;
  CU_EXPECT_EQ(cuIpcOpenEventHandle(&again, handle), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuStreamDestroy(s));
  CU_ASSERT_OK(cuEventDestroy(event_b));
}

TEST_F(IpcTest, EventHandleRefusals) {
  Use(a_);
  CUevent plain, timed, ipc;
  CU_ASSERT_OK(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
  CU_ASSERT_OK(cuEventCreate(&timed, 0));
  CU_EXPECT_EQ(cuEventCreate(&ipc, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuEventCreate(&ipc, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUipcEventHandle handle;
  CU_EXPECT_EQ(cuIpcGetEventHandle(&handle, plain), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcGetEventHandle(&handle, timed), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcGetEventHandle(nullptr, ipc), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuIpcGetEventHandle(&handle, reinterpret_cast<CUevent>(&handle)),
               CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuIpcGetEventHandle(&handle, ipc));
  CUipcEventHandle again;
  CU_ASSERT_OK(cuIpcGetEventHandle(&again, ipc));
  EXPECT_EQ(memcmp(&handle, &again, sizeof(handle)), 0);
  CUevent opened = nullptr;
  CU_EXPECT_EQ(cuIpcOpenEventHandle(&opened, handle), CUDA_ERROR_INVALID_CONTEXT);
  // A memory handle of the same export scheme is not an event handle.
  const CUdeviceptr p = AllocInts(4, 0);
  CUipcMemHandle mem;
  CU_ASSERT_OK(cuIpcGetMemHandle(&mem, p));
  Use(b_);
  CUipcEventHandle confused;
  memcpy(&confused, &mem, sizeof(confused));
  CU_EXPECT_EQ(cuIpcOpenEventHandle(&opened, confused), CUDA_ERROR_INVALID_VALUE);
  CUipcMemHandle confused_mem;
  memcpy(&confused_mem, &handle, sizeof(confused_mem));
  CUdeviceptr dptr;
  CU_EXPECT_EQ(cuIpcOpenMemHandle(&dptr, confused_mem, 0), CUDA_ERROR_INVALID_VALUE);
  for (size_t byte = 0; byte < sizeof(handle.reserved); ++byte) {
    CUipcEventHandle altered = handle;
    altered.reserved[byte] = static_cast<char>(altered.reserved[byte] ^ 0x10);
    SCOPED_TRACE(testing::Message() << "byte " << byte);
    CU_EXPECT_EQ(cuIpcOpenEventHandle(&opened, altered), CUDA_ERROR_INVALID_VALUE);
  }
  CU_EXPECT_EQ(cuIpcOpenEventHandle(nullptr, handle), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(opened, nullptr);
  CU_ASSERT_OK(cuIpcOpenEventHandle(&opened, handle));
  // Each opening is a new handle; each is destroyed on its own.
  CUevent second;
  CU_ASSERT_OK(cuIpcOpenEventHandle(&second, handle));
  EXPECT_NE(second, opened);
  CU_ASSERT_OK(cuEventDestroy(opened));
  CU_ASSERT_OK(cuEventQuery(second));
  CU_ASSERT_OK(cuEventDestroy(second));
  CU_EXPECT_EQ(cuEventDestroy(second), CUDA_ERROR_INVALID_HANDLE);
  Use(a_);
  CU_ASSERT_OK(cuEventQuery(ipc));
}

}  // namespace
