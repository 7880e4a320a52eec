// A session moved on a backend that cannot allocate at a chosen address (NVIDIA's driver;
// softgpu with --no-backend-extensions): module variables are found by name when the checkpoint
// is taken, and a restore maps the allocations at their addresses through virtual memory
// management and loads each module where the backend puts it (docs/migration.md).
#include <algorithm>
#include <vector>

#include "common/log.h"
#include "common/module_variables.h"
#include "server/session.h"

namespace rgpu::server {
namespace {

std::string ErrorName(CUresult r) { return "CUDA error " + std::to_string(r); }

Status Refused(const std::string& why) {
  return Status(Status::Code::kInvalidArgument, "the session cannot move: " + why);
}

}  // namespace

Status Session::CaptureVariablesByName(ModuleRecord& m, wire::CheckpointModule* out) {
  if (drv_.cuModuleGetGlobal == nullptr) return Refused("the backend has no cuModuleGetGlobal");
  if (m.variables == nullptr) {  // a library's image can be large: read once per module
    auto listed = std::make_shared<std::vector<rgpu::fatbin::ModuleVariable>>();
    if (Status s = rgpu::fatbin::ListModuleVariables(m.image->data(), m.image->size(), listed.get(),
                                                     limits_.max_module_bytes);
        !s.ok()) {
      return Refused("a module's variables cannot be listed: " + s.message());
    }
    m.variables = std::move(listed);
  }
  ContextRecord* ctx = contexts_.Find(m.ctx);
  if (ctx == nullptr) return Internal("a module of no context");
  if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
  std::map<CUdeviceptr, size_t> seen;
  for (const rgpu::fatbin::ModuleVariable& v : *m.variables) {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
    const CUresult r = drv_.cuModuleGetGlobal(&ptr, &bytes, m.module, v.name.c_str());
    if (r != CUDA_SUCCESS) {
      // Constant memory only the host writes, through an address it asked for by name: one the
      // backend cannot find by name holds what the image says, which a restore loads again.
      if (v.constant) continue;
      return Refused("module variable " + v.name.substr(0, 200) + " cannot be found by name (" +
                     ErrorName(r) + ")");
    }
    if (bytes == 0 || !seen.emplace(ptr, bytes).second) continue;
    out->add_variable_bases(ptr);
    out->add_variable_sizes(bytes);
    out->add_variable_names(v.name);
  }
  return Status::Ok();
}

Status Session::MapRestoredAllocations(const wire::Checkpoint& c) {
  // The allocations by address, each with its context's device.
  struct Piece {
    uint64_t ptr, size, ctx;
    int device;
  };
  std::vector<Piece> pieces;
  for (const auto& a : c.allocations()) {
    const ContextRecord* ctx = contexts_.Find(a.ctx());
    if (ctx == nullptr) return InvalidArgument("an allocation of no context");
    pieces.push_back({a.ptr(), a.size(), a.ctx(), ctx->device});
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& x, const Piece& y) { return x.ptr < y.ptr; });
  std::map<int, uint64_t> granularity;  // by device
  for (const Piece& p : pieces) {
    if (granularity.count(p.device)) continue;
    size_t g = 0;
    const CUmemAllocationProp prop = DevicePinnedProp(p.device);
    if (CUresult r =
            drv_.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        r != CUDA_SUCCESS || g == 0 || (g & (g - 1)) != 0) {
      return Internal("device " + std::to_string(p.device) +
                      "'s allocation granularity: " + ErrorName(r));
    }
    granularity[p.device] = g;
  }
  // Spans: each allocation rounded out to whole granules, overlapping ones merged.
  struct Span {
    uint64_t base, end, ctx, first_ctx;
    int device;
    uint32_t users;
    uint64_t allocated;  // bytes of its allocations (which never overlap: CheckCheckpoint)
  };
  std::vector<Span> spans;
  for (const Piece& p : pieces) {
    const uint64_t g = granularity[p.device];
    const uint64_t base = p.ptr & ~(g - 1);
    // CheckCheckpoint found no range overflowing; rounding up may still wrap at the top.
    const uint64_t end = (p.ptr + p.size + g - 1) & ~(g - 1);
    if (end <= base) return InvalidArgument("an allocation at the top of the address space");
    if (!spans.empty() && base < spans.back().end) {
      Span& last = spans.back();
      if (last.device != p.device) {
        return InvalidArgument("allocations of two devices share a granule of memory");
      }
      last.end = std::max(last.end, end);
      if (last.ctx != p.ctx) last.ctx = 0;
      ++last.users;
      last.allocated += p.size;
      restored_in_span_[p.ptr] = last.base;
      continue;
    }
    spans.push_back({base, end, p.ctx, p.ctx, p.device, 1, p.size});
    restored_in_span_[p.ptr] = base;
  }
  for (const Span& span : spans) {
    const uint64_t bytes = span.end - span.base;
    if (CUresult r = MakeCurrent(contexts_.Find(span.first_ctx)); r != CUDA_SUCCESS) {
      return Internal(ErrorName(r));
    }
    auto change = DeviceMemoryChange();
    CUdeviceptr got = 0;
    CUresult r = drv_.cuMemAddressReserve(&got, bytes, granularity[span.device], span.base, 0);
    if (r != CUDA_SUCCESS) {
      return InvalidArgument("the session's addresses cannot be reserved here (" + ErrorName(r) +
                             ")");
    }
    if (got != span.base) {
      drv_.cuMemAddressFree(got, bytes);
      return InvalidArgument("the session's memory at " + std::to_string(span.base) + " (" +
                             std::to_string(bytes) + " bytes) cannot be placed there: the " +
                             "addresses are in use on this server");
    }
    CUmemGenericAllocationHandle handle = 0;
    const CUmemAllocationProp prop = DevicePinnedProp(span.device);
    r = drv_.cuMemCreate(&handle, bytes, &prop, 0);
    if (r != CUDA_SUCCESS) {
      drv_.cuMemAddressFree(span.base, bytes);
      return r == CUDA_ERROR_OUT_OF_MEMORY
                 ? ResourceExhausted("not enough device memory for the session's " +
                                     std::to_string(c.memory_bytes()) + " bytes")
                 : InvalidArgument("device memory for the session: " + ErrorName(r));
    }
    r = drv_.cuMemMap(span.base, bytes, 0, handle, 0);
    if (r != CUDA_SUCCESS) {
      drv_.cuMemRelease(handle);
      drv_.cuMemAddressFree(span.base, bytes);
      return InvalidArgument("mapping the session's memory: " + ErrorName(r));
    }
    // The granules are held whole: what the allocations (charged when they are restored) do not
    // fill is charged here, so that a checkpoint of many small allocations far apart cannot map
    // gigabytes for the bytes of its allocations.
    const uint64_t overhead = bytes > span.allocated ? bytes - span.allocated : 0;
    CallState cs;
    if (!Charge(cs, span.device, overhead, "the granules of the session's memory")) {
      drv_.cuMemUnmap(span.base, bytes);
      drv_.cuMemRelease(handle);
      drv_.cuMemAddressFree(span.base, bytes);
      return ResourceExhausted("the session's memory, mapped in whole granules of " +
                               std::to_string(granularity[span.device]) +
                               " bytes, does not fit: " + cs.detail);
    }
    restored_spans_[span.base] = RestoredSpan{
        bytes, static_cast<uint64_t>(handle), span.ctx, span.users, span.device, overhead};
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = drv_.cuMemSetAccess(span.base, bytes, &access, 1);
    // New physical memory holds what its last user left: the gaps between the allocations a
    // span rounds out to are zeroed (the allocations themselves get the checkpoint's bytes).
    if (r == CUDA_SUCCESS && scrub_allocations_) {
      r = drv_.cuMemsetD8 != nullptr ? drv_.cuMemsetD8(span.base, 0, bytes)
                                     : CUDA_ERROR_NOT_SUPPORTED;
      if (r == CUDA_SUCCESS) r = drv_.cuCtxSynchronize();
    }
    if (r != CUDA_SUCCESS) return InvalidArgument("the session's memory: " + ErrorName(r));
  }
  return Status::Ok();
}

