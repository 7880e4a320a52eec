// Pitched 3D volumes: hipMalloc3D, hipMemset3D of the whole and of a box, and hipMemcpy3D between
// host and device and within the device, with offsets, synchronously and on a stream.
#include <vector>

#include "hip_check.h"

int main() {
  const size_t w = 100, h = 20, d = 5;  // bytes per row, rows, slices
  hipPitchedPtr vol;
  CHECK(hipMalloc3D(&vol, make_hipExtent(w, h, d)));
  EXPECT(vol.ptr != nullptr && vol.pitch >= w && vol.xsize == w && vol.ysize == h);
  CHECK(hipMemset3D(vol, 0x11, make_hipExtent(w, h, d)));
  // A box of 10 x 4 x 2 at (5, 3, 1) set to 0x77.
  hipPitchedPtr box_at = vol;
  box_at.ptr = static_cast<char*>(vol.ptr) + 1 * vol.pitch * h + 3 * vol.pitch + 5;
  CHECK(hipMemset3D(box_at, 0x77, make_hipExtent(10, 4, 2)));

  std::vector<unsigned char> host(w * h * d, 0);
  hipMemcpy3DParms down = {};
  down.srcPtr = vol;
  down.dstPtr = make_hipPitchedPtr(host.data(), w, w, h);
  down.extent = make_hipExtent(w, h, d);
  down.kind = hipMemcpyDeviceToHost;
  CHECK(hipMemcpy3D(&down));
  for (size_t z = 0; z < d; ++z) {
    for (size_t y = 0; y < h; ++y) {
      for (size_t x = 0; x < w; ++x) {
        const bool in = z >= 1 && z < 3 && y >= 3 && y < 7 && x >= 5 && x < 15;
        EXPECT(host[(z * h + y) * w + x] == (in ? 0x77 : 0x11));
      }
    }
  }

  // Host to device, then a device-to-device box copy with positions, then back on a stream.
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);
  hipMemcpy3DParms up = {};
  up.srcPtr = make_hipPitchedPtr(host.data(), w, w, h);
  up.dstPtr = vol;
  up.extent = make_hipExtent(w, h, d);
  up.kind = hipMemcpyHostToDevice;
  CHECK(hipMemcpy3D(&up));
  hipPitchedPtr other;
  CHECK(hipMalloc3D(&other, make_hipExtent(w, h, d)));
  CHECK(hipMemset3D(other, 0, make_hipExtent(w, h, d)));
  hipMemcpy3DParms inside = {};
  inside.srcPtr = vol;
  inside.srcPos = make_hipPos(2, 1, 0);
  inside.dstPtr = other;
  inside.dstPos = make_hipPos(0, 0, 3);
  inside.extent = make_hipExtent(8, 5, 2);
  inside.kind = hipMemcpyDeviceToDevice;
  CHECK(hipMemcpy3D(&inside));
  std::vector<unsigned char> out(w * h * d, 0xee);
  hipMemcpy3DParms back = {};
  back.srcPtr = other;
  back.dstPtr = make_hipPitchedPtr(out.data(), w, w, h);
  back.extent = make_hipExtent(w, h, d);
  back.kind = hipMemcpyDeviceToHost;
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemcpy3DAsync(&back, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t z = 0; z < d; ++z) {
    for (size_t y = 0; y < h; ++y) {
      for (size_t x = 0; x < w; ++x) {
        const bool in = z >= 3 && y < 5 && x < 8;
        const unsigned char expected =
            in ? host[((z - 3) * h + (y + 1)) * w + (x + 2)] : static_cast<unsigned char>(0);
        EXPECT(out[(z * h + y) * w + x] == expected);
      }
    }
  }
  // A bad direction is refused.
  hipMemcpy3DParms bad = up;
  bad.kind = static_cast<hipMemcpyKind>(9);
  EXPECT_ERROR(hipMemcpy3D(&bad), hipErrorInvalidMemcpyDirection);
  (void)hipGetLastError();
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(vol.ptr));
  CHECK(hipFree(other.ptr));
  puts("hip_memcpy_3d: ok");
  return 0;
}
