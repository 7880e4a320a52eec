// The interposer is a guest: a program that uses protobuf itself, with message names that collide
// with rgpu's own (same file, package and message names), runs its protobuf code and the CUDA
// driver through rgpu without either noticing the other; and none of rgpu's dependencies (UCX,
// protobuf-lite, the client runtime) appear among the program's own loaded libraries.
#include <cuda.h>
#include <link.h>

#include <cstdio>
#include <cstring>

#include "rgpu.pb.h"

int main() {
  rgpu::wire::Envelope mine;
  mine.set_note("the program's own message");
  mine.set_value(42);
  std::string bytes = mine.SerializeAsString();
  if (cuInit(0) != CUDA_SUCCESS) return 1;
  CUdevice dev;
  CUcontext ctx;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuCtxCreate(&ctx, nullptr, 0, dev) != CUDA_SUCCESS) {
    return 1;
  }
  CUdeviceptr d;
  int value = 7, back = 0;
  if (cuMemAlloc(&d, 4) || cuMemcpyHtoD(d, &value, 4) || cuMemcpyDtoH(&back, d, 4) || back != 7) {
    fprintf(stderr, "own_protobuf: device round trip failed\n");
    return 1;
  }
  rgpu::wire::Envelope parsed;
  if (!parsed.ParseFromString(bytes) || parsed.value() != 42 || parsed.note() != mine.note()) {
    fprintf(stderr, "own_protobuf: the program's protobuf misbehaved\n");
    return 1;
  }
  // rgpu's runtime lives in its own link namespace: the program's list of loaded objects does
  // not contain it or its dependencies.
  int leaked = dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) -> int {
        for (const char* name : {"librgpu-client", "libucp", "libucs", "libprotobuf-lite"}) {
          if (info->dlpi_name != nullptr && strstr(info->dlpi_name, name) != nullptr) {
            fprintf(stderr, "own_protobuf: %s is loaded in the program's namespace\n",
                    info->dlpi_name);
            return 1;
          }
        }
        return 0;
      },
      nullptr);
  if (leaked) return 1;
  printf("own_protobuf: OK (program protobuf and rgpu's coexist)\n");
  return 0;
}
