// Allocations at fixed device addresses (softgpuMemAllocAt) and module variables placed where a
// checkpoint found them (softgpuModuleGetVariableRanges, softgpuModuleLoadDataAt): what a server
// restoring a session at the addresses its program holds relies on. A range is claimed only where
// nothing of this process lies, and fresh allocations never land in a claimed range.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_util.h"

extern "C" CUresult softgpuMemAllocAt(CUdeviceptr dptr, size_t bytesize);
extern "C" CUresult softgpuModuleGetVariableRanges(CUmodule hmod, CUdeviceptr* bases, size_t* sizes,
                                                   size_t* count);
extern "C" CUresult softgpuModuleLoadDataAt(CUmodule* module, const void* image,
                                            const CUdeviceptr* bases, size_t count);

namespace {

using softgpu_test::KernelFile;

class FixedAddressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CU_ASSERT_OK(cuInit(0));
    CU_ASSERT_OK(cuCtxCreate(&ctx_, nullptr, 0, 0));
  }
  void TearDown() override {
    if (ctx_ != nullptr) {
      EXPECT_EQ(cuCtxDestroy(ctx_), CUDA_SUCCESS);
    }
  }
  // An address well past anything this process handed out so far (the test's own window).
  CUdeviceptr FarAddress() {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc(&p, 256), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
    return (p + (CUdeviceptr{64} << 30)) & ~CUdeviceptr{0xffff};
  }
  CUcontext ctx_ = nullptr;
};

TEST_F(FixedAddressTest, AllocatesAtTheAddressAndCopiesThere) {
  const CUdeviceptr at = FarAddress();
  CU_ASSERT_OK(softgpuMemAllocAt(at, 4096));
  std::vector<int> in(1024), out(1024);
  for (int i = 0; i < 1024; ++i) in[i] = i * 3;
  CU_ASSERT_OK(cuMemcpyHtoD(at, in.data(), 4096));
  CU_ASSERT_OK(cuMemcpyDtoH(out.data(), at, 4096));
  EXPECT_EQ(in, out);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_ASSERT_OK(cuMemGetAddressRange(&base, &size, at + 100));
  EXPECT_EQ(base, at);
  EXPECT_EQ(size, 4096u);
  CU_ASSERT_OK(cuMemFree(at));
  // Given back: the same range can be claimed again (a session moved away and back).
  CU_ASSERT_OK(softgpuMemAllocAt(at, 4096));
  CU_ASSERT_OK(cuMemFree(at));
}

TEST_F(FixedAddressTest, RefusesARangeInUse) {
  CUdeviceptr mine = 0;
  CU_ASSERT_OK(cuMemAlloc(&mine, 1 << 20));
  // Overlapping a live allocation of the counter's, at its start or inside it.
  CU_EXPECT_EQ(softgpuMemAllocAt(mine, 256), CUDA_ERROR_ALREADY_MAPPED);
  CU_EXPECT_EQ(softgpuMemAllocAt(mine + 4096, 256), CUDA_ERROR_ALREADY_MAPPED);
  CU_EXPECT_EQ(softgpuMemAllocAt(mine - 256, 512), CUDA_ERROR_ALREADY_MAPPED);
  // Overlapping a claimed range, from another context too.
  const CUdeviceptr at = FarAddress();
  CU_ASSERT_OK(softgpuMemAllocAt(at, 8192));
  CUcontext other = nullptr;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CU_EXPECT_EQ(softgpuMemAllocAt(at + 4096, 8192), CUDA_ERROR_ALREADY_MAPPED);
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  // Freed memory of the counter's may be claimed: nothing of this process lies there any more.
  CU_ASSERT_OK(cuMemFree(mine));
  CU_ASSERT_OK(softgpuMemAllocAt(mine, 1 << 20));
  CU_ASSERT_OK(cuMemFree(mine));
  CU_ASSERT_OK(cuMemFree(at));
}

