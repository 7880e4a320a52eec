// Thread-block clusters (compute capability 9.0 and newer): launches with a cluster shape
// (cuLaunchKernelEx's attribute, or compiled in with __cluster_dims__), the cluster's special
// registers, its barrier, distributed shared memory; the launch checks and the cluster
// attributes and occupancy queries; against the host.
#include <cuda.h>
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "test_util.h"

namespace {

// A grid or cluster shape (the host side has no dim3 without the runtime's headers).
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_, unsigned y_, unsigned z_) : x(x_), y(y_), z(z_) {}
};

class ClusterTest : public softgpu_test::KernelTest {
 protected:
  const char* PtxFile() const override { return "cluster_kernels.ptx"; }

  // Kernel `name` of a module made of `ptx` (null when it does not load).
  CUfunction LoadKernel(const char* ptx, const char* name) {
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleLoadData(&m, ptx), CUDA_SUCCESS);
    if (m != nullptr) EXPECT_EQ(cuModuleGetFunction(&f, m, name), CUDA_SUCCESS);
    return f;
  }

  // A launch of `grid` blocks of `block` threads in clusters of `cluster` (none when null).
  CUresult LaunchClusters(CUfunction f, dim3 grid, unsigned block, const dim3* cluster,
                          std::vector<void*> args, unsigned shared = 0) {
    CUlaunchAttribute attribute = {};
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    if (cluster != nullptr) {
      attribute.value.clusterDim.x = cluster->x;
      attribute.value.clusterDim.y = cluster->y;
      attribute.value.clusterDim.z = cluster->z;
    }
    CUlaunchConfig config = {};
    config.gridDimX = grid.x;
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = shared;
    config.attrs = &attribute;
    config.numAttrs = cluster != nullptr ? 1 : 0;
    return cuLaunchKernelEx(&config, f, args.data(), nullptr);
  }
};

TEST_F(ClusterTest, DeviceSupportsClusterLaunch) {
  int v = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0));
  EXPECT_EQ(v, 1);
}

TEST_F(ClusterTest, BlocksKnowTheirClusterCoordinates) {
  const dim3 grid(4, 6, 2), cluster(2, 3, 1);
  const unsigned blocks = grid.x * grid.y * grid.z;
  CUdeviceptr dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, blocks * 12 * sizeof(unsigned)));
  CU_ASSERT_OK(LaunchClusters(Function("cluster_ids"), grid, 32, &cluster, {&dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> out = Download<unsigned>(dout, blocks * 12);
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        const unsigned* o = &out[(x + grid.x * (y + grid.y * z)) * 12];
        const unsigned cx = x % cluster.x, cy = y % cluster.y, cz = z % cluster.z;
        SCOPED_TRACE(testing::Message() << "block " << x << "," << y << "," << z);
        EXPECT_EQ(o[0], cx + cluster.x * (cy + cluster.y * cz));
        EXPECT_EQ(o[1], 6u);
        EXPECT_EQ(o[2], cx);
        EXPECT_EQ(o[3], cy);
        EXPECT_EQ(o[4], cz);
        EXPECT_EQ(o[5], cluster.x);
        EXPECT_EQ(o[6], cluster.y);
        EXPECT_EQ(o[7], cluster.z);
        EXPECT_EQ(o[8], x / cluster.x);
        EXPECT_EQ(o[9], y / cluster.y);
        EXPECT_EQ(o[10], z / cluster.z);
        EXPECT_EQ(o[11], 1u);
      }
    }
  }
}

