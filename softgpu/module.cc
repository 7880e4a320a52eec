#include "softgpu/module.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "common/fatbin.h"
#include "common/log.h"
#include "softgpu/architecture.h"
#include "softgpu/context.h"
#include "softgpu/device.h"
#include "softgpu/ptx_decoder.h"

namespace softgpu {

namespace {
// The host's page size, which a __managed__ variable's placement follows.
constexpr uint64_t kHostPage = 4096;

// The bytes a global variable takes in device memory. A __managed__ one is native (whole pages
// of host memory at its device address, NativeManagedVariables) or, when rgpu's server says
// its client maps it itself, gets whole pages of its own, page aligned (one page more than it
// needs, to find the aligned start in), so that the client can map it at the same address.
uint64_t GlobalBytes(const GlobalVariable& g) {
  if (!g.managed) return g.size;
  const uint64_t page = HostPageSize();
  if (NativeManagedVariables()) return (g.size + page - 1) / page * page;
  return (g.size + 2 * kHostPage - 1) / kHostPage * kHostPage;
}

}  // namespace
namespace {

// What to do about a module of SASS only. Relocatable device code (-rdc=true, which dynamic
// parallelism requires) keeps SASS only after nvcc's device link, whatever -gencode asked for.
constexpr const char* kNoPtxAdvice =
    ": the software GPU runs PTX only; rebuild with PTX, e.g. -gencode "
    "arch=compute_75,code=compute_75 (a program linked with -rdc=true, as dynamic parallelism "
    "requires, keeps only SASS after nvcc's device link)";

// Explains a refused image on stderr (and to the caller's JIT log, if any): each distinct
// explanation once per process, later ones at debug level (cuFFT tries a SASS-only module before
// the one it falls back to for many of its plans: the tenant needs to read why once, not per plan).
CUresult Refuse(CUresult code, const std::string& message, std::string* error) {
  static std::mutex mu;
  static std::unordered_set<std::string> told;
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu);
    first = told.count(message) == 0;
    if (first && told.size() < 4096) told.insert(message);  // bounded: past it, all are told
  }
  if (first) {
    fprintf(stderr, "softgpu: %s\n", message.c_str());
  } else {
    RGPU_LOG_DEBUG("softgpu: %s", message.c_str());
  }
  if (error != nullptr) *error = message;
  return code;
}

std::mutex g_cache_mu;

// With RGPU_SOFTGPU_DUMP_PTX=DIR, writes each distinct PTX text decoded to DIR/module-N.ptx (a
// diagnostic for kernels of libraries shipped without sources; stderr says which file).
void DumpPtx(const std::string& text) {
  static const char* dir = getenv("RGPU_SOFTGPU_DUMP_PTX");
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<unsigned> next{0};
  std::string path = std::string(dir) + "/module-" + std::to_string(next++) + ".ptx";
  if (FILE* f = fopen(path.c_str(), "w")) {
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
    fprintf(stderr, "softgpu: PTX written to %s\n", path.c_str());
  }
}
std::unordered_map<std::string, std::weak_ptr<const Program>>& Cache() {
  static auto* cache = new std::unordered_map<std::string, std::weak_ptr<const Program>>();
  return *cache;
}

// Decodes `text` (once per process per distinct text). With `report` false a refusal is not
// printed, only stored in *error: the caller has another PTX to try.
CUresult CompileText(const std::string& text, std::shared_ptr<const Program>* out,
                     std::string* error, bool report = true) {
  {
    std::lock_guard lock(g_cache_mu);
    auto it = Cache().find(text);
    if (it != Cache().end()) {
      if (auto p = it->second.lock()) {
        *out = std::move(p);
        return CUDA_SUCCESS;
      }
    }
  }
  DumpPtx(text);
  auto program = std::make_shared<Program>();
  rgpu::Status s = CompilePtx(text, program.get());
  if (!s.ok()) {
    if (!report) {
      if (error != nullptr) *error = "cannot load PTX: " + s.message();
      return CUDA_ERROR_INVALID_PTX;
    }
    return Refuse(CUDA_ERROR_INVALID_PTX, "cannot load PTX: " + s.message(), error);
  }
  std::lock_guard lock(g_cache_mu);
  auto& cache = Cache();
  for (auto it = cache.begin(); it != cache.end();) {
    if (it->second.expired())
      it = cache.erase(it);
    else
      ++it;
  }
  cache[text] = program;
  RGPU_LOG_DEBUG("softgpu: decoded PTX for %s: %zu functions, %zu globals, %zu constants",
                 program->target.c_str(), program->functions.size(), program->globals.size(),
                 program->consts.size() / kWarpSize);
  *out = std::move(program);
  return CUDA_SUCCESS;
}

