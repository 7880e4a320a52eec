// Arrays, textures and surfaces through the runtime: cudaMallocArray and cudaMalloc3DArray (2D, 3D,
// layered, cubemap), copies to, from and between arrays (host, device, array; 2D and 3D, at
// offsets), texture objects over arrays (point and linear filtering, normalized coordinates with
// wrap, clamp and border, 8-bit reads as normalized floats), over linear memory (tex1Dfetch) and
// pitched memory, and surfaces written by one kernel and read by another; every result compared
// with the CPU, and a copy outside an array refused
#include <cmath>
#include <cstdint>
#include <vector>

#include "rt_check.h"

__global__ void Sample2D(cudaTextureObject_t tex, const float2* coords, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(tex, coords[i].x, coords[i].y);
}

__global__ void Sample2DUchar4(cudaTextureObject_t tex, float4* out, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) out[y * w + x] = tex2D<float4>(tex, x + 0.5f, y + 0.5f);
}

__global__ void Fetch1D(cudaTextureObject_t tex, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int>(tex, i) * 2;
}

__global__ void Sample3D(cudaTextureObject_t tex, float* out, int w, int h, int d) {
  int x = threadIdx.x, y = blockIdx.x, z = blockIdx.y;
  if (x < w && y < h && z < d) {
    out[(z * h + y) * w + x] = tex3D<float>(tex, x + 0.5f, y + 0.5f, z + 0.5f);
  }
}

__global__ void SampleLayered(cudaTextureObject_t tex, float* out, int w, int h, int layers) {
  int x = threadIdx.x, y = blockIdx.x, layer = blockIdx.y;
  if (x < w && y < h && layer < layers) {
    out[(layer * h + y) * w + x] = tex2DLayered<float>(tex, x + 0.5f, y + 0.5f, layer);
  }
}

__global__ void SampleCube(cudaTextureObject_t tex, float* out) {
  const float3 dirs[6] = {{1, 0.1f, 0.2f},  {-1, 0.2f, 0.1f}, {0.1f, 1, 0.2f},
                          {0.2f, -1, 0.1f}, {0.1f, 0.2f, 1},  {0.2f, 0.1f, -1}};
  int i = threadIdx.x;
  if (i < 6) out[i] = texCubemap<float>(tex, dirs[i].x, dirs[i].y, dirs[i].z);
}

__global__ void WriteSurface(cudaSurfaceObject_t surf, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) surf2Dwrite(float(y * 1000 + x), surf, x * (int)sizeof(float), y);
}

__global__ void ReadSurface(cudaSurfaceObject_t surf, float* out, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) {
    float v;
    surf2Dread(&v, surf, x * (int)sizeof(float), y);
    out[y * w + x] = v + 0.5f;
  }
}

namespace {

int failures = 0;

void Expect(bool ok, const char* what, int index, double got, double want) {
  if (!ok && failures++ < 20) {
    fprintf(stderr, "%s [%d]: got %.6f, want %.6f\n", what, index, got, want);
  }
}

cudaTextureObject_t MakeTexture(const cudaResourceDesc& res, cudaTextureFilterMode filter,
                                cudaTextureAddressMode address, bool normalized,
                                cudaTextureReadMode read = cudaReadModeElementType) {
  cudaTextureDesc td = {};
  td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = address;
  td.filterMode = filter;
  td.readMode = read;
  td.normalizedCoords = normalized;
  cudaTextureObject_t tex = 0;
  CHECK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
  return tex;
}

cudaResourceDesc ArrayResource(cudaArray_t array) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = array;
  return res;
}

// Samples a 2D float texture at `coords` on the device.
std::vector<float> Sample(cudaTextureObject_t tex, const std::vector<float2>& coords) {
  const int n = static_cast<int>(coords.size());
  float2* d_coords;
  float* d_out;
  CHECK(cudaMalloc(&d_coords, n * sizeof(float2)));
  CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CHECK(cudaMemcpy(d_coords, coords.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
  Sample2D<<<(n + 127) / 128, 128>>>(tex, d_coords, d_out, n);
  CHECK_SYNC();
  std::vector<float> out(n);
  CHECK(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_coords));
  CHECK(cudaFree(d_out));
  return out;
}

}  // namespace

