// peer_bench: the driver-API rows of `rgpu bench --peers`, measured the way driver_bench measures
// them (same loops, counts, kernels and medians) but each row on its own, so that a system that
// fails one row (a call its server or softgpu lacks) still reports the others. Prints one JSON
// object per line as each row ends: {"METRIC": value} or {"error": {"metric": M, "call": C,
// "result": R}}. Adds what driver_bench lacks: 64 MiB device-to-host from pageable memory.
// The 64 MiB rows move pseudo-random bytes, which no transport can compress (LUPINE compresses
// payloads of 64 KiB or more with LZ4; driver_bench's constant fill would flatter it); the
// *_zeros_* rows move zeros, the other extreme, pageable both ways.
//   peer_bench KERNELS_FATBIN [--quick] [METRIC...]     (KERNELS_FATBIN: rgpu-bench-kernels.fatbin)
// Built by bench/peers/peers_bench.sh into its scratch folder (g++ ... -lcuda, CUDA's stub).
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Failed {  // thrown by CHECK: the row's first failing call
  const char* call;
  CUresult result;
};

void Check(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw Failed{call, r};
}
#define CHECK(call) Check((call), #call)

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(int reps, const std::function<double()>& f) {
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) v.push_back(f());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Fills with xorshift64 output: bytes no compressor shrinks.
void Random(void* p, size_t n, uint64_t seed) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  auto* w = static_cast<uint64_t*>(p);
  for (size_t i = 0; i < n / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w[i] = x;
  }
}

std::string Quoted(const char* s) {
  std::string out = "\"";
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') out += '\\';
    out += *s == '\n' ? ' ' : *s;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: peer_bench KERNELS_FATBIN [--quick] [METRIC...]\n");
    return 2;
  }
  bool quick = false;
  std::vector<std::string> only;
  for (int i = 2; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else only.push_back(argv[i]);
  }
  const int reps = quick ? 3 : 7, bw_reps = quick ? 3 : 5;
  const size_t big = size_t{64} << 20;
  auto mibps = [&](double sec) { return (big / double(1 << 20)) / sec; };

  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction empty = nullptr;
  CUstream s = nullptr;
  CUdeviceptr d = 0;
  void* pinned = nullptr;
  std::vector<char> pageable;

  // Each row: its name and how it is measured; set-up rows ("") report only failures.
  std::vector<std::pair<std::string, std::function<double()>>> rows = {
      {"", [&] {
         CUdevice dev;
         CHECK(cuInit(0));
         CHECK(cuDeviceGet(&dev, 0));
         CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
         CHECK(cuModuleLoad(&module, argv[1]));
         CHECK(cuModuleGetFunction(&empty, module, "empty_kernel"));
         CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
         return 0.0;
       }},
      // A call that must reach the device and come back: querying an idle stream.
      {"null_rtt_us", [&] {
         const int n = quick ? 2000 : 10000;
         return Median(reps, [&] {
           auto t0 = Clock::now();
           for (int i = 0; i < n; ++i) CHECK(cuStreamQuery(s));
           return Seconds(t0, Clock::now()) * 1e6 / n;
         });
       }},
      // Launch of an empty kernel plus stream synchronize, one at a time.
      {"sync_launch_us", [&] {
         const int n = quick ? 300 : 2000;
         return Median(reps, [&] {
           auto t0 = Clock::now();
           for (int i = 0; i < n; ++i) {
             CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
             CHECK(cuStreamSynchronize(s));
           }
           return Seconds(t0, Clock::now()) * 1e6 / n;
         });
       }},
      // N launches, then one synchronize.
      {"async_launch_per_s", [&] {
         const int n = quick ? 2000 : 20000;
         return Median(reps, [&] {
           auto t0 = Clock::now();
           for (int i = 0; i < n; ++i) {
             CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
           }
           CHECK(cuStreamSynchronize(s));
           return n / Seconds(t0, Clock::now());
         });
       }},
      {"", [&] {
         CHECK(cuMemAlloc(&d, big));
         pageable.resize(big);
         Random(pageable.data(), big, 1);
         return 0.0;
       }},
      {"h2d_pageable_64MiB_MiBps", [&] {
         return Median(bw_reps, [&] {
           auto t0 = Clock::now();
           CHECK(cuMemcpyHtoD(d, pageable.data(), big));
           CHECK(cuCtxSynchronize());
           return mibps(Seconds(t0, Clock::now()));
         });
       }},
      {"d2h_pageable_64MiB_MiBps", [&] {
         return Median(bw_reps, [&] {
           auto t0 = Clock::now();
           CHECK(cuMemcpyDtoH(pageable.data(), d, big));
           return mibps(Seconds(t0, Clock::now()));
         });
       }},
      {"", [&] {
         CHECK(cuMemAllocHost(&pinned, big));
         Random(pinned, big, 2);
         return 0.0;
       }},
      {"h2d_pinned_64MiB_MiBps", [&] {
         return Median(bw_reps, [&] {
           auto t0 = Clock::now();
           CHECK(cuMemcpyHtoDAsync(d, pinned, big, s));
           CHECK(cuStreamSynchronize(s));
           return mibps(Seconds(t0, Clock::now()));
         });
       }},
      {"d2h_pinned_64MiB_MiBps", [&] {
         return Median(bw_reps, [&] {
           auto t0 = Clock::now();
           CHECK(cuMemcpyDtoHAsync(pinned, d, big, s));
           CHECK(cuStreamSynchronize(s));
           return mibps(Seconds(t0, Clock::now()));
         });
       }},
      {"", [&] {
         memset(pageable.data(), 0, big);
         CHECK(cuMemsetD8(d, 0, big));
         CHECK(cuCtxSynchronize());
         return 0.0;
       }},
      {"h2d_pageable_64MiB_zeros_MiBps", [&] {
         return Median(bw_reps, [&] {
           auto t0 = Clock::now();
           CHECK(cuMemcpyHtoD(d, pageable.data(), big));
           CHECK(cuCtxSynchronize());
           return mibps(Seconds(t0, Clock::now()));
         });
       }},
      {"d2h_pageable_64MiB_zeros_MiBps", [&] {
         return Median(bw_reps, [&] {
           auto t0 = Clock::now();
           CHECK(cuMemcpyDtoH(pageable.data(), d, big));
           return mibps(Seconds(t0, Clock::now()));
         });
       }},
  };

  int failures = 0;
  std::string setup_failed;  // a failed set-up row fails the rows after it
  for (auto& [name, measure] : rows) {
    if (!name.empty() && !only.empty() && std::find(only.begin(), only.end(), name) == only.end())
      continue;
    if (!setup_failed.empty()) {
      if (!name.empty()) {
        printf("{\"error\": {\"metric\": \"%s\", \"call\": %s, \"result\": \"after set-up failed\"}}\n",
               name.c_str(), Quoted(setup_failed.c_str()).c_str());
        ++failures;
      }
      continue;
    }
    try {
      double v = measure();
      if (!name.empty()) printf("{\"%s\": %.6g}\n", name.c_str(), v);
    } catch (const Failed& f) {
      const char* err = "?";
      cuGetErrorName(f.result, &err);
      if (name.empty()) setup_failed = std::string(f.call) + ": " + err;
      else ++failures;
      printf("{\"error\": {\"metric\": \"%s\", \"call\": %s, \"result\": \"%s\"}}\n",
             name.empty() ? "setup" : name.c_str(), Quoted(f.call).c_str(), err);
    }
    fflush(stdout);
  }
  return failures == 0 && setup_failed.empty() ? 0 : 1;
}
