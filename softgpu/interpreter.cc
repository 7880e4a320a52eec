#include "softgpu/interpreter.h"

#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <deque>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <mutex>
#include <new>
#include <vector>

#include "softgpu/thread_pool.h"

namespace softgpu {
namespace {

constexpr uint32_t kMaxCallDepth = 1024;
// Backward branches between checks for cancellation and the deadline.
constexpr uint32_t kWatchInterval = 4096;
// Backward branches a warp runs before the block's other warps get a turn (so that a warp
// spinning on memory another warp will write cannot starve it).
constexpr uint32_t kWarpQuantum = 256;
// Cooperative launches: warp turns a block runs before other blocks get the host thread.
constexpr uint32_t kBlockQuantum = 16;

int64_t SteadyClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Lanes of a warp that share a program counter.
struct Group {
  uint32_t pc = 0;
  uint32_t mask = 0;
  bool at_barrier = false;
  const Insn* bar_red = nullptr;  // bar.red whose result is due after the barrier
};

struct GroupSet {
  Group g[kWarpSize];
  uint32_t n = 0;

  void Remove(uint32_t i) { g[i] = g[--n]; }
  // Merges group i into another group with the same pc and barrier state, if any.
  void MergeFrom(uint32_t i) {
    for (uint32_t j = 0; j < n; ++j) {
      if (j != i && g[j].pc == g[i].pc && g[j].at_barrier == g[i].at_barrier &&
          g[j].bar_red == g[i].bar_red) {
        g[j].mask |= g[i].mask;
        Remove(i);
        return;
      }
    }
  }
  void MergeAll() {
    for (uint32_t j = 0; j < n; ++j) MergeFrom(j);
  }
  void Add(uint32_t pc, uint32_t mask) {
    for (uint32_t j = 0; j < n; ++j) {
      if (g[j].pc == pc && !g[j].at_barrier && g[j].bar_red == nullptr) {
        g[j].mask |= mask;
        return;
      }
    }
    g[n++] = Group{pc, mask, false, nullptr};
  }
  // Drops lanes (they exited) from every group.
  void Kill(uint32_t lanes) {
    for (uint32_t j = 0; j < n;) {
      g[j].mask &= ~lanes;
      if (g[j].mask == 0)
        Remove(j);
      else
        ++j;
    }
  }
};

// One function activation of a warp: its lane groups, registers and parameter frame. Calls push
// activations on the warp's stack instead of recursing on the host stack, so a warp can wait at
// a barrier inside a called function and resume there.
struct Activation {
  const Function* fn = nullptr;
  GroupSet groups;
  Warp w;
  uint32_t exited = 0;  // lanes that executed exit in this activation or below it
  // Registers of activations above the kernel's own (which uses the block's arrays).
  std::vector<uint64_t> regs;
  std::vector<uint32_t> preds;
  std::vector<uint8_t> frame;
  // The call in progress from this activation (while the activation above runs).
  const Insn* call = nullptr;
  uint32_t call_group = 0;    // index of the calling group
  uint32_t call_pending = 0;  // lanes still to be called (indirect calls with several targets)
  uint32_t call_lanes = 0;    // lanes in the activation above
  uint32_t call_exited = 0;   // lanes that exited during this call
  std::vector<CallSite::Copy> call_results;
};

struct WarpSlot {
  std::vector<Activation> stack;  // [0] is the kernel; grows, never shrinks (reused)
  uint32_t depth = 0;             // index of the running activation
  bool done = false;
};

// kSleep: a yield of a warp that sleeps (nanosleep), which leaves the processor to others.
enum class RunResult { kFinished, kBarrier, kFault, kCalled, kReturned, kYield, kSleep };

// A handler of `in` faulted the warp: records the instruction's PTX line with the block's fault.
RunResult FaultedAt(Warp& w, const Insn& in) {
  Fault* f = w.block->fault;
  if (f != nullptr && f->line == 0) f->line = in.line;
  return RunResult::kFault;
}

// What Resume left the block as.
enum class BlockState { kFinished, kFault, kYielded };

// Executor of blocks; buffers are reused across blocks and launches. Non-cooperative launches
// use one per host thread; cooperative launches one per block (a block can be resumed on any
// thread).
class BlockRunner {
 public:
  Fault RunBlock(const LaunchParams& launch, uint64_t launch_id, const uint32_t ctaid[3]);
  // Sets up block `ctaid` of the launch (fresh registers and memory), as block `rank` of
  // `cluster`, or in a cluster of its own when `cluster` is null.
  void Start(const LaunchParams& launch, uint64_t launch_id, const uint32_t ctaid[3],
             Cluster* cluster = nullptr, uint32_t rank = 0);
  // Runs the started block until it finishes, faults (fault() says why) or, in a cooperative
  // or clustered launch, has used its turn (kYielded: call again to continue).
  BlockState Resume();
  // The block's shared state (for the other blocks of its cluster).
  Block* block() { return &block_; }
  const Fault& fault() const { return fault_; }
  // Lane-instructions executed since Start.
  uint64_t lane_instructions() const { return block_.lane_instructions; }
  // Drops the allocations and texture objects the block state keeps pinned (a thread's runner
  // lives on after its launch; what it pinned must not outlive the launch, or freed memory would
  // stay charged to the device).
  void ReleasePins() {
    for (auto& a : block_.cached) a.reset();
    for (BoundTexture& t : block_.textures) t = BoundTexture();
  }

 private:
  // Runs warp `s` until it finishes, waits at a barrier, faults or yields.
  RunResult RunWarp(WarpSlot& s);
  // Runs the top activation until it finishes, waits at a barrier, faults, calls or yields.
  RunResult RunActivation(WarpSlot& s);
  // Starts the next callee of the call pending in activation s.depth (pushes an activation).
  bool PushCallee(WarpSlot& s);
  // Finishes the callee on top of the stack: results back to the caller, pops it.
  bool PopCallee(WarpSlot& s);
  void Printf(Warp& w, const CallSite& site, uint32_t mask);
  // malloc, free and __assertfail; false after a fault.
  bool Builtin(Warp& w, const CallSite& site, uint32_t mask);
  void Prepare(const LaunchParams& launch, uint64_t launch_id);
  // Lanes of warp `w` exited: they leave their cluster's barrier.
  void ClusterExit(const Warp& w, uint32_t lanes);
  // Called now and then from loops: false (after recording a fault) when the launch must stop
  // because its context is going away or it ran past its deadline.
  bool Watch(Warp& w);

