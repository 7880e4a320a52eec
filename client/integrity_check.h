// The answer to NVIDIA's runtime integrity check (export table INTEGRITY_CHECK, slot 1), as
// recorded in ../shared/notes/cuda-driver-contract.md: HMAC-MD2 with a fixed key over the driver
// version, the check's version argument, the process and thread ids, the addresses of the tables
// handed out, the time argument and each device's UUID and PCI location. It covers addresses and
// ids of the tenant's process, so it is computed here, from what the server reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rgpu::client {

// What one device contributes to the check.
struct IntegrityDevice {
  uint8_t uuid[16];
  int32_t pci_domain;
  int32_t pci_bus;
  int32_t pci_device;
};

// Everything the check covers, in the order it is hashed.
struct IntegrityInput {
  uint32_t driver_version;
  uint32_t version;
  uint32_t pid;
  uint32_t thread;
  const void* cudart_interface_table;
  const void* integrity_table;
  const void* integrity_function;
  uint64_t unix_seconds;
  std::vector<IntegrityDevice> devices;
};

// The bytes the HMAC covers.
std::string IntegrityMessage(const IntegrityInput& input);

// HMAC-MD2 (RFC 2104 over RFC 1319's MD2) of `message` under `key`; 16 bytes.
void HmacMd2(const uint8_t* key, size_t key_size, const std::string& message, uint8_t out[16]);

// The check's answer: HMAC-MD2 of IntegrityMessage under the runtime's fixed key.
void ComputeIntegrityCheck(const IntegrityInput& input, uint64_t out[2]);

}  // namespace rgpu::client
