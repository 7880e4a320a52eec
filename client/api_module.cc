// Modules, libraries, kernels and launches. Images are copied whole to the server, which loads
// them on its backend; each kernel's argument layout comes back with its handle and is cached,
// so a launch packs its arguments and sends them in one message.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/impl.h"
#include "client/managed_memory.h"
#include "client/memory_map.h"
#include "common/fatbin.h"
#include "common/jit_log.h"

namespace calls = rgpu::calls;
using rgpu::client::ClientState;
using rgpu::client::ObjectKind;
using rgpu::client::RequireContext;
using rgpu::client::Server;

namespace {

// A kernel's handle and what the server told of it (ModuleGetFunction's answer, or one entry
// of a module load's listing), registered with module `m` under `name` (objects_mutex held).
CUfunc_st* AddFunction(CUmod_st* m, const std::string& name, uint64_t remote, uint64_t max_threads,
                       uint64_t static_shared, uint64_t max_dynamic_shared, const uint64_t* params,
                       uint64_t param_count) {
  auto* f = new CUfunc_st();
  f->remote = remote;
  f->max_threads = static_cast<uint32_t>(max_threads);
  f->static_shared = static_cast<uint32_t>(static_shared);
  f->max_dynamic_shared = static_cast<uint32_t>(max_dynamic_shared);
  f->ctx = m->ctx;
  f->module = m;
  f->name = name;
  for (uint64_t i = 0; i < param_count; ++i) {
    rgpu::client::ParamSlot p{static_cast<uint32_t>(params[2 * i]),
                              static_cast<uint32_t>(params[2 * i + 1])};
    f->params.push_back(p);
    f->params_bytes = std::max(f->params_bytes, p.offset + p.size);
  }
  ClientState::Get().Register(f);
  m->functions.emplace(name, f);
  return f;
}

// Takes a module load's listing of its kernels (names NUL-terminated in `names`); false when it
// does not add up (nothing is taken then).
bool TakeListing(CUmod_st* m, const std::vector<uint64_t>& list, const char* names, size_t size) {
  struct Entry {
    std::string name;
    size_t at;
  };
  std::vector<Entry> entries;
  size_t name_at = 0;
  for (size_t i = 0; i < list.size();) {
    if (i + 5 > list.size() || list[i + 4] > (list.size() - i - 5) / 2) return false;
    const void* end = memchr(names + name_at, '\0', size - name_at);
    if (name_at >= size || end == nullptr) return false;
    const size_t length = static_cast<const char*>(end) - (names + name_at);
    entries.push_back({std::string(names + name_at, length), i});
    name_at += length + 1;
    i += 5 + 2 * list[i + 4];
  }
  if (name_at != size) return false;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  for (const Entry& e : entries) {
    const uint64_t* x = &list[e.at];
    AddFunction(m, e.name, x[0], x[1], x[2], x[3], x + 5, x[4]);
  }
  m->all_functions = true;
  return true;
}

CUresult LoadImage(const std::string& image, CUctx_st* ctx, CUmod_st** out) {
  calls::ModuleLoadData::Results loaded;
  // The kernels' names, when the server lists them (at most 64 KiB).
  std::vector<char> names(size_t{64} << 10);
  size_t names_size = 0;
  CUresult r =
      Server().Call<calls::ModuleLoadData>(ctx->remote, {}, &loaded, image.data(), image.size(),
                                           {names.data(), names.size()}, &names_size);
  if (r != CUDA_SUCCESS) return r;
  auto* m = new CUmod_st();
  m->remote = loaded.module;
  m->ctx = ctx;
  m->generation = ctx->generation;
  ClientState::Get().Register(m);
  if (loaded.listed && !TakeListing(m, loaded.functions, names.data(), names_size)) {
    RGPU_LOG_WARN("a module's kernel listing did not add up; asking for kernels by name");
  }
  *out = m;
  return CUDA_SUCCESS;
}

CUresult LoadFromMemory(const void* image, CUmodule* out) {
  if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  std::string bytes;
  rgpu::Status s = rgpu::fatbin::CopyStandaloneImage(image, &bytes);
  if (!s.ok()) {
    RGPU_LOG_ERROR("cannot read module image: %s", s.ToString().c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return LoadImage(bytes, ctx, out);
}

CUresult CheckModule(CUmodule m) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(m) || m->kind != ObjectKind::kModule) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  r = rgpu::client::CheckContext(m->ctx);
  if (r != CUDA_SUCCESS) return r;
  // A module of an earlier incarnation of its (primary) context died with it.
  return m->generation == m->ctx->generation ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// The function `name` of module `m`, fetched once and cached (handles are stable per name).
CUresult GetFunction(CUmod_st* m, const char* name, CUfunc_st** out) {
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  auto it = m->functions.find(name);
  if (it != m->functions.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  if (m->all_functions) return CUDA_ERROR_NOT_FOUND;  // the module listed all of its kernels
  calls::ModuleGetFunction::Results got;
  CUresult r = Server().Call<calls::ModuleGetFunction>(m->ctx->remote, {.module = m->remote}, &got,
                                                       name, strlen(name) + 1);
  if (r != CUDA_SUCCESS) return r;
  // param_count (offset, size) pairs
  const uint64_t count = got.param_count;
  const std::vector<uint64_t>& slots = got.param_offsets_and_sizes;
  if (slots.size() != 2 * count) return CUDA_ERROR_UNKNOWN;
  *out = AddFunction(m, name, got.function, got.max_threads_per_block, got.static_shared_bytes,
                     got.max_dynamic_shared_bytes, slots.data(), count);
  return CUDA_SUCCESS;
}

void ForgetModule(CUmod_st* m) {
  for (uint64_t g : m->globals) {
    rgpu::client::ForgetAdopted(g);  // a __managed__ variable's pages in this process
    rgpu::client::Memory().Erase(g);
  }
  for (auto& [name, f] : m->functions) {
    ClientState::Get().Unregister(f);
    delete f;
  }
  ClientState::Get().Unregister(m);
  delete m;
}

}  // namespace
extern "C" CUresult rgpu_impl_cuModuleUnload(CUmodule m);
namespace {

// The module of library `lib` in context `ctx`, loaded on first use there.
CUresult LibraryModule(CUlib_st* lib, CUctx_st* ctx, CUmod_st** out) {
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    auto it = lib->modules.find(ctx);
    if (it != lib->modules.end()) {
      if (it->second->generation == ctx->generation) {
        *out = it->second;
        return CUDA_SUCCESS;
      }
      // Loaded into an earlier incarnation of the context (before a reset): gone with it.
      ForgetModule(it->second);
      lib->modules.erase(it);
    }
  }
  CUmod_st* m = nullptr;
  CUresult r = LoadImage(lib->image, ctx, &m);
  if (r != CUDA_SUCCESS) return r;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    auto it = lib->modules.find(ctx);
    if (lib->unloading) {
      r = CUDA_ERROR_INVALID_HANDLE;  // unloaded meanwhile: this module goes too
    } else if (it == lib->modules.end()) {
      lib->modules[ctx] = m;
      *out = m;
      return CUDA_SUCCESS;
    } else {
      *out = it->second;  // another thread loaded it first: its module stays, this one goes
    }
  }
  rgpu_impl_cuModuleUnload(m);
  return r;
}

CUresult CheckLibrary(CUlibrary lib) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(lib) || lib->kind != ObjectKind::kLibrary) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

