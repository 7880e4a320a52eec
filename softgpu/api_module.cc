// Modules, libraries, kernels and parameter layout queries.
#include <cuda.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/jit_log.h"
#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

CUresult LoadModule(CUmodule* module, const void* image, std::string* error = nullptr,
                    const std::vector<uint64_t>* at = nullptr) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<const Program> program;
  if (CUresult r = LoadProgram(image, &program, error); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Module> m;
  if (CUresult r = Module::Create(ctx.get(), std::move(program), &m, at); r != CUDA_SUCCESS) {
    return r;
  }
  RegisterModule(m);
  *module = reinterpret_cast<CUmodule>(m.get());
  return CUDA_SUCCESS;
}

CUresult ParamInfo(const Program& program, uint32_t index, size_t param, size_t* offset,
                   size_t* size) {
  const Function& f = program.functions[index];
  if (param >= f.params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = f.params[param].offset;
  if (size != nullptr) *size = f.params[param].size;
  return CUDA_SUCCESS;
}

CUresult FindLibrary(CUlibrary handle, std::shared_ptr<Library>* out) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  *out = GetDriver().libraries.Find(handle);
  return *out == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult FindKernel(CUkernel handle, std::shared_ptr<KernelHandle>* kernel,
                    std::shared_ptr<Library>* library) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  *kernel = GetDriver().kernels.Find(handle);
  if (*kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *library = GetDriver().libraries.Find((*kernel)->library);
  return *library == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  return Guard([&] { return LoadModule(module, image); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image,
                                                   unsigned int numOptions, CUjit_option* options,
                                                   void** optionValues) {
  return Guard([&] {
    if (numOptions != 0 && (options == nullptr || optionValues == nullptr)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // JIT options do not apply to an interpreter, except the logs, which receive the reason a
    // module is refused.
    std::string error;
    const CUresult r = LoadModule(module, image, &error);
    rgpu::FillJitLogs(numOptions, options, optionValues, error, std::string());
    return r;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return Guard([&] { return LoadModule(module, fatCubin); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::ifstream in(fname, std::ios::binary);
    if (!in) return CUDA_ERROR_FILE_NOT_FOUND;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string data = ss.str();
    data.push_back('\0');
    if (data.size() < 5) return CUDA_ERROR_INVALID_IMAGE;
    return LoadModule(module, data.data());
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Module> m = GetDriver().modules.Find(hmod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    // Let work that may still use the module's globals finish.
    if (std::shared_ptr<Context> ctx = GetDriver().contexts.Find(m->context())) ctx->Synchronize();
    UnregisterModule(m);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod,
                                                    const char* name) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Module> m = GetDriver().modules.Find(hmod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<FunctionHandle> f = m->Function(name);
    if (f == nullptr) return CUDA_ERROR_NOT_FOUND;
    *hfunc = reinterpret_cast<CUfunction>(f.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int* count, CUmodule mod) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Module> m = GetDriver().modules.Find(mod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    unsigned n = 0;
    for (const auto& f : m->functions()) n += f != nullptr;
    *count = n;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction* functions,
                                                           unsigned int numFunctions,
                                                           CUmodule mod) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (functions == nullptr && numFunctions != 0) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Module> m = GetDriver().modules.Find(mod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    unsigned n = 0;
    for (const auto& f : m->functions()) {
      if (f == nullptr) continue;
      if (n >= numFunctions) break;
      functions[n++] = reinterpret_cast<CUfunction>(f.get());
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                                  const char* name) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Module> m = GetDriver().modules.Find(hmod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    uint64_t address, size;
    if (!m->Global(name, &address, &size)) return CUDA_ERROR_NOT_FOUND;
    if (dptr != nullptr) *dptr = address;
    if (bytes != nullptr) *bytes = size;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                                   size_t* paramOffset, size_t* paramSize) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> f;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(func, &f, &m); r != CUDA_SUCCESS) return r;
    return ParamInfo(m->program(), f->index, paramIndex, paramOffset, paramSize);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  return Guard([&] {
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<FunctionHandle> f;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(hfunc, &f, &m); r != CUDA_SUCCESS) return r;
    *name = m->program().functions[f->index].name.c_str();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuFuncGetModule(CUmodule* hmod, CUfunction hfunc) {
  return Guard([&] {
    if (hmod == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<FunctionHandle> f;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(hfunc, &f, &m); r != CUDA_SUCCESS) return r;
    *hmod = reinterpret_cast<CUmodule>(m.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code,
                                                  CUjit_option* jitOptions, void** jitOptionsValues,
                                                  unsigned int numJitOptions,
                                                  CUlibraryOption* libraryOptions,
                                                  void** libraryOptionValues,
                                                  unsigned int numLibraryOptions) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if ((numJitOptions != 0 && (jitOptions == nullptr || jitOptionsValues == nullptr)) ||
        (numLibraryOptions != 0 && (libraryOptions == nullptr || libraryOptionValues == nullptr))) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::shared_ptr<const Program> program;
    if (CUresult r = LoadProgram(code, &program); r != CUDA_SUCCESS) return r;
    auto lib = std::make_shared<Library>(std::move(program));
    Driver& d = GetDriver();
    d.libraries.Add(lib);
    for (const auto& k : lib->kernels()) {
      if (k) d.kernels.Add(k);
    }
    *library = reinterpret_cast<CUlibrary>(lib.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  return Guard([&] {
    std::shared_ptr<Library> lib;
    if (CUresult r = FindLibrary(library, &lib); r != CUDA_SUCCESS) return r;
    Driver& d = GetDriver();
    d.libraries.Remove(lib.get());
    for (const auto& k : lib->kernels()) {
      if (k) d.kernels.Remove(k.get());
    }
    for (const auto& m : lib->DropAll()) {
      if (std::shared_ptr<Context> ctx = GetDriver().contexts.Find(m->context())) {
        ctx->Synchronize();
      }
      UnregisterModule(m);
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library,
                                                   const char* name) {
  return Guard([&] {
    std::shared_ptr<Library> lib;
    if (CUresult r = FindLibrary(library, &lib); r != CUDA_SUCCESS) return r;
    if (pKernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<KernelHandle> k = lib->Kernel(name);
    if (k == nullptr) return CUDA_ERROR_NOT_FOUND;
    *pKernel = reinterpret_cast<CUkernel>(k.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  return Guard([&] {
    std::shared_ptr<Library> l;
    if (CUresult r = FindLibrary(lib, &l); r != CUDA_SUCCESS) return r;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    unsigned n = 0;
    for (const auto& k : l->kernels()) n += k != nullptr;
    *count = n;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  return Guard([&] {
    std::shared_ptr<Library> lib;
    if (CUresult r = FindLibrary(library, &lib); r != CUDA_SUCCESS) return r;
    if (pMod == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Module> m;
    if (CUresult r = lib->Instance(ctx.get(), &m); r != CUDA_SUCCESS) return r;
    *pMod = reinterpret_cast<CUmodule>(m.get());
    return CUDA_SUCCESS;
  });
}

namespace {
// Device `ordinal`'s primary context, retained for the program only when it is not active.
CUresult ActivePrimaryContext(CUdevice ordinal, CUcontext* primary) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  Device* d = FindDevice(ordinal);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  {
    std::lock_guard lock(d->primary_mu);
    if (d->primary != nullptr && d->primary->alive() && d->primary_refcount > 0) {
      *primary = reinterpret_cast<CUcontext>(d->primary.get());
      return CUDA_SUCCESS;
    }
  }
  return cuDevicePrimaryCtxRetain(primary, ordinal);
}

// The address and size of global `name` in `lib`'s instance in `ctx` (either output may be null).
CUresult InstanceGlobal(Library& lib, Context* ctx, const char* name, CUdeviceptr* dptr,
                        size_t* bytes) {
  std::shared_ptr<Module> m;
  if (CUresult r = lib.Instance(ctx, &m); r != CUDA_SUCCESS) return r;
  uint64_t address, size;
  if (!m->Global(name, &address, &size)) return CUDA_ERROR_NOT_FOUND;
  if (dptr != nullptr) *dptr = address;
  if (bytes != nullptr) *bytes = size;
  return CUDA_SUCCESS;
}
}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes,
                                                   CUlibrary library, const char* name) {
  return Guard([&] {
    std::shared_ptr<Library> lib;
    if (CUresult r = FindLibrary(library, &lib); r != CUDA_SUCCESS) return r;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (lib->program().global_index.count(name) == 0) return CUDA_ERROR_NOT_FOUND;
    return InstanceGlobal(*lib, ctx.get(), name, dptr, bytes);
  });
}

// softgpu's own extension: whether the __managed__ variables of modules loaded from now on are
// native (host memory at their device address; the default) or, with 0, on device pages of
// their own for a client that maps them at their addresses itself (rgpu's server says so before
// cuInit). Callable before cuInit.
extern "C" SOFTGPU_EXPORT CUresult softgpuSetNativeManagedVariables(int native) {
  SetNativeManagedVariables(native != 0);
  return CUDA_SUCCESS;
}

// softgpu's own extension: with 0, kernels reach no page-locked host memory (memory.h,
// KernelHostAccess); rgpu's server says so, since contexts of different tenants share its
// process and its page-locked memory is its own. Callable before cuInit.
extern "C" SOFTGPU_EXPORT CUresult softgpuSetKernelHostAccess(int reach) {
  SetKernelHostAccess(reach != 0);
  return CUDA_SUCCESS;
}

// A __managed__ variable of `library` (cudart asks for each one as it loads a program's code).
// Managed memory is per context in softgpu: the variable of the library's instance in the
// current context, or, when none is current (cudart may ask first), in device 0's primary
// context, which this retains for the program once (cudart goes on to use it). Native unless rgpu's
// server said otherwise (softgpuSetNativeManagedVariables): host code then uses the address.
SOFTGPU_EXPORT CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes,
                                                    CUlibrary library, const char* name) {
  return Guard([&] {
    std::shared_ptr<Library> lib;
    if (CUresult r = FindLibrary(library, &lib); r != CUDA_SUCCESS) return r;
    if (name == nullptr || (dptr == nullptr && bytes == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    auto it = lib->program().global_index.find(name);
    if (it == lib->program().global_index.end() || !lib->program().globals[it->second].managed) {
      return CUDA_ERROR_NOT_FOUND;
    }
    std::shared_ptr<Context> ctx;
    if (ContextStack().empty()) {
      // Retained once: while the primary context is active, later lookups use it as it is.
      CUcontext primary = nullptr;
      if (CUresult r = ActivePrimaryContext(0, &primary); r != CUDA_SUCCESS) return r;
      ctx = GetDriver().contexts.Find(primary);
      if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
      if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    } else if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) {
      return r;
    }
    return InstanceGlobal(*lib, ctx.get(), name, dptr, bytes);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  return Guard([&] {
    std::shared_ptr<KernelHandle> k;
    std::shared_ptr<Library> lib;
    if (CUresult r = FindKernel(kernel, &k, &lib); r != CUDA_SUCCESS) return r;
    if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Module> m;
    if (CUresult r = lib->Instance(ctx.get(), &m); r != CUDA_SUCCESS) return r;
    *pFunc = reinterpret_cast<CUfunction>(m->functions()[k->index].get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex,
                                                     size_t* paramOffset, size_t* paramSize) {
  return Guard([&] {
    std::shared_ptr<KernelHandle> k;
    std::shared_ptr<Library> lib;
    if (CUresult r = FindKernel(kernel, &k, &lib); r != CUDA_SUCCESS) return r;
    return ParamInfo(lib->program(), k->index, paramIndex, paramOffset, paramSize);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  return Guard([&] {
    std::shared_ptr<KernelHandle> k;
    std::shared_ptr<Library> lib;
    if (CUresult r = FindKernel(hfunc, &k, &lib); r != CUDA_SUCCESS) return r;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *name = lib->program().functions[k->index].name.c_str();
    return CUDA_SUCCESS;
  });
}

// softgpu's own extension (not part of CUDA): the bytes of device memory module `hmod` holds for
// its global and constant variables, for a server that counts them against a tenant's quota.
extern "C" SOFTGPU_EXPORT CUresult softgpuModuleGetFootprint(CUmodule hmod, size_t* bytes) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Module> m = GetDriver().modules.Find(hmod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *bytes = m->DeviceBytes();
    return CUDA_SUCCESS;
  });
}

// softgpu's own extensions (not part of CUDA), for a server that checkpoints and restores a
// session: the device memory module `hmod`'s variables occupy, one range per variable (*count
// in: the room in `bases` and `sizes`; out: how many there are, CUDA_ERROR_INVALID_VALUE when
// they do not fit; null arrays: only the count) ...
extern "C" SOFTGPU_EXPORT CUresult softgpuModuleGetVariableRanges(CUmodule hmod, CUdeviceptr* bases,
                                                                  size_t* sizes, size_t* count) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Module> m = GetDriver().modules.Find(hmod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    const std::vector<std::pair<uint64_t, uint64_t>> ranges = m->VariableRanges();
    const size_t room = *count;
    *count = ranges.size();
    if (bases == nullptr || sizes == nullptr) return CUDA_SUCCESS;
    if (room < ranges.size()) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ranges.size(); ++i) {
      bases[i] = ranges[i].first;
      sizes[i] = ranges[i].second;
    }
    return CUDA_SUCCESS;
  });
}

// ... and loading an image in the current context with those variables at `bases` (`count` of
// them, as softgpuModuleGetVariableRanges listed them for the same image), their contents as a
// fresh load's. CUDA_ERROR_ALREADY_MAPPED when an address is in use in this process.
extern "C" SOFTGPU_EXPORT CUresult softgpuModuleLoadDataAt(CUmodule* module, const void* image,
                                                           const CUdeviceptr* bases, size_t count) {
  return Guard([&] {
    if (count != 0 && bases == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const std::vector<uint64_t> at(bases, bases + count);
    return LoadModule(module, image, nullptr, &at);
  });
}