  const LaunchParams* launch_ = nullptr;
  uint64_t launch_id_ = 0;
  Block block_;
  Fault fault_;
  std::vector<uint64_t> regs_;
  std::vector<uint32_t> preds_;
  std::vector<uint8_t> frames_;
  std::vector<uint8_t> shared_;
  std::vector<uint8_t> local_;
  std::vector<uint32_t> cluster_arrivals_;  // per thread (Block::cluster_arrivals)
  Cluster own_cluster_;                     // a launch without clusters: the block's own
  std::vector<WarpSlot> warps_;
  uint32_t cursor_ = 0;    // the warp a pass starts at (the one after the last to yield)
  uint32_t sleepers_ = 0;  // warps that yielded asleep one after another
  int64_t sleep_ns_ = 0;   // the time the last warp to sleep asked for (0: unknown)
  int64_t nap_ns_ = 0;     // the shortest of the sleepers' times
  std::string printf_out_;
  std::vector<CallSite::Copy> call_args_;  // scratch for PushCallee
};

void BlockRunner::Prepare(const LaunchParams& launch, uint64_t launch_id) {
  const Function& fn = launch.program->functions[launch.function];
  const uint32_t threads = launch.block[0] * launch.block[1] * launch.block[2];
  const uint32_t nwarps = (threads + kWarpSize - 1) / kWarpSize;
  launch_ = &launch;
  if (launch_id_ == launch_id) return;
  launch_id_ = launch_id;
  // Fresh, zeroed state for every launch: nothing leaks from one launch (or tenant) to the next.
  regs_.assign(static_cast<size_t>(nwarps) * fn.num_regs * kWarpSize, 0);
  preds_.assign(static_cast<size_t>(nwarps) * std::max<uint32_t>(fn.num_preds, 1), 0);
  frames_.assign(static_cast<size_t>(nwarps) * fn.frame_bytes * kWarpSize, 0);
  shared_.assign(fn.dynamic_shared_offset + launch.dynamic_shared + 16, 0);
  const uint32_t local_per_thread = (fn.local_bytes + launch.stack_bytes + 15) / 16 * 16;
  local_.assign(static_cast<size_t>(threads) * local_per_thread, 0);
  warps_.resize(nwarps);
  for (WarpSlot& s : warps_) {
    if (s.stack.empty()) s.stack.resize(1);
    for (Activation& a : s.stack) {  // callee registers from another launch must not leak
      std::fill(a.regs.begin(), a.regs.end(), 0);
      std::fill(a.frame.begin(), a.frame.end(), 0);
    }
  }
  block_ = Block();
  block_.program = launch.program;
  block_.kernel = &fn;
  block_.consts = launch.consts;
  block_.memory = launch.memory;
  block_.owner = launch.owner;
  block_.shared = shared_.data();
  // Dynamic shared memory starts at the decoder's extern .shared base (the static variables' end,
  // aligned): the block's shared memory runs to its end.
  block_.shared_size = fn.dynamic_shared_offset + launch.dynamic_shared;
  block_.dynamic_shared_size = launch.dynamic_shared;
  block_.params = launch.params;
  block_.param_size = launch.param_size;
  for (int i = 0; i < 3; ++i) {
    block_.nctaid[i] = launch.grid[i];
    block_.ntid[i] = launch.block[i];
  }
  block_.num_threads = threads;
  block_.num_warps = nwarps;
  block_.sm_count = launch.sm_count;
  block_.local = local_.data();
  block_.local_per_thread = local_per_thread;
  block_.printf_sink = launch.printf_sink;
  block_.heap = launch.heap;
  block_.watch_countdown = kWatchInterval;
  block_.cooperative = launch.cooperative;
  block_.resident =
      launch.cooperative || launch.cluster[0] * launch.cluster[1] * launch.cluster[2] > 1;
  block_.grid_workspace = launch.grid_workspace;
  cluster_arrivals_.resize(threads);
}

Fault BlockRunner::RunBlock(const LaunchParams& launch, uint64_t launch_id,
                            const uint32_t ctaid[3]) {
  Start(launch, launch_id, ctaid);
  Resume();
  return fault_;
}

void BlockRunner::Start(const LaunchParams& launch, uint64_t launch_id, const uint32_t ctaid[3],
                        Cluster* cluster, uint32_t rank) {
  Prepare(launch, launch_id);
  const Function& fn = launch.program->functions[launch.function];
  fault_ = Fault();
  std::fill(cluster_arrivals_.begin(), cluster_arrivals_.end(), 0);
  block_.cluster_arrivals = cluster_arrivals_.data();
  if (cluster == nullptr) {
    own_cluster_ = Cluster();
    own_cluster_.explicit_launch = launch.explicit_cluster;
    own_cluster_.blocks[0] = &block_;
    own_cluster_.expected = block_.num_threads;
    cluster = &own_cluster_;
    rank = 0;
  }
  block_.cluster = cluster;
  block_.cluster_rank = rank;
  cursor_ = 0;
  sleepers_ = 0;
  block_.block_countdown = kBlockQuantum;
  block_.fault = &fault_;
  for (int i = 0; i < 3; ++i) block_.ctaid[i] = ctaid[i];
  block_.bar_red_count = 0;
  block_.bar_red_and = true;
  block_.bar_red_or = false;
  block_.lane_instructions = 0;
  const uint32_t nwarps = block_.num_warps;
  const uint32_t npreds = std::max<uint32_t>(fn.num_preds, 1);
  for (uint32_t i = 0; i < nwarps; ++i) {
    WarpSlot& s = warps_[i];
    s.done = false;
    s.depth = 0;
    Activation& a = s.stack[0];
    a.fn = &fn;
    a.groups.n = 0;
    a.exited = 0;
    a.call = nullptr;
    Warp& w = a.w;
    w = Warp();
    w.regs = regs_.data() + static_cast<size_t>(i) * fn.num_regs * kWarpSize;
    w.preds = preds_.data() + static_cast<size_t>(i) * npreds;
    w.consts = launch.consts;
    w.frame = frames_.data() + static_cast<size_t>(i) * fn.frame_bytes * kWarpSize;
    w.frame_stride = fn.frame_bytes;
    w.local_base = 0;
    w.block = &block_;
    w.index = i;
    const uint32_t remaining = block_.num_threads - i * kWarpSize;
    w.live = remaining >= kWarpSize ? kFullMask : ((1u << remaining) - 1);
    a.groups.Add(0, w.live);
  }
}

BlockState BlockRunner::Resume() {
  const uint32_t nwarps = block_.num_warps;
  auto flush_printf = [&] {
    if (!printf_out_.empty() && block_.printf_sink != nullptr) {
      block_.printf_sink->Write(std::move(printf_out_));
    }
    printf_out_.clear();
  };
  for (;;) {
    // One pass gives every unfinished warp a turn, starting after the last one to yield. Only a
    // pass in which no warp yielded (all are done or wait at a barrier) releases the barrier.
    bool waiting = false;
    bool yielded = false;
    for (uint32_t k = 0; k < nwarps && !yielded; ++k) {
      const uint32_t i = cursor_ + k < nwarps ? cursor_ + k : cursor_ + k - nwarps;
      WarpSlot& s = warps_[i];
      if (s.done) continue;
      const RunResult r = RunWarp(s);
      if (r == RunResult::kFault) {
        flush_printf();
        return BlockState::kFault;
      }
      if (r == RunResult::kFinished) {
        s.done = true;
      } else if (r == RunResult::kYield || r == RunResult::kSleep) {
        yielded = true;
        cursor_ = i + 1 < nwarps ? i + 1 : 0;
        // Every live warp asleep in turn: the block sleeps, as an SM's sleeping warps leave it
        // to others (this worker's processor, to the host's other threads). Not a resident block
        // (cooperative, clustered): its turn goes to its grid's other blocks instead.
        // It sleeps the shortest time its warps asked for (at least 20 us when unknown).
        if (r == RunResult::kSleep) {
          nap_ns_ = sleepers_ == 0 ? sleep_ns_ : std::min(nap_ns_, sleep_ns_);
          ++sleepers_;
        } else {
          sleepers_ = 0;
        }
        uint32_t live = 0;
        for (const WarpSlot& w : warps_) live += !w.done;
        if (sleepers_ >= live && !block_.resident) {
          sleepers_ = 0;
          std::this_thread::sleep_for(std::chrono::nanoseconds(nap_ns_ > 0 ? nap_ns_ : 20000));
        }
      } else {
        waiting = true;
      }
    }
    if (yielded) {
      if (block_.resident && --block_.block_countdown == 0) {
        block_.block_countdown = kBlockQuantum;
        flush_printf();
        return BlockState::kYielded;
      }
      continue;
    }
    if (!waiting) break;
    // Every live warp reached a barrier: deliver bar.red results and release.
    for (uint32_t i = 0; i < nwarps; ++i) {
      WarpSlot& s = warps_[i];
      if (s.done) continue;
      for (uint32_t d = 0; d <= s.depth; ++d) {
        Activation& a = s.stack[d];
        for (uint32_t j = 0; j < a.groups.n; ++j) {
          Group& g = a.groups.g[j];
          if (g.bar_red != nullptr) {
            const Insn& in = *g.bar_red;
            if (in.aux == 0) {
              uint64_t* dst = a.w.R(in.a[0]);
              ForLanes(g.mask, [&](uint32_t l) { dst[l] = block_.bar_red_count; });
            } else {
              const bool r = in.aux == 1 ? block_.bar_red_and : block_.bar_red_or;
              uint32_t& p = a.w.preds[in.a[0]];
              p = (p & ~g.mask) | (r ? g.mask : 0);
            }
            g.bar_red = nullptr;
          }
          g.at_barrier = false;
        }
        // Groups released at the same pc can merge again (not below a call in progress,
        // whose calling group index must stay put).
        if (a.call == nullptr) a.groups.MergeAll();
      }
    }
    block_.bar_red_count = 0;
    block_.bar_red_and = true;
    block_.bar_red_or = false;
  }
  flush_printf();
  return BlockState::kFinished;
}

RunResult BlockRunner::RunWarp(WarpSlot& s) {
  block_.yield_countdown = kWarpQuantum;
  for (;;) {
    switch (RunActivation(s)) {
      case RunResult::kFault:
        return RunResult::kFault;
      case RunResult::kBarrier:
        return RunResult::kBarrier;
      case RunResult::kYield:
        return RunResult::kYield;
      case RunResult::kSleep:
        return RunResult::kSleep;
      case RunResult::kCalled:
        if (!PushCallee(s)) return RunResult::kFault;
        break;
      case RunResult::kFinished:
        if (s.depth == 0) return RunResult::kFinished;
        if (!PopCallee(s)) return RunResult::kFault;
        break;
      case RunResult::kReturned:
        break;
    }
  }
}

RunResult BlockRunner::RunActivation(WarpSlot& s) {
  Activation& act = s.stack[s.depth];
  Warp& w = act.w;
  GroupSet& gs = act.groups;
  const Function& fn = *act.fn;
  const Insn* const insns = fn.insns.data();
  for (;;) {
    // Pick the runnable group with the lowest pc.
    uint32_t gi = kNoOperand;
    for (uint32_t j = 0; j < gs.n; ++j) {
      if (gs.g[j].at_barrier) continue;
      if (gi == kNoOperand || gs.g[j].pc < gs.g[gi].pc) gi = j;
    }
    if (gi == kNoOperand) return gs.n == 0 ? RunResult::kFinished : RunResult::kBarrier;
    Group& g = gs.g[gi];
    const uint32_t mask = g.mask;
    w.active = mask;
    // Straight-line fast path: run plain instructions until control flow, or until the pc of
    // another waiting group, where the two must merge (that is where reconvergence happens).
    uint32_t limit = kNoOperand;
    for (uint32_t j = 0; j < gs.n; ++j) {
      if (j != gi && !gs.g[j].at_barrier && gs.g[j].pc < limit) limit = gs.g[j].pc;
    }
    uint32_t pc = g.pc;
    const uint32_t run_start = pc;
    for (;;) {
      if (pc == limit) break;
      const Insn& in = insns[pc];
      if (in.control != Control::kNone) break;
      uint32_t em = mask;
      if (in.guard >= 0) em &= in.guard_negated ? ~w.preds[in.guard] : w.preds[in.guard];
      if (em != 0) {
        in.exec(w, in, em);
        if (w.faulted) return FaultedAt(w, in);
      }
      ++pc;
    }
    // Statistics: the straight-line run, plus the control instruction that may end it.
    block_.lane_instructions +=
        static_cast<uint64_t>(pc - run_start + (pc == limit ? 0 : 1)) * __builtin_popcount(mask);
    g.pc = pc;
    if (pc == limit) {
      gs.MergeFrom(gi);
      continue;
    }
    const Insn& in = insns[pc];
    uint32_t em = mask;
    if (in.guard >= 0) em &= in.guard_negated ? ~w.preds[in.guard] : w.preds[in.guard];
    switch (in.control) {
      case Control::kNone:
        break;
      case Control::kBranch: {
        // Loops always branch backwards: that is where a runaway kernel can be stopped, and
        // where a warp that has looped a while lets the others run.
        const bool backward = in.target <= pc && em != 0;
        if (backward && --block_.watch_countdown == 0 && !Watch(w)) {
          return RunResult::kFault;
        }
        if (em == mask) {
          g.pc = in.target;
          gs.MergeFrom(gi);
        } else if (em == 0) {
          ++g.pc;
          gs.MergeFrom(gi);
        } else {
          g.mask = mask & ~em;
          ++g.pc;
          gs.MergeFrom(gi);
          gs.Add(in.target, em);
        }
        if (backward && --block_.yield_countdown == 0) return RunResult::kYield;
        break;
      }
      case Control::kIndirect: {
        // Each lane to its own target; lanes that share one go on together, the rest split off
        // (as a divergent bra), the guard's other lanes fall through.
        const std::vector<uint32_t>& table = fn.branch_tables[in.aux];
        const uint64_t* index = w.R(in.a[0]);
        uint32_t targets[kWarpSize];
        bool backward = false;
        for (uint32_t lanes = em; lanes != 0; lanes &= lanes - 1) {
          const uint32_t lane = static_cast<uint32_t>(__builtin_ctz(lanes));
          const uint32_t i = static_cast<uint32_t>(index[lane]);
          if (i >= table.size()) {
            w.SetFault(FaultKind::kIllegalAddress, "brx.idx index " + std::to_string(i) +
                                                       " past its " + std::to_string(table.size()) +
                                                       " targets");
            return FaultedAt(w, in);
          }
          targets[lane] = table[i];
          backward = backward || table[i] <= pc;
        }
        if (backward && --block_.watch_countdown == 0 && !Watch(w)) return RunResult::kFault;
        // The lanes of `from` whose target is `target`.
        auto going_to = [&targets](uint32_t from, uint32_t target) {
          uint32_t same = 0;
          for (uint32_t lanes = from; lanes != 0; lanes &= lanes - 1) {
            const uint32_t lane = static_cast<uint32_t>(__builtin_ctz(lanes));
            if (targets[lane] == target) same |= 1u << lane;
          }
          return same;
        };
        uint32_t rest = em;
        if ((mask & ~em) != 0) {
          g.mask = mask & ~em;
          ++g.pc;
        } else {  // the group goes on with its first lane's target
          g.pc = targets[__builtin_ctz(em)];
          g.mask = going_to(em, g.pc);
          rest &= ~g.mask;
        }
        gs.MergeFrom(gi);
        while (rest != 0) {
          const uint32_t target = targets[__builtin_ctz(rest)];
          const uint32_t same = going_to(rest, target);
          gs.Add(target, same);
          rest &= ~same;
        }
        if (backward && --block_.yield_countdown == 0) return RunResult::kYield;
        break;
      }
      case Control::kYield:
        if (in.exec != nullptr && em != 0) {
          in.exec(w, in, em);
          if (w.faulted) return FaultedAt(w, in);
        }
        ++g.pc;
        gs.MergeFrom(gi);
        // nanosleep (no handler) sleeps; mbarrier.try_wait yields to the block's other warps.
        if (em != 0 && in.exec == nullptr) {
          sleep_ns_ = in.imm;
          return RunResult::kSleep;
        }
        if (em != 0) return RunResult::kYield;
        break;
      case Control::kWait:
        if (em != 0) {
          in.exec(w, in, em);
          if (w.faulted) return FaultedAt(w, in);
          if (w.stall) {  // not yet: stay here, let the others run
            w.stall = false;
            if (--block_.watch_countdown == 0 && !Watch(w)) return RunResult::kFault;
            return RunResult::kYield;
          }
        }
        ++g.pc;
        gs.MergeFrom(gi);
        break;
      case Control::kExit:
        if (em == 0) {
          ++g.pc;
          gs.MergeFrom(gi);
          break;
        }
        ClusterExit(w, em);
        act.exited |= em;
        if (em != mask) ++g.pc;  // the survivors continue after the exit
        gs.Kill(em);
        gs.MergeAll();
        break;
      case Control::kReturn:
        if (em == mask) {
          gs.Remove(gi);
        } else {
          g.mask = mask & ~em;
          ++g.pc;
          gs.MergeFrom(gi);
        }
        break;
      case Control::kBarrier:
        if (in.exec != nullptr) in.exec(w, in, em);
        ++g.pc;
        g.at_barrier = true;
        if (in.imm == 1) g.bar_red = &in;
        gs.MergeFrom(gi);
        break;
      case Control::kCall: {
        if (em == 0) {
          ++g.pc;
          gs.MergeFrom(gi);
          break;
        }
        const CallSite& site = fn.call_sites[in.aux];
        if (site.builtin != CallSite::Builtin::kNone) {
          if (site.builtin == CallSite::Builtin::kPrintf) {
            Printf(w, site, em);
          } else {
            Builtin(w, site, em);
          }
          if (w.faulted) return FaultedAt(w, in);
          ++g.pc;
          gs.MergeFrom(gi);
          break;
        }
        act.call = &in;
        act.call_group = gi;
        act.call_pending = em;
        act.call_exited = 0;
        return RunResult::kCalled;
      }
      case Control::kTrap: {
        if (em == 0) {
          ++g.pc;
          gs.MergeFrom(gi);
          break;
        }
        if (in.aux == 1) {
          w.SetFault(FaultKind::kUnsupported,
                     "unsupported instruction at PTX line " + std::to_string(in.line));
        } else {
          w.SetFault(FaultKind::kTrap, "trap at PTX line " + std::to_string(in.line));
        }
        return RunResult::kFault;
      }
    }
  }
}

void BlockRunner::ClusterExit(const Warp& w, uint32_t lanes) {
  Cluster& c = *block_.cluster;
  uint32_t pending = 0;
  ForLanes(lanes, [&](uint32_t l) {
    uint32_t& arrival = block_.cluster_arrivals[w.ThreadIndex(l)];
    if (arrival != 0 && static_cast<int32_t>(c.phase - arrival) < 0) ++pending;
    arrival = 0;
  });
  c.Exit(static_cast<uint32_t>(std::popcount(lanes)), pending);
}

bool BlockRunner::Watch(Warp& w) {
  block_.watch_countdown = kWatchInterval;
  if (launch_->cancel != nullptr && launch_->cancel->load(std::memory_order_relaxed)) {
    w.SetFault(FaultKind::kCancelled, "cancelled");
    return false;
  }
  if (launch_->deadline_ns != 0 && SteadyClockNs() > launch_->deadline_ns) {
    w.SetFault(FaultKind::kTimeout, "ran past RGPU_SOFTGPU_KERNEL_TIMEOUT_MS");
    return false;
  }
  return true;
}

bool BlockRunner::PushCallee(WarpSlot& s) {
  const uint32_t depth = s.depth;
  if (depth + 1 >= kMaxCallDepth) {
    s.stack[depth].w.SetFault(FaultKind::kStackOverflow,
                              "call depth exceeds " + std::to_string(kMaxCallDepth));
    return false;
  }
  if (s.stack.size() < depth + 2) s.stack.resize(depth + 2);  // may move activations
  Activation& caller = s.stack[depth];
  Activation& callee = s.stack[depth + 1];
  Warp& w = caller.w;
  const Insn& in = *caller.call;
  const CallSite& site = caller.fn->call_sites[in.aux];
  const Program& program = *launch_->program;
  uint32_t function;
  uint32_t lanes;
  caller.call_results.clear();
  std::vector<CallSite::Copy>& args = call_args_;
  args.clear();
  if (site.target_register == kNoOperand) {
    function = in.target;
    lanes = caller.call_pending;
    args.assign(site.args.begin(), site.args.end());
    caller.call_results.assign(site.results.begin(), site.results.end());
  } else {
    // Indirect call: call one target with the lanes that hold it; the rest come later.
    const uint64_t* targets = w.R(site.target_register);
    const uint64_t target = targets[std::countr_zero(caller.call_pending)];
    lanes = 0;
    ForLanes(caller.call_pending, [&](uint32_t l) {
      if (targets[l] == target) lanes |= 1u << l;
    });
    const uint64_t index = (target - kFunctionAddressBase) / 16;
    if (target < kFunctionAddressBase || (target - kFunctionAddressBase) % 16 != 0 ||
        index >= program.functions.size() || !program.functions[index].has_body) {
      char msg[128];
      snprintf(msg, sizeof msg, "call through an invalid function pointer 0x%" PRIx64, target);
      w.SetFault(FaultKind::kIllegalAddress, msg);
      return false;
    }
    function = static_cast<uint32_t>(index);
    const Function& f = program.functions[function];
    if (f.params.size() != site.indirect_args.size() ||
        f.returns.size() < site.indirect_results.size()) {
      w.SetFault(FaultKind::kIllegalAddress,
                 "call of " + f.name + " through a pointer of another signature");
      return false;
    }
    if (!f.unsupported.empty()) {
      w.SetFault(FaultKind::kUnsupported, "unsupported instruction " + f.unsupported.front());
      return false;
    }
    for (size_t k = 0; k < site.indirect_args.size(); ++k) {
      args.push_back({site.indirect_args[k].offset, f.params[k].offset,
                      std::min(site.indirect_args[k].size, f.params[k].size)});
    }
    for (size_t k = 0; k < site.indirect_results.size(); ++k) {
      caller.call_results.push_back({site.indirect_results[k].offset, f.returns[k].offset,
                                     std::min(site.indirect_results[k].size, f.returns[k].size)});
    }
  }
  caller.call_pending &= ~lanes;
  caller.call_lanes = lanes;
  const Function& f = program.functions[function];
  const uint32_t local_base = w.local_base + caller.fn->local_bytes;
  if (local_base + f.local_bytes > block_.local_per_thread) {
    w.SetFault(FaultKind::kStackOverflow,
               "stack overflow calling " + f.name + " (raise CU_LIMIT_STACK_SIZE)");
    return false;
  }
  callee.fn = &f;
  callee.regs.resize(static_cast<size_t>(f.num_regs) * kWarpSize);
  callee.preds.resize(std::max<uint32_t>(f.num_preds, 1));
  callee.frame.assign(static_cast<size_t>(f.frame_bytes) * kWarpSize, 0);
  callee.w = w;
  callee.w.regs = callee.regs.data();
  callee.w.preds = callee.preds.data();
  callee.w.frame = callee.frame.data();
  callee.w.frame_stride = f.frame_bytes;
  callee.w.local_base = local_base;
  callee.exited = 0;
  callee.call = nullptr;
  callee.groups.n = 0;
  callee.groups.Add(0, lanes);
  ForLanes(lanes, [&](uint32_t l) {
    for (const CallSite::Copy& c : args) {
      memcpy(callee.w.frame + static_cast<size_t>(l) * callee.w.frame_stride + c.callee_offset,
             w.frame + static_cast<size_t>(l) * w.frame_stride + c.caller_offset, c.size);
    }
  });
  s.depth = depth + 1;
  return true;
}

bool BlockRunner::PopCallee(WarpSlot& s) {
  Activation& callee = s.stack[s.depth];
  Activation& caller = s.stack[s.depth - 1];
  if (callee.w.faulted) caller.w.faulted = true;
  const uint32_t returned = caller.call_lanes & ~callee.exited;
  ForLanes(returned, [&](uint32_t l) {
    for (const CallSite::Copy& c : caller.call_results) {
      memcpy(caller.w.frame + static_cast<size_t>(l) * caller.w.frame_stride + c.caller_offset,
             callee.w.frame + static_cast<size_t>(l) * callee.w.frame_stride + c.callee_offset,
             c.size);
    }
  });
  caller.call_exited |= callee.exited;
  --s.depth;
  if (caller.call_pending != 0) return PushCallee(s);  // more targets of an indirect call
  // The call is complete: the calling group moves on; lanes that exited are gone.
  caller.groups.g[caller.call_group].pc++;
  caller.call = nullptr;
  if (caller.call_exited != 0) {
    caller.exited |= caller.call_exited;
    caller.groups.Kill(caller.call_exited);
  }
  caller.groups.MergeAll();
  return true;
}

// Reads a NUL-terminated string from device memory (generic address), at most `limit` bytes.
bool ReadDeviceString(Warp& w, uint64_t address, uint32_t lane, size_t limit, std::string* out) {
  out->clear();
  for (size_t i = 0; i < limit; ++i) {
    const uint8_t* p = Translate(w, ptx::Space::kGeneric, address + i, 1, 1, lane, false);
    if (p == nullptr) return false;
    if (*p == 0) return true;
    out->push_back(static_cast<char>(*p));
  }
  return true;
}

void BlockRunner::Printf(Warp& w, const CallSite& site, uint32_t mask) {
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    uint8_t* frame = w.frame + static_cast<size_t>(l) * w.frame_stride;
    uint64_t fmt_address, args_address;
    memcpy(&fmt_address, frame + site.builtin_args[0], 8);
    memcpy(&args_address, frame + site.builtin_args[1], 8);
    std::string fmt;
    if (!ReadDeviceString(w, fmt_address, l, 4096, &fmt)) return;
    std::string out;
    uint64_t arg = args_address;
    auto read_arg = [&](uint32_t size, uint64_t* value) {
      arg = (arg + size - 1) / size * size;
      const uint8_t* p = Translate(w, ptx::Space::kGeneric, arg, size, size, l, false);
      if (p == nullptr) return false;
      *value = 0;
      memcpy(value, p, size);
      arg += size;
      return true;
    };
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%') {
        out.push_back(fmt[i]);
        continue;
      }
      size_t j = i + 1;
      if (j < fmt.size() && fmt[j] == '%') {
        out.push_back('%');
        i = j;
        continue;
      }
      while (j < fmt.size() && strchr("-+ #0", fmt[j])) ++j;
      while (j < fmt.size() && (isdigit(static_cast<unsigned char>(fmt[j])) || fmt[j] == '.')) ++j;
      int longs = 0;
      bool half = false;
      while (j < fmt.size() && strchr("hlLqjzt", fmt[j])) {
        if (fmt[j] == 'l' || fmt[j] == 'L' || fmt[j] == 'q' || fmt[j] == 'j' || fmt[j] == 'z' ||
            fmt[j] == 't')
          ++longs;
        if (fmt[j] == 'h') half = true;
        ++j;
      }
      if (j >= fmt.size()) break;
      const char conv = fmt[j];
      // The spec without length modifiers, rebuilt with the host's own.
      std::string spec;
      for (size_t k = i; k < j; ++k) {
        if (!strchr("hlLqjzt", fmt[k])) spec.push_back(fmt[k]);
      }
      char buf[512];
      uint64_t v = 0;
      buf[0] = 0;
      if (strchr("diouxXc", conv)) {
        const bool wide = longs > 0;
        if (!read_arg(wide ? 8 : 4, &v)) return;
        spec += "ll";
        spec.push_back(conv);
        long long sv;
        if (conv == 'd' || conv == 'i') {
          sv = wide ? static_cast<long long>(v) : static_cast<long long>(static_cast<int32_t>(v));
          if (half) sv = static_cast<int16_t>(sv);
        } else {
          sv = static_cast<long long>(wide ? v : static_cast<uint32_t>(v));
          if (half) sv = static_cast<uint16_t>(sv);
        }
        if (conv == 'c') {
          spec.resize(spec.size() - 3);
          spec.push_back('c');
          snprintf(buf, sizeof buf, spec.c_str(), static_cast<int>(sv));
        } else {
          snprintf(buf, sizeof buf, spec.c_str(), sv);
        }
      } else if (strchr("fFeEgGaA", conv)) {
        if (!read_arg(8, &v)) return;
        spec.push_back(conv);
        snprintf(buf, sizeof buf, spec.c_str(), std::bit_cast<double>(v));
      } else if (conv == 's') {
        if (!read_arg(8, &v)) return;
        std::string s;
        if (!ReadDeviceString(w, v, l, 4096, &s)) return;
        spec.push_back('s');
        snprintf(buf, sizeof buf, spec.c_str(), s.c_str());
      } else if (conv == 'p') {
        if (!read_arg(8, &v)) return;
        snprintf(buf, sizeof buf, "0x%" PRIx64, v);
      } else {
        out.append(fmt, i, j - i + 1);
      }
      out += buf;
      i = j;
    }
    printf_out_ += out;
    if (site.builtin_result != kNoOperand) {
      const int32_t n = static_cast<int32_t>(out.size());
      memcpy(frame + site.builtin_result, &n, 4);
    }
  });
}