// The PTX entries of a fat-binary container, best first: the newest at or below softgpu's
// compute capability (PTX is forward-compatible), then the older ones, newest first, then the
// newer ones, oldest first (PTX is architecture-neutral enough for an interpreter, and an
// instruction it lacks is reported by name at launch rather than guessed at).
CUresult ContainerPtx(const void* container, std::vector<std::string>* ptx, std::string* error) {
  uint16_t header_size;
  uint64_t fat_size;
  memcpy(&header_size, static_cast<const uint8_t*>(container) + 6, 2);
  memcpy(&fat_size, static_cast<const uint8_t*>(container) + 8, 8);
  if (header_size < 16 || fat_size > (1ull << 32)) return CUDA_ERROR_INVALID_IMAGE;
  std::vector<rgpu::fatbin::Entry> entries;
  rgpu::Status s = rgpu::fatbin::ParseContainer(container, header_size + fat_size, &entries);
  if (!s.ok()) {
    return Refuse(CUDA_ERROR_INVALID_IMAGE, "cannot read fat binary: " + s.message(), error);
  }
  const uint32_t supported = DeviceArchitecture().Number();
  std::string sass;
  std::vector<rgpu::fatbin::Entry*> candidates;
  for (auto& e : entries) {
    if (e.kind == rgpu::fatbin::EntryKind::kElf) {
      sass += (sass.empty() ? "sm_" : ", sm_") + std::to_string(e.sm_arch);
    } else {
      candidates.push_back(&e);
    }
  }
  auto before = [supported](const rgpu::fatbin::Entry* a, const rgpu::fatbin::Entry* b) {
    const bool a_fits = a->sm_arch <= supported, b_fits = b->sm_arch <= supported;
    if (a_fits != b_fits) return a_fits;
    if (a->sm_arch != b->sm_arch) return a_fits ? a->sm_arch > b->sm_arch : a->sm_arch < b->sm_arch;
    return a->ptx_major != b->ptx_major ? a->ptx_major > b->ptx_major : a->ptx_minor > b->ptx_minor;
  };
  std::stable_sort(candidates.begin(), candidates.end(), before);
  if (candidates.empty()) {
    return Refuse(CUDA_ERROR_NO_BINARY_FOR_GPU,
                  sass.empty() ? "module carries no code (neither PTX nor SASS)"
                               : "module has no PTX, only " + sass + " SASS" + kNoPtxAdvice,
                  error);
  }
  if (candidates.front()->sm_arch > supported) {
    RGPU_LOG_DEBUG("softgpu: no PTX at or below compute_%u; using compute_%u", supported,
                   candidates.front()->sm_arch);
  }
  ptx->clear();
  for (rgpu::fatbin::Entry* e : candidates) ptx->push_back(std::move(e->payload));
  return CUDA_SUCCESS;
}

