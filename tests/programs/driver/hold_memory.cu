// Allocates device memory, starts a large copy loop and never frees anything: used to check that a
// client killed mid-run leaves nothing behind on the server. Prints "ready" once it holds memory.
//   hold_memory [managed]   managed: the memory is managed memory (cuMemAllocManaged) the host
//                           writes and the device sets in turn, killed while pages travel
#include <string.h>
#include <unistd.h>

#include "check.h"

int main(int argc, char** argv) {
  InitContext();
  const size_t bytes = 64u << 20;
  if (argc > 1 && strcmp(argv[1], "managed") == 0) {
    CUdeviceptr m[4];
    for (auto& p : m) CHECK(cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL));
    unsigned* words = reinterpret_cast<unsigned*>(m[0]);
    printf("ready\n");
    fflush(stdout);
    for (unsigned round = 0;; ++round) {                              // killed somewhere in here
      for (size_t i = 0; i < bytes / 4; i += 1024) words[i] = round;  // faults, then dirty pages
      CHECK(cuMemsetD32(m[0], round, bytes / 4));                     // the pages travel first
    }
  }
  CUdeviceptr d[4];
  for (auto& p : d) CHECK(cuMemAlloc(&p, bytes));
  std::vector<char> host(bytes, 1);
  printf("ready\n");
  fflush(stdout);
  for (;;) CHECK(cuMemcpyHtoD(d[0], host.data(), bytes));  // killed somewhere in here
}
