// Protocol round trips and the operation table.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "proto/ops.h"
#include "proto/rgpu.pb.h"

namespace rgpu {
namespace {

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
