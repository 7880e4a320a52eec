#include "registry/operator_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "registry/keys.h"

namespace rgpu::registry {
namespace {

std::string Trimmed(std::string s) {
  const size_t end = s.find_last_not_of(" \t\r\n");
  s.resize(end == std::string::npos ? 0 : end + 1);
  const size_t start = s.find_first_not_of(" \t\r\n");
  return start == std::string::npos ? "" : s.substr(start);
}

// Writes a new key to a temporary file beside `path` and links it into place, so that a reader
// never sees a half-written key; EEXIST when another process linked its key first.
Status Create(const std::string& path, std::string* key, bool* lost_race) {
  *lost_race = false;
  std::string tmp = path + ".XXXXXX";
  const int fd = mkstemp(tmp.data());  // mode 0600
  if (fd < 0) return Unavailable("cannot create a file beside " + path + ": " + strerror(errno));
  const std::string text = NewKey("rgpu-a-") + "\n";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       fchmod(fd, 0600) == 0 && fsync(fd) == 0;
  const bool closed = close(fd) == 0;
  if (!written || !closed) {
    unlink(tmp.c_str());
    return Unavailable("cannot write " + tmp);
  }
  const int linked = link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  unlink(tmp.c_str());
  if (linked != 0) {
    *lost_race = link_errno == EEXIST;
    return Unavailable("cannot create " + path + ": " + strerror(link_errno));
  }
  *key = Trimmed(text);
  return Status::Ok();
}

}  // namespace

Status LoadOrCreateOperatorKey(const std::string& path, std::string* key, bool* created) {
  *created = false;
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    bool lost_race = false;
    Status s = Create(path, key, &lost_race);
    *created = s.ok();
    if (!lost_race) return s;
    fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);  // another process's key
  }
  if (fd < 0) return Unavailable("cannot open " + path + ": " + strerror(errno));
  struct stat st;
  std::string text;
  Status status;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = PermissionDenied(path + " is not a regular file");
  } else if (st.st_uid != geteuid()) {
    status = PermissionDenied(path + " belongs to another user");
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    status = PermissionDenied(path + " may be read or written by others (mode " + mode +
                              "): chmod 600 " + path);
  } else if (st.st_size > 4096) {
    status = InvalidArgument(path + " is too large to be a key");
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t got = read(fd, text.data(), text.size());
    if (got != static_cast<ssize_t>(text.size())) status = Unavailable("cannot read " + path);
  }
  close(fd);
  if (!status.ok()) return status;
  *key = Trimmed(text);
  if (key->size() < 16) return InvalidArgument(path + " holds no key of at least 16 characters");
  return Status::Ok();
}

}  // namespace rgpu::registry
