// Error names and descriptions, the last error of each thread, and how driver results map to HIP.
#include <string.h>

#include "interpose/hip/runtime.h"

namespace rgpu::hip {
namespace {

thread_local Error t_last_error = hipSuccess;

struct ErrorInfo {
  int value;
  const char* name;
  const char* text;
};

constexpr ErrorInfo kErrors[] = {
#define HIP_ERROR(name, value, text) {value, #name, text},
#include "interpose/hip/error_codes.def"
#undef HIP_ERROR
};

const ErrorInfo* Find(int value) {
  for (const ErrorInfo& e : kErrors) {
    if (e.value == value) return &e;
  }
  return nullptr;
}

}  // namespace

Error ToHip(CUresult r) {
  if (Find(static_cast<int>(r)) != nullptr) return static_cast<Error>(r);
  switch (r) {
    case CUDA_ERROR_NOT_PERMITTED:
      return hipErrorNotSupported;
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
      return hipErrorLaunchFailure;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
      return hipErrorNoBinaryForGpu;
    default:
      return hipErrorUnknown;
  }
}

const char* ErrorName(Error e) {
  const ErrorInfo* info = Find(e);
  return info != nullptr ? info->name : "hipErrorUnknown";
}

Error Ret(Error e) {
  if (e != hipSuccess) t_last_error = e;
  return e;
}

}  // namespace rgpu::hip

using rgpu::hip::Error;

HIP_API(hipGetLastError)()->Error {
  Error e = rgpu::hip::t_last_error;
  rgpu::hip::t_last_error = rgpu::hip::hipSuccess;
  return e;
}

HIP_API(hipPeekAtLastError)()->Error { return rgpu::hip::t_last_error; }

HIP_API(hipGetErrorName)(int error)->const char* {
  const rgpu::hip::ErrorInfo* e = rgpu::hip::Find(error);
  return e != nullptr ? e->name : "hipErrorUnknown";
}

HIP_API(hipGetErrorString)(int error)->const char* {
  const rgpu::hip::ErrorInfo* e = rgpu::hip::Find(error);
  return e != nullptr ? e->text : "unknown error";
}

// For the face: an entry point rgpu does not implement failed with `error`.
extern "C" __attribute__((visibility("default"))) void rgpu_hip_record_error(int error) {
  rgpu::hip::Ret(static_cast<Error>(error));
}
