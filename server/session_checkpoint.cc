// A session's state into a checkpoint and back (docs/migration.md): what can move, waiting for
// the device, the header of a quiesced session, its memory out, and a restore that makes every
// context, allocation, module, function, stream, event, pool and graph again at the same ids and
// device addresses, charged to the tenant as the calls that first made them were.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/fatbin.h"
#include "common/log.h"
#include "server/checkpoint.h"
#include "server/device_catalog.h"
#include "server/session.h"
#include "server/tenants.h"

namespace rgpu::server {
namespace {

const CUlimit kChargedLimitKinds[kChargedLimits] = {CU_LIMIT_MALLOC_HEAP_SIZE, CU_LIMIT_STACK_SIZE,
                                                    CU_LIMIT_PRINTF_FIFO_SIZE};

int Attribute(const wire::DeviceInfo& d, CUdevice_attribute a) {
  return a < d.attributes_size() ? d.attributes(a) : 0;
}

Status Refused(const std::string& why) {
  return Status(Status::Code::kInvalidArgument, "the session cannot move: " + why);
}

std::string ErrorName(CUresult r) { return "CUDA error " + std::to_string(r); }

}  // namespace

Status Session::Quiesce() {
  // A stream waiting on a word of memory (StreamMemOp) may wait for a write the client has not
  // sent yet, and cannot send while this thread waits: with such waits, the streams are watched
  // until idle for a while, and a session whose streams still wait stays where it is.
  const auto waits_given_up = std::chrono::steady_clock::now() + kStreamWaitsQuiesceTime;
  for (auto& [id, ctx] : contexts_.records()) {
    if (ctx.destroyed) return Refused("context " + std::to_string(id) + " was stopped");
    if (CUresult r = MakeCurrent(&ctx); r != CUDA_SUCCESS) {
      return Internal("context " + std::to_string(id) + ": " + ErrorName(r));
    }
    while (stream_waits_served_ && drv_.cuStreamQuery != nullptr && !StreamsIdle(id)) {
      if (std::chrono::steady_clock::now() >= waits_given_up) {
        return Refused("a stream of context " + std::to_string(id) + " is still busy after " +
                       std::to_string(kStreamWaitsQuiesceTime.count()) +
                       " ms, in a session that waits on memory (cuStreamWaitValue): it may "
                       "wait for a write the program has yet to make");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (CUresult r = drv_.cuCtxSynchronize(); r != CUDA_SUCCESS) {
      return Refused("context " + std::to_string(id) + " has failed (" + ErrorName(r) + ")");
    }
  }
  // Every free has happened: the pools give back all they keep unused.
  for (auto& [id, pool] : pools_.records()) {
    TrimPool(pool, 0);
    if (!pool.free.empty()) return Refused("memory pool " + std::to_string(id) + " holds blocks");
  }
  return Status::Ok();
}

bool Session::StreamsIdle(uint64_t ctx) {
  if (drv_.cuStreamQuery(nullptr) == CUDA_ERROR_NOT_READY) return false;
  if (drv_.cuEventQuery != nullptr && DrainingStreamsBusy(ctx)) return false;
  for (const auto& [id, stream] : streams_.records()) {
    if (stream.ctx == ctx && drv_.cuStreamQuery(stream.stream) == CUDA_ERROR_NOT_READY) {
      return false;
    }
  }
  return true;
}

Status Session::CheckMovable() {
  if (!exported_memory_.empty()) return Refused("it shares memory with other sessions (IPC)");
  for (const auto& [ptr, a] : allocations_) {
    if (a.imported != nullptr || a.import_pool != 0) {
      return Refused("it holds memory of another session (IPC)");
    }
  }
  for (const auto& [id, pool] : pools_.records()) {
    if (pool.shared != nullptr || pool.imported) {
      return Refused("memory pool " + std::to_string(id) + " is shared with other sessions");
    }
  }
  for (const auto& [id, event] : events_.records()) {
    if (event.exported != nullptr || event.imported) {
      return Refused("event " + std::to_string(id) + " is shared with other sessions (IPC)");
    }
  }
  for (const auto& [id, ctx] : contexts_.records()) {
    if (ctx.peer_access) return Refused("context " + std::to_string(id) + " has peer access");
  }
  if (arrays_.size() > 0 || mipmaps_.size() > 0) return Refused("it has CUDA arrays");
  if (!textures_.empty() || !surfaces_.empty()) {
    return Refused("it has texture or surface objects");
  }
  if (links_.size() > 0) return Refused("it has JIT link states");
  if (physical_.size() > 0 || !reservations_.empty() || !mappings_.empty()) {
    return Refused("it uses virtual memory management (physical memory, reservations, mappings)");
  }
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    if (!grants_.empty()) return Refused("another server holds a ticket to its memory");
  }
  for (const auto& [id, f] : functions_.records()) {
    if (f.name.empty()) return Refused("function " + std::to_string(id) + " has no name");
  }
  for (const auto& [id, m] : modules_.records()) {
    if (m.image == nullptr) return Refused("module " + std::to_string(id) + " has no image");
  }
  return Status::Ok();
}

Status Session::Capture(wire::Checkpoint* c) {
  c->set_source_session(id_);
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    if (tenant_ != nullptr) c->set_tenant(tenant_->name);
    c->set_lease_id(lease_id_);
    c->set_client_name(client_name_);
  }
  c->set_pid(client_pid_);
  for (int index : visible_) {
    const wire::DeviceInfo& d = devices_.devices()[index];
    wire::CheckpointDevice* out = c->add_devices();
    out->set_cc_major(Attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    out->set_cc_minor(Attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    out->set_total_mem(d.total_mem());
    out->set_name(d.name());
  }
  c->set_executed_seq(executed_seq_);
  for (auto& [id, ctx] : contexts_.records()) {
    wire::CheckpointContext* out = c->add_contexts();
    out->set_id(id);
    const auto ordinal = std::find(visible_.begin(), visible_.end(), ctx.device);
    if (ordinal == visible_.end())
      return Internal("a context of a device the session does not see");
    out->set_ordinal(static_cast<uint32_t>(ordinal - visible_.begin()));
    out->set_primary(ctx.primary);
    out->set_primary_refs(ctx.primary_refs);
    for (int i = 0; i < kChargedLimits; ++i) {
      size_t value = 0;
      if (ctx.limit_charge[i] > 0 && drv_.cuCtxGetLimit != nullptr &&
          MakeCurrent(&ctx) == CUDA_SUCCESS &&
          drv_.cuCtxGetLimit(&value, kChargedLimitKinds[i]) == CUDA_SUCCESS) {
        out->add_limits(value);
      } else {
        out->add_limits(0);
      }
    }
  }
  uint64_t memory = 0;
  for (auto& [id, m] : modules_.records()) {
    wire::CheckpointModule* out = c->add_modules();
    out->set_id(id);
    out->set_ctx(m.ctx);
    out->set_image(*m.image);
    if (drv_.softgpuModuleGetVariableRanges == nullptr) {
      if (Status s = CaptureVariablesByName(m, out); !s.ok()) return s;
      for (uint64_t size : out->variable_sizes()) memory += size;
      continue;
    }
    size_t count = 0;
    CUresult r = drv_.softgpuModuleGetVariableRanges(m.module, nullptr, nullptr, &count);
    std::vector<CUdeviceptr> bases(count);
    std::vector<size_t> sizes(count);
    if (r == CUDA_SUCCESS && count > 0) {
      r = drv_.softgpuModuleGetVariableRanges(m.module, bases.data(), sizes.data(), &count);
    }
    if (r != CUDA_SUCCESS)
      return Internal("module " + std::to_string(id) + "'s variables: " + ErrorName(r));
    for (size_t i = 0; i < count; ++i) {
      out->add_variable_bases(bases[i]);
      out->add_variable_sizes(sizes[i]);
      memory += sizes[i];
    }
  }
  for (const auto& [id, f] : functions_.records()) {
    wire::CheckpointFunction* out = c->add_functions();
    out->set_id(id);
    out->set_module(f.module);
    out->set_name(f.name);
  }
  for (const auto& [id, st] : streams_.records()) {
    wire::CheckpointStream* out = c->add_streams();
    out->set_id(id);
    out->set_ctx(st.ctx);
    out->set_flags(st.flags);
    out->set_priority(st.priority);
  }
  for (const auto& [id, e] : events_.records()) {
    wire::CheckpointEvent* out = c->add_events();
    out->set_id(id);
    out->set_ctx(e.ctx);
    out->set_flags(e.flags);
    out->set_recorded(e.recorded);
  }
  for (const auto& [ptr, a] : allocations_) {
    if (a.freeable) {
      wire::CheckpointAllocation* out = c->add_allocations();
      out->set_ptr(ptr);
      out->set_size(a.size);
      out->set_ctx(a.ctx);
      out->set_pool(a.pool);
      memory += a.size;
    } else {
      wire::CheckpointGlobal* out = c->add_globals();
      out->set_ptr(ptr);
      out->set_size(a.size);
      out->set_ctx(a.ctx);
      out->set_module(a.module);
    }
  }
  for (const auto& [id, p] : pools_.records()) {
    wire::CheckpointPool* out = c->add_pools();
    out->set_id(id);
    const auto ordinal = std::find(visible_.begin(), visible_.end(), p.device);
    if (ordinal == visible_.end()) return Internal("a pool of a device the session does not see");
    out->set_ordinal(static_cast<uint32_t>(ordinal - visible_.begin()));
    out->set_is_default(p.is_default);
    out->set_destroyed(p.destroyed);
    out->set_max_size(p.max_size);
    out->set_release_threshold(p.release_threshold);
    out->set_reuse_follow_event_dependencies(p.reuse_follow_event_dependencies);
    out->set_reuse_allow_opportunistic(p.reuse_allow_opportunistic);
    out->set_reuse_allow_internal_dependencies(p.reuse_allow_internal_dependencies);
    out->set_reserved_high(p.reserved_high);
    out->set_used_high(p.used_high);
    out->set_shareable(p.shareable);
  }
  for (const auto& [id, g] : graphs_.records()) {
    wire::CheckpointGraph* out = c->add_graphs();
    out->set_id(id);
    out->set_record(GraphRecordBytes(g));
  }
  wire::CheckpointNextIds* next = c->mutable_next_ids();
  next->set_contexts(contexts_.next_id());
  next->set_modules(modules_.next_id());
  next->set_functions(functions_.next_id());
  next->set_streams(streams_.next_id());
  next->set_events(events_.next_id());
  next->set_pools(pools_.next_id());
  next->set_graphs(graphs_.next_id());
  c->set_memory_bytes(memory);
  return Status::Ok();
}

Status Session::WriteCheckpoint(const wire::Checkpoint& header,
                                const std::function<Status(const char*, size_t)>& sink) {
  CheckpointWriter writer(sink);
  if (Status s = writer.Begin(header); !s.ok()) return s;
  std::vector<char> bounce;
  for (const CheckpointRange& range : CheckpointRanges(header)) {
    ContextRecord* ctx = contexts_.Find(range.ctx);
    if (ctx == nullptr) return Internal("a range of no context");
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    // softgpu: straight from device memory; otherwise through a buffer.
    void* host = nullptr;
    if (drv_.softgpuMemDirectAccess != nullptr &&
        drv_.softgpuMemDirectAccess(&host, range.ptr, range.size, nullptr) == CUDA_SUCCESS) {
      if (Status s = writer.Memory(host, range.size); !s.ok()) return s;
      continue;
    }
    bounce.resize(std::min<uint64_t>(range.size, kCheckpointChunkBytes));
    for (uint64_t done = 0; done < range.size;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(bounce.size(), range.size - done));
      if (CUresult r = drv_.cuMemcpyDtoH(bounce.data(), range.ptr + done, n); r != CUDA_SUCCESS) {
        return Internal("reading device memory: " + ErrorName(r));
      }
      if (Status s = writer.Memory(bounce.data(), n); !s.ok()) return s;
      done += n;
    }
  }
  return writer.Finish();
}

Status Session::RestoreBegin(const wire::Checkpoint& c, std::shared_ptr<Tenant> tenant,
                             const std::vector<int>& onto) {
  // softgpu places allocations and module variables where asked; other backends (NVIDIA's
  // driver) map the allocations at their addresses and find module variables by name.
  const bool placed = drv_.softgpuMemAllocAt != nullptr &&
                      drv_.softgpuModuleLoadDataAt != nullptr &&
                      drv_.softgpuModuleGetVariableRanges != nullptr;
  if (!placed) {
    const std::pair<bool, const char*> needed[] = {
        {drv_.cuMemAddressReserve != nullptr, "cuMemAddressReserve"},
        {drv_.cuMemCreate != nullptr, "cuMemCreate"},
        {drv_.cuMemMap != nullptr, "cuMemMap"},
        {drv_.cuMemSetAccess != nullptr, "cuMemSetAccess"},
        {drv_.cuMemUnmap != nullptr, "cuMemUnmap"},
        {drv_.cuMemAddressFree != nullptr, "cuMemAddressFree"},
        {drv_.cuMemRelease != nullptr, "cuMemRelease"},
        {drv_.cuMemGetAllocationGranularity != nullptr, "cuMemGetAllocationGranularity"},
        {drv_.cuModuleGetGlobal != nullptr, "cuModuleGetGlobal"}};
    const char* missing = nullptr;
    for (const auto& [present, name] : needed) {
      if (!present && missing == nullptr) missing = name;
    }
    if (missing != nullptr) {
      RGPU_LOG_WARN("session %llu: restore refused: the backend has no %s", (unsigned long long)id_,
                    missing);
      return Status(Status::Code::kInvalidArgument,
                    std::string("CUDA_ERROR_NOT_SUPPORTED: this backend has no ") + missing +
                        ", which a restore at the session's device addresses needs");
    }
  }
  // The devices: `onto`, each at least as capable.
  if (static_cast<size_t>(c.devices_size()) > devices_.devices().size() ||
      onto.size() < static_cast<size_t>(c.devices_size())) {
    return ResourceExhausted("the session sees more devices than this server has");
  }
  std::vector<int> visible;
  for (int i = 0; i < c.devices_size(); ++i) {
    if (onto[i] < 0 || static_cast<size_t>(onto[i]) >= devices_.devices().size()) {
      return InvalidArgument("no device " + std::to_string(onto[i]) + " here");
    }
    const wire::DeviceInfo& d = devices_.devices()[onto[i]];
    const int major = Attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    const int minor = Attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    const wire::CheckpointDevice& want = c.devices(i);
    if (major < want.cc_major() || (major == want.cc_major() && minor < want.cc_minor())) {
      return InvalidArgument("device " + std::to_string(i) + " has compute capability " +
                             std::to_string(major) + "." + std::to_string(minor) +
                             ", the session needs " + std::to_string(want.cc_major()) + "." +
                             std::to_string(want.cc_minor()));
    }
    visible.push_back(onto[i]);
  }
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    tenant_ = std::move(tenant);
    lease_id_ = c.lease_id();
    client_name_ = c.client_name();
    visible_ = std::move(visible);
  }
  client_pid_ = c.pid();
  CallState cs;  // for the charges' and handlers' details
  wire::Call none;
  cs.call = &none;
  auto failed = [&](const std::string& what) {
    return ResourceExhausted(what + (cs.detail.empty() ? "" : ": " + cs.detail));
  };

  for (const auto& x : c.contexts()) {
    uint64_t id = 0;
    if (CUresult r = CreateContext(visible_[x.ordinal()], x.primary(), &id, x.id());
        r != CUDA_SUCCESS) {
      return Internal("context " + std::to_string(x.id()) + ": " + ErrorName(r));
    }
    ContextRecord* ctx = contexts_.Find(id);
    ctx->primary_refs = x.primary_refs();
    if (x.primary()) primary_by_device_[ctx->device] = id;
    for (int i = 0; i < x.limits_size() && i < kChargedLimits; ++i) {
      if (x.limits(i) == 0) continue;
      cs.ctx_id = id;
      cs.ctx = ctx;
      CtxSetLimitIn in;
      in.limit = static_cast<uint32_t>(kChargedLimitKinds[i]);
      in.value = x.limits(i);
      if (CUresult r = HandleCtxSetLimit(cs, in, nullptr); r != CUDA_SUCCESS) {
        return failed("context " + std::to_string(id) + "'s limit");
      }
    }
  }
  if (!contexts_.SetNextId(c.next_ids().contexts())) return InvalidArgument("context ids");
  NoteContextDevices();

  for (const auto& p : c.pools()) {
    PoolRecord pool;
    pool.device = visible_[p.ordinal()];
    pool.is_default = p.is_default();
    pool.destroyed = p.destroyed();
    pool.max_size = p.max_size();
    pool.release_threshold = p.release_threshold();
    pool.reuse_follow_event_dependencies = p.reuse_follow_event_dependencies();
    pool.reuse_allow_opportunistic = p.reuse_allow_opportunistic();
    pool.reuse_allow_internal_dependencies = p.reuse_allow_internal_dependencies();
    pool.reserved_high = p.reserved_high();
    pool.used_high = p.used_high();
    pool.shareable = p.shareable();
    if (!pools_.Restore(p.id(), std::move(pool))) return InvalidArgument("pool ids");
    if (p.is_default()) default_pool_by_device_[visible_[p.ordinal()]] = p.id();
  }
  if (!pools_.SetNextId(c.next_ids().pools())) return InvalidArgument("pool ids");

  if (!placed) {
    if (Status s = MapRestoredAllocations(c); !s.ok()) return s;
  }
  for (const auto& a : c.allocations()) {
    ContextRecord* ctx = contexts_.Find(a.ctx());
    if (ctx == nullptr) return InvalidArgument("an allocation of no context");
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    cs.detail.clear();
    if (!Charge(cs, ctx->device, a.size(), "the allocation")) return failed("not enough memory");
    CUresult r = CUDA_SUCCESS;
    if (placed) {
      auto change = DeviceMemoryChange();
      r = drv_.softgpuMemAllocAt(a.ptr(), a.size());
    }
    if (r != CUDA_SUCCESS) {
      Uncharge(ctx->device, a.size());
      return r == CUDA_ERROR_OUT_OF_MEMORY
                 ? ResourceExhausted("not enough device memory for the session's " +
                                     std::to_string(c.memory_bytes()) + " bytes")
                 : InvalidArgument("the allocation at " + std::to_string(a.ptr()) +
                                   " cannot be placed there (" + ErrorName(r) + ")");
    }
    allocations_[a.ptr()] = Allocation{a.size(), a.ctx(), true, 0, a.pool()};
    if (a.pool() != 0) {
      PoolRecord* pool = pools_.Find(a.pool());
      if (pool == nullptr) return InvalidArgument("an allocation of no pool");
      pool->reserved += a.size();
      pool->used += a.size();
    }
  }

  std::map<CUdeviceptr, CUdeviceptr> moved_variables;  // old -> new (not `placed`)
  for (const auto& m : c.modules()) {
    if (Status s = placed ? RestoreModule(m) : RestoreModuleByName(m, c, &moved_variables);
        !s.ok()) {
      return s;
    }
  }
  if (!modules_.SetNextId(c.next_ids().modules())) return InvalidArgument("module ids");

  for (const auto& f : c.functions()) {
    ModuleRecord* module = modules_.Find(f.module());
    if (module == nullptr) return InvalidArgument("a function of no module");
    ContextRecord* ctx = contexts_.Find(module->ctx);
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    FunctionRecord rec;
    rec.module = f.module();
    rec.ctx = module->ctx;
    rec.name = f.name();
    if (CUresult r = drv_.cuModuleGetFunction(&rec.function, module->module, f.name().c_str());
        r != CUDA_SUCCESS) {
      return InvalidArgument("module " + std::to_string(f.module()) + " has no kernel " +
                             f.name().substr(0, 200));
    }
    FunctionSummary summary;
    cs.detail.clear();
    if (!DescribeFunction(cs, &rec, &summary)) return failed("kernel " + f.name().substr(0, 200));
    if (!functions_.Restore(f.id(), std::move(rec))) return InvalidArgument("function ids");
  }
  if (!functions_.SetNextId(c.next_ids().functions())) return InvalidArgument("function ids");

  for (const auto& g : c.globals()) {
    allocations_[g.ptr()] = Allocation{g.size(), g.ctx(), false, g.module()};
  }

  for (const auto& x : c.streams()) {
    ContextRecord* ctx = contexts_.Find(x.ctx());
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    CUstream st = nullptr;
    CUresult r = x.priority() != 0 && drv_.cuStreamCreateWithPriority != nullptr
                     ? drv_.cuStreamCreateWithPriority(&st, x.flags(), x.priority())
                     : drv_.cuStreamCreate(&st, x.flags());
    if (r != CUDA_SUCCESS)
      return InvalidArgument("stream " + std::to_string(x.id()) + ": " + ErrorName(r));
    if (!streams_.Restore(x.id(), StreamRecord{st, x.ctx(), x.flags(), x.priority()})) {
      drv_.cuStreamDestroy(st);
      return InvalidArgument("stream ids");
    }
  }
  if (!streams_.SetNextId(c.next_ids().streams())) return InvalidArgument("stream ids");

  for (const auto& x : c.events()) {
    ContextRecord* ctx = contexts_.Find(x.ctx());
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    CUevent e = nullptr;
    if (CUresult r = drv_.cuEventCreate(&e, x.flags()); r != CUDA_SUCCESS) {
      return InvalidArgument("event " + std::to_string(x.id()) + ": " + ErrorName(r));
    }
    EventRecord rec{e, x.ctx()};
    rec.flags = x.flags();
    rec.recorded = x.recorded();
    if (!events_.Restore(x.id(), std::move(rec))) {
      drv_.cuEventDestroy(e);
      return InvalidArgument("event ids");
    }
  }
  if (!events_.SetNextId(c.next_ids().events())) return InvalidArgument("event ids");

  for (const auto& g : c.graphs()) {
    GraphRecord rec;
    std::string why;
    const uint64_t room = limits_.max_graph_bytes - std::min(limits_.max_graph_bytes, graph_bytes_);
    if (ParseGraphRecord(g.record().data(), g.record().size(), room, &rec, &why) != CUDA_SUCCESS) {
      return InvalidArgument("graph " + std::to_string(g.id()) + ": " + why);
    }
    graph_bytes_ += rec.bytes;
    if (!graphs_.Restore(g.id(), std::move(rec))) return InvalidArgument("graph ids");
  }
  if (!graphs_.SetNextId(c.next_ids().graphs())) return InvalidArgument("graph ids");

  executed_seq_ = c.executed_seq();
  restore_ranges_ = CheckpointRanges(c);
  for (CheckpointRange& range : restore_ranges_) {
    if (auto to = moved_variables.find(range.ptr); to != moved_variables.end()) {
      range.ptr = to->second;
    }
  }
  restore_range_ = 0;
  restore_range_start_ = 0;
  return Status::Ok();
}

Status Session::PrepareModuleRestore(const wire::CheckpointModule& m, int* device) {
  ContextRecord* ctx = contexts_.Find(m.ctx());
  if (ctx == nullptr) return InvalidArgument("a module of no context");
  if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
  const std::string& image = m.image();
  // The checks a ModuleLoadData image gets: the backend reads it by address only.
  rgpu::fatbin::ImageKind kind;
  if (Status checked =
          rgpu::fatbin::CheckImage(image.data(), image.size(), &kind, limits_.max_module_bytes);
      !checked.ok()) {
    return InvalidArgument("module " + std::to_string(m.id()) +
                           ": malformed image: " + checked.message());
  }
  CallState cs;
  *device = ctx->device;
  if (!Charge(cs, *device, image.size(), "the module image")) {
    return ResourceExhausted("module " + std::to_string(m.id()) + ": " + cs.detail);
  }
  return Status::Ok();
}

Status Session::RestoreModule(const wire::CheckpointModule& m) {
  int device = -1;
  if (Status s = PrepareModuleRestore(m, &device); !s.ok()) return s;
  const std::string& image = m.image();
  CallState cs;
  auto kept = std::make_shared<std::string>(image);
  std::vector<CUdeviceptr> bases(m.variable_bases().begin(), m.variable_bases().end());
  CUmodule module = nullptr;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.softgpuModuleLoadDataAt(&module, kept->c_str(), bases.data(), bases.size());
  }
  if (r != CUDA_SUCCESS) {
    Uncharge(device, image.size());
    return r == CUDA_ERROR_OUT_OF_MEMORY
               ? ResourceExhausted("not enough device memory for module " + std::to_string(m.id()))
               : InvalidArgument("module " + std::to_string(m.id()) +
                                 " cannot be loaded at its "
                                 "addresses (" +
                                 ErrorName(r) + ")");
  }
  // Its variables must be the ranges the checkpoint copies into.
  size_t count = bases.size();
  std::vector<size_t> sizes(count);
  std::vector<CUdeviceptr> placed(count);
  size_t footprint = 0;
  r = drv_.softgpuModuleGetVariableRanges(module, placed.data(), sizes.data(), &count);
  bool same = r == CUDA_SUCCESS && count == bases.size();
  for (size_t i = 0; same && i < count; ++i) {
    same = placed[i] == bases[i] && sizes[i] == m.variable_sizes(static_cast<int>(i));
  }
  if (same && drv_.softgpuModuleGetFootprint != nullptr) {
    same = drv_.softgpuModuleGetFootprint(module, &footprint) == CUDA_SUCCESS;
  }
  if (!same || !Charge(cs, device, footprint, "the module's variables")) {
    auto change = DeviceMemoryChange();
    drv_.cuModuleUnload(module);
    Uncharge(device, image.size());
    return same ? ResourceExhausted("module " + std::to_string(m.id()) + ": " + cs.detail)
                : InvalidArgument("module " + std::to_string(m.id()) +
                                  "'s variables are not what the checkpoint lists");
  }
  if (!modules_.Restore(m.id(), ModuleRecord{module, m.ctx(), image.size() + footprint, kept})) {
    auto change = DeviceMemoryChange();
    drv_.cuModuleUnload(module);
    Uncharge(device, image.size() + footprint);
    return InvalidArgument("module ids");
  }
  return Status::Ok();
}

