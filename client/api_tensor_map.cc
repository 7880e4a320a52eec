// Tensor maps: cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col and cuTensorMapEncodeIm2colWide
// are encoded by the server of the current context (the map is the backend's own opaque value,
// which kernels then take as a parameter or read from memory). cuTensorMapReplaceAddress
// re-encodes, with the new address, a map this process had encoded: the client remembers the
// arguments behind each map it handed out, so bytes a program made up never reach the backend.
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "client/impl.h"

namespace calls = rgpu::calls;
using rgpu::client::RequireContext;
using rgpu::client::Server;

namespace {

constexpr size_t kWords = sizeof(CUtensorMap) / sizeof(uint64_t);
constexpr uint32_t kMaxRank = 5;

struct MapBytes {
  uint64_t words[kWords];
  bool operator==(const MapBytes& o) const { return memcmp(words, o.words, sizeof words) == 0; }
};
struct MapBytesHash {
  size_t operator()(const MapBytes& m) const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t w : m.words) h = (h ^ w) * 0x100000001b3ull;
    return static_cast<size_t>(h);
  }
};

// The encode arguments of the maps this process was given, newest last; the oldest are
// forgotten past kMaxRemembered (replacing the address of a forgotten map is INVALID_VALUE).
class MadeMaps {
 public:
  static MadeMaps& Get() {
    static MadeMaps* maps = new MadeMaps;  // never destroyed: used until the process ends
    return *maps;
  }
  void Remember(const MapBytes& map, const calls::TensorMapEncode::Args& args) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (args_.insert_or_assign(map, args).second) order_.push_back(map);
    while (order_.size() > kMaxRemembered) {
      args_.erase(order_.front());
      order_.pop_front();
    }
  }
  bool Find(const MapBytes& map, calls::TensorMapEncode::Args* args) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = args_.find(map);
    if (it == args_.end()) return false;
    *args = it->second;
    return true;
  }

 private:
  static constexpr size_t kMaxRemembered = 16384;
  mutable std::mutex mutex_;
  std::unordered_map<MapBytes, calls::TensorMapEncode::Args, MapBytesHash>
      args_;                    // GUARDED_BY(mutex_)
  std::deque<MapBytes> order_;  // GUARDED_BY(mutex_)
};

// Encodes on the current context's server and fills `out`.
CUresult Encode(const calls::TensorMapEncode::Args& args, CUtensorMap* out) {
  if (out == nullptr || reinterpret_cast<uintptr_t>(out) % 64 != 0 || args.rank == 0 ||
      args.rank > kMaxRank) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  calls::TensorMapEncode::Results got;
  r = Server().Call<calls::TensorMapEncode>(ctx->remote, args, &got);
  if (r != CUDA_SUCCESS) return r;
  if (got.words.size() != kWords) return CUDA_ERROR_UNKNOWN;
  MapBytes map;
  memcpy(map.words, got.words.data(), sizeof map.words);
  memcpy(out, map.words, sizeof map.words);
  MadeMaps::Get().Remember(map, args);
  return CUDA_SUCCESS;
}

// The arguments every encoder shares; false when an array the rank needs is missing.
bool Common(uint32_t mode, CUtensorMapDataType type, cuuint32_t rank, void* address,
            const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* element_strides,
            CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
            CUtensorMapFloatOOBfill oob, calls::TensorMapEncode::Args* a) {
  if (rank == 0 || rank > kMaxRank || dims == nullptr || element_strides == nullptr ||
      (rank > 1 && strides == nullptr)) {
    return false;
  }
  *a = {};
  a->mode = mode;
  a->data_type = static_cast<uint32_t>(type);
  a->rank = rank;
  a->address = reinterpret_cast<uint64_t>(address);
  uint64_t* dim[kMaxRank] = {&a->dim0, &a->dim1, &a->dim2, &a->dim3, &a->dim4};
  uint64_t* stride[kMaxRank - 1] = {&a->stride1, &a->stride2, &a->stride3, &a->stride4};
  uint32_t* es[kMaxRank] = {&a->element_stride0, &a->element_stride1, &a->element_stride2,
                            &a->element_stride3, &a->element_stride4};
  for (uint32_t i = 0; i < rank; ++i) {
    *dim[i] = dims[i];
    *es[i] = element_strides[i];
    if (i > 0) *stride[i - 1] = strides[i - 1];
  }
  a->interleave = static_cast<uint32_t>(interleave);
  a->swizzle = static_cast<uint32_t>(swizzle);
  a->l2_promotion = static_cast<uint32_t>(l2);
  a->oob_fill = static_cast<uint32_t>(oob);
  return true;
}

}  // namespace

RGPU_IMPL(cuTensorMapEncodeTiled)
(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
 void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
 const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  calls::TensorMapEncode::Args a;
  if (boxDim == nullptr ||
      !Common(0, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
              elementStrides, interleave, swizzle, l2Promotion, oobFill, &a)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint32_t* box[kMaxRank] = {&a.box0, &a.box1, &a.box2, &a.box3, &a.box4};
  for (uint32_t i = 0; i < tensorRank; ++i) *box[i] = boxDim[i];
  return Encode(a, tensorMap);
}

RGPU_IMPL(cuTensorMapEncodeIm2col)
(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
 void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
 const int* pixelBoxLowerCorner, const int* pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
 cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  calls::TensorMapEncode::Args a;
  // im2col maps have 3 to 5 dimensions: rank - 2 corner offsets each side.
  if (tensorRank < 3 || pixelBoxLowerCorner == nullptr || pixelBoxUpperCorner == nullptr ||
      !Common(1, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
              elementStrides, interleave, swizzle, l2Promotion, oobFill, &a)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int32_t* lower[kMaxRank - 2] = {&a.lower0, &a.lower1, &a.lower2};
  int32_t* upper[kMaxRank - 2] = {&a.upper0, &a.upper1, &a.upper2};
  for (uint32_t i = 0; i + 2 < tensorRank; ++i) {
    *lower[i] = pixelBoxLowerCorner[i];
    *upper[i] = pixelBoxUpperCorner[i];
  }
  a.channels = channelsPerPixel;
  a.pixels = pixelsPerColumn;
  return Encode(a, tensorMap);
}

RGPU_IMPL(cuTensorMapEncodeIm2colWide)
(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
 void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
 int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
 cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
 CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
 CUtensorMapFloatOOBfill oobFill) {
  calls::TensorMapEncode::Args a;
  if (tensorRank < 3 ||
      !Common(2, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
              elementStrides, interleave, swizzle, l2Promotion, oobFill, &a)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  a.lower0 = pixelBoxLowerCornerWidth;
  a.upper0 = pixelBoxUpperCornerWidth;
  a.channels = channelsPerPixel;
  a.pixels = pixelsPerColumn;
  a.wide_mode = static_cast<uint32_t>(mode);
  return Encode(a, tensorMap);
}

RGPU_IMPL(cuTensorMapReplaceAddress)(CUtensorMap* tensorMap, void* globalAddress) {
  if (tensorMap == nullptr || reinterpret_cast<uintptr_t>(tensorMap) % 64 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  MapBytes map;
  memcpy(map.words, tensorMap, sizeof map.words);
  calls::TensorMapEncode::Args a;
  if (!MadeMaps::Get().Find(map, &a)) return CUDA_ERROR_INVALID_VALUE;
  a.address = reinterpret_cast<uint64_t>(globalAddress);
  return Encode(a, tensorMap);
}
