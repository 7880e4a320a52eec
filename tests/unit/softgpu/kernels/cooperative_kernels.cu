// Kernels for cooperative_test.cc: grid-wide synchronisation through cooperative_groups (which
// reads the driver's grid workspace from %envreg1/%envreg2), cuda::barrier arrive/wait inside a
// block, and mbarrier instructions written as inline PTX.
#include <cooperative_groups.h>

#include <cuda/barrier>

namespace cg = cooperative_groups;

// Two phases separated by grid syncs: every block sums a grid-stride slice of `in` into
// partial[block]; after the sync block 0 adds the partial sums; after a second sync every block
// reads the total back (out[1 + block]).
extern "C" __global__ void coop_reduce(const float* in, int n, float* partial, float* out) {
  cg::grid_group grid = cg::this_grid();
  __shared__ float sums[256];
  float v = 0;
  for (unsigned long long i = grid.thread_rank(); i < static_cast<unsigned long long>(n);
       i += grid.size()) {
    v += in[i];
  }
  sums[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sums[threadIdx.x] += sums[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
    out[0] = total;
  }
  grid.sync();
  if (threadIdx.x == 0) out[1 + blockIdx.x] = out[0];
}

// `rounds` grid syncs: in round r every thread adds one to counters[r]; after the sync each
// block checks that all threads of the grid have (errors[block] counts rounds that saw less).
// Block b also waits out a delay proportional to b before arriving, so late blocks are late.
extern "C" __global__ void coop_sync_rounds(unsigned* counters, unsigned* errors, int rounds) {
  cg::grid_group grid = cg::this_grid();
  const unsigned total = static_cast<unsigned>(grid.size());
  for (int r = 0; r < rounds; ++r) {
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 50u * blockIdx.x; ++i) sink = sink + i;
    atomicAdd(&counters[r], 1u);
    grid.sync();
    if (threadIdx.x == 0 && atomicAdd(&counters[r], 0u) != total)
      atomicAdd(&errors[blockIdx.x], 1u);
    grid.sync();
  }
}

// What cooperative_groups sees of the grid: is_valid, size, the thread's rank, block rank.
extern "C" __global__ void coop_grid_info(unsigned* valid, unsigned long long* sizes,
                                          unsigned long long* ranks) {
  cg::grid_group grid = cg::this_grid();
  const unsigned long long t = blockIdx.x * blockDim.x + threadIdx.x;
  valid[t] = grid.is_valid() ? 1 : 0;
  sizes[t] = grid.size();
  ranks[t] = grid.thread_rank();
}

// grid.sync() itself (traps where the launch is not cooperative, as on a GPU).
extern "C" __global__ void coop_sync_once(unsigned* out) {
  cg::this_grid().sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Never ends: grid syncs until *flag becomes nonzero (nothing sets it), for the timeout and
// abort tests; with `skip_block0` block 0 never arrives, so the others spin at the barrier.
extern "C" __global__ void coop_endless(volatile int* flag, int skip_block0) {
  cg::grid_group grid = cg::this_grid();
  if (skip_block0 != 0 && blockIdx.x == 0) return;
  while (*flag == 0) grid.sync();
}

// cuda::barrier inside a block (compute_75: spinning on atomics with nanosleep; sm_80 and newer:
// mbarrier instructions): each round every thread writes data[tid], all arrive and wait, then
// each reads its neighbour's value; errors[0] counts mismatches.
extern "C" __global__ void block_barrier_exchange(int* errors, int rounds) {
  __shared__ int data[256];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  const unsigned n = blockDim.x;
  for (int r = 0; r < rounds; ++r) {
    data[threadIdx.x] = r * 1000 + threadIdx.x;
    bar.arrive_and_wait();
    const unsigned j = (threadIdx.x + 37) % n;
    if (data[j] != static_cast<int>(r * 1000 + j)) atomicAdd(errors, 1);
    bar.arrive_and_wait();
  }
}

// mbarrier instructions as inline PTX (the same PTX for every target).
__device__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ unsigned long long MbarrierArrive(unsigned bar) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(state) : "r"(bar) : "memory");
  return state;
}

