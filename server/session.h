// Session: one tenant connection. It owns the channel to the client, the backend contexts it
// created and a table of every resource made in them, and replays the client's calls on the
// backend. Every handle and device pointer a call names is checked against this session's own
// tables first. When the client leaves or dies, everything the session created is released.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <deque>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "proto/calls.h"
#include "proto/ops.h"
#include "proto/rgpu.pb.h"
#include "server/checkpoint.h"
#include "server/cuda_driver.h"
#include "server/checkpoint_relay.h"
#include "server/fair_scheduler.h"
#include "server/kernel_turns.h"
#include "server/handle_table.h"
#include "server/host_nvml.h"
#include "server/ipc_registry.h"
#include "server/move_request.h"
#include "server/owner_mutex.h"
#include "server/session_records.h"
#include "server/session_limits.h"
#include "transport/channel.h"

namespace rgpu::server {

class DeviceCatalog;
class LivenessService;
class SessionHost;
class SessionHostPool;
class StdoutCapture;
class TenantTable;
struct Admission;
struct Tenant;

// The properties of ordinary device memory of `device` for virtual memory management
// (session_vmm.cc): pinned, on that device.
CUmemAllocationProp DevicePinnedProp(int device);

// What a finished session leaves behind, for the server's accounting.
struct SessionTotals {
  uint64_t calls = 0;
  uint64_t live_allocations = 0;
  uint64_t live_bytes = 0;
};

// Transfers of at least this many bytes move straight between the network and device memory when
// the backend allows it (softgpuMemDirectAccess): the channel defers fetching their payloads until
// the session has ordered the copy.
constexpr size_t kDirectCopyBytes = size_t{1} << 20;

// How a session ended (counted per tenant: rgpu status, metrics).
enum class SessionEnd : uint8_t {
  kNone,      // not admitted (a refused handshake, a status query, a probe)
  kExited,    // its client said goodbye (the program ended) and then went
  kLost,      // the connection broke without a goodbye: a crash, a kill, the network
  kClosed,    // the server closed it: a limit, a malformed message, an ended lease, an abort
  kShutdown,  // the server was stopping
  kMoved,     // it moved to another server, or into a checkpoint (docs/migration.md)
};

// The name in a kName payload (checked to be 1..4096 bytes), up to its NUL.
std::string PayloadName(const char* payload, size_t size);

class Session {
 public:
  // `tenants`: when not null, a session must present one of its tokens. A non-empty `refusal`
  // refuses the session at the handshake with that reason (e.g. the server is full).
  Session(uint64_t id, const CudaDriver& driver, const DeviceCatalog& devices,
          std::unique_ptr<Channel> channel, TenantTable* tenants = nullptr,
          std::string refusal = "", FairSchedulers* schedulers = nullptr);
  ~Session();

  // Runs the handshake and then serves calls until the client leaves or `stop` becomes true.
  // Releases every resource before it returns.
  void Run(const std::atomic<bool>& stop);

  uint64_t id() const { return id_; }
  // How the session ended, once Run has returned.
  SessionEnd end() const { return end_; }
  // True once the handshake admitted the client (status queries never are). Any thread.
  bool admitted() const { return admitted_.load(); }
  // The session's figures now (memory, GPU time, calls, bytes, queue). Any thread.
  wire::SessionStats Stats() const;
  // Answers a StatusRequest handshake (instead of Hello) with the server's live sessions.
  using StatusProvider = std::function<wire::StatusReply()>;
  void SetStatusProvider(StatusProvider provider) { status_provider_ = std::move(provider); }
  // Answers a ReachabilityProbe handshake (the registry checking that this server answers at the
  // URL it registered) with HMAC-SHA256(secret, nonce). `secret` must outlive the session; empty:
  // probes are refused.
  void SetReachabilitySecret(const std::string* secret) { reachability_secret_ = secret; }
  // Offers the client the server's keepalive port; with client_timeout_ms > 0 the session is
  // closed once its client (having announced itself there) sends no keepalive for that long.
  // Bounds on module sizes and handle counts (default: SessionLimits' defaults).
  void SetLimits(const SessionLimits& limits) { limits_ = limits; }
  // The host's NVML for DeviceSensors (null: no readings). Outlives the session.
  void SetHostNvml(const HostNvml* nvml) { host_nvml_ = nvml; }
  // Backends that cannot say what a module holds (softgpuModuleGetFootprint) have it measured
  // as the drop in the device's free memory across the load, while every session's allocations,
  // frees, loads and unloads are held off by `lock` (shared by all sessions of the server).
  void SetDeviceMemoryLock(std::mutex* lock) { memory_lock_ = lock; }
  void SetLiveness(LivenessService* liveness, int client_timeout_ms) {
    liveness_ = liveness;
    client_timeout_ms_ = client_timeout_ms;
  }
  // Zero every allocation before the tenant gets it: for backends whose fresh memory may hold
  // another tenant's data (every GPU; softgpu zero-fills its own).
  void SetScrubAllocations(bool scrub) { scrub_allocations_ = scrub; }
  // Bounds how long one kernel may run (0: no bound): softgpu ends it with
  // CUDA_ERROR_LAUNCH_TIMEOUT; on other backends a kernel waited for in its --fair-share turn is
  // ended by destroying its context. Devices then report CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT.
  void SetKernelBound(uint64_t max_kernel_ms) { max_kernel_ms_ = max_kernel_ms; }
  // Stops the session from any thread (its client is gone, or its lease ended): its channel is
  // abandoned, which ends every wait on the client and the session, and its running kernels are
  // stopped. Idempotent.
  void Abort(const std::string& reason);
  // Admitted sessions are handed to a process of their own from `hosts` (server/session_host.h):
  // the client is redirected there and this session keeps its tenant's quota, its figures and
  // its end until that process ends. Null: served here. Outlives the session.
  void SetSessionHosts(SessionHostPool* hosts) { hosts_ = hosts; }
  // A session host's stdout (the backend's device printf): drained into the session's device
  // output before each reply. Null: not captured. Outlives the session.
  void SetStdoutCapture(StdoutCapture* capture) { stdout_capture_ = capture; }
  // True once the session was handed to a process of its own (SetSessionHosts). Any thread.
  bool hosted() const { return hosted_.load(); }
  // A restore into a process of its own (session_hosted_restore.cc), on a server whose sessions
  // only processes keep apart: takes a host from SetSessionHosts' pool and assigns it the
  // restore of `header`'s session for `tenant` on the server's devices `onto`, under this
  // session's id, resumed there with `host_token`. Then Run supervises the host (its quota, its
  // figures, its end) from the start, RelayRestore passes the checkpoint's bytes on as they
  // come and AwaitHostedRestore waits for the host's answer. Before Run; one thread.
  Status StartHostedRestore(const wire::Checkpoint& header, std::shared_ptr<Tenant> tenant,
                            const std::vector<int>& onto, const std::string& host_token);
  // The next bytes of the checkpoint (all of them, its header included, in order); `last` with
  // the final ones. Unavailable once the host is gone. Any one thread, while Run supervises.
  Status RelayRestore(const char* data, size_t size, bool last);
  // The host's answer to the restore: OK once it waits for its client, else why not (the host
  // then ends); kTimeout after `timeout_ms`. Any thread.
  Status AwaitHostedRestore(int timeout_ms);
  // The port of the host that holds the restored session (0: none) and, in *pin, over tls:// the
  // pin of its key (SessionHost::pin), read together. Any thread.
  uint16_t host_port(std::string* pin);
  // Its client proved the resume credential and went on to the host: the session counts as
  // admitted (status, moves). Any thread.
  void NoteResumedInHost();
  // True for a session restored in a host (StartHostedRestore). After it, any thread.
  bool restored_in_host() const { return restore_in_host_; }
  // Called once, on this session's thread, when the handshake admits the client.
  void SetAdmittedHook(std::function<void()> hook) { admitted_hook_ = std::move(hook); }
  // The registry lease of the token that admitted it ("": none). Any thread.
  std::string lease_id() const {
    std::lock_guard<std::mutex> lock(name_mu_);
    return lease_id_;
  }
  // Bytes of device memory this session holds right now.
  uint64_t live_bytes() const { return live_bytes_.load(); }
  // Where the session shares memory, events and pools with the server's other sessions
  // (session_ipc.cc); null: it shares nothing (those calls fail with CUDA_ERROR_NOT_SUPPORTED).
  // Must outlive the session.
  void SetIpcRegistry(IpcRegistry* registry) { ipc_ = registry; }

