// managed_bench: what managed memory costs through whatever libcuda.so.1 is loaded (under `rgpu
// run`: rgpu's client keeping host and device copies coherent, client/managed_memory.h), against
// the floor of plain copies of the same size measured in the same run.
//
//   managed_bench [MiB]   (default 64)
//
// Rows: a plain device-to-host and host-to-device copy (the floor); the host reading managed
// memory the device just wrote, page faults fetching it (with read-ahead); the same after a
// prefetch to the host (one transfer); the host's writes travelling before the next device work;
// and the latency of one fault on an isolated page. Prints a table and one JSON line.
#include <cuda.h>

#include <chrono>
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

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Device work that writes every word of [p, p+bytes), then waits for it.
void DeviceWrites(CUdeviceptr p, size_t bytes, unsigned value) {
  CK(cuMemsetD32(p, value, bytes / 4));
  CK(cuCtxSynchronize());
}

// Reads every word (page faults where the host lacks the page); returns a checksum.
uint64_t HostReads(const unsigned* p, size_t words) {
  uint64_t sum = 0;
  for (size_t i = 0; i < words; ++i) sum += p[i];
  return sum;
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
  const int rounds = 3;
  auto mibps = [&](double seconds) { return mib / seconds; };
  auto best = [&](auto&& body) {  // the best of `rounds` runs
    double t = 1e30;
    for (int r = 0; r < rounds; ++r) t = std::min(t, body());
    return t;
  };

  // The floor: plain copies of the same size.
  CUdeviceptr plain;
  CK(cuMemAlloc(&plain, bytes));
  std::vector<unsigned> host(words, 1);
  const double dtoh = best([&] {
    const double t0 = Now();
    CK(cuMemcpyDtoH(host.data(), plain, bytes));
    return Now() - t0;
  });
  const double htod = best([&] {
    const double t0 = Now();
    CK(cuMemcpyHtoD(plain, host.data(), bytes));
    return Now() - t0;
  });

  CUdeviceptr m;
  CK(cuMemAllocManaged(&m, bytes, CU_MEM_ATTACH_GLOBAL));
  const unsigned* mp = reinterpret_cast<const unsigned*>(m);
  uint64_t check = 0;
  // Host reads after device writes: faults fetch the pages.
  const double fault_read = best([&] {
    DeviceWrites(m, bytes, 3);
    const double t0 = Now();
    check += HostReads(mp, words);
    return Now() - t0;
  });
  // The same after a prefetch to the host: one transfer, then no faults.
  const double prefetch_read = best([&] {
    DeviceWrites(m, bytes, 4);
    const double t0 = Now();
    CUmemLocation cpu = {};
    cpu.type = CU_MEM_LOCATION_TYPE_HOST;
    CK(cuMemPrefetchAsync(m, bytes, cpu, 0, nullptr));
    CK(cuCtxSynchronize());
    check += HostReads(mp, words);
    return Now() - t0;
  });
  // Host writes travelling before device work (the pages are the host's after the reads above:
  // the first write to each faults once to mark it dirty).
  unsigned* wp = reinterpret_cast<unsigned*>(m);
  const double flush = best([&] {
    DeviceWrites(m, bytes, 5);
    check += HostReads(mp, words);  // the host has every page again
    const double t0 = Now();
    for (size_t i = 0; i < words; ++i) wp[i] = static_cast<unsigned>(i);
    CK(cuMemsetD32(plain, 0, 1));  // device work: the dirty pages go first
    CK(cuCtxSynchronize());
    return Now() - t0;
  });
  // One fault on an isolated page (its read-ahead fetches the next 15 too).
  const int faults = 32;
  const size_t stride = words / faults;
  double fault_latency = best([&] {
    DeviceWrites(m, bytes, 6);
    const double t0 = Now();
    for (int f = 0; f < faults; ++f) check += mp[f * stride];
    return (Now() - t0) / faults;
  });
  if (check == 0) fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(check));

  printf("managed memory, %zu MiB (best of %d)\n", mib, rounds);
  printf("%-44s %12s\n", "operation", "MiB/s");
  printf("%-44s %12.0f\n", "floor: cuMemcpyDtoH", mibps(dtoh));
  printf("%-44s %12.0f\n", "floor: cuMemcpyHtoD", mibps(htod));
  printf("%-44s %12.0f\n", "host reads after device work (faults)", mibps(fault_read));
  printf("%-44s %12.0f\n", "prefetch to host, then host reads", mibps(prefetch_read));
  printf("%-44s %12.0f\n", "host writes, pushed before device work", mibps(flush));
  printf("%-44s %12.1f us\n", "one fault on an isolated page", fault_latency * 1e6);
  printf(
      "{\"mib\": %zu, \"dtoh_MiBps\": %.1f, \"htod_MiBps\": %.1f, \"fault_read_MiBps\": %.1f, "
      "\"prefetch_read_MiBps\": %.1f, \"write_flush_MiBps\": %.1f, \"fault_latency_us\": %.1f}\n",
      mib, mibps(dtoh), mibps(htod), mibps(fault_read), mibps(prefetch_read), mibps(flush),
      fault_latency * 1e6);
  CK(cuMemFree(m));
  CK(cuMemFree(plain));
  CK(cuCtxDestroy(ctx));
  return 0;
}
