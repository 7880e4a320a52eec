// driver_bench: measures the CUDA driver API as a program sees it, wherever libcuda.so.1 sends
// it: through rgpu to a server (run under `rgpu run`), or straight into the software GPU in
// process (libsoftgpu-cuda.so as libcuda.so.1). Prints one JSON object on stdout; every figure
// is the median of several repetitions. `rgpu bench` runs it both ways beside the transport's
// own floor (ucx_perftest).
//   driver_bench KERNELS_FATBIN [--quick]
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* name = "?";
    cuGetErrorName(r, &name);
    fprintf(stderr, "driver_bench: %s failed: %s\n", what, name);
    exit(1);
  }
}
#define CHECK(call) Check((call), #call)

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

template <typename F>
double Median(int reps, F f) {
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) v.push_back(f());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: driver_bench KERNELS_FATBIN [--quick | --null-only]\n");
    return 2;
  }
  const bool quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
  // Only the null round trip (rgpu bench pairs it with a floor measured just before).
  const bool null_only = argc > 2 && strcmp(argv[2], "--null-only") == 0;
  const int reps = quick ? 3 : 7;
  CHECK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
  CUmodule module;
  CHECK(cuModuleLoad(&module, argv[1]));
  CUfunction empty, increment;
  CHECK(cuModuleGetFunction(&empty, module, "empty_kernel"));
  CHECK(cuModuleGetFunction(&increment, module, "increment"));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::string json = "{";
  auto put = [&json](const char* key, double value) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s\"%s\": %.6g", json.size() > 1 ? ", " : "", key, value);
    json += buf;
  };

  // A call that must reach the device and come back: querying an idle stream.
  const int null_n = quick ? 2000 : 10000;
  put("null_rtt_us", Median(reps, [&] {
        auto t0 = Clock::now();
        for (int i = 0; i < null_n; ++i) CHECK(cuStreamQuery(s));
        return Seconds(t0, Clock::now()) * 1e6 / null_n;
      }));
  if (null_only) {
    printf("%s}\n", json.c_str());
    return 0;
  }

  // Launch of an empty kernel plus stream synchronize, one at a time.
  const int sync_n = quick ? 300 : 2000;
  put("sync_launch_us", Median(reps, [&] {
        auto t0 = Clock::now();
        for (int i = 0; i < sync_n; ++i) {
          CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
          CHECK(cuStreamSynchronize(s));
        }
        return Seconds(t0, Clock::now()) * 1e6 / sync_n;
      }));

  // N launches, then one synchronize.
  const int async_n = quick ? 2000 : 20000;
  put("async_launch_per_s", Median(reps, [&] {
        auto t0 = Clock::now();
        for (int i = 0; i < async_n; ++i) {
          CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
        }
        CHECK(cuStreamSynchronize(s));
        return async_n / Seconds(t0, Clock::now());
      }));

  // 64 MiB transfers: pinned both ways, pageable to the device.
  const size_t big = size_t{64} << 20;
  CUdeviceptr d;
  CHECK(cuMemAlloc(&d, big));
  void* pinned = nullptr;
  CHECK(cuMemAllocHost(&pinned, big));
  std::vector<char> pageable(big, 1);
  memset(pinned, 2, big);
  const int bw_reps = quick ? 3 : 5;
  auto mibps = [&](double sec) { return (big / double(1 << 20)) / sec; };
  put("h2d_pinned_64MiB_MiBps", Median(bw_reps, [&] {
        auto t0 = Clock::now();
        CHECK(cuMemcpyHtoDAsync(d, pinned, big, s));
        CHECK(cuStreamSynchronize(s));
        return mibps(Seconds(t0, Clock::now()));
      }));
  put("d2h_pinned_64MiB_MiBps", Median(bw_reps, [&] {
        auto t0 = Clock::now();
        CHECK(cuMemcpyDtoHAsync(pinned, d, big, s));
        CHECK(cuStreamSynchronize(s));
        return mibps(Seconds(t0, Clock::now()));
      }));
  put("h2d_pageable_64MiB_MiBps", Median(bw_reps, [&] {
        auto t0 = Clock::now();
        CHECK(cuMemcpyHtoD(d, pageable.data(), big));
        CHECK(cuCtxSynchronize());
        return mibps(Seconds(t0, Clock::now()));
      }));

  // Copy latency from 4 B to 64 MiB: a synchronous device-to-host copy, and a host-to-device
  // copy followed by a synchronize.
  for (size_t size = 4; size <= big; size *= 4) {
    const int n = size <= (1 << 16) ? (quick ? 50 : 300) : (size <= (4 << 20) ? 10 : 3);
    char key[64];
    snprintf(key, sizeof key, "d2h_us_%zu", size);
    put(key, Median(reps, [&] {
          auto t0 = Clock::now();
          for (int i = 0; i < n; ++i) CHECK(cuMemcpyDtoH(pinned, d, size));
          return Seconds(t0, Clock::now()) * 1e6 / n;
        }));
    snprintf(key, sizeof key, "h2d_us_%zu", size);
    put(key, Median(reps, [&] {
          auto t0 = Clock::now();
          for (int i = 0; i < n; ++i) {
            CHECK(cuMemcpyHtoDAsync(d, pinned, size, s));
            CHECK(cuStreamSynchronize(s));
          }
          return Seconds(t0, Clock::now()) * 1e6 / n;
        }));
    if (size * 4 > big && size != big) size = big / 4;  // end exactly at 64 MiB
  }

  // The chatty workload: 20 000 small kernels, a synchronize every 100; checks the count.
  CUdeviceptr counter;
  CHECK(cuMemAlloc(&counter, sizeof(int)));
  const int chatty_n = quick ? 2000 : 20000;
  put("chatty_s", Median(quick ? 1 : 3, [&] {
        CHECK(cuMemsetD32(counter, 0, 1));
        auto t0 = Clock::now();
        void* args[] = {&counter};
        for (int i = 0; i < chatty_n; ++i) {
          CHECK(cuLaunchKernel(increment, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr));
          if (i % 100 == 99) CHECK(cuStreamSynchronize(s));
        }
        CHECK(cuStreamSynchronize(s));
        double sec = Seconds(t0, Clock::now());
        int got = 0;
        CHECK(cuMemcpyDtoH(&got, counter, sizeof got));
        if (got != chatty_n) {
          fprintf(stderr, "driver_bench: chatty counter %d, want %d\n", got, chatty_n);
          exit(1);
        }
        return sec;
      }));
  // A graph of 64 kernel nodes in a chain, launched 100 times, then one synchronize: nodes run
  // per second (what a graph saves: one launch call for all its nodes), and the time each
  // launch call takes the program. Checks the count. The
  // graph API is looked up at run time: the software GPU in process has none (then no figure).
  using GraphCreate = CUresult (*)(CUgraph*, unsigned);
  using AddKernelNode = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                     const CUDA_KERNEL_NODE_PARAMS*);
  using Instantiate = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);
  using Launch = CUresult (*)(CUgraphExec, CUstream);
  auto graph_create = reinterpret_cast<GraphCreate>(dlsym(RTLD_DEFAULT, "cuGraphCreate"));
  auto add_kernel = reinterpret_cast<AddKernelNode>(dlsym(RTLD_DEFAULT, "cuGraphAddKernelNode_v2"));
  auto instantiate =
      reinterpret_cast<Instantiate>(dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags"));
  auto launch = reinterpret_cast<Launch>(dlsym(RTLD_DEFAULT, "cuGraphLaunch"));
  if (graph_create != nullptr && add_kernel != nullptr && instantiate != nullptr &&
      launch != nullptr) {
    const int graph_nodes = 64, graph_launches = quick ? 20 : 100;
    CUgraph graph;
    CHECK(graph_create(&graph, 0));
    CUgraphNode previous = nullptr;
    void* increment_args[] = {&counter};
    for (int i = 0; i < graph_nodes; ++i) {
      CUDA_KERNEL_NODE_PARAMS p = {};
      p.func = increment;
      p.gridDimX = p.gridDimY = p.gridDimZ = 1;
      p.blockDimX = 32;
      p.blockDimY = p.blockDimZ = 1;
      p.kernelParams = increment_args;
      CUgraphNode node;
      CHECK(add_kernel(&node, graph, previous ? &previous : nullptr, previous ? 1 : 0, &p));
      previous = node;
    }
    CUgraphExec exec;
    CHECK(instantiate(&exec, graph, 0));
    put("graph_nodes_per_s", Median(reps, [&] {
          CHECK(cuMemsetD32(counter, 0, 1));
          CHECK(cuCtxSynchronize());
          auto t0 = Clock::now();
          for (int i = 0; i < graph_launches; ++i) CHECK(launch(exec, s));
          CHECK(cuStreamSynchronize(s));
          double sec = Seconds(t0, Clock::now());
          int got = 0;
          CHECK(cuMemcpyDtoH(&got, counter, sizeof got));
          if (got != graph_nodes * graph_launches) {
            fprintf(stderr, "driver_bench: graph counter %d, want %d\n", got,
                    graph_nodes * graph_launches);
            exit(1);
          }
          return graph_nodes * graph_launches / sec;
        }));
    // What a launch costs the launching thread (submission only; the work is waited for after
    // the clock stops): with a GPU that keeps up, this bounds how fast graphs can be issued.
    put("graph_launch_us", Median(reps, [&] {
          auto t0 = Clock::now();
          for (int i = 0; i < graph_launches; ++i) CHECK(launch(exec, s));
          double sec = Seconds(t0, Clock::now());
          CHECK(cuStreamSynchronize(s));
          return sec * 1e6 / graph_launches;
        }));
  }
  json += "}";
  printf("%s\n", json.c_str());
  CHECK(cuMemFreeHost(pinned));
  CHECK(cuCtxDestroy(ctx));
  return 0;
}
