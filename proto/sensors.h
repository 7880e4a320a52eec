// DeviceSensors (proto/calls.def): the bit of `known` that says a field holds a reading.
#pragma once

#include <cstdint>

namespace rgpu::calls {

enum SensorBit : uint32_t {
  kSensorTemperature = 1u << 0,       // temperature_c: the GPU die, degrees Celsius
  kSensorPower = 1u << 1,             // power_mw: the board's draw, milliwatts
  kSensorPowerLimit = 1u << 2,        // power_limit_mw: the enforced limit, milliwatts
  kSensorGraphicsClock = 1u << 3,     // graphics_mhz: current
  kSensorSmClock = 1u << 4,           // sm_mhz: current
  kSensorMemoryClock = 1u << 5,       // memory_mhz: current
  kSensorFan = 1u << 6,               // fan_percent: of its maximum speed
  kSensorPerformanceState = 1u << 7,  // performance_state: 0 (P0) to 15, as nvmlPstates_t
};

}  // namespace rgpu::calls
