// cuLaunchKernelEx honours or refuses each launch attribute: hints (priority, access policy
// window, programmatic serialization) launch as usual and compute the right answer; the launch
// completion event fires only after the kernel's work is done; a cooperative launch runs (and one
// whose grid cannot be co-resident is refused with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
// clusters run on a device that has them (a shape that does not divide the grid refused with
// CUDA_ERROR_INVALID_CLUSTER_SIZE) and are refused with CUDA_ERROR_NOT_SUPPORTED on one without;
// a bad config is refused.
#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  const int n = 4096;
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, n * sizeof(int)));
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent done;
  CHECK(cuEventCreate(&done, CU_EVENT_DEFAULT));

  int value = 7, count = n;
  void* params[] = {&p, &value, &count};
  CUlaunchAttribute attrs[4] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[0].value.priority = -1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attrs[1].value.programmaticStreamSerializationAllowed = 1;
  attrs[2].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
  attrs[2].value.launchCompletionEvent.event = done;
  attrs[3].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[3].value.clusterDim.x = attrs[3].value.clusterDim.y = attrs[3].value.clusterDim.z = 1;
  CUlaunchConfig config = {};
  config.gridDimX = n / 256;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  config.attrs = attrs;
  config.numAttrs = 4;
  CHECK(cuLaunchKernelEx(&config, set_all, params, nullptr));
  CHECK(cuEventSynchronize(done));
  std::vector<int> host(n);
  CHECK(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 7);

  // A cooperative launch of a grid that fits, by both entry points; one that cannot be
  // co-resident is refused at the launch.
  int coop = 0;
  CHECK(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0));
  EXPECT_TRUE(coop == 1);
  CUlaunchAttribute refused = {};
  config.attrs = &refused;
  config.numAttrs = 1;
  refused.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  refused.value.cooperative = 1;
  const unsigned grid_x = config.gridDimX;
  config.gridDimX = 1u << 20;
  EXPECT_TRUE(cuLaunchKernelEx(&config, set_all, params, nullptr) ==
              CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  config.gridDimX = 1;
  value = 8;
  CHECK(cuLaunchKernelEx(&config, set_all, params, nullptr));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == (i < (int)config.blockDimX ? 8 : 7));
  value = 7;
  CHECK(cuLaunchCooperativeKernel(set_all, 1, 1, 1, config.blockDimX, 1, 1, 0, stream, params));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 7);
  config.gridDimX = grid_x;

  // Clusters: two blocks each on a device that has them (9.0 and newer), refused by name on one
  // that has not; a shape that does not divide the grid is refused at the launch.
  int clusters = 0;
  CHECK(cuDeviceGetAttribute(&clusters, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0));
  refused = {};
  refused.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  refused.value.clusterDim.x = 2;
  refused.value.clusterDim.y = refused.value.clusterDim.z = 1;
  if (clusters) {
    value = 6;
    CHECK(cuLaunchKernelEx(&config, set_all, params, nullptr));
    CHECK(cuStreamSynchronize(stream));
    CHECK(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 6);
    value = 7;
    refused.value.clusterDim.x = 3;  // 16 blocks
    EXPECT_TRUE(cuLaunchKernelEx(&config, set_all, params, nullptr) ==
                CUDA_ERROR_INVALID_CLUSTER_SIZE);
  } else {
    EXPECT_TRUE(cuLaunchKernelEx(&config, set_all, params, nullptr) == CUDA_ERROR_NOT_SUPPORTED);
  }
  refused = {};
  refused.id = static_cast<CUlaunchAttributeID>(99);
  EXPECT_TRUE(cuLaunchKernelEx(&config, set_all, params, nullptr) == CUDA_ERROR_NOT_SUPPORTED);
  config.attrs = nullptr;
  EXPECT_TRUE(cuLaunchKernelEx(&config, set_all, params, nullptr) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuLaunchKernelEx(nullptr, set_all, params, nullptr) == CUDA_ERROR_INVALID_VALUE);
  // Nothing refused ran: the buffer still holds the values of the last launch that did.
  config.numAttrs = 0;
  value = 9;
  CHECK(cuLaunchKernelEx(&config, set_all, params, nullptr));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 9);

  CHECK(cuEventDestroy(done));
  CHECK(cuStreamDestroy(stream));
  CHECK(cuMemFree(p));
  CHECK(cuCtxDestroy(ctx));
  printf("launch_ex: OK\n");
  return 0;
}