bool BlockRunner::Builtin(Warp& w, const CallSite& site, uint32_t mask) {
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    uint8_t* frame = w.frame + static_cast<size_t>(l) * w.frame_stride;
    auto arg64 = [&](size_t i) {
      uint64_t v = 0;
      memcpy(&v, frame + site.builtin_args[i], 8);
      return v;
    };
    switch (site.builtin) {
      case CallSite::Builtin::kMalloc: {
        const uint64_t p = block_.heap != nullptr ? block_.heap->Allocate(arg64(0)) : 0;
        if (site.builtin_result != kNoOperand) memcpy(frame + site.builtin_result, &p, 8);
        break;
      }
      case CallSite::Builtin::kFree:
        if (block_.heap != nullptr) block_.heap->Free(arg64(0));
        break;
      case CallSite::Builtin::kSetConditional: {
        // The handle is a device address of a 32-bit word (a fault if it is not the context's).
        uint32_t value = 0;
        memcpy(&value, frame + site.builtin_args[1], 4);
        if (uint8_t* p = Translate(w, ptx::Space::kGlobal, arg64(0), 4, 4, l, true)) {
          memcpy(p, &value, 4);
        }
        break;
      }
      case CallSite::Builtin::kAssert: {
        std::string message, file, function;
        ReadDeviceString(w, arg64(0), l, 1024, &message);
        ReadDeviceString(w, arg64(1), l, 1024, &file);
        ReadDeviceString(w, arg64(3), l, 1024, &function);
        uint32_t line = 0;
        memcpy(&line, frame + site.builtin_args[2], 4);
        uint32_t tid[3];
        w.Tid(l, tid);
        char buf[4096];
        snprintf(buf, sizeof buf,
                 "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.",
                 file.c_str(), line, function.c_str(), block_.ctaid[0], block_.ctaid[1],
                 block_.ctaid[2], tid[0], tid[1], tid[2], message.c_str());
        w.faulted = false;  // a failed string read above must not mask the assertion
        w.SetFault(FaultKind::kAssert, buf);
        break;
      }
      default:
        break;
    }
  });
  return !w.faulted;
}

