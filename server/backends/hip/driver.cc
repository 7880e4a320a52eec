// The CUDA driver entry points rgpu-server calls on its backend (server/driver_api.def),
// implemented on an AMD GPU with the HIP runtime, so that the server drives AMD GPUs with the same
// code as NVIDIA's driver and the software GPU. Contexts are devices (HIP has one context per
// device); handles are HIP's, except modules and functions, which carry the code object's
// kernel metadata (the argument layout the server reports to clients).
//
// A module whose code cannot run on the device (CUDA code, or AMDGPU code for another processor)
// is refused with CUDA_ERROR_NO_BINARY_FOR_GPU and a line on stderr saying why.
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/fatbin.h"
#include "interpose/hip/offload_bundle.h"  // IsOffloadBundle
#include "server/backends/hip/code_object.h"
#include "server/backends/hip/hip_runtime.h"

#define BACKEND_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using rgpu::hipbackend::CodeObjectInfo;
using rgpu::hipbackend::HipRuntime;
using rgpu::hipbackend::KernelInfo;

const HipRuntime* g_hip = nullptr;  // set by cuInit

struct Function;
struct Module;

// A CUDA context owns what was created in it, and destroying it releases all of that (the server
// relies on this when a tenant leaves); HIP has no such owner, so the context keeps the lists.
struct Context {
  int device = 0;
  std::mutex mu;
  std::set<void*> allocations, streams, events;
  std::set<Module*> modules;
};

struct Module {
  void* module = nullptr;
  std::string image;  // the code object, kept while loaded (HIP may read it after the load)
  CodeObjectInfo info;
  std::vector<std::unique_ptr<Function>> functions;
};

struct Function {
  void* function = nullptr;
  const KernelInfo* kernel = nullptr;
};

thread_local Context* t_current = nullptr;

void Say(const std::string& line) { fprintf(stderr, "hip backend: %s\n", line.c_str()); }

// HIP's error numbers follow CUDA's driver results.
CUresult R(int hip_error) { return static_cast<CUresult>(hip_error); }

CUresult Ready() { return g_hip != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

// The processor ("gfx90a") of `device`.
std::string Processor(int device) {
  rgpu::hip::DeviceProp p;
  memset(&p, 0, sizeof p);
  if (g_hip->hipGetDeviceProperties(&p, device) != 0) return "";
  std::string arch(p.gcnArchName, strnlen(p.gcnArchName, sizeof p.gcnArchName));
  return arch.substr(0, arch.find(':'));
}

// The HIP attribute holding CUDA attribute `a`, or -1, from the table the client's HIP runtime
// reads the other way round (the first HIP attribute naming `a` wins).
int HipAttribute(CUdevice_attribute a) {
  struct Pair {
    int hip, cu;
  };
  static constexpr Pair kPairs[] = {
#define HIP_ATTRIBUTE(name, value, cu) {value, cu},
#include "interpose/hip/device_attributes.def"
#undef HIP_ATTRIBUTE
  };
  for (const Pair& p : kPairs) {
    if (p.cu == static_cast<int>(a)) return p.hip;
  }
  return -1;
}

// What a module image that is no AMDGPU code is, for the refusal's log line.
std::string DescribeForeignImage(const uint8_t* p) {
  uint32_t magic;
  memcpy(&magic, p, sizeof magic);
  if (magic == 0x466243b1 || magic == 0xba55ed50) {
    return "it is a CUDA fat binary, which an AMD GPU cannot run";
  }
  if (memcmp(p,
             "\x7f"
             "ELF",
             4) == 0) {
    uint16_t machine;
    memcpy(&machine, p + 18, sizeof machine);
    if (machine == 190) return "it is a CUDA cubin, which an AMD GPU cannot run";
    return "it is an ELF image for machine " + std::to_string(machine) + ", not AMDGPU code";
  }
  if (memcmp(p, ".version", 8) == 0 || memcmp(p, "//", 2) == 0) {
    return "it is CUDA PTX, which an AMD GPU cannot run";
  }
  return "it is not a code object (neither AMDGPU code nor an offload bundle)";
}

// Records `handle` in the current context's list `member` (see Context).
template <typename T>
void Own(std::set<T> Context::*member, T handle) {
  if (t_current == nullptr) return;
  std::lock_guard<std::mutex> lock(t_current->mu);
  (t_current->*member).insert(handle);
}

// Every live context (a handle may be released while another context is current).
std::mutex g_contexts_mu;
std::set<Context*> g_contexts;

// Forgets `handle` from the list `member` of the context that holds it.
template <typename T>
void Disown(std::set<T> Context::*member, T handle) {
  std::lock_guard<std::mutex> contexts_lock(g_contexts_mu);
  for (Context* c : g_contexts) {
    std::lock_guard<std::mutex> lock(c->mu);
    if ((c->*member).erase(handle) != 0) return;
  }
}

}  // namespace