namespace rgpu::client {

CUresult ResolveFunction(CUfunction f, CUfunc_st** out) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->kind == ObjectKind::kFunction) {
    *out = f;
    r = rgpu::client::CheckContext(f->ctx);
    if (r != CUDA_SUCCESS) return r;
    return f->module->generation == f->ctx->generation ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  }
  auto* k = reinterpret_cast<CUkern_st*>(f);
  if (k->kind != ObjectKind::kKernel) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx;
  r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUmod_st* m;
  r = LibraryModule(k->library, ctx, &m);
  if (r != CUDA_SUCCESS) return r;
  return GetFunction(m, k->name.c_str(), out);
}

// The kernel names of module `m`, NUL-terminated back to back, and how many there are: one round
// trip when they fit in the first buffer, two otherwise.
CUresult ModuleFunctionNames(CUmodule m, std::string* names, uint32_t* count) {
  size_t capacity = 4096;
  for (;;) {
    names->assign(capacity, '\0');
    calls::ModuleFunctionNames::Results got;
    size_t bytes = 0;
    CUresult r = Server().Call<calls::ModuleFunctionNames>(
        m->ctx->remote, {.module = m->remote, .capacity = capacity}, &got, nullptr, 0,
        rgpu::client::ReplyBuffer{names->data(), names->size()}, &bytes);
    if (r != CUDA_SUCCESS) return r;
    if (got.bytes <= capacity) {
      if (bytes != got.bytes) return CUDA_ERROR_UNKNOWN;
      names->resize(bytes);
      *count = got.count;
      return CUDA_SUCCESS;
    }
    if (capacity != 4096) return CUDA_ERROR_UNKNOWN;  // grew between two calls
    capacity = got.bytes;
  }
}

