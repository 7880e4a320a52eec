#include "client/graph_conditional.h"

#include <map>

#include "client/graph_order.h"
#include "client/impl.h"
#include "client/memory_map.h"

extern "C" CUresult rgpu_impl_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n,
                                               CUstream stream);

namespace rgpu::client {
namespace {

namespace calls = rgpu::calls;

// Every live handle by its value.
struct Registry {
  std::mutex mu;
  std::map<CUgraphConditionalHandle, std::weak_ptr<ConditionalHandle>> handles;  // GUARDED_BY(mu)
};

Registry& Handles() {
  static auto* registry = new Registry;  // never destroyed: used until the process ends
  return *registry;
}

// The handle's word, read once the work before it on `stream` is done.
CUresult ReadCondition(const ConditionalHandle& h, CUstream stream, uint32_t* value) {
  if (CUresult r = CopyDtoH(value, h.dptr, sizeof *value, stream, true); r != CUDA_SUCCESS) {
    return r;
  }
  return rgpu_impl_cuStreamSynchronize(stream);
}

CUresult ReplayAll(const std::vector<GraphNode>& order, CUstream stream) {
  for (const GraphNode& n : order) {
    if (CUresult r = n.replay(stream); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

ConditionalHandle::~ConditionalHandle() {
  {
    Registry& g = Handles();
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.handles.find(dptr);
    if (it != g.handles.end() && it->second.expired()) g.handles.erase(it);
  }
  // The context may be gone (reset or destroyed): the word went with it.
  if (CheckContext(ctx) != CUDA_SUCCESS || ctx->generation != ctx_generation) return;
  Memory().Erase(dptr);
  Server().Post<calls::MemFree>(ctx->remote, {.dptr = dptr});
}

ConditionalBody::~ConditionalBody() {
  for (CUgraph_st* g : bodies) {
    ClientState::Get().Unregister(g);
    for (const GraphNode& n : g->nodes) ClientState::Get().Unregister(&n);
    delete g;
  }
}

CUresult CreateConditionalHandle(CUgraph_st* graph, CUctx_st* ctx, unsigned default_value,
                                 unsigned flags, CUgraphConditionalHandle* out) {
  if (ClientState::Get().backend(ctx->device) != "softgpu") {
    RGPU_LOG_WARN(
        "cuGraphConditionalHandleCreate: conditional graph nodes run on the software GPU only "
        "(NVIDIA's driver sets its own handles from kernels)");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (flags & ~static_cast<unsigned>(CU_GRAPH_COND_ASSIGN_DEFAULT)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  calls::MemAlloc::Results got;
  CUresult r = Server().Call<calls::MemAlloc>(ctx->remote, {.bytesize = sizeof(uint32_t)}, &got);
  if (r != CUDA_SUCCESS) return r;
  auto h = std::make_shared<ConditionalHandle>();
  h->dptr = got.dptr;
  h->ctx = ctx;
  h->default_value = default_value;
  h->assign_default = (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0;
  MemoryRange range;
  range.base = got.dptr;
  range.size = sizeof(uint32_t);
  range.ctx = ctx;
  range.freeable = false;  // the graph's, not the program's
  Memory().Insert(range);
  // A fresh word holds the default value, or 0 without one (as the driver initializes it).
  const uint32_t initial = h->assign_default ? default_value : 0;
  h->ctx_generation = ctx->generation;
  r = CopyHtoD(got.dptr, &initial, sizeof initial, nullptr, false);
  if (r != CUDA_SUCCESS) return r;  // the word goes with h
  {
    Registry& g = Handles();
    std::lock_guard<std::mutex> lock(g.mu);
    g.handles[got.dptr] = h;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  graph->conditional_handles.push_back(h);
  *out = got.dptr;
  return CUDA_SUCCESS;
}

CUresult ConditionalNode(CUDA_CONDITIONAL_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto body = std::make_shared<ConditionalBody>();
  body->type = params->type;
  switch (params->type) {
    case CU_GRAPH_COND_TYPE_IF:
      if (params->size != 1 && params->size != 2) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_GRAPH_COND_TYPE_WHILE:
      if (params->size != 1) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_GRAPH_COND_TYPE_SWITCH:
      if (params->size == 0) return CUDA_ERROR_INVALID_VALUE;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  {
    Registry& g = Handles();
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.handles.find(params->handle);
    if (it == g.handles.end() || (body->handle = it->second.lock()) == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (unsigned i = 0; i < params->size; ++i) {
    auto* g = new CUgraph_st();
    g->body = true;
    ClientState::Get().Register(g);
    body->bodies.push_back(g);
  }
  // The driver's array of the bodies, valid while the node lives.
  node->conditional_graphs.assign(body->bodies.begin(), body->bodies.end());
  params->phGraph_out = node->conditional_graphs.data();
  node->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  node->conditional = std::move(body);
  node->replay = [](CUstream) {
    return CUDA_ERROR_INVALID_VALUE;  // replayed only once instantiated (OrderGraph)
  };
  return CUDA_SUCCESS;
}

CUresult InstantiateConditional(const GraphNode& node,
                                std::vector<std::shared_ptr<ConditionalHandle>>* handles,
                                std::function<CUresult(CUstream)>* replay) {
  const std::shared_ptr<ConditionalBody>& c = node.conditional;
  std::vector<std::vector<GraphNode>> orders(c->bodies.size());
  for (size_t i = 0; i < c->bodies.size(); ++i) {
    if (CUresult r = OrderGraph(*c->bodies[i], &orders[i], handles); r != CUDA_SUCCESS) return r;
  }
  handles->push_back(c->handle);
  *replay = [type = c->type, handle = c->handle, orders = std::move(orders)](CUstream s) {
    uint32_t value = 0;
    if (CUresult r = ReadCondition(*handle, s, &value); r != CUDA_SUCCESS) return r;
    switch (type) {
      case CU_GRAPH_COND_TYPE_IF:
        if (value != 0) return ReplayAll(orders[0], s);
        return orders.size() == 2 ? ReplayAll(orders[1], s) : CUDA_SUCCESS;
      case CU_GRAPH_COND_TYPE_WHILE:
        while (value != 0) {
          if (CUresult r = ReplayAll(orders[0], s); r != CUDA_SUCCESS) return r;
          if (CUresult r = ReadCondition(*handle, s, &value); r != CUDA_SUCCESS) return r;
        }
        return CUDA_SUCCESS;
      case CU_GRAPH_COND_TYPE_SWITCH:
        return value < orders.size() ? ReplayAll(orders[value], s) : CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  };
  return CUDA_SUCCESS;
}

CUresult AssignDefaults(const std::vector<std::shared_ptr<ConditionalHandle>>& handles,
                        CUstream stream) {
  for (const auto& h : handles) {
    if (!h->assign_default) continue;
    if (CUresult r = rgpu_impl_cuMemsetD32Async(h->dptr, h->default_value, 1, stream);
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client
