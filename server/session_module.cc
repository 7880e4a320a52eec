// Session's handlers for modules and kernels: loading (checked, bounded, charged to the quota),
// functions and their parameter layouts, globals, attributes and launches (with --fair-share
// turns and --max-kernel-ms) (proto/calls.def: Modules and kernels, function attributes).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/fatbin.h"
#include "common/log.h"
#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {

CUresult Session::HandleModuleLoadData(CallState& cs, const ModuleLoadDataIn&,
                                       calls::ModuleLoadData::Results* out) {
  if (cs.payload_size == 0) return CUDA_ERROR_INVALID_IMAGE;
  if (cs.payload_size > limits_.max_module_bytes) {
    cs.detail = "module image of " + std::to_string(cs.payload_size) + " bytes is larger than " +
                std::to_string(limits_.max_module_bytes) + " (the server's --max-module-mib)";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (CUresult r = RoomFor(cs, modules_.size(), limits_.max_modules, "modules");
      r != CUDA_SUCCESS) {
    return r;
  }
  // The backend gets only the image's address, so the image must be self-contained within the
  // payload: checked here first, with what a fat binary's entries expand to bounded like the
  // image. A PTX image is NUL-terminated after the payload.
  rgpu::fatbin::ImageKind kind;
  Status checked =
      rgpu::fatbin::CheckImage(cs.payload, cs.payload_size, &kind, limits_.max_module_bytes);
  if (!checked.ok()) {
    cs.detail = "malformed module image: " + checked.message();
    RGPU_LOG_WARN("session %llu: %s", (unsigned long long)id_, cs.detail.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  // The image itself is held (by the backend, and on a GPU as loaded code) while the module lives.
  const int device = DeviceOf(cs.ctx_id);
  if (!Charge(cs, device, cs.payload_size, "the module image")) return CUDA_ERROR_OUT_OF_MEMORY;
  // Kept with the module (a checkpoint carries it); a std::string is NUL-terminated past its size.
  std::shared_ptr<std::string> image;
  try {
    image = std::make_shared<std::string>(cs.payload, cs.payload_size);
  } catch (const std::bad_alloc&) {
    Uncharge(device, cs.payload_size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUmodule module = nullptr;
  uint64_t footprint = 0;
  std::string why;
  CUresult r = LoadModule(image->c_str(), &module, &footprint, &why);
  if (r == CUDA_SUCCESS && !Charge(cs, device, footprint, "the module's variables")) {
    RGPU_LOG_WARN("session %llu: module refused: %s", (unsigned long long)id_, cs.detail.c_str());
    auto change = DeviceMemoryChange();
    drv_.cuModuleUnload(module);
    Uncharge(device, cs.payload_size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    Uncharge(device, cs.payload_size);
    uint16_t machine = 0;
    if (kind == rgpu::fatbin::ImageKind::kElf) memcpy(&machine, cs.payload + 18, sizeof machine);
    constexpr uint16_t kEmAmdgpu = 224;
    cs.detail = machine == kEmAmdgpu
                    ? "the backend cannot run this AMDGPU code object (a HIP program's kernels)"
                    : "the backend could not load the module image";
    if (!why.empty()) cs.detail += ": " + why.substr(0, 900);
    RGPU_LOG_WARN("session %llu: module refused (%d): %s", (unsigned long long)id_, r,
                  cs.detail.c_str());
    return r;
  }
  out->module =
      modules_.Insert(ModuleRecord{module, cs.ctx_id, cs.payload_size + footprint, image});
  ListFunctions(cs, out->module, module, out);
  return CUDA_SUCCESS;
}

void Session::ListFunctions(CallState& cs, uint64_t module_id, CUmodule module,
                            calls::ModuleLoadData::Results* out) {
  constexpr unsigned kMostListed = 64;
  constexpr size_t kMostNameBytes = size_t{64} << 10;
  unsigned count = 0;
  if (drv_.cuModuleGetFunctionCount == nullptr || drv_.cuModuleEnumerateFunctions == nullptr ||
      drv_.cuFuncGetName == nullptr ||
      drv_.cuModuleGetFunctionCount(&count, module) != CUDA_SUCCESS || count == 0 ||
      count > kMostListed || functions_.size() + count > limits_.max_functions) {
    return;
  }
  std::vector<CUfunction> functions(count);
  if (drv_.cuModuleEnumerateFunctions(functions.data(), count, module) != CUDA_SUCCESS) return;
  std::string names;
  std::vector<std::string> each;
  for (CUfunction f : functions) {
    const char* name = nullptr;
    if (drv_.cuFuncGetName(&name, f) != CUDA_SUCCESS || name == nullptr) return;
    names.append(name);
    names.push_back('\0');
    each.emplace_back(name);
    if (names.size() > kMostNameBytes) return;
  }
  cs.out_payload = OutputBuffer(names.size());
  if (cs.out_payload == nullptr) return;
  for (size_t i = 0; i < functions.size(); ++i) {
    const CUfunction f = functions[i];
    FunctionRecord record;
    record.module = module_id;
    record.ctx = cs.ctx_id;
    record.function = f;
    record.name = each[i];
    FunctionSummary summary;
    if (!DescribeFunction(cs, &record, &summary)) {
      // Undo: the listing is all or nothing (the client then asks per name).
      for (size_t i = 0; i < out->functions.size();) {
        functions_.Erase(out->functions[i]);
        i += 5 + 2 * out->functions[i + 4];
      }
      out->functions.clear();
      return;
    }
    out->functions.push_back(functions_.Insert(std::move(record)));
    out->functions.push_back(summary.max_threads_per_block);
    out->functions.push_back(summary.static_shared_bytes);
    out->functions.push_back(summary.max_dynamic_shared_bytes);
    out->functions.push_back(summary.params.size() / 2);
    out->functions.insert(out->functions.end(), summary.params.begin(), summary.params.end());
  }
  memcpy(cs.out_payload, names.data(), names.size());
  cs.out_size = names.size();
  out->listed = true;
}

bool Session::DescribeFunction(CallState& cs, FunctionRecord* f, FunctionSummary* out) {
  if (drv_.cuFuncGetParamInfo == nullptr) {
    cs.detail = "backend lacks cuFuncGetParamInfo";
    return false;
  }
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    if (drv_.cuFuncGetParamInfo(f->function, i, &offset, &size) != CUDA_SUCCESS) break;
    f->params.push_back(ParamSlot{static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    f->params_bytes = std::max<uint32_t>(f->params_bytes, offset + size);
    out->params.push_back(offset);
    out->params.push_back(size);
  }
  // Limits the client checks launches against, so that bad configurations fail at the launch
  // as CUDA's do, even when the launch itself is posted.
  auto attribute = [&](CUfunction_attribute a) -> uint32_t {
    int v = 0;
    if (drv_.cuFuncGetAttribute == nullptr ||
        drv_.cuFuncGetAttribute(&v, a, f->function) != CUDA_SUCCESS) {
      return 0;
    }
    return static_cast<uint32_t>(std::max(v, 0));
  };
  out->max_threads_per_block = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  out->static_shared_bytes = attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  out->max_dynamic_shared_bytes = attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  return true;
}

CUresult Session::LoadModuleLogged(const char* image, CUmodule* module, std::string* why) {
  if (drv_.cuModuleLoadDataEx == nullptr) return drv_.cuModuleLoadData(module, image);
  // The backend's error log: why it refused the image (softgpu: a module without PTX; NVIDIA's
  // driver: a PTX that does not compile), for the server's log and the tenant's error detail.
  char log[1024] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
  const CUresult r = drv_.cuModuleLoadDataEx(module, image, 2, options, values);
  log[sizeof log - 1] = '\0';
  if (r != CUDA_SUCCESS) *why = log;
  return r;
}

CUresult Session::LoadModule(const char* image, CUmodule* module, uint64_t* footprint,
                             std::string* why) {
  *footprint = 0;
  if (drv_.softgpuModuleGetFootprint != nullptr) {
    CUresult r = LoadModuleLogged(image, module, why);
    if (r != CUDA_SUCCESS) return r;
    size_t bytes = 0;
    r = drv_.softgpuModuleGetFootprint(*module, &bytes);
    if (r != CUDA_SUCCESS) {
      drv_.cuModuleUnload(*module);
      return r;
    }
    *footprint = bytes;
    return CUDA_SUCCESS;
  }
  // Measured: no other session changes device memory meanwhile.
  std::unique_lock<std::mutex> lock;
  if (memory_lock_ != nullptr) lock = std::unique_lock<std::mutex>(*memory_lock_);
  size_t free_before = 0, free_after = 0, total = 0;
  CUresult r = drv_.cuMemGetInfo(&free_before, &total);
  if (r != CUDA_SUCCESS) return r;
  r = LoadModuleLogged(image, module, why);
  if (r != CUDA_SUCCESS) return r;
  r = drv_.cuMemGetInfo(&free_after, &total);
  if (r != CUDA_SUCCESS) {
    drv_.cuModuleUnload(*module);
    return r;
  }
  *footprint = free_before > free_after ? free_before - free_after : 0;
  return CUDA_SUCCESS;
}

CUresult Session::HandleModuleUnload(CallState&, const ModuleUnloadIn& in,
                                     calls::ModuleUnload::Results*) {
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuModuleUnload(in.module->module);
  }
  Uncharge(DeviceOf(in.module->ctx), in.module->charged);
  const uint64_t module_id = in.module.id;
  for (auto it = functions_.records().begin(); it != functions_.records().end();) {
    it = it->second.module == module_id ? functions_.records().erase(it) : std::next(it);
  }
  // The module's globals go with it.
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    it = it->second.module == module_id ? allocations_.erase(it) : std::next(it);
  }
  modules_.Erase(module_id);
  return r;
}

// The name in a kName payload (checked to be 1..4096 bytes), up to its NUL.
std::string PayloadName(const char* payload, size_t size) {
  std::string name(payload, size);
  if (size_t nul = name.find('\0'); nul != std::string::npos) name.resize(nul);
  return name;
}

CUresult Session::HandleModuleGetFunction(CallState& cs, const ModuleGetFunctionIn& in,
                                          calls::ModuleGetFunction::Results* out) {
  if (CUresult r = RoomFor(cs, functions_.size(), limits_.max_functions, "functions");
      r != CUDA_SUCCESS) {
    return r;
  }
  const std::string name = PayloadName(cs.payload, cs.payload_size);
  FunctionRecord f;
  f.module = in.module.id;
  f.ctx = cs.ctx_id;
  f.name = name;
  CUresult r = drv_.cuModuleGetFunction(&f.function, in.module->module, name.c_str());
  if (r != CUDA_SUCCESS) {
    cs.detail = "no kernel named " + name;
    return r;
  }
  FunctionSummary summary;
  if (!DescribeFunction(cs, &f, &summary)) return CUDA_ERROR_NOT_SUPPORTED;
  out->max_threads_per_block = summary.max_threads_per_block;
  out->static_shared_bytes = summary.static_shared_bytes;
  out->max_dynamic_shared_bytes = summary.max_dynamic_shared_bytes;
  out->param_count = static_cast<uint32_t>(f.params.size());
  out->param_offsets_and_sizes = std::move(summary.params);
  out->function = functions_.Insert(std::move(f));
  return CUDA_SUCCESS;
}

CUresult Session::HandleModuleGetGlobal(CallState& cs, const ModuleGetGlobalIn& in,
                                        calls::ModuleGetGlobal::Results* out) {
  REQUIRE_FN(cuModuleGetGlobal);
  const std::string name = PayloadName(cs.payload, cs.payload_size);
  CUdeviceptr p = 0;
  size_t bytes = 0;
  CUresult r = drv_.cuModuleGetGlobal(&p, &bytes, in.module->module, name.c_str());
  if (r != CUDA_SUCCESS) return r;
  // The global is memory of this session: copies to and from it are allowed, freeing is not.
  if (bytes > 0 && allocations_.find(p) == allocations_.end()) {
    allocations_[p] = Allocation{bytes, cs.ctx_id, false, in.module.id};
  }
  out->dptr = p;
  out->bytes = bytes;
  return CUDA_SUCCESS;
}

CUresult Session::HandleFuncGetAttribute(CallState& cs, const FuncGetAttributeIn& in,
                                         calls::FuncGetAttribute::Results* out) {
  REQUIRE_FN(cuFuncGetAttribute);
  int value = 0;
  CUresult r = drv_.cuFuncGetAttribute(&value, static_cast<CUfunction_attribute>(in.attribute),
                                       in.function->function);
  out->value = value;
  return r;
}

CUresult Session::HandleFuncSetAttribute(CallState& cs, const FuncSetAttributeIn& in,
                                         calls::FuncSetAttribute::Results*) {
  REQUIRE_FN(cuFuncSetAttribute);
  return drv_.cuFuncSetAttribute(in.function->function,
                                 static_cast<CUfunction_attribute>(in.attribute), in.value);
}

CUresult Session::HandleLaunchKernel(CallState& cs, const LaunchKernelIn& in,
                                     calls::LaunchKernel::Results*) {
  const LaunchShape shape = {in.grid_x,  in.grid_y,  in.grid_z,      in.block_x,
                             in.block_y, in.block_z, in.shared_bytes};
  return Launch(cs, *in.function.record, shape, in.stream.stream, false);
}

CUresult Session::HandleLaunchKernelEx(CallState& cs, const LaunchKernelExIn& in,
                                       calls::LaunchKernelEx::Results*) {
  REQUIRE_FN(cuLaunchKernelEx);
  const bool has_cluster = in.cluster_x != 0 || in.cluster_y != 0 || in.cluster_z != 0;
  if (has_cluster && (in.cluster_x == 0 || in.cluster_y == 0 || in.cluster_z == 0)) {
    cs.detail = "a cluster shape with a zero dimension";
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  const LaunchShape shape = {in.grid_x,  in.grid_y,       in.grid_z,    in.block_x,   in.block_y,
                             in.block_z, in.shared_bytes, in.cluster_x, in.cluster_y, in.cluster_z};
  return Launch(cs, *in.function.record, shape, in.stream.stream, in.cooperative);
}

namespace {

// A launch configuration for the backend's cluster occupancy queries: `cluster` (x, y, z; 0s
// for none) becomes its one attribute.
CUlaunchConfig ClusterQueryConfig(uint32_t grid_x, uint32_t grid_y, uint32_t grid_z,
                                  uint32_t block_x, uint32_t block_y, uint32_t block_z,
                                  uint32_t shared_bytes, const uint32_t cluster[3],
                                  CUlaunchAttribute* attribute) {
  CUlaunchConfig config = {};
  config.gridDimX = grid_x;
  config.gridDimY = grid_y;
  config.gridDimZ = grid_z;
  config.blockDimX = block_x;
  config.blockDimY = block_y;
  config.blockDimZ = block_z;
  config.sharedMemBytes = shared_bytes;
  *attribute = {};
  attribute->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute->value.clusterDim.x = cluster[0];
  attribute->value.clusterDim.y = cluster[1];
  attribute->value.clusterDim.z = cluster[2];
  config.attrs = attribute;
  config.numAttrs = cluster[0] != 0 || cluster[1] != 0 || cluster[2] != 0 ? 1 : 0;
  return config;
}

}  // namespace

CUresult Session::HandleOccupancyMaxActiveClusters(
    CallState& cs, const OccupancyMaxActiveClustersIn& in,
    calls::OccupancyMaxActiveClusters::Results* out) {
  REQUIRE_FN(cuOccupancyMaxActiveClusters);
  const uint32_t cluster[3] = {in.cluster_x, in.cluster_y, in.cluster_z};
  CUlaunchAttribute attribute;
  const CUlaunchConfig config =
      ClusterQueryConfig(in.grid_x, in.grid_y, in.grid_z, in.block_x, in.block_y, in.block_z,
                         in.shared_bytes, cluster, &attribute);
  int clusters = 0;
  CUresult r = drv_.cuOccupancyMaxActiveClusters(&clusters, in.function->function, &config);
  out->clusters = static_cast<uint32_t>(std::max(clusters, 0));
  return r;
}

CUresult Session::HandleOccupancyMaxPotentialClusterSize(
    CallState& cs, const OccupancyMaxPotentialClusterSizeIn& in,
    calls::OccupancyMaxPotentialClusterSize::Results* out) {
  REQUIRE_FN(cuOccupancyMaxPotentialClusterSize);
  const uint32_t none[3] = {0, 0, 0};
  CUlaunchAttribute attribute;
  const CUlaunchConfig config =
      ClusterQueryConfig(in.grid_x, in.grid_y, in.grid_z, in.block_x, in.block_y, in.block_z,
                         in.shared_bytes, none, &attribute);
  int size = 0;
  CUresult r = drv_.cuOccupancyMaxPotentialClusterSize(&size, in.function->function, &config);
  out->size = static_cast<uint32_t>(std::max(size, 0));
  return r;
}

CUresult Session::Launch(CallState& cs, const FunctionRecord& f, const LaunchShape& in,
                         CUstream stream, bool cooperative) {
  if (cs.payload_size != f.params_bytes) {
    cs.detail = "kernel arguments (" + std::to_string(cs.payload_size) +
                " bytes) do not match the kernel's parameters (" + std::to_string(f.params_bytes) +
                " bytes)";
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The packed parameters go to the backend as they arrived: no unpacking, no copy.
  size_t params_size = cs.payload_size;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<char*>(cs.payload),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &params_size, CU_LAUNCH_PARAM_END};
  const bool clustered = in.cluster_x != 0;
  auto launch = [&] {
    if (!cooperative && !clustered) {
      return drv_.cuLaunchKernel(f.function, in.grid_x, in.grid_y, in.grid_z, in.block_x,
                                 in.block_y, in.block_z, in.shared_bytes, stream, nullptr,
                                 params_size > 0 ? extra : nullptr);
    }
    // cuLaunchCooperativeKernel takes no packed buffer; cuLaunchKernelEx does.
    CUlaunchAttribute attributes[2] = {};
    unsigned count = 0;
    if (cooperative) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attributes[count++].value.cooperative = 1;
    }
    if (clustered) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attributes[count].value.clusterDim.x = in.cluster_x;
      attributes[count].value.clusterDim.y = in.cluster_y;
      attributes[count++].value.clusterDim.z = in.cluster_z;
    }
    CUlaunchConfig config = {};
    config.gridDimX = in.grid_x;
    config.gridDimY = in.grid_y;
    config.gridDimZ = in.grid_z;
    config.blockDimX = in.block_x;
    config.blockDimY = in.block_y;
    config.blockDimZ = in.block_z;
    config.sharedMemBytes = in.shared_bytes;
    config.hStream = stream;
    config.attrs = attributes;
    config.numAttrs = count;
    return drv_.cuLaunchKernelEx(&config, f.function, nullptr, params_size > 0 ? extra : nullptr);
  };
  TurnTaker* scheduler =
      scheduler_ != nullptr ? scheduler_->Of(cs.ctx->device) : nullptr;  // --fair-share
  if (scheduler == nullptr) return launch();
  // Fair sharing: the kernel runs in its turn on its device, alone, timed to its completion,
  // without holding this thread (server/kernel_turns.h).
  if (KernelTurns* turns = TurnsOf(cs.ctx)) return turns->Launch(stream, launch);
  // A backend without stream waits on memory: this thread waits for the kernel in its turn.
  CUresult r = AfterStreamWork(stream);
  if (r != CUDA_SUCCESS) return r;
  const auto queued = std::chrono::steady_clock::now();
  scheduler->Acquire(account());
  queue_seconds_.fetch_add(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - queued).count());
  const auto start = std::chrono::steady_clock::now();
  r = launch();
  if (r == CUDA_SUCCESS) r = WaitForKernel(stream);
  const double busy =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  device_busy_seconds_[cs.ctx->device].fetch_add(busy);
  scheduler->Release(account(), busy);
  return r;
}

CUresult Session::WaitForKernel(CUstream stream) {
  // softgpu bounds each kernel itself (softgpuCtxSetKernelTimeout) and stops it when the session
  // is aborted (softgpuCtxAbort).
  if (drv_.softgpuCtxAbort != nullptr || drv_.cuStreamQuery == nullptr) {
    return drv_.cuStreamSynchronize(stream);
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    const CUresult r = drv_.cuStreamQuery(stream);
    if (r != CUDA_ERROR_NOT_READY) return r;
    const bool late =
        max_kernel_ms_ > 0 && Clock::now() - start > std::chrono::milliseconds(max_kernel_ms_);
    if (late || aborted_.load()) {
      // No GPU can take a running kernel off its SMs on request: destroying its context is the
      // one way to end it (and everything else the context held).
      stopped_error_.store(late ? CUDA_ERROR_LAUNCH_TIMEOUT : CUDA_ERROR_LAUNCH_FAILED);
      RGPU_LOG_WARN("session %llu: %s; destroying its contexts", (unsigned long long)id_,
                    late ? "a kernel ran past --max-kernel-ms" : "its client is gone");
      for (auto& [id, rec] : contexts_.records()) {
        if (rec.destroyed) continue;
        {
          std::lock_guard<std::mutex> lock(abort_mu_);
          std::erase(live_contexts_, rec.context);
        }
        auto change = DeviceMemoryChange();
        drv_.cuCtxDestroy(rec.context);
        rec.destroyed = true;
      }
      current_ = nullptr;
      return stopped_error_.load();
    }
    if (polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

CUresult Session::HandleModuleFunctionNames(CallState& cs, const ModuleFunctionNamesIn& in,
                                            calls::ModuleFunctionNames::Results* out) {
  REQUIRE_FN(cuModuleGetFunctionCount);
  REQUIRE_FN(cuModuleEnumerateFunctions);
  REQUIRE_FN(cuFuncGetName);
  unsigned count = 0;
  CUresult r = drv_.cuModuleGetFunctionCount(&count, in.module->module);
  if (r != CUDA_SUCCESS) return r;
  // A module holds at most as many kernels as its image (bounded by --max-module-mib) has bytes.
  if (count > (1u << 20)) {
    cs.detail = "too many kernels";
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<CUfunction> functions(count);
  if (count > 0) {
    r = drv_.cuModuleEnumerateFunctions(functions.data(), count, in.module->module);
    if (r != CUDA_SUCCESS) return r;
  }
  std::string names;
  for (CUfunction f : functions) {
    const char* name = nullptr;
    r = drv_.cuFuncGetName(&name, f);
    if (r != CUDA_SUCCESS || name == nullptr) return r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN;
    names.append(name);
    names.push_back('\0');
  }
  out->count = count;
  out->bytes = names.size();
  const size_t n = names.size() <= in.capacity ? names.size() : 0;  // all of them, or none
  cs.out_payload = OutputBuffer(n == 0 ? 1 : n);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(cs.out_payload, names.data(), n);
  cs.out_size = n;
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
