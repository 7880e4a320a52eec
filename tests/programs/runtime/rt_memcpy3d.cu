// 3D copies: cudaMalloc3D pitched volume, cudaMemcpy3D host to device, a kernel that doubles
// every element through the pitched pointer, and cudaMemcpy3D back into a differently shaped
// host buffer (a sub-volume at an offset).
#include "rt_check.h"

#include <vector>

__global__ void Double(cudaPitchedPtr p, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
  if (x >= nx || y >= ny || z >= nz) return;
  char* slice = static_cast<char*>(p.ptr) + z * p.pitch * ny;
  float* row = reinterpret_cast<float*>(slice + y * p.pitch);
  row[x] *= 2.0f;
}

int main() {
  const int nx = 37, ny = 11, nz = 5;
  cudaExtent extent = make_cudaExtent(nx * sizeof(float), ny, nz);
  cudaPitchedPtr dev;
  CHECK(cudaMalloc3D(&dev, extent));
  EXPECT(dev.pitch >= nx * sizeof(float), "pitch %zu too small", dev.pitch);
  std::vector<float> host(nx * ny * nz);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);

  cudaMemcpy3DParms up = {};
  up.srcPtr = make_cudaPitchedPtr(host.data(), nx * sizeof(float), nx, ny);
  up.dstPtr = dev;
  up.extent = extent;
  up.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&up));
  Double<<<dim3(1, ny, nz), 64>>>(dev, nx, ny, nz);
  CHECK_LAUNCH();

  // Copy back the sub-volume x in [2, 2+20), y in [1, 1+8), z in [1, 1+3) into a tight buffer.
  const int sx = 20, sy = 8, sz = 3;
  std::vector<float> back(sx * sy * sz, -1.0f);
  cudaMemcpy3DParms down = {};
  down.srcPtr = dev;
  down.srcPos = make_cudaPos(2 * sizeof(float), 1, 1);
  down.dstPtr = make_cudaPitchedPtr(back.data(), sx * sizeof(float), sx, sy);
  down.extent = make_cudaExtent(sx * sizeof(float), sy, sz);
  down.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3D(&down));
  for (int z = 0; z < sz; ++z) {
    for (int y = 0; y < sy; ++y) {
      for (int x = 0; x < sx; ++x) {
        float want = 2.0f * host[((z + 1) * ny + (y + 1)) * nx + (x + 2)];
        float got = back[(z * sy + y) * sx + x];
        EXPECT(got == want, "(%d,%d,%d): %f, want %f", x, y, z, got, want);
      }
    }
  }
  CHECK(cudaFree(dev.ptr));
  printf("rt_memcpy3d: OK\n");
  return 0;
}
