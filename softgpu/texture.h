// Texture and surface objects: what a CUtexObject/CUsurfObject names (a resource plus sampling
// state), the process-wide table kernels look them up in, and the sampling and surface
// addressing arithmetic of the texture unit. Nothing here touches memory on its own: callers
// pass the host bytes backing the resource, which they resolved through the launching context's
// address space, so an object can only ever read its own context's memory.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "softgpu/array.h"
#include "softgpu/program.h"

namespace softgpu {

// Where and how the texels of a resource lie in device memory.
struct TexelStorage {
  uint64_t address = 0;  // device address of texel (0, 0, 0)
  uint64_t bytes = 0;    // extent that must stay allocated
  CUarray_format format = CU_AD_FORMAT_FLOAT;
  uint32_t channels = 1;
  uint32_t element_bytes = 4;
  uint64_t width = 1, height = 1, depth = 1;  // texels; depth counts slices (3D, layers, faces)
  uint64_t row_pitch = 0, slice_pitch = 0;
  bool linear = false;  // CU_RESOURCE_TYPE_LINEAR (tex1Dfetch)
  bool layered = false;
  bool cubemap = false;
};

// One mipmap level as a texture sees it (also level 0 of a resource without levels).
struct TexLevel {
  uint64_t offset = 0;  // bytes from TexelStorage::address to texel (0, 0, 0) of the level
  uint64_t width = 1, height = 1, depth = 1;  // depth counts slices, as in TexelStorage
  uint64_t row_pitch = 0, slice_pitch = 0;
};

struct TextureObject {
  uint64_t handle = 0;  // the CUtexObject / CUsurfObject value
  bool surface = false;
  const void* owner = nullptr;  // the Context that created it
  CUDA_RESOURCE_DESC resource{};
  CUDA_TEXTURE_DESC texture{};     // textures only
  CUDA_RESOURCE_VIEW_DESC view{};  // textures only
  bool has_view = false;
  std::shared_ptr<const Array> array;  // array resources (the descriptor; storage via `storage`)
  // Mipmapped-array resources: the array, and the levels the object sees (the resource view's
  // first to last, level 0 first); `storage` then spans every level and its geometry is that
  // of levels[0]. Empty for other resources.
  std::shared_ptr<const MipmappedArray> mipmap;
  std::vector<TexLevel> levels;
  TexelStorage storage;
  // Sampling state derived from `texture` and the format.
  bool normalized_coords = false;
  bool linear_filter = false;
  bool integer_result = false;  // READ_AS_INTEGER or a 32-bit integer format
  uint8_t address_mode[3] = {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP,
                             CU_TR_ADDRESS_MODE_CLAMP};
  // Level of detail (mipmapped textures): mipmapFilterMode, mipmapLevelBias and the clamps.
  bool linear_mip_filter = false;
  float lod_bias = 0, min_lod_clamp = 0, max_lod_clamp = 0;
};

// Gives `object` a fresh handle (nonzero, never reused in the process), stores it in
// object->handle and makes it findable. Thread-safe.
uint64_t RegisterTextureObject(const std::shared_ptr<TextureObject>& object);
// The live object with this handle, or null. Thread-safe.
std::shared_ptr<const TextureObject> FindTextureObject(uint64_t handle);
// Unregisters and returns the object (null if there is none).
std::shared_ptr<const TextureObject> RemoveTextureObject(uint64_t handle);
// Unregisters every object of `owner` (context teardown).
void RemoveTextureObjectsOf(const void* owner);

// One texture lookup's coordinates, as the instruction supplies them.
struct TexCoords {
  float f[3] = {0, 0, 0};    // x, y, z (cubemaps: the direction)
  int32_t i[3] = {0, 0, 0};  // integer coordinates (TextureSite::integer_coords)
  int32_t layer = 0;
  TexLodMode lod_mode = TexLodMode::kBase;
  float lod = 0;                  // tex.level
  float grad[2][3] = {{0}, {0}};  // tex.grad: dPdx, dPdy
};

// tex, tex.level, tex.grad: four 32-bit result words (floats, or integers for an
// integer-returning texture). `data` backs object.storage. The level of detail of a mipmapped
// texture is
//   base (plain tex): 0; level: the lod operand; grad: log2(max(|dPdx * size|, |dPdy * size|))
//   with size the extent of the texture's level 0 (per dimension; cubemaps: the derivatives of
//   the face coordinates, as OpenGL computes them) and |v| the Euclidean length,
// then plus mipmapLevelBias, clamped to [minMipmapLevelClamp, maxMipmapLevelClamp] and to the
// levels there are. POINT mipmap filtering takes the nearest level (halves go down:
// ceil(lod + 0.5) - 1, OpenGL's rule); LINEAR blends the two levels around the LOD with its
// fraction quantized to 8 bits, as between texels. Resources without levels read level 0.
void SampleTexture(const TextureObject& object, const uint8_t* data, TexGeometry geometry,
                   bool integer_coords, const TexCoords& c, uint32_t out[4]);
// tld4: component `component` of the 2x2 footprint bilinear filtering would use at level 0, in
// the order (i0, j1), (i1, j1), (i1, j0), (i0, j0).
void GatherTexture(const TextureObject& object, const uint8_t* data, TexGeometry geometry,
                   const TexCoords& c, uint32_t component, uint32_t out[4]);

enum class SurfaceAccess { kOk, kZero, kOutOfRange, kMisaligned };
// Byte offset, in object.storage, of a surface access of `bytes` bytes at byte x, row y and
// slice `slice`, applying `clamp` to out-of-range coordinates. kZero: a load reads zeros and a
// store does nothing; kOutOfRange/kMisaligned: the access faults.
SurfaceAccess SurfaceOffset(const TextureObject& object, int64_t x_bytes, int64_t y, int64_t slice,
                            uint32_t bytes, SurfaceClamp clamp, uint64_t* offset);

// Converts four 32-bit words (floats for float/half formats, integers otherwise) to one element
// of the object's format (sust.p) and back (suld.p is not emitted by nvcc).
void PackFormatted(const TextureObject& object, const uint32_t in[4], uint8_t* element);

// txq/suq value of `query` (texels for widths) at mipmap level `level` (txq.level: widths, height
// and depth of that level, 0 past the last level).
uint32_t QueryTexture(const TextureObject& object, TexQuery query, int32_t level = 0);

}  // namespace softgpu
