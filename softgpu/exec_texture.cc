// Texture and surface instructions: each lane looks its object up in the launching context
// (a block caches the last two), then samples or addresses it with texture.h's arithmetic.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"
#include "softgpu/texture.h"

namespace softgpu {
namespace {

const TextureSite& Site(const Warp& w, const Insn& in) {
  return w.block->program->texture_sites[in.aux];
}

void Fail(Warp& w, uint32_t lane, const char* what, bool surface, uint64_t handle,
          FaultKind kind = FaultKind::kIllegalAddress) {
  uint32_t tid[3];
  w.Tid(lane, tid);
  const Block& b = *w.block;
  char msg[320];
  snprintf(msg, sizeof msg, "%s %s object %" PRIu64 " by block (%u,%u,%u) thread (%u,%u,%u)", what,
           surface ? "surface" : "texture", handle, b.ctaid[0], b.ctaid[1], b.ctaid[2], tid[0],
           tid[1], tid[2]);
  w.SetFault(kind, msg);
}

// The object `handle` names, checked to be a live texture (or surface) object of the launching
// context whose storage is still allocated; null after recording a fault.
const BoundTexture* Bind(Warp& w, uint64_t handle, bool surface, uint32_t lane) {
  Block& b = *w.block;
  for (const BoundTexture& e : b.textures) {
    if (e.object != nullptr && e.handle == handle) return &e;
  }
  std::shared_ptr<const TextureObject> object = FindTextureObject(handle);
  if (object == nullptr || object->owner != b.owner || object->surface != surface) {
    Fail(w, lane, "use of a destroyed, foreign or invalid", surface, handle);
    return nullptr;
  }
  std::shared_ptr<Allocation> a = b.memory->Find(object->storage.address, object->storage.bytes);
  if (a == nullptr) {
    Fail(w, lane, "freed memory behind", surface, handle);
    return nullptr;
  }
  BoundTexture& e = b.textures[b.texture_next++ % 2];
  e.handle = handle;
  e.object = std::move(object);
  e.data = a->host + (e.object->storage.address - a->base);
  e.storage = std::move(a);
  return &e;
}

bool HasLayer(TexGeometry g) {
  return g == TexGeometry::kA1D || g == TexGeometry::kA2D || g == TexGeometry::kACube;
}

TexCoords ReadCoords(const Warp& w, const TextureSite& s, uint32_t lane) {
  auto word = [&](int k) -> uint32_t {
    return k < 4 && s.coords[k] != kNoOperand ? static_cast<uint32_t>(w.R(s.coords[k])[lane]) : 0;
  };
  TexCoords c;
  int first = 0;
  if (HasLayer(s.geometry)) {
    c.layer = static_cast<int32_t>(word(0));
    first = 1;
  }
  for (int d = 0; d < 3; ++d) {
    const uint32_t v = word(first + d);
    c.f[d] = std::bit_cast<float>(v);
    c.i[d] = static_cast<int32_t>(v);
  }
  auto operand = [&](uint32_t slot) -> uint32_t {
    return slot != kNoOperand ? static_cast<uint32_t>(w.R(slot)[lane]) : 0;
  };
  c.lod_mode = s.lod_mode;
  if (s.lod_mode == TexLodMode::kLevel) {
    // The lod operand has the coordinates' type.
    const uint32_t v = operand(s.lod);
    c.lod =
        s.integer_coords ? static_cast<float>(static_cast<int32_t>(v)) : std::bit_cast<float>(v);
  } else if (s.lod_mode == TexLodMode::kGrad) {
    for (int k = 0; k < 2; ++k) {
      for (int d = 0; d < 3; ++d) c.grad[k][d] = std::bit_cast<float>(operand(s.grad[k][d]));
    }
  }
  return c;
}

void WriteResults(Warp& w, const TextureSite& s, uint32_t lane, const uint32_t out[4]) {
  for (int k = 0; k < 4; ++k) {
    if (s.values[k] != kNoOperand) w.R(s.values[k])[lane] = out[k];
  }
}

void Tex(Warp& w, const Insn& in, uint32_t mask) {
  const TextureSite& s = Site(w, in);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    const BoundTexture* t = Bind(w, w.R(s.handle)[l], false, l);
    if (t == nullptr) return;
    uint32_t out[4];
    SampleTexture(*t->object, t->data, s.geometry, s.integer_coords, ReadCoords(w, s, l), out);
    WriteResults(w, s, l, out);
  });
}

void Gather(Warp& w, const Insn& in, uint32_t mask) {
  const TextureSite& s = Site(w, in);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    const BoundTexture* t = Bind(w, w.R(s.handle)[l], false, l);
    if (t == nullptr) return;
    uint32_t out[4];
    GatherTexture(*t->object, t->data, s.geometry, ReadCoords(w, s, l), s.component, out);
    WriteResults(w, s, l, out);
  });
}

