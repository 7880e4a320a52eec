#include "client/integrity_check.h"

#include <nettle/hmac.h>
#include <nettle/md2.h>

#include <cstring>

namespace rgpu::client {
namespace {

constexpr uint8_t kKey[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                              0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

template <typename T>
void Append(std::string* s, const T& value) {
  s->append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

std::string IntegrityMessage(const IntegrityInput& in) {
  std::string m;
  Append(&m, in.driver_version);
  Append(&m, in.version);
  Append(&m, in.pid);
  Append(&m, in.thread);
  Append(&m, in.cudart_interface_table);
  Append(&m, in.integrity_table);
  Append(&m, in.integrity_function);
  Append(&m, in.unix_seconds);
  for (const IntegrityDevice& d : in.devices) {
    m.append(reinterpret_cast<const char*>(d.uuid), sizeof d.uuid);
    Append(&m, d.pci_domain);
    Append(&m, d.pci_bus);
    Append(&m, d.pci_device);
  }
  return m;
}

void HmacMd2(const uint8_t* key, size_t key_size, const std::string& message, uint8_t out[16]) {
  struct md2_ctx outer, inner, state;
  hmac_set_key(&outer, &inner, &state, &nettle_md2, key_size, key);
  hmac_update(&state, &nettle_md2, message.size(),
              reinterpret_cast<const uint8_t*>(message.data()));
  hmac_digest(&outer, &inner, &state, &nettle_md2, MD2_DIGEST_SIZE, out);
}

void ComputeIntegrityCheck(const IntegrityInput& input, uint64_t out[2]) {
  uint8_t digest[16];
  HmacMd2(kKey, sizeof kKey, IntegrityMessage(input), digest);
  memcpy(out, digest, sizeof digest);
}

}  // namespace rgpu::client