// The kernel names of module `m` one by one (ModuleFunctionNames split, and checked against the
// count the server gave).
CUresult ModuleFunctionNameList(CUmodule m, std::vector<std::string>* out) {
  std::string names;
  uint32_t count = 0;
  if (CUresult r = ModuleFunctionNames(m, &names, &count); r != CUDA_SUCCESS) return r;
  out->clear();
  for (size_t at = 0; at < names.size();) {
    const size_t end = names.find('\0', at);
    if (end == std::string::npos) return CUDA_ERROR_UNKNOWN;
    out->push_back(names.substr(at, end - at));
    at = end + 1;
  }
  return out->size() == count ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

CUresult ModuleFunctions(CUmodule m, std::vector<CUfunction>* out) {
  CUresult r = CheckModule(m);
  if (r != CUDA_SUCCESS) return r;
  std::vector<std::string> names;
  if ((r = ModuleFunctionNameList(m, &names)) != CUDA_SUCCESS) return r;
  out->clear();
  for (const std::string& name : names) {
    CUfunc_st* f;
    if ((r = GetFunction(m, name.c_str(), &f)) != CUDA_SUCCESS) return r;
    out->push_back(f);
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client

RGPU_IMPL(cuModuleGetFunctionCount)(unsigned int* count, CUmodule m) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckModule(m);
  if (r != CUDA_SUCCESS) return r;
  std::string names;
  uint32_t n = 0;
  r = rgpu::client::ModuleFunctionNames(m, &names, &n);
  if (r == CUDA_SUCCESS) *count = n;
  return r;
}

RGPU_IMPL(cuModuleEnumerateFunctions)(CUfunction* functions, unsigned int n, CUmodule m) {
  if (functions == nullptr && n > 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUfunction> all;
  CUresult r = rgpu::client::ModuleFunctions(m, &all);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < std::min<size_t>(n, all.size()); ++i) functions[i] = all[i];
  return CUDA_SUCCESS;
}

using rgpu::client::ResolveFunction;

RGPU_IMPL(cuModuleLoadData)(CUmodule* out, const void* image) { return LoadFromMemory(image, out); }

namespace {

// The outputs of cuModuleLoadDataEx's JIT options, as the driver fills them: each log buffer the
// program gave holds a NUL-terminated log (empty on success; on failure the error log says so),
// the wall time is the load's, in ms.
void FillJitOutputs(unsigned count, const CUjit_option* options, void** values, CUresult result,
                    float milliseconds) {
  if (options == nullptr || values == nullptr) return;
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_WALL_TIME) memcpy(&values[i], &milliseconds, sizeof milliseconds);
  }
  std::string error_log;
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    rgpu_impl_cuGetErrorName(result, &name);
    error_log = std::string("rgpu: the server could not load the module (") +
                (name != nullptr ? name : "error") + "); its log names the reason";
  }
  rgpu::FillJitLogs(count, options, values, error_log, std::string());
}

}  // namespace

RGPU_IMPL(cuModuleLoadDataEx)
(CUmodule* out, const void* image, unsigned int count, CUjit_option* options, void** values) {
  // JIT options tune a compiler the server runs, if any; they do not change the result. Their
  // outputs (logs, wall time) are filled as the driver fills them.
  const auto start = std::chrono::steady_clock::now();
  const CUresult r = LoadFromMemory(image, out);
  const float ms =
      std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - start).count();
  FillJitOutputs(count, options, values, r, ms);
  return r;
}