std::atomic<uint64_t> g_launch_ids{1};
std::atomic<uint64_t> g_lane_instructions{0};

}  // namespace

std::string FindUnsupported(const Program& program, uint32_t function) {
  std::vector<bool> seen(program.functions.size(), false);
  std::vector<uint32_t> todo{function};
  seen[function] = true;
  while (!todo.empty()) {
    const Function& f = program.functions[todo.back()];
    todo.pop_back();
    if (!f.unsupported.empty()) return f.unsupported.front();
    for (const Insn& in : f.insns) {
      if (in.control != Control::kCall) continue;
      const CallSite& site = f.call_sites[in.aux];
      if (site.builtin != CallSite::Builtin::kNone || in.target == kNoOperand || seen[in.target]) {
        continue;  // builtins; indirect calls are checked when they happen
      }
      seen[in.target] = true;
      todo.push_back(in.target);
    }
  }
  return "";
}

uint64_t LaneInstructionsExecuted() { return g_lane_instructions.load(); }

namespace {

// Runs a cooperative grid: every block has its own runner and all are resident at once. Host
// threads (the caller plus whichever pool workers join) take blocks from a queue in turn, run
// each until it finishes or has used its turn, and queue it again, so that blocks spinning at
// a grid barrier let the others reach it. The caller alone can run the whole grid, so the
// launch cannot deadlock however busy the pool is.
Fault RunCooperativeGrid(const LaunchParams& launch, uint64_t launch_id) {
  const uint64_t gx = launch.grid[0], gy = launch.grid[1];
  const uint32_t blocks = launch.grid[0] * launch.grid[1] * launch.grid[2];
  std::vector<std::unique_ptr<BlockRunner>> runners(blocks);
  std::vector<bool> started(blocks, false);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint32_t> ready;
  for (uint32_t i = 0; i < blocks; ++i) ready.push_back(i);
  uint32_t finished = 0;
  bool failed = false;
  Fault first;
  auto fail = [&](Fault f) {  // under mu
    if (first.kind == FaultKind::kNone) first = std::move(f);
    failed = true;
    cv.notify_all();
  };
  std::function<void(uint64_t)> body = [&](uint64_t) {
    std::unique_lock lock(mu);
    for (;;) {
      // With the queue empty, the unfinished blocks are running on other threads, which queue
      // them again after their turn.
      cv.wait(lock, [&] { return failed || finished == blocks || !ready.empty(); });
      if (failed || finished == blocks) return;
      if (launch.cancel != nullptr && launch.cancel->load(std::memory_order_relaxed)) {
        fail(Fault{FaultKind::kCancelled, "cancelled"});
        return;
      }
      const uint32_t b = ready.front();
      ready.pop_front();
      const bool start = !started[b];
      started[b] = true;
      lock.unlock();
      BlockState state;
      Fault f;
      try {
        if (runners[b] == nullptr) runners[b] = std::make_unique<BlockRunner>();
        BlockRunner& runner = *runners[b];
        if (start) {
          const uint32_t ctaid[3] = {static_cast<uint32_t>(b % gx),
                                     static_cast<uint32_t>((b / gx) % gy),
                                     static_cast<uint32_t>(b / (gx * gy))};
          runner.Start(launch, launch_id, ctaid);
        }
        state = runner.Resume();
        if (state == BlockState::kFault) f = runner.fault();
        if (state == BlockState::kFinished || state == BlockState::kFault) {
          g_lane_instructions.fetch_add(runner.lane_instructions(), std::memory_order_relaxed);
          runners[b].reset();  // its memory is not needed any more
        }
      } catch (const std::bad_alloc&) {
        state = BlockState::kFault;
        f = Fault{FaultKind::kOutOfResources, "out of host memory for the block's state"};
      } catch (...) {
        state = BlockState::kFault;
        f = Fault{FaultKind::kOutOfResources, "internal error while running the block"};
      }
      lock.lock();
      if (state == BlockState::kFault) {
        fail(std::move(f));
        return;
      }
      if (state == BlockState::kFinished) {
        if (++finished == blocks) cv.notify_all();
      } else {
        ready.push_back(b);
        cv.notify_one();
      }
    }
  };
  ThreadPool& pool = ThreadPool::Global();
  ThreadPool::Global().ParallelFor(std::min<uint64_t>(blocks, pool.workers() + 1ull), body);
  return first;
}

// The runner of the calling thread for ordinary launches (its buffers are reused).
BlockRunner& ThreadRunner() {
  thread_local BlockRunner runner;
  return runner;
}

// The runners of the calling thread for the blocks of one cluster (their buffers are reused).
std::vector<std::unique_ptr<BlockRunner>>& ThreadClusterRunners() {
  thread_local std::vector<std::unique_ptr<BlockRunner>> runners;
  return runners;
}

// Runs a grid of thread-block clusters: clusters in parallel on the thread pool, the blocks of
// one cluster resident together on one host thread, each run until it finishes or has used its
// turn (e.g. waiting at barrier.cluster), then the next. A block's shared memory stays (for the
// cluster's other blocks) until the whole cluster has finished.
Fault RunClusteredGrid(const LaunchParams& launch, uint64_t launch_id) {
  const uint32_t* cd = launch.cluster;
  const uint32_t size = cd[0] * cd[1] * cd[2];
  const uint64_t cgx = launch.grid[0] / cd[0], cgy = launch.grid[1] / cd[1];
  const uint64_t clusters = cgx * cgy * (launch.grid[2] / cd[2]);
  const uint32_t threads = launch.block[0] * launch.block[1] * launch.block[2];
  std::atomic<bool> failed{false};
  std::mutex mu;
  Fault first;
  auto fail = [&](Fault f) {
    std::lock_guard lock(mu);
    if (first.kind == FaultKind::kNone) first = std::move(f);
    failed.store(true, std::memory_order_relaxed);
  };
  std::function<void(uint64_t)> body = [&](uint64_t i) {
    if (failed.load(std::memory_order_relaxed)) return;
    std::vector<std::unique_ptr<BlockRunner>>& runners = ThreadClusterRunners();
    try {
      if (runners.size() < size) runners.resize(size);
      Cluster cluster;
      for (int k = 0; k < 3; ++k) cluster.dims[k] = cd[k];
      cluster.size = size;
      cluster.explicit_launch = true;
      cluster.expected = size * threads;
      const uint32_t cluster_id[3] = {static_cast<uint32_t>(i % cgx),
                                      static_cast<uint32_t>((i / cgx) % cgy),
                                      static_cast<uint32_t>(i / (cgx * cgy))};
      for (uint32_t r = 0; r < size; ++r) {
        if (runners[r] == nullptr) runners[r] = std::make_unique<BlockRunner>();
        const uint32_t ctaid[3] = {cluster_id[0] * cd[0] + r % cd[0],
                                   cluster_id[1] * cd[1] + (r / cd[0]) % cd[1],
                                   cluster_id[2] * cd[2] + r / (cd[0] * cd[1])};
        runners[r]->Start(launch, launch_id, ctaid, &cluster, r);
        cluster.blocks[r] = runners[r]->block();
      }
      std::vector<bool> finished(size, false);
      uint32_t left = size;
      while (left != 0) {
        if (launch.cancel != nullptr && launch.cancel->load(std::memory_order_relaxed)) {
          fail(Fault{FaultKind::kCancelled, "cancelled"});
          break;
        }
        if (failed.load(std::memory_order_relaxed)) break;
        for (uint32_t r = 0; r < size; ++r) {
          if (finished[r]) continue;
          const BlockState state = runners[r]->Resume();
          if (state == BlockState::kFault) {
            fail(runners[r]->fault());
            left = 0;
            break;
          }
          if (state == BlockState::kFinished) {
            finished[r] = true;
            --left;
          }
        }
      }
      for (uint32_t r = 0; r < size; ++r) {
        g_lane_instructions.fetch_add(runners[r]->lane_instructions(), std::memory_order_relaxed);
      }
    } catch (const std::bad_alloc&) {
      runners.clear();  // drop whatever was half allocated
      fail(Fault{FaultKind::kOutOfResources, "out of host memory for the cluster's state"});
    } catch (...) {
      runners.clear();
      fail(Fault{FaultKind::kOutOfResources, "internal error while running the cluster"});
    }
  };
  const std::function<void()> leave = [] {
    for (auto& r : ThreadClusterRunners()) {
      if (r != nullptr) r->ReleasePins();
    }
  };
  ThreadPool::Global().ParallelFor(clusters, body, &leave);
  return first;
}

}  // namespace

