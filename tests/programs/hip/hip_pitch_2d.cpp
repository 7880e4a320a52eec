// Pitched allocations and 2D copies between host rows and device rows.
#include <string.h>

#include <vector>

#include "hip_check.h"

int main() {
  const size_t width = 300, height = 37;  // bytes per row, rows
  void* d;
  size_t pitch = 0;
  CHECK(hipMallocPitch(&d, &pitch, width, height));
  EXPECT(pitch >= width);
  std::vector<unsigned char> src(width * height), dst(width * height, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13);
  CHECK(hipMemcpy2D(d, pitch, src.data(), width, width, height, hipMemcpyHostToDevice));
  CHECK(hipMemcpy2D(dst.data(), width, d, pitch, width, height, hipMemcpyDeviceToHost));
  EXPECT(memcmp(src.data(), dst.data(), src.size()) == 0);
  // A sub-rectangle, device to device, then back on a stream.
  void* e;
  size_t pitch2 = 0;
  CHECK(hipMallocPitch(&e, &pitch2, width, height));
  CHECK(hipMemset(e, 0, pitch2 * height));
  CHECK(hipMemcpy2D(static_cast<char*>(e) + pitch2 + 10, pitch2, static_cast<char*>(d) + 10, pitch,
                    50, 5, hipMemcpyDeviceToDevice));
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  std::vector<unsigned char> out(width * height, 1);
  CHECK(hipMemcpy2DAsync(out.data(), width, e, pitch2, width, height, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t r = 0; r < height; ++r) {
    for (size_t c = 0; c < width; ++c) {
      const bool inside = r >= 1 && r < 6 && c >= 10 && c < 60;
      EXPECT(out[r * width + c] == (inside ? src[(r - 1) * width + c] : 0));
    }
  }
  // A row wider than its pitch is refused.
  EXPECT(hipMemcpy2D(d, 16, src.data(), width, width, 2, hipMemcpyHostToDevice) != hipSuccess);
  (void)hipGetLastError();
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(d));
  CHECK(hipFree(e));
  puts("hip_pitch_2d: ok");
  return 0;
}
