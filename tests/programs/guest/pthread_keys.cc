// A program that keeps per-thread values under pthread keys of its own (as OpenMP runtimes and
// NVIDIA's runtime do) on the thread that first calls the driver. The interposer's private
// namespace has its own C library, which numbers its keys from 0 too and reads the same thread's
// key slots: what rgpu runs on the program's threads must not use keys, or it reads and
// overwrites the program's values (with RGPU_SERVER=local, OpenSSL's per-thread state did, and
// the program died at exit in OPENSSL_cleanup).
#include <cuda.h>
#include <pthread.h>

#include <cstdio>

namespace {
constexpr int kKeys = 16;
pthread_key_t keys[kKeys];
int values[kKeys];
}  // namespace

int main() {
  for (int i = 0; i < kKeys; ++i) {
    if (pthread_key_create(&keys[i], nullptr) != 0 || pthread_setspecific(keys[i], &values[i])) {
      fprintf(stderr, "pthread_keys: no key %d\n", i);
      return 1;
    }
  }
  int count = 0;
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1 ||
      cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuCtxCreate(&ctx, nullptr, 0, dev) != CUDA_SUCCESS ||
      cuMemAlloc(&p, 256) != CUDA_SUCCESS || cuMemsetD8(p, 1, 256) != CUDA_SUCCESS ||
      cuMemFree(p) != CUDA_SUCCESS) {
    fprintf(stderr, "pthread_keys: driver calls failed\n");
    return 1;
  }
  for (int i = 0; i < kKeys; ++i) {
    if (pthread_getspecific(keys[i]) != &values[i]) {
      fprintf(stderr, "pthread_keys: key %d was overwritten\n", i);
      return 1;
    }
  }
  cuCtxDestroy(ctx);
  printf("pthread_keys: OK\n");
  return 0;  // and the process exits cleanly
}