Status Session::RestoreMemory(uint64_t offset, const char* data, size_t size) {
  while (size > 0) {
    if (restore_range_ >= restore_ranges_.size()) return InvalidArgument("memory past the ranges");
    const CheckpointRange& range = restore_ranges_[restore_range_];
    if (offset < restore_range_start_ || offset - restore_range_start_ >= range.size) {
      return InvalidArgument("memory out of order");
    }
    const uint64_t at = offset - restore_range_start_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, range.size - at));
    ContextRecord* ctx = contexts_.Find(range.ctx);
    if (ctx == nullptr) return InvalidArgument("memory of no context");
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    if (CUresult r = drv_.cuMemcpyHtoD(range.ptr + at, data, n); r != CUDA_SUCCESS) {
      return Internal("writing device memory: " + ErrorName(r));
    }
    offset += n;
    data += n;
    size -= n;
    if (at + n == range.size) {
      restore_range_start_ += range.size;
      ++restore_range_;
    }
  }
  return Status::Ok();
}

Status Session::RestoreFinish() {
  if (restore_range_ != restore_ranges_.size()) return InvalidArgument("memory missing");
  // An event recorded before the move is complete: recorded again here, where nothing runs.
  for (auto& [id, e] : events_.records()) {
    if (!e.recorded) continue;
    ContextRecord* ctx = contexts_.Find(e.ctx);
    if (CUresult r = MakeCurrent(ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    if (CUresult r = drv_.cuEventRecord(e.event, nullptr); r != CUDA_SUCCESS) {
      return Internal("event " + std::to_string(id) + ": " + ErrorName(r));
    }
  }
  for (auto& [id, ctx] : contexts_.records()) {
    if (CUresult r = MakeCurrent(&ctx); r != CUDA_SUCCESS) return Internal(ErrorName(r));
    if (CUresult r = drv_.cuCtxSynchronize(); r != CUDA_SUCCESS) return Internal(ErrorName(r));
  }
  // The session runs on another thread, whose current context is its own business.
  drv_.cuCtxSetCurrent(nullptr);
  current_ = nullptr;
  restore_ranges_.clear();
  return Status::Ok();
}

}  // namespace rgpu::server