// The PTX texts an image carries, best first (one unless it is a fat binary with several).
CUresult ImagePtxCandidates(const void* image, std::vector<std::string>* ptx, std::string* error) {
  switch (rgpu::fatbin::Classify(image)) {
    case rgpu::fatbin::ImageKind::kWrapper: {
      const void* container = nullptr;
      memcpy(&container, static_cast<const uint8_t*>(image) + 8, sizeof container);
      if (container == nullptr ||
          rgpu::fatbin::Classify(container) != rgpu::fatbin::ImageKind::kContainer) {
        return CUDA_ERROR_INVALID_IMAGE;
      }
      return ContainerPtx(container, ptx, error);
    }
    case rgpu::fatbin::ImageKind::kContainer:
      return ContainerPtx(image, ptx, error);
    case rgpu::fatbin::ImageKind::kElf: {
      uint16_t machine = 0;
      memcpy(&machine, static_cast<const uint8_t*>(image) + 18, sizeof machine);
      constexpr uint16_t kEmAmdgpu = 224;
      if (machine == kEmAmdgpu) {
        return Refuse(CUDA_ERROR_NO_BINARY_FOR_GPU,
                      "module is AMDGPU code (a HIP program's code object); the software GPU "
                      "runs only PTX",
                      error);
      }
      uint32_t flags = 0;
      memcpy(&flags, static_cast<const uint8_t*>(image) + 0x30, 4);
      const uint32_t sm = (flags >> 8) & 0xff;
      return Refuse(CUDA_ERROR_NO_BINARY_FOR_GPU,
                    "module has no PTX, only sm_" + std::to_string(sm != 0 ? sm : flags & 0xff) +
                        " SASS" + kNoPtxAdvice,
                    error);
    }
    case rgpu::fatbin::ImageKind::kPtx:
      ptx->assign(1, static_cast<const char*>(image));
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_IMAGE;
}

// Whether every function of `program` decoded fully (none holds an instruction softgpu lacks).
bool Complete(const Program& program) {
  for (const Function& f : program.functions) {
    if (!f.unsupported.empty()) return false;
  }
  return true;
}

}  // namespace

CUresult LoadProgram(const void* image, std::shared_ptr<const Program>* program,
                     std::string* error) {
  if (image == nullptr || program == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string> texts;
  if (CUresult r = ImagePtxCandidates(image, &texts, error); r != CUDA_SUCCESS) return r;
  if (texts.size() == 1) return CompileText(texts.front(), program, error);
  // Several PTX texts (a program built for several architectures): the best one that softgpu
  // decodes completely, else the best one it decodes (its refused instructions are reported at
  // launch), else the best one's refusal.
  std::shared_ptr<const Program> usable;
  std::string first_error;
  CUresult first_result = CUDA_SUCCESS;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::shared_ptr<const Program> p;
    std::string why;
    const CUresult r = CompileText(texts[i], &p, &why, /*report=*/false);
    if (r != CUDA_SUCCESS) {
      if (first_result == CUDA_SUCCESS) first_result = r, first_error = why;
      RGPU_LOG_DEBUG("softgpu: PTX %zu of %zu refused (%s); trying the next", i + 1, texts.size(),
                     why.c_str());
      continue;
    }
    if (Complete(*p)) {
      if (i > 0)
        RGPU_LOG_DEBUG("softgpu: using PTX %zu of %zu, decoded fully", i + 1, texts.size());
      *program = std::move(p);
      return CUDA_SUCCESS;
    }
    if (usable == nullptr) usable = std::move(p);
  }
  if (usable != nullptr) {
    *program = std::move(usable);
    return CUDA_SUCCESS;
  }
  return Refuse(first_result, first_error, error);
}

