// Pitched 2D memory: cudaMallocPitch (pitch >= row width), cudaMemcpy2D host->device with a host
// pitch wider than the row, a 2D kernel addressing rows through the pitch, cudaMemset2D on a
// sub-rectangle, device->device cudaMemcpy2D of a sub-rectangle, cudaMemcpy2DAsync back to a
// tightly packed host array.
#include "rt_check.h"

#include <vector>

__global__ void Transform(float* base, size_t pitch, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  float* row = reinterpret_cast<float*>(reinterpret_cast<char*>(base) + y * pitch);
  row[x] = row[x] * 2.0f + (float)y;
}

int main() {
  const int w = 37, h = 50, host_stride = 40;  // host rows are 40 floats apart
  const size_t row_bytes = w * sizeof(float);
  std::vector<float> host(host_stride * h, -999.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) host[y * host_stride + x] = (float)(y * 100 + x);

  float* d = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&d, &pitch, row_bytes, h));
  EXPECT(pitch >= row_bytes, "pitch %zu < row %zu", pitch, row_bytes);
  CHECK(cudaMemcpy2D(d, pitch, host.data(), host_stride * sizeof(float), row_bytes, h,
                     cudaMemcpyHostToDevice));
  dim3 block(16, 8), grid(GridFor(w, 16), GridFor(h, 8));
  Transform<<<grid, block>>>(d, pitch, w, h);
  CHECK_SYNC();
  std::vector<float> want(w * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) want[y * w + x] = (float)(y * 100 + x) * 2.0f + (float)y;

  // Back into a tightly packed array.
  std::vector<float> packed(w * h, 0.0f);
  CHECK(cudaMemcpy2D(packed.data(), row_bytes, d, pitch, row_bytes, h, cudaMemcpyDeviceToHost));
  ExpectNearArrays("transform", packed.data(), want.data(), w * h, 0, 0);

  // Second pitched buffer, zeroed with a plain memset, receives a sub-rectangle of the first one
  // device to device: rows 10..39, columns 5..24 of d go to rows 3..32, columns 2..21 of e.
  unsigned char* e = nullptr;
  size_t epitch = 0;
  CHECK(cudaMallocPitch(&e, &epitch, row_bytes, h));
  CHECK(cudaMemset(e, 0, epitch * h));
  CHECK(cudaMemcpy2D(e + 3 * epitch + 2 * sizeof(float), epitch,
                     reinterpret_cast<char*>(d) + 10 * pitch + 5 * sizeof(float), pitch,
                     20 * sizeof(float), 30, cudaMemcpyDeviceToDevice));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, w * h * sizeof(float)));
  CHECK(cudaMemcpy2DAsync(pinned, row_bytes, e, epitch, row_bytes, h, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      float expect = 0.0f;
      if (y >= 3 && y < 33 && x >= 2 && x < 22) expect = want[(y - 3 + 10) * w + (x - 2 + 5)];
      float got = pinned[y * w + x];
      EXPECT(got == expect, "2D copy: e(%d,%d) = %g, want %g", x, y, got, expect);
    }

  // cudaMemset2D: the whole of e to 0x11 bytes, then a 10x5 sub-rectangle to 0x3F bytes; the
  // padding between rows (if any) is not part of the rectangle but its bytes are not checked.
  CHECK(cudaMemset2D(e, epitch, 0x11, row_bytes, h));
  CHECK(cudaMemset2D(e + 40 * epitch + 4 * sizeof(float), epitch, 0x3F, 10 * sizeof(float), 5));
  CHECK(cudaMemcpy2DAsync(pinned, row_bytes, e, epitch, row_bytes, h, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(pinned);
  for (int y = 0; y < h; ++y)
    for (size_t b = 0; b < row_bytes; ++b) {
      bool inside = y >= 40 && y < 45 && b >= 4 * sizeof(float) && b < 14 * sizeof(float);
      unsigned char expect = inside ? 0x3F : 0x11;
      EXPECT(bytes[y * row_bytes + b] == expect, "memset2D: row %d byte %zu = 0x%02x, want 0x%02x",
             y, b, bytes[y * row_bytes + b], expect);
    }

  CHECK(cudaFreeHost(pinned));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  CHECK(cudaFree(e));
  printf("rt_pitch2d: OK (pitch %zu for %zu-byte rows)\n", pitch, row_bytes);
  return 0;
}
