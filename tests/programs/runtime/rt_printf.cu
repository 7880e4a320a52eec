// Device printf: kernels print a marker ("device says 42"), one line per thread, and a line using
// several conversions (%d %u %lld %x %.3f %s %c); the program captures its own stdout around the
// launches and synchronizations, checks every expected line arrived, then echoes what it captured
// (the CTest also looks for the marker).
#include "rt_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

__global__ void Speak(int value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) printf("device says %d\n", value);
  printf("rt_printf line block %d thread %d twice %d\n", (int)blockIdx.x, (int)threadIdx.x,
         2 * (int)(blockIdx.x * blockDim.x + threadIdx.x));
}

__global__ void Formats(long long big) {
  printf("formats: %d %u %lld %x %.3f %s %c\n", -5, 7u, big, 255, 3.14159, "str", 'Z');
}

int main() {
  fflush(stdout);
  char path[] = "/tmp/rt_printf_XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0, "mkstemp failed");
  int saved = dup(1);
  EXPECT(saved >= 0 && dup2(fd, 1) == 1, "cannot redirect stdout");

  Speak<<<2, 4>>>(42);
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  cudaStream_t s;
  cudaError_t create = cudaStreamCreate(&s);
  if (create == cudaSuccess) Formats<<<1, 1, 0, s>>>(1LL << 40);
  cudaError_t launch2 = cudaGetLastError();
  cudaError_t sync2 = create == cudaSuccess ? cudaStreamSynchronize(s) : create;

  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::string out;
  char buf[4096];
  lseek(fd, 0, SEEK_SET);
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) out.append(buf, (size_t)got);
  close(fd);
  unlink(path);
  printf("---- captured device output ----\n%s---- end ----\n", out.c_str());
  fflush(stdout);

  CHECK(launch);
  CHECK(sync);
  CHECK(create);
  CHECK(launch2);
  CHECK(sync2);
  EXPECT(out.find("device says 42\n") != std::string::npos, "marker line missing");
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 4; ++t) {
      std::string line = "rt_printf line block " + std::to_string(b) + " thread " +
                         std::to_string(t) + " twice " + std::to_string(2 * (b * 4 + t)) + "\n";
      EXPECT(out.find(line) != std::string::npos, "missing line: %s", line.c_str());
    }
  EXPECT(out.find("formats: -5 7 1099511627776 ff 3.142 str Z\n") != std::string::npos,
         "formats line missing or wrong");
  CHECK(cudaStreamDestroy(s));
  printf("rt_printf: OK\n");
  return 0;
}
