#pragma once

#include <string>

namespace fak::cli {

// "fak 0.1.0 (commit abc123)\ncpu backends: ...\ngpu backends: ...\n"
std::string VersionText();

}  // namespace fak::cli
