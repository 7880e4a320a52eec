// Driver API behaviour that needs no kernels: initialisation, devices, contexts, memory.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::Name;

TEST(SoftgpuApiTest, NotInitializedBeforeCuInit) {
  int count = -1;
  if (cuDeviceGetCount(&count) == CUDA_SUCCESS) GTEST_SKIP() << "driver already initialised";
  CU_EXPECT_EQ(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  CUcontext ctx;
  CU_EXPECT_EQ(cuCtxCreate(&ctx, nullptr, 0, 0), CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  CU_ASSERT_OK(cuDriverGetVersion(&version));
  EXPECT_EQ(version, 13000);
  CU_EXPECT_EQ(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuInit(0));
  CU_ASSERT_OK(cuDeviceGetCount(&count));
}

TEST(SoftgpuApiTest, EnvironmentConfiguresDevices) {
  int count = -1;
  if (cuDeviceGetCount(&count) == CUDA_SUCCESS) GTEST_SKIP() << "driver already initialised";
  setenv("RGPU_SOFTGPU_MEMORY_MB", "64", 1);
  setenv("RGPU_SOFTGPU_SMS", "3", 1);
  setenv("RGPU_SOFTGPU_DEVICES", "2", 1);
  CU_ASSERT_OK(cuInit(0));
  CU_ASSERT_OK(cuDeviceGetCount(&count));
  EXPECT_EQ(count, 2);
  size_t bytes = 0;
  CU_ASSERT_OK(cuDeviceTotalMem(&bytes, 1));
  EXPECT_EQ(bytes, 64u << 20);
  int sms = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1));
  EXPECT_EQ(sms, 3);
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 1));
  CUdeviceptr p;
  CU_EXPECT_EQ(cuMemAlloc(&p, 65u << 20), CUDA_ERROR_OUT_OF_MEMORY);
  CU_ASSERT_OK(cuMemAlloc(&p, 32u << 20));
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, KernelTimeoutFromEnvironment) {
  int count = -1;
  if (cuDeviceGetCount(&count) == CUDA_SUCCESS) GTEST_SKIP() << "driver already initialised";
  const std::string ptx = softgpu_test::KernelFile("test_kernels.ptx");
  if (ptx.empty()) GTEST_SKIP() << "test kernels were not built (no nvcc)";
  setenv("RGPU_SOFTGPU_KERNEL_TIMEOUT_MS", "200", 1);
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx.c_str()));
  CUfunction spin;
  CU_ASSERT_OK(cuModuleGetFunction(&spin, m, "spin_until"));
  CUdeviceptr flag;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  void* args[] = {&flag};
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(cuLaunchKernel(spin, 2, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_TIMEOUT);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("RGPU_SOFTGPU_KERNEL_TIMEOUT_MS"), std::string::npos) << err;
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

