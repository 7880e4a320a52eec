// The client's rule for a server's redirect to a session's process (client/session_host_url.h):
// over tls:// it requires the host's own key, named by the redirect, and never the server's.
#include "client/session_host_url.h"

#include <gtest/gtest.h>

namespace rgpu::client {
namespace {

const std::string kServerPin(64, 'a');
const std::string kHostPin(64, 'b');

TransportUrl Url(const std::string& text) {
  TransportUrl url;
  EXPECT_TRUE(TransportUrl::Parse(text, &url).ok()) << text;
  return url;
}

wire::Welcome Redirect(uint32_t port, const std::string& pin) {
  wire::Welcome w;
  w.set_redirect_port(port);
  w.set_redirect_token("credential");
  w.set_redirect_pin(pin);
  return w;
}

TEST(SessionHostUrlTest, OverTlsTheHostsOwnKeyIsRequired) {
  TransportUrl host;
  ASSERT_TRUE(
      SessionHostUrl(Url("tls://10.0.0.1:7000#" + kServerPin), Redirect(7100, kHostPin), &host)
          .ok());
  EXPECT_EQ(host.scheme, TransportUrl::Scheme::kTls);
  EXPECT_EQ(host.host, "10.0.0.1");
  EXPECT_EQ(host.port, 7100);
  EXPECT_EQ(host.pin, kHostPin);
  // A client that checked the server's certificate against a CA (no pin) pins the host's key.
  ASSERT_TRUE(SessionHostUrl(Url("tls://10.0.0.1:7000"), Redirect(7100, kHostPin), &host).ok());
  EXPECT_EQ(host.pin, kHostPin);
}

TEST(SessionHostUrlTest, ATlsRedirectThatNamesNoKeyIsRefused) {
  // Without the host's pin the client would require the server's key (which no host holds) or,
  // without a pin of its own, any certificate its CAs accept.
  TransportUrl host;
  EXPECT_EQ(
      SessionHostUrl(Url("tls://10.0.0.1:7000#" + kServerPin), Redirect(7100, ""), &host).code(),
      Status::Code::kProtocol);
  EXPECT_EQ(SessionHostUrl(Url("tls://10.0.0.1:7000"), Redirect(7100, ""), &host).code(),
            Status::Code::kProtocol);
}

TEST(SessionHostUrlTest, OtherSchemesKeepTheServersHostAndScheme) {
  TransportUrl host;
  ASSERT_TRUE(SessionHostUrl(Url("tcp://10.0.0.1:7000"), Redirect(7100, ""), &host).ok());
  EXPECT_EQ(host.ToString(), "tcp://10.0.0.1:7100");
  // A pin means nothing there and is not carried.
  ASSERT_TRUE(SessionHostUrl(Url("sock://10.0.0.1:7000"), Redirect(7100, kHostPin), &host).ok());
  EXPECT_EQ(host.ToString(), "sock://10.0.0.1:7100");
}

TEST(SessionHostUrlTest, APortOutsideTheRangeIsRefused) {
  TransportUrl host;
  EXPECT_FALSE(SessionHostUrl(Url("tcp://10.0.0.1:7000"), Redirect(0, ""), &host).ok());
  EXPECT_FALSE(SessionHostUrl(Url("tcp://10.0.0.1:7000"), Redirect(65536, ""), &host).ok());
}

}  // namespace
}  // namespace rgpu::client
