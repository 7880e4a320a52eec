// Managed memory under rgpu keeps the program's own signal handling intact. The program allocates
// managed memory (rgpu's fault handler goes in), then installs its own SIGSEGV handler over it.
// Device work on the memory (a memset) and host reads from four threads afterwards must still see
// the device's bytes (rgpu's handler is back in front, passing on what is not its own), and the
// program's own null dereference must reach the program's handler with the faulting address
// (exit code 3).
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <thread>
#include <vector>

static void OnSegv(int, siginfo_t* info, void*) {
  const bool null_address = info->si_addr == nullptr;
  static const char kOk[] = "managed_signals: the program's handler ran for its own fault\n";
  static const char kBad[] = "managed_signals: the program's handler ran for another address\n";
  ssize_t n = null_address ? write(1, kOk, sizeof kOk - 1) : write(1, kBad, sizeof kBad - 1);
  (void)n;
  _exit(null_address ? 3 : 4);
}

int main() {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, nullptr, 0, dev)) return 1;
  constexpr size_t kCount = 1 << 20;  // 4 MiB of ints
  CUdeviceptr d;
  if (cuMemAllocManaged(&d, kCount * sizeof(unsigned), CU_MEM_ATTACH_GLOBAL)) return 1;
  unsigned* p = reinterpret_cast<unsigned*>(d);
  for (size_t i = 0; i < kCount; ++i) p[i] = static_cast<unsigned>(i);

  struct sigaction sa = {};
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);

  // The device overwrites a stretch in the middle; the host then reads everything back.
  constexpr size_t kFrom = 300000, kLen = 200000;
  if (cuMemsetD32(d + kFrom * sizeof(unsigned), 0xabcdef, kLen) || cuCtxSynchronize()) return 1;
  std::vector<std::thread> readers;
  std::vector<size_t> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (size_t i = t; i < kCount; i += 4) {
        const unsigned want = i >= kFrom && i < kFrom + kLen ? 0xabcdefu : static_cast<unsigned>(i);
        if (p[i] != want) ++wrong[t];
      }
    });
  }
  for (auto& r : readers) r.join();
  const size_t bad = wrong[0] + wrong[1] + wrong[2] + wrong[3];
  if (bad != 0) {
    fprintf(stderr, "managed_signals: %zu values wrong after the device's memset\n", bad);
    return 1;
  }
  // The host writes again and the device sees it (a copy out of managed memory).
  p[5] = 555;
  unsigned back = 0;
  if (cuMemcpyDtoH(&back, d + 5 * sizeof(unsigned), sizeof back) || back != 555) {
    fprintf(stderr, "managed_signals: the device read %u, not the host's 555\n", back);
    return 1;
  }
  // A copy out of device memory leaves the host's pages readable; device work that writes takes
  // them back, and the host then reads the device's value.
  if (p[5] != 555 || cuMemsetD32(d + 5 * sizeof(unsigned), 9, 1) || cuCtxSynchronize() ||
      p[5] != 9) {
    fprintf(stderr, "managed_signals: after the copies the host reads %u\n", p[5]);
    return 1;
  }
  printf("managed_signals: managed memory coherent\n");
  fflush(stdout);
  volatile int* null = nullptr;
  return *null;
}