CUresult ImagePtx(const void* image, std::string* ptx, std::string* error) {
  if (image == nullptr || ptx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string> texts;
  if (CUresult r = ImagePtxCandidates(image, &texts, error); r != CUDA_SUCCESS) return r;
  *ptx = std::move(texts.front());
  return CUDA_SUCCESS;
}

CUresult Module::Create(Context* context, std::shared_ptr<const Program> program,
                        std::shared_ptr<Module>* out, const std::vector<uint64_t>* at) {
  auto m = std::make_shared<Module>();
  m->context_ = context;
  m->program_ = std::move(program);
  const Program& p = *m->program_;
  AddressSpace& memory = context->memory();
  if (at != nullptr && at->size() != p.globals.size()) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < p.globals.size(); ++i) {
    const GlobalVariable& g = p.globals[i];
    uint64_t address = 0;
    const bool native = g.managed && NativeManagedVariables();
    AddressSpace::Result r = AddressSpace::Result::kInvalid;
    if (at != nullptr) {
      address = (*at)[i];
      if (!native) r = memory.AllocateAt(address, GlobalBytes(g));
    } else {
      r = native ? memory.AllocateManaged(g.size, &address, AllocationKind::kInternal)
                 : memory.Allocate(GlobalBytes(g), &address);
    }
    if (r != AddressSpace::Result::kOk) {
      for (uint64_t a : m->global_allocations_) memory.Free(a);
      if (at != nullptr && native) return CUDA_ERROR_NOT_SUPPORTED;
      if (r == AddressSpace::Result::kAddressInUse) return CUDA_ERROR_ALREADY_MAPPED;
      if (r == AddressSpace::Result::kInvalid) return CUDA_ERROR_INVALID_VALUE;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->global_allocations_.push_back(address);
    if (g.managed && !native) address = (address + kHostPage - 1) / kHostPage * kHostPage;
    m->global_addresses_.push_back(address);
    uint8_t* host = memory.Translate(address, g.size);
    memcpy(host, g.init.data(), g.init.size());
    // The rest is zero, as a loader makes it (fresh allocations usually are already).
    std::shared_ptr<Allocation> a = memory.Find(address, g.size);
    if (a != nullptr && !a->zeroed) memset(host + g.init.size(), 0, g.size - g.init.size());
  }
  for (size_t i = 0; i < p.globals.size(); ++i) {
    uint8_t* host = memory.Translate(m->global_addresses_[i], p.globals[i].size);
    for (const auto& init : p.globals[i].pointer_inits) {
      const uint64_t value = m->global_addresses_[init.target] + static_cast<uint64_t>(init.addend);
      memcpy(host + init.offset, &value, 8);
    }
  }
  m->consts_ = p.consts;
  for (const Relocation& r : p.relocations) {
    const uint64_t value = m->global_addresses_[r.global] + static_cast<uint64_t>(r.addend);
    for (uint32_t l = 0; l < kWarpSize; ++l) m->consts_[r.const_index * kWarpSize + l] = value;
  }
  m->functions_.resize(p.functions.size());
  for (uint32_t i = 0; i < p.functions.size(); ++i) {
    if (!p.functions[i].is_entry) continue;
    auto f = std::make_shared<FunctionHandle>();
    f->module = m.get();
    f->index = i;
    m->functions_[i] = std::move(f);
  }
  *out = std::move(m);
  return CUDA_SUCCESS;
}

std::shared_ptr<FunctionHandle> Module::Function(const std::string& name) const {
  auto it = program_->function_index.find(name);
  if (it == program_->function_index.end()) return nullptr;
  return functions_[it->second];
}

uint64_t Module::DeviceBytes() const {
  uint64_t bytes = 0;
  for (const GlobalVariable& g : program_->globals) {
    const uint64_t size = GlobalBytes(g);
    bytes += (size + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
  }
  return bytes;
}

std::vector<std::pair<uint64_t, uint64_t>> Module::VariableRanges() const {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (size_t i = 0; i < global_allocations_.size() && i < program_->globals.size(); ++i) {
    ranges.emplace_back(global_allocations_[i], GlobalBytes(program_->globals[i]));
  }
  return ranges;
}

bool Module::Global(const std::string& name, uint64_t* address, uint64_t* size) const {
  auto it = program_->global_index.find(name);
  if (it == program_->global_index.end()) return false;
  *address = global_addresses_[it->second];
  *size = program_->globals[it->second].size;
  return true;
}

void Module::Release() {
  if (released_) return;
  released_ = true;
  for (uint64_t a : global_allocations_) context_->memory().Free(a);
}

Library::Library(std::shared_ptr<const Program> program) : program_(std::move(program)) {
  kernels_.resize(program_->functions.size());
  for (uint32_t i = 0; i < program_->functions.size(); ++i) {
    if (!program_->functions[i].is_entry) continue;
    auto k = std::make_shared<KernelHandle>();
    k->library = this;
    k->index = i;
    kernels_[i] = std::move(k);
  }
}

std::shared_ptr<KernelHandle> Library::Kernel(const std::string& name) const {
  auto it = program_->function_index.find(name);
  if (it == program_->function_index.end()) return nullptr;
  return kernels_[it->second];
}

std::shared_ptr<Module> Library::DropInstance(Context* context) {
  std::lock_guard lock(mu_);
  auto it = instances_.find(context);
  if (it == instances_.end()) return nullptr;
  auto m = std::move(it->second);
  instances_.erase(it);
  return m;
}

std::vector<std::shared_ptr<Module>> Library::DropAll() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Module>> all;
  for (auto& [ctx, m] : instances_) all.push_back(std::move(m));
  instances_.clear();
  return all;
}

}  // namespace softgpu
