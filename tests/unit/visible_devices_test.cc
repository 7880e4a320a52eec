// CUDA_VISIBLE_DEVICES over the devices of a program's servers (client/visible_devices.h), and the
// routes the typed description gives the fields that choose a server (proto/calls.h, RoutesOf).
#include "client/visible_devices.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/calls.h"

namespace rgpu::client {
namespace {

std::string Uuid(unsigned char first, unsigned char last) {
  std::string u(16, '\0');
  u[0] = static_cast<char>(first);
  u[15] = static_cast<char>(last);
  return u;
}

const std::vector<std::string> kThree = {Uuid(0xab, 1), Uuid(0xab, 2), Uuid(0xcd, 3)};

TEST(VisibleDevicesTest, UuidTextIsNvidiaSmis) {
  EXPECT_EQ(DeviceUuidText(Uuid(0xab, 1)), "GPU-ab000000-0000-0000-0000-000000000001");
  EXPECT_EQ(DeviceUuidText("short"), "");
}

TEST(VisibleDevicesTest, IndicesSelectAndOrder) {
  EXPECT_EQ(SelectVisibleDevices("2,0", kThree), (std::vector<int>{2, 0}));
  EXPECT_EQ(SelectVisibleDevices(" 1 , 2 ", kThree), (std::vector<int>{1, 2}));
  EXPECT_EQ(SelectVisibleDevices("0,1,2", kThree), (std::vector<int>{0, 1, 2}));
}

TEST(VisibleDevicesTest, TheListEndsAtAnEntryThatNamesNoDeviceOrOneAgain) {
  EXPECT_EQ(SelectVisibleDevices("1,7,0", kThree), (std::vector<int>{1}));
  EXPECT_EQ(SelectVisibleDevices("1,x,0", kThree), (std::vector<int>{1}));
  EXPECT_EQ(SelectVisibleDevices("1,1,0", kThree), (std::vector<int>{1}));
  EXPECT_EQ(SelectVisibleDevices("-1", kThree), (std::vector<int>{}));
  EXPECT_EQ(SelectVisibleDevices("", kThree), (std::vector<int>{}));
  EXPECT_EQ(SelectVisibleDevices("99999999999", kThree), (std::vector<int>{}));
}

TEST(VisibleDevicesTest, UuidPrefixesSelectOneDeviceOrNone) {
  EXPECT_EQ(SelectVisibleDevices("GPU-cd,0", kThree), (std::vector<int>{2, 0}));
  EXPECT_EQ(SelectVisibleDevices(DeviceUuidText(kThree[1]), kThree), (std::vector<int>{1}));
  EXPECT_EQ(SelectVisibleDevices("GPU-ab", kThree), (std::vector<int>{}));  // two match
  EXPECT_EQ(SelectVisibleDevices("GPU-", kThree), (std::vector<int>{}));
  EXPECT_EQ(SelectVisibleDevices("GPU-ee", kThree), (std::vector<int>{}));
}

TEST(CallRoutesTest, FieldsThatChooseAServerAreDescribed) {
  using calls::Route;
  const calls::Routes create = calls::RoutesOf(Op::kCtxCreate);
  ASSERT_EQ(create.arg_count, 2u);
  EXPECT_EQ(create.args[0], Route::kNone);
  EXPECT_EQ(create.args[1], Route::kDevice);
  ASSERT_EQ(create.result_count, 1u);
  EXPECT_EQ(create.results[0], Route::kCtx);
  const calls::Routes peer = calls::RoutesOf(Op::kMemcpyPeer);
  ASSERT_GE(peer.arg_count, 4u);
  EXPECT_EQ(peer.args[1], Route::kCtx);
  EXPECT_EQ(peer.args[3], Route::kCtx);
  EXPECT_EQ(calls::RoutesOf(Op::kGraphLaunch).args[0], Route::kGraph);
  EXPECT_EQ(calls::RoutesOf(Op::kGraphRecord).results[0], Route::kGraph);
  EXPECT_EQ(calls::RoutesOf(Op::kMemPoolDestroy).args[0], Route::kPool);
  const calls::Routes import = calls::RoutesOf(Op::kMemPoolImport);
  ASSERT_EQ(import.result_count, 2u);
  EXPECT_EQ(import.results[0], Route::kPool);
  EXPECT_EQ(import.results[1], Route::kDevice);
  EXPECT_EQ(calls::RoutesOf(Op::kInvalid).arg_count, 0u);
}

}  // namespace
}  // namespace rgpu::client