BACKEND_EXPORT CUresult cuInit(unsigned int flags) {
  if (g_hip != nullptr) return CUDA_SUCCESS;
  std::string error;
  const HipRuntime* hip = rgpu::hipbackend::LoadHipRuntime(&error);
  if (hip == nullptr) {
    Say(error);
    return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
  }
  int r = hip->hipInit(flags);
  int count = 0;
  if (r == 0) r = hip->hipGetDeviceCount(&count);
  if (r != 0 || count == 0) {
    Say(std::string("no HIP device (") + hip->hipGetErrorName(r) + ")");
    return CUDA_ERROR_NO_DEVICE;
  }
  g_hip = hip;
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipRuntimeGetVersion(version));
}

BACKEND_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipGetDeviceCount(count));
}

BACKEND_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  int count = 0;
  g_hip->hipGetDeviceCount(&count);
  if (ordinal < 0 || ordinal >= count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipDeviceGetName(name, length, device));
}

BACKEND_EXPORT CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipDeviceTotalMem(bytes, device));
}

BACKEND_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute a, CUdevice device) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  const int hip = HipAttribute(a);
  if (hip < 0) return CUDA_ERROR_INVALID_VALUE;
  return R(g_hip->hipDeviceGetAttribute(value, hip, device));
}

BACKEND_EXPORT CUresult cuDeviceGetPCIBusId(char* id, int length, CUdevice device) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipDeviceGetPCIBusId(id, length, device));
}

BACKEND_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  *name = g_hip->hipGetErrorName(static_cast<int>(error));
  return CUDA_SUCCESS;
}

// ---- Contexts: one per device in HIP; a context here names its device.

BACKEND_EXPORT CUresult cuCtxCreate(CUcontext* ctx, CUctxCreateParams*, unsigned int,
                                    CUdevice device) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  if (int e = g_hip->hipSetDevice(device)) return R(e);
  auto* c = new Context();
  c->device = device;
  {
    std::lock_guard<std::mutex> lock(g_contexts_mu);
    g_contexts.insert(c);
  }
  t_current = c;
  *ctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = Ready()) return r;
  auto* c = reinterpret_cast<Context*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_contexts_mu);
    if (g_contexts.erase(c) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  }
  {
    std::lock_guard<std::mutex> lock(c->mu);
    g_hip->hipSetDevice(c->device);
    g_hip->hipDeviceSynchronize();
    for (void* e : c->events) g_hip->hipEventDestroy(e);
    for (void* s : c->streams) g_hip->hipStreamDestroy(s);
    for (Module* m : c->modules) {
      g_hip->hipModuleUnload(m->module);
      delete m;
    }
    for (void* p : c->allocations) g_hip->hipFree(p);
  }
  if (t_current == c) t_current = nullptr;
  delete c;
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (CUresult r = Ready()) return r;
  auto* c = reinterpret_cast<Context*>(ctx);
  if (c != nullptr) {
    if (int e = g_hip->hipSetDevice(c->device)) return R(e);
  }
  t_current = c;
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuCtxSynchronize() {
  if (CUresult r = Ready()) return r;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return R(g_hip->hipDeviceSynchronize());
}

BACKEND_EXPORT CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  if (CUresult r = Ready()) return r;
  // hipLimit_t's values are the driver's (printf FIFO 1, malloc heap 2).
  return R(g_hip->hipDeviceGetLimit(value, static_cast<int>(limit)));
}

BACKEND_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipDeviceGetStreamPriorityRange(least, greatest));
}

// ---- Memory.

#define D(p) reinterpret_cast<void*>(p)

