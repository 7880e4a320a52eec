// Posted launches in batches, checked at every synchronization: after each round of 1000
// launches that each add 1 to a counter, the counter must equal the number of launches so far
// (none lost, none run twice). Prints "ready" after the first round and runs until a call fails,
// which it reports as a CUDA error (exit 1); a wrong count exits 2. Used to drop the connection
// in the middle of a batch.
#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  (void)ctx;
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction add;
  CHECK(cuModuleGetFunction(&add, m, "add_to"));
  CUdeviceptr counter;
  CHECK(cuMemAlloc(&counter, sizeof(int)));
  CHECK(cuMemsetD32(counter, 0, 1));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  long long launched = 0;
  for (int round = 0;; ++round) {
    for (int i = 0; i < 1000; ++i) {
      int one = 1;
      void* args[] = {&counter, &one};
      CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      ++launched;
    }
    CHECK(cuStreamSynchronize(s));
    int value = 0;
    CHECK(cuMemcpyDtoH(&value, counter, sizeof value));
    if (value != static_cast<int>(launched)) {
      fprintf(stderr, "MISMATCH: counter %d after %lld launches\n", value, launched);
      return 2;
    }
    if (round == 0) {
      printf("ready\n");
      fflush(stdout);
    }
  }
}
