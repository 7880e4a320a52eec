// A kernel reads far outside its allocation: the program gets CUDA_ERROR_ILLEGAL_ADDRESS (an H200
// says CUDA_ERROR_INVALID_ADDRESS_SPACE), the error is sticky for the context, and a fresh context
// afterwards works again on the software GPU (NVIDIA's driver may keep the fault for the process).
#include <string.h>

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
  EXPECT_TRUE(fault == CUDA_ERROR_ILLEGAL_ADDRESS || fault == CUDA_ERROR_INVALID_ADDRESS_SPACE);
  // Sticky: the context stays unusable.
  int value = 0;
  EXPECT_TRUE(cuMemcpyDtoH(&value, out, sizeof value) == fault);
  char name[128] = {};
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDeviceGetName(name, sizeof name, dev));
  CHECK(cuCtxDestroy(ctx));
  // A new context works (or, on NVIDIA's driver, may report the process's fault).
  CUcontext fresh;
  CUresult created = cuCtxCreate(&fresh, nullptr, 0, dev);
  if (created == fault && strstr(name, "softgpu") == nullptr) {
    printf("out_of_bounds: fault reported as %d, kept for the process\n", (int)fault);
    return 0;
  }
  CHECK(created);
  CUdeviceptr q;
  CHECK(cuMemAlloc(&q, 64));
  CHECK(cuMemsetD32(q, 42, 16));
  CHECK(cuMemcpyDtoH(&value, q, sizeof value));
  EXPECT_TRUE(value == 42);
  CHECK(cuCtxDestroy(fresh));
  printf("out_of_bounds: fault reported as %d, new context OK\n", (int)fault);
  return 0;
}
