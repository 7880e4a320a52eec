// handshake_probe: how long a program's first driver call takes through rgpu (cuInit: the
// connection to the server and the session's handshake, with the credential's proof when the
// server requires one). Prints the microseconds. Run under the interposer by
// bench/handshake_bench.sh, many times (a process connects once).
#include <cuda.h>

#include <chrono>
#include <cstdio>

int main() {
  const auto start = std::chrono::steady_clock::now();
  const CUresult r = cuInit(0);
  const auto end = std::chrono::steady_clock::now();
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "handshake_probe: cuInit failed with %d\n", r);
    return 1;
  }
  printf("%.1f\n", std::chrono::duration<double, std::micro>(end - start).count());
  return 0;
}
