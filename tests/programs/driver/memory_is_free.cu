// Checks that the server's device holds no memory but this program's: free == total (softgpu) or,
// given an expected free figure as argv[1], at least that much free.
#include <cstdlib>

#include "check.h"

int main(int argc, char** argv) {
  InitContext();
  size_t free_bytes, total;
  CHECK(cuMemGetInfo(&free_bytes, &total));
  size_t expected = argc > 1 ? strtoull(argv[1], nullptr, 10) : total;
  printf("memory_is_free: free %zu of %zu (expected >= %zu)\n", free_bytes, total, expected);
  return free_bytes >= expected ? 0 : 1;
}
