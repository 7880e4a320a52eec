// Graph memory: the allocations of graph memory nodes (cuGraphAddMemAllocNode, cuMemAllocAsync
// while a stream captures). A graph allocation has one address for the life of its graph, as the
// driver's has, because the nodes after it name that address: rgpu allocates the memory when the
// node is made and keeps it while any graph or executable graph holds the node. Running the alloc
// node makes the allocation live; running a free node, or the program's cuMemFree or
// cuMemFreeAsync outside the graph, ends it (the memory stays for the next launch). A launch
// whose allocation is still live from the previous launch fails with CUDA_ERROR_INVALID_VALUE.
// Thread-safe.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>

struct CUctx_st;

namespace rgpu::client {

class GraphAllocation {
 public:
  // Allocates `bytes` in the current context for a new alloc node; *out is null on failure.
  static CUresult Make(size_t bytes, std::shared_ptr<GraphAllocation>* out);
  // Frees the memory.
  ~GraphAllocation();
  GraphAllocation(const GraphAllocation&) = delete;
  GraphAllocation& operator=(const GraphAllocation&) = delete;

  CUdeviceptr dptr() const { return dptr_; }
  size_t bytes() const { return bytes_; }
  int device() const;
  // The alloc node ran: the allocation becomes live.
  CUresult Begin();
  // A free node ran: the allocation ends (its memory stays for the next launch).
  CUresult End();

 private:
  GraphAllocation() = default;
  enum State { kIdle, kLive };
  CUdeviceptr dptr_ = 0;
  size_t bytes_ = 0;
  CUctx_st* ctx_ = nullptr;  // checked to be live before use: the context may be gone
  int device_ = 0;
  uint64_t generation_ = 0;
  std::atomic<int> state_{kIdle};
};

// The graph allocation at exactly `dptr`, if there is one.
std::shared_ptr<GraphAllocation> FindGraphAllocation(CUdeviceptr dptr);
// The program frees `dptr` (cuMemFree, cuMemFreeAsync) outside a graph: when it is a graph
// allocation, it ends (*result: CUDA_SUCCESS, or CUDA_ERROR_INVALID_VALUE when it was not live)
// and its memory stays the graph's; true then. False when `dptr` is no graph allocation.
bool EndGraphAllocationByProgram(CUdeviceptr dptr, CUresult* result);

// Graph memory of `device` (cuDeviceGetGraphMemAttribute): `used` is what live allocations hold,
// `reserved` what existing graph allocations hold; the high-water marks since the last reset.
struct GraphMemoryFigures {
  uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0;
};
GraphMemoryFigures GraphMemory(int device);
// Resets the high-water marks of `device` to the current figures.
void ResetGraphMemoryHighs(int device);

}  // namespace rgpu::client