// Of a fat binary's PTX entries softgpu takes the newest at or below its compute capability
// (12.0 here) that it decodes completely: compute_90a's holds wgmma, which it lacks, so the kernel
// runs from compute_75's instead of failing at launch.
TEST(SoftgpuApiTest, PtxFallback) {
  const std::string fatbin = softgpu_test::KernelFile("fallback_kernels.fatbin");
  if (fatbin.empty()) GTEST_SKIP() << "test kernels were not built (no nvcc)";
  CU_ASSERT_OK(cuInit(0));
  int major = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  if (major < 9) GTEST_SKIP() << "the device reports below 9.0";
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, fatbin.data()));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "which_ptx"));
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 4));
  void* args[] = {&out};
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  int which = 0;
  CU_ASSERT_OK(cuMemcpyDtoH(&which, out, 4));
  EXPECT_EQ(which, 75);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, DeviceQueries) {
  CU_ASSERT_OK(cuInit(0));
  int count = 0;
  CU_ASSERT_OK(cuDeviceGetCount(&count));
  ASSERT_GE(count, 1);
  CUdevice dev;
  CU_ASSERT_OK(cuDeviceGet(&dev, 0));
  CU_EXPECT_EQ(cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
  char name[64];
  CU_ASSERT_OK(cuDeviceGetName(name, sizeof name, 0));
  EXPECT_STREQ(name, "rgpu softgpu");
  char tiny[4];
  CU_ASSERT_OK(cuDeviceGetName(tiny, sizeof tiny, 0));
  EXPECT_STREQ(tiny, "rgp");
  size_t total = 0;
  CU_ASSERT_OK(cuDeviceTotalMem(&total, 0));
  EXPECT_GT(total, 0u);
  CUuuid a, b;
  CU_ASSERT_OK(cuDeviceGetUuid(&a, 0));
  CU_ASSERT_OK(cuDeviceGetUuid(&b, 0));
  EXPECT_EQ(memcmp(&a, &b, sizeof a), 0);
  char bus[32];
  CU_ASSERT_OK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
  EXPECT_EQ(strlen(bus), 12u);
  CU_EXPECT_EQ(cuDeviceGetName(name, sizeof name, 99), CUDA_ERROR_INVALID_DEVICE);
  CU_EXPECT_EQ(cuDeviceGetName(nullptr, 10, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST(SoftgpuApiTest, EveryAttributeHasAValue) {
  CU_ASSERT_OK(cuInit(0));
  for (int attr = 1; attr < CU_DEVICE_ATTRIBUTE_MAX; ++attr) {
    int v = -12345;
    CU_EXPECT_EQ(cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(attr), 0), CUDA_SUCCESS);
    EXPECT_NE(v, -12345) << "attribute " << attr;
  }
  int v;
  CU_EXPECT_EQ(cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(0), 0),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  auto attr = [](CUdevice_attribute a) {
    int value = 0;
    EXPECT_EQ(cuDeviceGetAttribute(&value, a, 0), CUDA_SUCCESS);
    return value;
  };
  // The default architecture is 12.0, the one NVIDIA's CUDA 13 libraries carry PTX for.
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 12);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 0);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR), 1536);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR), 32);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR), 100 * 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE), 32);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z), 64);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), 2147483647);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK), 48 * 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), 99 * 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING), 1);
  EXPECT_GE(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 1);
  EXPECT_GT(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE), 0);
}

