// Posted device-to-host copies (MemcpyDtoHPosted, proto/calls.def): the client's copy into its
// pinned memory costs no round trip. Behind work still running on its stream the copy is staged
// in the context's pinned buffers (server/staging_buffers.h) and queued, with a host function
// behind it that marks it made; the session thread sends every made copy's bytes (ReadData)
// before its reply to any later call, and when idle. So whatever tells the program that the
// stream has passed the copy (a synchronize, a query, an event) reaches it after the bytes.
// On an idle stream, or when no buffer can be had, the copy is made at once and sent.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "server/session.h"
#include "server/staging_buffers.h"

namespace rgpu::server {

namespace {
// At most this many reads wait at once; past it a read is made at once, in stream order.
constexpr size_t kMaxPostedReads = 1024;
}  // namespace

void CUDA_CB Session::MarkRead(void* made) { static_cast<std::atomic<bool>*>(made)->store(true); }

CUresult Session::HandleMemcpyDtoHPosted(CallState& cs, const MemcpyDtoHPostedIn& in,
                                         calls::MemcpyDtoHPosted::Results*) {
  CUstream stream = in.stream.stream;
  StagingBuffers* staging = nullptr;
  if (in.bytes > 0 && posted_reads_.size() < kMaxPostedReads && StreamBusy(stream) &&
      drv_.cuMemcpyDtoHAsync != nullptr && (staging = StagingOf(cs.ctx)) != nullptr) {
    if (void* buffer = staging->Take(in.bytes)) {
      auto made = std::make_unique<std::atomic<bool>>(false);
      CUresult r = drv_.cuMemcpyDtoHAsync(buffer, in.src, in.bytes, stream);
      if (r == CUDA_SUCCESS) r = drv_.cuLaunchHostFunc(stream, &Session::MarkRead, made.get());
      if (r != CUDA_SUCCESS) {
        // The copy may be queued: the buffer is free only once the stream is past it.
        staging->ReleaseAfter(buffer, stream);
        return r;
      }
      posted_reads_.push_back({in.token, cs.ctx_id, buffer, in.bytes, std::move(made)});
      return CUDA_SUCCESS;
    }
  }
  // Made now, in stream order (the session waits for the stream, as for a waited copy).
  CUresult r = CopyOut(cs, in.src, in.bytes, stream);
  if (r != CUDA_SUCCESS) return r;  // ServeCall sends the failure under the token
  SendRead(in.token, CUDA_SUCCESS, cs.out_payload, cs.out_size);
  cs.out_payload = nullptr;
  cs.out_size = 0;
  return CUDA_SUCCESS;
}

bool Session::SendRead(uint64_t token, CUresult result, const void* data, size_t bytes) {
  // At the session's end the channel goes before the memory (ServeLoop): the reads that
  // ReleaseAll finishes then have no one to go to.
  if (channel_ == nullptr) return false;
  wire::Envelope out;
  out.mutable_read_data()->set_token(token);
  out.mutable_read_data()->set_result(result);
  if (result != CUDA_SUCCESS) bytes = 0;
  bytes_out_.store(bytes_out_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  return channel_->Send(out.SerializeAsString(), data, bytes).ok();
}

void Session::SendFinishedReads() {
  for (auto it = posted_reads_.begin(); it != posted_reads_.end();) {
    ContextRecord* ctx = contexts_.Find(it->ctx);
    if (ctx == nullptr || ctx->destroyed) {
      // Its buffer went with the context.
      SendRead(it->token, ctx != nullptr ? stopped_error_.load() : CUDA_ERROR_CONTEXT_IS_DESTROYED,
               nullptr, 0);
      it = posted_reads_.erase(it);
      continue;
    }
    if (!it->made->load()) {
      ++it;
      continue;
    }
    SendRead(it->token, CUDA_SUCCESS, it->buffer, it->bytes);
    if (ctx->staging != nullptr) ctx->staging->Release(it->buffer);
    it = posted_reads_.erase(it);
  }
}

void Session::FinishReadsOf(uint64_t id) {
  const ContextRecord* ctx = contexts_.Find(id);
  if (ctx == nullptr) return;
  const bool pending = std::any_of(posted_reads_.begin(), posted_reads_.end(),
                                   [id](const PostedRead& read) { return read.ctx == id; });
  if (!pending || ctx->destroyed) {
    if (pending) SendFinishedReads();  // a destroyed context's reads fail
    return;
  }
  // Their copies end with the context's work; the rest (a failed stream) fail.
  if (drv_.cuCtxSetCurrent(ctx->context) == CUDA_SUCCESS) {
    current_ = ctx->context;
    drv_.cuCtxSynchronize();
  }
  SendFinishedReads();
  for (auto it = posted_reads_.begin(); it != posted_reads_.end();) {
    if (it->ctx != id) {
      ++it;
      continue;
    }
    SendRead(it->token, CUDA_ERROR_CONTEXT_IS_DESTROYED, nullptr, 0);
    it = posted_reads_.erase(it);
  }
}

}  // namespace rgpu::server
