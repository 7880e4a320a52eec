// TokenSigner (registry/token_signer.h) makes the tokens proto/signed_token.h defines.
#include "registry/token_signer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "proto/signed_token.h"

namespace rgpu::registry {
namespace {

TEST(TokenSigner, SignsWhatTheVerifierAccepts) {
  char dir[] = "/tmp/rgpu-signer-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  ASSERT_TRUE(GenerateTokenKeys(d + "/key.pem", d + "/key.pub").ok());
  TokenSigner signer;
  ASSERT_TRUE(TokenSigner::Load(d + "/key.pem", &signer).ok());
  wire::TokenClaims claims;
  claims.set_tenant("alice");
  claims.set_server("host1");
  claims.add_gpus(0);
  claims.set_memory_quota(1ull << 30);
  claims.set_weight(2);
  claims.set_expires_unix(1800000000);
  std::string token, reference;
  ASSERT_TRUE(signer.Sign(claims, &token).ok());
  // Ed25519 is deterministic: the same key and claims give SignToken's token exactly.
  ASSERT_TRUE(SignToken(claims, d + "/key.pem", &reference).ok());
  EXPECT_EQ(token, reference);
  TokenVerifier verifier;
  ASSERT_TRUE(TokenVerifier::FromPublicKeyFile(d + "/key.pub", &verifier).ok());
  wire::TokenClaims back;
  ASSERT_TRUE(verifier.Verify(token, &back).ok());
  EXPECT_EQ(back.tenant(), "alice");
  EXPECT_EQ(back.memory_quota(), 1ull << 30);
  // Bad keys are refused clearly.
  TokenSigner other;
  EXPECT_EQ(TokenSigner::Load(d + "/missing.pem", &other).code(), Status::Code::kNotFound);
  EXPECT_EQ(TokenSigner::Load(d + "/key.pub", &other).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(other.Sign(claims, &token).code(), Status::Code::kInternal);
  unlink((d + "/key.pem").c_str());
  unlink((d + "/key.pub").c_str());
  rmdir(d.c_str());
}

}  // namespace
}  // namespace rgpu::registry