// Without a cluster shape every block is a cluster of one.
TEST_F(ClusterTest, APlainLaunchHasClustersOfOneBlock) {
  CUdeviceptr dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 3 * 12 * sizeof(unsigned)));
  CU_ASSERT_OK(Launch(Function("cluster_ids"), 3, 32, {&dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> out = Download<unsigned>(dout, 3 * 12);
  for (unsigned b = 0; b < 3; ++b) {
    EXPECT_EQ(out[b * 12 + 0], 0u);
    EXPECT_EQ(out[b * 12 + 1], 1u);
    EXPECT_EQ(out[b * 12 + 8], b);
  }
}

TEST_F(ClusterTest, BlocksReadEachOthersSharedMemory) {
  for (unsigned size : {2u, 4u, 8u}) {
    SCOPED_TRACE(size);
    const unsigned blocks = 16, threads = 96;
    CUdeviceptr dout;
    CU_ASSERT_OK(cuMemAlloc(&dout, blocks * threads * sizeof(int)));
    const dim3 cluster(size, 1, 1);
    CU_ASSERT_OK(LaunchClusters(Function("ring_exchange"), dim3(blocks, 1, 1), threads, &cluster,
                                {&dout}, threads * sizeof(int)));
    CU_ASSERT_OK(cuCtxSynchronize());
    const std::vector<int> out = Download<int>(dout, blocks * threads);
    for (unsigned b = 0; b < blocks; ++b) {
      const unsigned next = b / size * size + (b % size + 1) % size;
      for (unsigned t = 0; t < threads; ++t) {
        ASSERT_EQ(out[b * threads + t], static_cast<int>(next * 1000 + t)) << b << " " << t;
      }
    }
    CU_ASSERT_OK(cuMemFree(dout));
  }
}

TEST_F(ClusterTest, HistogramInDistributedSharedMemory) {
  constexpr int kCount = 20000, kBinsPerBlock = 64, kClusterSize = 4;
  std::vector<int> in(kCount);
  for (int i = 0; i < kCount; ++i) in[i] = (i * 7919 + 13) % 1000 - 300;
  CUdeviceptr din = Upload(in), dhist;
  const int total = kBinsPerBlock * kClusterSize;
  CU_ASSERT_OK(cuMemAlloc(&dhist, total * sizeof(int)));
  CU_ASSERT_OK(cuMemsetD32(dhist, 0, total));
  int count = kCount, bins = kBinsPerBlock;
  const dim3 cluster(kClusterSize, 1, 1);
  CU_ASSERT_OK(LaunchClusters(Function("cluster_histogram"), dim3(8, 1, 1), 128, &cluster,
                              {&din, &count, &bins, &dhist}, kBinsPerBlock * sizeof(int)));
  CU_ASSERT_OK(cuCtxSynchronize());
  // Two clusters each count every input their blocks read; together each input once.
  std::vector<int> want(total, 0);
  for (int v : in) want[((v % total) + total) % total]++;
  EXPECT_EQ(Download<int>(dhist, total), want);
}

TEST_F(ClusterTest, CompiledInShapeAppliesToAPlainLaunch) {
  CUfunction f = Function("fixed_pairs");
  int v = -1;
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, f));
  EXPECT_EQ(v, 2);
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, f));
  EXPECT_EQ(v, 1);
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, f));
  EXPECT_EQ(v, 1);
  // A compiled-in shape cannot be changed at run time.
  CU_EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 4),
               CUDA_ERROR_NOT_PERMITTED);
  CUdeviceptr dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 6 * sizeof(unsigned)));
  CU_ASSERT_OK(Launch(f, 6, 64, {&dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<unsigned>(dout, 6), (std::vector<unsigned>{2, 12, 2, 12, 2, 12}));
  // Another shape than the compiled one, or a grid it does not divide, is refused.
  const dim3 four(4, 1, 1);
  CU_EXPECT_EQ(LaunchClusters(f, dim3(8, 1, 1), 64, &four, {&dout}),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);
  CU_EXPECT_EQ(Launch(f, 5, 64, {&dout}), CUDA_ERROR_INVALID_CLUSTER_SIZE);
}

// Threads that exit no longer count at the cluster barrier; mapped addresses name their block.
TEST_F(ClusterTest, BarrierWaitsOnlyForThreadsThatRemain) {
  const unsigned blocks = 6;
  CUdeviceptr dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, blocks * 3 * sizeof(unsigned)));
  const dim3 cluster(2, 1, 1);
  CU_ASSERT_OK(
      LaunchClusters(Function("survivors_sync"), dim3(blocks, 1, 1), 128, &cluster, {&dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> out = Download<unsigned>(dout, blocks * 3);
  for (unsigned b = 0; b < blocks; ++b) {
    EXPECT_EQ(out[b * 3 + 0], 7000 + (b ^ 1)) << b;
    EXPECT_EQ(out[b * 3 + 1], (b % 2) ^ 1) << b;
    EXPECT_EQ(out[b * 3 + 2], 1u) << b;
  }
}

TEST_F(ClusterTest, ShapesTheDeviceCannotRunAreRefused) {
  CUfunction f = Function("cluster_ids");
  CUdeviceptr dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 32 * 12 * sizeof(unsigned)));
  const dim3 three(3, 1, 1), zero(0, 1, 1), nine(9, 1, 1), sixteen(16, 1, 1), seventeen(17, 1, 1);
  CU_EXPECT_EQ(LaunchClusters(f, dim3(8, 1, 1), 32, &three, {&dout}),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);  // does not divide the grid
  CU_EXPECT_EQ(LaunchClusters(f, dim3(8, 1, 1), 32, &zero, {&dout}),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);
  CU_EXPECT_EQ(LaunchClusters(f, dim3(9, 1, 1), 32, &nine, {&dout}),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);  // more than 8: not portable
  CU_EXPECT_EQ(LaunchClusters(f, dim3(32, 1, 1), 32, &seventeen, {&dout}),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);
  int v = -1;
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, f));
  EXPECT_EQ(v, 0);
  CU_ASSERT_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  CU_ASSERT_OK(LaunchClusters(f, dim3(32, 1, 1), 32, &sixteen, {&dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> out = Download<unsigned>(dout, 32 * 12);
  for (unsigned b = 0; b < 32; ++b) EXPECT_EQ(out[b * 12 + 1], 16u);
  CU_EXPECT_EQ(LaunchClusters(f, dim3(32, 1, 1), 32, &seventeen, {&dout}),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);
}

TEST_F(ClusterTest, ShapeSetAtRunTime) {
  CUfunction f = Function("cluster_ids");
  CU_ASSERT_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2));
  CU_ASSERT_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, 1));
  CU_ASSERT_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, 1));
  CUdeviceptr dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 4 * 12 * sizeof(unsigned)));
  CU_ASSERT_OK(Launch(f, 4, 32, {&dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> out = Download<unsigned>(dout, 4 * 12);
  for (unsigned b = 0; b < 4; ++b) {
    EXPECT_EQ(out[b * 12 + 0], b % 2);
    EXPECT_EQ(out[b * 12 + 1], 2u);
  }
}

TEST_F(ClusterTest, OccupancyOfClusters) {
  CUfunction f = Function("ring_exchange");
  CUlaunchAttribute attribute = {};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = 4;
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  CUlaunchConfig config = {};
  config.gridDimX = 16;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = 512;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int blocks_per_sm = 0, sms = 0, clusters = 0, size = 0;
  CU_ASSERT_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, f, 128, 512));
  CU_ASSERT_OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  CU_ASSERT_OK(cuOccupancyMaxActiveClusters(&clusters, f, &config));
  EXPECT_EQ(clusters, blocks_per_sm * sms / 4);
  CU_ASSERT_OK(cuOccupancyMaxPotentialClusterSize(&size, f, &config));
  EXPECT_EQ(size, std::min(8, blocks_per_sm * sms));
  // Without a shape there is nothing to count.
  config.numAttrs = 0;
  CU_EXPECT_EQ(cuOccupancyMaxActiveClusters(&clusters, f, &config),
               CUDA_ERROR_INVALID_CLUSTER_SIZE);
}