BACKEND_EXPORT CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  void* q = nullptr;
  int e = g_hip->hipMalloc(&q, bytes);
  if (e == 0) Own(&Context::allocations, q);
  *p = reinterpret_cast<CUdeviceptr>(q);
  return R(e);
}
BACKEND_EXPORT CUresult cuMemFree(CUdeviceptr p) {
  if (CUresult r = Ready()) return r;
  int e = g_hip->hipFree(D(p));
  if (e == 0) Disown(&Context::allocations, D(p));
  return R(e);
}
BACKEND_EXPORT CUresult cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemGetInfo(free_bytes, total_bytes));
}
BACKEND_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemcpyHtoD(D(dst), const_cast<void*>(src), bytes));
}
BACKEND_EXPORT CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemcpyDtoH(dst, D(src), bytes));
}
BACKEND_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemcpyDtoD(D(dst), D(src), bytes));
}
BACKEND_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes,
                                          CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemcpyHtoDAsync(D(dst), const_cast<void*>(src), bytes, s));
}
BACKEND_EXPORT CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemcpyDtoHAsync(dst, D(src), bytes, s));
}
BACKEND_EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                          CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemcpyDtoDAsync(D(dst), D(src), bytes, s));
}
BACKEND_EXPORT CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t count) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemsetD8(D(dst), value, count));
}
BACKEND_EXPORT CUresult cuMemsetD16(CUdeviceptr dst, unsigned short value, size_t count) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemsetD16(D(dst), value, count));
}
BACKEND_EXPORT CUresult cuMemsetD32(CUdeviceptr dst, unsigned int value, size_t count) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemsetD32(D(dst), static_cast<int>(value), count));
}
BACKEND_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count,
                                        CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemsetD8Async(D(dst), value, count, s));
}
BACKEND_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count,
                                         CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemsetD16Async(D(dst), value, count, s));
}
BACKEND_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                                         CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipMemsetD32Async(D(dst), static_cast<int>(value), count, s));
}

// ---- Modules and kernels.

BACKEND_EXPORT CUresult cuModuleLoadData(CUmodule* out, const void* image) {
  if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const std::string processor = Processor(t_current->device);
  // The server hands over the image without its size; the headers bound it (an image whose
  // headers point past the payload is the server's to refuse before it gets here).
  constexpr size_t kMaxImage = size_t{1} << 32;
  const auto* bytes = static_cast<const uint8_t*>(image);
  const uint8_t* elf = nullptr;
  size_t elf_size = 0;
  if (rgpu::hip::IsOffloadBundle(image)) {
    // rgpu's HIP runtime sends the code objects of a bundle one by one; the server passes no
    // image size, so a bundle's entry table could not be bounded here.
    Say("refused a module: it is a clang offload bundle; send its code objects one by one");
    return CUDA_ERROR_INVALID_IMAGE;
  } else if (rgpu::hipbackend::IsAmdgpuElf(bytes, 64)) {
    elf = bytes;
    uint64_t extent = 0;
    const bool plausible = rgpu::fatbin::ElfExtent(bytes, kMaxImage, &extent).ok();
    elf_size = extent;
    if (!plausible) {
      Say("refused a module: its ELF headers are implausible");
      return CUDA_ERROR_INVALID_IMAGE;
    }
  } else {
    Say("refused a module: " + DescribeForeignImage(bytes));
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  auto m = std::make_unique<Module>();
  std::string error;
  if (!rgpu::hipbackend::ParseCodeObject(elf, elf_size, &m->info, &error)) {
    Say("refused a module: " + error);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (!m->info.Processor().empty() && m->info.Processor() != processor) {
    Say("refused a module: its AMDGPU code is for " + m->info.Processor() + ", but device " +
        std::to_string(t_current->device) + " is " + processor);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  m->image.assign(reinterpret_cast<const char*>(elf), elf_size);
  if (int e = g_hip->hipModuleLoadData(&m->module, m->image.data())) {
    Say(std::string("refused a module: hipModuleLoadData: ") + g_hip->hipGetErrorName(e));
    return R(e);
  }
  Own(&Context::modules, m.get());
  *out = reinterpret_cast<CUmodule>(m.release());
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuModuleUnload(CUmodule module) {
  if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = Ready()) return r;
  std::unique_ptr<Module> m(reinterpret_cast<Module*>(module));
  Disown(&Context::modules, m.get());
  return R(g_hip->hipModuleUnload(m->module));
}

BACKEND_EXPORT CUresult cuModuleGetFunction(CUfunction* out, CUmodule module, const char* name) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = Ready()) return r;
  auto* m = reinterpret_cast<Module*>(module);
  const KernelInfo* kernel = m->info.Find(name);
  if (kernel == nullptr) return CUDA_ERROR_NOT_FOUND;
  auto f = std::make_unique<Function>();
  f->kernel = kernel;
  if (int e = g_hip->hipModuleGetFunction(&f->function, m->module, name)) return R(e);
  *out = reinterpret_cast<CUfunction>(f.get());
  m->functions.push_back(std::move(f));
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuModuleGetGlobal(CUdeviceptr* p, size_t* bytes, CUmodule module,
                                          const char* name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = Ready()) return r;
  void* q = nullptr;
  int e = g_hip->hipModuleGetGlobal(&q, bytes, reinterpret_cast<Module*>(module)->module, name);
  if (p != nullptr) *p = reinterpret_cast<CUdeviceptr>(q);
  return R(e);
}

BACKEND_EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset,
                                           size_t* size) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const KernelInfo* k = reinterpret_cast<Function*>(f)->kernel;
  if (index >= k->arguments.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = k->arguments[index].offset;
  if (size != nullptr) *size = k->arguments[index].size;
  return CUDA_SUCCESS;
}

