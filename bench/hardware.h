// The hardware catalog entry of a packet, collected from the running machine: host, CPU model and
// cores, memory, GPU (when fak was built with CUDA and a device is present), OS, compiler and
// library versions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace fak::bench {

nlohmann::json CollectHardware();

// The short host name, made safe for a path component.
std::string HostName();

// The 1, 5 and 15 minute load averages ("0.52 0.61 0.40"), from /proc/loadavg.
std::string LoadAverage();

}  // namespace fak::bench
