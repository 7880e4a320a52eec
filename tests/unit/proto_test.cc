// Protocol round trips and the operation table.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "proto/compact_frame.h"
#include "proto/ops.h"
#include "proto/rgpu.pb.h"

namespace rgpu {
namespace {

// A compact call and a compact reply decode to what was encoded; their first byte tells them
// from any Envelope.
TEST(CompactFrameTest, RoundTrips) {
  const uint64_t args[] = {7, 0, ~0ull, 1ull << 63};
  std::string bytes;
  compact::EncodeCall(static_cast<uint32_t>(Op::kLaunchKernel), 42, 3, args, &bytes);
  ASSERT_TRUE(compact::IsCompact(bytes));
  wire::Call call;
  call.set_posted(true);  // cleared by the decoding
  ASSERT_TRUE(compact::DecodeCall(bytes, &call));
  EXPECT_EQ(call.op(), static_cast<uint32_t>(Op::kLaunchKernel));
  EXPECT_EQ(call.seq(), 42u);
  EXPECT_EQ(call.ctx(), 3u);
  EXPECT_FALSE(call.posted());
  ASSERT_EQ(call.args_size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(call.args(i), args[i]);

  wire::Reply reply;
  reply.set_seq(42);
  reply.set_result(600);  // CUDA_ERROR_NOT_READY
  reply.add_values(5);
  reply.add_values(~0ull);
  ASSERT_TRUE(compact::IsPlain(reply));
  compact::EncodeReply(reply, &bytes);
  compact::Reply back;
  ASSERT_TRUE(compact::DecodeReply(bytes, &back));
  EXPECT_EQ(back.seq(), 42u);
  EXPECT_EQ(back.result(), 600);
  ASSERT_EQ(back.value_count(), 2u);
  EXPECT_EQ(back.value(0), 5u);
  EXPECT_EQ(back.value(1), ~0ull);
  // A call is no reply, and a reply no call.
  EXPECT_FALSE(compact::DecodeCall(bytes, &call));

  // No Envelope is compact, an empty one included.
  wire::Envelope e;
  EXPECT_FALSE(compact::IsCompact(e.SerializeAsString()));
  e.mutable_call()->set_seq(1);
  EXPECT_FALSE(compact::IsCompact(e.SerializeAsString()));
  e.mutable_goodbye();
  EXPECT_FALSE(compact::IsCompact(e.SerializeAsString()));
}

// A reply with anything besides seq, result and values is not plain: it goes as an Envelope.
TEST(CompactFrameTest, OnlyPlainRepliesAreCompact) {
  auto with = [](auto set) {
    wire::Reply r;
    r.set_seq(1);
    set(r);
    return compact::IsPlain(r);
  };
  EXPECT_TRUE(with([](wire::Reply&) {}));
  EXPECT_FALSE(with([](wire::Reply& r) { r.set_message("why"); }));
  EXPECT_FALSE(with([](wire::Reply& r) { r.set_async_error(700); }));
  EXPECT_FALSE(with([](wire::Reply& r) { r.set_async_error_ctx(2); }));
  EXPECT_FALSE(with([](wire::Reply& r) { r.set_device_output("printf"); }));
  EXPECT_FALSE(with([](wire::Reply& r) { r.set_handed_off(true); }));
  EXPECT_FALSE(with([](wire::Reply& r) { r.mutable_moved(); }));
  EXPECT_FALSE(with([](wire::Reply& r) {
    for (size_t i = 0; i <= compact::kMaxWords; ++i) r.add_values(i);
  }));
}

// Every length is checked against the frame's size: truncated, padded, over-counted and
// unknown frames are refused.
TEST(CompactFrameTest, MalformedFramesAreRefused) {
  const uint64_t args[] = {1, 2};
  std::string good;
  compact::EncodeCall(1, 2, 3, args, &good);
  wire::Call call;
  ASSERT_TRUE(compact::DecodeCall(good, &call));
  std::string bad = good.substr(0, good.size() - 1);  // truncated
  EXPECT_FALSE(compact::DecodeCall(bad, &call));
  EXPECT_FALSE(compact::DecodeCall(good + std::string(8, '\0'), &call));  // a word too many
  bad = good;
  bad[2] = 3;  // claims three arguments, carries two
  EXPECT_FALSE(compact::DecodeCall(bad, &call));
  bad = good + std::string(8 * 40, '\0');
  bad[2] = 42;  // more than kMaxWords, with the bytes to match
  EXPECT_FALSE(compact::DecodeCall(bad, &call));
  bad = good;
  bad[1] = 9;  // an unknown kind
  EXPECT_FALSE(compact::DecodeCall(bad, &call));
  EXPECT_FALSE(compact::DecodeCall(std::string(1, '\0'), &call));
  EXPECT_FALSE(compact::DecodeCall(std::string(), &call));
  compact::Reply reply;
  EXPECT_FALSE(compact::DecodeReply(std::string(23, '\0'), &reply));
}

TEST(ProtoTest, CallRoundTrip) {
  wire::Envelope e;
  auto* c = e.mutable_call();
  c->set_seq(42);
  c->set_op(static_cast<uint32_t>(Op::kLaunchKernel));
  c->set_ctx(3);
  for (uint64_t a : {7ull, 1ull, 2ull, 3ull, ~0ull}) c->add_args(a);
  std::string bytes;
  ASSERT_TRUE(e.SerializeToString(&bytes));
  wire::Envelope back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  ASSERT_EQ(back.body_case(), wire::Envelope::kCall);
  EXPECT_EQ(back.call().seq(), 42u);
  EXPECT_EQ(back.call().op(), static_cast<uint32_t>(Op::kLaunchKernel));
  ASSERT_EQ(back.call().args_size(), 5);
  EXPECT_EQ(back.call().args(4), ~0ull);
}

TEST(ProtoTest, HandshakeRoundTrip) {
  wire::Envelope e;
  auto* w = e.mutable_welcome();
  w->set_protocol_version(1);
  auto* d = w->add_devices();
  d->set_name("rgpu softgpu");
  d->add_attributes(1024);
  std::string bytes = e.SerializeAsString();
  wire::Envelope back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.welcome().devices(0).name(), "rgpu softgpu");
}

TEST(ProtoTest, GarbageIsRejectedNotCrashed) {
  wire::Envelope back;
  std::string garbage = "\xff\xff\xff\xff\x0f\x12\x99garbage";
  EXPECT_FALSE(back.ParseFromString(garbage));
}

TEST(OpsTest, TableIsConsistent) {
  EXPECT_EQ(FindOp(0), nullptr);
  EXPECT_EQ(FindOp(static_cast<uint32_t>(Op::kCount)), nullptr);
  std::set<std::string> names;
  for (uint32_t i = 1; i < static_cast<uint32_t>(Op::kCount); ++i) {
    const OpInfo* info = FindOp(i);
    ASSERT_NE(info, nullptr);
    EXPECT_TRUE(names.insert(info->name).second) << "duplicate op " << info->name;
    EXPECT_GE(info->arg_count, 0);
  }
  EXPECT_STREQ(FindOp(static_cast<uint32_t>(Op::kMemAlloc))->name, "MemAlloc");
}

}  // namespace
}  // namespace rgpu
