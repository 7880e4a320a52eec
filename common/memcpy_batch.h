// Batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync; the v1 API of CUDA 12.8 with its
// failure index and the v2 API of CUDA 13) in one shape, shared by the client and the software
// GPU, which must agree on what a batch means. A batch is checked whole here, before any copy of
// it is issued, so a refused batch copies nothing. Header-only; the including target provides
// cuda.h.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/array_format.h"

namespace rgpu {

// The index CUDA 12.8's failIdx reports for an error that pertains to no copy of the batch.
inline constexpr size_t kNoFailingCopy = SIZE_MAX;

// One copy of a cuMemcpyBatchAsync: `bytes` from `src` to `dst`, both unified addresses.
struct BatchCopy {
  CUdeviceptr dst = 0;
  CUdeviceptr src = 0;
  size_t bytes = 0;
  CUmemcpySrcAccessOrder order = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
};

// Makes room for `n` elements in `v`; false when they cannot be held (a count no program could
// mean), so that the caller answers CUDA_ERROR_OUT_OF_MEMORY and no exception leaves the library.
template <typename T>
bool Reserve(std::vector<T>* v, size_t n) {
  if (n > v->max_size()) return false;
  try {
    v->reserve(n);
  } catch (...) {
    return false;
  }
  return true;
}

// Checks one set of a batch's attributes: a source access order of STREAM, DURING_API_CALL or
// ANY, and no flags but CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE (a hint). The location hints
// apply to memory rgpu does not have (concurrently accessed managed memory, the host's pageable
// memory seen by the device) and are not read.
inline CUresult CheckMemcpyAttributes(CUmemcpySrcAccessOrder order, unsigned flags) {
  if (order != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
      order != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
      order != CU_MEMCPY_SRC_ACCESS_ORDER_ANY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((flags & ~static_cast<unsigned>(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The copies of a cuMemcpyBatchAsync, each with the attributes that apply to it, in `copies`.
// CUDA_ERROR_INVALID_VALUE for: no copies, a missing array, no attributes or more of them than
// copies, attribute indices that do not start at 0, do not increase or reach past the last copy,
// and attributes CheckMemcpyAttributes refuses. `*fail_index` (when not null) is the copy whose
// attributes were refused, else kNoFailingCopy. Whose memory each copy names is the caller's
// to check. CUDA_ERROR_OUT_OF_MEMORY when the copies cannot be held.
inline CUresult DecodeMemcpyBatch(const CUdeviceptr* dsts, const CUdeviceptr* srcs,
                                  const size_t* sizes, size_t count,
                                  const CUmemcpyAttributes* attrs, const size_t* attrs_idxs,
                                  size_t num_attrs, std::vector<BatchCopy>* copies,
                                  size_t* fail_index) {
  if (fail_index != nullptr) *fail_index = kNoFailingCopy;
  if (count == 0 || dsts == nullptr || srcs == nullptr || sizes == nullptr || attrs == nullptr ||
      attrs_idxs == nullptr || num_attrs == 0 || num_attrs > count || attrs_idxs[0] != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t k = 1; k < num_attrs; ++k) {
    if (attrs_idxs[k] <= attrs_idxs[k - 1] || attrs_idxs[k] >= count) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (!Reserve(copies, count)) return CUDA_ERROR_OUT_OF_MEMORY;
  copies->assign(count, BatchCopy());
  for (size_t k = 0; k < num_attrs; ++k) {
    const size_t first = attrs_idxs[k];
    const size_t end = k + 1 < num_attrs ? attrs_idxs[k + 1] : count;
    if (CUresult r = CheckMemcpyAttributes(attrs[k].srcAccessOrder, attrs[k].flags);
        r != CUDA_SUCCESS) {
      if (fail_index != nullptr) *fail_index = first;
      return r;
    }
    for (size_t i = first; i < end; ++i) {
      (*copies)[i] = {dsts[i], srcs[i], sizes[i], attrs[k].srcAccessOrder};
    }
  }
  return CUDA_SUCCESS;
}

// One copy of a cuMemcpy3DBatchAsync as the CUDA_MEMCPY3D that does it: a pointer operand is a
// unified address (CU_MEMORYTYPE_UNIFIED), an array operand its array at its offset.
struct Batch3DCopy {
  CUDA_MEMCPY3D copy = {};
  CUmemcpySrcAccessOrder order = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
};

// The descriptor of `array` in `*descriptor`, or an error for no live array of the caller's.
using ArrayDescriptorOf =
    std::function<CUresult(CUarray array, CUDA_ARRAY3D_DESCRIPTOR* descriptor)>;

// The bytes of one element of an array described by `descriptor` (0 for formats rgpu does not
// support).
inline size_t ArrayDescriptorElementBytes(const CUDA_ARRAY3D_DESCRIPTOR& descriptor) {
  return static_cast<size_t>(ArrayFormatChannelBytes(descriptor.Format)) * descriptor.NumChannels;
}

// True when the box of `extent` elements at `offset` lies inside the array `descriptor`
// describes (a height or depth of 0 is one row or one layer).
inline bool ArrayBoxInside(const CUDA_ARRAY3D_DESCRIPTOR& descriptor, const CUoffset3D& offset,
                           const CUextent3D& extent) {
  const size_t height = descriptor.Height != 0 ? descriptor.Height : 1;
  const size_t depth = descriptor.Depth != 0 ? descriptor.Depth : 1;
  return offset.x <= descriptor.Width && extent.width <= descriptor.Width - offset.x &&
         offset.y <= height && extent.height <= height - offset.y && offset.z <= depth &&
         extent.depth <= depth - offset.z;
}

// The copies of a cuMemcpy3DBatchAsync in `copies`. CUDA_ERROR_INVALID_VALUE for: no operations
// or none given, batch flags, an extent with a zero side, an operand of no known type, an array
// the lookup does not find, an array box not inside its array, a pointer operand whose row
// length or layer height (when not 0, which means the extent's) is below the extent's, two
// arrays whose elements differ in size, attributes CheckMemcpyAttributes refuses, and a box
// whose byte offsets overflow. Extents and offsets count elements: one byte between pointers,
// the array's element otherwise. `*fail_index` (when not null) is the failing operation, else
// kNoFailingCopy. CUDA_ERROR_OUT_OF_MEMORY when the copies cannot be held.
inline CUresult DecodeMemcpy3DBatch(size_t num_ops, const CUDA_MEMCPY3D_BATCH_OP* ops,
                                    unsigned long long flags,
                                    const ArrayDescriptorOf& descriptor_of,
                                    std::vector<Batch3DCopy>* copies, size_t* fail_index) {
  if (fail_index != nullptr) *fail_index = kNoFailingCopy;
  if (num_ops == 0 || ops == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Reserve(copies, num_ops)) return CUDA_ERROR_OUT_OF_MEMORY;
  copies->assign(num_ops, Batch3DCopy());
  for (size_t i = 0; i < num_ops; ++i) {
    if (fail_index != nullptr) *fail_index = i;
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    if (CUresult r = CheckMemcpyAttributes(op.srcAccessOrder, op.flags); r != CUDA_SUCCESS) {
      return r;
    }
    const CUextent3D& e = op.extent;
    if (e.width == 0 || e.height == 0 || e.depth == 0) return CUDA_ERROR_INVALID_VALUE;
    // The element: a byte between pointers, else the array's (both arrays' when two, which
    // must agree); an array's box lies inside it.
    size_t src_element = 0, dst_element = 0;  // 0 for a pointer
    for (const CUmemcpy3DOperand* side : {&op.src, &op.dst}) {
      if (side->type == CU_MEMCPY_OPERAND_TYPE_POINTER) continue;
      if (side->type != CU_MEMCPY_OPERAND_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
      CUDA_ARRAY3D_DESCRIPTOR descriptor = {};
      if (descriptor_of(side->op.array.array, &descriptor) != CUDA_SUCCESS ||
          !ArrayBoxInside(descriptor, side->op.array.offset, e)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      const size_t bytes = ArrayDescriptorElementBytes(descriptor);
      if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
      (side == &op.src ? src_element : dst_element) = bytes;
    }
    if (src_element != 0 && dst_element != 0 && src_element != dst_element) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const size_t element = std::max({src_element, dst_element, size_t{1}});
    size_t width_bytes;
    if (__builtin_mul_overflow(e.width, element, &width_bytes)) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D& c = (*copies)[i].copy;
    c = {};
    // Fills one side of `c` from `side`; false when its numbers cannot be a copy.
    auto fill = [&](const CUmemcpy3DOperand& side, bool source) {
      size_t x_bytes = 0, y = 0, z = 0, pitch = 0, layer_height = 0;
      CUmemorytype type;
      CUdeviceptr device = 0;
      CUarray array = nullptr;
      if (side.type == CU_MEMCPY_OPERAND_TYPE_POINTER) {
        const size_t row = side.op.ptr.rowLength, layer = side.op.ptr.layerHeight;
        if ((row != 0 && row < e.width) || (layer != 0 && layer < e.height)) return false;
        if (__builtin_mul_overflow(row != 0 ? row : e.width, element, &pitch)) return false;
        layer_height = layer != 0 ? layer : e.height;
        type = CU_MEMORYTYPE_UNIFIED;
        device = side.op.ptr.ptr;
      } else {
        const CUoffset3D& o = side.op.array.offset;
        if (__builtin_mul_overflow(o.x, element, &x_bytes)) return false;
        y = o.y;
        z = o.z;
        type = CU_MEMORYTYPE_ARRAY;
        array = side.op.array.array;
      }
      if (source) {
        c.srcXInBytes = x_bytes, c.srcY = y, c.srcZ = z, c.srcMemoryType = type;
        c.srcDevice = device, c.srcArray = array, c.srcPitch = pitch, c.srcHeight = layer_height;
      } else {
        c.dstXInBytes = x_bytes, c.dstY = y, c.dstZ = z, c.dstMemoryType = type;
        c.dstDevice = device, c.dstArray = array, c.dstPitch = pitch, c.dstHeight = layer_height;
      }
      return true;
    };
    if (!fill(op.src, true) || !fill(op.dst, false)) return CUDA_ERROR_INVALID_VALUE;
    c.WidthInBytes = width_bytes;
    c.Height = e.height;
    c.Depth = e.depth;
    (*copies)[i].order = op.srcAccessOrder;
  }
  if (fail_index != nullptr) *fail_index = kNoFailingCopy;
  return CUDA_SUCCESS;
}

// The bytes one pointer side of a decoded 3D copy spans, from its first byte to its last (its
// source side when `source`), in `*span`; false when that overflows.
inline bool PointerSideSpan(const CUDA_MEMCPY3D& c, bool source, size_t* span) {
  const size_t pitch = source ? c.srcPitch : c.dstPitch;
  const size_t layer_height = source ? c.srcHeight : c.dstHeight;
  size_t layer, rows, last_layer, last_row;
  return !__builtin_mul_overflow(pitch, layer_height, &layer) &&
         !__builtin_mul_overflow(layer, c.Depth - 1, &last_layer) &&
         !__builtin_mul_overflow(pitch, c.Height - 1, &rows) &&
         !__builtin_add_overflow(last_layer, rows, &last_row) &&
         !__builtin_add_overflow(last_row, c.WidthInBytes, span);
}

}  // namespace rgpu
