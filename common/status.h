// Status: the result of an operation that can fail, carried across layer boundaries instead of
// exceptions. A Status is either OK or holds a code and a human-readable message.
#pragma once

#include <string>
#include <utility>

namespace rgpu {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,    // the caller passed something malformed
    kNotFound,           // a named thing does not exist
    kUnavailable,        // the peer is gone or unreachable
    kTimeout,            // no answer within the allowed time
    kProtocol,           // the peer sent something this side does not understand
    kPermissionDenied,   // authentication or ownership check failed
    kResourceExhausted,  // a quota or bound was reached
    kInternal,           // a bug or an unexpected failure of a dependency
  };

  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", for logs.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Short constructors for the common codes.
inline Status InvalidArgument(std::string m) {
  return {Status::Code::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {Status::Code::kNotFound, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Status::Code::kUnavailable, std::move(m)}; }
inline Status Timeout(std::string m) { return {Status::Code::kTimeout, std::move(m)}; }
inline Status ProtocolError(std::string m) { return {Status::Code::kProtocol, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {Status::Code::kPermissionDenied, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {Status::Code::kResourceExhausted, std::move(m)};
}
inline Status Internal(std::string m) { return {Status::Code::kInternal, std::move(m)}; }

}  // namespace rgpu
