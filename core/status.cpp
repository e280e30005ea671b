#include "core/status.h"

namespace fak {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kBusy: return "busy";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", StatusCodeName(code_), message_);
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace fak
