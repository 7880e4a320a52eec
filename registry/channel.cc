#include "registry/channel.h"

#include <fstream>
#include <sstream>

namespace rgpu::registry {

Status OpenChannel(const std::string& address, const std::string& tls_ca_path,
                   std::shared_ptr<grpc::Channel>* channel) {
  if (address.empty()) return InvalidArgument("no registry address given (HOST:PORT)");
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls_ca_path.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    std::ifstream file(tls_ca_path);
    if (!file) return NotFound("cannot read CA certificate " + tls_ca_path);
    std::stringstream pem;
    pem << file.rdbuf();
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(options);
  }
  grpc::ChannelArguments args;
  // Reconnect within a second or two of a registry restart (gRPC's default backoff grows to 2 min).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  *channel = grpc::CreateCustomChannel(address, credentials, args);
  return Status::Ok();
}

Status FromGrpc(const grpc::Status& status, const std::string& address) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable("registry at " + address + " unreachable: " + status.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Timeout("registry at " + address + " did not answer in time");
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return InvalidArgument(status.error_message());
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(status.error_message());
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return PermissionDenied(status.error_message());
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return ResourceExhausted(status.error_message());
    default:
      return Internal(status.error_message());
  }
}

}  // namespace rgpu::registry
