#include "server/checkpoint_relay.h"

namespace rgpu::server {

void CheckpointRelay::Start(Channel* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  stream_ = stream;
}

void CheckpointRelay::Piece(const wire::HostCheckpointChunk& piece) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ == nullptr) return;
  wire::Envelope chunk;
  chunk.mutable_checkpoint_chunk()->set_last(piece.last());
  if (!stream_->Send(chunk.SerializeAsString(), piece.data().data(), piece.data().size()).ok() ||
      piece.last()) {
    stream_ = nullptr;
  }
}

void CheckpointRelay::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stream_ = nullptr;
}

}  // namespace rgpu::server
