// What a program holds of something rgpu shares between its processes: the server's 32-byte key
// of an export (server/ipc_registry.h) carried in CUDA's 64-byte IPC handles (CUipcMemHandle,
// CUipcEventHandle, CUmemPoolPtrExportData) or in a file descriptor
// (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: a sealed memfd holding the same 64 bytes, which the
// program may pass to another process over a Unix socket as it would the driver's).
#pragma once

#include <cstdint>

#include "proto/calls.h"

namespace rgpu::client {

struct ShareKey {
  uint64_t words[4] = {};
};

// The server's key from a call's four key results.
template <typename Results>
ShareKey KeyFrom(const Results& r) {
  return ShareKey{{r.key0, r.key1, r.key2, r.key3}};
}

// `args` of a call that opens an export, with its four key fields set to `key`.
template <typename Args>
Args WithKey(Args args, const ShareKey& key) {
  args.key0 = key.words[0];
  args.key1 = key.words[1];
  args.key2 = key.words[2];
  args.key3 = key.words[3];
  return args;
}

// Writes `key` as a 64-byte handle into `handle`.
void EncodeHandle(const ShareKey& key, char handle[64]);
// The key in a 64-byte handle; false when the bytes are not a handle rgpu made.
bool DecodeHandle(const char handle[64], ShareKey* key);

// A memory handle for a piece of an exported allocation (a slab the client carves small
// allocations from, client/suballocator.h): the export's key, and the piece's offset in it and
// size; offset and size 0 for a whole allocation.
void EncodeMemoryHandle(const ShareKey& key, uint64_t offset, uint64_t size, char handle[64]);
// The same read back; false when the bytes are not a memory handle rgpu made.
bool DecodeMemoryHandle(const char handle[64], ShareKey* key, uint64_t* offset, uint64_t* size);

// A new file descriptor holding `key` (close-on-exec, sealed against change); -1 with errno set
// when none can be made.
int KeyToFd(const ShareKey& key);
// The key held by `fd`; false when it holds none (not a descriptor rgpu made).
bool KeyFromFd(int fd, ShareKey* key);

}  // namespace rgpu::client
