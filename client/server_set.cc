#include "client/server_set.h"

#include <algorithm>

#include "client/client_state.h"
#include "common/log.h"
#include "proto/ops.h"

namespace rgpu::client {
namespace {

const char* OpName(Op op) {
  const OpInfo* info = FindOp(static_cast<uint32_t>(op));
  return info != nullptr ? info->name : "?";
}

}  // namespace

void ServerSet::Add(std::unique_ptr<Connection> connection) {
  connections_.push_back(std::move(connection));
}

void ServerSet::SetDevices(std::vector<DeviceSlot> devices) { devices_ = std::move(devices); }

const ServerSet::DeviceSlot* ServerSet::device(int device) const {
  if (device < 0 || device >= static_cast<int>(devices_.size())) return nullptr;
  return &devices_[device];
}

int ServerSet::ProgramDevice(int server, int remote) const {
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (devices_[d].server == server && devices_[d].remote == remote) return static_cast<int>(d);
  }
  return -1;
}

int ServerSet::ServerOfContext(const CUctx_st* ctx) {
  const DeviceSlot* slot = ClientState::Get().servers().device(ctx->device);
  return slot != nullptr ? slot->server : 0;
}

CUresult ServerSet::Route(int* server, Op op, uint64_t* ctx, std::span<uint64_t> args) const {
  auto choose = [&](int s, CUresult mismatch) -> CUresult {
    if (s >= size()) return mismatch;
    if (*server == kAnyServer) *server = s;
    if (*server != s) {
      RGPU_LOG_WARN("%s names objects of two servers; refused", OpName(op));
      return mismatch;
    }
    return CUDA_SUCCESS;
  };
  if (*ctx != 0) {
    if (CUresult r = choose(ServerOf(*ctx), CUDA_ERROR_INVALID_CONTEXT); r != CUDA_SUCCESS) {
      return r;
    }
    *ctx = Untag(*ctx);
  }
  const calls::Routes routes = calls::RoutesOf(op);
  for (size_t i = 0; i < args.size() && i < routes.arg_count; ++i) {
    switch (routes.args[i]) {
      case calls::Route::kNone:
        break;
      case calls::Route::kCtx:
      case calls::Route::kPool:
      case calls::Route::kGraph:
        if (args[i] == 0) break;
        if (CUresult r = choose(ServerOf(args[i]), routes.args[i] == calls::Route::kCtx
                                                       ? CUDA_ERROR_INVALID_CONTEXT
                                                       : CUDA_ERROR_INVALID_HANDLE);
            r != CUDA_SUCCESS) {
          return r;
        }
        args[i] = Untag(args[i]);
        break;
      case calls::Route::kDevice: {
        const DeviceSlot* slot =
            args[i] <= 0x7fffffffull ? device(static_cast<int>(args[i])) : nullptr;
        if (slot == nullptr) return CUDA_ERROR_INVALID_DEVICE;
        if (CUresult r = choose(slot->server, CUDA_ERROR_INVALID_DEVICE); r != CUDA_SUCCESS) {
          return r;
        }
        args[i] = static_cast<uint64_t>(slot->remote);
        break;
      }
    }
  }
  if (*server == kAnyServer) {
    if (size() == 1) {
      *server = 0;
    } else if (CUctx_st* current = CurrentContext(); current != nullptr) {
      *server = ServerOfContext(current);
    } else {
      RGPU_LOG_WARN("%s names no server and no context is current; refused", OpName(op));
      return CUDA_ERROR_INVALID_CONTEXT;
    }
  }
  return *server >= 0 && *server < size() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult ServerSet::TranslateResults(int server, Op op, std::vector<uint64_t>* values) const {
  const calls::Routes routes = calls::RoutesOf(op);
  for (size_t i = 0; i < values->size() && i < routes.result_count; ++i) {
    uint64_t& v = (*values)[i];
    switch (routes.results[i]) {
      case calls::Route::kNone:
        break;
      case calls::Route::kCtx:
      case calls::Route::kPool:
      case calls::Route::kGraph:
        if (v > kIdMask) {  // a session id the tag would overwrite: never handed out
          RGPU_LOG_WARN("the server's reply to %s holds an id out of range", OpName(op));
          return CUDA_ERROR_UNKNOWN;
        }
        v = Tag(server, v);
        break;
      case calls::Route::kDevice: {
        const int d = v <= 0x7fffffffull ? ProgramDevice(server, static_cast<int>(v)) : -1;
        if (d < 0) return CUDA_ERROR_INVALID_DEVICE;  // a device the program does not see
        v = static_cast<uint64_t>(d);
        break;
      }
    }
  }
  return CUDA_SUCCESS;
}

CUresult ServerSet::CallRouted(int server, Op op, uint64_t ctx, std::span<uint64_t> args,
                               const void* payload, size_t payload_size,
                               std::vector<uint64_t>* values, ReplyBuffer reply,
                               size_t* reply_size) {
  if (CUresult r = Route(&server, op, &ctx, args); r != CUDA_SUCCESS) return r;
  CUresult r = at(server).CallRaw(op, ctx, args, payload, payload_size, values, reply, reply_size);
  if (r == CUDA_SUCCESS && values != nullptr) r = TranslateResults(server, op, values);
  return r;
}

CUresult ServerSet::PostRouted(int server, Op op, uint64_t ctx, std::span<uint64_t> args,
                               const void* payload, size_t payload_size, bool payload_stays_valid) {
  if (CUresult r = Route(&server, op, &ctx, args); r != CUDA_SUCCESS) return r;
  if (PostRecording* recording = Connection::Recording(); recording != nullptr) {
    if (recording->server == -1) recording->server = server;
    if (recording->server != server) recording->mixed = true;
  }
  return at(server).PostRaw(op, ctx, args, payload, payload_size, payload_stays_valid);
}

CUresult ServerSet::PostRead(uint64_t ctx, CUdeviceptr src, size_t bytes, uint64_t stream,
                             void* dst) {
  const int server = ServerOf(ctx);
  Connection& connection = at(server);
  const size_t piece = connection.bulk_piece() != 0 ? connection.bulk_piece() : bytes;
  size_t done = 0;
  do {  // once for an empty read
    const size_t n = std::min(piece, bytes - done);
    const uint64_t token = connection.ExpectRead(static_cast<char*>(dst) + done, n, Untag(ctx));
    const CUresult r = PostOn<calls::MemcpyDtoHPosted>(
        server, ctx, {.src = src + done, .bytes = n, .stream = stream, .token = token});
    if (r != CUDA_SUCCESS) {
      connection.ForgetRead(token);
      return r;
    }
    connection.ReadPosted(token);
    done += n;
  } while (done < bytes);
  return CUDA_SUCCESS;
}

void ServerSet::AwaitReads() {
  for (auto& c : connections_) c->AwaitReads();
}

CUresult ServerSet::WaitSent(size_t keep) {
  CUresult first = CUDA_SUCCESS;
  for (auto& c : connections_) {
    const CUresult r = c->WaitSent(keep);
    if (first == CUDA_SUCCESS) first = r;
  }
  return first;
}

Status ServerSet::RegisterHostMemory(void* address, size_t size) {
  for (size_t i = 0; i < connections_.size(); ++i) {
    Status s = connections_[i]->RegisterHostMemory(address, size);
    if (!s.ok()) {
      for (size_t j = 0; j < i; ++j) connections_[j]->UnregisterHostMemory(address);
      return s;
    }
  }
  return Status::Ok();
}

void ServerSet::UnregisterHostMemory(void* address) {
  for (auto& c : connections_) c->UnregisterHostMemory(address);
}

void ServerSet::StopBatching(int wait_ms) {
  for (auto& c : connections_) c->StopBatching(wait_ms);
}

}  // namespace rgpu::client
