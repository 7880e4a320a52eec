// Session's handlers for graphs kept by the server (proto/calls.def: Graphs kept by the server).
// A recorded graph is only bytes the session sent: each launch runs its calls through RunCall,
// the same checks and handlers as posted calls, so it reaches nothing the session could not reach
// by posting them again; what a session may record is bounded (count and bytes).
#include <algorithm>
#include <cstring>

#include "server/checked_size.h"
#include "server/session.h"

namespace rgpu::server {
namespace {

// Stream-ordered operations a graph may hold: work on the device, never host data, never another
// graph, never a free.
bool Recordable(Op op) {
  switch (op) {
    case Op::kLaunchKernel:
    case Op::kMemset:
    case Op::kMemset2D:
    case Op::kMemcpyDtoD:
    case Op::kMemcpy2DDtoD:
    case Op::kMemcpyPeer:
    case Op::kEventRecord:
    case Op::kStreamWaitEvent:
      return true;
    default:
      return false;
  }
}

constexpr uint64_t kMaxGraphCalls = uint64_t{1} << 16;

}  // namespace

CUresult ParseGraphRecord(const char* data, size_t size, uint64_t room, GraphRecord* rec,
                          std::string* why) {
  uint32_t batch_bytes = 0;
  if (size < sizeof batch_bytes) {
    *why = "a graph record needs its calls";
    return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(&batch_bytes, data, sizeof batch_bytes);
  if (batch_bytes > size - sizeof batch_bytes) {
    *why = "the graph's calls run past the record";
    return CUDA_ERROR_INVALID_VALUE;
  }
  wire::Batch batch;
  if (!batch.ParseFromArray(data + sizeof batch_bytes, static_cast<int>(batch_bytes)) ||
      batch.calls_size() == 0 || batch.calls_size() != batch.payload_sizes_size() ||
      static_cast<uint64_t>(batch.calls_size()) > kMaxGraphCalls) {
    *why = "a graph record holds 1 to 65536 calls, each with its payload size";
    return CUDA_ERROR_INVALID_VALUE;
  }
  const char* payloads = data + sizeof batch_bytes + batch_bytes;
  const size_t payloads_size = size - sizeof batch_bytes - batch_bytes;
  *rec = GraphRecord();
  uint64_t at = 0;
  for (int i = 0; i < batch.calls_size(); ++i) {
    const wire::Call& call = batch.calls(i);
    const OpInfo* info = FindOp(call.op());
    if (info == nullptr || !Recordable(static_cast<Op>(call.op())) || !call.posted() ||
        call.args_size() != info->arg_count) {
      *why = "call " + std::to_string(i) + " of the graph is not stream work it may hold (" +
             (info != nullptr ? info->name : "an unknown operation") + ")";
      return CUDA_ERROR_INVALID_VALUE;
    }
    const uint64_t call_size = batch.payload_sizes(i);
    uint64_t end = 0;
    if (call_size != 0) at = (at + 15) & ~uint64_t{15};
    if (!CheckedAdd(at, call_size, &end) || end > payloads_size) {
      *why = "the payload of call " + std::to_string(i) + " runs past the record";
      return CUDA_ERROR_INVALID_VALUE;
    }
    rec->offsets.push_back(at);
    rec->sizes.push_back(call_size);
    at = end;
  }
  // What it holds, against the room the session has left, before anything is copied.
  rec->bytes = payloads_size + batch_bytes;
  if (rec->bytes > room) {
    *why = "the session's graphs would hold more than the server's limit allows";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rec->calls.assign(batch.calls().begin(), batch.calls().end());
  rec->payload.assign(payloads, payloads_size);
  return CUDA_SUCCESS;
}

std::string GraphRecordBytes(const GraphRecord& rec) {
  wire::Batch batch;
  for (size_t i = 0; i < rec.calls.size(); ++i) {
    *batch.add_calls() = rec.calls[i];
    batch.add_payload_sizes(rec.sizes[i]);
  }
  const std::string calls = batch.SerializeAsString();
  const uint32_t batch_bytes = static_cast<uint32_t>(calls.size());
  std::string out(reinterpret_cast<const char*>(&batch_bytes), sizeof batch_bytes);
  out += calls;
  out += rec.payload;
  return out;
}

CUresult Session::HandleGraphRecord(CallState& cs, const GraphRecordIn&,
                                    calls::GraphRecord::Results* out) {
  if (CUresult r = RoomFor(cs, graphs_.size(), limits_.max_graphs, "graphs"); r != CUDA_SUCCESS) {
    return r;
  }
  GraphRecord rec;
  const uint64_t room = limits_.max_graph_bytes - std::min(limits_.max_graph_bytes, graph_bytes_);
  if (CUresult r = ParseGraphRecord(cs.payload, cs.payload_size, room, &rec, &cs.detail);
      r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      cs.detail = "the session's graphs would hold more than " +
                  std::to_string(limits_.max_graph_bytes) + " bytes, the server's limit";
    }
    return r;
  }
  graph_bytes_ += rec.bytes;
  out->graph = graphs_.Insert(std::move(rec));
  return CUDA_SUCCESS;
}

CUresult Session::HandleGraphLaunch(CallState& cs, const GraphLaunchIn& in,
                                    calls::GraphLaunch::Results*) {
  const GraphRecord& g = *in.graph.record;
  wire::Reply scratch;  // the calls are posted: their results go nowhere
  for (size_t i = 0; i < g.calls.size(); ++i) {
    CallState sub;
    sub.call = &g.calls[i];
    // The stored bytes are the graph's: handlers only read a call's payload.
    sub.payload = g.payload.data() + g.offsets[i];
    sub.payload_size = g.sizes[i];
    sub.reply = &scratch;
    const CUresult r = RunCall(g.calls[i], sub);
    if (r == CUDA_SUCCESS) continue;
    // Reported as the posted call it stands for would have been, at the next synchronizing call.
    const OpInfo* info = FindOp(g.calls[i].op());
    cs.detail =
        "graph call " + std::to_string(i) + " (" + (info ? info->name : "?") + "): " + sub.detail;
    if (async_error_ == CUDA_SUCCESS) {
      async_error_ = r;
      async_error_detail_ = cs.detail;
      async_error_ctx_ = g.calls[i].ctx();
    }
    return r;
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleGraphDestroy(CallState&, const GraphDestroyIn& in,
                                     calls::GraphDestroy::Results*) {
  graph_bytes_ -= in.graph->bytes;
  graphs_.Erase(in.graph.id);
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