  // Lanes: more connections of the same client, where its threads wait (StreamSynchronize,
  // EventSynchronize, CtxSynchronize) while the session's own channel goes on serving its other
  // threads' calls. A lane's call waits until the session has served the call the client sent
  // before it (Call.after_seq), resolves its handle under the session's state lock, and waits on
  // the backend without it; a stream, event or context being waited on is destroyed only once its
  // waits are over.
  //
  // Called on a connection's thread whose first message is a LaneJoin: finds the session and
  // serves the lane on this thread (Server::JoinLane). Set before Run; null: no lanes offered.
  using LaneJoiner =
      std::function<void(uint64_t session_id, const std::string& lane_key, Channel& lane)>;
  void SetLaneJoiner(LaneJoiner joiner, uint32_t max_lanes) {
    lane_joiner_ = std::move(joiner);
    max_lanes_ = max_lanes;
  }
  // Called on a connection's thread whose first message is a PeerJoin (another server's transfer
  // into or out of a session of this server: Server::JoinPeer). Null: no transfers served.
  using PeerJoiner = std::function<void(const wire::PeerJoin& join, Channel& peer)>;
  void SetPeerJoiner(PeerJoiner joiner) { peer_joiner_ = std::move(joiner); }
  // Opens a connection to another server (MemcpyPeerRemote's). Null: such copies are refused.
  using PeerConnector = std::function<Status(const std::string& url, std::unique_ptr<Channel>*)>;
  void SetPeerConnector(PeerConnector connector) { peer_connector_ = std::move(connector); }
  // Admits one more lane presenting `key` (constant-time comparison): false when the key is wrong,
  // the session offers no lanes, has max_lanes already or is ending. Any thread; the session must
  // not end meanwhile (Server holds it in its table). A true return must be followed by ServeLane.
  bool AttachLane(const std::string& key);
  // A transfer of another server under one of this session's PeerGrants (server/session_peer.cc):
  // what it may reach.
  struct PeerGrantRecord {
    std::string ticket;         // 16 random bytes
    std::string ticket_digest;  // its SHA-256, by which a PeerJoin names it
    uint64_t ctx_id = 0;
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
    bool write = false;  // the other server writes the range (else it reads it)
    int64_t expires_ms = 0;
  };
  // Admits the transfer naming its ticket by `ticket_digest` (its SHA-256; constant-time
  // comparison; each ticket once, within its minute): false otherwise. As AttachLane, a true
  // return must be followed by ServePeer.
  bool AttachPeer(const std::string& ticket_digest, PeerGrantRecord* grant);
  // Serves an attached transfer on `peer`: a Welcome proving the ticket over the joiner's
  // `nonce`, then the granted bytes, in chunks, each under the state lock with the range checked
  // again; Run waits for it before it releases anything. True when the transfer completed (the
  // connection may carry another).
  bool ServePeer(Channel& peer, const PeerGrantRecord& grant, const std::string& nonce);
  // Serves an attached lane until it closes or the session ends; Run waits for it before it
  // releases anything.
  void ServeLane(Channel& lane);

  // Called on a connection's thread whose first message is none of Hello, StatusRequest,
  // ReachabilityProbe, LaneJoin and PeerJoin (an operator's AdminRequest, another server's
  // RestoreJoin, a client's Resume: Server's, server/server_migration.cc), with the connection;
  // it may take the channel. False: not handled (the handshake then refuses it).
  using ServiceHandler =
      std::function<bool(const wire::Envelope& first, std::unique_ptr<Channel>& channel)>;
  void SetServiceHandler(ServiceHandler handler) { service_handler_ = std::move(handler); }

  // Migration (docs/migration.md; server/session_migrate.cc). Asks the session to leave this
  // server at its client's next waited call (to another server, or into the checkpoint stream of
  // an operator's connection, after which it stays parked), or tells a parked session where its
  // client is to resume. A session in a process of its own (hosted()) is moved by its host
  // (HostMove), which waits up to `timeout_ms` for the client's call; a checkpoint's pieces come
  // back from the host to the request's stream (checkpoint_relay_). Any thread; the outcome comes
  // through the request. False (nothing asked) when the session has a request already, or a
  // redirect finds it not parked.
  bool RequestMove(std::shared_ptr<MoveRequest> request, uint32_t timeout_ms);