RGPU_IMPL(cuModuleLoadFatBinary)(CUmodule* out, const void* image) {
  return LoadFromMemory(image, out);
}

namespace rgpu::client {
bool ReadWholeFile(const char* path, std::string* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::stringstream contents;
  contents << file.rdbuf();
  *out = contents.str();
  return !file.bad();  // opened, but not readable (a directory)
}
}  // namespace rgpu::client

RGPU_IMPL(cuModuleLoad)(CUmodule* out, const char* path) {
  if (out == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string data;
  if (!rgpu::client::ReadWholeFile(path, &data)) return CUDA_ERROR_FILE_NOT_FOUND;
  data.push_back('\0');  // PTX text must be terminated
  return LoadFromMemory(data.data(), out);
}

RGPU_IMPL(cuModuleUnload)(CUmodule m) {
  CUresult r = CheckModule(m);
  if (r != CUDA_SUCCESS) return r;
  r = Server().Call<calls::ModuleUnload>(m->ctx->remote, {.module = m->remote});
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  ForgetModule(m);
  return r;
}

RGPU_IMPL(cuModuleGetFunction)(CUfunction* out, CUmodule m, const char* name) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckModule(m);
  if (r != CUDA_SUCCESS) return r;
  return GetFunction(m, name, out);
}

RGPU_IMPL(cuModuleGetGlobal_v2)(CUdeviceptr* dptr, size_t* bytes, CUmodule m, const char* name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckModule(m);
  if (r != CUDA_SUCCESS) return r;
  calls::ModuleGetGlobal::Results global;
  r = Server().Call<calls::ModuleGetGlobal>(m->ctx->remote, {.module = m->remote}, &global, name,
                                            strlen(name) + 1);
  if (r != CUDA_SUCCESS) return r;
  // The global is device memory of the module's context: copies may name it.
  if (global.bytes > 0 && !rgpu::client::Memory().Find(global.dptr)) {
    rgpu::client::MemoryRange range;
    range.base = global.dptr;
    range.size = global.bytes;
    range.type = CU_MEMORYTYPE_DEVICE;
    range.ctx = m->ctx;
    range.freeable = false;
    // A global at another server's device addresses cannot be told apart from them.
    if (!rgpu::client::Memory().Insert(range)) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    m->globals.push_back(global.dptr);
  }
  if (dptr != nullptr) *dptr = global.dptr;
  if (bytes != nullptr) *bytes = global.bytes;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuLibraryLoadData)
