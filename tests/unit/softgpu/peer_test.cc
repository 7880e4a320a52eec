// Peer access between contexts on softgpu's two devices (RGPU_SOFTGPU_DEVICES=2): capability
// queries, kernels reaching a peer's memory only while access is enabled (and only one way),
// cuMemcpyPeer(Async) and their ordering, unified copies across contexts, and peers that go.
#include <cuda.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::Name;

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

class PeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ctest sets it too (CMakeLists.txt); this covers running the binary by hand.
    setenv("RGPU_SOFTGPU_DEVICES", "2", /*overwrite=*/0);
    ptx_ = softgpu_test::KernelFile("test_kernels.ptx");
    if (ptx_.empty()) GTEST_SKIP() << "test kernels were not built (no nvcc)";
    CU_ASSERT_OK(cuInit(0));
    int count = 0;
    CU_ASSERT_OK(cuDeviceGetCount(&count));
    ASSERT_GE(count, 2) << "the peer tests need RGPU_SOFTGPU_DEVICES=2";
  }
  void TearDown() override {
    for (CUcontext c : contexts_) EXPECT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);
  }

  // A new context on `device` with the test kernels loaded; destroyed at the end of the test
  // unless Destroy() was called.
  CUcontext Make(int device, CUmodule* module = nullptr) {
    CUcontext c = nullptr;
    EXPECT_EQ(cuCtxCreate(&c, nullptr, 0, device), CUDA_SUCCESS);
    CUmodule m = nullptr;
    EXPECT_EQ(cuModuleLoadData(&m, ptx_.c_str()), CUDA_SUCCESS);
    if (module != nullptr) *module = m;
    modules_.push_back({c, m});
    contexts_.push_back(c);
    return c;
  }
  void Destroy(CUcontext c) {
    EXPECT_EQ(cuCtxDestroy(c), CUDA_SUCCESS);
    std::erase(contexts_, c);
    std::erase_if(modules_, [c](const auto& e) { return e.first == c; });  // handles get reused
  }
  // `name` of the test kernels loaded in `c`.
  CUfunction Fn(CUcontext c, const char* name) {
    for (const auto& [ctx, m] : modules_) {
      if (ctx != c) continue;
      CUfunction f = nullptr;
      EXPECT_EQ(cuModuleGetFunction(&f, m, name), CUDA_SUCCESS) << name;
      return f;
    }
    ADD_FAILURE() << "no module in that context";
    return nullptr;
  }
  static void Use(CUcontext c) { ASSERT_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS); }

  template <typename T>
  CUdeviceptr Alloc(CUcontext c, const std::vector<T>& values) {
    Use(c);
    CUdeviceptr d = 0;
    EXPECT_EQ(cuMemAlloc(&d, values.size() * sizeof(T)), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyHtoD(d, values.data(), values.size() * sizeof(T)), CUDA_SUCCESS);
    return d;
  }
  template <typename T>
  std::vector<T> Read(CUcontext c, CUdeviceptr d, size_t count) {
    Use(c);
    std::vector<T> out(count);
    EXPECT_EQ(cuMemcpyDtoH(out.data(), d, count * sizeof(T)), CUDA_SUCCESS);
    return out;
  }
  CUresult Launch(CUcontext c, const char* name, unsigned grid, unsigned block,
                  std::vector<void*> args, CUstream stream = nullptr) {
    CUfunction f = Fn(c, name);
    Use(c);
    return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, stream, args.data(), nullptr);
  }
  // peer_rw over n ints: dst[i] = src[i] + 1, *sum += src[i]; returns the context's state after.
  CUresult PeerRw(CUcontext c, CUdeviceptr src, CUdeviceptr dst, CUdeviceptr sum, int n) {
    if (CUresult r = Launch(c, "peer_rw", (n + 63) / 64, 64, {&src, &dst, &sum, &n});
        r != CUDA_SUCCESS) {
      return r;
    }
    return cuCtxSynchronize();
  }

  std::string ptx_;
  std::vector<CUcontext> contexts_;
  std::vector<std::pair<CUcontext, CUmodule>> modules_;
};

