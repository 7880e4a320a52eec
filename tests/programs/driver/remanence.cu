// What one tenant leaves on a GPU, another must never read (run as two programs, two sessions of
// two tenants):
//   remanence write MIB       fills MIB MiB with a pattern, prints "address A" and "ready", then
//                             waits for a line on stdin; frees it and exits on "free", exits
//                             without freeing (the session ends holding it) on "exit".
//   remanence read MIB|most [A]
//                             allocates MIB MiB (most: all the device's free memory but 256 MiB,
//                             in 1 GiB pieces) and checks with a kernel that no word of it holds
//                             the pattern (memory another session freed comes back cleared);
//                             with A, another session's live address, checks that copying from
//                             it is refused, and last that a kernel reading it faults or reads
//                             anything but the pattern.
#include <string.h>

#include "check.h"

namespace {
constexpr unsigned kPattern = 0x5eC1e7ABu;
constexpr size_t kPiece = size_t{1} << 30;

// True when the pattern is anywhere in [d, d + bytes).
bool HoldsPattern(CUfunction find, CUdeviceptr d, size_t bytes) {
  CUdeviceptr found;
  CHECK(cuMemAlloc(&found, sizeof(int)));
  CHECK(cuMemsetD32(found, 0, 1));
  unsigned long long words = bytes / 4;
  unsigned word = kPattern;
  void* args[] = {&d, &words, &word, &found};
  CHECK(cuLaunchKernel(find, 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  int hit = 0;
  CHECK(cuMemcpyDtoH(&hit, found, sizeof hit));
  CHECK(cuMemFree(found));
  return hit != 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: remanence write MIB | read MIB|most [ADDRESS]\n");
    return 2;
  }
  InitContext();
  if (strcmp(argv[1], "write") == 0) {
    const size_t bytes = strtoull(argv[2], nullptr, 10) << 20;
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
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction find, read_at;
  CHECK(cuModuleGetFunction(&find, module, "find_word"));
  CHECK(cuModuleGetFunction(&read_at, module, "read_at"));
  size_t bytes = 0;
  if (strcmp(argv[2], "most") == 0) {
    size_t free_bytes = 0, total = 0;
    CHECK(cuMemGetInfo(&free_bytes, &total));
    bytes = free_bytes > (size_t{256} << 20) ? free_bytes - (size_t{256} << 20) : 0;
  } else {
    bytes = strtoull(argv[2], nullptr, 10) << 20;
  }
  std::vector<CUdeviceptr> mine;
  size_t checked = 0;
  while (checked < bytes) {
    const size_t piece = std::min(kPiece, bytes - checked) / 4 * 4;
    if (piece == 0) break;
    CUdeviceptr d;
    if (cuMemAlloc(&d, piece) != CUDA_SUCCESS) break;  // what is left is someone else's
    EXPECT_TRUE(!HoldsPattern(find, d, piece));
    mine.push_back(d);
    checked += piece;
  }
  EXPECT_TRUE(checked > 0);
  for (CUdeviceptr d : mine) CHECK(cuMemFree(d));
  if (argc > 3) {
    const CUdeviceptr theirs = strtoull(argv[3], nullptr, 10);
    std::vector<unsigned> host(1024, 0);
    const CUresult r = cuMemcpyDtoH(host.data(), theirs, host.size() * 4);
    for (unsigned w : host) EXPECT_TRUE(w != kPattern);
    EXPECT_TRUE(r != CUDA_SUCCESS);
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, 32 * sizeof(int)));
    CHECK(cuMemsetD32(out, 0, 32));
    long long offset = 0;
    void* args[] = {const_cast<CUdeviceptr*>(&theirs), &offset, &out};
    CUresult launched = cuLaunchKernel(read_at, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
    if (launched == CUDA_SUCCESS) launched = cuCtxSynchronize();
    if (launched == CUDA_SUCCESS) {
      // It ran: then it must not have read the other session's bytes.
      int got[32];
      CHECK(cuMemcpyDtoH(got, out, sizeof got));
      for (int w : got) EXPECT_TRUE(static_cast<unsigned>(w) != kPattern);
      printf("remanence: a kernel reading the other session's address ran and read none of it\n");
    } else {
      printf("remanence: a kernel reading the other session's address failed (%d)\n",
             static_cast<int>(launched));
    }
  }
  printf("remanence: nothing of the other session's (%zu MiB checked)\n", checked >> 20);
  return 0;
}