  // A session made from a checkpoint (server/session_checkpoint.cc) before it runs: RestoreBegin
  // makes everything the header (checked by CheckCheckpoint) lists, charging `tenant`'s quota,
  // at the same ids and device addresses; RestoreMemory writes the memory's bytes as they come
  // (`offset` from the memory's start); RestoreFinish completes it. On a failure the caller
  // destroys the session, which releases whatever was made.
  // `onto`: the server's devices the session's devices are, in order (validated by the caller).
  Status RestoreBegin(const wire::Checkpoint& header, std::shared_ptr<Tenant> tenant,
                      const std::vector<int>& onto);
  Status RestoreMemory(uint64_t offset, const char* data, size_t size);
  Status RestoreFinish();
  // Serves a restored session on `channel`, whose client has proven its resume credential
  // (Server's): a Welcome, then its calls as Run serves them, until the client leaves or `stop`.
  void RunResumed(std::unique_ptr<Channel> channel, const std::atomic<bool>& stop);

 private:
  // The two ends of serving an attached side channel (a lane or a peer transfer), shared by
  // ServeLane and ServePeer: Begin lists it (so that ending the session closes it) and sends the
  // Welcome naming the session (with `peer_proof` for a peer transfer), returning the send's
  // status; End unlists it, gives back its AttachLane/AttachPeer admission and wakes Run, which
  // waits for every side channel to end.
  Status BeginSideChannel(Channel& channel, const std::string& peer_proof = "");
  void EndSideChannel(Channel& channel);

  // Everything a handler needs about the call it serves.
  struct CallState {
    const wire::Call* call = nullptr;
    const char* payload = nullptr;
    size_t payload_size = 0;
    uint64_t ctx_id = 0;
    ContextRecord* ctx = nullptr;  // resolved Call.ctx, current on this thread
    wire::Reply* reply = nullptr;
    char* out_payload = nullptr;  // the session's output buffer (OutputBuffer), or nullptr
    size_t out_size = 0;
    std::string detail;  // why a call failed, sent back in Reply.message
    // The message, when its payload has not been fetched yet (payload is then null): the
    // handler fetches it with Channel::FetchPayload.
    ReceivedMessage* unfetched = nullptr;
  };

  bool Handshake();
  // The parts of a Welcome of an admitted session: the devices it sees, the keepalive port and
  // key (watching the client from then on), the lane key.
  void FillWelcome(wire::Welcome* w);
  // Serves messages until the client leaves, `stop`, an abort or a move; then releases
  // everything (Run's and RunResumed's end).
  void ServeLoop(const std::atomic<bool>& stop);

  // Migration (server/session_migrate.cc, session_checkpoint.cc).
  enum class MoveOutcome { kStayed, kMoved };
  // At a waited call while a move is asked for: takes the checkpoint, sends it, and answers the
  // call with Reply.moved (kMoved: the session is done here) or, when the move failed (the
  // request says why), leaves everything as it was for the call to be served (kStayed).
  MoveOutcome MoveAt(const wire::Call& call);
  // Waits for every context's work (a failed context refuses the move) and releases what pools
  // keep unused.
  Status Quiesce();
  // How long Quiesce watches the streams of a session that has waited on memory.
  static constexpr std::chrono::milliseconds kStreamWaitsQuiesceTime{2000};
  // True when no stream of context `ctx` (current), its default stream included, has work left,
  // nor one the program destroyed with work queued (DrainingStreamsBusy).
  bool StreamsIdle(uint64_t ctx);
  // Streams the program destroyed with work still queued: the backend lets that work run (as
  // CUDA does), behind which an event was recorded. Until the work is done they count as busy
  // streams of their context (cuCtxSynchronize's hand-off, Quiesce) and toward --max-streams
  // (session thread). Forgets those whose work is done; true when one of `ctx` is still busy.
  struct DrainingStream {
    uint64_t ctx = 0;
    CUevent done = nullptr;
  };
  bool DrainingStreamsBusy(uint64_t ctx);
  // Forgets the draining streams whose work is done; returns how many are left.
  size_t DrainingStreams();
  // Refuses what cannot move (shared memory, peer access, arrays, VMM, ...), naming it.
  Status CheckMovable();
  // The checkpoint's header of the quiesced session.
  Status Capture(wire::Checkpoint* header);
  // Writes the checkpoint (header, memory, digest) through `sink`.
  Status WriteCheckpoint(const wire::Checkpoint& header,
                         const std::function<Status(const char*, size_t)>& sink);
  // Sends the checkpoint to the server of a kToServer request and returns where it restored it.
  Status SendToServer(const MoveRequest& request, const wire::Checkpoint& header,
                      uint64_t* new_session, std::string* credential);
  // Answers `call` with Reply.moved (and what is pending for the client).
  void SendMoved(const wire::Call& call, const std::string& url, uint64_t session,
                 const std::string& credential);
  // Waits, parked, for a kRedirect (true, *redirect set), the client's departure or `stop`.
  bool AwaitRedirect(std::shared_ptr<MoveRequest>* redirect);
  // Loads a checkpointed module at its variables' addresses (RestoreBegin).
  Status RestoreModule(const wire::CheckpointModule& m);
  // What both ways of restoring a module do first: its context made current, its image checked
  // as a ModuleLoadData image is, the image's bytes charged to the tenant on *device.
  Status PrepareModuleRestore(const wire::CheckpointModule& m, int* device);
  // A checkpointed module's variables on a backend without fixed-address extensions (NVIDIA's
  // driver): each found by name (the image's, common/module_variables.h, read once and kept in
  // m.variables) with cuModuleGetGlobal.
  // A variable kernels can write that cannot be found refuses the move (its state would be lost).
  Status CaptureVariablesByName(ModuleRecord& m, wire::CheckpointModule* out);
  // Restores the checkpoint's allocations at their addresses through virtual memory management
  // (session_restore_mapped.cc): each granule-aligned span of them reserved at its address (a
  // backend that places it elsewhere refuses the restore), backed by new physical memory and
  // mapped for its device. Charges nothing (RestoreBegin charges each allocation).
  Status MapRestoredAllocations(const wire::Checkpoint& c);
  // Loads a checkpointed module where the backend puts it and finds each variable by name; a
  // variable placed elsewhere than in the checkpoint adds old -> new to *moved (its bytes go
  // there), and one the program holds the address of (c.globals()) refuses the restore.
  Status RestoreModuleByName(const wire::CheckpointModule& m, const wire::Checkpoint& c,
                             std::map<CUdeviceptr, CUdeviceptr>* moved);
  // Frees device memory the session allocated at `ptr` (cuMemAlloc's, or a restored mapping's
  // share: the span goes when its last allocation does).
  CUresult FreeDeviceMemory(CUdeviceptr ptr, RestoredSpan** kept = nullptr);
  // Frees the allocation at `ptr` of `bytes` on `device` (FreeDeviceMemory) and gives back its
  // charge, except that bytes whose restored span stays mapped (other allocations are in its
  // granules) stay charged to the span.
  CUresult ReleaseAllocationMemory(CUdeviceptr ptr, uint64_t bytes, int device);
  // Unmaps and releases the restored spans of context `ctx_id` (0: all of them).
  void ReleaseRestoredSpans(uint64_t ctx_id);
  // Checks a Hello's credential when the server requires one (Challenge), and sets tenant_,
  // lease_id_ and the devices the session sees (visible_).
  Status Admit(const wire::Credential& presented);
  // Sends a Challenge, waits for its proof and checks `presented` with it (TenantTable::Admit).
  Status Challenge(const wire::Credential& presented, Admission* admission);
  // The server's device index of the session's device `ordinal` (the i-th its token grants);
  // false when it sees no such device.
  bool ServerDevice(uint64_t ordinal, int* index) const;
  // Decodes, validates and executes one message (an Envelope or a compact call,
  // proto/compact_frame.h); false ends the session.
  bool Serve(ReceivedMessage& message);
  // Executes a message's one call: fetches its payload unless it goes straight to device memory,
  // then ServeCall.
  bool ServeSingle(const wire::Call& call, ReceivedMessage& m, bool compact_reply);
  // Validates and executes one call whose payload is payload[0, payload_size) and sends its
  // reply unless it was posted (`compact_reply`: as a compact frame when the reply is plain);
  // false ends the session.
  bool ServeCall(const wire::Call& call, char* payload, size_t payload_size,
                 bool compact_reply = false);
  // The checks every call gets (a known operation, its argument count, whether it may be posted
  // and take a payload, its context), then its operation; meters it. cs carries the call, its
  // payload and where its results go; cs.detail says why it failed.
  CUresult RunCall(const wire::Call& call, CallState& cs);
  // The largest payload a call of operation `op` can take (0 for an unknown operation): a larger
  // one, still waiting in the transport, is not read into memory (the call fails its payload
  // check). A copy's is unbounded here: its row's checks derive its exact size from its
  // arguments before TakePayload fetches it.
  uint64_t LargestPayload(uint32_t op) const;
  // Fetches the payload of cs, if it still waits in the transport, into a buffer of the
  // channel's, once the call's arguments and payload size were checked (server/call_dispatch.cc,
  // before every handler); a host-to-device copy's is left for its handler, which fetches it
  // into device memory where it can. Fails only when the payload was lost (the peer is gone).
  CUresult TakePayload(CallState& cs, Op op);
  // Runs the operation of cs.call: decodes and checks its arguments, resolves its handles, makes
  // the checks calls.def gives it, runs its handler and encodes its results
  // (server/call_dispatch.cc, generated from proto/calls.def).
  CUresult Dispatch(Op op, CallState& cs);

