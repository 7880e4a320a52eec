// Thread-block clusters through the runtime (built for compute_90): cudaLaunchKernelEx with a
// cluster shape, a kernel with a compiled-in shape (__cluster_dims__) launched with <<<>>>, the
// blocks of a cluster exchanging data through distributed shared memory between cluster.sync()
// barriers, a histogram kept in the cluster's shared memory, the cluster occupancy queries, and a
// shape that does not divide the grid refused with cudaErrorInvalidClusterSize; each result
// compared with the CPU.
#include <cooperative_groups.h>

#include <vector>

#include "rt_check.h"

namespace cg = cooperative_groups;

// out[block * n + t] = what the next block of the cluster wrote at t (block * 1000 + t).
__global__ void RingExchange(int* out) {
  extern __shared__ int tile[];
  cg::cluster_group cluster = cg::this_cluster();
  tile[threadIdx.x] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
  cluster.sync();
  const int* next =
      cluster.map_shared_rank(tile, (cluster.block_rank() + 1) % cluster.num_blocks());
  out[blockIdx.x * blockDim.x + threadIdx.x] = next[threadIdx.x];
  cluster.sync();
}

// A histogram whose bins are spread over the cluster's blocks' shared memory.
__global__ void __cluster_dims__(4, 1, 1) Histogram(const int* in, int n, int* bins_out) {
  constexpr int kBinsPerBlock = 32;
  __shared__ int bins[kBinsPerBlock];
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < kBinsPerBlock; i += blockDim.x) bins[i] = 0;
  cluster.sync();
  const int total = kBinsPerBlock * static_cast<int>(cluster.num_blocks());
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int bin = in[i] % total;
    atomicAdd(cluster.map_shared_rank(bins, bin / kBinsPerBlock) + bin % kBinsPerBlock, 1);
  }
  cluster.sync();
  for (int i = threadIdx.x; i < kBinsPerBlock; i += blockDim.x) {
    atomicAdd(&bins_out[cluster.block_rank() * kBinsPerBlock + i], bins[i]);
  }
}

int main() {
  int major = 0, cluster_launch = 0;
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, 0));
  if (major < 9 || !cluster_launch) {
    fprintf(stderr, "the device has no thread-block clusters (compute capability %d)\n", major);
    return 1;
  }

  // Clusters of 4 chosen at launch.
  const unsigned blocks = 16, threads = 64;
  int* d_out;
  CHECK(cudaMalloc(&d_out, blocks * threads * sizeof(int)));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = threads * sizeof(int);
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = 4;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&config, RingExchange, d_out));
  CHECK(cudaDeviceSynchronize());
  std::vector<int> out(blocks * threads);
  CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<int> ring(blocks * threads);
  for (unsigned b = 0; b < blocks; ++b) {
    const unsigned next = b / 4 * 4 + (b % 4 + 1) % 4;
    for (unsigned t = 0; t < threads; ++t)
      ring[b * threads + t] = static_cast<int>(next * 1000 + t);
  }
  ExpectEqualArrays("ring exchange", out.data(), ring.data(), out.size());

  // Occupancy of clusters of 4 (the backend answers); at least one must fit.
  int clusters = 0, size = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&clusters, RingExchange, &config));
  EXPECT(clusters >= 1, "%d clusters of 4 fit", clusters);
  config.numAttrs = 0;
  CHECK(cudaOccupancyMaxPotentialClusterSize(&size, RingExchange, &config));
  EXPECT(size >= 4, "largest cluster %d", size);

  // A shape that does not divide the grid is refused at the launch.
  config.numAttrs = 1;
  config.gridDim = dim3(6);
  EXPECT_ERROR(cudaLaunchKernelEx(&config, RingExchange, d_out), cudaErrorInvalidClusterSize);
  cudaGetLastError();

  // The compiled-in shape applies to a plain launch.
  const int n = 50000;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 7919 + 17) % 100000;
  int *d_in, *d_bins;
  CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CHECK(cudaMalloc(&d_bins, 128 * sizeof(int)));
  CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_bins, 0, 128 * sizeof(int)));
  Histogram<<<8, 128>>>(d_in, n, d_bins);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<int> bins(128), want(128, 0);
  CHECK(cudaMemcpy(bins.data(), d_bins, 128 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int v : in) want[v % 128]++;
  ExpectEqualArrays("histogram", bins.data(), want.data(), bins.size());
  cudaFuncAttributes attrs;
  CHECK(cudaFuncGetAttributes(&attrs, Histogram));
  EXPECT(attrs.requiredClusterWidth == 4 && attrs.clusterDimMustBeSet == 1,
         "required cluster width %d, must be set %d", attrs.requiredClusterWidth,
         attrs.clusterDimMustBeSet);

  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_bins));
  CHECK(cudaFree(d_out));
  printf("rt_clusters: OK\n");
  return 0;
}
