// CUDA arrays through the driver API: cuArrayCreate and cuArray3DCreate report their descriptors;
// the 1D copies (host to array at an offset, array to array, array to device and back, array to
// host, synchronous and on a stream) move exactly the bytes asked; a copy past the array's end is
// refused and copies nothing; a destroyed array is refused.
#include <cstring>
#include <vector>

#include "check.h"

int main() {
  InitContext();
  CUDA_ARRAY_DESCRIPTOR d = {};
  d.Width = 256;
  d.Height = 0;  // 1D
  d.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  d.NumChannels = 1;
  CUarray a, b;
  CHECK(cuArrayCreate(&a, &d));
  CHECK(cuArrayCreate(&b, &d));
  CUDA_ARRAY_DESCRIPTOR got = {};
  CHECK(cuArrayGetDescriptor(&got, a));
  EXPECT_TRUE(got.Width == 256 && got.Height == 0 && got.Format == CU_AD_FORMAT_UNSIGNED_INT32 &&
              got.NumChannels == 1);
  CUDA_ARRAY3D_DESCRIPTOR got3 = {};
  CHECK(cuArray3DGetDescriptor(&got3, a));
  EXPECT_TRUE(got3.Width == 256 && got3.Depth == 0);

  std::vector<unsigned> host(256);
  for (unsigned i = 0; i < 256; ++i) host[i] = i * 3 + 1;
  const size_t bytes = host.size() * sizeof(unsigned);
  CHECK(cuMemcpyHtoA(a, 0, host.data(), bytes));
  // 64 values from a's offset 16 (bytes) to b's offset 128 (bytes), then through device memory.
  CHECK(cuMemcpyHtoA(b, 0, std::vector<unsigned>(256, 0).data(), bytes));
  CHECK(cuMemcpyAtoA(b, 128, a, 16, 64 * sizeof(unsigned)));
  CUdeviceptr dev;
  CHECK(cuMemAlloc(&dev, bytes));
  CHECK(cuMemcpyAtoD(dev, b, 0, bytes));
  CHECK(cuMemcpyDtoA(a, 0, dev, bytes));
  std::vector<unsigned> back(256, 7);
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuMemcpyAtoHAsync(back.data(), a, 0, bytes, stream));
  CHECK(cuStreamSynchronize(stream));
  for (unsigned i = 0; i < 256; ++i) {
    const bool moved = i >= 32 && i < 32 + 64;
    EXPECT_TRUE(back[i] == (moved ? host[i - 32 + 4] : 0u));
  }
  CHECK(cuMemcpyHtoAAsync(a, 8, host.data(), 4 * sizeof(unsigned), stream));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyAtoH(back.data(), a, 0, 8 * sizeof(unsigned)));
  EXPECT_TRUE(back[2] == host[0] && back[5] == host[3] && back[0] == 0u);

  // Past the end: refused, nothing written.
  EXPECT_TRUE(cuMemcpyHtoA(a, bytes - 4, host.data(), 8) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemcpyAtoH(back.data(), a, bytes, 4) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemcpyAtoH(back.data(), a, bytes - 4, 4));
  EXPECT_TRUE(back[0] == 0u);

  CHECK(cuArrayDestroy(b));
  EXPECT_TRUE(cuMemcpyHtoA(b, 0, host.data(), 4) != CUDA_SUCCESS);
  CHECK(cuArrayDestroy(a));
  CHECK(cuMemFree(dev));
  CHECK(cuStreamDestroy(stream));
  printf("arrays: OK\n");
  return 0;
}
