// Posts work and exits without synchronizing or destroying its context: memsets and launches on
// a stream, then frees every buffer (frees are posted too) and returns from main. Whatever is
// still batched in the client at exit must reach the server; the exit test checks on the
// server's side that the frees arrived (the session closes with no allocation left to release).
#include "check.h"

int main() {
  InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction add;
  CHECK(cuModuleGetFunction(&add, m, "add_to"));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  constexpr int kBuffers = 8;
  CUdeviceptr buffers[kBuffers];
  for (CUdeviceptr& b : buffers) CHECK(cuMemAlloc(&b, 1 << 20));
  for (CUdeviceptr& b : buffers) {
    CHECK(cuMemsetD32Async(b, 0, (1 << 20) / 4, s));
    int one = 1;
    void* args[] = {&b, &one};
    CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
  }
  for (CUdeviceptr b : buffers) CHECK(cuMemFree(b));
  printf("exit_unsynced: posted %d memsets, %d launches and %d frees\n", kBuffers, kBuffers,
         kBuffers);
  return 0;
}
