// Compact frames: a call the client waits for, and its plain reply, encoded without protobuf.
//
// Most round trips of a program are calls with a few integer arguments and a result (a query, a
// synchronize, an allocation): their protobuf envelopes cost more than the shared-memory
// transport itself (docs/performance.md). A compact frame is a fixed little-endian layout that a
// message header may hold instead of an Envelope; it starts with a zero byte, which no Envelope
// encoding does (protobuf has no field 0), so a receiver tells the two apart by the first byte.
//
//   call:  u8 0 | u8 1 (kCall) | u16 argument count | u32 op | u64 seq | u64 ctx | u64 args...
//   reply: u8 0 | u8 2 (kReply) | u16 value count | i32 result | u64 seq | u64 0 | u64 values...
//
// A compact call is an unposted Call without after_seq or hand_off; it may carry a payload
// beside its header, as any message may. A compact reply is a Reply with only seq, result and
// values (no message, asynchronous error, device output, hand-off or move): the server answers a
// compact call with one when its Reply has nothing else, and with an Envelope otherwise. Only
// compact calls get compact replies, so a peer that never sends one never sees one. Decoding
// checks every length against the header's size; nothing is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "proto/rgpu.pb.h"

namespace rgpu::compact {

// The most arguments or values a compact frame holds.
inline constexpr size_t kMaxWords = 32;

// True when `header` is a compact frame (of any kind), not an Envelope.
inline bool IsCompact(std::string_view header) { return !header.empty() && header[0] == 0; }

// Writes a compact call into *out (replacing its contents). args.size() <= kMaxWords.
void EncodeCall(uint32_t op, uint64_t seq, uint64_t ctx, std::span<const uint64_t> args,
                std::string* out);

// Decodes a compact call into *call (cleared first; posted, after_seq and hand_off stay unset).
// False, leaving *call unspecified, when `header` is not exactly a well-formed compact call.
bool DecodeCall(std::string_view header, wire::Call* call);

// True when `reply` has only seq, result and values (kMaxWords at most): it may go compact.
bool IsPlain(const wire::Reply& reply);

// Writes `reply` (IsPlain) as a compact reply into *out (replacing its contents).
void EncodeReply(const wire::Reply& reply, std::string* out);

// A decoded compact reply; `values` points into the header it was decoded from.
class Reply {
 public:
  uint64_t seq() const { return seq_; }
  int32_t result() const { return result_; }
  size_t value_count() const { return value_count_; }
  uint64_t value(size_t i) const;

 private:
  friend bool DecodeReply(std::string_view header, Reply* reply);
  uint64_t seq_ = 0;
  int32_t result_ = 0;
  size_t value_count_ = 0;
  const char* values_ = nullptr;
};

// Decodes a compact reply. False when `header` is not exactly a well-formed compact reply.
bool DecodeReply(std::string_view header, Reply* reply);

}  // namespace rgpu::compact
