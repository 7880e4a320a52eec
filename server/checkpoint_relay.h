// CheckpointRelay: the pieces of a checkpoint that a session's host sends the server
// (HostCheckpointChunk, server/session_host.h), relayed to the operator's connection that asked
// for the checkpoint. A host is trusted for nothing: its pieces go on only between Start and Stop
// (while the checkpoint is asked and unanswered, when that connection is alive and used by
// nothing else), and nothing after the last piece or a failed send.
//
// Threading: any thread; Piece, Start and Stop exclude each other.
#pragma once

#include <mutex>

#include "proto/rgpu.pb.h"
#include "transport/channel.h"

namespace rgpu::server {

class CheckpointRelay {
 public:
  // Relays pieces to `stream` from now on; it must stay alive until Stop.
  void Start(Channel* stream);
  // A piece from the host: sent on as a CheckpointChunk while relaying, ignored otherwise.
  void Piece(const wire::HostCheckpointChunk& piece);
  // Nothing more goes to the stream (the checkpoint was answered, or the host is gone).
  void Stop();

 private:
  std::mutex mu_;
  Channel* stream_ = nullptr;  // GUARDED_BY(mu_)
};

}  // namespace rgpu::server
