// Comma-separated number lists on the command line ("-p 128,512", "-b 1,8,32"), read strictly: every
// item a whole number of digits within [min, 1e9], no signs, spaces, suffixes or empty items, so a
// typo is an error that names the flag and the item rather than a silent 0, a truncation or a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace fak::cli {

Result<std::vector<int64_t>> ParseCountList(const std::string& flag, const std::string& list, int64_t min);

}  // namespace fak::cli