// Distributed shared memory is bounds-checked like any memory: a rank outside the cluster, or
// an offset past the other block's shared memory, faults.
TEST_F(ClusterTest, AccessesOutsideTheClusterFault) {
  const char* ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry reach(.param .u32 rank, .param .u32 offset)
{
  .reg .b32 %r<6>;
  .shared .align 4 .b32 word[4];
  ld.param.u32 %r1, [rank];
  ld.param.u32 %r2, [offset];
  mov.u32 %r3, word;
  add.u32 %r3, %r3, %r2;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  mapa.shared::cluster.u32 %r4, %r3, %r1;
  ld.shared::cluster.u32 %r5, [%r4];
  barrier.cluster.arrive;
  barrier.cluster.wait;
  ret;
}
)";
  CUfunction f = LoadKernel(ptx, "reach");
  ASSERT_NE(f, nullptr);
  const dim3 two(2, 1, 1);
  unsigned rank = 1, offset = 12;
  CU_ASSERT_OK(LaunchClusters(f, dim3(2, 1, 1), 32, &two, {&rank, &offset}));
  CU_ASSERT_OK(cuCtxSynchronize());
  rank = 2;  // no such block
  CU_ASSERT_OK(LaunchClusters(f, dim3(2, 1, 1), 32, &two, {&rank, &offset}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(ClusterTest, PastTheOtherBlocksSharedMemoryFaults) {
  const char* ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry reach(.param .u32 offset)
{
  .reg .b32 %r<6>;
  .shared .align 4 .b32 word[4];
  ld.param.u32 %r2, [offset];
  mov.u32 %r3, word;
  add.u32 %r3, %r3, %r2;
  mov.u32 %r1, 1;
  mapa.shared::cluster.u32 %r4, %r3, %r1;
  st.shared::cluster.u32 [%r4], %r1;
  ret;
}
)";
  CUfunction f = LoadKernel(ptx, "reach");
  ASSERT_NE(f, nullptr);
  const dim3 two(2, 1, 1);
  unsigned offset = 16;  // just past the 16-byte array
  CU_ASSERT_OK(LaunchClusters(f, dim3(2, 1, 1), 32, &two, {&offset}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

}  // namespace
