// The entry points a program finds are those of NVIDIA's libcuda.so.1, and the ones rgpu lacks
// say so: the profiler calls behave as on a driver with no profiler attached, the pre-3.2 ABI
// names resolve, and a pointer cuGetProcAddress hands out for an entry point rgpu does not
// implement returns CUDA_ERROR_NOT_SUPPORTED (naming itself once at RGPU_LOG=warn; the e2e test
// checks stderr) while a name no driver has stays NOT_FOUND; export tables have no null slots.
#include <cudaProfiler.h>
#include <dlfcn.h>

#include <cstring>

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

  // A name no driver exports is not found.
  void* none = reinterpret_cast<void*>(1);
  EXPECT_TRUE(cuGetProcAddress("cuNoSuchEntryPoint", &none, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                               &found) == CUDA_ERROR_NOT_FOUND);
  EXPECT_TRUE(none == nullptr && found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  // Every slot of an export table NVIDIA's libraries use points to a function: TOOLS_TLS's
  // (cuBLASLt calls slot 2) refuse rather than being null.
  const unsigned char tools_tls_bytes[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                             0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
  CUuuid tools_tls;
  memcpy(tools_tls.bytes, tools_tls_bytes, sizeof tools_tls.bytes);
  const void* table = nullptr;
  CHECK(cuGetExportTable(&table, &tools_tls));
  const void* const* slots = static_cast<const void* const*>(table);
  EXPECT_TRUE(reinterpret_cast<size_t>(slots[0]) == 4 * sizeof(void*));
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(slots[i] != nullptr);
  void* out = nullptr;
  EXPECT_TRUE(reinterpret_cast<CUresult (*)(void**)>(const_cast<void*>(slots[2]))(&out) !=
              CUDA_SUCCESS);

  CHECK(cuCtxDestroy(ctx));
  printf("entry_points: OK\n");
  return 0;
}
