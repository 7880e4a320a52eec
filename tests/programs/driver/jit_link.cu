// The JIT linker links PTX modules for real: a kernel calls a function and reads a variable that
// another module defines (.extern resolved across inputs), while each module's internal variable
// of the same name stays its own; the linked image loads and computes the right answer, and the
// log buffers and wall time are filled. A second definition of a visible name, a reference
// nothing defines and malformed PTX are refused, each with a message in the error log; the fat
// binary of the test kernels links too, from a file; cuModuleLoadDataEx fills its log and wall-time
// options the same way.
#include <cstring>

#include "check.h"

namespace {

// Defines add_tag() and counter; its own internal `tag` is 100.
const char* kLibrary = R"(
.version 7.0
.target sm_52
.address_size 64

.global .align 4 .u32 tag = 100;
.visible .global .align 4 .u32 counter = 5;

.visible .func (.param .b32 ret) add_tag(.param .b32 x)
{
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [x];
  ld.global.u32 %r2, [tag];
  add.s32 %r3, %r1, %r2;
  st.param.b32 [ret], %r3;
  ret;
}
)";

// Uses add_tag() and counter from elsewhere; its internal `tag` is 7.
const char* kMain = R"(
.version 7.8
.target sm_75
.address_size 64

.extern .func (.param .b32 ret) add_tag(.param .b32 x);
.extern .global .align 4 .u32 counter;
.global .align 4 .u32 tag = 7;

.visible .entry compute(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.u32 %r1, [tag];
  {
  .param .b32 p0;
  .param .b32 r0;
  st.param.b32 [p0], %r1;
  call.uni (r0), add_tag, (p0);
  ld.param.b32 %r2, [r0];
  }
  ld.global.u32 %r3, [counter];
  add.s32 %r4, %r2, %r3;
  st.global.u32 [%rd2], %r4;
  ret;
}
)";

// A second visible definition of counter.
const char* kDuplicate = R"(
.version 7.0
.target sm_52
.address_size 64
.visible .global .align 4 .u32 counter = 9;
)";

struct Logs {
  float wall_ms = -1.0f;
  char info[4096] = {};
  char error[4096] = {};
  CUjit_option options[6] = {CU_JIT_WALL_TIME,
                             CU_JIT_INFO_LOG_BUFFER,
                             CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                             CU_JIT_ERROR_LOG_BUFFER,
                             CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                             CU_JIT_LOG_VERBOSE};
  void* values[6] = {};
  Logs() {
    values[1] = info;
    values[2] = reinterpret_cast<void*>(uintptr_t{sizeof info});
    values[3] = error;
    values[4] = reinterpret_cast<void*>(uintptr_t{sizeof error});
    values[5] = reinterpret_cast<void*>(uintptr_t{1});
  }
  float wall() const {
    float f;
    memcpy(&f, &values[0], sizeof f);
    return f;
  }
};

CUresult AddPtx(CUlinkState link, const char* ptx) {
  return cuLinkAddData(link, CU_JIT_INPUT_PTX, const_cast<char*>(ptx), strlen(ptx) + 1, "ptx", 0,
                       nullptr, nullptr);
}

}  // namespace

