// fak bench validate: checks a packet's schema, the SHA-256 of every file it references, and its
// internal consistency (numbers recomputed from the raw samples, p50 <= p95, decomposition sums,
// sample counts, quality verdicts against their evidence, ratios). Every violation is listed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fak::bench {

struct ValidationReport {
  bool valid = false;
  std::string packet_sha256;
  std::vector<std::string> violations;  // each names the file and field

  // {"schema":"fak.bench.comparison.validation.v1","valid":...,"packet_sha256":"...", "violations": [...]}
  nlohmann::ordered_json ToJson() const;
};

ValidationReport ValidatePacket(const std::string& packet_path);

}  // namespace fak::bench