std::vector<int> Iota(int n, int first) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST_F(PeerTest, CanAccessPeerAndP2PAttributes) {
  int can = -1;
  CU_ASSERT_OK(cuDeviceCanAccessPeer(&can, 0, 1));
  EXPECT_EQ(can, 1);
  CU_ASSERT_OK(cuDeviceCanAccessPeer(&can, 1, 0));
  EXPECT_EQ(can, 1);
  CU_ASSERT_OK(cuDeviceCanAccessPeer(&can, 1, 1));
  EXPECT_EQ(can, 0);  // a device is not its own peer
  CU_EXPECT_EQ(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
  CU_EXPECT_EQ(cuDeviceCanAccessPeer(&can, -1, 0), CUDA_ERROR_INVALID_DEVICE);
  CU_EXPECT_EQ(cuDeviceCanAccessPeer(nullptr, 0, 1), CUDA_ERROR_INVALID_VALUE);

  const std::pair<CUdevice_P2PAttribute, int> want[] = {
      {CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, 0},
      {CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1},
      {CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 1},
      {CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED, 0},
      {CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED, 0},
  };
  for (const auto& [attrib, value] : want) {
    for (const auto& [src, dst] : {std::pair{0, 1}, std::pair{1, 0}}) {
      int v = -1;
      CU_ASSERT_OK(cuDeviceGetP2PAttribute(&v, attrib, src, dst));
      EXPECT_EQ(v, value) << "attribute " << attrib;
    }
    int v = -1;
    CU_EXPECT_EQ(cuDeviceGetP2PAttribute(&v, attrib, 1, 1), CUDA_ERROR_INVALID_DEVICE);
  }
  int v = -1;
  CU_EXPECT_EQ(cuDeviceGetP2PAttribute(&v, static_cast<CUdevice_P2PAttribute>(99), 0, 1),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuDeviceGetP2PAttribute(nullptr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 5),
               CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(PeerTest, EnableAndDisableRules) {
  CUcontext c1 = Make(1);
  CUcontext c0b = Make(0);
  CUcontext c0 = Make(0);
  Use(c0);
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(c0b, 0), CUDA_ERROR_INVALID_DEVICE);  // same device
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_INVALID_CONTEXT);  // itself
  int bogus = 0;
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(reinterpret_cast<CUcontext>(&bogus), 0),
               CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  // One way: c1 has not enabled access to c0.
  Use(c1);
  CU_EXPECT_EQ(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c0, 0));  // now both ways
  Use(c0);
  CU_ASSERT_OK(cuCtxDisablePeerAccess(c1));
  CU_EXPECT_EQ(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));  // again after disabling
  Use(c1);
  CU_ASSERT_OK(cuCtxDisablePeerAccess(c0));
  // A destroyed peer is no context; a new one on its device can be enabled.
  Destroy(c1);
  Use(c0);
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuCtxDisablePeerAccess(c1), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext c1b = Make(1);
  Use(c0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1b, 0));
  // No current context.
  while (cuCtxPopCurrent(nullptr) == CUDA_SUCCESS) {
  }
  CU_EXPECT_EQ(cuCtxEnablePeerAccess(c1b, 0), CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuCtxDisablePeerAccess(c1b), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(PeerTest, KernelsReachPeerMemoryOnlyWhileEnabled) {
  const int n = 100;
  CUcontext c1 = Make(1);
  const CUdeviceptr src1 = Alloc(c1, Iota(n, 1));
  const CUdeviceptr dst1 = Alloc(c1, std::vector<int>(n, 0));
  const CUdeviceptr sum1 = Alloc(c1, std::vector<int>{0});

  // Without access: a fault, and nothing of c1 changed.
  CUcontext c0 = Make(0);
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(PeerRw(c0, src1, dst1, sum1, n), CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("out-of-bounds"), std::string::npos) << err;
  Destroy(c0);
  EXPECT_EQ(Read<int>(c1, dst1, n), std::vector<int>(n, 0));
  EXPECT_EQ(Read<int>(c1, sum1, 1)[0], 0);

  // With access: loads, stores and atomics on c1's memory.
  c0 = Make(0);
  Use(c0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CU_ASSERT_OK(PeerRw(c0, src1, dst1, sum1, n));
  EXPECT_EQ(Read<int>(c1, dst1, n), Iota(n, 2));
  EXPECT_EQ(Read<int>(c1, sum1, 1)[0], n * (n + 1) / 2);
  // Own memory and the peer's in one kernel, both ways.
  const CUdeviceptr src0 = Alloc(c0, Iota(n, 1000));
  const CUdeviceptr dst0 = Alloc(c0, std::vector<int>(n, 0));
  const CUdeviceptr sum0 = Alloc(c0, std::vector<int>{0});
  CU_ASSERT_OK(PeerRw(c0, src0, dst1, sum1, n));
  EXPECT_EQ(Read<int>(c1, dst1, n), Iota(n, 1001));
  CU_ASSERT_OK(PeerRw(c0, src1, dst0, sum0, n));
  EXPECT_EQ(Read<int>(c0, dst0, n), Iota(n, 2));
  EXPECT_EQ(Read<int>(c0, sum0, 1)[0], n * (n + 1) / 2);
  // Generic addresses (pointers read from memory): stores and atomics on the peer's memory.
  const CUdeviceptr count1 = Alloc(c1, std::vector<int>{5});
  const CUdeviceptr ptrs0 = Alloc(c0, std::vector<unsigned long long>{src1, count1});
  CUdeviceptr ptrs = ptrs0;
  int count = n;
  CU_ASSERT_OK(Launch(c0, "peer_generic", 1, 128, {&ptrs, &count}));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<int> doubled = Iota(n, 1);
  for (int& v : doubled) v *= 2;
  EXPECT_EQ(Read<int>(c1, src1, n), doubled);
  EXPECT_EQ(Read<int>(c1, count1, 1)[0], 5 + n);

  // Disabled again: a fault, nothing written.
  Use(c0);
  CU_ASSERT_OK(cuCtxDisablePeerAccess(c1));
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(PeerRw(c0, src0, dst1, sum1, n), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(Read<int>(c1, dst1, n), Iota(n, 1001));
}

TEST_F(PeerTest, AccessIsOneWay) {
  const int n = 64;
  CUcontext c0 = Make(0);
  CUcontext c1 = Make(1);
  const CUdeviceptr src0 = Alloc(c0, Iota(n, 1));
  const CUdeviceptr dst0 = Alloc(c0, std::vector<int>(n, 0));
  const CUdeviceptr sum0 = Alloc(c0, std::vector<int>{0});
  const CUdeviceptr src1 = Alloc(c1, Iota(n, 1));
  const CUdeviceptr dst1 = Alloc(c1, std::vector<int>(n, 0));
  const CUdeviceptr sum1 = Alloc(c1, std::vector<int>{0});
  Use(c0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CU_ASSERT_OK(PeerRw(c0, src1, dst0, sum0, n));  // c0 reaches c1
  EXPECT_EQ(Read<int>(c0, dst0, n), Iota(n, 2));
  // c1 does not reach c0.
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(PeerRw(c1, src0, dst1, sum1, n), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(Read<int>(c0, src0, n), Iota(n, 1));
}

TEST_F(PeerTest, MemcpyPeerCopiesExactBytes) {
  CUcontext c0 = Make(0);
  CUcontext c1 = Make(1);
  CUcontext c0b = Make(0);
  std::vector<unsigned char> pattern(4099);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 37 + 11);
  const size_t size = pattern.size();
  const CUdeviceptr a0 = Alloc(c0, pattern);
  const CUdeviceptr b1 = Alloc(c1, std::vector<unsigned char>(size, 0xEE));
  const CUdeviceptr c0mem = Alloc(c0, std::vector<unsigned char>(size, 0xEE));
  const CUdeviceptr d0b = Alloc(c0b, std::vector<unsigned char>(size, 0xEE));
  Use(c0);  // peer access is not needed: none is enabled in this test

  // Device 0 to device 1, at odd offsets and length.
  CU_ASSERT_OK(cuMemcpyPeer(b1 + 3, c1, a0 + 5, c0, 1001));
  std::vector<unsigned char> want(size, 0xEE);
  std::copy(pattern.begin() + 5, pattern.begin() + 1006, want.begin() + 3);
  EXPECT_EQ(Read<unsigned char>(c1, b1, size), want);
  // Back, device 1 to device 0.
  CU_ASSERT_OK(cuMemcpyPeer(c0mem, c0, b1, c1, size));
  EXPECT_EQ(Read<unsigned char>(c0, c0mem, size), want);
  // Two contexts of one device.
  CU_ASSERT_OK(cuMemcpyPeer(d0b, c0b, a0, c0, size));
  EXPECT_EQ(Read<unsigned char>(c0b, d0b, size), pattern);

  // Async, both directions, on a stream of either context and on NULL (the current context's).
  Use(c1);
  CUstream s1;
  CU_ASSERT_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuMemcpyPeerAsync(b1, c1, a0, c0, size, s1));
  CU_ASSERT_OK(cuStreamSynchronize(s1));
  EXPECT_EQ(Read<unsigned char>(c1, b1, size), pattern);
  Use(c0);
  CU_ASSERT_OK(cuMemsetD8(c0mem, 0, size));
  CU_ASSERT_OK(cuMemcpyPeerAsync(c0mem + 1, c0, b1 + 2, c1, size - 2, s1));
  CU_ASSERT_OK(cuStreamSynchronize(s1));
  want.assign(size, 0);
  std::copy(pattern.begin() + 2, pattern.end(), want.begin() + 1);
  EXPECT_EQ(Read<unsigned char>(c0, c0mem, size), want);
  Use(c1);
  CU_ASSERT_OK(cuMemsetD8(b1, 0, size));
  Use(c0);
  CU_ASSERT_OK(cuMemcpyPeerAsync(b1, c1, a0, c0, size, nullptr));  // c0's default stream
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Read<unsigned char>(c1, b1, size), pattern);
  Use(c0);
  CUstream s0;
  CU_ASSERT_OK(cuStreamCreate(&s0, 0));
  CU_ASSERT_OK(cuMemsetD8(c0mem, 0, size));
  CU_ASSERT_OK(cuMemcpyPeerAsync(c0mem, c0, b1, c1, size, s0));
  CU_ASSERT_OK(cuStreamSynchronize(s0));
  EXPECT_EQ(Read<unsigned char>(c0, c0mem, size), pattern);

  // Each range is checked against its own context.
  Use(c0);
  CU_EXPECT_EQ(cuMemcpyPeer(b1, c1, a0, c0, size + 1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyPeer(b1 + 1, c1, a0, c0, size), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyPeer(b1, c0, a0, c0, 16), CUDA_ERROR_INVALID_VALUE);  // b1 is c1's
  CU_EXPECT_EQ(cuMemcpyPeer(b1, c1, a0, c1, 16), CUDA_ERROR_INVALID_VALUE);  // a0 is c0's
  CU_EXPECT_EQ(cuMemcpyPeerAsync(b1, c1, a0, c0, size + 1, s1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyPeerAsync(b1, c0, a0, c0, 16, s0), CUDA_ERROR_INVALID_VALUE);
  int bogus = 0;
  CU_EXPECT_EQ(cuMemcpyPeer(b1, reinterpret_cast<CUcontext>(&bogus), a0, c0, 16),
               CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuMemcpyPeer(b1, c1, a0, nullptr, 16), CUDA_ERROR_INVALID_CONTEXT);
  // A stream of neither context.
  Use(c0b);
  CUstream sb;
  CU_ASSERT_OK(cuStreamCreate(&sb, 0));
  CU_EXPECT_EQ(cuMemcpyPeerAsync(b1, c1, a0, c0, 16, sb), CUDA_ERROR_INVALID_HANDLE);
  // Nothing was written by the refused copies.
  EXPECT_EQ(Read<unsigned char>(c1, b1, size), pattern);
  CU_ASSERT_OK(cuStreamDestroy(sb));
  Use(c0);
  CU_ASSERT_OK(cuStreamDestroy(s0));
  Use(c1);
  CU_ASSERT_OK(cuStreamDestroy(s1));
}

TEST_F(PeerTest, MemcpyPeerFollowsBothContextsWork) {
  CUcontext c0 = Make(0);
  CUcontext c1 = Make(1);
  const CUdeviceptr src0 = Alloc(c0, std::vector<int>{0});
  const CUdeviceptr dst1 = Alloc(c1, std::vector<int>{0});
  long long iterations = 10;
  int value = 42;

  // Async on c1's non-blocking stream: waits for c0's default-stream work that writes the source.
  {
    Gate gate;
    Use(c0);
    CU_ASSERT_OK(cuLaunchHostFunc(nullptr, &Gate::Wait, &gate));
    CUdeviceptr flag = src0;
    CU_ASSERT_OK(Launch(c0, "spin", 1, 1, {&flag, &value, &iterations}));  // src0 := 42
    Use(c1);
    CUstream s1;
    CU_ASSERT_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_ASSERT_OK(cuMemcpyPeerAsync(dst1, c1, src0, c0, 4, s1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CU_EXPECT_EQ(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    gate.Open();
    CU_ASSERT_OK(cuStreamSynchronize(s1));
    EXPECT_EQ(Read<int>(c1, dst1, 1)[0], 42);
    CU_ASSERT_OK(cuStreamDestroy(s1));
  }
  // Async on c0's stream: waits for c1's default-stream work that writes the destination.
  {
    Gate gate;
    Use(c1);
    CU_ASSERT_OK(cuLaunchHostFunc(nullptr, &Gate::Wait, &gate));
    CUdeviceptr flag = dst1;
    int seven = 7;
    CU_ASSERT_OK(Launch(c1, "spin", 1, 1, {&flag, &seven, &iterations}));  // dst1 := 7
    Use(c0);
    CUstream s0;
    CU_ASSERT_OK(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    value = 43;
    flag = src0;
    CU_ASSERT_OK(Launch(c0, "spin", 1, 1, {&flag, &value, &iterations}, s0));  // src0 := 43
    CU_ASSERT_OK(cuMemcpyPeerAsync(dst1, c1, src0, c0, 4, s0));                // after the 7
    gate.Open();
    CU_ASSERT_OK(cuStreamSynchronize(s0));
    Use(c1);
    CU_ASSERT_OK(cuCtxSynchronize());
    EXPECT_EQ(Read<int>(c1, dst1, 1)[0], 43);
    Use(c0);
    CU_ASSERT_OK(cuStreamDestroy(s0));
  }
  // Synchronous: runs after the source context's earlier work.
  {
    Gate gate;
    Use(c0);
    CU_ASSERT_OK(cuLaunchHostFunc(nullptr, &Gate::Wait, &gate));
    value = 44;
    CUdeviceptr flag = src0;
    CU_ASSERT_OK(Launch(c0, "spin", 1, 1, {&flag, &value, &iterations}));  // src0 := 44
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      gate.Open();
    });
    Use(c1);
    const CUresult r = cuMemcpyPeer(dst1, c1, src0, c0, 4);
    opener.join();
    CU_ASSERT_OK(r);
    EXPECT_EQ(Read<int>(c1, dst1, 1)[0], 44);
  }
}

TEST_F(PeerTest, UnifiedCopiesAcrossContextsNeedPeerAccess) {
  CUcontext c1 = Make(1);
  CUcontext c0 = Make(0);
  const size_t n = 256;
  const CUdeviceptr b1 = Alloc(c1, Iota(n, 7));
  const CUdeviceptr a0 = Alloc(c0, Iota(n, 500));
  Use(c0);
  std::vector<int> host(n, 0);
  // Refused without access (nothing is read or written).
  CU_EXPECT_EQ(cuMemcpyDtoD(a0, b1, n * 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyDtoD(b1, a0, n * 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyDtoDAsync(a0, b1, n * 4, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpy(a0, b1, n * 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpy(b1, a0, n * 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()), b1, n * 4),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpy(b1, reinterpret_cast<CUdeviceptr>(host.data()), n * 4),
               CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuCtxSynchronize());  // refusals are not sticky
  EXPECT_EQ(Read<int>(c1, b1, n), Iota(n, 7));
  EXPECT_EQ(Read<int>(c0, a0, n), Iota(n, 500));

  // With access they copy.
  Use(c0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CU_ASSERT_OK(cuMemcpyDtoD(a0, b1, n * 4));
  EXPECT_EQ(Read<int>(c0, a0, n), Iota(n, 7));
  const CUdeviceptr x0 = Alloc(c0, Iota(n, 900));
  CU_ASSERT_OK(cuMemcpyDtoD(b1 + 4, x0, (n - 1) * 4));
  std::vector<int> want = Iota(n, 900);
  want.insert(want.begin(), 7);
  want.pop_back();
  EXPECT_EQ(Read<int>(c1, b1, n), want);
  Use(c0);
  CU_ASSERT_OK(cuMemcpyDtoDAsync(a0, b1, n * 4, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Read<int>(c0, a0, n), want);
  CU_ASSERT_OK(cuMemcpy(b1, x0, n * 4));
  EXPECT_EQ(Read<int>(c1, b1, n), Iota(n, 900));
  Use(c0);
  CU_ASSERT_OK(cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()), b1, n * 4));
  EXPECT_EQ(host, Iota(n, 900));
  // Out of the peer's allocation: refused.
  CU_EXPECT_EQ(cuMemcpyDtoD(a0, b1 + 4, n * 4), CUDA_ERROR_INVALID_VALUE);

  // Disabled: refused again.
  CU_ASSERT_OK(cuCtxDisablePeerAccess(c1));
  CU_EXPECT_EQ(cuMemcpyDtoD(a0, b1, n * 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpy(b1, x0, n * 4), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(PeerTest, DestroyedPeerIsUnreachable) {
  const int n = 64;
  CUcontext c1 = Make(1);
  const CUdeviceptr src1 = Alloc(c1, Iota(n, 1));
  CUcontext c0 = Make(0);
  const CUdeviceptr dst0 = Alloc(c0, std::vector<int>(n, 0));
  const CUdeviceptr sum0 = Alloc(c0, std::vector<int>{0});
  Use(c0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CUcontext c0x = Make(0);
  const CUdeviceptr dst0x = Alloc(c0x, std::vector<int>(n, 0));
  const CUdeviceptr sum0x = Alloc(c0x, std::vector<int>{0});
  Use(c0x);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CU_ASSERT_OK(PeerRw(c0, src1, dst0, sum0, n));
  Destroy(c1);
  // A new context on that device (often at the destroyed one's address) is no peer either.
  CUcontext c1b = Make(1);
  const CUdeviceptr src1b = Alloc(c1b, Iota(n, 1));
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(PeerRw(c0, src1b, dst0, sum0, n), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  Use(c0x);
  CU_EXPECT_EQ(cuMemcpyDtoD(dst0x, src1, n * 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyDtoD(dst0x, src1b, n * 4), CUDA_ERROR_INVALID_VALUE);
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(PeerRw(c0x, src1, dst0x, sum0x, n), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();

  // Destroyed while a kernel of the other context spins on its memory: nothing crashes. The
  // kernel spins on (its block keeps what it looked up alive) or, had it looked the memory up
  // after the destruction, faults; destroying its own context stops it.
  CUcontext p1 = Make(1);
  const CUdeviceptr flag1 = Alloc(p1, std::vector<int>{0});
  CUcontext p0 = Make(0);
  Use(p0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(p1, 0));
  CUdeviceptr flag = flag1;
  CU_ASSERT_OK(Launch(p0, "spin_until", 1, 32, {&flag}));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Destroy(p1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  testing::internal::CaptureStderr();
  Use(p0);
  const CUresult r = cuStreamQuery(nullptr);
  EXPECT_TRUE(r == CUDA_ERROR_NOT_READY || r == CUDA_ERROR_ILLEGAL_ADDRESS) << Name(r);
  const auto start = std::chrono::steady_clock::now();
  Destroy(p0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  testing::internal::GetCapturedStderr();
}

TEST_F(PeerTest, ResetPrimaryPeerEndsAccess) {
  const int n = 32;
  CUcontext primary;
  CU_ASSERT_OK(cuDevicePrimaryCtxRetain(&primary, 1));
  Use(primary);
  CUdeviceptr before;
  CU_ASSERT_OK(cuMemAlloc(&before, n * 4));
  CUcontext a = Make(0);
  const CUdeviceptr dst_a = Alloc(a, std::vector<int>(n, 0));
  const CUdeviceptr sum_a = Alloc(a, std::vector<int>{0});
  Use(a);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(primary, 0));
  CU_ASSERT_OK(PeerRw(a, before, dst_a, sum_a, n));
  CUcontext b = Make(0);
  Use(b);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(primary, 0));

  // The reset destroys the primary context; retained again it is a new one at the same handle,
  // which the access enabled before does not reach.
  CU_ASSERT_OK(cuDevicePrimaryCtxReset(1));
  CUcontext again;
  CU_ASSERT_OK(cuDevicePrimaryCtxRetain(&again, 1));
  ASSERT_EQ(again, primary);
  Use(again);
  CUdeviceptr after;
  CU_ASSERT_OK(cuMemAlloc(&after, n * 4));
  CU_ASSERT_OK(cuMemsetD32(after, 3, n));
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(PeerRw(a, after, dst_a, sum_a, n), CUDA_ERROR_ILLEGAL_ADDRESS);
  testing::internal::GetCapturedStderr();
  // Enabling it anew works (it is not "already enabled") and reaches the new memory.
  const CUdeviceptr dst_b = Alloc(b, std::vector<int>(n, 0));
  const CUdeviceptr sum_b = Alloc(b, std::vector<int>{0});
  Use(b);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(again, 0));
  CU_ASSERT_OK(PeerRw(b, after, dst_b, sum_b, n));
  EXPECT_EQ(Read<int>(b, dst_b, n), std::vector<int>(n, 4));
  CU_ASSERT_OK(cuDevicePrimaryCtxRelease(1));
}

TEST_F(PeerTest, AccessChangesWhileKernelsRun) {
  // One thread runs kernels on a peer's memory while another enables, disables and destroys
  // other peers of the same context: the lasting peer stays reachable throughout.
  const int n = 256;
  CUcontext c1 = Make(1);
  const CUdeviceptr src1 = Alloc(c1, Iota(n, 1));
  CUcontext c0 = Make(0);
  const CUdeviceptr dst0 = Alloc(c0, std::vector<int>(n, 0));
  const CUdeviceptr sum0 = Alloc(c0, std::vector<int>{0});
  Use(c0);
  CU_ASSERT_OK(cuCtxEnablePeerAccess(c1, 0));
  CUfunction rw = Fn(c0, "peer_rw");
  std::atomic<int> failures{0};
  std::thread kernels([&] {
    if (cuCtxSetCurrent(c0) != CUDA_SUCCESS) return failures.fetch_add(1), void();
    CUdeviceptr src = src1, dst = dst0, sum = sum0;
    int count = n;
    void* args[] = {&src, &dst, &sum, &count};
    for (int i = 0; i < 100; ++i) {
      if (cuLaunchKernel(rw, n / 64, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr) != CUDA_SUCCESS ||
          cuCtxSynchronize() != CUDA_SUCCESS) {
        failures.fetch_add(1);
        return;
      }
    }
  });
  std::thread peers([&] {
    for (int i = 0; i < 40; ++i) {
      CUcontext other;
      CUdeviceptr p;
      bool ok = cuCtxCreate(&other, nullptr, 0, 1) == CUDA_SUCCESS &&
                cuMemAlloc(&p, 64) == CUDA_SUCCESS && cuCtxSetCurrent(c0) == CUDA_SUCCESS &&
                cuCtxEnablePeerAccess(other, 0) == CUDA_SUCCESS;
      if (ok && i % 2 == 0) ok = cuCtxDisablePeerAccess(other) == CUDA_SUCCESS;
      if (cuCtxDestroy(other) != CUDA_SUCCESS || !ok) failures.fetch_add(1);
    }
  });
  kernels.join();
  peers.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Read<int>(c0, dst0, n), Iota(n, 2));
  EXPECT_EQ(Read<int>(c0, sum0, 1)[0], 100 * n * (n + 1) / 2);
}

}  // namespace