  // Per operation of proto/calls.def: `NameIn`, its arguments resolved (Resolved<Kind>), and
  // the handler, which may assume every check calls.def lists has passed and fills *out on
  // success (server/session_*.cc, by family).
#define RGPU_ARG(kind, name) Resolved<calls::Kind##kind>::Type name{};
#define RGPU_CALL(Name, mode, context, payload_in, payload_out, args, results, checks) \
  struct Name##In {                                                                    \
    args                                                                               \
  };                                                                                   \
  CUresult Serve##Name(CallState& cs);                                                 \
  CUresult Handle##Name(CallState& cs, const Name##In& in, calls::Name::Results* out);
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_ARG

  // The field resolvers the generated dispatch uses: a raw wire value to its resolved form,
  // checked to be the session's (handles of the call's context, devices the session sees).
  // CUDA_ERROR_INVALID_HANDLE (INVALID_DEVICE, INVALID_CONTEXT) and cs.detail otherwise.
  template <typename K>
  CUresult Resolve(CallState&, K, const typename K::Wire& raw, typename K::Wire* out) {
    *out = raw;
    return CUDA_SUCCESS;
  }
  CUresult Resolve(CallState& cs, calls::KindDevice, int raw, int* out);
  CUresult Resolve(CallState& cs, calls::KindCtx, uint64_t raw, Handle<ContextRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindModule, uint64_t raw, Handle<ModuleRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindFunction, uint64_t raw, Handle<FunctionRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindEvent, uint64_t raw, Handle<EventRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindSessionEvent, uint64_t raw, Handle<EventRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindOwnStream, uint64_t raw, Handle<StreamRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindStream, uint64_t raw, StreamRef* out);
  CUresult Resolve(CallState& cs, calls::KindPool, uint64_t raw, Handle<PoolRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindArray, uint64_t raw, Handle<ArrayRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindOptArray, uint64_t raw, Handle<ArrayRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindTexture, uint64_t raw, Handle<SamplerRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindSurface, uint64_t raw, Handle<SamplerRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindLink, uint64_t raw, Handle<LinkRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindPhysicalMemory, uint64_t raw,
                   Handle<PhysicalRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindGraph, uint64_t raw, Handle<GraphRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindMipmappedArray, uint64_t raw,
                   Handle<MipmapRecord>* out);
  CUresult Resolve(CallState& cs, calls::KindOptMipmappedArray, uint64_t raw,
                   Handle<MipmapRecord>* out);
  // The checks of calls.def: false (with cs.detail) when they fail.
  bool CheckRange(CallState& cs, CUdeviceptr ptr, uint64_t bytes, const char* what);
  bool CheckRangeIn(CallState& cs, uint64_t ctx_id, CUdeviceptr ptr, uint64_t bytes,
                    const char* what);
  bool CheckElements(CallState& cs, CUdeviceptr ptr, uint64_t count, uint64_t size,
                     const char* what);
  bool CheckPitched(CallState& cs, CUdeviceptr ptr, uint64_t pitch, uint64_t width, uint64_t height,
                    const char* what);
  bool CheckPitchedElements(CallState& cs, CUdeviceptr ptr, uint64_t pitch, uint64_t width,
                            uint64_t size, uint64_t height, const char* what);
  bool CheckPayload(CallState& cs, uint64_t bytes);
  bool CheckPayloadRows(CallState& cs, uint64_t width, uint64_t height);
  bool CheckPayloadBox(CallState& cs, uint64_t width, uint64_t height, uint64_t depth);
  bool CheckArrayBox(CallState& cs, const ArrayRecord& array, uint64_t x, uint64_t y, uint64_t z,
                     uint64_t width, uint64_t height, uint64_t depth, const char* what);
  bool CheckPitchedBox(CallState& cs, CUdeviceptr ptr, uint64_t pitch, uint64_t rows,
                       uint64_t width, uint64_t height, uint64_t depth, const char* what);

