// The JIT linker on the server (server/session_link.cc), spoken raw: the backend's linker writes
// into the addresses its options name, so an option carrying an address (a log buffer, symbol
// tables) is refused rather than handed to it; a state's inputs together are bounded like a
// module; link states are bounded in number; another session's link state is refused; an image
// is read only once linked, at its exact size.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

const char kPtx[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry nothing() { ret; }\n";

std::string Options(std::vector<std::pair<uint64_t, uint64_t>> pairs) {
  std::string out;
  for (auto [option, value] : pairs) {
    out.append(reinterpret_cast<const char*>(&option), 8);
    out.append(reinterpret_cast<const char*>(&value), 8);
  }
  return out;
}

class ServerLinkTest : public test::RawServerTest {
 protected:
  ServerLinkTest() {
    options_.session_limits.max_module_bytes = 4096;
    options_.session_limits.max_links = 4;
  }
  // A new link state with `options`; 0 when refused (*result says why).
  static uint64_t Create(Channel* ch, uint64_t ctx, const std::string& options = "",
                         int* result = nullptr) {
    wire::Envelope r = Exchange(ch, Call(60, Op::kLinkCreate, ctx, {}), options);
    if (result != nullptr) *result = r.reply().result();
    return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
  }
  static int Add(Channel* ch, uint64_t ctx, uint64_t link, const std::string& data) {
    return Result(ch, Call(61, Op::kLinkAddData, ctx, {link, CU_JIT_INPUT_PTX}), data);
  }
};

TEST_F(ServerLinkTest, OptionsThatCarryAddressesAreRefused) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  // An "error log buffer" at an address of the server's: the linker would write its log there.
  char server_memory[64];
  const uint64_t address = reinterpret_cast<uintptr_t>(server_memory);
  for (uint64_t option : {uint64_t{CU_JIT_ERROR_LOG_BUFFER}, uint64_t{CU_JIT_INFO_LOG_BUFFER},
                          uint64_t{CU_JIT_WALL_TIME}, uint64_t{CU_JIT_GLOBAL_SYMBOL_ADDRESSES},
                          uint64_t{CU_JIT_GLOBAL_SYMBOL_NAMES}, uint64_t{999}}) {
    int result = 0;
    EXPECT_EQ(Create(ch.get(), ctx, Options({{option, address}, {option + 1, 64}}), &result), 0u)
        << "option " << option;
    EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  }
  int result = 0;
  EXPECT_EQ(Create(ch.get(), ctx, "short", &result), 0u) << "a payload that is not pairs";
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  // Scalar options pass.
  EXPECT_NE(
      Create(ch.get(), ctx, Options({{CU_JIT_OPTIMIZATION_LEVEL, 3}, {CU_JIT_LOG_VERBOSE, 1}})),
      0u);
}

TEST_F(ServerLinkTest, InputsAndStatesAreBounded) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t link = Create(ch.get(), ctx);
  ASSERT_NE(link, 0u);
  EXPECT_EQ(Add(ch.get(), ctx, link, kPtx), CUDA_SUCCESS);
  // 4096 bytes in all: a second input that would pass the bound is refused.
  std::string big(4096 - (sizeof kPtx - 1) + 1, ' ');
  EXPECT_EQ(Add(ch.get(), ctx, link, big), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(Add(ch.get(), ctx, link, ""), CUDA_ERROR_INVALID_VALUE);
  for (int i = 1; i < 4; ++i) EXPECT_NE(Create(ch.get(), ctx), 0u);
  int result = 0;
  EXPECT_EQ(Create(ch.get(), ctx, "", &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Result(ch.get(), Call(62, Op::kLinkDestroy, ctx, {link})), CUDA_SUCCESS);
  EXPECT_NE(Create(ch.get(), ctx), 0u);
}

TEST_F(ServerLinkTest, AnotherSessionsLinkIsRefusedAndImagesAreReadWhole) {
  auto alice = Connect();
  auto bob = Connect();
  const uint64_t a = OpenSession(alice.get());
  const uint64_t b = OpenSession(bob.get());
  const uint64_t bobs = Create(bob.get(), b);
  ASSERT_NE(bobs, 0u);
  ASSERT_EQ(Add(bob.get(), b, bobs, kPtx), CUDA_SUCCESS);
  // Alice's session has no link state with bob's id.
  EXPECT_EQ(Add(alice.get(), a, bobs, kPtx), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(Result(alice.get(), Call(63, Op::kLinkComplete, a, {bobs})), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(Result(alice.get(), Call(64, Op::kLinkDestroy, a, {bobs})), CUDA_ERROR_INVALID_HANDLE);
  // Bob's image: not before it is linked, and only at its size.
  EXPECT_EQ(Result(bob.get(), Call(65, Op::kLinkGetImage, b, {bobs, 16})),
            CUDA_ERROR_INVALID_VALUE);
  wire::Envelope r = Exchange(bob.get(), Call(66, Op::kLinkComplete, b, {bobs}));
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
  const uint64_t bytes = r.reply().values(0);
  ASSERT_GT(bytes, 0u);
  EXPECT_EQ(Result(bob.get(), Call(67, Op::kLinkGetImage, b, {bobs, bytes + 1})),
            CUDA_ERROR_INVALID_VALUE);
  std::string image;
  r = Exchange(bob.get(), Call(68, Op::kLinkGetImage, b, {bobs, bytes}), "", &image);
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(image.size(), bytes);
  EXPECT_NE(image.find("nothing"), std::string::npos);
  // Inputs after completion are refused.
  EXPECT_EQ(Add(bob.get(), b, bobs, kPtx), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(bob.get(), Call(69, Op::kLinkDestroy, b, {bobs})), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
