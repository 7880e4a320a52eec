// cuGetExportTable: the private tables NVIDIA's runtime and libraries (cuBLAS, cuBLASLt, cuFFT)
// require from the driver, as recorded in ../docs/export_tables.md. Slots whose purpose is known
// are implemented; every other slot of a table handed out points to a function that logs its
// table and index and returns CUDA_ERROR_NOT_SUPPORTED, so an unexpected call is visible instead
// of a crash.
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "client/client_state.h"
#include "client/context_storage.h"
#include "client/impl.h"
#include "client/integrity_check.h"

using rgpu::client::ClientState;

namespace {

using Slot = const void*;

// An unknown slot of a table: refuses, and names itself at warn level the first time.
template <int kTable, int kIndex>
CUresult UnknownSlot() {
  static const char* const kNames[] = {"CUDART_INTERFACE", "TOOLS_RUNTIME_CALLBACK_HOOKS",
                                       "TOOLS_TLS",        "CONTEXT_CHECKS",
                                       "INTEGRITY_CHECK",  "CONTEXT_IDENTITY",
                                       "CUEXP_FUNCTION"};
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true, std::memory_order_relaxed)) {
    RGPU_LOG_WARN("export table %s slot %d called; not implemented", kNames[kTable], kIndex);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}
#define UNKNOWN(table, index) reinterpret_cast<Slot>(&UnknownSlot<table, index>)

// ---- CUDART_INTERFACE ----
// [2]: the primary context of a device, without retaining it.
CUresult PrimaryContextHandle(CUcontext* pctx, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = ClientState::Get().primary_context(dev);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = ctx;
  return CUDA_SUCCESS;
}

Slot kCudartInterface[13] = {reinterpret_cast<Slot>(13 * sizeof(void*)),
                             UNKNOWN(0, 1),
                             reinterpret_cast<Slot>(&PrimaryContextHandle),
                             UNKNOWN(0, 3),
                             UNKNOWN(0, 4),
                             UNKNOWN(0, 5),
                             UNKNOWN(0, 6),
                             UNKNOWN(0, 7),
                             UNKNOWN(0, 8),
                             UNKNOWN(0, 9),
                             UNKNOWN(0, 10),
                             UNKNOWN(0, 11),
                             UNKNOWN(0, 12)};

// ---- TOOLS_RUNTIME_CALLBACK_HOOKS ----
// [2] and [6] hand the runtime zero-filled tables of per-API callback switches (all off). The
// sizes are entry counts; cudart indexes them with 4-byte entries (cudaGetDeviceProperties reads
// byte 0x6e0 of the first), so the storage is sized for 8-byte entries to leave a margin. Each
// cudart needs [2] to hold at least its own API count: 13.0's asks for no more than 523, 13.1's
// (the one inside cuDNN 9.19) refuses to start below 552 (cudnnCreate: "cudaGetDeviceCount
// failed"), so [2] offers room for the runtimes of later minor versions too.
constexpr size_t kHookEntries2 = 1024;
alignas(64) uint64_t g_hook_buffer2[kHookEntries2];
alignas(64) uint64_t g_hook_buffer6[14];
void HookBuffer2(void** buffer, size_t* size) {
  *buffer = g_hook_buffer2;
  *size = kHookEntries2;
}
void HookBuffer6(void** buffer, size_t* size) {
  *buffer = g_hook_buffer6;
  *size = 14;
}
Slot kRuntimeCallbackHooks[7] = {reinterpret_cast<Slot>(7 * sizeof(void*)),
                                 UNKNOWN(1, 1),
                                 reinterpret_cast<Slot>(&HookBuffer2),
                                 UNKNOWN(1, 3),
                                 UNKNOWN(1, 4),
                                 UNKNOWN(1, 5),
                                 reinterpret_cast<Slot>(&HookBuffer6)};

