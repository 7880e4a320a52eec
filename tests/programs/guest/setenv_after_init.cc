// A program that changes its environment after the driver is loaded: its C library then moves
// the environment array (freeing the old one), which the interposer's private namespace had
// been given at load. The runtime (and, on RGPU_SERVER=local, the server and softgpu in this
// process, which read the environment when a module loads) must not read the freed array.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
const char kPtx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry nothing() { ret; }\n";
}  // namespace

int main() {
  setenv("GUEST_BEFORE_INIT", "1", 1);  // the array is the C library's own (malloc'd) from here
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuCtxCreate(&ctx, nullptr, 0, dev) != CUDA_SUCCESS) {
    fprintf(stderr, "setenv_after_init: no context\n");
    return 1;
  }
  // Grow the array until it moves many times, and fill what was freed with garbage.
  for (int i = 0; i < 2000; ++i) {
    setenv(("GUEST_VAR_" + std::to_string(i)).c_str(), "x", 1);
    if (i % 100 == 0) {
      std::vector<void*> junk;
      for (int j = 0; j < 64; ++j) {
        void* p = malloc(64 << (j % 8));
        memset(p, 0xff, 64 << (j % 8));
        junk.push_back(p);
      }
      for (void* p : junk) free(p);
    }
  }
  for (int i = 0; i < 4; ++i) {
    CUmodule module;
    CUfunction fn;
    if (cuModuleLoadData(&module, kPtx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn, module, "nothing") != CUDA_SUCCESS ||
        cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS ||
        cuCtxSynchronize() != CUDA_SUCCESS || cuModuleUnload(module) != CUDA_SUCCESS) {
      fprintf(stderr, "setenv_after_init: module %d failed\n", i);
      return 1;
    }
  }
  cuCtxDestroy(ctx);
  printf("setenv_after_init: OK\n");
  return 0;
}
