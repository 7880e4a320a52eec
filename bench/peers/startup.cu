// startup: a CUDA runtime program up to its first kernel, as most programs begin: pick the
// device, read its properties, allocate, copy inputs in, launch, wait. Right after the first
// kernel has finished it touches the path /rgpu-peers-first-kernel (access(2), which fails): the
// mark that bench/peers/count_round_trips.py counts the round trips before. Prints
// {"startup_to_first_kernel_s": S}: from the moment given in RGPU_PEERS_T0_NS (CLOCK_REALTIME,
// set by the harness just before it starts the program; main's start when absent). With
// RGPU_PEERS_EXIT_AT_MARK set it leaves at the mark (_exit: no teardown calls).
//   nvcc -O2 -o startup startup.cu ; startup
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

static long long NowNs() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void Check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    printf(
        "{\"error\": {\"metric\": \"startup_to_first_kernel_s\", \"call\": \"%s\", \"result\": "
        "\"%s\"}}\n",
        call, cudaGetErrorName(e));
    exit(1);
  }
}
#define CHECK(call) Check((call), #call)

int main() {
  const char* t0_env = getenv("RGPU_PEERS_T0_NS");
  const long long t0 = t0_env ? atoll(t0_env) : NowNs();
  const int n = 1 << 16;
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  float* host = static_cast<float*>(malloc(n * sizeof(float)));
  for (int i = 0; i < n; ++i) host[i] = float(i);
  float* dev;
  CHECK(cudaMalloc(&dev, n * sizeof(float)));
  CHECK(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
  scale<<<(n + 255) / 256, 256>>>(dev, 2.0f, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const long long t1 = NowNs();
  access("/rgpu-peers-first-kernel", F_OK);  // the mark (see above)
  if (getenv("RGPU_PEERS_EXIT_AT_MARK") != nullptr)
    _exit(0);  // so that a system's own count
               // of round trips ends here too
  CHECK(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    if (host[i] != 2.0f * float(i)) {
      printf(
          "{\"error\": {\"metric\": \"startup_to_first_kernel_s\", \"call\": \"check\", "
          "\"result\": \"x[%d] = %g\"}}\n",
          i, host[i]);
      return 1;
    }
  }
  CHECK(cudaFree(dev));
  free(host);
  printf("{\"startup_to_first_kernel_s\": %.6g}\n", (t1 - t0) / 1e9);
  return 0;
}
