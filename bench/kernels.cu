// Kernels for the benchmarks: an empty kernel (launch overhead) and a tiny increment (the chatty
// workload). extern "C" keeps their names plain for cuModuleGetFunction.
extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void increment(int* counter) {
  if (threadIdx.x == 0) atomicAdd(counter, 1);
}
