// Kernels used by the driver-API test programs. extern "C" keeps their names unmangled.
extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

__device__ float g_scale;
__device__ int g_hits[256];

extern "C" __global__ void apply_scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    x[i] *= g_scale;
    atomicAdd(&g_hits[i % 256], 1);
  }
}

extern "C" __global__ void read_at(const int* p, long long offset, int* out) {
  out[threadIdx.x] = p[offset + threadIdx.x];
}

extern "C" __global__ void add_one_f64(double* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2.0 + 1.0;
}

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void add_to(int* counter, int value) {
  if (threadIdx.x == 0) atomicAdd(counter, value);
}

extern "C" __global__ void set_all(int* p, int value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

// Busy work of a chosen length: each thread iterates `iters` times.
extern "C" __global__ void spin(int iters, unsigned* out) {
  unsigned x = threadIdx.x;
  for (int i = 0; i < iters; ++i) x = x * 1664525u + 1013904223u;
  if (x == 0xffffffffu) out[0] = x;  // keeps the loop; practically never stores
}

// Waits until the host sets *flag (a system-scope atomic read of managed memory the host writes
// while the kernel runs).
extern "C" __global__ void wait_for_host(int* flag) {
  while (atomicAdd_system(flag, 0) == 0) {
  }
}

// Sets *found when any of the n words at p equals word (remanence: another tenant's pattern).
extern "C" __global__ void find_word(const unsigned* p, unsigned long long n, unsigned word,
                                     int* found) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    if (p[i] == word) *found = 1;
  }
}

// Runs until *flag is set by work on another stream (lanes: a long wait of one thread while
// another's work goes on).
extern "C" __global__ void wait_for_flag(int* flag) {
  while (atomicAdd(flag, 0) == 0) {
  }
}
