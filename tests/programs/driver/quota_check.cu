// Under a tenant memory quota (argv[1] bytes): cuMemGetInfo reports the quota as the total, the
// tenant can allocate up to it and no further (CUDA_ERROR_OUT_OF_MEMORY), managed memory included,
// and freeing makes room.
#include <cstdlib>

#include "check.h"

int main(int argc, char** argv) {
  const size_t quota = argc > 1 ? strtoull(argv[1], nullptr, 10) : 0;
  InitContext();
  size_t free_bytes, total;
  CHECK(cuMemGetInfo(&free_bytes, &total));
  EXPECT_TRUE(total == quota);
  EXPECT_TRUE(free_bytes == quota);
  const size_t chunk = quota / 4;
  std::vector<CUdeviceptr> held(4);
  for (auto& p : held) CHECK(cuMemAlloc(&p, chunk));
  CUdeviceptr extra;
  EXPECT_TRUE(cuMemAlloc(&extra, 4096) == CUDA_ERROR_OUT_OF_MEMORY);
  // Managed memory's device side counts against the same quota.
  EXPECT_TRUE(cuMemAllocManaged(&extra, 4096, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemGetInfo(&free_bytes, &total));
  EXPECT_TRUE(free_bytes == quota - 4 * chunk);
  CHECK(cuMemFree(held[0]));
  CUdeviceptr managed;
  const size_t managed_bytes = chunk / 2;
  CHECK(cuMemAllocManaged(&managed, managed_bytes, CU_MEM_ATTACH_GLOBAL));
  CHECK(cuMemGetInfo(&free_bytes, &total));
  EXPECT_TRUE(free_bytes <= quota - 3 * chunk - managed_bytes);
  CHECK(cuMemFree(managed));
  CHECK(cuMemGetInfo(&free_bytes, &total));
  EXPECT_TRUE(free_bytes == quota - 3 * chunk);
  CHECK(cuMemAlloc(&extra, 4096));
  printf("quota_check: quota of %zu bytes enforced\n", quota);
  return 0;
}
