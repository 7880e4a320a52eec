// The process-wide table of IPC exports and their revocation (ipc.h); the entry points that use
// it are in api_ipc.cc.
#include "softgpu/ipc.h"

#include "softgpu/stream.h"

namespace softgpu {

IpcTables& GetIpcTables() {
  static auto* tables = new IpcTables;  // never destroyed: used until the process ends
  return *tables;
}

void RevokeIpcMemExport(uint64_t base) {
  IpcTables& t = GetIpcTables();
  std::lock_guard lock(t.mu);
  t.memory.erase(base);
}

void RevokeIpcEventExport(Event& event) {
  IpcTables& t = GetIpcTables();
  std::lock_guard lock(t.mu);
  if (event.ipc_export_id != 0) t.events.erase(event.ipc_export_id);
  event.ipc_export_id = 0;
}

void RevokeIpcExportsOf(const Context* context) {
  IpcTables& t = GetIpcTables();
  std::lock_guard lock(t.mu);
  std::erase_if(t.memory, [&](const auto& kv) { return kv.second.exporter_id == context; });
  std::erase_if(t.events, [&](const auto& kv) { return kv.second.exporter_id == context; });
}

}  // namespace softgpu
