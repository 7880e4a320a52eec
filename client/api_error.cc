// Error names and descriptions, answered locally from a table generated from cuda.h.
#include "client/impl.h"

namespace {
struct ErrorEntry {
  CUresult code;
  const char* name;
  const char* description;
};
constexpr ErrorEntry kErrors[] = {
#define RGPU_ERROR(name, value, text) {static_cast<CUresult>(value), #name, text},
#include "abi/error_table.inc"
#undef RGPU_ERROR
};
const ErrorEntry* Find(CUresult code) {
  for (const ErrorEntry& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}
}  // namespace

RGPU_IMPL(cuGetErrorName)(CUresult error, const char** out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* e = Find(error);
  if (e == nullptr) {
    *out = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = e->name;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGetErrorString)(CUresult error, const char** out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorEntry* e = Find(error);
  if (e == nullptr) {
    *out = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = e->description;
  return CUDA_SUCCESS;
}
