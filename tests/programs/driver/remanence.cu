// What one tenant leaves on a GPU, another must never read (run as two programs, two sessions):
//   remanence write MIB       fills MIB MiB with a pattern, prints "address A" and "ready", then
//                             waits for a line on stdin; frees it and exits on "free", exits
//                             without freeing (the session ends holding it) on "exit".
//   remanence read MIB [A]    allocates MIB MiB and checks that no word of it holds the pattern
//                             (memory freed by another session comes back cleared); with A,
//                             another session's live address, checks that copying from it and
//                             launching a kernel that reads it are refused or fault, never
//                             yielding its bytes.
#include <string.h>

#include "check.h"

namespace {
constexpr unsigned kPattern = 0x5eC1e7ABu;

bool HoldsPattern(CUdeviceptr d, size_t bytes) {
  std::vector<unsigned> host(bytes / 4);
  CHECK(cuMemcpyDtoH(host.data(), d, bytes));
  for (unsigned w : host) {
    if (w == kPattern) return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: remanence write|read MIB [ADDRESS]\n");
    return 2;
  }
  const size_t bytes = strtoull(argv[2], nullptr, 10) << 20;
  InitContext();
  if (strcmp(argv[1], "write") == 0) {
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, bytes));
    CHECK(cuMemsetD32(d, kPattern, bytes / 4));
    CHECK(cuCtxSynchronize());
    printf("address %llu\nready\n", static_cast<unsigned long long>(d));
    fflush(stdout);
    char line[64] = {};
    if (fgets(line, sizeof line, stdin) != nullptr && strncmp(line, "free", 4) == 0) {
      CHECK(cuMemFree(d));
      printf("freed\n");
      fflush(stdout);
    }
    return 0;
  }
  CUdeviceptr mine;
  CHECK(cuMemAlloc(&mine, bytes));
  EXPECT_TRUE(!HoldsPattern(mine, bytes));
  if (argc > 3) {
    const CUdeviceptr theirs = strtoull(argv[3], nullptr, 10);
    std::vector<unsigned> host(1024, 0);
    const CUresult r = cuMemcpyDtoH(host.data(), theirs, host.size() * 4);
    bool leaked = false;
    for (unsigned w : host) leaked = leaked || w == kPattern;
    EXPECT_TRUE(!leaked);
    EXPECT_TRUE(r != CUDA_SUCCESS);
    // A device-to-device copy into this session's memory is refused too.
    const CUresult dd = cuMemcpyDtoD(mine, theirs, 4096);
    EXPECT_TRUE(dd != CUDA_SUCCESS || !HoldsPattern(mine, 4096));
  }
  CHECK(cuMemFree(mine));
  printf("remanence: nothing of the other session's (%zu MiB checked)\n", bytes >> 20);
  return 0;
}
