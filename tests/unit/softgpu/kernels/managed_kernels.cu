// Kernels of softgpu's managed and mapped memory tests (managed_test.cc). Compiled to PTX
// (compute_75) at build time.

// A __managed__ scalar and array: host code and kernels use the same bytes.
__managed__ int managed_scalar = 5;
__managed__ int managed_array[1000];
// An ordinary module variable (cuLibraryGetManaged does not find it).
__device__ int plain_global;

// data[i] = data[i] * mul + add for i < n.
extern "C" __global__ void scale_add(int* data, int n, int mul, int add) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    data[i] = data[i] * mul + add;
  }
}

// Adds `v` to each of n bytes.
extern "C" __global__ void add_bytes(unsigned char* p, unsigned long long n, unsigned char v) {
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += blockDim.x * gridDim.x) {
    p[i] = static_cast<unsigned char>(p[i] + v);
  }
}

// Updates the __managed__ variables: the scalar grows by `by`, element i becomes 2 * x + i.
extern "C" __global__ void update_managed(int by) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) managed_scalar += by;
  if (i < 1000) managed_array[i] = 2 * managed_array[i] + i;
}

// Stores 1 at p[index] (an index past the end of p's allocation faults).
extern "C" __global__ void store_at(int* p, long long index) { p[index] = 1; }

// Every thread adds 1 to *counter `times` times with system-scope atomics, after block 0 says it
// runs (flags[0] = 1) and the host says it adds too (flags[1] != 0), so both add at once.
extern "C" __global__ void system_add(int* counter, int* flags, int times) {
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicExch_system(&flags[0], 1);
  while (atomicAdd_system(&flags[1], 0) == 0) {
  }
  for (int k = 0; k < times; ++k) atomicAdd_system(counter, 1);
}
