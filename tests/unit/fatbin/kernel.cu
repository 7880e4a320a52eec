// A small kernel compiled with nvcc in several compression modes by the fatbin tests.
extern "C" __global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

extern "C" __global__ void add_one(int* data, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) data[i] += 1;
}
