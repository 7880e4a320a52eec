// Atomic read-modify-write of one value in host memory, as atom and red define each operation:
// shared by the atomics (exec_memory.cc) and the reducing copies (exec_async.cc).
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "softgpu/program.h"

namespace softgpu {

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 8, uint64_t,
                                std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;

// Applies `kOp` with operand `b` (and `c`, cas's new value) to the T at `p` (aligned to its
// size) atomically; returns the old value.
template <AtomOp kOp, typename T>
T AtomicApply(uint8_t* p, T b, T c) {
  using B = Bits<T>;
  std::atomic_ref<B> ref(*reinterpret_cast<B*>(p));
  B old_bits = ref.load(std::memory_order_relaxed);
  for (;;) {
    const T old = std::bit_cast<T>(old_bits);
    T next;
    switch (kOp) {
      case AtomOp::kAdd:
        if constexpr (std::is_floating_point_v<T>)
          next = old + b;
        else
          next = static_cast<T>(static_cast<B>(old) + static_cast<B>(b));
        break;
      case AtomOp::kMin:
        next = b < old ? b : old;
        break;
      case AtomOp::kMax:
        next = b > old ? b : old;
        break;
      case AtomOp::kExch:
        next = b;
        break;
      case AtomOp::kCas:
        if (old_bits != std::bit_cast<B>(b)) return old;
        next = c;
        break;
      case AtomOp::kAnd:
        next = static_cast<T>(static_cast<B>(old) & static_cast<B>(b));
        break;
      case AtomOp::kOr:
        next = static_cast<T>(static_cast<B>(old) | static_cast<B>(b));
        break;
      case AtomOp::kXor:
        next = static_cast<T>(static_cast<B>(old) ^ static_cast<B>(b));
        break;
      case AtomOp::kInc:
        next =
            static_cast<T>(static_cast<B>(old) >= static_cast<B>(b) ? 0 : static_cast<B>(old) + 1);
        break;
      case AtomOp::kDec:
        next = static_cast<T>((static_cast<B>(old) == 0 || static_cast<B>(old) > static_cast<B>(b))
                                  ? static_cast<B>(b)
                                  : static_cast<B>(old) - 1);
        break;
    }
    if (ref.compare_exchange_weak(old_bits, std::bit_cast<B>(next), std::memory_order_relaxed)) {
      return old;
    }
  }
}

}  // namespace softgpu
