// ServerSet: the servers a program uses (RGPU_SERVER=URL[,URL...]), one Connection (session) each,
// and the devices they give it: the program's device d is device `remote` of server `server`,
// numbered server by server in RGPU_SERVER's order, then filtered and reordered by
// CUDA_VISIBLE_DEVICES (client/visible_devices.h).
//
// Every call of the client goes through it, to the server of what the call names, as the typed
// description routes each field (proto/call_kinds.h, Route):
//   - contexts, memory pools and server-kept graphs are session-local ids; the client holds them
//     tagged with their server's index in the top 8 bits (Tag), so that ids of two servers never
//     meet. The call's context, or else its first Ctx, Pool, Graph or Device argument, chooses the
//     server; every such field is untagged on the way out, and such results are tagged on the way
//     back. With one server every tag is 0 and nothing changes.
//   - device ordinals are the program's on the client and the session's on the wire.
// A call whose fields name two servers is refused (CUDA_ERROR_INVALID_CONTEXT, or
// CUDA_ERROR_INVALID_DEVICE for a device), before anything is sent: what spans servers (copies
// between their devices, events waited on by another device's stream) is done by the callers
// (client/api_peer.cc, client/api_stream.cc). A call that names no server goes to the only one,
// or, with several, to the current context's (none: CUDA_ERROR_INVALID_CONTEXT).
//
// Thread-safe: the set is fixed once ClientState::Initialize has filled it; each Connection
// serializes its own calls. A server that is lost fails only the calls routed to it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/connection.h"
#include "proto/calls.h"

namespace rgpu::client {

class ServerSet {
 public:
  // At most this many servers: an index must fit the tag's 8 bits.
  static constexpr int kMaxServers = 255;
  // No server chosen: the call's fields choose (On(kAnyServer) is the same as the set itself).
  static constexpr int kAnyServer = -1;

  // `id` (a session-local id of server `server`; 0 stays 0) as the client holds it, and back.
  static uint64_t Tag(int server, uint64_t id) {
    return id == 0 ? 0 : (id & kIdMask) | (static_cast<uint64_t>(server) << kTagShift);
  }
  static int ServerOf(uint64_t tagged) { return static_cast<int>(tagged >> kTagShift); }
  static uint64_t Untag(uint64_t tagged) { return tagged & kIdMask; }

  // Where one of the program's devices is.
  struct DeviceSlot {
    int server = 0;
    int remote = 0;  // the device's ordinal in its session
  };

  // Filling the set (ClientState::Initialize, before any call): the connections in order, then
  // the program's devices.
  void Add(std::unique_ptr<Connection> connection);
  void SetDevices(std::vector<DeviceSlot> devices);

  int size() const { return static_cast<int>(connections_.size()); }
  Connection& at(int server) { return *connections_[server]; }
  // The slot of the program's device `device`, or nullptr for an invalid ordinal.
  const DeviceSlot* device(int device) const;
  // The program's ordinal of device `remote` of `server`, or -1 when the program does not see it.
  int ProgramDevice(int server, int remote) const;
  // The server a context handle's tagged id is on.
  static int ServerOfContext(const CUctx_st* ctx);
  // The sticky error of the context with tagged id `ctx` (Connection::StickyError).
  CUresult StickyError(uint64_t ctx) { return at(ServerOf(ctx)).StickyError(Untag(ctx)); }