// Each test runs in its own process (gtest_discover_tests), so the architecture, read once, is
// still unread here.
TEST(SoftgpuApiTest, ComputeCapabilityIsConfigurable) {
  setenv("RGPU_SOFTGPU_COMPUTE_CAPABILITY", "7.5", 1);
  CU_ASSERT_OK(cuInit(0));
  auto attr = [](CUdevice_attribute a) {
    int value = 0;
    EXPECT_EQ(cuDeviceGetAttribute(&value, a, 0), CUDA_SUCCESS);
    return value;
  };
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 7);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 5);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR), 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR), 16);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), 64 * 1024);
  // A kernel may not ask for more dynamic shared memory than this architecture has.
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  const char* ptx = ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k() { ret; }\n";
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "k"));
  CU_EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65 * 1024),
               CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024));
  int version = 0;
  CU_ASSERT_OK(cuFuncGetAttribute(&version, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
  EXPECT_EQ(version, 75);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, UnknownComputeCapabilityKeepsTheDefault) {
  setenv("RGPU_SOFTGPU_COMPUTE_CAPABILITY", "7.0", 1);
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(cuInit(0));
  int major = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(major, 12);
  EXPECT_NE(err.find("ignoring RGPU_SOFTGPU_COMPUTE_CAPABILITY=7.0"), std::string::npos) << err;
}

TEST(SoftgpuApiTest, ErrorNamesAndStrings) {
  const char* s = nullptr;
  CU_ASSERT_OK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
  CU_ASSERT_OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
  EXPECT_STREQ(s, "invalid argument");
  CU_ASSERT_OK(cuGetErrorName(CUDA_ERROR_UNKNOWN, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_UNKNOWN");
  CU_EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(123456), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(s, nullptr);
}

TEST(SoftgpuApiTest, ContextStackIsPerThread) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext a, b, cur;
  CU_ASSERT_OK(cuCtxCreate(&a, nullptr, 0, 0));
  CU_ASSERT_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  CU_ASSERT_OK(cuCtxCreate(&b, nullptr, 0, 0));
  CU_ASSERT_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, b);
  CU_ASSERT_OK(cuCtxPopCurrent(&cur));
  EXPECT_EQ(cur, b);
  CU_ASSERT_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  CU_ASSERT_OK(cuCtxPushCurrent(b));
  CU_ASSERT_OK(cuCtxSetCurrent(a));
  CU_ASSERT_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  CUdevice dev = -1;
  CU_ASSERT_OK(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  std::thread([&] {
    CUcontext none = reinterpret_cast<CUcontext>(1);
    EXPECT_EQ(cuCtxGetCurrent(&none), CUDA_SUCCESS);
    EXPECT_EQ(none, nullptr);
    CUdeviceptr p;
    EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(cuCtxSetCurrent(b), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_SUCCESS);
  }).join();
  CU_ASSERT_OK(cuCtxDestroy(a));
  CU_ASSERT_OK(cuCtxGetCurrent(&cur));
  EXPECT_NE(cur, a);
  CU_EXPECT_EQ(cuCtxPushCurrent(a), CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuCtxDestroy(a), CUDA_ERROR_INVALID_CONTEXT);
  CU_ASSERT_OK(cuCtxDestroy(b));
  while (cuCtxPopCurrent(&cur) == CUDA_SUCCESS) {
  }
  CUdeviceptr p;
  CU_EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(SoftgpuApiTest, PrimaryContext) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext p1, p2;
  CU_ASSERT_OK(cuDevicePrimaryCtxRetain(&p1, 0));
  CU_ASSERT_OK(cuDevicePrimaryCtxRetain(&p2, 0));
  EXPECT_EQ(p1, p2);
  unsigned flags = 99;
  int active = 0;
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 1);
  CU_ASSERT_OK(cuCtxSetCurrent(p1));
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 1024));
  CU_EXPECT_EQ(cuCtxDestroy(p1), CUDA_ERROR_INVALID_CONTEXT);
  CU_ASSERT_OK(cuDevicePrimaryCtxRelease(0));
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 1);
  CU_ASSERT_OK(cuDevicePrimaryCtxRelease(0));
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 0);
  CU_EXPECT_EQ(cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
  CU_EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  CU_ASSERT_OK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_YIELD));
  CU_ASSERT_OK(cuDevicePrimaryCtxRetain(&p2, 0));
  EXPECT_EQ(p1, p2);
  CU_ASSERT_OK(cuMemAlloc(&d, 16));
  CU_ASSERT_OK(cuDevicePrimaryCtxReset(0));
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 0);
  EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_YIELD));
  CU_ASSERT_OK(cuCtxSetCurrent(nullptr));
}

