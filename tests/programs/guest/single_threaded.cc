// A program that starts no thread of its own: its C library is in single-threaded mode, where
// malloc takes no lock. The interposer's runtime starts threads through its own copy of the C
// library, and the dynamic loader allocates their thread-local storage with the program's malloc,
// so after the first driver call the program's C library must know the process has several
// threads (__libc_single_threaded is 0), or the two mallocs race (the heap corruption seen with
// -cudart shared and cuBLAS). Then it allocates on this thread while the runtime works (posted
// memsets, flushed by the runtime's batch thread), many times, and checks nothing broke.
#include <cuda.h>
#include <sys/single_threaded.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main() {
  if (!__libc_single_threaded) {
    fprintf(stderr, "single_threaded: the C library thinks threads already ran\n");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuCtxCreate(&ctx, nullptr, 0, dev) != CUDA_SUCCESS) {
    fprintf(stderr, "single_threaded: no context\n");
    return 1;
  }
  if (__libc_single_threaded) {
    fprintf(stderr, "single_threaded: the C library still thinks it is alone after cuInit\n");
    return 1;
  }
  CUdeviceptr p;
  if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) return 1;
  std::vector<void*> blocks;
  for (int i = 0; i < 20000; ++i) {
    if (cuMemsetD8Async(p, static_cast<unsigned char>(i), 1 << 20, nullptr) != CUDA_SUCCESS)
      return 1;
    blocks.push_back(malloc(16 + i % 512));
    if (blocks.size() > 64) {
      for (void* b : blocks) free(b);
      blocks.clear();
    }
  }
  for (void* b : blocks) free(b);
  if (cuCtxSynchronize() != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) return 1;
  cuCtxDestroy(ctx);
  printf("single_threaded: OK\n");
  return 0;
}
