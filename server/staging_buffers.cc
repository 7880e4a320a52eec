#include "server/staging_buffers.h"

#include <algorithm>

namespace rgpu::server {
namespace {

constexpr size_t kSmallest = size_t{64} << 10;

// The power-of-two size (from 64 KiB) that holds `bytes`, or 0 when it would overflow.
size_t SizeClass(size_t bytes) {
  size_t size = kSmallest;
  while (size < bytes) {
    if (size > (~size_t{0} >> 1)) return 0;
    size <<= 1;
  }
  return size;
}

}  // namespace

StagingBuffers::StagingBuffers(const CudaDriver& drv, StagingBudget* budget)
    : drv_(drv), budget_(budget) {}

StagingBuffers::~StagingBuffers() { budget_->used -= allocated_; }

bool StagingBuffers::Supported(const CudaDriver& drv) {
  return drv.cuMemHostAlloc != nullptr && drv.cuMemcpyHtoDAsync != nullptr &&
         drv.cuLaunchHostFunc != nullptr && drv.cuStreamQuery != nullptr &&
         drv.cuStreamSynchronize != nullptr;
}

void* StagingBuffers::Take(size_t bytes) {
  const size_t size = SizeClass(bytes);
  if (size == 0 || size > budget_->limit) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Buffer* best = nullptr;
    for (const auto& b : buffers_) {
      if (b->state == Buffer::State::kFree && b->size >= size &&
          (best == nullptr || b->size < best->size)) {
        best = b.get();
      }
    }
    if (best != nullptr) {
      best->state = Buffer::State::kTaken;
      return best->host;
    }
  }
  // A new one. Claim the bytes from the session's budget first (another context may be claiming
  // too), and allocate without mu_: the release's host function takes mu_, and a driver may hold
  // its own locks while it runs one.
  uint64_t used = budget_->used.load();
  do {
    if (used + size > budget_->limit) return nullptr;
  } while (!budget_->used.compare_exchange_weak(used, used + size));
  void* host = nullptr;
  if (drv_.cuMemHostAlloc(&host, size, 0) != CUDA_SUCCESS || host == nullptr) {
    budget_->used -= size;
    return nullptr;
  }
  auto buffer = std::make_unique<Buffer>();
  buffer->owner = this;
  buffer->host = host;
  buffer->size = size;
  buffer->state = Buffer::State::kTaken;
  std::lock_guard<std::mutex> lock(mu_);
  allocated_ += size;
  buffers_.push_back(std::move(buffer));
  return host;
}

CUresult StagingBuffers::ReleaseAfter(void* host, CUstream stream) {
  Buffer* buffer = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& b : buffers_) {
      if (b->host == host && b->state == Buffer::State::kTaken) buffer = b.get();
    }
    if (buffer == nullptr) return CUDA_ERROR_INVALID_VALUE;
    buffer->state = Buffer::State::kReleased;
  }
  // The callback only takes the lock and clears the flag: it makes no CUDA call.
  if (drv_.cuLaunchHostFunc(stream, &StagingBuffers::Released, buffer) == CUDA_SUCCESS) {
    return CUDA_SUCCESS;
  }
  const CUresult r = drv_.cuStreamSynchronize(stream);
  std::lock_guard<std::mutex> lock(mu_);
  buffer->state = Buffer::State::kFree;
  return r;
}

CUresult StagingBuffers::Release(void* host) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : buffers_) {
    if (b->host == host && b->state == Buffer::State::kTaken) {
      b->state = Buffer::State::kFree;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

void CUDA_CB StagingBuffers::Released(void* buffer) {
  Buffer* b = static_cast<Buffer*>(buffer);
  std::lock_guard<std::mutex> lock(b->owner->mu_);
  b->state = Buffer::State::kFree;
}

uint64_t StagingBuffers::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_;
}

}  // namespace rgpu::server
