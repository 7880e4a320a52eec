// CUDA IPC between contexts (entry points in api_ipc.cc): each context plays the part of a CUDA
// process. The table of live exports is process-wide; the Revoke calls withdraw exports whose
// source is gone, so that their handles can no longer be opened (what was opened already stays
// valid until closed or destroyed).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace softgpu {

class Context;
class Event;
struct Allocation;

// An export's random number: a handle opens the export only if it carries it.
struct Nonce {
  uint64_t words[2] = {};
  bool operator==(const Nonce&) const = default;
};

// Exported cuMemAlloc allocations and interprocess events, and the process-wide table of them.
struct MemExport {
  Nonce nonce;
  const Context* exporter_id = nullptr;  // identity only (RevokeIpcExportsOf)
  std::weak_ptr<Context> exporter;
  std::weak_ptr<Allocation> allocation;
  uint64_t size = 0;
  uint32_t device = 0;
};

struct EventExport {
  Nonce nonce;
  const Context* exporter_id = nullptr;
  std::weak_ptr<Context> exporter;
  std::weak_ptr<Event> event;
  uint32_t device = 0;
};

struct IpcTables {
  std::mutex mu;
  std::map<uint64_t, MemExport> memory;    // by allocation base; GUARDED_BY(mu)
  std::map<uint64_t, EventExport> events;  // by export id; GUARDED_BY(mu)
  uint64_t next_event_id = 1;              // GUARDED_BY(mu)
};

// The process's table (never destroyed).
IpcTables& GetIpcTables();

// The cuMemAlloc allocation at `base` was freed.
void RevokeIpcMemExport(uint64_t base);
// The event handle was destroyed.
void RevokeIpcEventExport(Event& event);
// The context is being destroyed or reset: everything it exported.
void RevokeIpcExportsOf(const Context* context);

}  // namespace softgpu
