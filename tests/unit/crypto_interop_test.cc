// The client's crypto (proto/crypto_nettle.cc, Nettle) must compute exactly what the server's
// (proto/crypto.cc, OpenSSL) does: a tenant's proof made with one is checked with the other. This
// test links the Nettle implementation and checks every primitive against OpenSSL called directly.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <string>

#include "proto/crypto.h"

namespace rgpu {
namespace {

const unsigned char* U(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

std::string OpenSslHmac(const std::string& key, const std::string& data) {
  unsigned char mac[32];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), U(data), data.size(), mac, &n);
  return std::string(reinterpret_cast<char*>(mac), n);
}

std::string OpenSslSha256(const std::string& data) {
  unsigned char d[32];
  SHA256(U(data), data.size(), d);
  return std::string(reinterpret_cast<char*>(d), 32);
}

EVP_PKEY* OpenSslKey(const std::string& raw, bool is_private) {
  return is_private ? EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, U(raw), raw.size())
                    : EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, U(raw), raw.size());
}

std::string OpenSslSign(const std::string& private_raw, const std::string& message) {
  EVP_PKEY* key = OpenSslKey(private_raw, true);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char sig[64];
  size_t n = sizeof sig;
  const bool ok = EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
                  EVP_DigestSign(ctx, sig, &n, U(message), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok ? std::string(reinterpret_cast<char*>(sig), n) : "";
}

bool OpenSslVerify(const std::string& public_raw, const std::string& message,
                   const std::string& signature) {
  EVP_PKEY* key = OpenSslKey(public_raw, false);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok =
      key && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key) == 1 &&
      EVP_DigestVerify(ctx, U(signature), signature.size(), U(message), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok;
}

TEST(CryptoInterop, HmacAndShaMatchOpenSsl) {
  for (size_t len : {0u, 1u, 55u, 64u, 65u, 1000u}) {
    const std::string data = RandomBytes(len);
    const std::string key = RandomBytes(32);
    ASSERT_EQ(data.size(), len);
    EXPECT_EQ(Sha256(data), OpenSslSha256(data)) << len;
    EXPECT_EQ(HmacSha256(key, data), OpenSslHmac(key, data)) << len;
  }
  // A long key is hashed first (RFC 2104); both must agree on that too.
  const std::string long_key(100, 'k');
  EXPECT_EQ(HmacSha256(long_key, "x"), OpenSslHmac(long_key, "x"));
}

TEST(CryptoInterop, Ed25519SignaturesCrossVerify) {
  std::string priv, pub;
  ASSERT_TRUE(GenerateEd25519(&priv, &pub).ok());
  ASSERT_EQ(priv.size(), 32u);
  ASSERT_EQ(pub.size(), 32u);

  // The public key derived by Nettle is OpenSSL's.
  EVP_PKEY* key = OpenSslKey(priv, true);
  ASSERT_NE(key, nullptr);
  unsigned char ossl_pub[32];
  size_t n = sizeof ossl_pub;
  ASSERT_EQ(EVP_PKEY_get_raw_public_key(key, ossl_pub, &n), 1);
  EVP_PKEY_free(key);
  EXPECT_EQ(pub, std::string(reinterpret_cast<char*>(ossl_pub), n));
  std::string derived;
  ASSERT_TRUE(Ed25519PublicKey(priv, &derived).ok());
  EXPECT_EQ(derived, pub);

  const std::string message = "challenge" + RandomBytes(32);
  std::string signature;
  ASSERT_TRUE(SignEd25519(priv, message, &signature).ok());
  // Ed25519 is deterministic: both libraries produce the same signature.
  EXPECT_EQ(signature, OpenSslSign(priv, message));
  EXPECT_TRUE(OpenSslVerify(pub, message, signature));
  EXPECT_TRUE(VerifyEd25519(pub, message, OpenSslSign(priv, message)));

  // A changed message or signature is refused by both.
  std::string bad = signature;
  bad[7] ^= 1;
  EXPECT_FALSE(VerifyEd25519(pub, message, bad));
  EXPECT_FALSE(OpenSslVerify(pub, message, bad));
  EXPECT_FALSE(VerifyEd25519(pub, message + "x", signature));
  EXPECT_FALSE(VerifyEd25519(pub, message, signature.substr(0, 63)));
  EXPECT_FALSE(VerifyEd25519(pub.substr(0, 31), message, signature));
  EXPECT_FALSE(Ed25519PublicKey("short", &derived).ok());
}

TEST(CryptoInterop, Base64UrlMatchesOpenSslWithoutPadding) {
  for (size_t len : {0u, 1u, 2u, 3u, 31u, 32u, 33u}) {
    const std::string data = RandomBytes(len);
    std::string ossl(4 * ((len + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(ossl.data()), U(data),
                                  static_cast<int>(len));
    ossl.resize(n);
    while (!ossl.empty() && ossl.back() == '=') ossl.pop_back();
    for (char& c : ossl) c = c == '+' ? '-' : c == '/' ? '_' : c;
    EXPECT_EQ(Base64UrlEncode(data), ossl) << len;
    std::string back;
    ASSERT_TRUE(Base64UrlDecode(ossl, &back)) << len;
    EXPECT_EQ(back, data);
  }
  std::string out;
  EXPECT_FALSE(Base64UrlDecode("ab+/", &out));  // standard alphabet, not url
  EXPECT_FALSE(Base64UrlDecode("a", &out));     // impossible length
  EXPECT_FALSE(Base64UrlDecode("ab$d", &out));
}

TEST(CryptoInterop, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace rgpu