Fault RunGrid(const LaunchParams& launch) {
  if (launch.cooperative) return RunCooperativeGrid(launch, g_launch_ids.fetch_add(1));
  if (launch.cluster[0] * launch.cluster[1] * launch.cluster[2] > 1) {
    return RunClusteredGrid(launch, g_launch_ids.fetch_add(1));
  }
  const uint64_t gx = launch.grid[0], gy = launch.grid[1], gz = launch.grid[2];
  const uint64_t blocks = gx * gy * gz;
  const uint64_t launch_id = g_launch_ids.fetch_add(1);
  std::atomic<bool> failed{false};
  std::mutex mu;
  Fault first;
  std::function<void(uint64_t)> body = [&](uint64_t i) {
    if (failed.load(std::memory_order_relaxed)) return;
    if (launch.cancel != nullptr && launch.cancel->load(std::memory_order_relaxed)) {
      std::lock_guard lock(mu);
      if (first.kind == FaultKind::kNone) first = Fault{FaultKind::kCancelled, "cancelled"};
      failed.store(true, std::memory_order_relaxed);
      return;
    }
    BlockRunner& runner = ThreadRunner();
    const uint32_t ctaid[3] = {static_cast<uint32_t>(i % gx), static_cast<uint32_t>((i / gx) % gy),
                               static_cast<uint32_t>(i / (gx * gy))};
    Fault f;
    try {
      f = runner.RunBlock(launch, launch_id, ctaid);
      g_lane_instructions.fetch_add(runner.lane_instructions(), std::memory_order_relaxed);
    } catch (const std::bad_alloc&) {
      runner = BlockRunner();  // drop whatever was half allocated
      f = Fault{FaultKind::kOutOfResources, "out of host memory for the block's state"};
    } catch (...) {
      runner = BlockRunner();
      f = Fault{FaultKind::kOutOfResources, "internal error while running the block"};
    }
    if (f.kind != FaultKind::kNone) {
      std::lock_guard lock(mu);
      if (first.kind == FaultKind::kNone) first = std::move(f);
      failed.store(true, std::memory_order_relaxed);
    }
  };
  const std::function<void()> leave = [] { ThreadRunner().ReleasePins(); };
  ThreadPool::Global().ParallelFor(blocks, body, &leave);
  return first;
}

}  // namespace softgpu
