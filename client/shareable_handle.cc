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

void EncodeMemoryHandle(const ShareKey& key, uint64_t offset, uint64_t size, char handle[64]) {
  EncodeHandle(key, handle);
  memcpy(handle + sizeof kMagic + sizeof key.words, &offset, sizeof offset);
  memcpy(handle + sizeof kMagic + sizeof key.words + sizeof offset, &size, sizeof size);
}

bool DecodeMemoryHandle(const char handle[64], ShareKey* key, uint64_t* offset, uint64_t* size) {
  constexpr size_t kPiece = sizeof kMagic + sizeof key->words;
  char plain[kHandleBytes];
  memcpy(plain, handle, kHandleBytes);
  memcpy(offset, handle + kPiece, sizeof *offset);
  memcpy(size, handle + kPiece + sizeof *offset, sizeof *size);
  memset(plain + kPiece, 0, 2 * sizeof(uint64_t));  // the rest must be a plain handle
  return DecodeHandle(plain, key);
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
