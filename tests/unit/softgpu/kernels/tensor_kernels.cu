// Tensor-map copies (TMA) and the other asynchronous-proxy stores of compute_90, written with
// libcu++'s cuda::ptx wrappers as CUTLASS-style code does: cp.async.bulk.tensor loads into
// shared memory completing an mbarrier, stores and reducing stores back to global memory,
// st.async and red.async into another block of the cluster, and reducing bulk copies.
// Built with nvcc -ptx -arch=compute_90 (and for the newest architecture).
#include <cuda.h>
#include <cuda/ptx>

namespace ptx = cuda::ptx;

namespace {

// Thread 0 loads the box at `c` through `map` into `tile`, completing `bar`; every thread waits.
__device__ void LoadBox(const CUtensorMap* map, int rank, const int* c, void* tile, uint64_t* bar,
                        unsigned bytes) {
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    switch (rank) {
      case 1: {
        const int32_t k[1] = {c[0]};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, map, k, bar);
        break;
      }
      case 2: {
        const int32_t k[2] = {c[0], c[1]};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, map, k, bar);
        break;
      }
      case 3: {
        const int32_t k[3] = {c[0], c[1], c[2]};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, map, k, bar);
        break;
      }
      case 4: {
        const int32_t k[4] = {c[0], c[1], c[2], c[3]};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, map, k, bar);
        break;
      }
      default: {
        const int32_t k[5] = {c[0], c[1], c[2], c[3], c[4]};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, map, k, bar);
        break;
      }
    }
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar, bytes);
  }
  while (!ptx::mbarrier_try_wait_parity(bar, 0)) {
  }
}

}  // namespace

// Loads the box at coordinates (c0, ..., c4) (the first `rank` of them) and copies the box's
// shared-memory image, swizzle included, byte for byte to `out`. The tile sits at the start of
// 1024-byte-aligned dynamic shared memory, after a static mbarrier.
extern "C" __global__ void tensor_load(const __grid_constant__ CUtensorMap map, int rank, int c0,
                                       int c1, int c2, int c3, int c4, unsigned bytes,
                                       unsigned char* out) {
  extern __shared__ __align__(1024) unsigned char tile[];
  __shared__ uint64_t bar;
  const int c[5] = {c0, c1, c2, c3, c4};
  LoadBox(&map, rank, c, tile, &bar, bytes);
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = tile[i];
}

// The same with the map in global memory (copied there by the host) instead of a parameter.
extern "C" __global__ void tensor_load_from_global(const CUtensorMap* map, int c0, int c1,
                                                   unsigned bytes, unsigned char* out) {
  extern __shared__ __align__(1024) unsigned char tile[];
  __shared__ uint64_t bar;
  const int c[5] = {c0, c1, 0, 0, 0};
  LoadBox(map, 2, c, tile, &bar, bytes);
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = tile[i];
}

// Fills shared memory with `image` (the box's shared-memory layout, swizzle included), then
// thread 0 stores it at (c0, c1) through the 2D map: plainly (reduce 0) or adding (reduce 1).
extern "C" __global__ void tensor_store_2d(const __grid_constant__ CUtensorMap map, int c0, int c1,
                                           const unsigned char* image, unsigned bytes, int reduce) {
  extern __shared__ __align__(1024) unsigned char tile[];
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) tile[i] = image[i];
  ptx::fence_proxy_async(ptx::space_shared);  // make the writes visible to the async proxy
  __syncthreads();
  if (threadIdx.x == 0) {
    const int32_t k[2] = {c0, c1};
    if (reduce)
      ptx::cp_reduce_async_bulk_tensor(ptx::space_global, ptx::space_shared, ptx::op_add, &map, k,
                                       tile);
    else
      ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &map, k, tile);
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>());
  }
}

// Two blocks of a cluster: block 0 loads the 2D box at (c0, c1) once for both with
// .multicast::cluster (an sm_90a instruction, written out here), each block waits on its own
// mbarrier and writes its tile to out + rank * bytes.
extern "C" __global__ void __cluster_dims__(2, 1, 1)
    tensor_load_multicast(const __grid_constant__ CUtensorMap map, int c0, int c1, unsigned bytes,
                          unsigned char* out) {
  extern __shared__ __align__(1024) unsigned char tile[];
  __shared__ uint64_t bar;
  const unsigned rank = ptx::get_sreg_cluster_ctarank();
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cluster, ptx::space_shared, &bar,
                                   bytes);
  }
  ptx::barrier_cluster_arrive();
  ptx::barrier_cluster_wait();  // both blocks' barriers expect the bytes before the copy
  if (rank == 0 && threadIdx.x == 0) {
    const uint16_t mask = 0x3;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(
            static_cast<unsigned>(__cvta_generic_to_shared(tile))),
        "l"(&map), "r"(c0), "r"(c1), "r"(static_cast<unsigned>(__cvta_generic_to_shared(&bar))),
        "h"(mask)
        : "memory");
  }
  while (!ptx::mbarrier_try_wait_parity(&bar, 0)) {
  }
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) out[rank * bytes + i] = tile[i];
  ptx::barrier_cluster_arrive();
  ptx::barrier_cluster_wait();  // neither block leaves while the other may still write to it
}

// Two blocks of a cluster: each thread of block 0 st.async-stores value[i] into block 1's
// `words` and red.async-adds value[i] into block 1's `sums` (which hold i), completing block 1's
// mbarrier; block 1 waits for all those bytes and writes words and sums out.
extern "C" __global__ void __cluster_dims__(2, 1, 1)
    async_stores(const unsigned* values, unsigned* words_out, unsigned* sums_out) {
  __shared__ unsigned words[64];
  __shared__ unsigned sums[64];
  __shared__ uint64_t bar;
  const unsigned rank = ptx::get_sreg_cluster_ctarank();
  const unsigned i = threadIdx.x;
  sums[i] = i;
  if (rank == 1 && i == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cluster, ptx::space_shared, &bar,
                                   64 * 2 * sizeof(unsigned));
  }
  ptx::barrier_cluster_arrive();
  ptx::barrier_cluster_wait();
  if (rank == 0) {
    unsigned* remote_words = static_cast<unsigned*>(__cluster_map_shared_rank(words, 1));
    unsigned* remote_sums = static_cast<unsigned*>(__cluster_map_shared_rank(sums, 1));
    uint64_t* remote_bar = static_cast<uint64_t*>(__cluster_map_shared_rank(&bar, 1));
    ptx::st_async(remote_words + i, values[i], remote_bar);
    ptx::red_async(ptx::op_add, remote_sums + i, values[i], remote_bar);
  } else {
    while (!ptx::mbarrier_try_wait_parity(&bar, 0)) {
    }
    words_out[i] = words[i];
    sums_out[i] = sums[i];
  }
  ptx::barrier_cluster_arrive();
  ptx::barrier_cluster_wait();
}

// A reducing bulk copy: dst[i] += src[i] for `count` floats (a multiple of 4), from shared
// memory, and a bulk copy of the same bytes back to `copy`.
extern "C" __global__ void bulk_reduce_add(const float* src, float* dst, float* copy,
                                           unsigned count) {
  __shared__ __align__(128) float staged[256];
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) staged[i] = src[i];
  ptx::fence_proxy_async(ptx::space_shared);
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::cp_reduce_async_bulk(ptx::space_global, ptx::space_shared, ptx::op_add, dst, staged,
                              count * sizeof(float));
    ptx::cp_async_bulk(ptx::space_global, ptx::space_shared, copy, staged, count * sizeof(float));
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group(ptx::n32_t<0>());
  }
}