// ---- TOOLS_TLS ----
// cudart never calls these. cuBLASLt calls [2](CUcontext* out) before each kernel-registry
// lookup (cublasLtMatmulAlgoGetHeuristic, every cuBLAS call that launches) and passes what it
// gets to CONTEXT_IDENTITY[4]: the calling thread's current context. Without one it refuses
// (CUDA_ERROR_INVALID_CONTEXT, *out = NULL), since cuBLASLt has nothing to look up then.
CUresult ToolsTlsCurrentContext(CUcontext* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = nullptr;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = rgpu::client::CurrentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *out = ctx;
  return CUDA_SUCCESS;
}
Slot kToolsTls[4] = {reinterpret_cast<Slot>(4 * sizeof(void*)), UNKNOWN(2, 1),
                     reinterpret_cast<Slot>(&ToolsTlsCurrentContext), UNKNOWN(2, 3)};

// ---- CONTEXT_IDENTITY ----
// cuBLAS, cuBLASLt and cuFFT ask for this table at cublasCreate/cufftPlan*. cuBLASLt keys its
// per-context kernel registry by [4](CUcontext, unsigned long long* id), the context's unique id
// (cuCtxGetId's), called with TOOLS_TLS[2]'s answer; cuBLAS level-1 calls that return a scalar
// (cublasSdot) turn the handle's stream into the driver's stream object with
// [51](CUcontext, CUstream, void** out, int per_thread) and take its id with
// [39](CUcontext, void* object, unsigned long long* id) (cuStreamGetId's). The size word says five
// slots: cuBLASLt checks it before using [4] (with fewer it does not use the table and every
// cuBLAS call fails) but calls [39] and [51] without looking at it. The storage behind it is
// padded with refusing slots, so a caller that reads past the size word is refused, not crashed.
extern "C" CUresult rgpu_impl_cuCtxGetId(CUcontext ctx, unsigned long long* id);
CUresult ContextIdentity(CUcontext ctx, unsigned long long* id) {
  return rgpu_impl_cuCtxGetId(ctx, id);
}
// [51]: the stream object behind a handle: the stream itself, the calling thread's per-thread
// stream for CU_STREAM_PER_THREAD (or NULL when per_thread is set), CU_STREAM_LEGACY for the
// legacy default stream (rgpu has no object for it; the handle names it in every call).
CUresult ContextStreamObject(CUcontext ctx, CUstream stream, void** out, int per_thread) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = nullptr;
  CUctx_st* owner = nullptr;
  uint64_t remote = 0;
  CUresult r = rgpu::client::ResolveStream(stream, &owner, &remote);
  if (r != CUDA_SUCCESS) return r;
  if (ctx != nullptr && owner != ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == CU_STREAM_PER_THREAD || (stream == nullptr && per_thread != 0)) {
    CUstream own = nullptr;
    r = rgpu::client::PerThreadStream(owner, &own);
    if (r != CUDA_SUCCESS) return r;
    *out = own;
  } else if (rgpu::client::IsSpecialStream(stream)) {
    *out = CU_STREAM_LEGACY;
  } else {
    *out = stream;
  }
  return CUDA_SUCCESS;
}
extern "C" CUresult rgpu_impl_cuStreamGetId(CUstream s, unsigned long long* id);
// [39]: the unique id of a stream object [51] handed out.
CUresult ContextStreamId(CUcontext ctx, CUstream stream, unsigned long long* id) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* owner = nullptr;
  uint64_t remote = 0;
  CUresult r = rgpu::client::ResolveStream(stream, &owner, &remote);
  if (r != CUDA_SUCCESS) return r;
  if (ctx != nullptr && owner != ctx) return CUDA_ERROR_INVALID_CONTEXT;
  return rgpu_impl_cuStreamGetId(stream, id);
}
template <size_t... I>
std::array<Slot, sizeof...(I)> ContextIdentityTable(std::index_sequence<I...>) {
  return {reinterpret_cast<Slot>(I == 0    ? reinterpret_cast<void*>(5 * sizeof(void*))
                                 : I == 4  ? reinterpret_cast<void*>(&ContextIdentity)
                                 : I == 39 ? reinterpret_cast<void*>(&ContextStreamId)
                                 : I == 51 ? reinterpret_cast<void*>(&ContextStreamObject)
                                           : reinterpret_cast<void*>(&UnknownSlot<5, int(I)>))...};
}
const std::array<Slot, 96> kContextIdentity = ContextIdentityTable(std::make_index_sequence<96>{});