  // Where a copy of `bytes` at device address `dptr` on `stream` can move its data directly, once
  // the copy's place in stream order has come (softgpuMemDirectAccess); nullptr when the backend
  // has no such access or the copy is small (the caller copies as usual). *r is the error that
  // ends the copy, if any.
  void* DirectAccess(CUdeviceptr dptr, size_t bytes, CUstream stream, CUresult* r);

  // What a client learns of a kernel with its handle: launch limits and the parameter layout
  // ((offset, size) pairs).
  struct FunctionSummary {
    uint32_t max_threads_per_block = 0;
    uint32_t static_shared_bytes = 0;
    uint32_t max_dynamic_shared_bytes = 0;
    std::vector<uint64_t> params;
  };
  // Fills `f`'s parameter layout and `out` from the backend; false (cs.detail says why) when the
  // backend cannot tell the layout.
  bool DescribeFunction(CallState& cs, FunctionRecord* f, FunctionSummary* out);
  // After a module load: every kernel of the module as a function record, described in `out`
  // (functions, listed, and the names as the reply's payload) when there are few enough; else
  // nothing, and the client asks per name.
  void ListFunctions(CallState& cs, uint64_t module_id, CUmodule module,
                     calls::ModuleLoadData::Results* out);

  // An asynchronous copy of the call's payload (`bytes` to `dst`) on `stream`, staged in the
  // call's context's pinned buffers and queued when the stream is still busy and a buffer is free
  // (*staged true: the result is the copy's); otherwise nothing is done (*staged false) and the
  // caller copies in stream order as usual.
  CUresult StageCopyIn(CallState& cs, CUdeviceptr dst, size_t bytes, CUstream stream, bool* staged);
  // The staging buffers of `ctx` (made on first use), or nullptr when staging is off or the
  // backend cannot stage.
  StagingBuffers* StagingOf(ContextRecord* ctx);
  // Copies [src, src+bytes) out in `stream`'s order (waiting for it) into cs.out_payload and
  // cs.out_size: straight from device memory where the backend allows it, else through
  // OutputBuffer.
  CUresult CopyOut(CallState& cs, CUdeviceptr src, size_t bytes, CUstream stream);

  // ---- Posted device-to-host copies (MemcpyDtoHPosted, session_posted_reads.cc) ----
  // A copy behind work still running on its stream, staged: its bytes go back to the client
  // (ReadData) once the stream has made it, before the reply to any later call.
  struct PostedRead {
    uint64_t token = 0;  // the client's, echoed
    uint64_t ctx = 0;    // the context whose staging buffer holds it
    void* buffer = nullptr;
    size_t bytes = 0;
    // Set by a host function behind the copy (MarkRead); stays allocated until the entry goes.
    std::unique_ptr<std::atomic<bool>> made;
  };
  // Sends ReadData for `token`: `bytes` of `data` on success, the failure otherwise. Session
  // thread. False when the channel is gone.
  bool SendRead(uint64_t token, CUresult result, const void* data, size_t bytes);
  // Sends every posted read whose copy has been made (and gives its buffer back), and a failure
  // for those whose context is gone or was destroyed. Session thread, state lock held.
  void SendFinishedReads();
  // Before context `id` is destroyed: waits for its work and sends its posted reads.
  void FinishReadsOf(uint64_t id);
  static void CUDA_CB MarkRead(void* made);

  // A buffer of at least `bytes` for a reply's payload, reused across calls (fresh memory costs
  // a page fault per page); valid until the next call. nullptr when memory is exhausted.
  char* OutputBuffer(size_t bytes);

