// Leveled logging to stderr. FAK_LOG=debug|info|warn|error sets the threshold (default info).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace fak {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError, kOff };

LogLevel GetLogLevel();
void SetLogLevel(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < GetLogLevel()) return;
  LogLine(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace fak

#define FAK_LOG_DEBUG(...) ::fak::Log(::fak::LogLevel::kDebug, __VA_ARGS__)
#define FAK_LOG_INFO(...) ::fak::Log(::fak::LogLevel::kInfo, __VA_ARGS__)
#define FAK_LOG_WARN(...) ::fak::Log(::fak::LogLevel::kWarn, __VA_ARGS__)
#define FAK_LOG_ERROR(...) ::fak::Log(::fak::LogLevel::kError, __VA_ARGS__)
