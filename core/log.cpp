#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace fak {
namespace {

LogLevel LevelFromEnv() {
  const char* s = std::getenv("FAK_LOG");
  if (s == nullptr) return LogLevel::kInfo;
  if (std::strcmp(s, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(s, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(s, "error") == 0) return LogLevel::kError;
  if (std::strcmp(s, "off") == 0) return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& Level() {
  static std::atomic<LogLevel> level{LevelFromEnv()};
  return level;
}

const char* Tag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "";
  }
  return "";
}

}  // namespace

LogLevel GetLogLevel() { return Level().load(std::memory_order_relaxed); }
void SetLogLevel(LogLevel level) { Level().store(level, std::memory_order_relaxed); }

void LogLine(LogLevel level, std::string_view message) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "fak %s: %.*s\n", Tag(level), static_cast<int>(message.size()), message.data());
}

}  // namespace fak
