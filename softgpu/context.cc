#include "softgpu/context.h"

#include <cstdio>

namespace softgpu {

Context::Context(Device* device, unsigned flags, bool primary)
    : device_(device), flags_(flags), primary_(primary), memory_(&device->budget()) {
  default_stream_ = std::make_shared<Stream>(this, 0, 0, /*is_default=*/true);
  kernel_timeout_ms.store(device->kernel_timeout_ms());
}

Context::~Context() { Teardown(); }

void Context::Fail(CUresult error, const std::string& message) {
  CUresult expected = CUDA_SUCCESS;
  if (sticky_.compare_exchange_strong(expected, error)) {
    fprintf(stderr, "softgpu: %s\n", message.c_str());
  }
}

std::shared_ptr<Stream> Context::CreateStream(unsigned flags, int priority) {
  auto s = std::make_shared<Stream>(this, flags, priority, /*is_default=*/false);
  std::vector<std::shared_ptr<Stream>> finished;
  {
    std::lock_guard lock(mu_);
    if (torn_down_) return nullptr;  // Teardown took the streams already
    streams_.push_back(s);
    finished = TakeFinishedStreamsLocked();
  }
  for (const auto& f : finished) f->Shutdown();
  return s;
}

void Context::DestroyStream(const std::shared_ptr<Stream>& stream) {
  std::vector<std::shared_ptr<Stream>> finished;
  {
    std::lock_guard lock(mu_);
    stream->MarkDestroyed();
    finished = TakeFinishedStreamsLocked();
  }
  // Idle: the worker only waits for work, which a forgotten handle can no longer bring.
  for (const auto& f : finished) f->Shutdown();
}

std::vector<std::shared_ptr<Stream>> Context::TakeFinishedStreamsLocked() {
  std::vector<std::shared_ptr<Stream>> finished;
  for (auto it = streams_.begin(); it != streams_.end();) {
    if ((*it)->destroyed() && (*it)->Idle()) {
      finished.push_back(std::move(*it));
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
  return finished;
}

void Context::AddLegacyOrderLocked(const Stream& stream, std::vector<Dependency>* deps) {
  if (stream.is_default()) {
    for (const auto& s : streams_) {
      if (s->blocking()) deps->push_back({s, s->last_enqueued()});
    }
  } else if (stream.blocking()) {
    deps->push_back({default_stream_, default_stream_->last_enqueued()});
  }
}

uint64_t Context::Enqueue(const std::shared_ptr<Stream>& stream, std::function<void()> op,
                          std::vector<Dependency> extra) {
  std::lock_guard lock(mu_);
  AddLegacyOrderLocked(*stream, &extra);
  return stream->Enqueue(std::move(op), std::move(extra));
}

bool Context::RunNowIfIdle(const std::shared_ptr<Stream>& stream, const std::function<void()>& op) {
  std::vector<Dependency> deps;
  std::lock_guard lock(mu_);
  AddLegacyOrderLocked(*stream, &deps);
  return stream->RunNowIfIdle(op, deps);
}

std::vector<Dependency> Context::DefaultOrder() {
  std::vector<Dependency> deps;
  std::lock_guard lock(mu_);
  deps.push_back({default_stream_, default_stream_->last_enqueued()});
  for (const auto& s : streams_) {
    if (s->blocking()) deps.push_back({s, s->last_enqueued()});
  }
  return deps;
}

void Context::WaitForDefaultOrder() {
  for (const Dependency& d : DefaultOrder()) d.stream->Wait(d.seq);
}

void Context::WaitForAllStreams() {
  std::vector<Dependency> deps;
  {
    std::lock_guard lock(mu_);
    deps.push_back({default_stream_, default_stream_->last_enqueued()});
    for (const auto& s : streams_) deps.push_back({s, s->last_enqueued()});
  }
  for (const Dependency& d : deps) d.stream->Wait(d.seq);
}

CUresult Context::Synchronize() {
  WaitForAllStreams();
  FlushPrintf();
  return sticky_error();
}

void Context::Abort(CUresult error) {
  CUresult expected = CUDA_SUCCESS;
  sticky_.compare_exchange_strong(expected, error);
  cancelled_.store(true);
}

void Context::Teardown() {
  cancelled_.store(true);
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard lock(mu_);
    torn_down_ = true;
    streams.swap(streams_);
  }
  for (const auto& s : streams) s->Shutdown();
  default_stream_->Shutdown();
  FlushPrintf();
  heap_.Reset();
  memory_.FreeAll();
  alive_.store(false);
}

void Context::Revive() {
  std::lock_guard lock(mu_);
  if (alive_.load()) return;
  torn_down_ = false;
  default_stream_ = std::make_shared<Stream>(this, 0, 0, /*is_default=*/true);
  memory_.Renew();
  sticky_.store(CUDA_SUCCESS);
  cancelled_.store(false);
  alive_.store(true);
}

void Context::Write(std::string text) {
  std::lock_guard lock(printf_mu_);
  if (printf_pending_.size() + text.size() > printf_fifo_size) {
    text.resize(
        printf_fifo_size > printf_pending_.size() ? printf_fifo_size - printf_pending_.size() : 0);
  }
  printf_pending_ += text;
}

void Context::SetPrintfHandler(PrintfHandler handler, void* user) {
  std::lock_guard lock(printf_mu_);
  printf_handler_ = handler;
  printf_user_ = user;
}

void Context::FlushPrintf() {
  std::string out;
  PrintfHandler handler;
  void* user;
  {
    std::lock_guard lock(printf_mu_);
    out.swap(printf_pending_);
    handler = printf_handler_;
    user = printf_user_;
  }
  if (out.empty()) return;
  if (handler != nullptr) {
    handler(user, out.data(), out.size());
    return;
  }
  fwrite(out.data(), 1, out.size(), stdout);
  fflush(stdout);
}

}  // namespace softgpu
