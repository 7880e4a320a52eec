// softgpu_bench: the software GPU's speed on reference kernels, run in-process (libsoftgpu-cuda.so
// loaded as libcuda.so.1). For each kernel: wall time per launch (median), lane-instructions per
// launch (softgpu's counter), and lane-instructions per second per host core. Prints a table and
// a JSON object.
//   LD_LIBRARY_PATH=build/lib/softgpu-direct softgpu_bench KERNELS_FATBIN
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "softgpu_bench: %s failed: %d\n", what, r);
    exit(1);
  }
}
#define CHECK(call) Check((call), #call)

using Counter = CUresult (*)(unsigned long long*);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: softgpu_bench KERNELS_FATBIN\n");
    return 2;
  }
  auto lane_counter = reinterpret_cast<Counter>(dlsym(RTLD_DEFAULT, "softgpuGetLaneInstructions"));
  if (lane_counter == nullptr) {
    fprintf(stderr, "softgpu_bench: not running on the software GPU (no lane counter)\n");
    return 2;
  }
  CHECK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
  int sms = 1;
  CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  const long cores = std::min<long>(sms, sysconf(_SC_NPROCESSORS_ONLN));
  CUmodule m;
  CHECK(cuModuleLoad(&m, argv[1]));
  const int n = 1 << 20, mm = 256;
  CUdeviceptr x, y, z, sum;
  CHECK(cuMemAlloc(&x, n * sizeof(float)));
  CHECK(cuMemAlloc(&y, n * sizeof(float)));
  CHECK(cuMemAlloc(&z, n * sizeof(float)));
  CHECK(cuMemAlloc(&sum, sizeof(float)));
  CHECK(cuMemsetD32(x, 0x3f800000, n));  // 1.0f
  CHECK(cuMemsetD32(y, 0x40000000, n));  // 2.0f
  struct Case {
    const char* name;
    unsigned grid[2], block[2];
    std::vector<void*> args;
  };
  float a = 2.0f;
  int count = n, dim = mm;
  std::vector<Case> cases = {
      {"saxpy", {n / 256, 1}, {256, 1}, {&a, &x, &y, &count}},
      {"reduce_sum", {n / 512, 1}, {256, 1}, {&x, &sum, &count}},
      {"matmul", {mm / 16, mm / 16}, {16, 16}, {&x, &y, &z, &dim}},
      {"warp_scan", {n / 256, 1}, {256, 1}, {&x, &z, &count}},
  };
  std::string json = "{\"cores\": " + std::to_string(cores);
  printf("softgpu on %ld core(s)\n%-12s %12s %16s %22s\n", cores, "kernel", "wall ms", "lane-instr",
         "M lane-instr/s/core");
  double worst = 1e30;
  for (Case& c : cases) {
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, m, c.name));
    std::vector<double> times;
    unsigned long long before = 0, after = 0;
    for (int rep = 0; rep < 5; ++rep) {
      CHECK(lane_counter(&before));
      auto t0 = std::chrono::steady_clock::now();
      CHECK(cuLaunchKernel(f, c.grid[0], c.grid[1], 1, c.block[0], c.block[1], 1, 0, nullptr,
                           c.args.data(), nullptr));
      CHECK(cuCtxSynchronize());
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      CHECK(lane_counter(&after));
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    const double lanes = static_cast<double>(after - before);
    const double rate = lanes / t / cores / 1e6;
    worst = std::min(worst, rate);
    printf("%-12s %12.3f %16.0f %22.1f\n", c.name, t * 1e3, lanes, rate);
    char buf[256];
    snprintf(buf, sizeof buf,
             ", \"%s_ms\": %.4f, \"%s_lane_instructions\": %.0f, "
             "\"%s_mlane_per_s_per_core\": %.1f",
             c.name, t * 1e3, c.name, lanes, c.name, rate);
    json += buf;
  }
  printf("%s}\n", json.c_str());
  CHECK(cuCtxDestroy(ctx));
  return 0;
}