// Every limit a driver answers for an ordinary context (NVIDIA's libraries query them all; cuBLAS
// stops on CU_LIMIT_CIG_ENABLED).
TEST(SoftgpuApiTest, ContextLimits) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  size_t v = 1;
  CU_ASSERT_OK(cuCtxGetLimit(&v, CU_LIMIT_CIG_ENABLED));
  EXPECT_EQ(v, 0u);
  CU_ASSERT_OK(cuCtxGetLimit(&v, CU_LIMIT_PERSISTING_L2_CACHE_SIZE));
  CU_ASSERT_OK(cuCtxGetLimit(&v, CU_LIMIT_MAX_L2_FETCH_GRANULARITY));
  CU_ASSERT_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  EXPECT_GT(v, 0u);
  CU_EXPECT_EQ(cuCtxGetLimit(&v, CU_LIMIT_MAX), CUDA_ERROR_UNSUPPORTED_LIMIT);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, MemoryAccounting) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  size_t free0, total;
  CU_ASSERT_OK(cuMemGetInfo(&free0, &total));
  size_t device_total;
  CU_ASSERT_OK(cuDeviceTotalMem(&device_total, 0));
  EXPECT_EQ(total, device_total);
  EXPECT_LE(free0, total);
  std::vector<CUdeviceptr> ptrs;
  for (size_t size : {size_t{1}, size_t{255}, size_t{256}, size_t{1000}, size_t{64} << 20}) {
    CUdeviceptr p;
    CU_ASSERT_OK(cuMemAlloc(&p, size));
    EXPECT_EQ(p % 256, 0u);
    ptrs.push_back(p);
  }
  size_t free1;
  CU_ASSERT_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, 256u + 256u + 256u + 1024u + (64u << 20));
  CUdeviceptr huge;
  CU_EXPECT_EQ(cuMemAlloc(&huge, total + 1), CUDA_ERROR_OUT_OF_MEMORY);
  CU_EXPECT_EQ(cuMemAlloc(&huge, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemFree(ptrs[0] + 256), CUDA_ERROR_INVALID_VALUE);
  for (CUdeviceptr p : ptrs) CU_ASSERT_OK(cuMemFree(p));
  CU_EXPECT_EQ(cuMemFree(ptrs[1]), CUDA_ERROR_INVALID_VALUE);
  size_t free2;
  CU_ASSERT_OK(cuMemGetInfo(&free2, &total));
  EXPECT_EQ(free2, free0);
  CUdeviceptr base;
  size_t size;
  CU_ASSERT_OK(cuMemAlloc(&huge, 4096));
  CU_ASSERT_OK(cuMemGetAddressRange(&base, &size, huge + 100));
  EXPECT_EQ(base, huge);
  EXPECT_EQ(size, 4096u);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, CopiesAndMemsets) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUdeviceptr a, b;
  CU_ASSERT_OK(cuMemAlloc(&a, 1024));
  CU_ASSERT_OK(cuMemAlloc(&b, 1024));
  std::vector<uint8_t> host(1024);
  for (int i = 0; i < 1024; ++i) host[i] = static_cast<uint8_t>(i * 7);
  CU_ASSERT_OK(cuMemcpyHtoD(a, host.data(), 1024));
  CU_ASSERT_OK(cuMemcpyDtoD(b, a, 1024));
  std::vector<uint8_t> back(1024);
  CU_ASSERT_OK(cuMemcpyDtoH(back.data(), b, 1024));
  EXPECT_EQ(back, host);

  CU_ASSERT_OK(cuMemsetD8(a, 0xab, 10));
  CU_ASSERT_OK(cuMemsetD16(a + 16, 0x1234, 4));
  CU_ASSERT_OK(cuMemsetD32(a + 32, 0xdeadbeef, 2));
  CU_ASSERT_OK(cuMemcpyDtoH(back.data(), a, 64));
  EXPECT_EQ(back[9], 0xab);
  EXPECT_EQ(back[10], host[10]);
  uint16_t h16;
  memcpy(&h16, &back[22], 2);
  EXPECT_EQ(h16, 0x1234);
  uint32_t h32;
  memcpy(&h32, &back[36], 4);
  EXPECT_EQ(h32, 0xdeadbeefu);
  CU_EXPECT_EQ(cuMemsetD32(a + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);

  // Out-of-range copies are refused synchronously and leave the context usable.
  CU_EXPECT_EQ(cuMemcpyHtoD(a + 1000, host.data(), 100), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyDtoH(back.data(), a - 16, 16), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyDtoD(b, 0x1234, 16), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemsetD8(b + 1024, 0, 1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyHtoD(a, nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemcpyHtoD(a, host.data(), 0));
  CU_ASSERT_OK(cuCtxSynchronize());

  // Async forms on a stream; host data is staged at the call.
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<uint8_t> src(1024, 5), dst(1024, 0);
  CU_ASSERT_OK(cuMemcpyHtoDAsync(a, src.data(), 1024, s));
  std::fill(src.begin(), src.end(), 9);
  CU_ASSERT_OK(cuMemsetD8Async(b, 3, 512, s));
  CU_ASSERT_OK(cuMemcpyDtoDAsync(b + 512, a, 512, s));
  CU_ASSERT_OK(cuMemcpyDtoHAsync(dst.data(), b, 1024, s));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(dst[0], 3);
  EXPECT_EQ(dst[1023], 5);
  CU_ASSERT_OK(cuStreamDestroy(s));

  // 2D copies with pitches.
  CUdeviceptr pitched;
  size_t pitch;
  CU_ASSERT_OK(cuMemAllocPitch(&pitched, &pitch, 100, 4, 4));
  EXPECT_GE(pitch, 100u);
  std::vector<uint8_t> grid(100 * 4);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<uint8_t>(i);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = grid.data();
  c.srcPitch = 100;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = pitched;
  c.dstPitch = pitch;
  c.WidthInBytes = 100;
  c.Height = 4;
  CU_ASSERT_OK(cuMemcpy2D(&c));
  std::vector<uint8_t> row(100);
  CU_ASSERT_OK(cuMemcpyDtoH(row.data(), pitched + 3 * pitch, 100));
  EXPECT_EQ(row[7], grid[307]);
  c.dstPitch = pitch * 2;  // runs past the allocation
  CU_EXPECT_EQ(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, ThreeDimensionalCopiesAndTwoDimensionalMemsets) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  // A 8x4x3 byte volume on the host copied into a pitched device volume (pitch 16, 5 rows per
  // slice) at offset (x=2, y=1, z=0), then back.
  const size_t w = 8, h = 4, d = 3, pitch = 16, rows = 5;
  std::vector<uint8_t> host(w * h * d);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i + 1);
  CUdeviceptr volume;
  CU_ASSERT_OK(cuMemAlloc(&volume, pitch * rows * d));
  CU_ASSERT_OK(cuMemsetD8(volume, 0, pitch * rows * d));
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = host.data();
  c.srcPitch = w;
  c.srcHeight = h;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = volume;
  c.dstXInBytes = 2;
  c.dstY = 1;
  c.dstPitch = pitch;
  c.dstHeight = rows;
  c.WidthInBytes = w;
  c.Height = h;
  c.Depth = d;
  CU_ASSERT_OK(cuMemcpy3D(&c));
  std::vector<uint8_t> raw(pitch * rows * d);
  CU_ASSERT_OK(cuMemcpyDtoH(raw.data(), volume, raw.size()));
  EXPECT_EQ(raw[2 * pitch * rows + 3 * pitch + 2 + 7], host[2 * w * h + 2 * w + 7]);
  EXPECT_EQ(raw[0], 0);
  c.dstHeight = rows + 2;  // the last slice would run past the allocation
  CU_EXPECT_EQ(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);

  CU_ASSERT_OK(cuMemsetD2D32(volume, pitch, 0xabcdef01u, 2, 3));
  CU_ASSERT_OK(cuMemsetD2D8Async(volume + 12, pitch, 0x77, 4, 2, nullptr));
  CU_ASSERT_OK(cuMemcpyDtoH(raw.data(), volume, raw.size()));
  uint32_t word;
  memcpy(&word, &raw[2 * pitch + 4], 4);
  EXPECT_EQ(word, 0xabcdef01u);
  EXPECT_EQ(raw[pitch + 15], 0x77);
  EXPECT_EQ(raw[2 * pitch + 12], 0);
  CU_EXPECT_EQ(cuMemsetD2D32(volume + 2, pitch, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemsetD2D8(volume, pitch, 0, 16, 100), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

TEST(SoftgpuApiTest, UnifiedCopiesAndHostMemory) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  void* pinned = nullptr;
  CU_ASSERT_OK(cuMemAllocHost(&pinned, 256));
  unsigned flags = 99;
  CU_ASSERT_OK(cuMemHostGetFlags(&flags, pinned));
  EXPECT_EQ(flags, 0u);
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 256));
  memset(pinned, 7, 256);
  const CUdeviceptr host = reinterpret_cast<CUdeviceptr>(pinned);
  CU_ASSERT_OK(cuMemcpy(d, host, 256));    // host -> device
  CU_ASSERT_OK(cuMemcpy(d + 128, d, 64));  // device -> device
  std::vector<uint8_t> back(256, 0);
  CU_ASSERT_OK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(back.data()), d, 256, nullptr));
  CU_ASSERT_OK(cuStreamSynchronize(nullptr));
  EXPECT_EQ(back[200], 7);
  CU_ASSERT_OK(cuMemFreeHost(pinned));
  CU_EXPECT_EQ(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);

  std::vector<uint8_t> buffer(8192);
  CU_ASSERT_OK(cuMemHostRegister(buffer.data(), buffer.size(), 0));
  CU_EXPECT_EQ(cuMemHostRegister(buffer.data() + 100, 10, 0),
               CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CU_ASSERT_OK(cuMemHostUnregister(buffer.data()));
  CU_EXPECT_EQ(cuMemHostUnregister(buffer.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

}  // namespace
