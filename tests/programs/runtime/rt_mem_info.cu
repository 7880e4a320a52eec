// cudaMemGetInfo: total is sane and matches the device's totalGlobalMem, free memory drops by
// (about) the size of a big cudaMalloc and comes back after cudaFree; the big allocation is usable
// at both ends.
#include "rt_check.h"

__global__ void TouchEnds(unsigned char* p, size_t n) {
  size_t i = threadIdx.x;
  p[i] = (unsigned char)i;
  p[n - 1 - i] = (unsigned char)(255 - i);
}

int main() {
  size_t free0 = 0, total = 0;
  CHECK(cudaMemGetInfo(&free0, &total));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  EXPECT(total > 0 && free0 > 0 && free0 <= total, "free %zu total %zu", free0, total);
  EXPECT(total <= prop.totalGlobalMem && total >= prop.totalGlobalMem / 2,
         "cudaMemGetInfo total %zu vs totalGlobalMem %zu", total, prop.totalGlobalMem);

  size_t big = (size_t)128 << 20;
  if (big > free0 / 4) big = free0 / 4;
  EXPECT(big >= ((size_t)8 << 20), "only %zu bytes free", free0);
  unsigned char* d = nullptr;
  CHECK(cudaMalloc(&d, big));
  size_t free1 = 0, total1 = 0;
  CHECK(cudaMemGetInfo(&free1, &total1));
  EXPECT(total1 == total, "total changed from %zu to %zu", total, total1);
  EXPECT(free1 < free0 && free0 - free1 >= big / 2,
         "free went from %zu to %zu after allocating %zu bytes", free0, free1, big);

  TouchEnds<<<1, 128>>>(d, big);
  CHECK_SYNC();
  unsigned char head[128], tail[128];
  CHECK(cudaMemcpy(head, d, sizeof head, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(tail, d + big - sizeof tail, sizeof tail, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 128; ++i) {
    EXPECT(head[i] == i, "head[%d] = %d", i, head[i]);
    EXPECT(tail[127 - i] == 255 - i, "tail[%d] = %d", 127 - i, tail[127 - i]);
  }

  CHECK(cudaFree(d));
  size_t free2 = 0;
  CHECK(cudaMemGetInfo(&free2, &total1));
  EXPECT(free2 > free1 && free2 - free1 >= big / 2,
         "free went from %zu to only %zu after freeing %zu bytes", free1, free2, big);
  printf("rt_mem_info: OK (total %zu MiB, %zu MiB allocated)\n", total >> 20, big >> 20);
  return 0;
}