BACKEND_EXPORT CUresult cuFuncGetAttribute(int* value, CUfunction_attribute a, CUfunction f) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = Ready()) return r;
  // hipFunction_attribute numbers its members as CUDA does, up to the dynamic shared size.
  if (a > CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
  return R(g_hip->hipFuncGetAttribute(value, a, reinterpret_cast<Function*>(f)->function));
}

BACKEND_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int value) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = Ready()) return r;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // AMD GPUs need no opt-in for dynamic shared memory, nor take a carveout: HIP validates these
  // and otherwise ignores them, and so does this backend.
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    int limit = 0;
    if (int e = g_hip->hipDeviceGetAttribute(
            &limit, HipAttribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            t_current->device)) {
      return R(e);
    }
    int static_bytes = 0;
    g_hip->hipFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                               reinterpret_cast<Function*>(f)->function);
    return value >= 0 && value + static_bytes <= limit ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  if (a == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
    return value >= -1 && value <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_INVALID_VALUE;  // the other attributes are read-only
}

BACKEND_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                       CUstream stream, void** params, void** extra) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = Ready()) return r;
  std::vector<void*> hip_extra;
  if (extra != nullptr) {
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        hip_extra.push_back(rgpu::hip::kLaunchParamBufferPointer);
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        hip_extra.push_back(rgpu::hip::kLaunchParamBufferSize);
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
      hip_extra.push_back(extra[i + 1]);
    }
    hip_extra.push_back(rgpu::hip::kLaunchParamEnd);
  }
  return R(g_hip->hipModuleLaunchKernel(reinterpret_cast<Function*>(f)->function, gx, gy, gz, bx,
                                        by, bz, shared, stream, params,
                                        extra != nullptr ? hip_extra.data() : nullptr));
}

// ---- Streams and events (flags and results have the driver's values).

BACKEND_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  int e = g_hip->hipStreamCreateWithFlags(reinterpret_cast<void**>(s), flags);
  if (e == 0) Own(&Context::streams, static_cast<void*>(*s));
  return R(e);
}
BACKEND_EXPORT CUresult cuStreamCreateWithPriority(CUstream* s, unsigned int flags, int priority) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  int e = g_hip->hipStreamCreateWithPriority(reinterpret_cast<void**>(s), flags, priority);
  if (e == 0) Own(&Context::streams, static_cast<void*>(*s));
  return R(e);
}
BACKEND_EXPORT CUresult cuStreamDestroy(CUstream s) {
  if (CUresult r = Ready()) return r;
  int e = g_hip->hipStreamDestroy(s);
  if (e == 0) Disown(&Context::streams, static_cast<void*>(s));
  return R(e);
}
BACKEND_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipStreamSynchronize(s));
}
BACKEND_EXPORT CUresult cuStreamQuery(CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipStreamQuery(s));
}
BACKEND_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipStreamWaitEvent(s, e, flags));
}
BACKEND_EXPORT CUresult cuEventCreate(CUevent* e, unsigned int flags) {
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Ready()) return r;
  int error = g_hip->hipEventCreateWithFlags(reinterpret_cast<void**>(e), flags);
  if (error == 0) Own(&Context::events, static_cast<void*>(*e));
  return R(error);
}
BACKEND_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipEventRecord(e, s));
}
BACKEND_EXPORT CUresult cuEventSynchronize(CUevent e) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipEventSynchronize(e));
}
BACKEND_EXPORT CUresult cuEventQuery(CUevent e) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipEventQuery(e));
}
BACKEND_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent stop) {
  if (CUresult r = Ready()) return r;
  return R(g_hip->hipEventElapsedTime(ms, start, stop));
}
BACKEND_EXPORT CUresult cuEventDestroy(CUevent e) {
  if (CUresult r = Ready()) return r;
  int error = g_hip->hipEventDestroy(e);
  if (error == 0) Disown(&Context::events, static_cast<void*>(e));
  return R(error);
}
