// Allocates device memory, starts a large copy loop and never frees anything: used to check that a
// client killed mid-run leaves nothing behind on the server. Prints "ready" once it holds memory.
#include <unistd.h>

#include "check.h"

int main(int argc, char** argv) {
  InitContext();
  const size_t bytes = 64u << 20;
  CUdeviceptr d[4];
  for (auto& p : d) CHECK(cuMemAlloc(&p, bytes));
  std::vector<char> host(bytes, 1);
  printf("ready\n");
  fflush(stdout);
  for (;;) CHECK(cuMemcpyHtoD(d[0], host.data(), bytes));  // killed somewhere in here
}
