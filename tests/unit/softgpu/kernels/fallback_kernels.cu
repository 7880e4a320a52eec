// A kernel whose compute_90a PTX holds an instruction softgpu lacks (wgmma, Hopper's warpgroup
// matrix multiply) and whose compute_75 PTX does not: built into one fat binary with both, it
// tells which PTX softgpu chose (api_test's PtxFallback).
extern "C" __global__ void which_ptx(int* out) {
#if __CUDA_ARCH__ >= 900
  asm volatile("wgmma.fence.sync.aligned;");
  out[0] = 90;
#else
  out[0] = 75;
#endif
}
