// Bad input from a program gets CUDA error codes, never a crash or a hang: unknown and destroyed
// handles, null pointers, unsupported entry points, bad images.
#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  CUdeviceptr p;
  EXPECT_TRUE(cuMemAlloc(nullptr, 16) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemAlloc(&p, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemcpyHtoD(0x1234, "x", 1) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemFree(0xdeadbeef000) == CUDA_ERROR_INVALID_VALUE);
  CUmodule m;
  const char garbage[] = "this is not a module image";
  EXPECT_TRUE(cuModuleLoadData(&m, garbage) != CUDA_SUCCESS);
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction f;
  EXPECT_TRUE(cuModuleGetFunction(&f, m, "no_such_kernel") == CUDA_ERROR_NOT_FOUND);
  CUstream bogus_stream = reinterpret_cast<CUstream>(0x12345678);
  EXPECT_TRUE(cuStreamSynchronize(bogus_stream) == CUDA_ERROR_INVALID_HANDLE);
  // A stream polled, then destroyed, is refused (rgpu's client answers for its handles).
  CUstream gone;
  CHECK(cuStreamCreate(&gone, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamQuery(gone));
  CHECK(cuStreamQuery(gone));
  unsigned flags = 0;
  CHECK(cuStreamGetFlags(gone, &flags));
  CHECK(cuStreamDestroy(gone));
  EXPECT_TRUE(cuStreamGetFlags(gone, &flags) == CUDA_ERROR_INVALID_HANDLE);  // answered locally
  EXPECT_TRUE(cuStreamQuery(gone) == CUDA_ERROR_INVALID_HANDLE);
  // An entry point rgpu does not implement says so (a Windows device's LUID).
  char luid[8];
  unsigned node_mask = 0;
  EXPECT_TRUE(cuDeviceGetLuid(luid, &node_mask, 0) == CUDA_ERROR_NOT_SUPPORTED);
  // Managed memory with flags CUDA does not define is refused.
  CUdeviceptr managed;
  EXPECT_TRUE(cuMemAllocManaged(&managed, 64, 0x10) == CUDA_ERROR_INVALID_VALUE);
  // Too many threads per block.
  CHECK(cuModuleGetFunction(&f, m, "empty_kernel"));
  EXPECT_TRUE(cuLaunchKernel(f, 1, 1, 1, 4096, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS);
  CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  CHECK(cuCtxSynchronize());
  const char* name = nullptr;
  CHECK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &name));
  EXPECT_TRUE(std::string(name) == "CUDA_ERROR_ILLEGAL_ADDRESS");
  CHECK(cuCtxDestroy(ctx));
  printf("bad_calls: OK\n");
  return 0;
}