(CUlibrary* out, const void* code, CUjit_option*, void**, unsigned int, CUlibraryOption*, void**,
 unsigned int) {
  if (out == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  auto* lib = new CUlib_st();
  rgpu::Status s = rgpu::fatbin::CopyStandaloneImage(code, &lib->image);
  if (!s.ok()) {
    delete lib;
    RGPU_LOG_ERROR("cannot read library image: %s", s.ToString().c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  ClientState::Get().Register(lib);
  *out = lib;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuLibraryLoadFromFile)
(CUlibrary* out, const char* path, CUjit_option* jit_options, void** jit_values,
 unsigned int jit_count, CUlibraryOption* library_options, void** library_values,
 unsigned int library_count) {
  if (out == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  std::string data;
  if (!rgpu::client::ReadWholeFile(path, &data)) return CUDA_ERROR_FILE_NOT_FOUND;
  data.push_back('\0');  // PTX text must be terminated
  return rgpu_impl_cuLibraryLoadData(out, data.data(), jit_options, jit_values, jit_count,
                                     library_options, library_values, library_count);
}

RGPU_IMPL(cuLibraryUnload)(CUlibrary lib) {
  CUresult r = CheckLibrary(lib);
  if (r != CUDA_SUCCESS) return r;
  std::map<CUctx_st*, CUmod_st*> modules;
  std::map<std::string, CUkern_st*> kernels;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (lib->unloading) return CUDA_ERROR_INVALID_HANDLE;  // another thread unloads it
    lib->unloading = true;
    modules.swap(lib->modules);
    kernels.swap(lib->kernels);
  }
  // Its kernel handles go with it: a later use of one is refused as an unknown handle.
  for (auto& [name, k] : kernels) {
    ClientState::Get().Unregister(k);
    delete k;
  }
  for (auto& [ctx, m] : modules) {
    if (!ClientState::Get().IsLive(m)) continue;
    if (CheckModule(m) == CUDA_SUCCESS) {
      rgpu_impl_cuModuleUnload(m);
    } else {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      ForgetModule(m);  // its context is gone already
    }
  }
  ClientState::Get().Unregister(lib);
  delete lib;
  return CUDA_SUCCESS;
}

namespace {

// The handle of `lib`'s kernel `name`, the same for every request of that name. The name is
// checked against the library's image where its module is loaded (cuKernelGetFunction, a
// launch), not here: cudart asks for every kernel of every image it registers at start-up,
// before any context exists, and a module loaded for each would load them all.
CUkern_st* KernelOf(CUlibrary lib, const std::string& name) {
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (lib->unloading) return nullptr;  // none for a library being unloaded
  CUkern_st*& k = lib->kernels[name];
  if (k == nullptr) {
    k = new CUkern_st();
    k->library = lib;
    k->name = name;
    ClientState::Get().Register(k);
  }
  return k;
}

CUresult CheckKernel(CUkernel kernel) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(kernel) || kernel->kind != ObjectKind::kKernel) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

// The context a library is loaded in for a question about its image that only a loaded module
// answers: the current one, or device 0's primary context when none is (as cudart would use),
// retained only when it is not active already (once, not at every question).
CUresult LibraryContext(CUctx_st** out) {
  CUctx_st* ctx = rgpu::client::CurrentContext();
  if (ctx == nullptr) {
    ctx = ClientState::Get().primary_context(0);
    if (ctx == nullptr) return CUDA_ERROR_NO_DEVICE;
    if (rgpu::client::CheckContext(ctx) != CUDA_SUCCESS) {
      CUcontext primary = nullptr;
      CUresult r = rgpu_impl_cuDevicePrimaryCtxRetain(&primary, 0);
      if (r != CUDA_SUCCESS) return r;
      ctx = primary;
    }
  }
  *out = ctx;
  return CUDA_SUCCESS;
}

// The kernels of `lib`, in the order its module lists its functions.
CUresult LibraryKernels(CUlibrary lib, std::vector<CUkern_st*>* out) {
  CUresult r = CheckLibrary(lib);
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  if ((r = LibraryContext(&ctx)) != CUDA_SUCCESS) return r;
  CUmodule m;
  if ((r = LibraryModule(lib, ctx, &m)) != CUDA_SUCCESS) return r;
  std::vector<std::string> names;
  if ((r = rgpu::client::ModuleFunctionNameList(m, &names)) != CUDA_SUCCESS) return r;
  out->clear();
  for (const std::string& name : names) {
    CUkern_st* k = KernelOf(lib, name);
    if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    out->push_back(k);
  }
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_IMPL(cuLibraryGetKernel)(CUkernel* out, CUlibrary lib, const char* name) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckLibrary(lib);
  if (r != CUDA_SUCCESS) return r;
  CUkern_st* k = KernelOf(lib, name);
  if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *out = k;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuLibraryGetKernelCount)(unsigned int* count, CUlibrary lib) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUkern_st*> kernels;
  CUresult r = LibraryKernels(lib, &kernels);
  if (r == CUDA_SUCCESS) *count = static_cast<unsigned>(kernels.size());
  return r;
}

RGPU_IMPL(cuLibraryEnumerateKernels)(CUkernel* out, unsigned int n, CUlibrary lib) {
  if (out == nullptr && n > 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUkern_st*> kernels;
  CUresult r = LibraryKernels(lib, &kernels);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < std::min<size_t>(n, kernels.size()); ++i) out[i] = kernels[i];
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuKernelGetName)(const char** name, CUkernel kernel) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckKernel(kernel);
  if (r != CUDA_SUCCESS) return r;
  *name = kernel->name.c_str();  // the handle's, which lives as long as its library
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuKernelGetLibrary)(CUlibrary* lib, CUkernel kernel) {
  if (lib == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckKernel(kernel);
  if (r != CUDA_SUCCESS) return r;
  *lib = kernel->library;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuLibraryGetModule)(CUmodule* out, CUlibrary lib) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckLibrary(lib);
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  return LibraryModule(lib, ctx, out);
}

RGPU_IMPL(cuLibraryGetGlobal)(CUdeviceptr* dptr, size_t* bytes, CUlibrary lib, const char* name) {
  CUmodule m;
  CUresult r = rgpu_impl_cuLibraryGetModule(&m, lib);
  if (r != CUDA_SUCCESS) return r;
  return rgpu_impl_cuModuleGetGlobal_v2(dptr, bytes, m, name);
}

// A __managed__ variable (cudart asks for each one when it loads the library): the module's
// global, which the server keeps on pages of its own, becomes managed memory at the same address
// here (client/managed_memory.h), so host code and kernels share it.
// cudart asks before any context is current: the variable then lives in device 0's primary
// context, the one cudart goes on to use.
RGPU_IMPL(cuLibraryGetManaged)(CUdeviceptr* dptr, size_t* bytes, CUlibrary lib, const char* name) {
  CUresult r = CheckLibrary(lib);
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  if ((r = LibraryContext(&ctx)) != CUDA_SUCCESS) return r;
  CUmodule m;
  r = LibraryModule(lib, ctx, &m);
  if (r != CUDA_SUCCESS) return r;
  CUdeviceptr address = 0;
  size_t size = 0;
  r = rgpu_impl_cuModuleGetGlobal_v2(&address, &size, m, name);
  if (r != CUDA_SUCCESS) return r;
  r = rgpu::client::AdoptManaged(m->ctx, address, size);
  if (r != CUDA_SUCCESS) return r;
  if (dptr != nullptr) *dptr = address;
  if (bytes != nullptr) *bytes = size;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuKernelGetFunction)(CUfunction* out, CUkernel kernel) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ResolveFunction(reinterpret_cast<CUfunction>(kernel), out);
}

