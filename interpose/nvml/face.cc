// librgpu-nvml.so (SONAME libnvidia-ml.so.1): NVML's exported face in a tenant's process.
//
// It exports exactly the entry points libnvidia-ml.so.1 does (exports.txt) and nothing else, and
// depends on libc only. The calls client/abi/nvml_api.def describes are forwarded to the client
// runtime's rgpu_nvml_<name> (client/nvml.cc), loaded on first use into the private namespace the
// CUDA face shares (one runtime, one server session per process); every other entry point
// returns NVML_ERROR_NOT_SUPPORTED and names itself once in the log (RGPU_LOG). nvmlErrorString
// is answered here.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include <atomic>

#include "client/abi/nvml_types.h"
#include "interpose/common/private_runtime.h"

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
void* g_runtime = nullptr;

void LoadRuntime() {
  g_runtime = rgpu::interpose::LoadPrivateRuntime("RGPU_CLIENT_LIBRARY", "librgpu-client.so",
                                                  reinterpret_cast<void*>(&LoadRuntime),
                                                  "client runtime", /*shared=*/true);
}

// The runtime's implementation of `name`, or nullptr (no runtime, or it lacks the call).
void* Resolve(const char* name) {
  pthread_once(&g_load_once, LoadRuntime);
  if (g_runtime == nullptr) return nullptr;
  char symbol[256];
  snprintf(symbol, sizeof symbol, "rgpu_nvml_%s", name);
  return dlsym(g_runtime, symbol);
}

nvmlReturn_t Unsupported(const char* name, std::atomic<bool>* reported) {
  if (!reported->exchange(true) && rgpu::interpose::LoggingEnabled()) {
    fprintf(stderr, "rgpu: %s is not supported; returning NVML_ERROR_NOT_SUPPORTED\n", name);
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace

// A described call: resolved once (a missing runtime is asked again next time: it fails fast).
#define NVML_FN(name, params, args)                           \
  RGPU_EXPORT nvmlReturn_t name params {                      \
    using Impl = nvmlReturn_t(*) params;                      \
    static std::atomic<Impl> impl{nullptr};                   \
    static std::atomic<bool> reported{false};                 \
    Impl f = impl.load(std::memory_order_acquire);            \
    if (f == nullptr) {                                       \
      f = reinterpret_cast<Impl>(Resolve(#name));             \
      if (f == nullptr) return Unsupported(#name, &reported); \
      impl.store(f, std::memory_order_release);               \
    }                                                         \
    return f args;                                            \
  }
#include "client/abi/nvml_api.def"
#undef NVML_FN

// Every other entry point. Its arguments are not read: every NVML call returns nvmlReturn_t and
// the caller cleans up its own arguments, so a definition without parameters is a correct one.
#define NVML_STUB(name)                       \
  RGPU_EXPORT nvmlReturn_t name() {           \
    static std::atomic<bool> reported{false}; \
    return Unsupported(#name, &reported);     \
  }
#include "nvml_stubs.inc"
#undef NVML_STUB

RGPU_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires reset";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "vGPU ECC not supported";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
      return "Deprecated";
    case NVML_ERROR_NOT_READY:
      return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
      return "Invalid state";
    default:
      return "Unknown Error";
  }
}
