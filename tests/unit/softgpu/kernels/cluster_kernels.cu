// Thread-block clusters (compute_90 and newer): cluster coordinates, the cluster barrier, and
// distributed shared memory through cooperative_groups and the __cluster* built-ins, as nvcc
// emits them. cluster_test.cc checks the results on the host.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// Each block's view of its cluster, 12 words per block (linear block index): rank, blocks in
// the cluster, index in the cluster (x, y, z), cluster shape (x, y, z), cluster index (x, y, z),
// whether the launch was of explicit clusters.
extern "C" __global__ void cluster_ids(unsigned* out) {
  if (threadIdx.x != 0) return;
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned* o = out + b * 12;
  const dim3 in_cluster = __clusterRelativeBlockIdx();
  const dim3 shape = __clusterDim();
  const dim3 cluster = __clusterIdx();
  o[0] = __clusterRelativeBlockRank();
  o[1] = __clusterSizeInBlocks();
  o[2] = in_cluster.x;
  o[3] = in_cluster.y;
  o[4] = in_cluster.z;
  o[5] = shape.x;
  o[6] = shape.y;
  o[7] = shape.z;
  o[8] = cluster.x;
  o[9] = cluster.y;
  o[10] = cluster.z;
  o[11] = cg::this_cluster().num_blocks() == __clusterSizeInBlocks() ? 1 : 0;
}

// Each block fills its shared array, the cluster synchronizes, and each thread reads the array
// of the next block in the cluster (distributed shared memory); a second barrier keeps every
// block's shared memory alive until its neighbour has read it. out[block * n + t] =
// value the next block wrote at t.
extern "C" __global__ void ring_exchange(int* out) {
  extern __shared__ int tile[];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned n = blockDim.x;
  tile[threadIdx.x] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
  cluster.sync();
  const int* next = cluster.map_shared_rank(tile, (rank + 1) % cluster.num_blocks());
  out[blockIdx.x * n + threadIdx.x] = next[threadIdx.x];
  cluster.sync();
}

// A histogram in distributed shared memory: the bins are spread over the cluster's blocks
// (bins_per_block each); every thread adds its inputs into whichever block owns the bin, then
// each block adds its bins into the global histogram.
extern "C" __global__ void cluster_histogram(const int* in, int count, int bins_per_block,
                                             int* histogram) {
  extern __shared__ int bins[];
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < bins_per_block; i += blockDim.x) bins[i] = 0;
  cluster.sync();
  const int total_bins = bins_per_block * static_cast<int>(cluster.num_blocks());
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    int bin = in[i] % total_bins;
    if (bin < 0) bin += total_bins;
    int* owner = cluster.map_shared_rank(bins, bin / bins_per_block);
    atomicAdd(owner + bin % bins_per_block, 1);
  }
  cluster.sync();
  const int first = static_cast<int>(cluster.block_rank()) * bins_per_block;
  for (int i = threadIdx.x; i < bins_per_block; i += blockDim.x) {
    atomicAdd(&histogram[first + i], bins[i]);
  }
}

// Compile-time cluster shape: launched without a cluster attribute, blocks still pair up.
// out[block] = its rank * 10 + cluster size.
extern "C" __global__ void __cluster_dims__(2, 1, 1) fixed_pairs(unsigned* out) {
  if (threadIdx.x == 0)
    out[blockIdx.x] = __clusterRelativeBlockRank() * 10 + __clusterSizeInBlocks();
}

// Only the first warp of each block stays; the others exit at once, so the cluster barrier waits
// for the threads that remain. Then lane 0 reads the partner block's word and asks which block
// owns that address. out[block * 3 + {0,1,2}] = partner's value, rank owning the mapped address,
// whether the mapped address is shared memory of the cluster.
extern "C" __global__ void survivors_sync(unsigned* out) {
  __shared__ unsigned word;
  if (threadIdx.x >= 32) return;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) word = 7000 + blockIdx.x;
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
  if (threadIdx.x == 0) {
    const unsigned partner = cluster.block_rank() ^ 1;
    const unsigned* p = static_cast<const unsigned*>(__cluster_map_shared_rank(&word, partner));
    out[blockIdx.x * 3 + 0] = *p;
    out[blockIdx.x * 3 + 1] = __cluster_query_shared_rank(p);
    out[blockIdx.x * 3 + 2] = __isClusterShared(p);
  }
  cluster.sync();
}
