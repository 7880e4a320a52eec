#include "client/shareable_handle.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rgpu::client {
namespace {

// Marks a handle or descriptor as rgpu's (and the layout's version).
constexpr char kMagic[8] = {'r', 'g', 'p', 'u', 'I', 'P', 'C', 1};
constexpr size_t kHandleBytes = 64;

}  // namespace

void EncodeHandle(const ShareKey& key, char handle[64]) {
  memset(handle, 0, kHandleBytes);
  memcpy(handle, kMagic, sizeof kMagic);
  memcpy(handle + sizeof kMagic, key.words, sizeof key.words);
}

bool DecodeHandle(const char handle[64], ShareKey* key) {
  if (memcmp(handle, kMagic, sizeof kMagic) != 0) return false;
  for (size_t i = sizeof kMagic + sizeof key->words; i < kHandleBytes; ++i) {
    if (handle[i] != 0) return false;
  }
  memcpy(key->words, handle + sizeof kMagic, sizeof key->words);
  return true;
}

int KeyToFd(const ShareKey& key) {
  const int fd = memfd_create("rgpu-shareable-handle", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  char bytes[kHandleBytes];
  EncodeHandle(key, bytes);
  if (pwrite(fd, bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes) ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

bool KeyFromFd(int fd, ShareKey* key) {
  if (fd < 0) return false;
  char bytes[kHandleBytes + 1];
  const ssize_t n = pread(fd, bytes, sizeof bytes, 0);
  return n == static_cast<ssize_t>(kHandleBytes) && DecodeHandle(bytes, key);
}

}  // namespace rgpu::client