int main() {
  // ---- A 2D float array: copies in every direction ----
  const int w = 16, h = 8;
  std::vector<float> image(w * h);
  for (int i = 0; i < w * h; ++i) image[i] = static_cast<float>((i * 37) % 101) / 100.0f;
  cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
  cudaArray_t array;
  CHECK(cudaMallocArray(&array, &fdesc, w, h));
  {
    cudaChannelFormatDesc got_desc;
    cudaExtent extent;
    unsigned flags = 1;
    CHECK(cudaArrayGetInfo(&got_desc, &extent, &flags, array));
    if (got_desc.x != 32 || got_desc.f != cudaChannelFormatKindFloat || extent.width != w ||
        extent.height != h || extent.depth != 0 || flags != 0) {
      fprintf(stderr, "cudaArrayGetInfo: %d %d %zu %zu %zu %u\n", got_desc.x, got_desc.f,
              extent.width, extent.height, extent.depth, flags);
      return 1;
    }
  }
  CHECK(cudaMemcpy2DToArray(array, 0, 0, image.data(), w * sizeof(float), w * sizeof(float), h,
                            cudaMemcpyHostToDevice));
  std::vector<float> back(w * h, -1.0f);
  CHECK(cudaMemcpy2DFromArray(back.data(), w * sizeof(float), array, 0, 0, w * sizeof(float), h,
                              cudaMemcpyDeviceToHost));
  for (int i = 0; i < w * h; ++i)
    Expect(back[i] == image[i], "array round trip", i, back[i], image[i]);
  // A sub-rectangle at an offset, through device memory and a second array.
  float* d_rows;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&d_rows, &pitch, w * sizeof(float), h));
  CHECK(cudaMemcpy2DFromArray(d_rows, pitch, array, 0, 0, w * sizeof(float), h,
                              cudaMemcpyDeviceToDevice));
  cudaArray_t array2;
  CHECK(cudaMallocArray(&array2, &fdesc, w, h));
  CHECK(cudaMemcpy2DToArray(array2, 0, 0, d_rows, pitch, w * sizeof(float), h,
                            cudaMemcpyDeviceToDevice));
  cudaArray_t array3;
  CHECK(cudaMallocArray(&array3, &fdesc, w, h));
  CHECK(cudaMemcpy2DToArray(array3, 0, 0, std::vector<float>(w * h, 0.0f).data(), w * sizeof(float),
                            w * sizeof(float), h, cudaMemcpyHostToDevice));
  // 5 x 3 texels from (4, 2) of array2 to (8, 4) of array3.
  CHECK(cudaMemcpy2DArrayToArray(array3, 8 * sizeof(float), 4, array2, 4 * sizeof(float), 2,
                                 5 * sizeof(float), 3, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpy2DFromArray(back.data(), w * sizeof(float), array3, 0, 0, w * sizeof(float), h,
                              cudaMemcpyDeviceToHost));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool inside = x >= 8 && x < 13 && y >= 4 && y < 7;
      const float want = inside ? image[(y - 2) * w + (x - 4)] : 0.0f;
      Expect(back[y * w + x] == want, "array to array", y * w + x, back[y * w + x], want);
    }
  }
  // Outside the array: refused, and nothing is copied.
  if (cudaMemcpy2DToArray(array3, 12 * sizeof(float), 0, image.data(), w * sizeof(float),
                          8 * sizeof(float), 1, cudaMemcpyHostToDevice) != cudaErrorInvalidValue) {
    fprintf(stderr, "a copy past the array's end was not refused\n");
    return 1;
  }
  cudaGetLastError();

  // ---- Point sampling at texel centres, unnormalized ----
  cudaTextureObject_t point =
      MakeTexture(ArrayResource(array), cudaFilterModePoint, cudaAddressModeClamp, false);
  {
    std::vector<float2> coords;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) coords.push_back(make_float2(x + 0.5f, y + 0.5f));
    }
    std::vector<float> got = Sample(point, coords);
    for (int i = 0; i < w * h; ++i) Expect(got[i] == image[i], "point", i, got[i], image[i]);
    // Clamped outside the array: the edge texels.
    std::vector<float> edge =
        Sample(point, {make_float2(-3.0f, 0.5f), make_float2(w + 5.0f, h + 5.0f)});
    Expect(edge[0] == image[0], "clamp low", 0, edge[0], image[0]);
    Expect(edge[1] == image[w * h - 1], "clamp high", 1, edge[1], image[w * h - 1]);
  }
  // ---- Bilinear filtering between texel centres ----
  cudaTextureObject_t linear =
      MakeTexture(ArrayResource(array), cudaFilterModeLinear, cudaAddressModeClamp, false);
  {
    std::vector<float2> coords;
    for (int i = 0; i < 64; ++i) {
      coords.push_back(make_float2(1.0f + (i % 8) * 1.7f, 1.0f + (i / 8) * 0.73f));
    }
    std::vector<float> got = Sample(linear, coords);
    for (int i = 0; i < 64; ++i) {
      const float fx = coords[i].x - 0.5f, fy = coords[i].y - 0.5f;
      const int x0 = static_cast<int>(floorf(fx)), y0 = static_cast<int>(floorf(fy));
      const float a = fx - x0, b = fy - y0;
      auto at = [&](int x, int y) {
        x = x < 0 ? 0 : (x >= w ? w - 1 : x);
        y = y < 0 ? 0 : (y >= h ? h - 1 : y);
        return image[y * w + x];
      };
      const float want = (1 - a) * (1 - b) * at(x0, y0) + a * (1 - b) * at(x0 + 1, y0) +
                         (1 - a) * b * at(x0, y0 + 1) + a * b * at(x0 + 1, y0 + 1);
      // The GPU's filter weights have 8 fractional bits.
      Expect(fabsf(got[i] - want) <= 0.01f, "bilinear", i, got[i], want);
    }
  }
  // ---- Normalized coordinates: wrap and border ----
  cudaTextureObject_t wrap =
      MakeTexture(ArrayResource(array), cudaFilterModePoint, cudaAddressModeWrap, true);
  cudaTextureObject_t border =
      MakeTexture(ArrayResource(array), cudaFilterModePoint, cudaAddressModeBorder, true);
  {
    std::vector<float2> coords;
    std::vector<int> texel;
    for (int i = 0; i < 32; ++i) {
      const int x = (i * 5) % w, y = (i * 3) % h, k = (i % 3) - 1;  // k whole turns away
      coords.push_back(make_float2((x + 0.5f) / w + k, (y + 0.5f) / h - k));
      texel.push_back(y * w + x);
    }
    std::vector<float> got = Sample(wrap, coords);
    for (int i = 0; i < 32; ++i) {
      Expect(got[i] == image[texel[i]], "wrap", i, got[i], image[texel[i]]);
    }
    std::vector<float> out = Sample(border, {make_float2(1.5f, 0.5f), make_float2(0.5f, -0.25f),
                                             make_float2((3 + 0.5f) / w, (2 + 0.5f) / h)});
    Expect(out[0] == 0.0f, "border x", 0, out[0], 0.0f);
    Expect(out[1] == 0.0f, "border y", 1, out[1], 0.0f);
    Expect(out[2] == image[2 * w + 3], "border inside", 2, out[2], image[2 * w + 3]);
  }

  // ---- 8-bit channels read as normalized floats ----
  {
    cudaChannelFormatDesc cdesc = cudaCreateChannelDesc<uchar4>();
    cudaArray_t rgba;
    CHECK(cudaMallocArray(&rgba, &cdesc, w, h));
    std::vector<uchar4> pixels(w * h);
    for (int i = 0; i < w * h; ++i) {
      pixels[i] = make_uchar4(i % 256, (i * 7) % 256, 255, 0);
    }
    CHECK(cudaMemcpy2DToArray(rgba, 0, 0, pixels.data(), w * sizeof(uchar4), w * sizeof(uchar4), h,
                              cudaMemcpyHostToDevice));
    cudaTextureObject_t tex = MakeTexture(ArrayResource(rgba), cudaFilterModePoint,
                                          cudaAddressModeClamp, false, cudaReadModeNormalizedFloat);
    float4* d_out;
    CHECK(cudaMalloc(&d_out, w * h * sizeof(float4)));
    Sample2DUchar4<<<h, w>>>(tex, d_out, w, h);
    CHECK_SYNC();
    std::vector<float4> got(w * h);
    CHECK(cudaMemcpy(got.data(), d_out, w * h * sizeof(float4), cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; ++i) {
      Expect(fabsf(got[i].x - pixels[i].x / 255.0f) < 1e-6f, "unorm8 x", i, got[i].x,
             pixels[i].x / 255.0f);
      Expect(fabsf(got[i].y - pixels[i].y / 255.0f) < 1e-6f, "unorm8 y", i, got[i].y,
             pixels[i].y / 255.0f);
      Expect(got[i].z == 1.0f && got[i].w == 0.0f, "unorm8 zw", i, got[i].z, 1.0f);
    }
    CHECK(cudaDestroyTextureObject(tex));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeArray(rgba));
  }

  // ---- tex1Dfetch over linear memory, and a pitched 2D resource ----
  {
    const int n = 1000;
    std::vector<int> values(n);
    for (int i = 0; i < n; ++i) values[i] = i * 3 - 500;
    int *d_in, *d_out;
    CHECK(cudaMalloc(&d_in, n * sizeof(int)));
    CHECK(cudaMalloc(&d_out, n * sizeof(int)));
    CHECK(cudaMemcpy(d_in, values.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = d_in;
    res.res.linear.desc = cudaCreateChannelDesc<int>();
    res.res.linear.sizeInBytes = n * sizeof(int);
    cudaTextureObject_t tex = MakeTexture(res, cudaFilterModePoint, cudaAddressModeClamp, false);
    Fetch1D<<<(n + 255) / 256, 256>>>(tex, d_out, n);
    CHECK_SYNC();
    std::vector<int> got(n);
    CHECK(cudaMemcpy(got.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      Expect(got[i] == values[i] * 2, "tex1Dfetch", i, got[i], values[i] * 2);
    CHECK(cudaDestroyTextureObject(tex));

    CHECK(cudaMemcpy2D(d_rows, pitch, image.data(), w * sizeof(float), w * sizeof(float), h,
                       cudaMemcpyHostToDevice));
    cudaResourceDesc pres = {};
    pres.resType = cudaResourceTypePitch2D;
    pres.res.pitch2D.devPtr = d_rows;
    pres.res.pitch2D.desc = fdesc;
    pres.res.pitch2D.width = w;
    pres.res.pitch2D.height = h;
    pres.res.pitch2D.pitchInBytes = pitch;
    cudaTextureObject_t ptex = MakeTexture(pres, cudaFilterModePoint, cudaAddressModeClamp, false);
    std::vector<float2> coords;
    for (int i = 0; i < w * h; ++i) coords.push_back(make_float2(i % w + 0.5f, i / w + 0.5f));
    std::vector<float> pgot = Sample(ptex, coords);
    for (int i = 0; i < w * h; ++i) Expect(pgot[i] == image[i], "pitch2D", i, pgot[i], image[i]);
    CHECK(cudaDestroyTextureObject(ptex));
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
  }

  // ---- A 3D array and a layered array, filled with cudaMemcpy3D ----
  {
    const int W = 8, H = 4, D = 3;
    std::vector<float> volume(W * H * D);
    for (int i = 0; i < W * H * D; ++i) volume[i] = i * 0.25f;
    for (int layered = 0; layered < 2; ++layered) {
      cudaArray_t vol;
      CHECK(cudaMalloc3DArray(&vol, &fdesc, make_cudaExtent(W, H, D),
                              layered ? cudaArrayLayered : 0));
      cudaMemcpy3DParms p = {};
      p.srcPtr = make_cudaPitchedPtr(volume.data(), W * sizeof(float), W, H);
      p.dstArray = vol;
      p.extent = make_cudaExtent(W, H, D);
      p.kind = cudaMemcpyHostToDevice;
      CHECK(cudaMemcpy3D(&p));
      cudaTextureObject_t tex =
          MakeTexture(ArrayResource(vol), cudaFilterModePoint, cudaAddressModeClamp, false);
      float* d_out;
      CHECK(cudaMalloc(&d_out, W * H * D * sizeof(float)));
      if (layered) {
        SampleLayered<<<dim3(H, D), W>>>(tex, d_out, W, H, D);
      } else {
        Sample3D<<<dim3(H, D), W>>>(tex, d_out, W, H, D);
      }
      CHECK_SYNC();
      std::vector<float> got(W * H * D);
      CHECK(cudaMemcpy(got.data(), d_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
      for (int i = 0; i < W * H * D; ++i) {
        Expect(got[i] == volume[i], layered ? "layered" : "3D", i, got[i], volume[i]);
      }
      // Slice 1 back to the host at an offset box: x 2..5, y 1..3.
      std::vector<float> box(4 * 3, -1.0f);
      cudaMemcpy3DParms q = {};
      q.srcArray = vol;
      q.srcPos = make_cudaPos(2, 1, 1);  // x in elements: the source is an array
      q.dstPtr = make_cudaPitchedPtr(box.data(), 4 * sizeof(float), 4, 3);
      q.extent = make_cudaExtent(4, 3, 1);
      q.kind = cudaMemcpyDeviceToHost;
      CHECK(cudaMemcpy3D(&q));
      for (int y = 0; y < 3; ++y) {
        for (int x = 0; x < 4; ++x) {
          const float want = volume[(1 * H + y + 1) * W + x + 2];
          Expect(box[y * 4 + x] == want, "3D box", y * 4 + x, box[y * 4 + x], want);
        }
      }
      CHECK(cudaDestroyTextureObject(tex));
      CHECK(cudaFree(d_out));
      CHECK(cudaFreeArray(vol));
    }
  }

  // ---- A cubemap: each face holds its index; directions pick the faces ----
  {
    const int side = 4;
    cudaArray_t cube;
    CHECK(cudaMalloc3DArray(&cube, &fdesc, make_cudaExtent(side, side, 6), cudaArrayCubemap));
    std::vector<float> faces(side * side * 6);
    for (int i = 0; i < side * side * 6; ++i) faces[i] = static_cast<float>(i / (side * side));
    cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(faces.data(), side * sizeof(float), side, side);
    p.dstArray = cube;
    p.extent = make_cudaExtent(side, side, 6);
    p.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&p));
    cudaTextureObject_t tex =
        MakeTexture(ArrayResource(cube), cudaFilterModePoint, cudaAddressModeClamp, true);
    float* d_out;
    CHECK(cudaMalloc(&d_out, 6 * sizeof(float)));
    SampleCube<<<1, 32>>>(tex, d_out);
    CHECK_SYNC();
    float got[6];
    CHECK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
    for (int f = 0; f < 6; ++f) Expect(got[f] == f, "cubemap face", f, got[f], f);
    CHECK(cudaDestroyTextureObject(tex));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeArray(cube));
  }

  // ---- Surfaces: one kernel writes, another reads, the host checks both ----
  {
    cudaArray_t surf_array;
    CHECK(cudaMallocArray(&surf_array, &fdesc, w, h, cudaArraySurfaceLoadStore));
    cudaSurfaceObject_t surf;
    cudaResourceDesc res = ArrayResource(surf_array);
    CHECK(cudaCreateSurfaceObject(&surf, &res));
    WriteSurface<<<h, w>>>(surf, w, h);
    CHECK_SYNC();
    std::vector<float> written(w * h);
    CHECK(cudaMemcpy2DFromArray(written.data(), w * sizeof(float), surf_array, 0, 0,
                                w * sizeof(float), h, cudaMemcpyDeviceToHost));
    float* d_out;
    CHECK(cudaMalloc(&d_out, w * h * sizeof(float)));
    ReadSurface<<<h, w>>>(surf, d_out, w, h);
    CHECK_SYNC();
    std::vector<float> read(w * h);
    CHECK(cudaMemcpy(read.data(), d_out, w * h * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; ++i) {
      const float want = (i / w) * 1000.0f + i % w;
      Expect(written[i] == want, "surface write", i, written[i], want);
      Expect(read[i] == want + 0.5f, "surface read", i, read[i], want + 0.5f);
    }
    CHECK(cudaDestroySurfaceObject(surf));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeArray(surf_array));
  }

  CHECK(cudaDestroyTextureObject(point));
  CHECK(cudaDestroyTextureObject(linear));
  CHECK(cudaDestroyTextureObject(wrap));
  CHECK(cudaDestroyTextureObject(border));
  CHECK(cudaFreeArray(array));
  CHECK(cudaFreeArray(array2));
  CHECK(cudaFreeArray(array3));
  CHECK(cudaFree(d_rows));
  if (failures != 0) {
    fprintf(stderr, "%d mismatches\n", failures);
    return 1;
  }
  printf("textures: all results match\n");
  return 0;
}