template <bool kSurface>
void Query(Warp& w, const Insn& in, uint32_t mask) {
  const TextureSite& s = Site(w, in);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    const BoundTexture* t = Bind(w, w.R(s.handle)[l], kSurface, l);
    if (t == nullptr) return;
    const int32_t level = s.lod != kNoOperand ? static_cast<int32_t>(w.R(s.lod)[l]) : 0;
    if (s.values[0] != kNoOperand) w.R(s.values[0])[l] = QueryTexture(*t->object, s.query, level);
  });
}

// Byte x, row and slice of a surface access from its coordinates.
void SurfaceCoords(const Warp& w, const TextureSite& s, uint32_t lane, int64_t* x, int64_t* y,
                   int64_t* slice) {
  auto coord = [&](int k) -> int64_t {
    return s.coords[k] != kNoOperand ? static_cast<int32_t>(w.R(s.coords[k])[lane]) : 0;
  };
  *y = 0;
  *slice = 0;
  switch (s.geometry) {
    case TexGeometry::kA1D:
      *slice = coord(0);
      *x = coord(1);
      break;
    case TexGeometry::kA2D:
      *slice = coord(0);
      *x = coord(1);
      *y = coord(2);
      break;
    default:
      *x = coord(0);
      if (s.geometry != TexGeometry::k1D) *y = coord(1);
      if (s.geometry == TexGeometry::k3D) *slice = coord(2);
      break;
  }
}

// The host bytes of a surface access, null for a .zero access out of range, or null after a
// fault (w.faulted).
uint8_t* SurfaceBytes(Warp& w, const TextureSite& s, const BoundTexture& t, uint32_t bytes,
                      uint32_t lane) {
  int64_t x, y, slice;
  SurfaceCoords(w, s, lane, &x, &y, &slice);
  uint64_t offset = 0;
  switch (SurfaceOffset(*t.object, x, y, slice, bytes, s.clamp, &offset)) {
    case SurfaceAccess::kOk:
      return t.data + offset;
    case SurfaceAccess::kZero:
      return nullptr;
    case SurfaceAccess::kMisaligned: {
      char what[128];
      snprintf(what, sizeof what, "misaligned %u-byte access at x = %" PRId64 " bytes of", bytes,
               x);
      Fail(w, lane, what, true, t.handle, FaultKind::kMisalignedAddress);
      return nullptr;
    }
    case SurfaceAccess::kOutOfRange:
      break;
  }
  char what[160];
  snprintf(what, sizeof what,
           "out-of-range %u-byte access at x = %" PRId64 " bytes, y = %" PRId64 ", slice %" PRId64
           " of",
           bytes, x, y, slice);
  Fail(w, lane, what, true, t.handle);
  return nullptr;
}

void SurfaceLoad(Warp& w, const Insn& in, uint32_t mask) {
  const TextureSite& s = Site(w, in);
  const uint32_t bytes = s.access_bytes * s.count;
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    const BoundTexture* t = Bind(w, w.R(s.handle)[l], true, l);
    if (t == nullptr) return;
    const uint8_t* p = SurfaceBytes(w, s, *t, bytes, l);
    if (w.faulted) return;
    for (uint32_t k = 0; k < s.count; ++k) {
      uint64_t v = 0;
      if (p != nullptr) memcpy(&v, p + k * s.access_bytes, s.access_bytes);
      if (s.values[k] != kNoOperand) w.R(s.values[k])[l] = v;
    }
  });
}

void SurfaceStore(Warp& w, const Insn& in, uint32_t mask) {
  const TextureSite& s = Site(w, in);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    const BoundTexture* t = Bind(w, w.R(s.handle)[l], true, l);
    if (t == nullptr) return;
    auto value = [&](uint32_t k) -> uint64_t {
      return s.values[k] != kNoOperand ? w.R(s.values[k])[l] : 0;
    };
    if (s.formatted) {
      const uint32_t bytes = t->object->storage.element_bytes;
      uint8_t* p = SurfaceBytes(w, s, *t, bytes, l);
      if (p == nullptr) return;
      uint32_t words[4] = {0, 0, 0, 0};
      for (uint32_t k = 0; k < s.count; ++k) words[k] = static_cast<uint32_t>(value(k));
      PackFormatted(*t->object, words, p);
      return;
    }
    uint8_t* p = SurfaceBytes(w, s, *t, s.access_bytes * s.count, l);
    if (p == nullptr) return;
    for (uint32_t k = 0; k < s.count; ++k) {
      const uint64_t v = value(k);
      memcpy(p + k * s.access_bytes, &v, s.access_bytes);
    }
  });
}

}  // namespace

Handler TextureHandler() { return &Tex; }
Handler GatherHandler() { return &Gather; }
Handler TextureQueryHandler() { return &Query<false>; }
Handler SurfaceQueryHandler() { return &Query<true>; }
Handler SurfaceLoadHandler() { return &SurfaceLoad; }
Handler SurfaceStoreHandler() { return &SurfaceStore; }

}  // namespace softgpu