  // Sets `count` elements of `element` bytes (1, 2 or 4) at `dst` to `value`, on `stream` when
  // `async`; the range has been checked.
  CUresult MemsetElements(CallState& cs, CUdeviceptr dst, uint64_t value, uint64_t element,
                          uint64_t count, CUstream stream, bool async);
  // A launch's grid, block, dynamic shared memory and cluster shape (all 0: none given).
  struct LaunchShape {
    uint32_t grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    uint32_t cluster_x = 0, cluster_y = 0, cluster_z = 0;
  };
  // Launches `f` with the packed arguments of cs.payload (checked against its parameters) on
  // `stream`, cooperatively when asked, in clusters when the shape has one, in its fair-share
  // turn when sharing is on.
  CUresult Launch(CallState& cs, const FunctionRecord& f, const LaunchShape& shape, CUstream stream,
                  bool cooperative);
  // Waits for the kernel just launched on `stream` in its fair-share turn, ending it when it runs
  // past max_kernel_ms_ or the session is aborted (backends without stream waits on memory).
  CUresult WaitForKernel(CUstream stream);
  // `r`, a call's result, or the stopped error when a kernel turn's keeper destroyed the call's
  // context meanwhile (cs.detail says so).
  CUresult AfterStops(CallState& cs, CUresult r);
  // Counts `bytes` the session makes the device hold against its tenant's quota and in its
  // metered memory; false (nothing counted, cs.detail set) when the quota cannot take them.
  // `device`: the server's device that holds them (-1: none in particular), counted per device
  // for NVML (SessionStats.device_memory_bytes).
  bool Charge(CallState& cs, int device, uint64_t bytes, const std::string& what);
  void Uncharge(int device, uint64_t bytes);
  // The server's device of context `ctx_id` (-1 when there is no such context).
  int DeviceOf(uint64_t ctx_id);
  // Loads `image` in the current context and stores in *footprint the device memory the module
  // holds (softgpuModuleGetFootprint, or measured under memory_lock_); a refusal's reason, from
  // the backend's JIT error log, goes to *why.
  CUresult LoadModule(const char* image, CUmodule* module, uint64_t* footprint, std::string* why);
  // cuModuleLoadDataEx with an error log (cuModuleLoadData on a backend without it).
  CUresult LoadModuleLogged(const char* image, CUmodule* module, std::string* why);
  // Holds memory_lock_ while device memory changes, on backends where modules are measured.
  std::unique_lock<std::mutex> DeviceMemoryChange();
  // CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY with cs.detail when a table holds `count` handles
  // already and `limit` is its bound.
  CUresult RoomFor(CallState& cs, size_t count, uint32_t limit, const char* what);
  // Makes `ctx` current on this thread if it is not already.
  CUresult MakeCurrent(ContextRecord* ctx);
  // Frees the ordinary allocation `it` (cuMemAlloc's) on the backend, uncharges and forgets it.
  CUresult FreeAllocation(std::map<CUdeviceptr, Allocation>::iterator it);
  // Checks that [ptr, ptr+bytes) lies in memory this session owns in context `ctx_id`.
  bool OwnsRange(uint64_t ctx_id, CUdeviceptr ptr, size_t bytes) const;
  // Waits for the work already issued on `stream` (none for the default stream, whose
  // synchronous copies are ordered by the backend), so a synchronous copy can follow it.
  CUresult AfterStreamWork(CUstream stream);
  // True when work issued on `stream` (nullptr: the legacy default stream) has not ended.
  bool StreamBusy(CUstream stream);
  // Creates a backend context on `device` and records it under a new id, or, when `chosen_id` is
  // not 0, under that id: the client's (PrimaryCtxRetain, checked by the caller to be in range
  // and free) or a checkpoint's (a restore); INVALID_VALUE (nothing made) when it is taken.
  CUresult CreateContext(int device, bool primary, uint64_t* id, uint64_t chosen_id = 0);
  // Destroys a context and forgets every resource that lived in it.
  void DestroyContext(uint64_t id);
  // Memory pools (session_pool.cc). The device's default pool, made on first use.
  uint64_t DefaultPool(int device);
  // Releases free blocks of `pool` whose frees have completed, largest first, until it reserves
  // at most `keep` bytes.
  void TrimPool(PoolRecord& pool, uint64_t keep);
  // After a synchronization: every pool keeps at most its release threshold.
  void TrimPoolsAfterSync();
  // Unmaps, frees and releases everything the session made with virtual memory management.
  void ReleaseVirtualMemory();
  // Zeroes the physical memory of `rec` through a temporary mapping of the server's.
  CUresult ZeroPhysical(const PhysicalRecord& rec);
  // Erases a released physical memory record once nothing maps it, uncharging it.
  void ErasePhysicalIfDone(uint64_t id);
  // Destroys the link states of context `ctx_id` (all of them for 0).
  void DestroyLinks(uint64_t ctx_id);
  // Forgets the arrays, textures and surfaces of context `ctx_id` (they go with the context).
  void ForgetArrays(uint64_t ctx_id);
  // Forgets the pools' free blocks of context `ctx_id` (its memory goes with the context).
  void ForgetPoolBlocks(uint64_t ctx_id);
  // Gives the pool allocation `it` back to its pool as a free block, usable again once `ready`
  // (recorded on session stream `stream`; null: at once) has completed; the range is no longer
  // the session's. A destroyed pool goes once nothing of it is left.
  void ReturnToPool(std::map<CUdeviceptr, Allocation>::iterator it, uint64_t stream, CUevent ready);
  // Erases a destroyed pool once nothing of it is in use any more.
  void ErasePoolIfDone(uint64_t pool_id);
  // True when `event` has completed (false when the backend cannot tell).
  bool EventDone(CUevent event);
  // Sharing with other sessions (session_ipc.cc). CUDA_ERROR_NOT_SUPPORTED (with cs.detail) when
  // the session has no IpcRegistry.
  CUresult NoSharing(CallState& cs);
  // The object exported under `key` as `kind` if this session may open it; else null and *r the
  // error (INVALID_CONTEXT for the session's own export, INVALID_VALUE otherwise).
  std::shared_ptr<void> OpenExport(CallState& cs, const IpcKey& key, IpcKind kind, CUresult* r);
  // The export of allocation `dptr` of the call's context (made on first use, its key standing
  // in the registry as `kind`); null and *r the error when it cannot be exported.
  std::shared_ptr<ExportedMemory> ExportMemory(CallState& cs, CUdeviceptr dptr, IpcKind kind,
                                               CUresult* r);
  // Opens exported memory in the call's context (again: one more reference), recording it as an
  // import (into pool `import_pool`, 0: none); *dptr is where it is.
  CUresult OpenMemory(CallState& cs, const std::shared_ptr<ExportedMemory>& ex, unsigned flags,
                      uint64_t import_pool, CUdeviceptr* dptr);
  // Closes an import on the backend (in its context) and forgets it.
  void CloseImport(std::map<CUdeviceptr, Allocation>::iterator it);
  // Releases the charge for an allocation at `base` the backend no longer holds for this
  // session: an exported one's charge passes to its export (HeldCharge) and its key is revoked.
  void UnchargeMemory(CUdeviceptr base, uint64_t bytes, int device);
  // No new opens of the allocation at `base` (its exporter freed it to its pool).
  void RevokeMemoryExport(CUdeviceptr base);
  void RevokeEventExport(EventRecord& event);
  // Releases this session's hold on physical memory: the backend handle (or its share of a
  // shared one) and the charge it made for it.
  void LetGoOfPhysical(PhysicalRecord& physical);
  // Makes `pool` shareable (its ExportedPool, registered as kPool).
  CUresult ShareablePool(CallState& cs, PoolRecord& pool);
  void ReleaseAll();
  // A wait on the session's channel from a client with lanes (Call.hand_off): true when the work
  // `query` asks about (CUDA_ERROR_NOT_READY while running) has not ended within a short while;
  // the reply then says so (Reply.handed_off) and the handler returns without waiting.
  bool HandOff(CallState& cs, const std::function<CUresult()>& query);
  // Moves the device output and the first posted call's failure not yet reported into `reply`
  // (state_mu_ held).
  void ReportPending(wire::Reply* reply);
  // A lane's wait (ServeLane): its reply's result, after the session served `call.after_seq`.
  CUresult RunLaneCall(const wire::Call& call, wire::Reply* reply);
  // Waits, on the session's thread, until no lane waits on what `matches` says (state_mu_
  // released meanwhile): before the backend object goes.
  struct LaneWait {
    uint64_t ctx = 0;
    const void* handle = nullptr;  // the CUstream or CUevent waited on (null: the context)
  };
  void AwaitLaneWaits(const std::function<bool(const LaneWait&)>& matches);
  // Copies one chunk of a peer transfer between `host` and the granted range at `offset`, on a
  // stream of the server's own, under the state lock, the range checked again first.
  CUresult PeerChunk(const PeerGrantRecord& grant, uint64_t offset, void* host, size_t size);
  // Ends every lane and waits until none is served (Run's end).
  void CloseLanes();

