// Stream attributes and the persisting L2 cache through rgpu: an access-policy window and a
// synchronization policy set on a stream read back as set, work on the stream still computes the
// right answer, out-of-range windows (hit ratio above 1, larger than the device's maximum window,
// an unknown property) and unknown policies are refused with CUDA_ERROR_INVALID_VALUE, the
// persisting-L2 limit is bounded by the device's maximum, and cuCtxResetPersistingL2Cache works;
// cuStreamCopyAttributes copies both to another stream (and refuses one of another priority),
// and cuStreamGetCtx_v2 names the stream's context and no green context.
#include "check.h"

#define EXPECT(cond, ...)                                                 \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expectation failed: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

int main() {
  CUcontext ctx = InitContext();
  int max_persisting = 0, max_window = 0;
  CHECK(cuDeviceGetAttribute(&max_persisting, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 0));
  CHECK(cuDeviceGetAttribute(&max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 0));
  EXPECT(max_persisting > 0 && max_window > 0, "no persisting L2 (%d) or window (%d)",
         max_persisting, max_window);

  CHECK(cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, static_cast<size_t>(max_persisting)));
  size_t limit = 0;
  CHECK(cuCtxGetLimit(&limit, CU_LIMIT_PERSISTING_L2_CACHE_SIZE));
  EXPECT(limit == static_cast<size_t>(max_persisting), "persisting limit %zu", limit);
  EXPECT(cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                       static_cast<size_t>(max_persisting) + 1) == CUDA_ERROR_INVALID_VALUE,
         "a persisting limit above the maximum was accepted");

  const int n = 1 << 16;
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, n * sizeof(int)));
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  CUstreamAttrValue set = {};
  set.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(p);
  set.accessPolicyWindow.num_bytes = n * sizeof(int);
  set.accessPolicyWindow.hitRatio = 0.75f;
  set.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  set.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  CHECK(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &set));
  // Whether stream `s` reads back the window set above.
  auto has_window = [&](CUstream s) {
    CUstreamAttrValue v = {};
    CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    return v.accessPolicyWindow.base_ptr == set.accessPolicyWindow.base_ptr &&
           v.accessPolicyWindow.num_bytes == set.accessPolicyWindow.num_bytes &&
           v.accessPolicyWindow.hitRatio == 0.75f &&
           v.accessPolicyWindow.hitProp == CU_ACCESS_PROPERTY_PERSISTING &&
           v.accessPolicyWindow.missProp == CU_ACCESS_PROPERTY_STREAMING;
  };
  EXPECT(has_window(stream), "the access policy window did not read back as set");
  CUstreamAttrValue got = {};

  CUstreamAttrValue bad = set;
  bad.accessPolicyWindow.hitRatio = 1.5f;
  EXPECT(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &bad) ==
             CUDA_ERROR_INVALID_VALUE,
         "a hit ratio of 1.5 was accepted");
  bad = set;
  bad.accessPolicyWindow.num_bytes = static_cast<size_t>(max_window) + 1;
  EXPECT(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &bad) ==
             CUDA_ERROR_INVALID_VALUE,
         "a window above the device's maximum was accepted");
  bad = set;
  bad.accessPolicyWindow.hitProp = static_cast<CUaccessProperty>(7);
  EXPECT(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &bad) ==
             CUDA_ERROR_INVALID_VALUE,
         "an unknown access property was accepted");

  CUstreamAttrValue policy = {};
  policy.syncPolicy = CU_SYNC_POLICY_BLOCKING_SYNC;
  CHECK(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &policy));
  got = {};
  CHECK(cuStreamGetAttribute(stream, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
  EXPECT(got.syncPolicy == CU_SYNC_POLICY_BLOCKING_SYNC, "sync policy %d", got.syncPolicy);
  policy.syncPolicy = static_cast<CUsynchronizationPolicy>(9);
  EXPECT(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &policy) ==
             CUDA_ERROR_INVALID_VALUE,
         "an unknown synchronization policy was accepted");

  // The attributes copied to another stream of the context read back there; a stream of another
  // priority is refused (its priority cannot change here) and keeps what it had.
  CUstream copy;
  CHECK(cuStreamCreate(&copy, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCopyAttributes(copy, stream));
  EXPECT(has_window(copy), "the copied access policy window did not read back as set");
  got = {};
  CHECK(cuStreamGetAttribute(copy, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
  EXPECT(got.syncPolicy == CU_SYNC_POLICY_BLOCKING_SYNC, "copied sync policy %d", got.syncPolicy);
  int least = 0, greatest = 0;
  CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
  if (least != greatest) {
    CUstream urgent;
    CHECK(cuStreamCreateWithPriority(&urgent, CU_STREAM_NON_BLOCKING, greatest));
    EXPECT(cuStreamCopyAttributes(urgent, stream) == CUDA_ERROR_NOT_SUPPORTED,
           "attributes copied across priorities");
    got = {};
    CHECK(cuStreamGetAttribute(urgent, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
    EXPECT(got.syncPolicy != CU_SYNC_POLICY_BLOCKING_SYNC, "a refused copy changed the policy");
    EXPECT(!has_window(urgent), "a refused copy changed the window");
    // A priority past the range is clamped to it, as the driver does: such a stream has the
    // urgent one's priority, and takes its attributes.
    CUstream beyond;
    CHECK(cuStreamCreateWithPriority(&beyond, CU_STREAM_NON_BLOCKING, greatest - 100));
    int priority = 0;
    CHECK(cuStreamGetPriority(beyond, &priority));
    EXPECT(priority == greatest, "priority %d, the range's greatest %d", priority, greatest);
    CHECK(cuStreamCopyAttributes(beyond, urgent));
    CHECK(cuStreamDestroy(beyond));
    CHECK(cuStreamDestroy(urgent));
  }
  CUcontext of = nullptr;
  CUgreenCtx green = reinterpret_cast<CUgreenCtx>(&of);
  CHECK(cuStreamGetCtx_v2(copy, &of, &green));
  EXPECT(of == ctx && green == nullptr, "cuStreamGetCtx_v2: %p %p", (void*)of, (void*)green);
  CHECK(cuStreamDestroy(copy));

  // Work on the stream is unchanged by the hints.
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  int value = 11, count = n;
  void* params[] = {&p, &value, &count};
  CHECK(cuLaunchKernel(set_all, n / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  CHECK(cuCtxResetPersistingL2Cache());
  std::vector<int> host(n);
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
  for (int i = 0; i < n; ++i) EXPECT(host[i] == 11, "element %d is %d", i, host[i]);

  CHECK(cuStreamDestroy(stream));
  CHECK(cuMemFree(p));
  CHECK(cuCtxDestroy(ctx));
  printf("stream attributes: ok\n");
  return 0;
}
