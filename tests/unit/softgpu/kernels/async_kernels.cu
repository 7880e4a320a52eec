// Asynchronous copies and transaction barriers of compute_90 and newer, for softgpu's
// async_copy_test (compiled to compute_90 PTX and to the newest architecture's): libcu++'s
// cuda::memcpy_async on a block barrier (which nvcc turns into cp.async.bulk completing an
// mbarrier's transaction count), the same by hand in inline PTX (arrive.expect_tx, the bulk copy
// to shared memory and back out in a bulk group), elect.sync, and cp.async's
// mbarrier.arrive.noinc.
#include <cooperative_groups.h>

#include <cuda/barrier>

namespace cg = cooperative_groups;

// out[i] = 2 * in[i], 256 floats per block staged through shared memory by cuda::memcpy_async.
extern "C" __global__ void staged_double(const float* in, float* out) {
  __shared__ alignas(16) float tile[256];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  cuda::memcpy_async(block, tile, in + blockIdx.x * 256,
                     cuda::aligned_size_t<16>(256 * sizeof(float)), bar);
  bar.arrive_and_wait();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) out[blockIdx.x * 256 + i] = 2 * tile[i];
}

// Each block: an elected lane expects 1024 bytes on the block's barrier and bulk-copies 64 int4
// from `in` into shared memory; everyone waits on the barrier's phase, adds one to every
// component, and thread 0 bulk-copies the tile to `out` in a bulk group. `leaders[w]` = the lane
// elect.sync chose in warp w among lanes 5 and up (5).
extern "C" __global__ void bulk_roundtrip(const int4* in, int4* out, unsigned* leaders) {
  __shared__ alignas(16) int4 tile[64];
  __shared__ alignas(8) unsigned long long bar;
  const unsigned bar_address = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  const unsigned tile_address = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  const unsigned lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar_address), "r"(blockDim.x));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  if (lane >= 5) {
    unsigned leader;
    asm volatile("{\n\t.reg .pred p;\n\telect.sync %0|p, 0xffffffe0;\n\t}" : "=r"(leader));
    if (lane == 5) leaders[threadIdx.x / 32] = leader;
  }
  unsigned elected;
  asm volatile(
      "{\n\t.reg .pred p;\n\t.reg .b32 r;\n\telect.sync r|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected));
  unsigned long long state;
  if (threadIdx.x < 32 && elected) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state)
                 : "r"(bar_address), "r"(1024));
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(tile_address),
        "l"(in + blockIdx.x * 64), "r"(1024), "r"(bar_address)
        : "memory");
  } else {
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(bar_address));
  }
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar_address), "l"(state)
        : "memory");
  }
  for (int i = threadIdx.x; i < 64; i += blockDim.x) {
    tile[i].x += 1;
    tile[i].y += 1;
    tile[i].z += 1;
    tile[i].w += 1;
  }
  asm volatile("fence.proxy.async.shared::cta;");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + blockIdx.x * 64),
        "r"(tile_address), "r"(1024)
        : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

// out[i] = in[(i + 1) % blockDim.x] through shared memory: each thread cp.async-copies its word
// and arrives on the block's barrier when its copies are done (cp.async.mbarrier.arrive.noinc).
extern "C" __global__ void cp_async_arrive(const int* in, int* out) {
  __shared__ alignas(16) int words[128];
  __shared__ alignas(8) unsigned long long bar;
  const unsigned bar_address = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  const unsigned word_address =
      static_cast<unsigned>(__cvta_generic_to_shared(&words[threadIdx.x]));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar_address), "r"(blockDim.x));
  }
  __syncthreads();
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(word_address), "l"(in + threadIdx.x)
               : "memory");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar_address)
               : "memory");
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar_address)
        : "memory");
  }
  out[threadIdx.x] = words[(threadIdx.x + 1) % blockDim.x];
}