  const uint64_t id_;
  const CudaDriver& drv_;
  const DeviceCatalog& devices_;
  std::unique_ptr<Channel> channel_;      // null once Run has ended (before memory is released)
  ReceivedMessage* unfetched_ = nullptr;  // Serve's message while its payload is deferred
  alignas(16) char arena_block_[8192];    // first block of the arena Serve decodes on
  wire::Envelope reply_envelope_;         // ServeCall's reply, reused
  wire::Call compact_call_;               // a compact call decoded, reused
  std::string reply_bytes_;               // its encoding, reused
  TenantTable* tenants_;
  std::string refusal_;
  // With fair sharing: kernels wait their turn on their device and are timed against this
  // session's account (its tenant's, or its own when tokens are not required).
  FairSchedulers* scheduler_;
  ShareAccount own_account_;
  // Metering, per server device: measured GPU time of its kernels, and (--fair-share) the time
  // its copies and memsets took on the server. Any thread adds (kernel turns' keepers).
  std::array<std::atomic<double>, kMaxShareDevices> device_busy_seconds_{};
  std::array<std::atomic<double>, kMaxShareDevices> device_copy_seconds_{};
  // The sum of device_busy_seconds_.
  double GpuBusySeconds() const;
  std::atomic<uint64_t> bytes_in_{0}, bytes_out_{0};
  std::atomic<uint64_t> waited_calls_{0};  // calls not posted: the client's round trips
  StatusProvider status_provider_;
  const std::string* reachability_secret_ = nullptr;
  SessionLimits limits_;
  const HostNvml* host_nvml_ = nullptr;
  uint64_t max_kernel_ms_ = 0;
  // A StreamMemOp wait was served: Quiesce does not wait on the streams blindly, and the
  // session's end drops its remaining work on softgpu (session thread).
  bool stream_waits_served_ = false;
  bool scrub_allocations_ = true;
  std::atomic<bool> aborted_{false};
  // The session's thread only.
  SessionEnd end_ = SessionEnd::kNone;
  bool client_said_goodbye_ = false;
  std::string goodbye_reason_;
  // What calls on a context destroyed to stop its kernel fail with (set once; any thread).
  std::atomic<CUresult> stopped_error_{CUDA_SUCCESS};
  std::mutex abort_mu_;  // guards abort_channel_, abort_peer_channel_, live_contexts_, turns_ and
                         // stopped_
  Channel* abort_channel_ = nullptr;       // channel_ while the session runs
  Channel* abort_peer_channel_ = nullptr;  // a copy's connection to another server while in use
  std::vector<CUcontext> live_contexts_;   // the backend contexts Abort stops
  std::vector<KernelTurns*> turns_;        // the contexts' kernel turns (--fair-share)
  // Contexts a kernel turn's keeper destroyed (StopContexts) that the session's thread has not
  // marked destroyed yet (AbsorbStoppedContexts); stopped_pending_ says there are some.
  std::vector<CUcontext> stopped_contexts_;
  std::atomic<bool> stopped_pending_{false};
  // A keeper's `stop`: destroys every live context of the session to end a kernel that ran past
  // --max-kernel-ms (late) or of a session that was aborted. Any thread but the session's.
  void StopContexts(bool late);
  // The session's thread: marks the contexts StopContexts destroyed as destroyed.
  void AbsorbStoppedContexts();
  // The kernel turns of `ctx` (made on first use); null when the backend cannot gate kernels or
  // the device has no scheduler: the kernel is then waited for in its turn (WaitForKernel).
  KernelTurns* TurnsOf(ContextRecord* ctx);
  std::mutex* memory_lock_ = nullptr;
  LivenessService* liveness_ = nullptr;
  int client_timeout_ms_ = 0;
  uint64_t liveness_key_ = 0;  // random; the client announces it on the keepalive port
  // Sends Goodbye with `reason` (when the channel still works) and logs it.
  void CloseWithReason(const std::string& reason);
  std::atomic<bool> admitted_{false};
  mutable std::mutex name_mu_;  // guards client_name_ and the dropping of channel_ for Stats()
  ShareAccount* account();
  std::shared_ptr<Tenant> tenant_;  // the admitting tenant, when tokens are required
  std::string lease_id_;            // its token's registry lease ("": none); under name_mu_
  SessionHostPool* hosts_ = nullptr;
  std::unique_ptr<SessionHost> host_;  // the process serving it, once redirected
  std::function<void()> admitted_hook_;
  StdoutCapture* stdout_capture_ = nullptr;
  std::atomic<bool> hosted_{false};
  // The host's latest figures (Stats answers them); under name_mu_.
  std::optional<wire::SessionStats> hosted_stats_;
  // Hands the admitted session to a host: fills the redirect into `w`.
  Status RedirectToHost(wire::Welcome* w);
  // What a host is told of the session it serves: its tenant, quota, lease, devices and id,
  // admitted (or resumed) with `token`.
  wire::HostAssign HostAssignment(const std::string& token);
  // Serves the host until it ends (Run, for a redirected session).
  void SuperviseHost(const std::atomic<bool>& stop);
  // The host's answer to RequestMove of a hosted session: the request decided (and done, when it
  // moved).
  void HostedMoveAnswered(const wire::HostMoveResult& result);
  // RequestMove's part for a hosted session (move_mu_ held).
  bool RequestHostedMove(std::shared_ptr<MoveRequest> request, uint32_t timeout_ms);
  std::vector<int> visible_;  // server device indices the session sees, by its ordinals
  std::string client_name_;
  CUcontext current_ = nullptr;

