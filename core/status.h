// Status and Result<T>: recoverable errors that carry a message naming the file, offset or field.
// The library never exits or aborts on bad input; frontends turn a Status into an exit code or an
// HTTP error at the edge.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace fak {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a caller passed something wrong (CLI flag, request field)
  kNotFound,         // a file, tensor or key is missing
  kIoError,          // open/read/mmap failed
  kCorrupt,          // a file's bytes break its format's rules
  kUnsupported,      // well-formed but not something fak handles (yet)
  kOutOfRange,       // an index, size or count beyond a limit
  kInternal,         // a bug in fak
  kBusy,             // a resource is used up for now (a queue, memory): retry later
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: model.gguf: offset 24: tensor count 2^63 exceeds file size"
  std::string ToString() const;

  // Prepends context ("while reading X: ") to the message, keeping the code.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status IoError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kIoError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Corrupt(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kCorrupt, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Unsupported(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnsupported, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status OutOfRange(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kOutOfRange, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Busy(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kBusy, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(f, std::forward<Args>(args)...));
}

// Result<T>: a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace fak

#define FAK_CONCAT_INNER_(a, b) a##b
#define FAK_CONCAT_(a, b) FAK_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` is not ok.
#define FAK_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::fak::Status fak_status_ = (expr);        \
    if (!fak_status_.ok()) return fak_status_; \
  } while (0)

// FAK_ASSIGN_OR_RETURN(auto x, MakeX()); declares x from a Result or returns its Status.
#define FAK_ASSIGN_OR_RETURN(lhs, expr) \
  FAK_ASSIGN_OR_RETURN_IMPL_(FAK_CONCAT_(fak_result_, __LINE__), lhs, expr)
#define FAK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
