// A program (or a library inside it: cuDNN's own CUDA runtime does this when it gives up) that
// loads the driver with dlopen, takes entry points through cuGetProcAddress, closes the driver
// and goes on calling them. The driver stays loaded, as NVIDIA's does in practice: its runtime's
// threads and every pointer it handed out outlive the dlclose.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    fprintf(stderr, "dlclose_driver: %s\n", dlerror());
    return 1;
  }
  using GetProc =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(driver, "cuGetProcAddress_v2"));
  void* init = nullptr;
  void* count = nullptr;
  void* graphics = nullptr;  // one rgpu lacks: handed out as the face's own entry point
  if (get_proc == nullptr || get_proc("cuInit", &init, 2000, 0, nullptr) != CUDA_SUCCESS ||
      get_proc("cuDeviceGetCount", &count, 2000, 0, nullptr) != CUDA_SUCCESS ||
      get_proc("cuGraphicsUnregisterResource", &graphics, 3000, 0, nullptr) != CUDA_SUCCESS) {
    fprintf(stderr, "dlclose_driver: no entry points\n");
    return 1;
  }
  if (reinterpret_cast<CUresult (*)(unsigned)>(init)(0) != CUDA_SUCCESS) {
    fprintf(stderr, "dlclose_driver: cuInit failed\n");
    return 1;
  }
  dlclose(driver);
  int devices = 0;
  if (reinterpret_cast<CUresult (*)(int*)>(count)(&devices) != CUDA_SUCCESS || devices < 1) {
    fprintf(stderr, "dlclose_driver: cuDeviceGetCount failed after dlclose\n");
    return 1;
  }
  if (reinterpret_cast<CUresult (*)(CUgraphicsResource)>(graphics)(nullptr) !=
      CUDA_ERROR_NOT_SUPPORTED) {
    fprintf(stderr, "dlclose_driver: cuGraphicsUnregisterResource did not refuse\n");
    return 1;
  }
  printf("dlclose_driver: OK (%d device(s))\n", devices);
  return 0;
}