TEST_F(FixedAddressTest, RefusesAddressesThatCannotBeDeviceMemory) {
  const CUdeviceptr at = FarAddress();
  CU_EXPECT_EQ(softgpuMemAllocAt(at + 8, 256), CUDA_ERROR_INVALID_VALUE);  // unaligned
  CU_EXPECT_EQ(softgpuMemAllocAt(0x1000, 256), CUDA_ERROR_INVALID_VALUE);  // below the window
  CU_EXPECT_EQ(softgpuMemAllocAt(0x7f0000000000ull, 256), CUDA_ERROR_INVALID_VALUE);  // above it
  CU_EXPECT_EQ(softgpuMemAllocAt(at, 0), CUDA_ERROR_INVALID_VALUE);
  // Larger than the device: its budget refuses it, nothing is claimed.
  CU_EXPECT_EQ(softgpuMemAllocAt(at, size_t{1} << 43), CUDA_ERROR_OUT_OF_MEMORY);
  CU_ASSERT_OK(softgpuMemAllocAt(at, 256));
  CU_ASSERT_OK(cuMemFree(at));
}

TEST_F(FixedAddressTest, FreshAllocationsStepOverClaimedRanges) {
  CUdeviceptr first = 0;
  CU_ASSERT_OK(cuMemAlloc(&first, 256));
  // A claim just ahead of the counter: the next allocations must go around it.
  const CUdeviceptr claimed = (first + (CUdeviceptr{1} << 20)) & ~CUdeviceptr{0xfff};
  CU_ASSERT_OK(softgpuMemAllocAt(claimed, 4 << 20));
  for (int i = 0; i < 8; ++i) {
    CUdeviceptr p = 0;
    CU_ASSERT_OK(cuMemAlloc(&p, 1 << 20));
    EXPECT_TRUE(p + (1 << 20) <= claimed || p >= claimed + (4 << 20))
        << std::hex << p << " lies in the claimed range at " << claimed;
  }
  CU_ASSERT_OK(cuMemFree(claimed));
  CU_ASSERT_OK(cuMemFree(first));
}

TEST_F(FixedAddressTest, ModuleVariablesGoBackWhereTheyWere) {
  const std::string ptx = KernelFile("test_kernels.ptx");
  if (ptx.empty()) GTEST_SKIP() << "test_kernels.ptx was not built (no nvcc)";
  CUmodule module = nullptr;
  CU_ASSERT_OK(cuModuleLoadData(&module, ptx.c_str()));
  CUdeviceptr counter = 0;
  size_t counter_bytes = 0;
  CU_ASSERT_OK(cuModuleGetGlobal(&counter, &counter_bytes, module, "device_counter"));
  const int bumped = 41;
  CU_ASSERT_OK(cuMemcpyHtoD(counter, &bumped, sizeof bumped));
  size_t count = 0;
  CU_ASSERT_OK(softgpuModuleGetVariableRanges(module, nullptr, nullptr, &count));
  ASSERT_GT(count, 0u);
  std::vector<CUdeviceptr> bases(count);
  std::vector<size_t> sizes(count);
  size_t short_count = count - 1;
  CU_EXPECT_EQ(softgpuModuleGetVariableRanges(module, bases.data(), sizes.data(), &short_count),
               CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(softgpuModuleGetVariableRanges(module, bases.data(), sizes.data(), &count));
  // The checkpoint's copy of every variable.
  std::vector<std::vector<char>> saved(count);
  bool counter_listed = false;
  for (size_t i = 0; i < count; ++i) {
    saved[i].resize(sizes[i]);
    CU_ASSERT_OK(cuMemcpyDtoH(saved[i].data(), bases[i], sizes[i]));
    counter_listed |= counter >= bases[i] && counter + sizeof(int) <= bases[i] + sizes[i];
  }
  EXPECT_TRUE(counter_listed);
  // While the module lives its addresses are in use.
  CUmodule twin = nullptr;
  CU_EXPECT_EQ(softgpuModuleLoadDataAt(&twin, ptx.c_str(), bases.data(), count),
               CUDA_ERROR_ALREADY_MAPPED);
  CU_ASSERT_OK(cuModuleUnload(module));
  // A wrong count is refused; the right one puts every variable back at its address.
  CU_EXPECT_EQ(softgpuModuleLoadDataAt(&twin, ptx.c_str(), bases.data(), count - 1),
               CUDA_ERROR_INVALID_VALUE);
  CUcontext other = nullptr;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CU_ASSERT_OK(softgpuModuleLoadDataAt(&twin, ptx.c_str(), bases.data(), count));
  for (size_t i = 0; i < count; ++i) {
    CU_ASSERT_OK(cuMemcpyHtoD(bases[i], saved[i].data(), sizes[i]));
  }
  CUdeviceptr again = 0;
  CU_ASSERT_OK(cuModuleGetGlobal(&again, &counter_bytes, twin, "device_counter"));
  EXPECT_EQ(again, counter);
  CUfunction globals = nullptr;
  CU_ASSERT_OK(cuModuleGetFunction(&globals, twin, "globals"));
  CUdeviceptr out = 0;
  CU_ASSERT_OK(cuMemAlloc(&out, 4 * sizeof(float)));
  void* args[] = {&out};
  CU_ASSERT_OK(cuLaunchKernel(globals, 1, 1, 1, 4, 1, 1, 0, nullptr, args, nullptr));
  float result[4] = {};
  CU_ASSERT_OK(cuMemcpyDtoH(result, out, sizeof result));
  EXPECT_EQ(result[0], 1.5f + bumped);  // the restored counter, not the image's 5
  EXPECT_EQ(result[3], 4.5f + bumped);
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
}

}  // namespace

