// The integrity-check answer: MD2 against RFC 1319's test suite, HMAC-MD2 against the RFC 2104
// construction computed independently here, and the layout of the hashed message.
#include <gtest/gtest.h>
#include <nettle/md2.h>

#include <cstring>
#include <string>

#include "client/integrity_check.h"

namespace rgpu::client {
namespace {

std::string Hex(const uint8_t* d, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, sizeof b, "%02x", d[i]);
    s += b;
  }
  return s;
}

std::string Md2Hex(const std::string& m) {
  md2_ctx c;
  uint8_t d[16];
  md2_init(&c);
  md2_update(&c, m.size(), reinterpret_cast<const uint8_t*>(m.data()));
  md2_digest(&c, 16, d);
  return Hex(d, 16);
}

TEST(Md2Test, Rfc1319Vectors) {
  EXPECT_EQ(Md2Hex(""), "8350e5a3e24c153df2275c9f80692773");
  EXPECT_EQ(Md2Hex("a"), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
  EXPECT_EQ(Md2Hex("abc"), "da853b0d3f88d99b30283a69e6ded6bb");
  EXPECT_EQ(Md2Hex("message digest"), "ab4f496bfb2a530b219ff33031fe06b0");
  EXPECT_EQ(Md2Hex("abcdefghijklmnopqrstuvwxyz"), "4e8ddff3650292ab5a4108c3aa47940b");
  EXPECT_EQ(
      Md2Hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
      "d5976f79d83d3a0dc9806c3c66f3efd8");
}

// RFC 2104 written out: H((K ^ opad) || H((K ^ ipad) || m)) with MD2's 16-byte block.
std::string ReferenceHmacMd2(const uint8_t* key, size_t key_size, const std::string& m) {
  uint8_t k[16] = {};
  memcpy(k, key, key_size);  // keys here are at most one block
  std::string inner, outer;
  for (uint8_t b : k) inner.push_back(static_cast<char>(b ^ 0x36));
  for (uint8_t b : k) outer.push_back(static_cast<char>(b ^ 0x5c));
  md2_ctx c;
  uint8_t d[16];
  md2_init(&c);
  inner += m;
  md2_update(&c, inner.size(), reinterpret_cast<const uint8_t*>(inner.data()));
  md2_digest(&c, 16, d);
  outer.append(reinterpret_cast<char*>(d), 16);
  md2_init(&c);
  md2_update(&c, outer.size(), reinterpret_cast<const uint8_t*>(outer.data()));
  md2_digest(&c, 16, d);
  return Hex(d, 16);
}

TEST(HmacMd2Test, MatchesRfc2104Construction) {
  const uint8_t key[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                           0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};
  for (std::string m : {std::string(), std::string("abc"), std::string(200, 'x')}) {
    uint8_t out[16];
    HmacMd2(key, sizeof key, m, out);
    EXPECT_EQ(Hex(out, 16), ReferenceHmacMd2(key, sizeof key, m)) << m.size();
  }
  const uint8_t short_key[4] = {'J', 'e', 'f', 'e'};
  uint8_t out[16];
  HmacMd2(short_key, 4, "what do ya want for nothing?", out);
  EXPECT_EQ(Hex(out, 16), ReferenceHmacMd2(short_key, 4, "what do ya want for nothing?"));
}

TEST(IntegrityCheckTest, MessageLayoutAndDeterminism) {
  IntegrityInput in = {};
  in.driver_version = 13000;
  in.version = 13002;
  in.pid = 1234;
  in.thread = 0xabcdef;
  in.cudart_interface_table = reinterpret_cast<const void*>(0x1000);
  in.integrity_table = reinterpret_cast<const void*>(0x2000);
  in.integrity_function = reinterpret_cast<const void*>(0x3000);
  in.unix_seconds = 1700000000;
  IntegrityDevice d = {};
  d.uuid[0] = 0x42;
  d.pci_bus = 3;
  in.devices.push_back(d);
  std::string m = IntegrityMessage(in);
  ASSERT_EQ(m.size(), 4 * 4 + 3 * 8 + 8 + 16 + 3 * 4);
  uint32_t v;
  memcpy(&v, m.data() + 4, 4);
  EXPECT_EQ(v, 13002u);
  EXPECT_EQ(static_cast<uint8_t>(m[48]), 0x42);
  uint64_t a[2], b[2];
  ComputeIntegrityCheck(in, a);
  ComputeIntegrityCheck(in, b);
  EXPECT_EQ(a[0], b[0]);
  in.version = 13001;
  ComputeIntegrityCheck(in, b);
  EXPECT_NE(a[0], b[0]);
}

}  // namespace
}  // namespace rgpu::client
