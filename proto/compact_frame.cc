#include "proto/compact_frame.h"

#include <bit>
#include <cstring>

namespace rgpu::compact {
namespace {

enum Kind : uint8_t { kCall = 1, kReply = 2 };
constexpr size_t kFixedBytes = 24;  // marker, kind, count, op or result, seq, ctx or zero

static_assert(std::endian::native == std::endian::little, "compact frames are little-endian");

void Start(uint8_t kind, size_t words, std::string* out) {
  out->resize(kFixedBytes + 8 * words);
  char* p = out->data();
  p[0] = 0;
  p[1] = static_cast<char>(kind);
  const uint16_t count = static_cast<uint16_t>(words);
  memcpy(p + 2, &count, 2);
}

uint64_t Word(const char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

// The frame's word count when `header` is exactly a compact frame of `kind`, or -1.
int Words(std::string_view header, uint8_t kind) {
  if (header.size() < kFixedBytes || header[0] != 0 || static_cast<uint8_t>(header[1]) != kind) {
    return -1;
  }
  uint16_t count;
  memcpy(&count, header.data() + 2, 2);
  if (count > kMaxWords || header.size() != kFixedBytes + 8 * size_t{count}) return -1;
  return count;
}

}  // namespace

void EncodeCall(uint32_t op, uint64_t seq, uint64_t ctx, std::span<const uint64_t> args,
                std::string* out) {
  Start(kCall, args.size(), out);
  char* p = out->data();
  memcpy(p + 4, &op, 4);
  memcpy(p + 8, &seq, 8);
  memcpy(p + 16, &ctx, 8);
  if (!args.empty()) memcpy(p + kFixedBytes, args.data(), 8 * args.size());
}

bool DecodeCall(std::string_view header, wire::Call* call) {
  const int words = Words(header, kCall);
  if (words < 0) return false;
  const char* p = header.data();
  uint32_t op;
  memcpy(&op, p + 4, 4);
  call->Clear();
  call->set_op(op);
  call->set_seq(Word(p + 8));
  call->set_ctx(Word(p + 16));
  // Word by word: a call has a few, and a variable-length memcpy here became `rep movsq`, whose
  // start-up alone cost more than the copy (perf on the server's null round trip).
  auto* args = call->mutable_args();
  args->Reserve(words);
  for (int i = 0; i < words; ++i) args->AddAlreadyReserved(Word(p + kFixedBytes + 8 * i));
  return true;
}

bool IsPlain(const wire::Reply& reply) {
  return reply.message().empty() && reply.async_error() == 0 &&
         reply.async_error_detail().empty() && reply.async_error_ctx() == 0 &&
         reply.device_output().empty() && !reply.handed_off() && !reply.has_moved() &&
         static_cast<size_t>(reply.values_size()) <= kMaxWords;
}

void EncodeReply(const wire::Reply& reply, std::string* out) {
  Start(kReply, reply.values_size(), out);
  char* p = out->data();
  const int32_t result = reply.result();
  const uint64_t seq = reply.seq();
  memcpy(p + 4, &result, 4);
  memcpy(p + 8, &seq, 8);
  memset(p + 16, 0, 8);
  if (reply.values_size() > 0) {
    memcpy(p + kFixedBytes, reply.values().data(), 8 * static_cast<size_t>(reply.values_size()));
  }
}

uint64_t Reply::value(size_t i) const { return i < value_count_ ? Word(values_ + 8 * i) : 0; }

bool DecodeReply(std::string_view header, Reply* reply) {
  const int words = Words(header, kReply);
  if (words < 0) return false;
  const char* p = header.data();
  memcpy(&reply->result_, p + 4, 4);
  reply->seq_ = Word(p + 8);
  reply->value_count_ = static_cast<size_t>(words);
  reply->values_ = p + kFixedBytes;
  return true;
}

}  // namespace rgpu::compact
