// managed_bench: what managed memory costs through whatever libcuda.so.1 is loaded (under `rgpu
// run`: rgpu's client keeping host and device copies coherent, client/managed_memory.h), against
// explicit copies of the same bytes measured in the same run.
//
//   managed_bench [MiB]   (default 64)
//
// Rounds: the host updates every word of N MiB, then a kernel streams over them (reads and
// writes each word), then the host again: with managed memory (pages travel by faults and
// write-backs) and with explicit copies (host buffer, cuMemcpyHtoD, kernel, cuMemcpyDtoH), the
// same host pass and the same kernel in both, best of several warm rounds. Their ratio is the
// figure of merit; the kernel alone (on device-resident memory) is also timed so that the cost of
// moving the bytes can be compared without it. Prefetches of the whole range to the device and
// back are compared with pinned copies of the same size. Then the host reading through faults and
// the latency of one isolated fault. Prints a table and one JSON line.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

#define CK(call)                                                                 \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char* name_ = nullptr;                                               \
      cuGetErrorName(r_, &name_);                                                \
      fprintf(stderr, "%s failed: %s\n", #call, name_ != nullptr ? name_ : "?"); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

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

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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
  auto time_copy = [&](auto&& copy) {
    return Best(rounds, [&] {
      const double t0 = Now();
      copy();
      return Now() - t0;
    });
  };
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
  const double pinned_dtoh = time_copy([&] {
    CK(cuMemcpyDtoH(pinned, plain, bytes));
    CK(cuCtxSynchronize());
  });
  const double pinned_htod = time_copy([&] {
    CK(cuMemcpyHtoD(plain, pinned, bytes));
    CK(cuCtxSynchronize());
  });

  // The kernel alone, its memory on the device; the host's pass alone.
  const double kernel = time_copy([&] {
    launch(plain);
    CK(cuCtxSynchronize());
  });
  const double host_pass = time_copy([&] { HostUpdates(host.data(), words); });

  // Rounds with explicit copies.
  const double explicit_round = time_copy([&] {
    HostUpdates(host.data(), words);
    CK(cuMemcpyHtoD(plain, host.data(), bytes));
    launch(plain);
    CK(cuMemcpyDtoH(host.data(), plain, bytes));
  });

  // Rounds with managed memory: the same host pass and kernel; the host's pass faults the pages
  // back and makes them dirty, the launch pushes them. One warm-up round first (fresh pages).
  CUdeviceptr m;
  CK(cuMemAllocManaged(&m, bytes, CU_MEM_ATTACH_GLOBAL));
  unsigned* mp = reinterpret_cast<unsigned*>(m);
  auto managed_round = [&] {
    HostUpdates(mp, words);
    launch(m);
    CK(cuCtxSynchronize());
  };
  managed_round();
  const double managed_round_time = time_copy(managed_round);
  uint64_t check = HostReads(mp, words);
  // Every word: 1 + 2 per round: the warm-up and `rounds` timed ones.
  const uint64_t expect = static_cast<uint64_t>(words) * (2 * (rounds + 1));
  if (check != expect) {
    fprintf(stderr, "managed_bench: managed rounds computed %llu, want %llu\n",
            static_cast<unsigned long long>(check), static_cast<unsigned long long>(expect));
    return 1;
  }

  // Prefetch to the device of pages the host wrote, against a pinned copy of the same size.
  CUmemLocation device_location = {};
  device_location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  device_location.id = dev;
  CUmemLocation host_location = {};
  host_location.type = CU_MEM_LOCATION_TYPE_HOST;
  const double prefetch_to_device = Best(rounds, [&] {
    HostUpdates(mp, words);  // every page the host's (dirty)
    const double t0 = Now();
    CK(cuMemPrefetchAsync(m, bytes, device_location, 0, nullptr));
    CK(cuCtxSynchronize());
    return Now() - t0;
  });
  // Prefetch to the host of pages the device wrote, against a pinned copy of the same size.
  const double prefetch_to_host = Best(rounds, [&] {
    launch(m);
    CK(cuCtxSynchronize());
    const double t0 = Now();
    CK(cuMemPrefetchAsync(m, bytes, host_location, 0, nullptr));
    CK(cuCtxSynchronize());
    return Now() - t0;
  });
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

  const double round_ratio = managed_round_time / explicit_round;
  const double moving_ratio = (managed_round_time - kernel - host_pass) /
                              std::max(explicit_round - kernel - host_pass, 1e-9);
  const double prefetch_device_ratio = prefetch_to_device / pinned_htod;
  const double prefetch_host_ratio = prefetch_to_host / pinned_dtoh;
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
  row("round, explicit copies (host, HtoD, kernel, DtoH)", explicit_round);
  row("round, managed memory (host, kernel, sync)", managed_round_time);
  row("prefetch to the device (host-written pages)", prefetch_to_device);
  row("prefetch to the host (device-written pages)", prefetch_to_host);
  row("host reads after device work (page faults)", fault_read);
  printf("%-58s %10.1f us\n", "one fault on an isolated page", fault_latency * 1e6);
  printf("%-58s %10.2f x\n", "round: managed / explicit", round_ratio);
  printf("%-58s %10.2f x\n", "round less kernel and host pass: managed / explicit", moving_ratio);
  printf("%-58s %10.2f x\n", "prefetch to device / pinned HtoD", prefetch_device_ratio);
  printf("%-58s %10.2f x\n", "prefetch to host / pinned DtoH", prefetch_host_ratio);
  printf(
      "{\"mib\": %zu, \"dtoh_ms\": %.3f, \"htod_ms\": %.3f, \"pinned_dtoh_ms\": %.3f, "
      "\"pinned_htod_ms\": %.3f, \"kernel_ms\": %.3f, \"host_pass_ms\": %.3f, "
      "\"explicit_round_ms\": %.3f, \"managed_round_ms\": %.3f, \"prefetch_device_ms\": %.3f, "
      "\"prefetch_host_ms\": %.3f, \"fault_read_ms\": %.3f, \"fault_latency_us\": %.1f, "
      "\"round_ratio\": %.3f, \"moving_ratio\": %.3f, \"prefetch_device_ratio\": %.3f, "
      "\"prefetch_host_ratio\": %.3f}\n",
      mib, dtoh * 1e3, htod * 1e3, pinned_dtoh * 1e3, pinned_htod * 1e3, kernel * 1e3,
      host_pass * 1e3, explicit_round * 1e3, managed_round_time * 1e3, prefetch_to_device * 1e3,
      prefetch_to_host * 1e3, fault_read * 1e3, fault_latency * 1e6, round_ratio, moving_ratio,
      prefetch_device_ratio, prefetch_host_ratio);
  CK(cuMemFree(m));
  CK(cuMemFree(plain));
  CK(cuMemFreeHost(pinned));
  CK(cuModuleUnload(module));
  CK(cuCtxDestroy(ctx));
  return 0;
}
