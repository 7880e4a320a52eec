// Mipmapped arrays and level-of-detail sampling: a 64 x 32 float mipmapped array of 4 levels,
// each level filled through cudaGetMipmappedArrayLevel with its own value, read by a texture
// object with tex2DLod at whole and fractional levels (point and linear filtering between
// levels, whose 8-bit fraction weights are exact for the fractions used), the bias and the level
// clamps, and tex2D (level 0); a level's extent is its parent's halved; results compared
// exactly with what the levels hold.
#include <vector>

#include "rt_check.h"

namespace {

constexpr int kWidth = 64, kHeight = 32, kLevels = 4;

float LevelValue(int level) { return 10.0f * (level + 1); }

__global__ void SampleLod(cudaTextureObject_t tex, const float* lods, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2DLod<float>(tex, 0.3f, 0.7f, lods[i]);
}

__global__ void SamplePlain(cudaTextureObject_t tex, float* out) {
  out[0] = tex2D<float>(tex, 0.5f, 0.5f);
}

cudaTextureObject_t MakeTexture(cudaMipmappedArray_t mip, cudaTextureFilterMode mip_filter,
                                float bias, float min_clamp, float max_clamp) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeMipmappedArray;
  res.res.mipmap.mipmap = mip;
  cudaTextureDesc td = {};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  td.normalizedCoords = 1;
  td.mipmapFilterMode = mip_filter;
  td.mipmapLevelBias = bias;
  td.minMipmapLevelClamp = min_clamp;
  td.maxMipmapLevelClamp = max_clamp;
  cudaTextureObject_t tex = 0;
  CHECK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
  return tex;
}

std::vector<float> Sample(cudaTextureObject_t tex, const std::vector<float>& lods) {
  const int n = static_cast<int>(lods.size());
  float *d_lods, *d_out;
  CHECK(cudaMalloc(&d_lods, n * sizeof(float)));
  CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CHECK(cudaMemcpy(d_lods, lods.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  SampleLod<<<1, 64>>>(tex, d_lods, d_out, n);
  CHECK_SYNC();
  std::vector<float> out(n);
  CHECK(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_lods));
  CHECK(cudaFree(d_out));
  return out;
}

void Expect(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT(got[i] == want[i], "%s: sample %zu is %g, expected %g", what, i, got[i], want[i]);
  }
}

}  // namespace

int main() {
  cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
  cudaMipmappedArray_t mip;
  CHECK(cudaMallocMipmappedArray(&mip, &fmt, make_cudaExtent(kWidth, kHeight, 0), kLevels));
  for (int l = 0; l < kLevels; ++l) {
    cudaArray_t level;
    CHECK(cudaGetMipmappedArrayLevel(&level, mip, l));
    cudaChannelFormatDesc got_fmt;
    cudaExtent extent;
    unsigned flags = 0;
    CHECK(cudaArrayGetInfo(&got_fmt, &extent, &flags, level));
    EXPECT(extent.width == static_cast<size_t>(kWidth >> l) &&
               extent.height == static_cast<size_t>(kHeight >> l),
           "level %d is %zu x %zu", l, extent.width, extent.height);
    std::vector<float> fill((kWidth >> l) * (kHeight >> l), LevelValue(l));
    CHECK(cudaMemcpy2DToArray(level, 0, 0, fill.data(), (kWidth >> l) * sizeof(float),
                              (kWidth >> l) * sizeof(float), kHeight >> l, cudaMemcpyHostToDevice));
  }
  cudaArray_t past;
  EXPECT_ERROR(cudaGetMipmappedArrayLevel(&past, mip, kLevels), cudaErrorInvalidValue);
  (void)cudaGetLastError();

  // Point filtering between levels: the nearest level.
  cudaTextureObject_t point = MakeTexture(mip, cudaFilterModePoint, 0.0f, 0.0f, kLevels - 1);
  Expect(Sample(point, {0.0f, 1.0f, 2.0f, 3.0f, 0.4f, 1.6f, 9.0f, -2.0f}),
         {10, 20, 30, 40, 10, 30, 40, 10}, "point");
  // Linear filtering between levels: 8-bit fractions, exact for these.
  cudaTextureObject_t linear = MakeTexture(mip, cudaFilterModeLinear, 0.0f, 0.0f, kLevels - 1);
  Expect(Sample(linear, {0.5f, 1.25f, 2.75f, 0.0f, 3.0f}), {15, 22.5f, 37.5f, 10, 40}, "linear");
  // Bias and clamps.
  cudaTextureObject_t biased = MakeTexture(mip, cudaFilterModePoint, 1.0f, 1.0f, 2.0f);
  Expect(Sample(biased, {0.0f, 1.0f, 3.0f, -3.0f}), {20, 30, 30, 20}, "bias and clamps");
  // tex2D reads level 0.
  float* d_out;
  CHECK(cudaMalloc(&d_out, sizeof(float)));
  float plain = 0;
  SamplePlain<<<1, 1>>>(point, d_out);
  CHECK_SYNC();
  CHECK(cudaMemcpy(&plain, d_out, sizeof plain, cudaMemcpyDeviceToHost));
  EXPECT(plain == 10, "tex2D: %g", plain);

  CHECK(cudaDestroyTextureObject(point));
  CHECK(cudaDestroyTextureObject(linear));
  CHECK(cudaDestroyTextureObject(biased));
  CHECK(cudaFree(d_out));
  CHECK(cudaFreeMipmappedArray(mip));
  printf("rt_mipmap: OK\n");
  return 0;
}
