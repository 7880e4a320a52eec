// Cooperative launches (hipLaunchCooperativeKernel): the blocks of a grid synchronize with each
// other (cooperative groups' grid.sync()) between writing their values and reading their
// neighbours'; a grid larger than the device can hold at once is refused
// (hipErrorCooperativeLaunchTooLarge). Where the device cannot run AMDGPU code (the software GPU)
// the first launch is refused with hipErrorNoBinaryForGpu (exit 3).
#include <vector>

#include "hip_check.h"  // hip_runtime.h, which the cooperative groups header needs first
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

__global__ void RotateAcrossGrid(int* stage, int* out, int n) {
  cg::grid_group grid = cg::this_grid();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) stage[i] = i * 3;
  grid.sync();  // every block's writes are visible to every other block
  if (i < n) out[i] = stage[(i + blockDim.x) % n];
}

int main() {
  const int block = 64, grid = 4, n = block * grid;
  int *stage, *out;
  CHECK(hipMalloc(reinterpret_cast<void**>(&stage), n * sizeof(int)));
  CHECK(hipMalloc(reinterpret_cast<void**>(&out), n * sizeof(int)));
  CHECK(hipMemset(out, 0, n * sizeof(int)));
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  int count = n;
  void* args[] = {&stage, &out, &count};
  CHECK_CODE(hipLaunchCooperativeKernel(reinterpret_cast<const void*>(RotateAcrossGrid), dim3(grid),
                                        dim3(block), args, 0, s));
  CHECK(hipStreamSynchronize(s));
  std::vector<int> host(n);
  CHECK(hipMemcpy(host.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(host[i] == ((i + block) % n) * 3);

  int cooperative = 0;
  CHECK(hipDeviceGetAttribute(&cooperative, hipDeviceAttributeCooperativeLaunch, 0));
  EXPECT(cooperative == 1);
  // More blocks than can be resident at once cannot synchronize: refused.
  int per_sm = 0, sms = 0;
  CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(RotateAcrossGrid), block, 0));
  CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, 0));
  const int too_many = per_sm * sms + 1;
  EXPECT_ERROR(hipLaunchCooperativeKernel(reinterpret_cast<const void*>(RotateAcrossGrid),
                                          dim3(too_many), dim3(block), args, 0, s),
               hipErrorCooperativeLaunchTooLarge);
  EXPECT(hipGetLastError() == hipErrorCooperativeLaunchTooLarge);
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(stage));
  CHECK(hipFree(out));
  puts("hip_cooperative: ok");
  return 0;
}