// ---- context local storage (no size word) ----
CUresult ClsPut(CUcontext ctx, void* key, void* value, void (*dtor)(CUcontext, void*, void*)) {
  return rgpu::client::ContextStoragePut(ctx, key, value, dtor);
}
CUresult ClsDelete(CUcontext ctx, void* key) {
  return rgpu::client::ContextStorageDelete(ctx, key);
}
CUresult ClsGet(void** value, CUcontext ctx, void* key) {
  return rgpu::client::ContextStorageGet(value, ctx, key);
}
Slot kContextLocalStorage[3] = {reinterpret_cast<Slot>(&ClsPut), reinterpret_cast<Slot>(&ClsDelete),
                                reinterpret_cast<Slot>(&ClsGet)};

// ---- CONTEXT_CHECKS ----
// [2]: called whenever the runtime binds a context; [3]: once at start-up. Both succeed. [2]
// reports through its outputs that nothing replaces the context (a non-zero flag would make the
// runtime use the pointer instead).
CUresult ContextBound(CUcontext, uint32_t* replaced, void** replacement) {
  if (replaced != nullptr) *replaced = 0;
  if (replacement != nullptr) *replacement = nullptr;
  return CUDA_SUCCESS;
}
CUresult ContextChecksReady() { return CUDA_SUCCESS; }
Slot kContextChecks[4] = {reinterpret_cast<Slot>(4 * sizeof(void*)), UNKNOWN(3, 1),
                          reinterpret_cast<Slot>(&ContextBound),
                          reinterpret_cast<Slot>(&ContextChecksReady)};

// ---- INTEGRITY_CHECK ----
CUresult IntegrityCheck(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);
Slot kIntegrityCheck[3] = {reinterpret_cast<Slot>(3 * sizeof(void*)),
                           reinterpret_cast<Slot>(&IntegrityCheck), UNKNOWN(4, 2)};

CUresult IntegrityCheck(uint32_t version, uint64_t unix_seconds, uint64_t out[2]) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ClientState& st = ClientState::Get();
  rgpu::client::IntegrityInput in;
  in.driver_version = static_cast<uint32_t>(st.driver_version());
  in.version = version;
  in.pid = static_cast<uint32_t>(getpid());
  in.thread = static_cast<uint32_t>(pthread_self());
  in.cudart_interface_table = kCudartInterface;
  in.integrity_table = kIntegrityCheck;
  in.integrity_function = reinterpret_cast<const void*>(&IntegrityCheck);
  in.unix_seconds = unix_seconds;
  if (st.CheckInitialized() == CUDA_SUCCESS) {
    for (int d = 0; d < st.device_count(); ++d) {
      const rgpu::wire::DeviceInfo* info = st.device(d);
      rgpu::client::IntegrityDevice dev = {};
      memcpy(dev.uuid, info->uuid().data(), std::min(info->uuid().size(), sizeof dev.uuid));
      auto attr = [info](int a) { return a < info->attributes_size() ? info->attributes(a) : 0; };
      dev.pci_domain = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
      dev.pci_bus = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
      dev.pci_device = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
      in.devices.push_back(dev);
    }
  }
  rgpu::client::ComputeIntegrityCheck(in, out);
  return CUDA_SUCCESS;
}