namespace {

int DeviceAttribute(int device, CUdevice_attribute a) {
  int v = 0;
  rgpu_impl_cuDeviceGetAttribute(&v, a, device);
  return v;
}

// The driver's answer to an impossible grid or block shape. cuda.h names no such code, but
// NVIDIA's driver returns 9 here, which cudart reports as cudaErrorInvalidConfiguration
// (observed: with CUDA_ERROR_INVALID_VALUE instead, cudart reports cudaErrorInvalidValue).
constexpr CUresult kInvalidConfiguration = static_cast<CUresult>(9);

// The checks the driver makes when a launch is issued, made here so that a bad configuration
// fails at the launch (as CUDA's does) even though the launch itself is posted.
CUresult CheckLaunch(CUfunc_st* fn, const unsigned grid[3], const unsigned block[3],
                     unsigned shared) {
  const int dev = fn->ctx->device;
  static const CUdevice_attribute kGrid[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                              CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                              CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  static const CUdevice_attribute kBlock[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                               CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                               CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  uint64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || grid[i] > static_cast<unsigned>(DeviceAttribute(dev, kGrid[i]))) {
      return kInvalidConfiguration;
    }
    if (block[i] == 0 || block[i] > static_cast<unsigned>(DeviceAttribute(dev, kBlock[i]))) {
      return kInvalidConfiguration;
    }
    threads *= block[i];
  }
  if (threads >
      static_cast<uint64_t>(DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK))) {
    return kInvalidConfiguration;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (fn->max_threads != 0 && threads > fn->max_threads) return kInvalidConfiguration;
  const uint64_t optin =
      DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (static_cast<uint64_t>(fn->static_shared) + shared > std::max<uint64_t>(optin, 48 * 1024)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (fn->max_dynamic_shared != 0 && shared > fn->max_dynamic_shared) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

namespace rgpu::client {

CUresult PackArguments(CUfunc_st* fn, void** params, void** extra, std::string* args) {
  args->assign(fn->params_bytes, '\0');
  if (params != nullptr) {
    for (size_t i = 0; i < fn->params.size(); ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      memcpy(&(*args)[fn->params[i].offset], params[i], fn->params[i].size);
    }
  } else if (extra != nullptr) {
    const void* buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<size_t*>(extra[i + 1]);
    }
    if (buffer == nullptr || size < fn->params_bytes) return CUDA_ERROR_INVALID_VALUE;
    memcpy(args->data(), buffer, fn->params_bytes);
  } else if (!fn->params.empty()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client

namespace {

// A launch: packs the arguments by the function's layout and sends them on the stream (or makes
// a graph node of it, or holds it behind a host function). A cooperative launch, or one with a
// cluster shape (`cluster`: CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION), is called, so that a grid the
// device cannot run fails here, as it does on the driver.
CUresult Launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,
                void** params, void** extra, bool cooperative,
                const CUlaunchAttribute* cluster = nullptr) {
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  r = rgpu::client::ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  if (ctx != fn->ctx) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  r = CheckLaunch(fn, grid, block, shmem);
  if (r != CUDA_SUCCESS) return r;
  std::string args;
  r = rgpu::client::PackArguments(fn, params, extra, &args);
  if (r != CUDA_SUCCESS) return r;
  // A cluster shape travels as given (the backend judges it); on the wire all 0s mean none, so a
  // zero dimension is refused here (the server refuses one too).
  uint32_t cluster_x = 0, cluster_y = 0, cluster_z = 0;
  if (cluster != nullptr) {
    cluster_x = cluster->value.clusterDim.x;
    cluster_y = cluster->value.clusterDim.y;
    cluster_z = cluster->value.clusterDim.z;
    if (cluster_x == 0 || cluster_y == 0 || cluster_z == 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  auto launch = [=, args = std::move(args)](CUstream s) {
    CUctx_st* launch_ctx;
    uint64_t launch_stream = 0;
    CUresult lr = rgpu::client::ResolveStream(s, &launch_ctx, &launch_stream);
    if (lr != CUDA_SUCCESS) return lr;
    if (launch_ctx != fn->ctx) return CUDA_ERROR_INVALID_HANDLE;
    // Managed memory the host wrote reaches the device first; the host gives it up meanwhile.
    if (CUresult mr = rgpu::client::BeforeDeviceWork(); mr != CUDA_SUCCESS) return mr;
    // The two launch operations take the same fields.
    auto fill = [&](auto a) {
      a.function = fn->remote;
      a.grid_x = gx;
      a.grid_y = gy;
      a.grid_z = gz;
      a.block_x = bx;
      a.block_y = by;
      a.block_z = bz;
      a.shared_bytes = shmem;
      a.stream = launch_stream;
      return a;
    };
    if (cooperative || cluster_x != 0) {
      calls::LaunchKernelEx::Args a = fill(calls::LaunchKernelEx::Args{});
      a.cooperative = cooperative;
      a.cluster_x = cluster_x;
      a.cluster_y = cluster_y;
      a.cluster_z = cluster_z;
      return Server().Call<calls::LaunchKernelEx>(launch_ctx->remote, a, nullptr, args.data(),
                                                  args.size());
    }
    return Server().Post<calls::LaunchKernel>(launch_ctx->remote, fill(calls::LaunchKernel::Args{}),
                                              args.data(), args.size());
  };
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_KERNEL, launch, /*recordable=*/true)) {
    return CUDA_SUCCESS;
  }
  return launch(stream);
}

}  // namespace

RGPU_IMPL(cuLaunchKernel)
(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
 unsigned int bz, unsigned int shmem, CUstream stream, void** params, void** extra) {
  return Launch(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra, false);
}
RGPU_PER_THREAD_SAME_AS(cuLaunchKernel_ptsz)

RGPU_IMPL(cuLaunchCooperativeKernel)
(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
 unsigned int bz, unsigned int shmem, CUstream stream, void** params) {
  return Launch(f, gx, gy, gz, bx, by, bz, shmem, stream, params, nullptr, true);
}
RGPU_PER_THREAD_SAME_AS(cuLaunchCooperativeKernel_ptsz)

RGPU_IMPL(cuFuncGetParamInfo)(CUfunction f, size_t index, size_t* offset, size_t* size) {
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  if (index >= fn->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = fn->params[index].offset;
  if (size != nullptr) *size = fn->params[index].size;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuKernelGetParamInfo)(CUkernel k, size_t index, size_t* offset, size_t* size) {
  return rgpu_impl_cuFuncGetParamInfo(reinterpret_cast<CUfunction>(k), index, offset, size);
}

namespace {

// Names a launch attribute rgpu refuses, once per attribute, at warn level.
CUresult RefuseAttribute(CUlaunchAttributeID id, const char* why) {
  static std::atomic<uint32_t> reported{0};
  const uint32_t bit = 1u << (static_cast<uint32_t>(id) & 31);
  if ((reported.fetch_or(bit, std::memory_order_relaxed) & bit) == 0) {
    RGPU_LOG_WARN("cuLaunchKernelEx: launch attribute %d refused: %s", static_cast<int>(id), why);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace

// cuLaunchKernelEx: a launch with attributes. Each attribute is honoured or refused:
// - hints that promise nothing observable are honoured by launching as usual: the access policy
//   window and shared-memory carveout (cache hints), priority (the GPU runs this session's work in
//   stream order either way), memory synchronization domains, NVLink scheduling, and
//   programmatic stream serialization (which allows, never requires, overlap with the previous
//   kernel);
// - the programmatic and launch-completion events are recorded on the stream after the kernel:
//   all its blocks have then started, triggered and finished, so the event never fires early;
// - a cooperative launch is one (its blocks all resident, grid-wide synchronization);
// - a cluster shape goes to the backend with the launch, which runs the clusters or refuses the
//   shape as the driver does; a preferred (substitute) cluster shape is a best-effort grouping
//   the regular clusters always satisfy;
// - graph-only attributes are refused with CUDA_ERROR_NOT_SUPPORTED, naming the attribute at
//   warn level.
RGPU_IMPL(cuLaunchKernelEx)
(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct EventAfter {
    CUevent event;
    unsigned flags;
  };
  std::vector<EventAfter> events;
  bool cooperative = false;
  const CUlaunchAttribute* cluster = nullptr;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_IGNORE:
      case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        cooperative = a.value.cooperative != 0;
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        cluster = &a;
        break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        if (a.value.programmaticEvent.event == nullptr) return CUDA_ERROR_INVALID_VALUE;
        events.push_back({a.value.programmaticEvent.event,
                          static_cast<unsigned>(a.value.programmaticEvent.flags)});
        break;
      case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        if (a.value.launchCompletionEvent.event == nullptr) return CUDA_ERROR_INVALID_VALUE;
        events.push_back({a.value.launchCompletionEvent.event,
                          static_cast<unsigned>(a.value.launchCompletionEvent.flags)});
        break;
      default:
        return RefuseAttribute(a.id, "not supported");
    }
  }
  for (const EventAfter& e : events) {
    if (e.flags & CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = Launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                      config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                      params, extra, cooperative, cluster);
  for (const EventAfter& e : events) {
    if (r != CUDA_SUCCESS) break;
    r = rgpu_impl_cuEventRecordWithFlags(e.event, config->hStream, e.flags);
  }
  return r;
}
RGPU_PER_THREAD_SAME_AS(cuLaunchKernelEx_ptsz)

// The module a kernel's handle came from (kept by the client with the handle).
RGPU_IMPL(cuFuncGetModule)(CUmodule* module, CUfunction f) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fs;
  CUresult r = rgpu::client::ResolveFunction(f, &fs);
  if (r != CUDA_SUCCESS) return r;
  *module = fs->module;
  return CUDA_SUCCESS;
}

// A module is loaded whole on the server (its load lists every kernel), so every function handle
// the program holds names a loaded function: cuFuncIsLoaded says so and cuFuncLoad has nothing to
// do beyond checking the handle.
RGPU_IMPL(cuFuncIsLoaded)(CUfunctionLoadingState* state, CUfunction f) {
  if (state == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fs;
  CUresult r = rgpu::client::ResolveFunction(f, &fs);
  if (r != CUDA_SUCCESS) return r;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuFuncLoad)(CUfunction f) {
  CUfunc_st* fs;
  return rgpu::client::ResolveFunction(f, &fs);
}

// The kernel's name as its module names it (kept by the client since cuModuleGetFunction).
RGPU_IMPL(cuFuncGetName)(const char** name, CUfunction f) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fs;
  CUresult r = rgpu::client::ResolveFunction(f, &fs);
  if (r != CUDA_SUCCESS) return r;
  *name = fs->name.c_str();
  return CUDA_SUCCESS;
}
