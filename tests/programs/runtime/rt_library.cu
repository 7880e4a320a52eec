// Runtime libraries (cudaLibrary*, cudaKernel_t): a library loaded from PTX text, its kernels
// counted, enumerated, named (cudaFuncGetName on a cudaKernel_t) and found by name, one launched
// as a cudaKernel_t and its answer checked against the CPU; then the program's own __global__
// function as a cudaKernel_t (cudaGetKernel), launched the same way; the library unloaded.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "rt_check.h"

namespace {

// Two kernels written in PTX: x[i] *= a for i < n, and one that does nothing.
const char kPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64

.visible .entry scale_by(
  .param .u64 p_x,
  .param .f32 p_a,
  .param .u32 p_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [p_x];
  ld.param.f32 %f1, [p_a];
  ld.param.u32 %r1, [p_n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f2, [%rd4];
  mul.f32 %f2, %f2, %f1;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}

.visible .entry do_nothing()
{
  ret;
}
)";

__global__ void add_to_each(float* x, float v, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

}  // namespace

int main() {
  cudaLibrary_t lib;
  CHECK(cudaLibraryLoadData(&lib, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  unsigned count = 0;
  CHECK(cudaLibraryGetKernelCount(&count, lib));
  if (count != 2) {
    fprintf(stderr, "the library has %u kernels, not 2\n", count);
    return 1;
  }
  cudaKernel_t kernels[2] = {};
  CHECK(cudaLibraryEnumerateKernels(kernels, 2, lib));
  std::set<std::string> names;
  for (cudaKernel_t k : kernels) {
    const char* name = nullptr;
    CHECK(cudaFuncGetName(&name, reinterpret_cast<const void*>(k)));
    names.insert(name != nullptr ? name : "");
  }
  if (names != std::set<std::string>{"scale_by", "do_nothing"}) {
    fprintf(stderr, "the enumerated kernels are not scale_by and do_nothing\n");
    return 1;
  }
  cudaKernel_t scale_by;
  CHECK(cudaLibraryGetKernel(&scale_by, lib, "scale_by"));

  const unsigned n = 3000;
  std::vector<float> x(n);
  for (unsigned i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  float* dx;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  float a = 2.5f;
  unsigned count_arg = n;
  void* args[] = {&dx, &a, &count_arg};
  CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(scale_by), dim3((n + 255) / 256), dim3(256),
                         args, 0, nullptr));
  CHECK_SYNC();
  // The program's own kernel, as a cudaKernel_t.
  cudaKernel_t own;
  CHECK(cudaGetKernel(&own, reinterpret_cast<const void*>(add_to_each)));
  const char* own_name = nullptr;
  CHECK(cudaFuncGetName(&own_name, reinterpret_cast<const void*>(own)));
  if (own_name == nullptr || strstr(own_name, "add_to_each") == nullptr) {
    fprintf(stderr, "cudaGetKernel's kernel is named %s\n", own_name ? own_name : "(null)");
    return 1;
  }
  float v = 1.0f;
  void* own_args[] = {&dx, &v, &count_arg};
  CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(own), dim3((n + 255) / 256), dim3(256),
                         own_args, 0, nullptr));
  CHECK_SYNC();
  CHECK(cudaMemcpy(x.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (unsigned i = 0; i < n; ++i) {
    if (x[i] != 2.5f * static_cast<float>(i) + 1.0f) {
      fprintf(stderr, "x[%u] = %f, not %f\n", i, x[i], 2.5f * static_cast<float>(i) + 1.0f);
      return 1;
    }
  }
  CHECK(cudaFree(dx));
  CHECK(cudaLibraryUnload(lib));
  printf("rt_library: OK (%u kernels enumerated, 2 launched as cudaKernel_t)\n", count);
  return 0;
}
