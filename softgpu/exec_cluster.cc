// Thread-block clusters: barrier.cluster, mapa, getctarank and %is_explicit_cluster. The blocks
// of a cluster run by turns on one host thread (interpreter.cc), so the cluster's state is
// touched by one thread at a time.
#include <bit>
#include <cinttypes>
#include <cstdio>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

void ClusterArrive(Warp& w, const Insn&, uint32_t mask) {
  Block& b = *w.block;
  Cluster& c = *b.cluster;
  uint32_t n = 0;
  ForLanes(mask, [&](uint32_t l) {
    uint32_t& arrival = b.cluster_arrivals[w.ThreadIndex(l)];
    // A second arrival before waiting is undefined in PTX; it counts once.
    if (arrival != 0 && static_cast<int32_t>(c.phase - arrival) < 0) return;
    arrival = c.phase + 1;
    ++n;
  });
  if (n != 0) c.Arrive(n);
}

void ClusterWait(Warp& w, const Insn&, uint32_t mask) {
  Block& b = *w.block;
  const Cluster& c = *b.cluster;
  bool done = true;
  ForLanes(mask, [&](uint32_t l) {
    const uint32_t arrival = b.cluster_arrivals[w.ThreadIndex(l)];
    if (arrival != 0 && static_cast<int32_t>(c.phase - arrival) < 0) done = false;
  });
  if (!done) {
    w.stall = true;
    return;
  }
  ForLanes(mask, [&](uint32_t l) { b.cluster_arrivals[w.ThreadIndex(l)] = 0; });
}

// The shared-memory offset and the rank a shared::cluster address names, or false.
bool SplitClusterAddress(const Block& b, uint64_t address, uint64_t* offset, uint32_t* rank) {
  if (address >> 32 != 0) return false;
  const uint32_t tag = static_cast<uint32_t>(address) >> kClusterRankShift;
  *rank = tag == 0 ? b.cluster_rank : tag - 1;
  *offset = address & ((1u << kClusterRankShift) - 1);
  return *rank < b.cluster->size;
}

void FaultAddress(Warp& w, const char* what, uint64_t address, uint32_t lane) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s of 0x%" PRIx64 " (lane %u): not shared memory of the cluster", what,
           address, lane);
  w.SetFault(FaultKind::kIllegalAddress, msg);
}

template <bool kGeneric>
void Mapa(Warp& w, const Insn& in, uint32_t mask) {
  const Block& b = *w.block;
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* rank = w.R(in.a[2]);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    uint64_t address = a[l];
    if (kGeneric) address -= kSharedWindowBase;  // outside the window: fails the split
    uint64_t offset;
    uint32_t own;
    const uint32_t target = static_cast<uint32_t>(rank[l]);
    if (!SplitClusterAddress(b, address, &offset, &own) || target >= b.cluster->size) {
      FaultAddress(w, "mapa", a[l], l);
      return;
    }
    const uint64_t mapped = (static_cast<uint64_t>(target) + 1) << kClusterRankShift | offset;
    d[l] = kGeneric ? mapped + kSharedWindowBase : mapped;
  });
}

template <bool kGeneric>
void Getctarank(Warp& w, const Insn& in, uint32_t mask) {
  const Block& b = *w.block;
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    uint64_t address = kGeneric ? a[l] - kSharedWindowBase : static_cast<uint32_t>(a[l]);
    uint64_t offset;
    uint32_t rank;
    if (!SplitClusterAddress(b, address, &offset, &rank)) {
      FaultAddress(w, "getctarank", a[l], l);
      return;
    }
    d[l] = rank;
  });
}

void ExplicitClusterPred(Warp& w, const Insn& in, uint32_t mask) {
  uint32_t& p = w.preds[in.a[0]];
  p = (p & ~mask) | (w.block->cluster->explicit_launch ? mask : 0);
}

}  // namespace

Handler ClusterArriveHandler() { return &ClusterArrive; }
Handler ClusterWaitHandler() { return &ClusterWait; }
Handler MapaHandler(bool generic) { return generic ? &Mapa<true> : &Mapa<false>; }
Handler GetctarankHandler(bool generic) { return generic ? &Getctarank<true> : &Getctarank<false>; }
Handler ExplicitClusterPredHandler() { return &ExplicitClusterPred; }

}  // namespace softgpu