  // The pinned bytes all contexts' staging buffers may hold (made on first use, from limits_);
  // declared before contexts_, whose records' buffers give their bytes back to it.
  std::unique_ptr<StagingBudget> staging_budget_;
  HandleTable<ContextRecord> contexts_;
  // Posted reads still on their way, oldest first (session thread). Host functions of the
  // backend's contexts write into these entries: ReleaseAll destroys every context (which ends
  // them) before the session's members go.
  std::deque<PostedRead> posted_reads_;
  std::map<int, uint64_t> primary_by_device_;
  // Client-chosen ids of primary contexts whose posted creation failed, with the failure: a later
  // call naming one gets it instead of CUDA_ERROR_INVALID_CONTEXT (as the driver answers the
  // program's next call). At most kMaxUnmadeContexts, the oldest forgotten first.
  static constexpr size_t kMaxUnmadeContexts = 64;
  std::map<uint64_t, CUresult> unmade_contexts_;
  std::deque<uint64_t> unmade_order_;
  void RememberUnmadeContext(uint64_t id, CUresult r);
  std::map<CUdeviceptr, Allocation> allocations_;  // by base address
  HandleTable<ModuleRecord> modules_;
  HandleTable<FunctionRecord> functions_;
  HandleTable<StreamRecord> streams_;
  std::vector<DrainingStream> draining_streams_;
  HandleTable<EventRecord> events_;
  HandleTable<PoolRecord> pools_;
  HandleTable<ArrayRecord> arrays_;
  HandleTable<MipmapRecord> mipmaps_;
  std::map<uint64_t, SamplerRecord> textures_;  // by CUtexObject value
  std::map<uint64_t, SamplerRecord> surfaces_;  // by CUsurfObject value
  HandleTable<LinkRecord> links_;
  HandleTable<PhysicalRecord> physical_;
  HandleTable<GraphRecord> graphs_;
  uint64_t graph_bytes_ = 0;  // what graphs_ hold, against limits_.max_graph_bytes
  IpcRegistry* ipc_ = nullptr;
  // This session's allocations that other sessions may open, by base address.
  std::map<CUdeviceptr, std::shared_ptr<ExportedMemory>> exported_memory_;
  std::map<CUdeviceptr, uint64_t> reservations_;   // reserved address ranges: base -> size
  std::map<CUdeviceptr, MappingRecord> mappings_;  // by base address
  std::map<int, uint64_t> default_pool_by_device_;
  std::unique_ptr<char[]> output_;
  size_t output_capacity_ = 0;
  std::atomic<uint64_t> live_bytes_{0};
  // Of live_bytes_, what each server device (0-63) holds: Charge/Uncharge.
  std::array<std::atomic<uint64_t>, 64> device_bytes_{};
  // Metering by operation (index: Op value; slot 0 counts operations the table does not know),
  // the time kernels waited for the GPU, and the device of the first context (-1 until there is
  // one). Written by the session thread only. There is no separate total: the calls are the sum
  // of the slots, so a snapshot taken while calls are served never counts more calls by kind than
  // calls (the registry refuses such a record).
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Op::kCount)> calls_by_op_{};
  std::atomic<double> queue_seconds_{0};
  std::atomic<int> device_{-1};
  // Bit d: the session has a live context on server device d (d < 64). Written by the session
  // thread (NoteContextDevices), read by any.
  std::atomic<uint64_t> context_devices_{0};
  void NoteContextDevices();
  // The client's pid (Hello) and when the session was admitted (Stats' uptime). Set by the
  // handshake before admitted_ becomes true; read by any thread after it has.
  uint32_t client_pid_ = 0;
  std::chrono::steady_clock::time_point admitted_at_;
  // The first failure of a posted call not yet reported to the client.
  CUresult async_error_ = CUDA_SUCCESS;
  std::string async_error_detail_;
  uint64_t async_error_ctx_ = 0;
  // Device printf output of this session's contexts, sent with the next Reply.
  std::mutex output_mu_;
  std::string device_output_;  // GUARDED_BY(output_mu_)
  // Whether device_output_ may hold something: set under output_mu_, read without it, so that a
  // reply of a session that prints nothing takes no lock for it.
  std::atomic<bool> device_output_waiting_{false};
  static void OnDeviceOutput(void* session, const char* data, size_t size);

  // The session's state (its tables, async error, metering slots) is the session thread's, held
  // under state_mu_ while it serves a message (the session thread its owner), so that lanes and
  // peer transfers (its guests) may read it between messages.
  OwnerMutex state_mu_;
  std::condition_variable state_cv_;  // executed_seq_ moved on, or a lane wait ended (state_mu_'s)
  uint64_t executed_seq_ = 0;         // the last call the session served (GUARDED_BY state_mu_)
  std::vector<LaneWait> lane_waits_;  // waits in progress on lanes (GUARDED_BY state_mu_)
  std::atomic<bool> lane_synchronized_{false};  // a lane's wait succeeded: pools may be trimmed
  LaneJoiner lane_joiner_;
  uint32_t max_lanes_ = 0;
  std::string lane_key_;  // Welcome.lane_key (empty: no lanes)
  std::mutex lanes_mu_;
  std::condition_variable lanes_cv_;
  uint32_t lanes_active_ = 0;               // GUARDED_BY lanes_mu_
  std::atomic<bool> lanes_closing_{false};  // set under lanes_mu_
  std::vector<Channel*> lane_channels_;     // GUARDED_BY lanes_mu_ (peer transfers' too)
  std::vector<PeerGrantRecord> grants_;     // GUARDED_BY lanes_mu_
  PeerJoiner peer_joiner_;
  PeerConnector peer_connector_;
  ServiceHandler service_handler_;
  // Migration. move_request_ (under move_mu_) is the request not yet acted on, move_pending_ its
  // flag for the session thread's cheap check.
  std::mutex move_mu_;
  std::shared_ptr<MoveRequest> move_request_;
  std::shared_ptr<MoveRequest> hosted_move_;  // sent to the host, not yet answered; under move_mu_
  // A restore in a host (StartHostedRestore): its answer, once given ("": restored).
  bool restore_in_host_ = false;  // set before Run
  std::mutex restore_mu_;
  std::condition_variable restore_cv_;
  std::optional<std::string> restore_answer_;  // under restore_mu_
  CheckpointRelay checkpoint_relay_;           // a hosted checkpoint's pieces, while asked
  std::atomic<bool> move_pending_{false};
  std::atomic<bool> parked_{false};
  std::atomic<int> phase_{0};  // Stats' state: 0 running, 1 moving, 2 parked
  // After a move: the request to tell when the client left, and when the session stopped.
  std::shared_ptr<MoveRequest> moved_by_;
  std::chrono::steady_clock::time_point move_started_;
  bool client_told_where_ = false;           // SendMoved answered its waited call
  const std::atomic<bool>* stop_ = nullptr;  // Run's, while it runs
  // A restore's memory ranges, in the checkpoint's order, and how far its bytes have come.
  std::vector<CheckpointRange> restore_ranges_;
  // Memory a restore mapped at its checkpoint's addresses (MapRestoredAllocations), by the
  // span's base, and the span of each allocation in one.
  std::map<CUdeviceptr, RestoredSpan> restored_spans_;
  std::map<CUdeviceptr, CUdeviceptr> restored_in_span_;
  size_t restore_range_ = 0;
  uint64_t restore_range_start_ = 0;  // the memory offset of restore_ranges_[restore_range_]
  // Connections to other servers kept for the next copy, by URL (the session thread's only).
  std::map<std::string, std::unique_ptr<Channel>> peer_channels_;
};

}  // namespace rgpu::server