Status Session::RestoreModuleByName(const wire::CheckpointModule& m, const wire::Checkpoint& c,
                                    std::map<CUdeviceptr, CUdeviceptr>* moved) {
  if (m.variable_names_size() != m.variable_bases_size()) {
    return InvalidArgument("module " + std::to_string(m.id()) +
                           "'s variables have no names: its checkpoint was taken where they are "
                           "placed at fixed addresses, which this backend cannot do");
  }
  int device = -1;
  if (Status s = PrepareModuleRestore(m, &device); !s.ok()) return s;
  const std::string& image = m.image();
  CallState cs;
  auto kept = std::make_shared<std::string>(image);
  CUmodule module = nullptr;
  uint64_t footprint = 0;
  std::string why;
  CUresult r = LoadModule(kept->c_str(), &module, &footprint, &why);
  if (r != CUDA_SUCCESS) {
    Uncharge(device, image.size());
    return r == CUDA_ERROR_OUT_OF_MEMORY
               ? ResourceExhausted("not enough device memory for module " + std::to_string(m.id()))
               : InvalidArgument("module " + std::to_string(m.id()) + " does not load here (" +
                                 ErrorName(r) + (why.empty() ? "" : ": " + why) + ")");
  }
  auto unload = [&](Status why_not) {
    auto change = DeviceMemoryChange();
    drv_.cuModuleUnload(module);
    Uncharge(device, image.size());
    return why_not;
  };
  std::map<CUdeviceptr, CUdeviceptr> placed;  // this module's old -> new
  for (int i = 0; i < m.variable_names_size(); ++i) {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
    const std::string& name = m.variable_names(i);
    r = drv_.cuModuleGetGlobal(&ptr, &bytes, module, name.c_str());
    if (r != CUDA_SUCCESS || bytes != m.variable_sizes(i)) {
      return unload(InvalidArgument("module " + std::to_string(m.id()) + " has no variable " +
                                    name.substr(0, 200) + " of " +
                                    std::to_string(m.variable_sizes(i)) + " bytes"));
    }
    if (ptr != m.variable_bases(i)) placed[m.variable_bases(i)] = ptr;
  }
  // The program holds the addresses of the module's variables it asked for: each must be where
  // it was (a kernel may be given one as an argument, which nothing here could translate).
  for (const auto& g : c.globals()) {
    if (g.module() != m.id()) continue;
    for (int i = 0; i < m.variable_bases_size(); ++i) {
      const uint64_t base = m.variable_bases(i);
      if (g.ptr() >= base && g.ptr() - base < m.variable_sizes(i) && placed.count(base)) {
        return unload(InvalidArgument(
            "the program holds the address of module variable " +
            m.variable_names(i).substr(0, 200) +
            ", which this backend loads at another address (it cannot place module variables "
            "where they were)"));
      }
    }
  }
  if (!Charge(cs, device, footprint, "the module's variables")) {
    return unload(ResourceExhausted("module " + std::to_string(m.id()) + ": " + cs.detail));
  }
  // Its variables are known by name from the checkpoint: the next one need not read the image.
  auto variables = std::make_shared<std::vector<rgpu::fatbin::ModuleVariable>>();
  for (const std::string& name : m.variable_names()) variables->push_back({name, false});
  ModuleRecord record{module, m.ctx(), image.size() + footprint, kept, std::move(variables)};
  if (!modules_.Restore(m.id(), std::move(record))) {
    Uncharge(device, footprint);
    return unload(InvalidArgument("module ids"));
  }
  moved->insert(placed.begin(), placed.end());
  return Status::Ok();
}

