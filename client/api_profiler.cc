// The profiler control entry points (cudaProfiler.h), as a driver with no profiling tool attached
// answers them: cuProfilerStart/Stop succeed in a live context and change nothing (the server's
// GPU is not profiled on a tenant's behalf); cuProfilerInitialize has always failed since
// CUDA 12.0 with CUDA_ERROR_NOT_SUPPORTED, as the header documents. hashcat and the samples'
// matrixMul and asyncAPI call them (through cudaProfilerStart/Stop).
#include <cudaProfiler.h>

#include "client/impl.h"

namespace {

CUresult InLiveContext() {
  CUctx_st* ctx = nullptr;
  return rgpu::client::RequireContext(&ctx);
}

}  // namespace

RGPU_IMPL(cuProfilerStart)() { return InLiveContext(); }

RGPU_IMPL(cuProfilerStop)() { return InLiveContext(); }

RGPU_IMPL(cuProfilerInitialize)(const char*, const char*, CUoutput_mode) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