__device__ bool MbarrierTestWait(unsigned bar, unsigned long long state) {
  unsigned done;
  asm volatile("{ .reg .pred p; mbarrier.test_wait.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(done)
               : "r"(bar), "l"(state)
               : "memory");
  return done != 0;
}

__device__ bool MbarrierTryWaitParity(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ void MbarrierWait(unsigned bar, unsigned long long state, unsigned phase) {
  if (phase % 2 == 0) {
    while (!MbarrierTestWait(bar, state)) {
    }
  } else {
    while (!MbarrierTryWaitParity(bar, phase & 1)) {
    }
  }
}

// Rounds of write / arrive / wait / read / arrive / wait with an mbarrier for the whole block
// (waits alternate between test_wait on the arrival state and try_wait.parity). In round
// `drop_round` the upper half of the threads leave with arrive_drop, so the barrier expects only
// the lower half afterwards. errors[0] counts wrong reads; early[0] counts waits that completed
// before every participating thread had arrived.
extern "C" __global__ void mbarrier_exchange(int* errors, int* early, int rounds, int drop_round) {
  __shared__ int data[256];
  __shared__ int arrived[32];
  __shared__ unsigned long long bar_storage;
  const unsigned bar = SharedAddress(&bar_storage);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(bar), "r"(blockDim.x) : "memory");
    for (int i = 0; i < 32; ++i) arrived[i] = 0;
  }
  __syncthreads();
  unsigned n = blockDim.x;
  unsigned phase = 0;
  for (int r = 0; r < rounds && r < 32; ++r) {
    if (r == drop_round) {
      if (threadIdx.x >= blockDim.x / 2) {
        asm volatile("mbarrier.arrive_drop.shared.b64 _, [%0];" ::"r"(bar) : "memory");
        return;
      }
      n = blockDim.x / 2;
    }
    data[threadIdx.x] = r * 1000 + threadIdx.x;
    atomicAdd(&arrived[r], 1);
    MbarrierWait(bar, MbarrierArrive(bar), phase++);
    if (atomicAdd(&arrived[r], 0) != static_cast<int>(n)) atomicAdd(early, 1);
    const unsigned j = (threadIdx.x + 37) % n;
    if (data[j] != static_cast<int>(r * 1000 + j)) atomicAdd(errors, 1);
    MbarrierWait(bar, MbarrierArrive(bar), phase++);
  }
}

// One thread walks an mbarrier through its counts: out[0] pending after init(5) and
// arrive.noComplete(2) (3); out[1] pending after a plain arrive (2); out[2] test_wait on that
// arrival before the phase completes (0); out[3] after an arrive of count 2 completes it (1);
// out[4]/out[5] try_wait.parity 0 / 1 afterwards (1 / 0); out[6] pending of the next phase's
// first arrival (4: the count is back to 5).
__device__ unsigned MbarrierPending(unsigned long long state) {
  unsigned count;
  asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(count) : "l"(state));
  return count;
}

extern "C" __global__ void mbarrier_counts(unsigned long long* out) {
  __shared__ unsigned long long bar_storage;
  const unsigned bar = SharedAddress(&bar_storage);
  unsigned long long s1, s2;
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(bar), "r"(5) : "memory");
  asm volatile("mbarrier.arrive.noComplete.shared.b64 %0, [%1], %2;"
               : "=l"(s1)
               : "r"(bar), "r"(2)
               : "memory");
  out[0] = MbarrierPending(s1);
  s2 = MbarrierArrive(bar);
  out[1] = MbarrierPending(s2);
  out[2] = MbarrierTestWait(bar, s2) ? 1 : 0;
  asm volatile("mbarrier.arrive.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(2) : "memory");
  out[3] = MbarrierTestWait(bar, s2) ? 1 : 0;
  out[4] = MbarrierTryWaitParity(bar, 0) ? 1 : 0;
  out[5] = MbarrierTryWaitParity(bar, 1) ? 1 : 0;
  out[6] = MbarrierPending(MbarrierArrive(bar));
  asm volatile("mbarrier.inval.shared.b64 [%0];" ::"r"(bar) : "memory");
}
