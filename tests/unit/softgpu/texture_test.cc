// CUDA arrays, array copies, texture objects and surface objects in softgpu: results of kernels
// compiled from kernels/texture_kernels.cu are compared with CPU references computed here, and
// bad input (sizes near 2^64, copies outside arrays, destroyed and foreign objects) is refused or
// faults on its own context only.
#include <cuda.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "tests/unit/softgpu/test_util.h"
#include "tests/unit/softgpu/texture_fixture.h"

namespace {

using softgpu_test::ExpectNear;
using softgpu_test::KernelFile;
using softgpu_test::Reference;
using softgpu_test::Sampler;
using softgpu_test::Texel;
using softgpu_test::Volume;

class TextureTest : public softgpu_test::TextureFixture {};

// Coordinates that cover texel centres, edges, fractions and the outside on both sides.
std::vector<float> Coordinates(int n, bool normalized) {
  std::vector<float> v;
  for (float c = -2.3f; c < n + 2.5f; c += 0.37f) v.push_back(normalized ? c / n : c);
  return v;
}

TEST_F(TextureTest, ArrayCreationIsValidated) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  CUarray a = nullptr;
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);  // zero width
  d.Width = ~size_t{0};
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Width = size_t{1} << 62;
  d.Height = size_t{1} << 62;
  d.Depth = 16;
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Width = 16;
  d.Height = 0;
  d.Depth = 4;  // depth without height, not layered
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Depth = 0;
  d.NumChannels = 3;
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.NumChannels = 1;
  d.Format = CU_AD_FORMAT_BC1_UNORM;
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_NOT_SUPPORTED);
  d.Format = CU_AD_FORMAT_FLOAT;
  d.Flags = CUDA_ARRAY3D_CUBEMAP;
  d.Height = 8;
  d.Depth = 6;  // 16 x 8 faces are not square
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Width = 8;
  d.Depth = 5;
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Flags = CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED;
  d.Depth = 12;
  CU_ASSERT_OK(cuArray3DCreate(&a, &d));
  CU_EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);

  // The limits enforced are the ones reported.
  CUdevice dev;
  CU_ASSERT_OK(cuCtxGetDevice(&dev));
  int w1 = 0, w2 = 0, h2 = 0, w3 = 0, layers = 0, sw2 = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&w1, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, dev));
  CU_ASSERT_OK(cuDeviceGetAttribute(&w2, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH, dev));
  CU_ASSERT_OK(cuDeviceGetAttribute(&h2, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, dev));
  CU_ASSERT_OK(cuDeviceGetAttribute(&w3, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH, dev));
  CU_ASSERT_OK(
      cuDeviceGetAttribute(&layers, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS, dev));
  CU_ASSERT_OK(cuDeviceGetAttribute(&sw2, CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH, dev));
  int align = 0, pitch_align = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, dev));
  CU_ASSERT_OK(
      cuDeviceGetAttribute(&pitch_align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, dev));
  EXPECT_EQ(w1, 131072);
  EXPECT_EQ(align, 512);
  EXPECT_EQ(pitch_align, 32);
  auto try_create = [&](size_t w, size_t h, size_t z, unsigned flags) {
    CUDA_ARRAY3D_DESCRIPTOR x{};
    x.Width = w;
    x.Height = h;
    x.Depth = z;
    x.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    x.NumChannels = 1;
    x.Flags = flags;
    CUarray arr = nullptr;
    CUresult r = cuArray3DCreate(&arr, &x);
    if (r == CUDA_SUCCESS) {
      EXPECT_EQ(cuArrayDestroy(arr), CUDA_SUCCESS);
    }
    return r;
  };
  CU_EXPECT_EQ(try_create(w1, 0, 0, 0), CUDA_SUCCESS);
  CU_EXPECT_EQ(try_create(w1 + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(try_create(w2, 1, 0, 0), CUDA_SUCCESS);
  CU_EXPECT_EQ(try_create(w2 + 1, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(try_create(1, h2 + 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(try_create(w3 + 1, 1, 1, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(try_create(4, 4, layers, CUDA_ARRAY3D_LAYERED), CUDA_SUCCESS);
  CU_EXPECT_EQ(try_create(4, 4, layers + 1, CUDA_ARRAY3D_LAYERED), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(try_create(sw2, 1, 0, CUDA_ARRAY3D_SURFACE_LDST), CUDA_SUCCESS);
  CU_EXPECT_EQ(try_create(sw2 + 1, 1, 0, CUDA_ARRAY3D_SURFACE_LDST), CUDA_ERROR_INVALID_VALUE);

  // The 2D form, and the descriptors given back.
  CUDA_ARRAY_DESCRIPTOR d2{};
  d2.Width = 33;
  d2.Height = 7;
  d2.Format = CU_AD_FORMAT_HALF;
  d2.NumChannels = 2;
  CU_ASSERT_OK(cuArrayCreate(&a, &d2));
  CUDA_ARRAY_DESCRIPTOR g2{};
  CU_ASSERT_OK(cuArrayGetDescriptor(&g2, a));
  EXPECT_EQ(g2.Width, 33u);
  EXPECT_EQ(g2.Height, 7u);
  EXPECT_EQ(g2.Format, CU_AD_FORMAT_HALF);
  EXPECT_EQ(g2.NumChannels, 2u);
  CUDA_ARRAY3D_DESCRIPTOR g3{};
  CU_ASSERT_OK(cuArray3DGetDescriptor(&g3, a));
  EXPECT_EQ(g3.Depth, 0u);
  EXPECT_EQ(g3.Flags, 0u);
  CU_ASSERT_OK(cuArrayDestroy(a));
  CU_EXPECT_EQ(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuArrayGetDescriptor(&g2, a), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(TextureTest, ArraysCountAgainstDeviceMemory) {
  size_t free0, total;
  CU_ASSERT_OK(cuMemGetInfo(&free0, &total));
  CUarray a = MakeArray(1024, 256, 4, CU_AD_FORMAT_FLOAT, 4);  // 16 MiB
  size_t free1;
  CU_ASSERT_OK(cuMemGetInfo(&free1, &total));
  EXPECT_GE(free0 - free1, 16u << 20);
  CU_ASSERT_OK(cuArrayDestroy(a));
  CU_ASSERT_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
  // An array too large for the device is out of memory, not a crash.
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = d.Height = d.Depth = 16384;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 4;
  CU_EXPECT_EQ(cuArray3DCreate(&a, &d), CUDA_ERROR_OUT_OF_MEMORY);
  // cuCtxDestroy frees arrays: another context sees all memory back.
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  MakeArray(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4);
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  CU_ASSERT_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
}

TEST_F(TextureTest, Memcpy3DInEveryDirection) {
  const size_t w = 5, h = 4, d = 3, row = w * 4;
  // The model: value of element (x, y, z) of each array.
  std::vector<float> a_model(w * h * d), b_model(w * h * d, 0.f);
  for (size_t i = 0; i < a_model.size(); ++i) a_model[i] = static_cast<float>(i) + 0.5f;
  CUarray A = MakeArray(w, h, d, CU_AD_FORMAT_FLOAT, 1);
  CUarray B = MakeArray(w, h, d, CU_AD_FORMAT_FLOAT, 1);
  // Host -> array from a padded host layout (pitch 32 bytes, 5 rows per slice).
  const size_t hp = 32, hrows = 5;
  std::vector<uint8_t> padded(hp * hrows * d, 0xee);
  for (size_t z = 0; z < d; ++z)
    for (size_t y = 0; y < h; ++y)
      memcpy(&padded[(z * hrows + y) * hp], &a_model[(z * h + y) * w], row);
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = padded.data();
  c.srcPitch = hp;
  c.srcHeight = hrows;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = A;
  c.WidthInBytes = row;
  c.Height = h;
  c.Depth = d;
  CU_ASSERT_OK(cuMemcpy3D(&c));
  auto read_back = [&](CUarray arr) {
    std::vector<float> out(w * h * d, -1.f);
    CUDA_MEMCPY3D r{};
    r.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    r.srcArray = arr;
    r.dstMemoryType = CU_MEMORYTYPE_HOST;
    r.dstHost = out.data();
    r.dstPitch = row;
    r.dstHeight = h;
    r.WidthInBytes = row;
    r.Height = h;
    r.Depth = d;
    EXPECT_EQ(cuMemcpy3D(&r), CUDA_SUCCESS);
    return out;
  };
  EXPECT_EQ(read_back(A), a_model);

  // Host -> array into a box at an offset (unified source).
  std::vector<float> box(2 * 2 * 2);
  for (size_t i = 0; i < box.size(); ++i) box[i] = 100.f + i;
  c = CUDA_MEMCPY3D{};
  c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.srcDevice = reinterpret_cast<CUdeviceptr>(box.data());
  c.srcPitch = 8;
  c.srcHeight = 2;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = A;
  c.dstXInBytes = 4;
  c.dstY = 1;
  c.dstZ = 1;
  c.WidthInBytes = 8;
  c.Height = 2;
  c.Depth = 2;
  CU_ASSERT_OK(cuMemcpy3D(&c));
  for (size_t z = 0; z < 2; ++z)
    for (size_t y = 0; y < 2; ++y)
      for (size_t x = 0; x < 2; ++x)
        a_model[((z + 1) * h + y + 1) * w + x + 1] = box[(z * 2 + y) * 2 + x];
  EXPECT_EQ(read_back(A), a_model);

  // Array -> array between offsets.
  c = CUDA_MEMCPY3D{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = A;
  c.srcY = 1;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = B;
  c.dstXInBytes = 8;
  c.dstY = 2;
  c.dstZ = 1;
  c.WidthInBytes = 12;
  c.Height = 2;
  c.Depth = 2;
  CU_ASSERT_OK(cuMemcpy3D(&c));
  for (size_t z = 0; z < 2; ++z)
    for (size_t y = 0; y < 2; ++y)
      for (size_t x = 0; x < 3; ++x)
        b_model[((z + 1) * h + y + 2) * w + x + 2] = a_model[(z * h + y + 1) * w + x];
  EXPECT_EQ(read_back(B), b_model);

  // Array -> device (pitched) -> host, and device -> array.
  const size_t dp = 64;
  CUdeviceptr dev = Alloc(dp * h * d);
  c = CUDA_MEMCPY3D{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = B;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dev;
  c.dstPitch = dp;
  c.dstHeight = h;
  c.WidthInBytes = row;
  c.Height = h;
  c.Depth = d;
  CU_ASSERT_OK(cuMemcpy3D(&c));
  std::vector<uint8_t> raw = Download<uint8_t>(dev, dp * h * d);
  for (size_t z = 0; z < d; ++z)
    for (size_t y = 0; y < h; ++y)
      EXPECT_EQ(memcmp(&raw[(z * h + y) * dp], &b_model[(z * h + y) * w], row), 0) << y << z;
  CUarray C = MakeArray(w, h, d, CU_AD_FORMAT_FLOAT, 1);
  std::swap(c.srcMemoryType, c.dstMemoryType);
  c.srcDevice = dev;
  c.srcPitch = dp;
  c.srcHeight = h;
  c.dstArray = C;
  c.srcArray = nullptr;
  CU_ASSERT_OK(cuMemcpy3D(&c));
  EXPECT_EQ(read_back(C), b_model);

  // The async form on a stream.
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  c = CUDA_MEMCPY3D{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = A;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = C;
  c.WidthInBytes = row;
  c.Height = h;
  c.Depth = d;
  CU_ASSERT_OK(cuMemcpy3DAsync(&c, s));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(read_back(C), a_model);
  CU_ASSERT_OK(cuStreamDestroy(s));

  // Boxes outside the array, partial elements and unknown memory types are refused.
  CUDA_MEMCPY3D bad = c;
  bad.dstXInBytes = 4;  // one element past the row end
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.srcY = 1;
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstZ = 1;
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.srcZ = ~size_t{0};
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.WidthInBytes = 6;  // not whole elements
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstArray = reinterpret_cast<CUarray>(&bad);
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  bad = c;
  bad.dstMemoryType = static_cast<CUmemorytype>(77);
  CU_EXPECT_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
  for (CUarray x : {A, B, C}) CU_EXPECT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
  // A destroyed array is no copy side.
  CU_EXPECT_EQ(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(TextureTest, Memcpy2DAndLinearArrayCopies) {
  const size_t w = 6, h = 3;
  std::vector<uint16_t> img(w * h);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint16_t>(1000 + i);
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = w;
  d.Height = h;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT16;
  d.NumChannels = 1;
  CUarray a;
  CU_ASSERT_OK(cuArrayCreate(&a, &d));
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = img.data();
  c.srcPitch = w * 2;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = a;
  c.WidthInBytes = w * 2;
  c.Height = h;
  CU_ASSERT_OK(cuMemcpy2D(&c));
  std::vector<uint16_t> back(w * h, 0);
  CUDA_MEMCPY2D r{};
  r.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  r.srcArray = a;
  r.srcXInBytes = 2;
  r.srcY = 1;
  r.dstMemoryType = CU_MEMORYTYPE_HOST;
  r.dstHost = back.data();
  r.dstPitch = w * 2;
  r.WidthInBytes = 4 * 2;
  r.Height = 2;
  CU_ASSERT_OK(cuMemcpy2DUnaligned(&r));
  for (size_t y = 0; y < 2; ++y)
    for (size_t x = 0; x < 4; ++x) EXPECT_EQ(back[y * w + x], img[(y + 1) * w + x + 1]);
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  std::fill(back.begin(), back.end(), 0);
  r.srcXInBytes = 0;
  r.srcY = 0;
  r.WidthInBytes = w * 2;
  r.Height = h;
  CU_ASSERT_OK(cuMemcpy2DAsync(&r, s));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(back, img);
  r.Height = h + 1;
  CU_EXPECT_EQ(cuMemcpy2D(&r), CUDA_ERROR_INVALID_VALUE);

  // The offset-based copies see the array as one linear range.
  std::vector<uint16_t> part = {7, 8, 9};
  CU_ASSERT_OK(cuMemcpyHtoA(a, 4, part.data(), 6));
  img[2] = 7, img[3] = 8, img[4] = 9;
  std::vector<uint16_t> all(w * h);
  CU_ASSERT_OK(cuMemcpyAtoH(all.data(), a, 0, all.size() * 2));
  EXPECT_EQ(all, img);
  CUdeviceptr dev = Alloc(w * h * 2);
  CU_ASSERT_OK(cuMemcpyAtoD(dev, a, 0, w * h * 2));
  EXPECT_EQ(Download<uint16_t>(dev, w * h), img);
  CUarray b;
  CU_ASSERT_OK(cuArrayCreate(&b, &d));
  CU_ASSERT_OK(cuMemcpyDtoA(b, 0, dev, w * h * 2));
  CU_ASSERT_OK(cuMemcpyAtoA(b, 2, a, 10, 4));
  std::vector<uint16_t> want = img;
  want[1] = img[5], want[2] = img[6];
  CU_ASSERT_OK(cuMemcpyAtoHAsync(all.data(), b, 0, all.size() * 2, s));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(all, want);
  CU_ASSERT_OK(cuMemcpyHtoAAsync(b, 0, img.data(), img.size() * 2, s));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  CU_ASSERT_OK(cuMemcpyAtoH(all.data(), b, 0, all.size() * 2));
  EXPECT_EQ(all, img);
  CU_EXPECT_EQ(cuMemcpyHtoA(a, w * h * 2 - 2, part.data(), 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyAtoH(all.data(), a, ~size_t{0}, 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyAtoA(b, 0, a, 2, w * h * 2), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuStreamDestroy(s));
  CU_ASSERT_OK(cuArrayDestroy(a));
  CU_ASSERT_OK(cuArrayDestroy(b));
}

TEST_F(TextureTest, ArraysOfAnotherContextAreRefused) {
  CUarray mine = MakeArray(8, 8, 0, CU_AD_FORMAT_FLOAT, 1);
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));  // now current
  std::vector<float> host(64, 1.f);
  CU_EXPECT_EQ(cuMemcpyHtoA(mine, 0, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = mine;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = host.data();
  c.dstPitch = 32;
  c.WidthInBytes = 32;
  c.Height = 8;
  c.Depth = 1;
  CU_EXPECT_EQ(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = mine;
  CUDA_TEXTURE_DESC td{};
  CUtexObject t;
  CU_EXPECT_EQ(cuTexObjectCreate(&t, &res, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUsurfObject s;
  CU_EXPECT_EQ(cuSurfObjectCreate(&s, &res), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuArrayDestroy(mine), CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  CU_EXPECT_EQ(cuArrayDestroy(mine), CUDA_SUCCESS);
}

TEST_F(TextureTest, Tex1DFetchOnLinearMemory) {
  const int n = 100;
  std::vector<float> v(4 * n);
  for (int i = 0; i < 4 * n; ++i) v[i] = i * 0.25f;
  CUdeviceptr buf = Upload(v);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_LINEAR;
  res.res.linear.devPtr = buf;
  res.res.linear.format = CU_AD_FORMAT_FLOAT;
  res.res.linear.numChannels = 4;
  res.res.linear.sizeInBytes = v.size() * 4;
  CUtexObject t = Texture(res, Sampler{});
  // Elements -3 .. n+2: outside the range reads zeros.
  int first = -3, count = n + 6;
  CUdeviceptr out = Alloc(16 * count);
  CU_ASSERT_OK(Run("fetch_linear_f4", count, {&t, &out, &first, &count}));
  std::vector<float> got = Download<float>(out, 4 * count);
  for (int k = 0; k < count; ++k) {
    const int e = first + k;
    for (int c = 0; c < 4; ++c) {
      const float want = (e >= 0 && e < n) ? v[4 * e + c] : 0.f;
      EXPECT_EQ(got[4 * k + c], want) << "element " << e;
    }
  }
  // An int view of the same memory through a second object (32-bit ints read as integers).
  std::vector<int> ints(50);
  for (int i = 0; i < 50; ++i) ints[i] = i * i - 7;
  CUdeviceptr ib = Upload(ints);
  res.res.linear.devPtr = ib;
  res.res.linear.format = CU_AD_FORMAT_SIGNED_INT32;
  res.res.linear.numChannels = 1;
  res.res.linear.sizeInBytes = 50 * 4;
  CUtexObject ti = Texture(res, Sampler{});
  first = 0;
  count = 51;
  CUdeviceptr iout = Alloc(4 * count);
  CU_ASSERT_OK(Run("fetch_linear_i1", count, {&ti, &iout, &first, &count}));
  std::vector<int> igot = Download<int>(iout, count);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(igot[i], ints[i]);
  EXPECT_EQ(igot[50], 0);
  // Misaligned, unowned or oversized linear resources are refused.
  CUDA_TEXTURE_DESC td{};
  CUtexObject bad;
  res.res.linear.devPtr = ib + 4;
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &res, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  res.res.linear.devPtr = ib;
  res.res.linear.sizeInBytes = 1 << 20;
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &res, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  CU_ASSERT_OK(cuTexObjectDestroy(ti));
  CU_EXPECT_EQ(cuTexObjectDestroy(ti), CUDA_ERROR_INVALID_VALUE);
}

// tex2D on a float4 array in every combination of filter, coordinates and address mode.
TEST_F(TextureTest, Tex2DFilteringAndAddressModes) {
  Volume v;
  v.w = 7;
  v.h = 5;
  for (int y = 0; y < v.h; ++y)
    for (int x = 0; x < v.w; ++x)
      v.t.push_back({static_cast<float>(x * 10 + y), static_cast<float>(y * y), -1.f * x,
                     static_cast<float>((x * 7 + y * 3) % 11)});
  CUarray a = MakeArray(v.w, v.h, 0, CU_AD_FORMAT_FLOAT, 4);
  Fill(a, v.t.data(), v.w * 16, v.h, 1);
  const CUaddress_mode modes[] = {CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_CLAMP,
                                  CU_TR_ADDRESS_MODE_MIRROR, CU_TR_ADDRESS_MODE_BORDER};
  for (bool normalized : {false, true}) {
    for (bool linear : {false, true}) {
      for (CUaddress_mode mode : modes) {
        Sampler s;
        s.normalized = normalized;
        s.linear = linear;
        s.mode[0] = mode;
        s.mode[1] = mode == CU_TR_ADDRESS_MODE_WRAP ? CU_TR_ADDRESS_MODE_MIRROR : mode;
        s.border[0] = 0.5f, s.border[1] = -2.f, s.border[2] = 3.f, s.border[3] = 4.f;
        std::vector<float> xs, ys;
        const std::vector<float> cx = Coordinates(v.w, normalized);
        const std::vector<float> cy = Coordinates(v.h, normalized);
        for (size_t i = 0; i < cx.size(); ++i) {
          for (size_t j = 0; j < cy.size(); j += 3) {
            xs.push_back(cx[i]);
            ys.push_back(cy[(j + i) % cy.size()]);
          }
        }
        CUtexObject t = Texture(a, s);
        std::vector<float> got = Lookup2D(t, xs, ys);
        for (size_t i = 0; i < xs.size(); ++i) {
          const float c[2] = {xs[i], ys[i]};
          ExpectNear(Reference(v, 2, c, 0, s), &got[4 * i],
                     "normalized " + std::to_string(normalized) + " linear " +
                         std::to_string(linear) + " mode " + std::to_string(mode) + " at (" +
                         std::to_string(xs[i]) + ", " + std::to_string(ys[i]) + ")");
        }
        CU_ASSERT_OK(cuTexObjectDestroy(t));
      }
    }
  }
  // The weights are quantized to 8 fractional bits: 0.3 of the way is 77/256, not 0.3.
  Sampler s;
  s.linear = true;
  CUtexObject t = Texture(a, s);
  std::vector<float> got = Lookup2D(t, {0.8f}, {0.5f});  // between x = 0 (0) and x = 1 (10)
  EXPECT_NEAR(got[0], 10.f * 77 / 256, 1e-5f);
  // tex2DLod and tex2DGrad read level 0 of a non-mipmapped array.
  const float x = 2.7f, y = 1.2f;
  CUdeviceptr dx = Upload(std::vector<float>{x}), dy = Upload(std::vector<float>{y});
  CUdeviceptr lod = Alloc(16), grad = Alloc(16);
  int one = 1;
  CU_ASSERT_OK(Run("lookup_2d_lod_grad", 1, {&t, &dx, &dy, &lod, &grad, &one}));
  const float c[2] = {x, y};
  ExpectNear(Reference(v, 2, c, 0, s), Download<float>(lod, 4).data(), "tex2DLod");
  ExpectNear(Reference(v, 2, c, 0, s), Download<float>(grad, 4).data(), "tex2DGrad");
  // The descriptors given back are the ones given.
  CUDA_TEXTURE_DESC td{};
  CU_ASSERT_OK(cuTexObjectGetTextureDesc(&td, t));
  EXPECT_EQ(td.filterMode, CU_TR_FILTER_MODE_LINEAR);
  CUDA_RESOURCE_DESC rd{};
  CU_ASSERT_OK(cuTexObjectGetResourceDesc(&rd, t));
  EXPECT_EQ(rd.resType, CU_RESOURCE_TYPE_ARRAY);
  EXPECT_EQ(rd.res.array.hArray, a);
  CUDA_RESOURCE_VIEW_DESC vd{};
  CU_EXPECT_EQ(cuTexObjectGetResourceViewDesc(&vd, t), CUDA_ERROR_INVALID_VALUE);  // none set
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  CU_ASSERT_OK(cuArrayDestroy(a));
}

TEST_F(TextureTest, EightAndSixteenBitFormatsAndHalves) {
  const int w = 4, h = 2;
  std::vector<uint8_t> u8(w * h * 4);
  for (size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<uint8_t>(i * 37 % 256);
  CUarray a = MakeArray(w, h, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4);
  Fill(a, u8.data(), w * 4, h, 1);
  std::vector<float> xs, ys;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) xs.push_back(x + 0.5f), ys.push_back(y + 0.5f);
  CUtexObject t = Texture(a, Sampler{});
  std::vector<float> got = Lookup2D(t, xs, ys);
  for (size_t i = 0; i < u8.size(); ++i) EXPECT_FLOAT_EQ(got[i], u8[i] / 255.f) << i;
  // READ_AS_INTEGER: the bytes themselves.
  CUtexObject ti = Texture(a, Sampler{}, CU_TRSF_READ_AS_INTEGER);
  {
    const int n = static_cast<int>(xs.size());
    CUdeviceptr dx = Upload(xs), dy = Upload(ys), out = Alloc(16 * n);
    CU_ASSERT_OK(Run("lookup_2d_int", n, {&ti, &dx, &dy, &out, const_cast<int*>(&n)}));
    std::vector<int> ig = Download<int>(out, 4 * n);
    for (size_t i = 0; i < u8.size(); ++i) EXPECT_EQ(ig[i], u8[i]) << i;
  }
  // Linear filtering of normalized 8-bit data: between texel 0 and 1 of row 0.
  Sampler lin;
  lin.linear = true;
  CUtexObject tl = Texture(a, lin);
  got = Lookup2D(tl, {1.25f}, {0.5f});
  const float a75 = std::nearbyint(0.75f * 256) / 256;
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(got[c], (1 - a75) * u8[c] / 255.f + a75 * u8[4 + c] / 255.f, 1e-5f) << c;
  }
  // Signed 8-bit: max(-1, v / 127); signed 16-bit: v / 32767; unsigned 16-bit: v / 65535.
  std::vector<int8_t> s8 = {-128, -127, -1, 0, 1, 64, 127, 5};
  CUarray as = MakeArray(8, 1, 0, CU_AD_FORMAT_SIGNED_INT8, 1);
  Fill(as, s8.data(), 8, 1, 1);
  CUtexObject ts = Texture(as, Sampler{});
  std::vector<float> x8, y8(8, 0.5f);
  for (int i = 0; i < 8; ++i) x8.push_back(i + 0.5f);
  got = Lookup2D(ts, x8, y8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(got[4 * i], std::max(-1.f, s8[i] / 127.f)) << i;
    EXPECT_EQ(got[4 * i + 1], 0.f);
    EXPECT_EQ(got[4 * i + 3], 1.f);  // missing alpha reads 1
  }
  std::vector<int16_t> s16 = {-32768, -32767, -2, 0, 3, 1000, 32767, 12};
  CUarray a16 = MakeArray(8, 1, 0, CU_AD_FORMAT_SIGNED_INT16, 1);
  Fill(a16, s16.data(), 16, 1, 1);
  CUtexObject t16 = Texture(a16, Sampler{});
  got = Lookup2D(t16, x8, y8);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(got[4 * i], std::max(-1.f, s16[i] / 32767.f)) << i;
  std::vector<uint16_t> u16 = {0, 1, 65535, 32768, 7, 9, 11, 13};
  CUarray au16 = MakeArray(8, 1, 0, CU_AD_FORMAT_UNSIGNED_INT16, 1);
  Fill(au16, u16.data(), 16, 1, 1);
  CUtexObject tu16 = Texture(au16, Sampler{});
  got = Lookup2D(tu16, x8, y8);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(got[4 * i], u16[i] / 65535.f) << i;
  // Half floats read as floats: 1.0, -2.5, 0.333 (0x3555), 65504.
  std::vector<uint16_t> halves = {0x3c00, 0xc100, 0x3555, 0x7bff, 0, 0, 0, 0};
  CUarray ah = MakeArray(4, 1, 0, CU_AD_FORMAT_HALF, 2);
  Fill(ah, halves.data(), 16, 1, 1);
  CUtexObject th = Texture(ah, Sampler{});
  got = Lookup2D(th, {0.5f, 1.5f}, {0.5f, 0.5f});
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], -2.5f);
  EXPECT_NEAR(got[4], 0.33325195f, 1e-7f);
  EXPECT_EQ(got[5], 65504.f);
  for (CUtexObject x : {t, ti, tl, ts, t16, tu16, th})
    CU_EXPECT_EQ(cuTexObjectDestroy(x), CUDA_SUCCESS);
  for (CUarray x : {a, as, a16, au16, ah}) CU_EXPECT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
}

TEST_F(TextureTest, Tex3DAndLayeredTextures) {
  Volume v;
  v.w = 4;
  v.h = 3;
  v.d = 5;
  for (int z = 0; z < v.d; ++z)
    for (int y = 0; y < v.h; ++y)
      for (int x = 0; x < v.w; ++x)
        v.t.push_back({static_cast<float>(x + 10 * y + 100 * z), 0, 0, 1});
  std::vector<float> flat;
  for (const Texel& t : v.t) flat.push_back(t[0]);
  CUarray a3 = MakeArray(v.w, v.h, v.d, CU_AD_FORMAT_FLOAT, 1);
  Fill(a3, flat.data(), v.w * 4, v.h, v.d);
  for (bool linear : {false, true}) {
    Sampler s;
    s.linear = linear;
    s.normalized = true;
    s.mode[0] = CU_TR_ADDRESS_MODE_WRAP;
    s.mode[2] = CU_TR_ADDRESS_MODE_MIRROR;
    CUtexObject t = Texture(a3, s);
    std::vector<float> xs, ys, zs;
    for (float x = -0.3f; x < 1.4f; x += 0.23f)
      for (float y = -0.1f; y < 1.2f; y += 0.31f)
        for (float z = -0.2f; z < 1.3f; z += 0.17f)
          xs.push_back(x), ys.push_back(y), zs.push_back(z);
    const int n = static_cast<int>(xs.size());
    CUdeviceptr dx = Upload(xs), dy = Upload(ys), dz = Upload(zs), out = Alloc(16 * n);
    CU_ASSERT_OK(Run("lookup_3d", n, {&t, &dx, &dy, &dz, &out, const_cast<int*>(&n)}));
    std::vector<float> got = Download<float>(out, 4 * n);
    for (int i = 0; i < n; ++i) {
      const float c[3] = {xs[i], ys[i], zs[i]};
      Texel want = Reference(v, 3, c, 0, s);
      EXPECT_NEAR(got[4 * i], want[0], 1e-3f)
          << "3D linear " << linear << " at " << xs[i] << "," << ys[i] << "," << zs[i];
    }
    CU_ASSERT_OK(cuTexObjectDestroy(t));
  }
  CU_ASSERT_OK(cuArrayDestroy(a3));

  // The same data as a 2D layered array (5 layers of 4x3) and a 1D layered one (5 layers of 4).
  CUarray al = MakeArray(v.w, v.h, v.d, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
  Fill(al, flat.data(), v.w * 4, v.h, v.d);
  Sampler s;
  s.linear = true;
  CUtexObject t = Texture(al, s);
  std::vector<float> xs, ys;
  std::vector<int> layers;
  for (int l = -1; l <= v.d; ++l)
    for (float x = -0.5f; x < 5; x += 0.7f)
      xs.push_back(x), ys.push_back(1.3f), layers.push_back(l);
  int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), dl = Upload(layers), out = Alloc(16 * n);
  CU_ASSERT_OK(Run("lookup_2d_layered", n, {&t, &dx, &dy, &dl, &out, &n}));
  std::vector<float> got = Download<float>(out, 4 * n);
  for (int i = 0; i < n; ++i) {
    const float c[2] = {xs[i], ys[i]};
    const int layer = std::min(std::max(layers[i], 0), v.d - 1);  // layer indices clamp
    EXPECT_NEAR(got[4 * i], Reference(v, 2, c, layer, s)[0], 1e-4f)
        << "layer " << layers[i] << " x " << xs[i];
  }
  // A view of layers 2..3 sees layer 2 as its layer 0.
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = al;
  CUDA_TEXTURE_DESC td{};
  CUDA_RESOURCE_VIEW_DESC view{};
  view.firstLayer = 2;
  view.lastLayer = 3;
  CUtexObject tv;
  CU_ASSERT_OK(cuTexObjectCreate(&tv, &res, &td, &view));
  CUDA_RESOURCE_VIEW_DESC back{};
  CU_ASSERT_OK(cuTexObjectGetResourceViewDesc(&back, tv));
  EXPECT_EQ(back.firstLayer, 2u);
  std::vector<int> zero_layers(n, 0);
  CUdeviceptr dz = Upload(zero_layers);
  CU_ASSERT_OK(Run("lookup_2d_layered", n, {&tv, &dx, &dy, &dz, &out, &n}));
  got = Download<float>(out, 4 * n);
  for (int i = 0; i < n; ++i) {
    const float c[2] = {xs[i], ys[i]};
    EXPECT_NEAR(got[4 * i], Reference(v, 2, c, 2, Sampler{})[0], 1e-4f) << i;
  }
  view.format = CU_RES_VIEW_FORMAT_UINT_1X32;
  CU_EXPECT_EQ(cuTexObjectCreate(&tv, &res, &td, &view), CUDA_ERROR_NOT_SUPPORTED);
  view.format = CU_RES_VIEW_FORMAT_NONE;
  view.lastLayer = 9;
  CU_EXPECT_EQ(cuTexObjectCreate(&tv, &res, &td, &view), CUDA_ERROR_INVALID_VALUE);

  CUarray a1 = MakeArray(v.w, 0, v.d, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
  std::vector<float> rows;  // layer l = row 0 of slice l
  for (int l = 0; l < v.d; ++l)
    for (int x = 0; x < v.w; ++x) rows.push_back(v.at(x, 0, l)[0]);
  Fill(a1, rows.data(), v.w * 4, 1, v.d);
  CUtexObject t1 = Texture(a1, Sampler{});
  CU_ASSERT_OK(Run("lookup_1d_layered", n, {&t1, &dx, &dl, &out, &n}));
  got = Download<float>(out, 4 * n);
  for (int i = 0; i < n; ++i) {
    const float c[1] = {xs[i]};
    const int layer = std::min(std::max(layers[i], 0), v.d - 1);
    EXPECT_EQ(got[4 * i], Reference(v, 1, c, 0, Sampler{})[0] + 100 * layer) << i;
  }
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  CU_ASSERT_OK(cuTexObjectDestroy(tv));
  CU_ASSERT_OK(cuTexObjectDestroy(t1));
  CU_ASSERT_OK(cuArrayDestroy(al));
  CU_ASSERT_OK(cuArrayDestroy(a1));
}

// Face selection per the CUDA Programming Guide's cubemap table.
void CubeReference(float x, float y, float z, int* face, float* u, float* v) {
  const float ax = std::fabs(x), ay = std::fabs(y), az = std::fabs(z);
  float m, s, t;
  if (ax >= ay && ax >= az) {
    m = ax, *face = x >= 0 ? 0 : 1, s = x >= 0 ? -z : z, t = -y;
  } else if (ay >= az) {
    m = ay, *face = y >= 0 ? 2 : 3, s = x, t = y >= 0 ? z : -z;
  } else {
    m = az, *face = z >= 0 ? 4 : 5, s = z >= 0 ? x : -x, t = -y;
  }
  *u = (s / m + 1) / 2;
  *v = (t / m + 1) / 2;
}

TEST_F(TextureTest, Cubemaps) {
  const int w = 4, layers = 2;
  Volume v;
  v.w = v.h = w;
  v.d = 6 * layers;
  for (int f = 0; f < v.d; ++f)
    for (int y = 0; y < w; ++y)
      for (int x = 0; x < w; ++x)
        v.t.push_back({static_cast<float>(1000 * f + 10 * y + x), 0, 0, 0});
  std::vector<float> flat;
  for (const Texel& t : v.t) flat.push_back(t[0]);
  CUarray cube = MakeArray(w, w, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP);
  Fill(cube, flat.data(), w * 4, w, 6);
  CUarray cubes = MakeArray(w, w, 6 * layers, CU_AD_FORMAT_FLOAT, 1,
                            CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED);
  Fill(cubes, flat.data(), w * 4, w, 6 * layers);
  Sampler s;
  s.normalized = true;
  CUtexObject tc = Texture(cube, s);
  CUtexObject tl = Texture(cubes, s, CU_TRSF_SEAMLESS_CUBEMAP);
  std::vector<float> xs, ys, zs;
  std::vector<int> ls;
  for (float x = -1; x <= 1; x += 0.4f)
    for (float y = -1.1f; y <= 1; y += 0.45f)
      for (float z = -0.9f; z <= 1; z += 0.35f) {
        xs.push_back(x), ys.push_back(y), zs.push_back(z), ls.push_back(ls.size() % 2);
      }
  int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), dz = Upload(zs), dl = Upload(ls);
  CUdeviceptr out = Alloc(16 * n), out2 = Alloc(16 * n);
  CU_ASSERT_OK(Run("lookup_cube", n, {&tc, &dx, &dy, &dz, &out, &n}));
  CU_ASSERT_OK(Run("lookup_cube_layered", n, {&tl, &dx, &dy, &dz, &dl, &out2, &n}));
  std::vector<float> got = Download<float>(out, 4 * n), got2 = Download<float>(out2, 4 * n);
  for (int i = 0; i < n; ++i) {
    int face;
    float u, vv;
    CubeReference(xs[i], ys[i], zs[i], &face, &u, &vv);
    const int tx = std::min(static_cast<int>(std::floor(u * w)), w - 1);
    const int ty = std::min(static_cast<int>(std::floor(vv * w)), w - 1);
    EXPECT_EQ(got[4 * i], v.at(tx, ty, face)[0]) << xs[i] << "," << ys[i] << "," << zs[i];
    EXPECT_EQ(got2[4 * i], v.at(tx, ty, 6 * ls[i] + face)[0]) << i;
  }
  CU_ASSERT_OK(cuTexObjectDestroy(tc));
  CU_ASSERT_OK(cuTexObjectDestroy(tl));
  // Seamless filtering needs a cubemap.
  CUarray flat2d = MakeArray(4, 4, 0, CU_AD_FORMAT_FLOAT, 1);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = flat2d;
  CUDA_TEXTURE_DESC td{};
  td.flags = CU_TRSF_SEAMLESS_CUBEMAP;
  CUtexObject bad;
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &res, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  td.flags = CU_TRSF_SRGB;
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &res, &td, nullptr), CUDA_ERROR_NOT_SUPPORTED);
  for (CUarray x : {cube, cubes, flat2d}) CU_EXPECT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
}

TEST_F(TextureTest, PitchLinearTextures) {
  const size_t w = 37, h = 9;
  CUdeviceptr base;
  size_t pitch;
  CU_ASSERT_OK(cuMemAllocPitch(&base, &pitch, w * 4, h, 4));
  allocations_.push_back(base);
  Volume v;
  v.w = static_cast<int>(w);
  v.h = static_cast<int>(h);
  std::vector<float> host(pitch / 4 * h);
  for (size_t y = 0; y < h; ++y)
    for (size_t x = 0; x < w; ++x) {
      host[y * pitch / 4 + x] = std::sin(x * 0.3f) * 10 + y;
      v.t.push_back({host[y * pitch / 4 + x], 0, 0, 1});
    }
  CU_ASSERT_OK(cuMemcpyHtoD(base, host.data(), host.size() * 4));
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_PITCH2D;
  res.res.pitch2D.devPtr = base;
  res.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
  res.res.pitch2D.numChannels = 1;
  res.res.pitch2D.width = w;
  res.res.pitch2D.height = h;
  res.res.pitch2D.pitchInBytes = pitch;
  Sampler s;
  s.normalized = true;
  s.linear = true;
  s.mode[0] = s.mode[1] = CU_TR_ADDRESS_MODE_WRAP;
  CUtexObject t = Texture(res, s);
  std::vector<float> xs, ys;
  for (float x = -0.2f; x < 1.3f; x += 0.053f) xs.push_back(x), ys.push_back(x * 0.7f - 0.1f);
  std::vector<float> got = Lookup2D(t, xs, ys);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float c[2] = {xs[i], ys[i]};
    EXPECT_NEAR(got[4 * i], Reference(v, 2, c, 0, s)[0], 1e-4f) << xs[i] << "," << ys[i];
  }
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  // Alignment and extent rules.
  CUDA_TEXTURE_DESC td{};
  CUtexObject bad;
  CUDA_RESOURCE_DESC r2 = res;
  r2.res.pitch2D.pitchInBytes = pitch - 4;  // not a multiple of TEXTURE_PITCH_ALIGNMENT
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &r2, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  r2 = res;
  r2.res.pitch2D.devPtr = base + 256;  // not TEXTURE_ALIGNMENT-aligned
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &r2, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  r2 = res;
  r2.res.pitch2D.height = h + 1;  // past the allocation
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &r2, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  r2 = res;
  r2.res.pitch2D.pitchInBytes = 32;  // shorter than a row
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &r2, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  // The same bytes read as a mipmapped-array handle name none.
  r2.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  CU_EXPECT_EQ(cuTexObjectCreate(&bad, &r2, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(TextureTest, Tex2DGather) {
  const int w = 5, h = 4;
  std::vector<float> img(w * h * 4);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>(i);
  CUarray a = MakeArray(w, h, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_TEXTURE_GATHER);
  Fill(a, img.data(), w * 16, h, 1);
  Sampler s;  // clamp, unnormalized
  CUtexObject t = Texture(a, s);
  std::vector<float> xs = {0.5f, 1.0f, 2.7f, 4.9f, -1.f, 3.3f};
  std::vector<float> ys = {0.5f, 1.0f, 1.2f, 3.9f, 2.f, -0.4f};
  const int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), out = Alloc(64 * n);
  CU_ASSERT_OK(Run("gather_2d", n, {&t, &dx, &dy, &out, const_cast<int*>(&n)}));
  std::vector<float> got = Download<float>(out, 16 * n);
  auto at = [&](int x, int y, int c) {
    x = std::min(std::max(x, 0), w - 1);
    y = std::min(std::max(y, 0), h - 1);
    return img[(y * w + x) * 4 + c];
  };
  for (int i = 0; i < n; ++i) {
    const int i0 = static_cast<int>(std::floor(xs[i] - 0.5f));
    const int j0 = static_cast<int>(std::floor(ys[i] - 0.5f));
    for (int c = 0; c < 4; ++c) {
      const float* g = &got[16 * i + 4 * c];
      EXPECT_EQ(g[0], at(i0, j0 + 1, c)) << i << " comp " << c;
      EXPECT_EQ(g[1], at(i0 + 1, j0 + 1, c)) << i << " comp " << c;
      EXPECT_EQ(g[2], at(i0 + 1, j0, c)) << i << " comp " << c;
      EXPECT_EQ(g[3], at(i0, j0, c)) << i << " comp " << c;
    }
  }
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  CU_ASSERT_OK(cuArrayDestroy(a));
}

TEST_F(TextureTest, TextureAndSurfaceQueries) {
  CUarray a =
      MakeArray(12, 7, 3, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST);
  Sampler s;
  s.normalized = true;
  s.linear = true;
  s.mode[0] = CU_TR_ADDRESS_MODE_MIRROR;
  CUtexObject t = Texture(a, s);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a;
  CUsurfObject sf;
  CU_ASSERT_OK(cuSurfObjectCreate(&sf, &res));
  CUdeviceptr out = Alloc(9 * 4);
  CU_ASSERT_OK(cuLaunchKernel(Function("query"), 1, 1, 1, 1, 1, 1, 0, nullptr,
                              std::vector<void*>{&t, &sf, &out}.data(), nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<unsigned> q = Download<unsigned>(out, 9);
  EXPECT_EQ(q[0], 12u);
  EXPECT_EQ(q[1], 7u);
  EXPECT_EQ(q[2], 0u);  // layered: no depth
  EXPECT_EQ(q[3], 3u);  // layers
  EXPECT_EQ(q[4], 1u);
  EXPECT_EQ(q[5], 1u);
  EXPECT_EQ(q[6], 1u);  // PTX's encoding of mirror
  EXPECT_EQ(q[7], 12u);
  EXPECT_EQ(q[8], 7u);
  CUDA_RESOURCE_DESC back{};
  CU_ASSERT_OK(cuSurfObjectGetResourceDesc(&back, sf));
  EXPECT_EQ(back.res.array.hArray, a);
  CU_EXPECT_EQ(cuSurfObjectGetResourceDesc(&back, t), CUDA_ERROR_INVALID_VALUE);  // a texture
  CU_EXPECT_EQ(cuTexObjectDestroy(sf), CUDA_ERROR_INVALID_VALUE);                 // a surface
  CU_ASSERT_OK(cuSurfObjectDestroy(sf));
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  CU_ASSERT_OK(cuArrayDestroy(a));
}

TEST_F(TextureTest, SurfaceReadWriteRoundTrip) {
  const int w = 19, h = 11;
  std::vector<float> img(w * h);
  for (int i = 0; i < w * h; ++i) img[i] = i * 0.5f - 3;
  CUarray in = MakeArray(w, h, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST);
  CUarray outa = MakeArray(w, h, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST);
  Fill(in, img.data(), w * 4, h, 1);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = in;
  CUsurfObject sin, sout;
  CU_ASSERT_OK(cuSurfObjectCreate(&sin, &res));
  res.res.array.hArray = outa;
  CU_ASSERT_OK(cuSurfObjectCreate(&sout, &res));
  int wi = w, hi = h;
  std::vector<void*> args = {&sin, &sout, &wi, &hi};
  CU_ASSERT_OK(cuLaunchKernel(Function("surface_scale"), 3, 2, 1, 8, 8, 1, 0, nullptr, args.data(),
                              nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<float> back(w * h);
  CU_ASSERT_OK(cuMemcpyAtoH(back.data(), outa, 0, back.size() * 4));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) EXPECT_EQ(back[y * w + x], 2 * img[y * w + x] + x) << x << "," << y;

  // Boundary modes: clamp reads the nearest element, zero reads 0.
  std::vector<int> xs = {0, w - 1, w, -1, 3, 100, -5};
  std::vector<int> ys = {0, h - 1, 2, 2, h, -1, -7};
  int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), out = Alloc(8 * n);
  CU_ASSERT_OK(Run("surface_modes", n, {&sin, &dx, &dy, &out, &n}));
  std::vector<float> got = Download<float>(out, 2 * n);
  for (int i = 0; i < n; ++i) {
    const int cx = std::min(std::max(xs[i], 0), w - 1), cy = std::min(std::max(ys[i], 0), h - 1);
    const bool inside = xs[i] >= 0 && xs[i] < w && ys[i] >= 0 && ys[i] < h;
    EXPECT_EQ(got[2 * i], img[cy * w + cx]) << i;
    EXPECT_EQ(got[2 * i + 1], inside ? img[ys[i] * w + xs[i]] : 0.f) << i;
  }
  // Without SURFACE_LDST an array is no surface; linear memory is none either.
  CUarray plain = MakeArray(4, 4, 0, CU_AD_FORMAT_FLOAT, 1);
  res.res.array.hArray = plain;
  CUsurfObject bad;
  CU_EXPECT_EQ(cuSurfObjectCreate(&bad, &res), CUDA_ERROR_INVALID_VALUE);
  CUDA_RESOURCE_DESC lin{};
  lin.resType = CU_RESOURCE_TYPE_LINEAR;
  lin.res.linear.devPtr = out;
  lin.res.linear.format = CU_AD_FORMAT_FLOAT;
  lin.res.linear.numChannels = 1;
  lin.res.linear.sizeInBytes = 8;
  CU_EXPECT_EQ(cuSurfObjectCreate(&bad, &lin), CUDA_ERROR_INVALID_VALUE);
  // A .trap access out of range faults (sticky on this context).
  int x = w, y = 0;
  CUdeviceptr one = Alloc(4);
  std::vector<void*> targs = {&sin, &x, &y, &one};
  CU_ASSERT_OK(cuLaunchKernel(Function("surface_trap_read"), 1, 1, 1, 1, 1, 1, 0, nullptr,
                              targs.data(), nullptr));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  allocations_.clear();  // the context is unusable; cuCtxDestroy frees everything
}

TEST_F(TextureTest, Surface3DLayeredAnd1D) {
  const int w = 3, h = 2, d = 4;
  std::vector<uint8_t> bytes(w * h * d * 4);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 3);
  CUarray a3 = MakeArray(w, h, d, CU_AD_FORMAT_UNSIGNED_INT8, 4, CUDA_ARRAY3D_SURFACE_LDST);
  CUarray al = MakeArray(w, h, d, CU_AD_FORMAT_UNSIGNED_INT8, 4,
                         CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_LAYERED);
  Fill(a3, bytes.data(), w * 4, h, d);
  Fill(al, bytes.data(), w * 4, h, d);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a3;
  CUsurfObject s3, sl;
  CU_ASSERT_OK(cuSurfObjectCreate(&s3, &res));
  res.res.array.hArray = al;
  CU_ASSERT_OK(cuSurfObjectCreate(&sl, &res));
  int wi = w, hi = h, di = d;
  std::vector<void*> args = {&s3, &sl, &wi, &hi, &di};
  CU_ASSERT_OK(cuLaunchKernel(Function("surface_3d_and_layered"), 1, 1, 1, w, h, d, 0, nullptr,
                              args.data(), nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<uint8_t> want = bytes;
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(want[i] + 1 + i % 4);
  std::vector<uint8_t> got(bytes.size());
  CU_ASSERT_OK(cuMemcpyAtoH(got.data(), a3, 0, got.size()));
  EXPECT_EQ(got, want);
  CU_ASSERT_OK(cuMemcpyAtoH(got.data(), al, 0, got.size()));
  EXPECT_EQ(got, want);

  const int w1 = 10, layers = 3;
  std::vector<float> f2(2 * w1);
  for (int i = 0; i < 2 * w1; ++i) f2[i] = i + 0.25f;
  CUarray a1 = MakeArray(w1, 0, 0, CU_AD_FORMAT_FLOAT, 2, CUDA_ARRAY3D_SURFACE_LDST);
  CU_ASSERT_OK(cuMemcpyHtoA(a1, 0, f2.data(), f2.size() * 4));
  std::vector<int16_t> shorts(w1 * layers);
  for (int i = 0; i < w1 * layers; ++i) shorts[i] = static_cast<int16_t>(i - 9);
  CUarray a1l = MakeArray(w1, 0, layers, CU_AD_FORMAT_SIGNED_INT16, 1,
                          CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_LAYERED);
  CU_ASSERT_OK(cuMemcpyHtoA(a1l, 0, shorts.data(), shorts.size() * 2));
  res.res.array.hArray = a1;
  CUsurfObject s1, s1l;
  CU_ASSERT_OK(cuSurfObjectCreate(&s1, &res));
  res.res.array.hArray = a1l;
  CU_ASSERT_OK(cuSurfObjectCreate(&s1l, &res));
  int wl = w1, nl = layers;
  std::vector<void*> args1 = {&s1, &s1l, &wl, &nl};
  CU_ASSERT_OK(
      cuLaunchKernel(Function("surface_1d"), 1, 1, 1, 32, 1, 1, 0, nullptr, args1.data(), nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<float> f2back(f2.size());
  CU_ASSERT_OK(cuMemcpyAtoH(f2back.data(), a1, 0, f2back.size() * 4));
  for (size_t i = 0; i < f2.size(); ++i) EXPECT_EQ(f2back[i], f2[i] * 3) << i;
  std::vector<int16_t> sback(shorts.size());
  CU_ASSERT_OK(cuMemcpyAtoH(sback.data(), a1l, 0, sback.size() * 2));
  for (size_t i = 0; i < shorts.size(); ++i) EXPECT_EQ(sback[i], shorts[i] * 3) << i;
  for (CUsurfObject s : {s3, sl, s1, s1l}) CU_EXPECT_EQ(cuSurfObjectDestroy(s), CUDA_SUCCESS);
  for (CUarray x : {a3, al, a1, a1l}) CU_EXPECT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
}

// A kernel given a destroyed texture object, or another context's, faults on its own context
// only; the other context keeps working.
TEST_F(TextureTest, DestroyedOrForeignObjectsFaultTheirContextOnly) {
  CUarray a = MakeArray(2, 2, 0, CU_AD_FORMAT_FLOAT, 1);
  std::vector<float> img = {1, 2, 3, 4};
  Fill(a, img.data(), 8, 2, 1);
  CUtexObject good = Texture(a, Sampler{});
  CUtexObject dead = Texture(a, Sampler{});
  CU_ASSERT_OK(cuTexObjectDestroy(dead));
  CUdeviceptr out = Alloc(4);
  std::vector<void*> args = {&good, &out};
  CU_ASSERT_OK(
      cuLaunchKernel(Function("read_one"), 1, 1, 1, 1, 1, 1, 0, nullptr, args.data(), nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<float>(out, 1)[0], 1.f);

  // Context B: uses ctx_'s object (foreign), then faults.
  CUcontext b;
  CU_ASSERT_OK(cuCtxCreate(&b, nullptr, 0, 0));
  CUmodule mb;
  CU_ASSERT_OK(cuModuleLoadData(&mb, ptx_.c_str()));
  CUfunction fb;
  CU_ASSERT_OK(cuModuleGetFunction(&fb, mb, "read_one"));
  CUdeviceptr outb;
  CU_ASSERT_OK(cuMemAlloc(&outb, 4));
  std::vector<void*> bargs = {&good, &outb};
  CU_ASSERT_OK(cuLaunchKernel(fb, 1, 1, 1, 1, 1, 1, 0, nullptr, bargs.data(), nullptr));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_ASSERT_OK(cuCtxDestroy(b));

  // Context C: a destroyed object of its own, then faults.
  CUcontext c;
  CU_ASSERT_OK(cuCtxCreate(&c, nullptr, 0, 0));
  CUmodule mc;
  CU_ASSERT_OK(cuModuleLoadData(&mc, ptx_.c_str()));
  CUfunction fc;
  CU_ASSERT_OK(cuModuleGetFunction(&fc, mc, "read_one"));
  CUarray ac = MakeArray(2, 2, 0, CU_AD_FORMAT_FLOAT, 1);
  CUtexObject tc = Texture(ac, Sampler{});
  CU_ASSERT_OK(cuTexObjectDestroy(tc));
  CUdeviceptr outc;
  CU_ASSERT_OK(cuMemAlloc(&outc, 4));
  std::vector<void*> cargs = {&tc, &outc};
  CU_ASSERT_OK(cuLaunchKernel(fc, 1, 1, 1, 1, 1, 1, 0, nullptr, cargs.data(), nullptr));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  // So does a live object whose array was destroyed.
  CU_ASSERT_OK(cuCtxDestroy(c));

  // ctx_ is unaffected: the live object still reads, a destroyed array's object faults here too.
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  CU_ASSERT_OK(
      cuLaunchKernel(Function("read_one"), 1, 1, 1, 1, 1, 1, 0, nullptr, args.data(), nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<float>(out, 1)[0], 1.f);
  CU_ASSERT_OK(cuArrayDestroy(a));
  CU_ASSERT_OK(
      cuLaunchKernel(Function("read_one"), 1, 1, 1, 1, 1, 1, 0, nullptr, args.data(), nullptr));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  allocations_.clear();
}

TEST_F(TextureTest, Tex1DOnArraysAndHandlesAreUnique) {
  const int w = 9;
  std::vector<float> v(w);
  for (int i = 0; i < w; ++i) v[i] = i * i;
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = w;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  CUarray a;
  CU_ASSERT_OK(cuArrayCreate(&a, &d));
  CU_ASSERT_OK(cuMemcpyHtoA(a, 0, v.data(), w * 4));
  Sampler s;
  s.linear = true;
  s.mode[0] = CU_TR_ADDRESS_MODE_BORDER;
  s.border[0] = 100;
  CUtexObject t = Texture(a, s);
  std::vector<float> xs = {-1.f, 0.f, 0.5f, 0.9f, 4.3f, 8.5f, 9.2f, 10.f};
  int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), out = Alloc(16 * n);
  CU_ASSERT_OK(Run("lookup_1d", n, {&t, &dx, &out, &n}));
  std::vector<float> got = Download<float>(out, 4 * n);
  Volume vol;
  vol.w = w;
  for (float f : v) vol.t.push_back({f, 0, 0, 1});
  for (int i = 0; i < n; ++i) {
    const float c[1] = {xs[i]};
    EXPECT_NEAR(got[4 * i], Reference(vol, 1, c, 0, s)[0], 1e-3f) << xs[i];
  }
  // Handles are nonzero and never reused.
  CUtexObject t2 = Texture(a, s);
  CU_ASSERT_OK(cuTexObjectDestroy(t2));
  CUtexObject t3 = Texture(a, s);
  EXPECT_NE(t, 0u);
  EXPECT_NE(t3, t2);
  EXPECT_NE(t3, t);
  CU_ASSERT_OK(cuTexObjectDestroy(t3));
  CU_ASSERT_OK(cuTexObjectDestroy(t));
  CU_ASSERT_OK(cuArrayDestroy(a));
}

}  // namespace

namespace {

// Texture instructions softgpu does not implement load fine and fail at launch, naming the
// instruction; the implemented form next to them runs.
TEST(TextureUnsupportedTest, UnsupportedVariantsFailAtLaunch) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  const char* ptx = R"(
.version 8.0
.target sm_75
.address_size 64
.visible .entry channel_query(.param .u64 t, .param .u64 out) {
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  txq.channel_order.b32 %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  ret;
}
.visible .entry cube_gather(.param .u64 t, .param .u64 out) {
  .reg .f32 %f<8>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  tld4.r.cube.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6, %f7, %f7}];
  st.global.f32 [%rd2], %f1;
  ret;
}
.visible .entry width(.param .u64 t, .param .u64 out) {
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  txq.width.b32 %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  ret;
}
)";
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx));
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 6;
  d.Height = 2;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  CUarray a;
  CU_ASSERT_OK(cuArray3DCreate(&a, &d));
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a;
  CUDA_TEXTURE_DESC td{};
  CUtexObject t;
  CU_ASSERT_OK(cuTexObjectCreate(&t, &res, &td, nullptr));
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 16));
  void* args[] = {&t, &out};
  for (const char* name : {"channel_query", "cube_gather"}) {
    CUfunction f;
    CU_ASSERT_OK(cuModuleGetFunction(&f, m, name));
    CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
                 CUDA_ERROR_NOT_SUPPORTED);
  }
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "width"));
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  unsigned w = 0;
  CU_ASSERT_OK(cuMemcpyDtoH(&w, out, 4));
  EXPECT_EQ(w, 6u);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

}  // namespace
