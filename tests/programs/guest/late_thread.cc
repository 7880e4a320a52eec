// The interposer is a guest of the program's threads: a thread the program started before the
// runtime was loaded (here by a call on the main thread that needs no server) makes the first
// connection to the server, and works. The runtime lives in its own link namespace, whose libc
// has not set up that thread's ctype tables; the runtime must do it (client/thread_setup.h).
#include <cuda.h>

#include <cstdio>
#include <mutex>
#include <thread>

int main() {
  int result = 1;
  std::thread worker;
  {
    // Started first, then held until the runtime is loaded.
    std::mutex gate;
    gate.lock();
    worker = std::thread([&] {
      std::lock_guard<std::mutex> wait(gate);
      CUdevice dev;
      CUcontext ctx;
      size_t free = 0, total = 0;
      if (cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
          cuCtxCreate(&ctx, nullptr, 0, dev) == CUDA_SUCCESS &&
          cuMemGetInfo(&free, &total) == CUDA_SUCCESS && total > 0) {
        result = 0;
      }
    });
    const char* name = nullptr;
    cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &name);  // loads the runtime; no server needed
    gate.unlock();
    worker.join();
  }
  printf("late_thread: %s\n", result == 0 ? "ok" : "the thread's driver calls failed");
  return result;
}
