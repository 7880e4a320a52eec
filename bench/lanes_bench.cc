// lanes_bench: how a program's threads get on with each other through whatever libcuda.so.1 is
// loaded (under `rgpu run`: rgpu's lanes, client/connection.h; RGPU_LANES=0 turns them off;
// softgpu-direct: the software GPU with nothing between, the floor). bench/lanes_bench.sh runs
// all three.
//
//   lanes_bench [seconds per measurement]   (default 2)
//
// A round is a launch of an empty kernel and cuStreamSynchronize, each thread on its own stream.
// - solo: one thread's rounds, median latency;
// - beside a wait: the same thread's rounds while another thread waits (cuStreamSynchronize) on a
//   1 s kernel of its own stream; median latency and its ratio to solo (target: within 1.2x);
// - T threads (1, 2, 4) doing rounds at once: aggregate rounds per second, and against one thread.
// Prints a table and one JSON line.
#include "bench/driver_check.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

// empty(); wait_ns(ns): returns once `ns` nanoseconds have passed (sleeping 1 ms at a time).
const char kPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry empty() { ret; }
.visible .entry wait_ns(.param .u64 ns) {
  .reg .pred %p;
  .reg .b64 %t<4>;
  ld.param.u64 %t3, [ns];
  mov.u64 %t0, %globaltimer;
LOOP:
  nanosleep.u32 1000000;
  mov.u64 %t1, %globaltimer;
  sub.u64 %t2, %t1, %t0;
  setp.lt.u64 %p, %t2, %t3;
  @%p bra LOOP;
  ret;
}
)";

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The mean: a round that waited for the other thread's whole wait counts in full.
double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

struct Kernels {
  CUcontext ctx;
  CUfunction empty, wait_ns;
};

// Rounds on `s` until `stop` (or `seconds` pass); their latencies in us.
std::vector<double> RoundsOn(const Kernels& k, CUstream s, double seconds,
                             const std::atomic<bool>* stop) {
  std::vector<double> us;
  const double end = Now() + seconds;
  while (Now() < end && (stop == nullptr || !stop->load())) {
    const double t0 = Now();
    CK(cuLaunchKernel(k.empty, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
    CK(cuStreamSynchronize(s));
    us.push_back((Now() - t0) * 1e6);
  }
  return us;
}

// Rounds on a stream of this thread's own.
std::vector<double> Rounds(const Kernels& k, double seconds, const std::atomic<bool>* stop) {
  CK(cuCtxSetCurrent(k.ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<double> us = RoundsOn(k, s, seconds, stop);
  CK(cuStreamDestroy(s));
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  Kernels k;
  CK(cuDevicePrimaryCtxRetain(&k.ctx, dev));
  CK(cuCtxSetCurrent(k.ctx));
  CUmodule module;
  CK(cuModuleLoadData(&module, kPtx));
  CK(cuModuleGetFunction(&k.empty, module, "empty"));
  CK(cuModuleGetFunction(&k.wait_ns, module, "wait_ns"));
  // Two threads from the start, so that a client that changes its ways once a program has
  // several threads (rgpu's lanes) does so before anything is measured.
  std::thread([&] { Rounds(k, 0.2, nullptr); }).join();
  Rounds(k, 0.2, nullptr);  // warm

  const std::vector<double> solo_rounds = Rounds(k, seconds, nullptr);
  const double solo = Median(solo_rounds), solo_mean = Mean(solo_rounds);

  // Beside a 1 s wait on another thread, three times.
  std::vector<double> beside;
  double wait_s = 0;
  CUstream mine;  // made before the waits: only rounds are measured beside them
  CK(cuStreamCreate(&mine, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 3; ++i) {
    std::atomic<bool> waiting{false}, done{false};
    std::thread waiter([&] {
      CK(cuCtxSetCurrent(k.ctx));
      CUstream s;
      CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      unsigned long long ns = 1000000000ull;
      void* args[] = {&ns};
      CK(cuLaunchKernel(k.wait_ns, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      const double t0 = Now();
      waiting.store(true);
      CK(cuStreamSynchronize(s));
      wait_s = std::max(wait_s, Now() - t0);
      done.store(true);
      CK(cuStreamDestroy(s));
    });
    while (!waiting.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its wait has begun
    std::vector<double> us = RoundsOn(k, mine, 0.8, &done);
    waiter.join();
    beside.insert(beside.end(), us.begin(), us.end());
  }
  CK(cuStreamDestroy(mine));
  const double beside_median = Median(beside), beside_mean = Mean(beside);

  // T threads at once.
  const int threads[] = {1, 2, 4};
  double rate[3] = {};
  for (int t = 0; t < 3; ++t) {
    std::vector<std::thread> pool;
    std::vector<size_t> counts(threads[t]);
    for (int i = 0; i < threads[t]; ++i) {
      pool.emplace_back([&, i] { counts[i] = Rounds(k, seconds, nullptr).size(); });
    }
    for (auto& th : pool) th.join();
    size_t total = 0;
    for (size_t c : counts) total += c;
    rate[t] = total / seconds;
  }

  printf("%-44s %12s\n", "measurement", "value");
  printf("%-44s %12.1f\n", "solo round, median us", solo);
  printf("%-44s %12.1f\n", "solo round, mean us", solo_mean);
  printf("%-44s %12.1f\n", "round beside a 1 s wait, median us", beside_median);
  printf("%-44s %12.1f\n", "round beside a 1 s wait, mean us", beside_mean);
  printf("%-44s %12.2f\n", "beside / solo, medians", solo > 0 ? beside_median / solo : 0);
  printf("%-44s %12.2f\n", "beside / solo, means", solo_mean > 0 ? beside_mean / solo_mean : 0);
  printf("%-44s %12zu\n", "rounds measured beside the waits", beside.size());
  printf("%-44s %12.2f\n", "the wait's own length, s", wait_s);
  for (int t = 0; t < 3; ++t) {
    char name[64];
    snprintf(name, sizeof name, "%d thread(s): rounds/s (x one thread)", threads[t]);
    printf("%-44s %12.0f (x%.2f)\n", name, rate[t], rate[0] > 0 ? rate[t] / rate[0] : 0);
  }
  printf(
      "{\"bench\": \"lanes\", \"solo_us\": %.2f, \"beside_wait_us\": %.2f, \"ratio\": %.3f, "
      "\"solo_mean_us\": %.2f, \"beside_wait_mean_us\": %.2f, "
      "\"beside_rounds\": %zu, \"wait_s\": %.3f, \"rounds_per_s\": {\"1\": %.0f, \"2\": %.0f, "
      "\"4\": %.0f}}\n",
      solo, beside_median, solo > 0 ? beside_median / solo : 0, solo_mean, beside_mean,
      beside.size(), wait_s, rate[0], rate[1], rate[2]);
  return 0;
}
