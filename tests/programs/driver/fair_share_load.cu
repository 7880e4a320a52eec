// Keeps a GPU busy for argv[1] seconds with kernels of about argv[2] spin iterations each (a
// synchronize every 4), and prints how many ran. Several of these, run by tenants of different
// weights against `rgpu-server --fair-share`, compete for the GPU.
#include <chrono>
#include <cstdlib>

#include "check.h"

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  int iters = argc > 2 ? atoi(argv[2]) : 2000;
  InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction spin;
  CHECK(cuModuleGetFunction(&spin, m, "spin"));
  CUdeviceptr out;
  CHECK(cuMemAlloc(&out, 4));
  void* args[] = {&iters, &out};
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long launched = 0;
  while (std::chrono::steady_clock::now() < end) {
    CHECK(cuLaunchKernel(spin, 2, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr));
    if (++launched % 4 == 0) CHECK(cuCtxSynchronize());
  }
  CHECK(cuCtxSynchronize());
  printf("fair_share_load: %ld kernels\n", launched);
  return 0;
}