  // Connection::Call and Post, routed: to the server of what the call names (see above).
  template <typename C>
  CUresult Call(uint64_t ctx, const typename C::Args& args, typename C::Results* results = nullptr,
                const void* payload = nullptr, size_t payload_size = 0, ReplyBuffer reply = {},
                size_t* reply_size = nullptr) {
    return CallOn<C>(kAnyServer, ctx, args, results, payload, payload_size, reply, reply_size);
  }
  template <typename C>
  CUresult Post(uint64_t ctx, const typename C::Args& args, const void* payload = nullptr,
                size_t payload_size = 0, bool payload_stays_valid = false) {
    return PostOn<C>(kAnyServer, ctx, args, payload, payload_size, payload_stays_valid);
  }
  // The same with `server` chosen by the caller (for calls whose fields name none, such as
  // GraphRecord); fields that name another server are still refused.
  template <typename C>
  CUresult CallOn(int server, uint64_t ctx, const typename C::Args& args,
                  typename C::Results* results = nullptr, const void* payload = nullptr,
                  size_t payload_size = 0, ReplyBuffer reply = {}, size_t* reply_size = nullptr) {
    uint64_t raw[calls::kMaxArgCount + 1];
    const size_t n = calls::EncodeArgs(args, raw);
    std::vector<uint64_t> values;
    CUresult r = CallRouted(server, C::kOp, ctx, std::span<uint64_t>(raw, n), payload, payload_size,
                            results != nullptr ? &values : nullptr, reply, reply_size);
    if (r == CUDA_SUCCESS && results != nullptr &&
        !calls::DecodeResults(values.data(), values.size(), results)) {
      return Connection::MalformedReply(C::kOp);
    }
    return r;
  }
  template <typename C>
  CUresult PostOn(int server, uint64_t ctx, const typename C::Args& args,
                  const void* payload = nullptr, size_t payload_size = 0,
                  bool payload_stays_valid = false) {
    static_assert(C::kMode == CallMode::kAsync, "only kAsync operations may be posted");
    uint64_t raw[calls::kMaxArgCount + 1];
    const size_t n = calls::EncodeArgs(args, raw);
    return PostRouted(server, C::kOp, ctx, std::span<uint64_t>(raw, n), payload, payload_size,
                      payload_stays_valid);
  }

  // Connection::HandsOffWaits of the server of the context with tagged id `ctx`.
  bool HandsOffWaits(uint64_t ctx) { return at(ServerOf(ctx)).HandsOffWaits(); }
  // Posted reads (Connection::PostsReads) on the server of the context with tagged id `ctx`:
  // whether one may be posted now, and posting one (`stream` the stream's tagged id) that brings
  // [src, src+bytes) into `dst` in stream order (pinned memory, or any the caller keeps in place
  // until a later reply), as one read per Connection::bulk_piece where the connection has one.
  // A failed post registers nothing more.
  bool PostsReads(uint64_t ctx) { return at(ServerOf(ctx)).PostsReads(); }
  CUresult PostRead(uint64_t ctx, CUdeviceptr src, size_t bytes, uint64_t stream, void* dst);
  // Connection::bulk_piece of the server of the context with tagged id `ctx`.
  size_t BulkPiece(uint64_t ctx) { return at(ServerOf(ctx)).bulk_piece(); }
  // Connection::AwaitReads on every server.
  void AwaitReads();
  // Connection::WaitSent on every server.
  CUresult WaitSent(size_t keep = 0);
  // Registers pinned host memory with every server's transport (the first failure is returned,
  // and what was registered is dropped again), and drops it.
  Status RegisterHostMemory(void* address, size_t size);
  void UnregisterHostMemory(void* address);
  // Connection::StopBatching on every server.
  void StopBatching(int wait_ms);

 private:
  static constexpr int kTagShift = 56;
  static constexpr uint64_t kIdMask = (uint64_t{1} << kTagShift) - 1;

  // Chooses the server of a call (starting from `server`, kAnyServer or an index) and rewrites
  // `ctx` and `args` into the session's ids; an error when they name two servers or none.
  CUresult Route(int* server, Op op, uint64_t* ctx, std::span<uint64_t> args) const;
  // Rewrites a reply's result values into the client's ids (tags, the program's devices).
  CUresult TranslateResults(int server, Op op, std::vector<uint64_t>* values) const;
  CUresult CallRouted(int server, Op op, uint64_t ctx, std::span<uint64_t> args,
                      const void* payload, size_t payload_size, std::vector<uint64_t>* values,
                      ReplyBuffer reply, size_t* reply_size);
  CUresult PostRouted(int server, Op op, uint64_t ctx, std::span<uint64_t> args,
                      const void* payload, size_t payload_size, bool payload_stays_valid);

  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<DeviceSlot> devices_;
};

}  // namespace rgpu::client
