#include "apps/fak/flag_lists.h"

namespace fak::cli {

Result<std::vector<int64_t>> ParseCountList(const std::string& flag, const std::string& list, int64_t min) {
  constexpr int64_t kMax = 1'000'000'000;
  std::vector<int64_t> out;
  for (size_t i = 0; i <= list.size();) {
    size_t j = list.find(',', i);
    if (j == std::string::npos) j = list.size();
    const std::string item = list.substr(i, j - i);
    int64_t v = 0;
    bool ok = !item.empty() && item.size() <= 10;  // 10 digits cannot overflow
    for (size_t k = 0; ok && k < item.size(); ++k) {
      const char c = item[k];
      ok = c >= '0' && c <= '9';
      if (ok) v = v * 10 + (c - '0');
    }
    if (!ok || v < min || v > kMax) {
      return InvalidArgument("{}: '{}' is not a whole number from {} to {} (in '{}')", flag, item, min, kMax,
                             list);
    }
    out.push_back(v);
    i = j + 1;
  }
  return out;
}

}  // namespace fak::cli
