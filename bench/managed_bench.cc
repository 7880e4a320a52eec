// managed_bench: what managed memory costs through whatever libcuda.so.1 is loaded (under `rgpu
// run`: rgpu's client keeping host and device copies coherent, client/managed_memory.h), against
// explicit copies of the same bytes measured in the same run.
//
//   managed_bench [MiB]   (default 64)
//
// Rounds: the host updates every word of N MiB, then a kernel streams over them (reads and
// writes each word), then the host again: with managed memory (pages travel by faults and
// write-backs) and with explicit copies (host buffer, cuMemcpyHtoD, kernel, cuMemcpyDtoH), the
// same host pass and the same kernel in both, alternating; their ratio (best of each, and the
// median of each round's) is the figure of merit, beside the kernel alone (on device-resident
// memory) and the host's pass alone. Prefetches of the whole range to the device and
// back are compared with pinned copies of the same size, alternating with them. Then the host
// reading through faults and the latency of one isolated fault. Prints a table and one JSON line.
#include "bench/driver_check.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// p[i] += 1 for i < n, grid-stride.
const char kIncrementPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry increment(.param .u64 p, .param .u64 n) {
  .reg .pred %q;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [n];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd3, %r1, %r2;
  cvt.u64.u32 %rd4, %r3;
  add.u64 %rd3, %rd3, %rd4;
  mul.wide.u32 %rd5, %r4, %r2;
LOOP:
  setp.ge.u64 %q, %rd3, %rd2;
  @%q bra DONE;
  shl.b64 %rd6, %rd3, 2;
  add.u64 %rd7, %rd1, %rd6;
  ld.global.u32 %r5, [%rd7];
  add.u32 %r5, %r5, 1;
  st.global.u32 [%rd7], %r5;
  add.u64 %rd3, %rd3, %rd5;
  bra LOOP;
DONE:
  ret;
}
)";

// The host's pass: every word incremented (read and written).
void HostUpdates(unsigned* p, size_t words) {
  for (size_t i = 0; i < words; ++i) p[i] += 1;
}

// Reads every word (page faults where the host lacks the page); returns a checksum.
uint64_t HostReads(const unsigned* p, size_t words) {
  uint64_t sum = 0;
  for (size_t i = 0; i < words; ++i) sum += p[i];
  return sum;
}

