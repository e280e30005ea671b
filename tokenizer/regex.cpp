#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>  // pcre2_compile, pcre2_jit_compile, pcre2_jit_match

namespace fak {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

struct ThreadMatchData {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  ThreadMatchData() {
    data = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchData() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

ThreadMatchData& GetThreadMatchData() {
  thread_local ThreadMatchData md;
  return md;
}

// Length of the UTF-8 character whose lead byte is b (the subject is valid UTF-8).
size_t Utf8CharLen(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

}  // namespace

Regex::Regex() = default;
Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

Result<Regex> Regex::Compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(error, buf, sizeof(buf));
    return InvalidArgument("regex '{}': offset {}: {}", pattern, error_offset,
                           reinterpret_cast<const char*>(buf));
  }
  Regex r;
  r.code_ = std::make_unique<Code>();
  r.code_->code = code;
  r.code_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  r.pattern_ = pattern;
  return r;
}

void Regex::FindAll(std::string_view subject, std::vector<Match>* matches) const {
  matches->clear();
  ThreadMatchData& md = GetThreadMatchData();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    const int rc =
        code_->jit
            ? pcre2_jit_match(code_->code, s, subject.size(), pos, PCRE2_NO_UTF_CHECK, md.data, md.context)
            : pcre2_match(code_->code, s, subject.size(), pos, PCRE2_NO_UTF_CHECK, md.data, md.context);
    if (rc < 0) break;  // no further match (or a resource limit): the rest is unmatched
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end < begin) break;  // \K games; never in tokenizer patterns
    matches->push_back(Match{begin, end});
    if (end > begin) {
      pos = end;
    } else {
      if (begin >= subject.size()) break;
      pos = begin + Utf8CharLen(static_cast<uint8_t>(subject[begin]));
    }
  }
}

}  // namespace fak
