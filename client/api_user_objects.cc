// User objects: cuUserObjectCreate/Retain/Release and a graph's references
// (cuGraphRetainUserObject, cuGraphReleaseUserObject); client/user_objects.h.
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "client/graph_child.h"
#include "client/impl.h"
#include "client/user_objects.h"

using rgpu::client::ClientState;
using rgpu::client::ObjectKind;

extern "C" CUresult rgpu_impl_cuStreamSynchronize(CUstream s);

namespace rgpu::client {
namespace {

// The thread destructors run on, started at the first; never destroyed, as the host worker (it
// may still run when static objects go at exit).
struct Jobs {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;  // GUARDED_BY(mu)
  bool started = false;                     // GUARDED_BY(mu)
};
Jobs& J() {
  static Jobs* jobs = new Jobs();
  return *jobs;
}

void Run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(J().mu);
      J().cv.wait(lock, [] { return !J().queue.empty(); });
      job = std::move(J().queue.front());
      J().queue.pop_front();
    }
    job();
  }
}

void Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(J().mu);
    J().queue.push_back(std::move(job));
    if (!J().started) {
      std::thread(Run).detach();
      J().started = true;
    }
  }
  J().cv.notify_one();
}

bool ValidCount(unsigned count) { return count > 0 && count <= static_cast<unsigned>(INT_MAX); }

bool LiveUserObject(CUuserObject object) {
  return ClientState::Get().IsLive(object) && object->kind == ObjectKind::kUserObject;
}

bool LiveGraph(CUgraph graph) {
  return ClientState::Get().IsLive(graph) && graph->kind == ObjectKind::kGraph;
}

}  // namespace

UserObjectRefs::~UserObjectRefs() {
  for (auto& [object, count] : refs_) ReleaseUserObject(object, count);
}

void UserObjectRefs::Add(CUuserObject_st* object, uint64_t count) { refs_[object] += count; }

bool UserObjectRefs::Remove(CUuserObject_st* object, uint64_t count) {
  auto it = refs_.find(object);
  if (it == refs_.end() || it->second < count) return false;
  if ((it->second -= count) == 0) refs_.erase(it);
  return true;
}

void UserObjectRefs::CopyFrom(const UserObjectRefs& other) {
  for (const auto& [object, count] : other.refs_) {
    RetainUserObject(object, count);
    refs_[object] += count;
  }
}

void RetainUserObject(CUuserObject_st* object, uint64_t count) {
  object->refs.fetch_add(count, std::memory_order_relaxed);
}

CUresult ReleaseUserObject(CUuserObject_st* object, uint64_t count) {
  uint64_t held = object->refs.load(std::memory_order_relaxed);
  do {
    if (held < count) return CUDA_ERROR_INVALID_VALUE;
  } while (!object->refs.compare_exchange_weak(held, held - count, std::memory_order_acq_rel));
  if (held != count) return CUDA_SUCCESS;
  ClientState::Get().Unregister(object);
  Post([object] {
    object->destroy(object->ptr);
    delete object;
  });
  return CUDA_SUCCESS;
}

namespace {
bool NodesHold(const CUgraphNode_st& node) {
  if (node.child != nullptr && node.child->graph != nullptr &&
      HoldsUserObjects(*node.child->graph)) {
    return true;
  }
  for (const CUgraph_st* body : node.conditional_graphs) {
    if (body != nullptr && HoldsUserObjects(*body)) return true;
  }
  return false;
}
}  // namespace

bool HoldsUserObjects(const CUgraph_st& graph) {
  if (!graph.user_objects.empty()) return true;
  for (const CUgraphNode_st& node : graph.nodes) {
    if (!node.destroyed && NodesHold(node)) return true;
  }
  return false;
}

bool HoldsUserObjects(const CUgraphExec_st& exec) {
  if (!exec.user_objects.empty()) return true;
  for (const CUgraphNode_st& node : exec.nodes) {
    if (NodesHold(node)) return true;
  }
  return false;
}

void CollectUserObjects(const CUgraph_st& graph, UserObjectRefs* into) {
  into->CopyFrom(graph.user_objects);
  for (const CUgraphNode_st& node : graph.nodes) {
    if (node.destroyed) continue;
    if (node.child != nullptr && node.child->graph != nullptr) {
      CollectUserObjects(*node.child->graph, into);
    }
    for (const CUgraph_st* body : node.conditional_graphs) {
      if (body != nullptr) CollectUserObjects(*body, into);
    }
  }
}

CUresult SettleLaunches(CUgraphExec_st* exec) {
  std::vector<CUstream> streams;
  {
    std::lock_guard<std::mutex> lock(exec->runs_mu);
    streams = exec->launched_on;
  }
  if (streams.empty()) return CUDA_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (!HoldsUserObjects(*exec)) return CUDA_SUCCESS;
  }
  CUresult first = CUDA_SUCCESS;
  for (CUstream s : streams) {
    const CUresult r = rgpu_impl_cuStreamSynchronize(s);
    // A stream destroyed since (or its context) has no work left to wait for.
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT) continue;
    if (first == CUDA_SUCCESS) first = r;
  }
  std::lock_guard<std::mutex> lock(exec->runs_mu);
  exec->launched_on.clear();
  return first;
}

}  // namespace rgpu::client

RGPU_IMPL(cuUserObjectCreate)
(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned int initial, unsigned int flags) {
  if (out == nullptr || destroy == nullptr || !rgpu::client::ValidCount(initial) ||
      flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  auto* object = new CUuserObject_st();
  object->ptr = ptr;
  object->destroy = destroy;
  object->refs.store(initial);
  ClientState::Get().Register(object);
  *out = object;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuUserObjectRetain)(CUuserObject object, unsigned int count) {
  if (!rgpu::client::ValidCount(count) || !rgpu::client::LiveUserObject(object)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  rgpu::client::RetainUserObject(object, count);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuUserObjectRelease)(CUuserObject object, unsigned int count) {
  if (!rgpu::client::ValidCount(count) || !rgpu::client::LiveUserObject(object)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return rgpu::client::ReleaseUserObject(object, count);
}

RGPU_IMPL(cuGraphRetainUserObject)
(CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags) {
  if (!rgpu::client::ValidCount(count) || (flags != 0 && flags != CU_GRAPH_USER_OBJECT_MOVE) ||
      !rgpu::client::LiveGraph(graph) || !rgpu::client::LiveUserObject(object)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  // Moved references are the caller's already; others are new.
  if (flags != CU_GRAPH_USER_OBJECT_MOVE) rgpu::client::RetainUserObject(object, count);
  graph->user_objects.Add(object, count);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphReleaseUserObject)(CUgraph graph, CUuserObject object, unsigned int count) {
  if (!rgpu::client::ValidCount(count) || !rgpu::client::LiveGraph(graph) ||
      !rgpu::client::LiveUserObject(object)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (!graph->user_objects.Remove(object, count)) return CUDA_ERROR_INVALID_VALUE;
  }
  return rgpu::client::ReleaseUserObject(object, count);
}