// ---- log sink (optional): routes the runtime's messages to rgpu's log ----
void LogSink(int category, int level, const char* format, va_list args) {
  if (!rgpu::LogEnabled(rgpu::LogLevel::kInfo) || format == nullptr) return;
  char line[1024];
  vsnprintf(line, sizeof line, format, args);
  RGPU_LOG_INFO("cudart [%d/%d]: %s", category, level, line);
}
Slot kLogSink[2] = {reinterpret_cast<Slot>(2 * sizeof(void*)), reinterpret_cast<Slot>(&LogSink)};

// ---- CUEXP_FUNCTION (6e163fbe-...) ----
// [7]: hands each kernel of a module to a callback (cuFFT, after loading a module: its callback
// keeps the function it is given) and returns how many it handed over, not a CUresult: cuFFT
// takes only 1 (its modules hold one kernel each) as success and anything else as a failed load
// (CUFFT_INTERNAL_ERROR), so a refusal (bad module, no callback) returns 0, never an error code
// (CUDA_ERROR_INVALID_VALUE is 1). The size word and the other slots are not known: 16 slots, all
// refusing but [7].
int EnumerateModuleFunctions(CUcontext ctx, CUmodule module,
                             void (*callback)(void* user, CUfunction f), void* user) {
  (void)ctx;  // the module's own context is the one that counts
  if (callback == nullptr) return 0;
  std::vector<CUfunction> functions;
  const CUresult r = rgpu::client::ModuleFunctions(module, &functions);
  if (r != CUDA_SUCCESS) {
    RGPU_LOG_DEBUG("export table CUEXP_FUNCTION[7]: module %p refused (%d)", (void*)module, r);
    return 0;
  }
  for (CUfunction f : functions) callback(user, f);
  return static_cast<int>(functions.size());
}
Slot kFunctionExports[16] = {reinterpret_cast<Slot>(16 * sizeof(void*)),
                             UNKNOWN(6, 1),
                             UNKNOWN(6, 2),
                             UNKNOWN(6, 3),
                             UNKNOWN(6, 4),
                             UNKNOWN(6, 5),
                             UNKNOWN(6, 6),
                             reinterpret_cast<Slot>(&EnumerateModuleFunctions),
                             UNKNOWN(6, 8),
                             UNKNOWN(6, 9),
                             UNKNOWN(6, 10),
                             UNKNOWN(6, 11),
                             UNKNOWN(6, 12),
                             UNKNOWN(6, 13),
                             UNKNOWN(6, 14),
                             UNKNOWN(6, 15)};

struct TableEntry {
  uint8_t uuid[16];
  const void* table;
  const char* name;
};

const TableEntry kTables[] = {
    {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99,
      0x1e},
     kFunctionExports,
     "CUEXP_FUNCTION"},
    {{0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d,
      0xd9},
     kLogSink,
     "log sink"},
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     kCudartInterface,
     "CUDART_INTERFACE"},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     kRuntimeCallbackHooks,
     "TOOLS_RUNTIME_CALLBACK_HOOKS"},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     kToolsTls,
     "TOOLS_TLS"},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     kContextLocalStorage,
     "context local storage"},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     kContextChecks,
     "CONTEXT_CHECKS"},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2},
     kIntegrityCheck,
     "INTEGRITY_CHECK"},
    {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8,
      0xf2},
     kContextIdentity.data(),
     "CONTEXT_IDENTITY"},
};

}  // namespace

RGPU_IMPL(cuGetExportTable)(const void** table, const CUuuid* id) {
  if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const TableEntry& t : kTables) {
    if (memcmp(t.uuid, id->bytes, 16) == 0) {
      *table = t.table;
      return CUDA_SUCCESS;
    }
  }
  const auto* b = reinterpret_cast<const uint8_t*>(id->bytes);
  RGPU_LOG_WARN(
      "cuGetExportTable: unknown table %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
      "%02x%02x%02x%02x%02x%02x",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
      b[15]);
  *table = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

RGPU_IMPL(cuModuleGetLoadingMode)(CUmoduleLoadingMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char* env = getenv("CUDA_MODULE_LOADING");
  *mode = env != nullptr && strcmp(env, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING
                                                      : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}
