// The entry points a program finds are those of NVIDIA's libcuda.so.1, and the ones rgpu lacks
// say so: the profiler calls behave as on a driver with no profiler attached, the pre-3.2 ABI
// names resolve, and a pointer cuGetProcAddress hands out for an entry point rgpu does not
// implement returns CUDA_ERROR_NOT_SUPPORTED (naming itself once at RGPU_LOG=warn; the e2e test
// checks stderr) while a name no driver has stays NOT_FOUND; export tables have no null slots
// and their known slots answer as the driver's do.
#include <cudaProfiler.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "check.h"

int main() {
  EXPECT_TRUE(cuProfilerStart() == CUDA_ERROR_NOT_INITIALIZED);
  CUcontext ctx = InitContext();
  CHECK(cuProfilerStart());
  CHECK(cuProfilerStart());  // already started: no effect
  CHECK(cuProfilerStop());
  CHECK(cuProfilerStop());
  // Deprecated; always CUDA_ERROR_NOT_SUPPORTED since CUDA 12.0.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_TRUE(cuProfilerInitialize("cfg", "out", CU_OUT_CSV) == CUDA_ERROR_NOT_SUPPORTED);

  // Found through cuGetProcAddress too (the runtime's cudaProfilerStart goes this way).
  void* start = nullptr;
  CUdriverProcAddressQueryResult found;
  CHECK(cuGetProcAddress("cuProfilerStart", &start, 4000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  EXPECT_TRUE(found == CU_GET_PROC_ADDRESS_SUCCESS && start != nullptr);
  CHECK(reinterpret_cast<CUresult (*)()>(start)());

  // The pre-3.2 names are exported (old binaries and dlsym users link against them).
  for (const char* name : {"cuMemAlloc", "cuMemcpyHtoD", "cuMemcpy2D", "cuArrayCreate",
                           "cuModuleGetGlobal", "cuProfilerInitialize"}) {
    if (dlsym(RTLD_DEFAULT, name) == nullptr) {
      fprintf(stderr, "%s is not exported\n", name);
      return 1;
    }
  }

  // An entry point the driver has and rgpu does not implement (graphics interop: there is no
  // display on a remote GPU) is handed out, and refuses when called, every time.
  void* missing = nullptr;
  CHECK(cuGetProcAddress("cuGraphicsUnregisterResource", &missing, 12000,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found));
  EXPECT_TRUE(found == CU_GET_PROC_ADDRESS_SUCCESS && missing != nullptr);
  auto unregister = reinterpret_cast<CUresult (*)(CUgraphicsResource)>(missing);
  EXPECT_TRUE(unregister(nullptr) == CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_TRUE(unregister(nullptr) == CUDA_ERROR_NOT_SUPPORTED);

  // Earlier revisions, as runtimes built with older toolkits ask for them by version: each is
  // found and works (none of these is NOT_SUPPORTED).
  void* old_entry = nullptr;
  CHECK(cuGetProcAddress("cuStreamGetCaptureInfo", &old_entry, 11030, CU_GET_PROC_ADDRESS_DEFAULT,
                         &found));
  EXPECT_TRUE(found == CU_GET_PROC_ADDRESS_SUCCESS && old_entry != nullptr);
  CUstream idle;
  CHECK(cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));
  CUstreamCaptureStatus capture_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CHECK(reinterpret_cast<PFN_cuStreamGetCaptureInfo_v11030>(old_entry)(
      idle, &capture_status, nullptr, nullptr, nullptr, nullptr));
  EXPECT_TRUE(capture_status == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(cuGetProcAddress("cuStreamDestroy", &old_entry, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  CHECK(reinterpret_cast<CUresult (*)(CUstream)>(old_entry)(idle));
  EXPECT_TRUE(cuStreamQuery(idle) == CUDA_ERROR_INVALID_HANDLE);
  CUevent old_event;
  CHECK(cuEventCreate(&old_event, 0));
  CHECK(cuGetProcAddress("cuEventDestroy", &old_entry, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  CHECK(reinterpret_cast<CUresult (*)(CUevent)>(old_entry)(old_event));
  EXPECT_TRUE(cuEventQuery(old_event) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuGetProcAddress("cuCtxCreate", &old_entry, 11040, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  CUcontext made = nullptr;
  CHECK(reinterpret_cast<PFN_cuCtxCreate_v11040>(old_entry)(&made, nullptr, 0, 0, 0));
  CUcontext old_popped = nullptr;
  CHECK(cuGetProcAddress("cuCtxPopCurrent", &old_entry, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  CHECK(reinterpret_cast<CUresult (*)(CUcontext*)>(old_entry)(&old_popped));
  EXPECT_TRUE(old_popped == made);
  CHECK(cuGetProcAddress("cuCtxDestroy", &old_entry, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  CHECK(reinterpret_cast<CUresult (*)(CUcontext)>(old_entry)(made));
  CHECK(cuCtxSetCurrent(ctx));

  // A name no driver exports is not found.
  void* none = reinterpret_cast<void*>(1);
  EXPECT_TRUE(cuGetProcAddress("cuNoSuchEntryPoint", &none, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                               &found) == CUDA_ERROR_NOT_FOUND);
  EXPECT_TRUE(none == nullptr && found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  // Every slot of an export table NVIDIA's libraries use points to a function (docs/
  // export_tables.md). TOOLS_TLS[2] hands out the current context; CONTEXT_IDENTITY[4] its id,
  // [51] the stream object behind a handle and [39] that stream's id, as cuCtxGetId and
  // cuStreamGetId report them; an unknown slot refuses.
  const unsigned char tools_tls_bytes[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                             0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
  CUuuid tools_tls;
  memcpy(tools_tls.bytes, tools_tls_bytes, sizeof tools_tls.bytes);
  const void* table = nullptr;
  CHECK(cuGetExportTable(&table, &tools_tls));
  const void* const* slots = static_cast<const void* const*>(table);
  EXPECT_TRUE(reinterpret_cast<size_t>(slots[0]) == 4 * sizeof(void*));
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(slots[i] != nullptr);
  auto current = reinterpret_cast<CUresult (*)(CUcontext*)>(const_cast<void*>(slots[2]));
  CUcontext got = nullptr;
  CHECK(current(&got));
  EXPECT_TRUE(got == ctx);
  EXPECT_TRUE(reinterpret_cast<CUresult (*)()>(const_cast<void*>(slots[1]))() ==
              CUDA_ERROR_NOT_SUPPORTED);

  // TOOLS_RUNTIME_CALLBACK_HOOKS[2]: a zeroed table of callback switches with room for every
  // API of the newest runtimes: cudart 13.1 (inside cuDNN 9.19) refuses to start below 552.
  const unsigned char hooks_bytes[16] = {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74,
                                         0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66};
  CUuuid hooks;
  memcpy(hooks.bytes, hooks_bytes, sizeof hooks.bytes);
  CHECK(cuGetExportTable(&table, &hooks));
  slots = static_cast<const void* const*>(table);
  void* hook_buffer = nullptr;
  size_t hook_entries = 0;
  reinterpret_cast<void (*)(void**, size_t*)>(const_cast<void*>(slots[2]))(&hook_buffer,
                                                                           &hook_entries);
  EXPECT_TRUE(hook_buffer != nullptr && hook_entries >= 552);
  for (size_t i = 0; hook_buffer != nullptr && i < hook_entries; ++i) {
    EXPECT_TRUE(static_cast<const uint32_t*>(hook_buffer)[i] == 0);
  }

  const unsigned char identity_bytes[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                            0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
  CUuuid identity;
  memcpy(identity.bytes, identity_bytes, sizeof identity.bytes);
  CHECK(cuGetExportTable(&table, &identity));
  slots = static_cast<const void* const*>(table);
  EXPECT_TRUE(reinterpret_cast<size_t>(slots[0]) == 5 * sizeof(void*));
  for (int i = 1; i < 96; ++i) EXPECT_TRUE(slots[i] != nullptr);
  unsigned long long id = 0, want_id = 0;
  CHECK(reinterpret_cast<CUresult (*)(CUcontext, unsigned long long*)>(const_cast<void*>(slots[4]))(
      ctx, &id));
  CHECK(cuCtxGetId(ctx, &want_id));
  EXPECT_TRUE(id == want_id);
  using StreamObject = CUresult (*)(CUcontext, CUstream, void**, int);
  using StreamId = CUresult (*)(CUcontext, void*, unsigned long long*);
  auto stream_object = reinterpret_cast<StreamObject>(const_cast<void*>(slots[51]));
  auto stream_id = reinterpret_cast<StreamId>(const_cast<void*>(slots[39]));
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  void* object = nullptr;
  CHECK(stream_object(ctx, stream, &object, 0));
  EXPECT_TRUE(object == stream);
  CHECK(stream_id(ctx, object, &id));
  CHECK(cuStreamGetId(stream, &want_id));
  EXPECT_TRUE(id == want_id);
  CHECK(stream_object(ctx, nullptr, &object, 0));  // the legacy default stream
  EXPECT_TRUE(object == CU_STREAM_LEGACY);
  EXPECT_TRUE(stream_object(ctx, reinterpret_cast<CUstream>(&id), &object, 0) ==
              CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuStreamDestroy(stream));
  EXPECT_TRUE(reinterpret_cast<CUresult (*)()>(const_cast<void*>(slots[5]))() ==
              CUDA_ERROR_NOT_SUPPORTED);

  // A module's kernels: counted, enumerated (each one launchable, named as the module names it),
  // and handed one by one to the callback of CUEXP_FUNCTION[7] (cuFFT's enumeration).
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  unsigned count = 0;
  CHECK(cuModuleGetFunctionCount(&count, module));
  EXPECT_TRUE(count >= 9);  // tests/programs/driver/kernels.cu
  std::vector<CUfunction> functions(count);
  CHECK(cuModuleEnumerateFunctions(functions.data(), count, module));
  bool found_set_all = false;
  for (CUfunction f : functions) {
    const char* name = nullptr;
    CHECK(cuFuncGetName(&name, f));
    CUfunction by_name = nullptr;
    CHECK(cuModuleGetFunction(&by_name, module, name));
    EXPECT_TRUE(by_name == f);
    // Each names its module and is loaded (a module loads whole).
    CUmodule of = nullptr;
    CHECK(cuFuncGetModule(&of, f));
    EXPECT_TRUE(of == module);
    CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
    CHECK(cuFuncIsLoaded(&state, f));
    EXPECT_TRUE(state == CU_FUNCTION_LOADING_STATE_LOADED);
    CHECK(cuFuncLoad(f));
    found_set_all = found_set_all || strcmp(name, "set_all") == 0;
  }
  EXPECT_TRUE(found_set_all);
  CUfunctionLoadingState state;
  CUmodule of;
  const auto forged = reinterpret_cast<CUfunction>(&state);
  EXPECT_TRUE(cuFuncIsLoaded(&state, forged) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(cuFuncLoad(forged) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(cuFuncGetModule(&of, forged) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(cuFuncIsLoaded(nullptr, functions[0]) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuFuncGetModule(nullptr, functions[0]) == CUDA_ERROR_INVALID_VALUE);
  const unsigned char function_bytes[16] = {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
                                            0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e};
  CUuuid function_table;
  memcpy(function_table.bytes, function_bytes, sizeof function_table.bytes);
  CHECK(cuGetExportTable(&table, &function_table));
  slots = static_cast<const void* const*>(table);
  for (int i = 1; i < 16; ++i) EXPECT_TRUE(slots[i] != nullptr);
  struct Seen {
    std::vector<CUfunction> functions;
  } seen;
  // [7] returns the number of functions it handed to the callback (cuFFT wants 1), 0 when it
  // refuses: never a CUresult, whose CUDA_ERROR_INVALID_VALUE would read as one function.
  using Enumerate = int (*)(CUcontext, CUmodule, void (*)(void*, CUfunction), void*);
  auto enumerate = reinterpret_cast<Enumerate>(const_cast<void*>(slots[7]));
  EXPECT_TRUE(
      enumerate(
          ctx, module,
          [](void* user, CUfunction f) { static_cast<Seen*>(user)->functions.push_back(f); },
          &seen) == static_cast<int>(functions.size()));
  EXPECT_TRUE(seen.functions == functions);
  EXPECT_TRUE(enumerate(
                  ctx, reinterpret_cast<CUmodule>(&seen), [](void*, CUfunction) {}, &seen) == 0);
  EXPECT_TRUE(enumerate(ctx, module, nullptr, &seen) == 0);
  CHECK(cuModuleUnload(module));

  // Without a current context TOOLS_TLS[2] refuses.
  CUcontext popped = nullptr;
  CHECK(cuCtxPopCurrent(&popped));
  got = ctx;
  EXPECT_TRUE(current(&got) == CUDA_ERROR_INVALID_CONTEXT && got == nullptr);
  CHECK(cuCtxPushCurrent(popped));

  CHECK(cuCtxDestroy(ctx));
  printf("entry_points: OK\n");
  return 0;
}
