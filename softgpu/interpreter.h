// Runs a decoded kernel over a grid: blocks in parallel on the thread pool, warps of 32 lanes
// SIMT-style inside a block (interleaved at barriers, and a warp that loops long or waits with
// nanosleep/mbarrier.try_wait lets the others run), lanes of a warp in lock step with an
// active mask. Divergence is handled by splitting a warp into groups of lanes that share a
// program counter and always stepping the group with the lowest one, which reconverges
// structured control flow at its join points.
#pragma once

#include <atomic>
#include <cstdint>

#include "softgpu/exec.h"
#include "softgpu/memory.h"
#include "softgpu/program.h"

namespace softgpu {

struct LaunchParams {
  const Program* program = nullptr;
  uint32_t function = 0;             // index of the kernel in program->functions
  const uint64_t* consts = nullptr;  // module instance constant pool
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamic_shared = 0;
  const uint8_t* params = nullptr;  // parameter buffer of Function::param_bytes
  uint32_t param_size = 0;
  const AddressSpace* memory = nullptr;
  const void* owner = nullptr;  // the launching context, for texture and surface objects
  uint32_t sm_count = 1;
  uint32_t stack_bytes = 1024;  // per-thread stack for .func activations
  PrintfSink* printf_sink = nullptr;
  DeviceHeap* heap = nullptr;
  // Set when the launch must stop early (its context is being destroyed).
  const std::atomic<bool>* cancel = nullptr;
  // steady_clock nanoseconds after which the launch fails with kTimeout; 0 for none.
  int64_t deadline_ns = 0;
  // A cooperative launch: all blocks are resident together and take turns on the host threads
  // (each runs until its warps have yielded a while, e.g. spinning at a grid barrier), so that
  // blocks can wait for each other. The caller checks that the grid fits on the device.
  bool cooperative = false;
  // Device address of the launch's grid workspace (cooperative_groups' grid_workspace: a 32-bit
  // size, then the grid barrier word), read through %envreg1 (high) and %envreg2 (low); 0 when
  // the launch is not cooperative, which cooperative_groups reports as an invalid grid group.
  uint64_t grid_workspace = 0;
  // Thread-block clusters: the grid is made of clusters of this shape (each grid dimension a
  // multiple of it, at most kMaxClusterBlocks blocks; the caller checks), whose blocks are
  // resident together on one host thread and share their shared memory (distributed shared
  // memory) and a barrier. `explicit_cluster`: launched with a cluster shape
  // (%is_explicit_cluster), even of one block. Not with `cooperative`.
  uint32_t cluster[3] = {1, 1, 1};
  bool explicit_cluster = false;
};

// Names the first unsupported instruction reachable from `function` (through calls), or returns
// an empty string when the kernel can run.
std::string FindUnsupported(const Program& program, uint32_t function);

// Runs the whole grid and returns the first fault (kind kNone on success). Blocks after a fault
// are skipped (in a cooperative launch, the other blocks stop at their next turn).
Fault RunGrid(const LaunchParams& launch);

// Instructions executed by all kernels so far, each counted once per active lane (statistics for
// benchmarks; exported as softgpuGetLaneInstructions).
uint64_t LaneInstructionsExecuted();

}  // namespace softgpu