CUresult Session::ReleaseAllocationMemory(CUdeviceptr ptr, uint64_t bytes, int device) {
  RestoredSpan* kept = nullptr;
  if (CUresult r = FreeDeviceMemory(ptr, &kept); r != CUDA_SUCCESS) return r;
  UnchargeMemory(ptr, bytes, device);
  // Its span stays mapped for the allocations left in it: the granules are held whole, so their
  // bytes stay charged, to the span (given back with it). A charge the quota no longer takes
  // (another session of the tenant took the room meanwhile) leaves them uncharged until then.
  CallState cs;
  if (kept != nullptr && Charge(cs, kept->device, bytes, "a restored span still mapped")) {
    kept->overhead += bytes;
  }
  return CUDA_SUCCESS;
}

CUresult Session::FreeDeviceMemory(CUdeviceptr ptr, RestoredSpan** kept) {
  if (kept != nullptr) *kept = nullptr;
  auto change = DeviceMemoryChange();
  auto in = restored_in_span_.find(ptr);
  if (in == restored_in_span_.end()) return drv_.cuMemFree(ptr);
  auto span = restored_spans_.find(in->second);
  restored_in_span_.erase(in);
  if (span == restored_spans_.end()) return CUDA_SUCCESS;  // its mapping failed: nothing to free
  if (--span->second.users > 0) {
    if (kept != nullptr) *kept = &span->second;
    return CUDA_SUCCESS;
  }
  // The span's memory may still be read by work in flight: the caller has synchronized (a free
  // waits for the context, a pool block's trim for its event).
  CUresult r = drv_.cuMemUnmap(span->first, span->second.bytes);
  if (r == CUDA_SUCCESS) r = drv_.cuMemAddressFree(span->first, span->second.bytes);
  if (r == CUDA_SUCCESS) {
    r = drv_.cuMemRelease(static_cast<CUmemGenericAllocationHandle>(span->second.handle));
  }
  Uncharge(span->second.device, span->second.overhead);
  restored_spans_.erase(span);
  return r;
}

void Session::ReleaseRestoredSpans(uint64_t ctx_id) {
  if (restored_spans_.empty()) return;
  auto change = DeviceMemoryChange();
  for (auto it = restored_spans_.begin(); it != restored_spans_.end();) {
    if (ctx_id != 0 && it->second.ctx != ctx_id) {
      ++it;
      continue;
    }
    drv_.cuMemUnmap(it->first, it->second.bytes);
    drv_.cuMemAddressFree(it->first, it->second.bytes);
    drv_.cuMemRelease(static_cast<CUmemGenericAllocationHandle>(it->second.handle));
    Uncharge(it->second.device, it->second.overhead);
    it = restored_spans_.erase(it);
  }
  for (auto it = restored_in_span_.begin(); it != restored_in_span_.end();) {
    it = restored_spans_.count(it->second) ? std::next(it) : restored_in_span_.erase(it);
  }
}

}  // namespace rgpu::server
