#include "softgpu/interpreter.h"

#include <atomic>
#include <chrono>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "softgpu/thread_pool.h"

namespace softgpu {
namespace {

constexpr uint32_t kMaxCallDepth = 1024;
// Backward branches between checks for cancellation and the deadline.
constexpr uint32_t kWatchInterval = 4096;

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

enum class RunResult { kFinished, kBarrier, kFault };

struct WarpSlot {
  Warp w;
  GroupSet groups;
  bool done = false;
};

// Per-host-thread executor of blocks; buffers are reused across blocks and launches.
class BlockRunner {
 public:
  Fault RunBlock(const LaunchParams& launch, uint64_t launch_id, const uint32_t ctaid[3]);

 private:
  struct CallFrame {
    std::vector<uint64_t> regs;
    std::vector<uint32_t> preds;
    std::vector<uint8_t> frame;
  };

  RunResult Run(Warp& w, const Function& fn, GroupSet& gs, bool top_level, uint32_t depth,
                uint32_t* exited);
  bool Call(Warp& w, const Function& caller, const Insn& in, uint32_t mask, uint32_t depth,
            uint32_t* exited);
  // Runs `function` for the lanes in `mask` with a fresh activation; false after a fault.
  bool Invoke(Warp& w, const Function& caller, uint32_t function,
              const std::vector<CallSite::Copy>& args, const std::vector<CallSite::Copy>& results,
              uint32_t mask, uint32_t depth, uint32_t* exited);
  void Printf(Warp& w, const CallSite& site, uint32_t mask);
  // malloc, free and __assertfail; false after a fault.
  bool Builtin(Warp& w, const CallSite& site, uint32_t mask);
  void Prepare(const LaunchParams& launch, uint64_t launch_id);
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
  std::vector<WarpSlot> warps_;
  std::vector<CallFrame> call_frames_;  // by depth
  std::string printf_out_;
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
  shared_.assign(fn.shared_bytes + launch.dynamic_shared + 16, 0);
  const uint32_t local_per_thread = (fn.local_bytes + launch.stack_bytes + 15) / 16 * 16;
  local_.assign(static_cast<size_t>(threads) * local_per_thread, 0);
  call_frames_.clear();
  warps_.assign(nwarps, WarpSlot{});
  block_ = Block();
  block_.program = launch.program;
  block_.kernel = &fn;
  block_.consts = launch.consts;
  block_.memory = launch.memory;
  block_.shared = shared_.data();
  block_.shared_size = fn.shared_bytes + launch.dynamic_shared;
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
}

Fault BlockRunner::RunBlock(const LaunchParams& launch, uint64_t launch_id,
                            const uint32_t ctaid[3]) {
  Prepare(launch, launch_id);
  const Function& fn = launch.program->functions[launch.function];
  fault_ = Fault();
  block_.fault = &fault_;
  for (int i = 0; i < 3; ++i) block_.ctaid[i] = ctaid[i];
  block_.bar_red_count = 0;
  block_.bar_red_and = true;
  block_.bar_red_or = false;
  const uint32_t nwarps = block_.num_warps;
  const uint32_t npreds = std::max<uint32_t>(fn.num_preds, 1);
  for (uint32_t i = 0; i < nwarps; ++i) {
    WarpSlot& s = warps_[i];
    s.done = false;
    s.groups.n = 0;
    Warp& w = s.w;
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
    s.groups.Add(0, w.live);
  }
  for (;;) {
    bool waiting = false;
    for (uint32_t i = 0; i < nwarps; ++i) {
      WarpSlot& s = warps_[i];
      if (s.done) continue;
      uint32_t exited = 0;
      const RunResult r = Run(s.w, fn, s.groups, true, 0, &exited);
      if (r == RunResult::kFault) {
        if (!printf_out_.empty() && block_.printf_sink != nullptr) {
          block_.printf_sink->Write(std::move(printf_out_));
        }
        printf_out_.clear();
        return fault_;
      }
      if (r == RunResult::kFinished)
        s.done = true;
      else
        waiting = true;
    }
    if (!waiting) break;
    // Every live warp reached the barrier: deliver bar.red results and release.
    for (uint32_t i = 0; i < nwarps; ++i) {
      WarpSlot& s = warps_[i];
      if (s.done) continue;
      for (uint32_t j = 0; j < s.groups.n; ++j) {
        Group& g = s.groups.g[j];
        if (g.bar_red != nullptr) {
          const Insn& in = *g.bar_red;
          if (in.aux == 0) {
            uint64_t* d = s.w.R(in.a[0]);
            ForLanes(g.mask, [&](uint32_t l) { d[l] = block_.bar_red_count; });
          } else {
            const bool r = in.aux == 1 ? block_.bar_red_and : block_.bar_red_or;
            uint32_t& p = s.w.preds[in.a[0]];
            p = (p & ~g.mask) | (r ? g.mask : 0);
          }
          g.bar_red = nullptr;
        }
        g.at_barrier = false;
      }
      // Groups released at the same pc can merge again.
      for (uint32_t j = 0; j < s.groups.n; ++j) s.groups.MergeFrom(j);
    }
    block_.bar_red_count = 0;
    block_.bar_red_and = true;
    block_.bar_red_or = false;
  }
  if (!printf_out_.empty() && block_.printf_sink != nullptr) {
    block_.printf_sink->Write(std::move(printf_out_));
  }
  printf_out_.clear();
  return fault_;
}

RunResult BlockRunner::Run(Warp& w, const Function& fn, GroupSet& gs, bool top_level,
                           uint32_t depth, uint32_t* exited) {
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
    for (;;) {
      if (pc == limit) break;
      const Insn& in = insns[pc];
      if (in.control != Control::kNone) break;
      uint32_t em = mask;
      if (in.guard >= 0) em &= in.guard_negated ? ~w.preds[in.guard] : w.preds[in.guard];
      if (em != 0) {
        in.exec(w, in, em);
        if (w.faulted) return RunResult::kFault;
      }
      ++pc;
    }
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
      case Control::kBranch:
        // Loops always branch backwards: that is where a runaway kernel can be stopped.
        if (in.target <= pc && em != 0 && --block_.watch_countdown == 0 && !Watch(w)) {
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
        break;
      case Control::kExit:
        if (em != 0) {
          *exited |= em;
          gs.Kill(em);
          if (em == mask) break;
          // gi may have moved; the survivors of this group continue after the exit.
          for (uint32_t j = 0; j < gs.n; ++j) {
            if (gs.g[j].pc == pc && !gs.g[j].at_barrier && (gs.g[j].mask & (mask & ~em))) {
              ++gs.g[j].pc;
              gs.MergeFrom(j);
              break;
            }
          }
        } else {
          ++g.pc;
          gs.MergeFrom(gi);
        }
        break;
      case Control::kReturn:
        if (em == mask) {
          gs.Remove(gi);
        } else if (em == 0) {
          ++g.pc;
          gs.MergeFrom(gi);
        } else {
          g.mask = mask & ~em;
          ++g.pc;
          gs.MergeFrom(gi);
        }
        break;
      case Control::kBarrier: {
        if (!top_level) {
          w.SetFault(FaultKind::kUnsupported, "bar.sync inside a called function (PTX line " +
                                                  std::to_string(in.line) + ") is not supported");
          return RunResult::kFault;
        }
        if (in.exec != nullptr) in.exec(w, in, em);
        ++g.pc;
        g.at_barrier = true;
        if (in.imm == 1) g.bar_red = &in;
        gs.MergeFrom(gi);
        break;
      }
      case Control::kCall: {
        if (em != 0) {
          uint32_t call_exited = 0;
          if (!Call(w, fn, in, em, depth + 1, &call_exited)) return RunResult::kFault;
          ++g.pc;
          if (call_exited != 0) {
            *exited |= call_exited;
            gs.Kill(call_exited);
            // Re-find the group (indices may have changed) and merge.
            for (uint32_t j = 0; j < gs.n; ++j) gs.MergeFrom(j);
          } else {
            gs.MergeFrom(gi);
          }
        } else {
          ++g.pc;
          gs.MergeFrom(gi);
        }
        break;
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

bool BlockRunner::Call(Warp& w, const Function& caller, const Insn& in, uint32_t mask,
                       uint32_t depth, uint32_t* exited) {
  const CallSite& site = caller.call_sites[in.aux];
  if (site.builtin == CallSite::Builtin::kPrintf) {
    Printf(w, site, mask);
    return !w.faulted;
  }
  if (site.builtin != CallSite::Builtin::kNone) return Builtin(w, site, mask);
  if (site.target_register == kNoOperand) {
    return Invoke(w, caller, in.target, site.args, site.results, mask, depth, exited);
  }
  // Indirect call: lanes may hold different targets; call each target with its lanes.
  const uint64_t* targets = w.R(site.target_register);
  const Program& program = *launch_->program;
  uint32_t remaining = mask;
  *exited = 0;
  while (remaining != 0) {
    const uint64_t target = targets[std::countr_zero(remaining)];
    uint32_t lanes = 0;
    ForLanes(remaining, [&](uint32_t l) {
      if (targets[l] == target) lanes |= 1u << l;
    });
    remaining &= ~lanes;
    const uint64_t index = (target - kFunctionAddressBase) / 16;
    if (target < kFunctionAddressBase || (target - kFunctionAddressBase) % 16 != 0 ||
        index >= program.functions.size() || !program.functions[index].has_body) {
      char msg[128];
      snprintf(msg, sizeof msg, "call through an invalid function pointer 0x%" PRIx64, target);
      w.SetFault(FaultKind::kIllegalAddress, msg);
      return false;
    }
    const Function& callee = program.functions[index];
    if (callee.params.size() != site.indirect_args.size() ||
        callee.returns.size() < site.indirect_results.size()) {
      w.SetFault(FaultKind::kIllegalAddress,
                 "call of " + callee.name + " through a pointer of another signature");
      return false;
    }
    if (!callee.unsupported.empty()) {
      w.SetFault(FaultKind::kUnsupported, "unsupported instruction " + callee.unsupported.front());
      return false;
    }
    std::vector<CallSite::Copy> args, results;
    for (size_t k = 0; k < site.indirect_args.size(); ++k) {
      args.push_back({site.indirect_args[k].offset, callee.params[k].offset,
                      std::min(site.indirect_args[k].size, callee.params[k].size)});
    }
    for (size_t k = 0; k < site.indirect_results.size(); ++k) {
      results.push_back({site.indirect_results[k].offset, callee.returns[k].offset,
                         std::min(site.indirect_results[k].size, callee.returns[k].size)});
    }
    uint32_t callee_exited = 0;
    if (!Invoke(w, caller, static_cast<uint32_t>(index), args, results, lanes, depth,
                &callee_exited)) {
      return false;
    }
    *exited |= callee_exited;
  }
  return true;
}

bool BlockRunner::Invoke(Warp& w, const Function& caller, uint32_t function,
                         const std::vector<CallSite::Copy>& args,
                         const std::vector<CallSite::Copy>& results, uint32_t mask, uint32_t depth,
                         uint32_t* exited) {
  if (depth >= kMaxCallDepth) {
    w.SetFault(FaultKind::kStackOverflow, "call depth exceeds " + std::to_string(kMaxCallDepth));
    return false;
  }
  const Function& callee = launch_->program->functions[function];
  const uint32_t local_base = w.local_base + caller.local_bytes;
  if (local_base + callee.local_bytes > block_.local_per_thread) {
    w.SetFault(FaultKind::kStackOverflow,
               "stack overflow calling " + callee.name + " (raise CU_LIMIT_STACK_SIZE)");
    return false;
  }
  if (call_frames_.size() < depth + 1) call_frames_.resize(depth + 1);
  // Each depth owns its buffers, so growing the vector keeps shallower frames' data in place.
  CallFrame& cf = call_frames_[depth];
  cf.regs.resize(static_cast<size_t>(callee.num_regs) * kWarpSize);
  cf.preds.resize(std::max<uint32_t>(callee.num_preds, 1));
  cf.frame.assign(static_cast<size_t>(callee.frame_bytes) * kWarpSize, 0);
  Warp cw = w;
  cw.regs = cf.regs.data();
  cw.preds = cf.preds.data();
  cw.frame = cf.frame.data();
  cw.frame_stride = callee.frame_bytes;
  cw.local_base = local_base;
  ForLanes(mask, [&](uint32_t l) {
    for (const CallSite::Copy& c : args) {
      memcpy(cw.frame + static_cast<size_t>(l) * cw.frame_stride + c.callee_offset,
             w.frame + static_cast<size_t>(l) * w.frame_stride + c.caller_offset, c.size);
    }
  });
  GroupSet gs;
  gs.Add(0, mask);
  uint32_t callee_exited = 0;
  const RunResult r = Run(cw, callee, gs, false, depth, &callee_exited);
  if (r == RunResult::kFault) {
    w.faulted = true;
    return false;
  }
  const uint32_t returned = mask & ~callee_exited;
  ForLanes(returned, [&](uint32_t l) {
    for (const CallSite::Copy& c : results) {
      memcpy(w.frame + static_cast<size_t>(l) * w.frame_stride + c.caller_offset,
             cw.frame + static_cast<size_t>(l) * cw.frame_stride + c.callee_offset, c.size);
    }
  });
  *exited = callee_exited;
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

Fault RunGrid(const LaunchParams& launch) {
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
    thread_local BlockRunner runner;
    const uint32_t ctaid[3] = {static_cast<uint32_t>(i % gx), static_cast<uint32_t>((i / gx) % gy),
                               static_cast<uint32_t>(i / (gx * gy))};
    Fault f;
    try {
      f = runner.RunBlock(launch, launch_id, ctaid);
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
  ThreadPool::Global().ParallelFor(blocks, body);
  return first;
}

}  // namespace softgpu
