// Arrays: hipMallocArray describes the array it makes (hipArray's fields); 2D copies from pitched
// host rows into a box of the array and back out, to the host and to device memory, synchronous
// and on a stream; the deprecated row-order copies (hipMemcpyToArray/FromArray) wrap across rows;
// hipArrayCreate and hipArray3DCreate with driver descriptors; hipMemcpy3D between host memory
// and a 3D array, and array to array (positions and widths in elements); the 1D driver-style
// copies; freed arrays and bad channel descriptions are refused. Texture objects are not
// supported (hipErrorNotSupported).
#include <string.h>

#include <vector>

#include "hip_check.h"

// Deprecated entry points are among those tested.
#pragma clang diagnostic ignored "-Wdeprecated-declarations"

int main() {
  // A 64 x 16 array of float.
  const size_t w = 64, h = 16;
  hipChannelFormatDesc desc = hipCreateChannelDesc<float>();
  hipArray* arr = nullptr;
  CHECK(hipMallocArray(&arr, &desc, w, h, hipArrayDefault));
  EXPECT(arr != nullptr && arr->width == w && arr->height == h && arr->NumChannels == 1 &&
         arr->Format == HIP_AD_FORMAT_FLOAT && arr->desc.x == 32 &&
         arr->desc.f == hipChannelFormatKindFloat);

  // Pitched host rows (80 floats apart) into the whole array, then a box back out.
  const size_t hpitch = 80 * sizeof(float);
  std::vector<float> src(80 * h, -1.0f);
  for (size_t y = 0; y < h; ++y) {
    for (size_t x = 0; x < w; ++x) src[y * 80 + x] = static_cast<float>(y * 1000 + x);
  }
  CHECK(hipMemcpy2DToArray(arr, 0, 0, src.data(), hpitch, w * sizeof(float), h,
                           hipMemcpyHostToDevice));
  // The box at (x 8, y 3), 16 floats by 4 rows.
  std::vector<float> box(16 * 4, 0.0f);
  CHECK(hipMemcpy2DFromArray(box.data(), 16 * sizeof(float), arr, 8 * sizeof(float), 3,
                             16 * sizeof(float), 4, hipMemcpyDeviceToHost));
  for (size_t y = 0; y < 4; ++y) {
    for (size_t x = 0; x < 16; ++x) EXPECT(box[y * 16 + x] == (y + 3) * 1000 + (x + 8));
  }
  // Out to pitched device memory on a stream, then home.
  void* dev = nullptr;
  size_t dpitch = 0;
  CHECK(hipMallocPitch(&dev, &dpitch, w * sizeof(float), h));
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemcpy2DFromArrayAsync(dev, dpitch, arr, 0, 0, w * sizeof(float), h,
                                  hipMemcpyDeviceToDevice, s));
  std::vector<float> back(w * h, 0.0f);
  CHECK(hipMemcpy2DAsync(back.data(), w * sizeof(float), dev, dpitch, w * sizeof(float), h,
                         hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t y = 0; y < h; ++y) {
    for (size_t x = 0; x < w; ++x) EXPECT(back[y * w + x] == y * 1000 + x);
  }
  // Device rows into a box of the array (the default kind), on a stream.
  CHECK(hipMemset2D(dev, dpitch, 0, w * sizeof(float), h));
  CHECK(hipMemcpy2DToArrayAsync(arr, 4 * sizeof(float), 2, dev, dpitch, 8 * sizeof(float), 2,
                                hipMemcpyDefault, s));
  CHECK(hipStreamSynchronize(s));
  CHECK(hipMemcpy2DFromArray(back.data(), w * sizeof(float), arr, 0, 0, w * sizeof(float), h,
                             hipMemcpyDeviceToHost));
  for (size_t y = 0; y < h; ++y) {
    for (size_t x = 0; x < w; ++x) {
      const bool zeroed = y >= 2 && y < 4 && x >= 4 && x < 12;
      EXPECT(back[y * w + x] == (zeroed ? 0.0f : static_cast<float>(y * 1000 + x)));
    }
  }
  // Row order: 100 floats from (x 60, y 5) run on into rows 6 and 7.
  std::vector<float> line(100);
  for (size_t i = 0; i < line.size(); ++i) line[i] = -static_cast<float>(i + 1);
  CHECK(hipMemcpyToArray(arr, 60 * sizeof(float), 5, line.data(), line.size() * sizeof(float),
                         hipMemcpyHostToDevice));
  std::vector<float> line_back(100, 0.0f);
  CHECK(hipMemcpyFromArray(line_back.data(), arr, 60 * sizeof(float), 5,
                           line_back.size() * sizeof(float), hipMemcpyDeviceToHost));
  EXPECT(memcmp(line.data(), line_back.data(), line.size() * sizeof(float)) == 0);
  CHECK(hipMemcpy2DFromArray(back.data(), w * sizeof(float), arr, 0, 0, w * sizeof(float), h,
                             hipMemcpyDeviceToHost));
  EXPECT(back[5 * w + 59] == 5 * 1000 + 59 && back[5 * w + 60] == -1.0f &&
         back[6 * w + 0] == -5.0f && back[7 * w + 31] == -100.0f && back[7 * w + 32] == 7032.0f);
  // Wrong directions and a box past the array.
  EXPECT_ERROR(hipMemcpy2DToArray(arr, 0, 0, src.data(), hpitch, 16, 1, hipMemcpyDeviceToHost),
               hipErrorInvalidMemcpyDirection);
  EXPECT(hipMemcpy2DToArray(arr, 0, h - 1, src.data(), hpitch, w * sizeof(float), 2,
                            hipMemcpyHostToDevice) != hipSuccess);
  (void)hipGetLastError();

  // Driver descriptors: a 1D array of 256 uint32, and a 3D array of 8 x 4 x 3 uint8 pairs.
  HIP_ARRAY_DESCRIPTOR d1;
  memset(&d1, 0, sizeof d1);
  d1.Width = 256;
  d1.Height = 0;
  d1.Format = HIP_AD_FORMAT_UNSIGNED_INT32;
  d1.NumChannels = 1;
  hipArray* one = nullptr;
  CHECK(hipArrayCreate(&one, &d1));
  EXPECT(one->isDrv && one->width == 256 && one->height == 0);
  std::vector<unsigned> words(256), words_back(256, 0);
  for (unsigned i = 0; i < 256; ++i) words[i] = i * 7 + 3;
  CHECK(hipMemcpyHtoA(one, 0, words.data(), 256 * sizeof(unsigned)));
  CHECK(hipMemcpyAtoH(words_back.data(), one, 16 * sizeof(unsigned), 64 * sizeof(unsigned)));
  for (unsigned i = 0; i < 64; ++i) EXPECT(words_back[i] == (i + 16) * 7 + 3);

  HIP_ARRAY3D_DESCRIPTOR d3;
  memset(&d3, 0, sizeof d3);
  d3.Width = 8;
  d3.Height = 4;
  d3.Depth = 3;
  d3.Format = HIP_AD_FORMAT_UNSIGNED_INT8;
  d3.NumChannels = 2;
  hipArray *vol = nullptr, *vol2 = nullptr;
  CHECK(hipArray3DCreate(&vol, &d3));
  CHECK(hipArray3DCreate(&vol2, &d3));
  EXPECT(vol->depth == 3 && vol->NumChannels == 2);
  const size_t vbytes = 8 * 2 * 4 * 3;
  std::vector<unsigned char> v(vbytes), vback(vbytes, 0);
  for (size_t i = 0; i < vbytes; ++i) v[i] = static_cast<unsigned char>(i);
  hipMemcpy3DParms up;
  memset(&up, 0, sizeof up);
  up.srcPtr = make_hipPitchedPtr(v.data(), 8 * 2, 8, 4);
  up.dstArray = vol;
  up.extent = make_hipExtent(8, 4, 3);  // elements, with an array at one end
  up.kind = hipMemcpyHostToDevice;
  CHECK(hipMemcpy3D(&up));
  // Array to array, then out: all of it.
  hipMemcpy3DParms across;
  memset(&across, 0, sizeof across);
  across.srcArray = vol;
  across.dstArray = vol2;
  across.extent = make_hipExtent(8, 4, 3);
  across.kind = hipMemcpyDeviceToDevice;
  CHECK(hipMemcpy3DAsync(&across, s));
  hipMemcpy3DParms down;
  memset(&down, 0, sizeof down);
  down.srcArray = vol2;
  down.dstPtr = make_hipPitchedPtr(vback.data(), 8 * 2, 8, 4);
  down.extent = make_hipExtent(8, 4, 3);
  down.kind = hipMemcpyDeviceToHost;
  CHECK(hipMemcpy3DAsync(&down, s));
  CHECK(hipStreamSynchronize(s));
  EXPECT(memcmp(v.data(), vback.data(), vbytes) == 0);
  // A box: elements 2..5 of rows 1..2 of slice 1.
  hipMemcpy3DParms part = down;
  part.srcPos = make_hipPos(2, 1, 1);
  std::vector<unsigned char> pb(4 * 2 * 2, 0);
  part.dstPtr = make_hipPitchedPtr(pb.data(), 4 * 2, 4, 2);
  part.extent = make_hipExtent(4, 2, 1);
  CHECK(hipMemcpy3D(&part));
  for (size_t y = 0; y < 2; ++y) {
    for (size_t x = 0; x < 8; ++x) EXPECT(pb[y * 8 + x] == v[(1 * 4 + (y + 1)) * 16 + 4 + x]);
  }

  // Refused: channel descriptions the driver has no format for, freed arrays, texture objects.
  hipArray* bad = nullptr;
  hipChannelFormatDesc odd = hipCreateChannelDesc(8, 16, 0, 0, hipChannelFormatKindUnsigned);
  EXPECT_ERROR(hipMallocArray(&bad, &odd, 16, 16, hipArrayDefault), hipErrorInvalidValue);
  hipChannelFormatDesc three = hipCreateChannelDesc(32, 32, 32, 0, hipChannelFormatKindFloat);
  EXPECT_ERROR(hipMallocArray(&bad, &three, 16, 16, hipArrayDefault), hipErrorInvalidValue);
  hipResourceDesc res;
  memset(&res, 0, sizeof res);
  res.resType = hipResourceTypeArray;
  res.res.array.array = arr;
  hipTextureDesc tex;
  memset(&tex, 0, sizeof tex);
  hipTextureObject_t texture;
  EXPECT_ERROR(hipCreateTextureObject(&texture, &res, &tex, nullptr), hipErrorNotSupported);
  (void)hipGetLastError();

  CHECK(hipFreeArray(arr));
  EXPECT_ERROR(hipFreeArray(arr), hipErrorInvalidValue);
  EXPECT(hipGetLastError() == hipErrorInvalidValue);
  CHECK(hipArrayDestroy(one));
  CHECK(hipArrayDestroy(vol));
  CHECK(hipFreeArray(vol2));
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(dev));
  puts("hip_arrays: ok");
  return 0;
}