int main() {
  InitContext();

  // Two modules linked, loaded and run.
  {
    Logs logs;
    CUlinkState link;
    CHECK(cuLinkCreate(6, logs.options, logs.values, &link));
    CHECK(AddPtx(link, kLibrary));
    CHECK(AddPtx(link, kMain));
    void* image = nullptr;
    size_t size = 0;
    CHECK(cuLinkComplete(link, &image, &size));
    EXPECT_TRUE(image != nullptr && size > 0);
    EXPECT_TRUE(logs.wall() >= 0.0f);
    CUmodule module;
    CHECK(cuModuleLoadData(&module, image));
    CHECK(cuLinkDestroy(link));  // the module outlives the link
    CUfunction compute;
    CHECK(cuModuleGetFunction(&compute, module, "compute"));
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, sizeof(unsigned)));
    void* params[] = {&out};
    CHECK(cuLaunchKernel(compute, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    unsigned result = 0;
    CHECK(cuMemcpyDtoH(&result, out, sizeof result));
    if (result != 7 + 100 + 5) {
      fprintf(stderr, "linked kernel computed %u, expected 112\n", result);
      return 1;
    }
    // counter is one variable of the linked module: cuModuleGetGlobal finds it.
    CUdeviceptr counter;
    size_t bytes = 0;
    CHECK(cuModuleGetGlobal(&counter, &bytes, module, "counter"));
    EXPECT_TRUE(bytes == sizeof(unsigned));
    CHECK(cuMemFree(out));
    CHECK(cuModuleUnload(module));
  }

  // Two definitions of a visible name: the link fails and says why.
  {
    Logs logs;
    CUlinkState link;
    CHECK(cuLinkCreate(6, logs.options, logs.values, &link));
    CHECK(AddPtx(link, kLibrary));
    CHECK(AddPtx(link, kMain));
    CUresult r = AddPtx(link, kDuplicate);
    void* image = nullptr;
    size_t size = 0;
    if (r == CUDA_SUCCESS) r = cuLinkComplete(link, &image, &size);
    EXPECT_TRUE(r != CUDA_SUCCESS);
    EXPECT_TRUE(strstr(logs.error, "counter") != nullptr);
    CHECK(cuLinkDestroy(link));
  }

  // A reference nothing defines.
  {
    Logs logs;
    CUlinkState link;
    CHECK(cuLinkCreate(6, logs.options, logs.values, &link));
    CHECK(AddPtx(link, kMain));
    void* image = nullptr;
    size_t size = 0;
    EXPECT_TRUE(cuLinkComplete(link, &image, &size) != CUDA_SUCCESS);
    EXPECT_TRUE(strstr(logs.error, "add_tag") != nullptr || strstr(logs.error, "counter"));
    CHECK(cuLinkDestroy(link));
  }

  // Malformed PTX is refused when it is added, with a message.
  {
    Logs logs;
    CUlinkState link;
    CHECK(cuLinkCreate(6, logs.options, logs.values, &link));
    EXPECT_TRUE(AddPtx(link,
                       ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry "
                       "broken( { bogus.instruction %r1; }") == CUDA_ERROR_INVALID_PTX);
    EXPECT_TRUE(logs.error[0] != '\0');
    CHECK(cuLinkDestroy(link));
  }

  // The test kernels' fat binary, added as a file, links and loads on its own.
  {
    CUlinkState link;
    CHECK(cuLinkCreate(0, nullptr, nullptr, &link));
    CHECK(cuLinkAddFile(link, CU_JIT_INPUT_FATBINARY, RGPU_KERNELS_FATBIN, 0, nullptr, nullptr));
    void* image = nullptr;
    size_t size = 0;
    CHECK(cuLinkComplete(link, &image, &size));
    CUmodule module;
    CHECK(cuModuleLoadData(&module, image));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, module, "set_all"));
    CHECK(cuModuleUnload(module));
    CHECK(cuLinkDestroy(link));
  }
  // cuModuleLoadDataEx fills the same outputs: logs NUL-terminated (empty on success, the error
  // log saying so on failure) and the wall time, whatever the buffers held before.
  {
    Logs logs;
    memset(logs.info, 'x', sizeof logs.info);
    memset(logs.error, 'x', sizeof logs.error);
    CUmodule module;
    CHECK(cuModuleLoadDataEx(&module, kLibrary, 6, logs.options, logs.values));
    EXPECT_TRUE(logs.info[0] == '\0' && logs.error[0] == '\0');
    EXPECT_TRUE(reinterpret_cast<uintptr_t>(logs.values[2]) == 1);  // the NUL
    EXPECT_TRUE(logs.wall() >= 0.0f);
    CHECK(cuModuleUnload(module));
    Logs failed;
    memset(failed.error, 'x', sizeof failed.error);
    EXPECT_TRUE(cuModuleLoadDataEx(&module,
                                   ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry "
                                   "broken( { bogus.instruction %r1; }",
                                   6, failed.options, failed.values) != CUDA_SUCCESS);
    EXPECT_TRUE(failed.error[0] != '\0' && failed.error[0] != 'x' &&
                strlen(failed.error) < sizeof failed.error);
  }
  printf("jit_link: OK\n");
  return 0;
}
