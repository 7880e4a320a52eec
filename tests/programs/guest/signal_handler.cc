// The interposer is a guest: loading rgpu's runtime (and UCX with it) leaves the program's signal
// handlers in place. The program installs a SIGSEGV handler, uses the driver, then faults; its
// own handler must run (exit code 3), not UCX's.
#include <cuda.h>
#include <unistd.h>

#include <csignal>

static void OnSegv(int) {
  static const char kMsg[] = "signal_handler: the program's handler ran\n";
  ssize_t n = write(1, kMsg, sizeof kMsg - 1);
  (void)n;
  _exit(3);
}

int main() {
  signal(SIGSEGV, OnSegv);
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, nullptr, 0, dev)) return 1;
  volatile int* p = nullptr;
  return *p;
}
