// User objects (cuUserObjectCreate; client/api_user_objects.cc): a program's resource with a
// destructor, which runs once the references the program and its graphs own are all released,
// on a thread of rgpu's own (CUDA's shared internal thread: destructors may not call CUDA). A
// graph owns references (cuGraphRetainUserObject); its clones and the graphs of its child graph
// nodes own copies of them, and an executable graph takes copies of all of them when it is
// instantiated or updated. What an executable graph launched holds (its references, its nodes'
// graphs) is let go (destroyed, updated) only after the work of the streams it was launched on:
// cuGraphExecDestroy and the updates wait for it (SettleLaunches), where CUDA would release the
// references once the launches have run and return at once.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>

struct CUgraph_st;
struct CUgraphExec_st;
struct CUuserObject_st;

namespace rgpu::client {

// References to user objects that one graph or executable graph owns, released when it goes.
// Not copyable (a copy would release them twice): CopyFrom retains what it copies. Guarded by
// objects_mutex() while the owner is shared.
class UserObjectRefs {
 public:
  UserObjectRefs() = default;
  UserObjectRefs(const UserObjectRefs&) = delete;
  UserObjectRefs& operator=(const UserObjectRefs&) = delete;
  ~UserObjectRefs();  // releases every reference

  // Records `count` references the owner now holds (retained, or moved from the caller).
  void Add(CUuserObject_st* object, uint64_t count);
  // Forgets `count` of the owner's references to `object` (the caller releases them); false,
  // with nothing changed, when it holds fewer.
  bool Remove(CUuserObject_st* object, uint64_t count);
  // Adds `other`'s references, retaining each.
  void CopyFrom(const UserObjectRefs& other);
  void Swap(UserObjectRefs& other) { refs_.swap(other.refs_); }
  bool empty() const { return refs_.empty(); }

 private:
  std::map<CUuserObject_st*, uint64_t> refs_;  // counts summed over retains: 64 bits
};

// Adds `count` references to a live user object.
void RetainUserObject(CUuserObject_st* object, uint64_t count);
// Releases `count` references; the last one runs the destructor on the user objects' thread and
// frees the handle. CUDA_ERROR_INVALID_VALUE, with nothing released, when fewer are held.
CUresult ReleaseUserObject(CUuserObject_st* object, uint64_t count);

// Whether `graph` (with the graphs of its child graph and conditional nodes) or `exec` (with
// those of its nodes) holds references to user objects. objects_mutex held.
bool HoldsUserObjects(const CUgraph_st& graph);
bool HoldsUserObjects(const CUgraphExec_st& exec);

// Adds to `into` (retaining them) the references of `graph` and of every graph its child graph
// and conditional nodes hold, recursively: what an executable graph of it keeps. objects_mutex
// held.
void CollectUserObjects(const CUgraph_st& graph, UserObjectRefs* into);

// Before `exec` lets go of what it holds (destroyed, or updated): when it holds user object
// references and was launched since it last settled, waits on the calling thread for the work of
// its launch streams (those destroyed since are skipped) and forgets them. The first error that
// work left, as a synchronize returns it. Takes objects_mutex and exec->runs_mu: hold neither.
CUresult SettleLaunches(CUgraphExec_st* exec);

}  // namespace rgpu::client