// The best of `rounds` runs of `body` (which returns seconds).
template <typename Body>
double Best(int rounds, Body&& body) {
  double t = 1e30;
  for (int r = 0; r < rounds; ++r) t = std::min(t, body());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 64;
  const size_t bytes = mib << 20, words = bytes / 4;
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuCtxCreate(&ctx, nullptr, 0, dev));
  int managed = 0;
  CK(cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev));
  if (!managed) {
    fprintf(stderr, "managed_bench: the device has no managed memory\n");
    return 1;
  }
  CUmodule module;
  CUfunction increment;
  CK(cuModuleLoadData(&module, kIncrementPtx));
  CK(cuModuleGetFunction(&increment, module, "increment"));
  auto launch = [&](CUdeviceptr p) {
    uint64_t n = words;
    void* args[] = {&p, &n};
    CK(cuLaunchKernel(increment, 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  };
  const int rounds = 7;
  auto mibps = [&](double seconds) { return mib / seconds; };

  // Explicit copies: pageable and pinned, each way.
  CUdeviceptr plain;
  CK(cuMemAlloc(&plain, bytes));
  std::vector<unsigned> host(words, 1);
  unsigned* pinned = nullptr;
  CK(cuMemAllocHost(reinterpret_cast<void**>(&pinned), bytes));
  memset(pinned, 1, bytes);
  auto time_once = [&](auto&& body) {
    const double t0 = Now();
    body();
    return Now() - t0;
  };
  auto time_copy = [&](auto&& copy) { return Best(rounds, [&] { return time_once(copy); }); };
  // Each copy with the synchronization after which its bytes are known to be there, as the
  // prefetches below are timed.
  const double dtoh = time_copy([&] {
    CK(cuMemcpyDtoH(host.data(), plain, bytes));
    CK(cuCtxSynchronize());
  });
  const double htod = time_copy([&] {
    CK(cuMemcpyHtoD(plain, host.data(), bytes));
    CK(cuCtxSynchronize());
  });
  double pinned_dtoh = time_copy([&] {
    CK(cuMemcpyDtoH(pinned, plain, bytes));
    CK(cuCtxSynchronize());
  });
  double pinned_htod = time_copy([&] {
    CK(cuMemcpyHtoD(plain, pinned, bytes));
    CK(cuCtxSynchronize());
  });

  // The kernel alone, its memory on the device; the host's pass alone.
  const double kernel = time_copy([&] {
    launch(plain);
    CK(cuCtxSynchronize());
  });
  const double host_pass = time_copy([&] { HostUpdates(host.data(), words); });

  // Rounds with explicit copies and with managed memory, alternating (A/B, so that both see the
  // same machine): the same host pass and kernel; with managed memory the host's pass faults the
  // pages back and makes them dirty, and the launch pushes them. One warm-up round of each first.
  CUdeviceptr m;
  CK(cuMemAllocManaged(&m, bytes, CU_MEM_ATTACH_GLOBAL));
  unsigned* mp = reinterpret_cast<unsigned*>(m);
  auto explicit_round = [&] {
    HostUpdates(host.data(), words);
    CK(cuMemcpyHtoD(plain, host.data(), bytes));
    launch(plain);
    CK(cuMemcpyDtoH(host.data(), plain, bytes));
  };
  auto managed_round = [&] {
    HostUpdates(mp, words);
    launch(m);
    CK(cuCtxSynchronize());
  };
  const int ab_rounds = 2 * rounds;
  explicit_round();
  managed_round();
  double explicit_round_time = 1e30, managed_round_time = 1e30;
  std::vector<double> round_ratios;
  for (int r = 0; r < ab_rounds; ++r) {
    const double e = time_once(explicit_round);
    const double mr = time_once(managed_round);
    explicit_round_time = std::min(explicit_round_time, e);
    managed_round_time = std::min(managed_round_time, mr);
    round_ratios.push_back(mr / e);
  }
  uint64_t check = HostReads(mp, words);
  // Every word: 2 per round (the host's and the kernel's increments), the warm-up included.
  const uint64_t expect = static_cast<uint64_t>(words) * (2 * (ab_rounds + 1));
  if (check != expect) {
    fprintf(stderr, "managed_bench: managed rounds computed %llu, want %llu\n",
            static_cast<unsigned long long>(check), static_cast<unsigned long long>(expect));
    return 1;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };

  // Prefetches of the whole range, each against a pinned copy of the same size timed in the same
  // round just before it (A/B, so that both see the same machine).
  CUmemLocation device_location = {};
  device_location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  device_location.id = dev;
  CUmemLocation host_location = {};
  host_location.type = CU_MEM_LOCATION_TYPE_HOST;
  double prefetch_to_device = 1e30, prefetch_to_host = 1e30;
  std::vector<double> device_ratios, host_ratios;  // each round's prefetch / its pinned copy
  for (int r = 0; r < ab_rounds; ++r) {
    const double htod_copy = time_once([&] {
      CK(cuMemcpyHtoD(plain, pinned, bytes));
      CK(cuCtxSynchronize());
    });
    HostUpdates(mp, words);  // every page the host's (dirty)
    const double to_device = time_once([&] {
      CK(cuMemPrefetchAsync(m, bytes, device_location, 0, nullptr));
      CK(cuCtxSynchronize());
    });
    const double dtoh_copy = time_once([&] {
      CK(cuMemcpyDtoH(pinned, plain, bytes));
      CK(cuCtxSynchronize());
    });
    launch(m);  // every page the device's
    CK(cuCtxSynchronize());
    const double to_host = time_once([&] {
      CK(cuMemPrefetchAsync(m, bytes, host_location, 0, nullptr));
      CK(cuCtxSynchronize());
    });
    pinned_htod = std::min(pinned_htod, htod_copy);
    pinned_dtoh = std::min(pinned_dtoh, dtoh_copy);
    prefetch_to_device = std::min(prefetch_to_device, to_device);
    prefetch_to_host = std::min(prefetch_to_host, to_host);
    device_ratios.push_back(to_device / htod_copy);
    host_ratios.push_back(to_host / dtoh_copy);
  }
  // The host reading after device work, page faults fetching the pages.
  const double fault_read = Best(rounds, [&] {
    launch(m);
    CK(cuCtxSynchronize());
    const double t0 = Now();
    check += HostReads(mp, words);
    return Now() - t0;
  });
  // One fault on an isolated page (its read-ahead fetches the next 15 too).
  const int faults = 32;
  const size_t stride = words / faults;
  const double fault_latency = Best(rounds, [&] {
    CK(cuMemsetD32(m, 6, words));
    CK(cuCtxSynchronize());
    const double t0 = Now();
    for (int f = 0; f < faults; ++f) check += mp[f * stride];
    return (Now() - t0) / faults;
  });
  if (check == 0) fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(check));

  const double round_ratio = managed_round_time / explicit_round_time;
  const double round_median = median(round_ratios);
  const double prefetch_device_ratio = prefetch_to_device / pinned_htod;
  const double prefetch_host_ratio = prefetch_to_host / pinned_dtoh;
  const double prefetch_device_median = median(device_ratios);
  const double prefetch_host_median = median(host_ratios);
  printf("managed memory, %zu MiB (best of %d)\n", mib, rounds);
  printf("%-58s %10s %10s\n", "operation", "ms", "MiB/s");
  auto row = [&](const char* what, double s) {
    printf("%-58s %10.2f %10.0f\n", what, s * 1e3, mibps(s));
  };
  row("floor: cuMemcpyDtoH + sync (pageable)", dtoh);
  row("floor: cuMemcpyHtoD + sync (pageable)", htod);
  row("floor: cuMemcpyDtoH + sync (pinned)", pinned_dtoh);
  row("floor: cuMemcpyHtoD + sync (pinned)", pinned_htod);
  row("kernel alone (device memory)", kernel);
  row("host pass alone (host memory)", host_pass);
  row("round, explicit copies (host, HtoD, kernel, DtoH)", explicit_round_time);
  row("round, managed memory (host, kernel, sync)", managed_round_time);
  row("prefetch to the device (host-written pages)", prefetch_to_device);
  row("prefetch to the host (device-written pages)", prefetch_to_host);
  row("host reads after device work (page faults)", fault_read);
  printf("%-58s %10.1f us\n", "one fault on an isolated page", fault_latency * 1e6);
  printf("%-58s %10.2f x\n", "round: managed / explicit (best of each)", round_ratio);
  printf("%-58s %10.2f x\n", "round: managed / explicit (median of rounds)", round_median);
  printf("%-58s %10.2f x\n", "prefetch to device / pinned HtoD (best of each)",
         prefetch_device_ratio);
  printf("%-58s %10.2f x\n", "prefetch to device / pinned HtoD (median of rounds)",
         prefetch_device_median);
  printf("%-58s %10.2f x\n", "prefetch to host / pinned DtoH (best of each)", prefetch_host_ratio);
  printf("%-58s %10.2f x\n", "prefetch to host / pinned DtoH (median of rounds)",
         prefetch_host_median);
  printf(
      "{\"mib\": %zu, \"dtoh_ms\": %.3f, \"htod_ms\": %.3f, \"pinned_dtoh_ms\": %.3f, "
      "\"pinned_htod_ms\": %.3f, \"kernel_ms\": %.3f, \"host_pass_ms\": %.3f, "
      "\"explicit_round_ms\": %.3f, \"managed_round_ms\": %.3f, \"prefetch_device_ms\": %.3f, "
      "\"prefetch_host_ms\": %.3f, \"fault_read_ms\": %.3f, \"fault_latency_us\": %.1f, "
      "\"round_ratio\": %.3f, \"round_median_ratio\": %.3f, \"prefetch_device_ratio\": %.3f, "
      "\"prefetch_host_ratio\": %.3f, \"prefetch_device_median_ratio\": %.3f, "
      "\"prefetch_host_median_ratio\": %.3f}\n",
      mib, dtoh * 1e3, htod * 1e3, pinned_dtoh * 1e3, pinned_htod * 1e3, kernel * 1e3,
      host_pass * 1e3, explicit_round_time * 1e3, managed_round_time * 1e3,
      prefetch_to_device * 1e3, prefetch_to_host * 1e3, fault_read * 1e3, fault_latency * 1e6,
      round_ratio, round_median, prefetch_device_ratio, prefetch_host_ratio, prefetch_device_median,
      prefetch_host_median);
  CK(cuMemFree(m));
  CK(cuMemFree(plain));
  CK(cuMemFreeHost(pinned));
  CK(cuModuleUnload(module));
  CK(cuCtxDestroy(ctx));
  return 0;
}
