// A posted launch that no later call carries: under rgpu the client's batch-delay thread sends
// the batch once it has waited its delay (RGPU_BATCH_US, 200 us by default), so the kernel runs
// while the program does host work without calling the driver. The kernel runs for a tenth of a
// second or more; the program sleeps several times that, then asks once whether the stream is
// idle: it must be. Had the launch waited for that query, it would have left with it and still
// be running (CUDA_ERROR_NOT_READY). On a GPU the launch starts at once and the check holds all
// the more.
#include <unistd.h>

#include <chrono>

#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  (void)ctx;
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction spin;
  CHECK(cuModuleGetFunction(&spin, m, "spin"));
  CUdeviceptr out;
  CHECK(cuMemAlloc(&out, sizeof(unsigned)));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // A length of busy work that takes at least 100 ms here (doubling from a small one).
  int iters = 1 << 16;
  double seconds = 0;
  for (;;) {
    void* args[] = {&iters, &out};
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cuLaunchKernel(spin, 64, 1, 1, 128, 1, 1, 0, s, args, nullptr));
    CHECK(cuStreamSynchronize(s));
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (seconds >= 0.1 || iters >= (1 << 30)) break;
    iters *= 2;
  }
  for (int round = 0; round < 3; ++round) {
    void* args[] = {&iters, &out};
    CHECK(cuLaunchKernel(spin, 64, 1, 1, 128, 1, 1, 0, s, args, nullptr));
    // Host work, no driver call: four times the kernel's length and a second more.
    usleep(static_cast<useconds_t>((4 * seconds + 1) * 1e6));
    const CUresult r = cuStreamQuery(s);
    if (r != CUDA_SUCCESS) {
      fprintf(stderr, "round %d: the stream is not idle %.2f s after a %.3f s kernel (%d)\n", round,
              4 * seconds + 1, seconds, r);
      return 1;
    }
  }
  CHECK(cuStreamDestroy(s));
  CHECK(cuMemFree(out));
  printf("a posted launch ran without a later call (kernel %.3f s, %d iterations)\n", seconds,
         iters);
  return 0;
}
