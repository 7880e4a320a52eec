#include "server/kernel_turns.h"

#include <atomic>
#include <chrono>

namespace rgpu::server {
namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kWordsPerBlock = 1024;  // one 4 KiB pinned block holds 1,024 streams' gates
// How long the keeper sleeps between looks when no host function woke it (a context with a
// sticky error runs no host functions).
constexpr auto kLook = std::chrono::milliseconds(1);
constexpr unsigned kSpinPolls = 200;  // polls of a running kernel before the keeper sleeps

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

KernelTurns::KernelTurns(const CudaDriver& drv, CUcontext context, TurnTaker* scheduler,
                         ShareAccount* account, Meter meter, uint64_t max_kernel_ms,
                         const std::atomic<bool>* aborted, std::function<void(bool late)> stop)
    : drv_(drv),
      context_(context),
      scheduler_(scheduler),
      account_(account),
      meter_(meter),
      max_kernel_ms_(max_kernel_ms),
      aborted_(aborted),
      stop_(std::move(stop)) {}

KernelTurns::~KernelTurns() { Stop(); }

bool KernelTurns::Supported(const CudaDriver& drv) {
  return drv.cuStreamWaitValue32 != nullptr && drv.cuMemHostAlloc != nullptr &&
         drv.cuMemHostGetDevicePointer != nullptr && drv.cuEventQuery != nullptr &&
         drv.cuLaunchHostFunc != nullptr;
}

void CUDA_CB KernelTurns::Wake(void* self) {
  // Takes no lock: the keeper queries the backend while it holds mu_, and a driver may hold its
  // own locks while it runs a host function. A wake-up lost between the keeper's look and its
  // sleep costs at most kLook.
  auto* turns = static_cast<KernelTurns*>(self);
  turns->woken_.store(true);
  turns->wake_.notify_all();
}

KernelTurns::Gate* KernelTurns::GateOf(CUstream stream) {
  auto it = gates_.find(stream);
  if (it != gates_.end()) return it->second.get();
  if (words_left_ == 0) {
    void* block = nullptr;
    if (drv_.cuMemHostAlloc(&block, kWordsPerBlock * sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP) !=
        CUDA_SUCCESS) {
      return nullptr;
    }
    word_blocks_.push_back(static_cast<uint32_t*>(block));
    words_left_ = kWordsPerBlock;
  }
  uint32_t* block = word_blocks_.back();
  CUdeviceptr block_device = 0;
  if (drv_.cuMemHostGetDevicePointer(&block_device, block, 0) != CUDA_SUCCESS) return nullptr;
  const size_t index = kWordsPerBlock - words_left_--;
  auto gate = std::make_unique<Gate>();
  gate->word = block + index;
  gate->device_word = block_device + index * sizeof(uint32_t);
  std::atomic_ref<uint32_t>(*gate->word).store(0, std::memory_order_release);
  return gates_.emplace(stream, std::move(gate)).first->second.get();
}

CUevent KernelTurns::TakeEvent() {
  if (!free_events_.empty()) {
    CUevent e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  return drv_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS ? e : nullptr;
}

void KernelTurns::Recycle(const Turn& turn) {
  free_events_.push_back(turn.reached);
  if (turn.ended != nullptr) free_events_.push_back(turn.ended);
}

void KernelTurns::Open(Gate& gate, uint32_t to) {
  if (gone_) return;  // the words went with the context
  std::atomic_ref<uint32_t>(*gate.word).store(to, std::memory_order_release);
}

CUresult KernelTurns::Launch(CUstream stream, const std::function<CUresult()>& launch) {
  Gate* gate = nullptr;
  CUevent reached = nullptr, ended = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (gone_ || stopping_) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    gate = GateOf(stream);
    if (gate == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    reached = TakeEvent();
    ended = reached != nullptr ? TakeEvent() : nullptr;
    if (ended == nullptr) {
      if (reached != nullptr) free_events_.push_back(reached);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!keeper_.joinable()) keeper_ = std::thread([this] { KeeperLoop(); });
  }
  const uint32_t number = gate->issued + 1;
  CUresult r = drv_.cuEventRecord(reached, stream);
  if (r == CUDA_SUCCESS) r = drv_.cuLaunchHostFunc(stream, &Wake, this);
  if (r == CUDA_SUCCESS) {
    r = drv_.cuStreamWaitValue32(stream, gate->device_word, number, CU_STREAM_WAIT_VALUE_GEQ);
  }
  if (r != CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(mu_);
    free_events_.push_back(reached);
    free_events_.push_back(ended);
    return r;
  }
  gate->issued = number;  // a wait for `number` is queued: the keeper (or Stop) opens it
  const CUresult launched = launch();
  Turn turn{number, reached, nullptr};
  if (launched == CUDA_SUCCESS && drv_.cuEventRecord(ended, stream) == CUDA_SUCCESS) {
    turn.ended = ended;
    drv_.cuLaunchHostFunc(stream, &Wake, this);  // without it the keeper looks every kLook
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (turn.ended == nullptr) free_events_.push_back(ended);
    gate->turns.push_back(turn);
    woken_.store(true);
  }
  wake_.notify_all();
  return launched;
}

CUresult KernelTurns::AwaitEnd(const Turn& turn) {
  const auto start = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    const CUresult r = drv_.cuEventQuery(turn.ended);
    if (r != CUDA_ERROR_NOT_READY) return r;
    const bool late =
        max_kernel_ms_ > 0 && Clock::now() - start > std::chrono::milliseconds(max_kernel_ms_);
    if (late || (aborted_ != nullptr && aborted_->load())) {
      stop_(late);  // takes mu_ (ContextGone): not held here
      return late ? CUDA_ERROR_LAUNCH_TIMEOUT : CUDA_ERROR_LAUNCH_FAILED;
    }
    if (polls < kSpinPolls) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    // Stopping: the context is about to be destroyed, which ends the kernel.
    if (gone_ || stopping_) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    wake_.wait_for(lock, kLook, [&] { return woken_.load() || gone_ || stopping_; });
    woken_.store(false);
  }
}

void KernelTurns::KeeperLoop() {
  drv_.cuCtxSetCurrent(context_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && !gone_) {
    woken_.store(false);
    // The first stream, after the one served last, whose first kernel it has reached.
    Gate* gate = nullptr;
    CUresult reached = CUDA_ERROR_NOT_READY;
    auto it = gates_.upper_bound(last_served_);
    for (size_t i = 0; i < gates_.size() && gate == nullptr; ++i, ++it) {
      if (it == gates_.end()) it = gates_.begin();
      Gate& g = *it->second;
      if (g.turns.empty()) continue;
      reached = drv_.cuEventQuery(g.turns.front().reached);
      if (reached == CUDA_ERROR_NOT_READY) continue;
      gate = &g;
      last_served_ = it->first;
    }
    if (gate == nullptr) {
      wake_.wait_for(lock, kLook, [&] { return woken_.load() || stopping_ || gone_; });
      continue;
    }
    const Turn turn = gate->turns.front();
    if (reached != CUDA_SUCCESS || turn.ended == nullptr) {
      // No kernel to time (its launch failed), or the context runs nothing more (a sticky
      // error): the gate opens without a turn.
      Open(*gate, turn.number);
      gate->turns.pop_front();
      if (reached == CUDA_SUCCESS) Recycle(turn);
      continue;
    }
    lock.unlock();
    const auto queued = Clock::now();
    scheduler_->Acquire(account_);
    const auto start = Clock::now();
    meter_.queue_seconds->fetch_add(Seconds(start - queued));
    lock.lock();
    Open(*gate, turn.number);
    lock.unlock();
    const CUresult ended = AwaitEnd(turn);
    const double busy = Seconds(Clock::now() - start);
    scheduler_->Release(account_, busy);
    meter_.busy_seconds->fetch_add(busy);
    lock.lock();
    gate->turns.pop_front();
    if (ended == CUDA_SUCCESS) Recycle(turn);
  }
}

void KernelTurns::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [stream, gate] : gates_) {
    Open(*gate, gate->issued);
    gate->turns.clear();  // their events go with the context
  }
}

void KernelTurns::ContextGone() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
  }
  wake_.notify_all();
}

}  // namespace rgpu::server
