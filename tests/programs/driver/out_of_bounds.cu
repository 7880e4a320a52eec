// A kernel reads far outside its allocation: the program gets CUDA_ERROR_ILLEGAL_ADDRESS, the
// error is sticky for the context, and a fresh context afterwards works again.
#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction fn;
  CHECK(cuModuleGetFunction(&fn, module, "read_at"));
  CUdeviceptr p, out;
  CHECK(cuMemAlloc(&p, 1024));
  CHECK(cuMemAlloc(&out, 1024));
  long long offset = 1ll << 30;  // 4 GiB past the start of a 1 KiB allocation
  void* args[] = {&p, &offset, &out};
  CUresult launch = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
  CUresult sync = cuCtxSynchronize();
  CUresult fault = launch != CUDA_SUCCESS ? launch : sync;
  EXPECT_TRUE(fault == CUDA_ERROR_ILLEGAL_ADDRESS);
  // Sticky: the context stays unusable.
  int value = 0;
  EXPECT_TRUE(cuMemcpyDtoH(&value, out, sizeof value) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(cuCtxDestroy(ctx));
  // A new context works.
  CUcontext fresh = InitContext();
  CUdeviceptr q;
  CHECK(cuMemAlloc(&q, 64));
  CHECK(cuMemsetD32(q, 42, 16));
  CHECK(cuMemcpyDtoH(&value, q, sizeof value));
  EXPECT_TRUE(value == 42);
  CHECK(cuCtxDestroy(fresh));
  printf("out_of_bounds: fault reported as CUDA_ERROR_ILLEGAL_ADDRESS, new context OK\n");
  return 0;
}
