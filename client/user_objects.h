// User objects (cuUserObjectCreate; client/api_user_objects.cc): a program's resource with a
// destructor, which runs once the references the program and its graphs own are all released,
// on a thread of rgpu's own (CUDA's shared internal thread: destructors may not call CUDA). A
// graph owns references (cuGraphRetainUserObject); its clones and the graphs of its child graph
// nodes own copies of them, and an executable graph takes copies when it is instantiated. What an
// executable graph launched must keep (its references, the graphs of its nodes) is released only
// after the work of the contexts it was launched in has finished (AfterWork), as CUDA releases
// such references once the launches have run.
#pragma once

#include <cuda.h>

#include <atomic>
#include <functional>
#include <map>
#include <vector>

struct CUctx_st;
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
  void Add(CUuserObject_st* object, unsigned count);
  // Forgets `count` of the owner's references to `object` (the caller releases them); false,
  // with nothing changed, when it holds fewer.
  bool Remove(CUuserObject_st* object, unsigned count);
  // Adds `other`'s references, retaining each.
  void CopyFrom(const UserObjectRefs& other);
  void Swap(UserObjectRefs& other) { refs_.swap(other.refs_); }
  bool empty() const { return refs_.empty(); }

 private:
  std::map<CUuserObject_st*, unsigned> refs_;
};

// Adds `count` references to a live user object.
void RetainUserObject(CUuserObject_st* object, unsigned count);
// Releases `count` references; the last one runs the destructor on the user objects' thread and
// frees the handle. CUDA_ERROR_INVALID_VALUE, with nothing released, when fewer are held.
CUresult ReleaseUserObject(CUuserObject_st* object, unsigned count);

// Whether `graph` (with the graphs of its child graph and conditional nodes) or `exec` (with
// those of its nodes) holds references to user objects. objects_mutex held, or the owner private.
bool HoldsUserObjects(const CUgraph_st& graph);
bool HoldsUserObjects(const CUgraphExec_st& exec);

// Runs `done` on the user objects' thread once the work of `contexts` (those still live) has
// finished; with none, as soon as the thread comes to it. The thread waits with a context
// synchronize: where the program's waits cannot go to lanes (one thread so far, lanes off, reads
// posted), that wait holds the connection, and the program's next call waits for the work too.
void AfterWork(std::vector<CUctx_st*> contexts, std::function<void()> done);

}  // namespace rgpu::client