namespace {

// cuMemAddressReserve's address hint, which a server restoring a session through virtual memory
// management (the way NVIDIA's driver can) relies on: honoured when the range is free and aligned,
// another range otherwise, as CUDA's.
TEST_F(FixedAddressTest, AReservationTakesAFreeHintedAddressOrAnother) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  CU_ASSERT_OK(
      cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const CUdeviceptr at = (FarAddress() + granularity) & ~CUdeviceptr{granularity - 1};
  CUdeviceptr got = 0;
  CU_ASSERT_OK(cuMemAddressReserve(&got, 2 * granularity, 0, at, 0));
  EXPECT_EQ(got, at);
  // Mapped there, the memory works like any other.
  CUmemGenericAllocationHandle handle = 0;
  CU_ASSERT_OK(cuMemCreate(&handle, 2 * granularity, &prop, 0));
  CU_ASSERT_OK(cuMemMap(at, 2 * granularity, 0, handle, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_ASSERT_OK(cuMemSetAccess(at, 2 * granularity, &access, 1));
  const int value = 1234;
  int back = 0;
  CU_ASSERT_OK(cuMemcpyHtoD(at + granularity + 8, &value, sizeof value));
  CU_ASSERT_OK(cuMemcpyDtoH(&back, at + granularity + 8, sizeof back));
  EXPECT_EQ(back, value);
  // The range, or part of it, asked for again while reserved: elsewhere.
  CUdeviceptr other = 0;
  CU_ASSERT_OK(cuMemAddressReserve(&other, granularity, 0, at + granularity, 0));
  EXPECT_TRUE(other + granularity <= at || other >= at + 2 * granularity) << other;
  CU_ASSERT_OK(cuMemAddressFree(other, granularity));
  // A hint that is not aligned to the granularity is not taken.
  CU_ASSERT_OK(cuMemAddressReserve(&other, granularity, 0, at + 2 * granularity + 4096, 0));
  EXPECT_NE(other, at + 2 * granularity + 4096);
  CU_ASSERT_OK(cuMemAddressFree(other, granularity));
  CU_ASSERT_OK(cuMemUnmap(at, 2 * granularity));
  CU_ASSERT_OK(cuMemRelease(handle));
  CU_ASSERT_OK(cuMemAddressFree(at, 2 * granularity));
  // Given back: the range can be reserved at its address again.
  CU_ASSERT_OK(cuMemAddressReserve(&got, 2 * granularity, 0, at, 0));
  EXPECT_EQ(got, at);
  CU_ASSERT_OK(cuMemAddressFree(got, 2 * granularity));
}

}  // namespace
