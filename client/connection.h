// Connection: the client's session with one rgpu-server: handshake, then calls that each wait for
// their reply. Thread-safe: calls from several threads are serialized on the one channel.
// Once the server is gone every call fails fast with kServerLost; nothing waits forever.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/ops.h"
#include "proto/rgpu.pb.h"
#include "transport/channel.h"

namespace rgpu::client {

// The error every call returns once the server connection is lost.
constexpr CUresult kServerLost = CUDA_ERROR_DEVICE_UNAVAILABLE;

// Where a reply's payload should land, and how much room there is.
struct ReplyBuffer {
  void* data = nullptr;
  size_t capacity = 0;
};

// True for the errors after which a CUDA context is unusable (a faulting kernel).
bool IsStickyError(CUresult r);

class Connection {
 public:
  // Connects to `url`, sends Hello (with `token`) and waits for Welcome, all within timeout_ms.
  static Status Open(const std::string& url, const std::string& token, int timeout_ms,
                     std::unique_ptr<Connection>* out);

  const wire::Welcome& welcome() const { return welcome_; }

  // Runs `op` on the server in session context `ctx` with `args` and an optional payload, and
  // waits for the reply. Result values go to `values` (may be null); a reply payload is written
  // into `reply` (its size to *reply_size) and must fit its capacity. Returns the call's CUresult.
  CUresult Call(Op op, uint64_t ctx, std::initializer_list<uint64_t> args,
                const void* payload = nullptr, size_t payload_size = 0,
                std::vector<uint64_t>* values = nullptr, ReplyBuffer reply = {},
                size_t* reply_size = nullptr);

  // Sends a stream-ordered (kAsync) call without waiting for its reply. With
  // `payload_stays_valid` (pinned memory the program may not touch until it synchronizes) the
  // payload may still be read after this returns, until the next Call; otherwise it has been
  // sent (or copied) when this returns. A failure on the server surfaces at the next Call.
  CUresult Post(Op op, uint64_t ctx, std::initializer_list<uint64_t> args,
                const void* payload = nullptr, size_t payload_size = 0,
                bool payload_stays_valid = false);

  bool broken();
  // The transport lanes in use, for logs.
  std::string DescribeTransport();

 private:
  Connection() = default;
  CUresult Fail(const std::string& why);

  std::mutex mu_;
  std::unique_ptr<Channel> channel_;
  wire::Welcome welcome_;
  uint64_t next_seq_ = 1;
  wire::Envelope posted_;  // reused for every posted call
  // A posted call's failure, reported by the server, not yet returned to the program.
  CUresult async_error_ = CUDA_SUCCESS;
  // Contexts (session ids) that hit an error CUDA makes sticky: every later call on them fails
  // with it at once, as the driver's do.
  std::map<uint64_t, CUresult> sticky_;
  ReplyBuffer pending_reply_;  // the destination of the reply now awaited
  bool lost_ = false;
};

}  // namespace rgpu::client
