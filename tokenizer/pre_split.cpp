#include "tokenizer/pre_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>  // pcre2_compile, pcre2_jit_compile, pcre2_jit_match

namespace fak {

// HuggingFace's ByteLevel pattern (GPT-2).
const char kGpt2SplitPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Llama 3 and its relatives (llama-bpe, dbrx, smaug).
const char kLlama3Pattern[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2, Qwen2.5, Qwen3: as in their tokenizer.json.
const char kQwen2Pattern[] = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
                             R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Falcon: punctuation runs (Unicode P plus the ASCII symbols HF counts as punctuation), then the
// ByteLevel regex, then runs of three digits.
const char kFalconPunctPattern[] = R"([\p{P}\$\+<=>\^~\|`]+)";
const char kThreeDigitsPattern[] = R"([0-9][0-9][0-9])";

}  // namespace

Result<std::vector<std::string>> PreSplitPatternsForGgufPre(std::string_view pre) {
  if (pre == "gpt-2" || pre == "default" || pre == "gpt2" || pre == "mpt" || pre == "olmo" || pre == "jais") {
    return std::vector<std::string>{kGpt2SplitPattern};
  }
  if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe") {
    return std::vector<std::string>{kLlama3Pattern};
  }
  if (pre == "qwen2" || pre == "stablelm2" || pre == "qwen35") {
    return std::vector<std::string>{kQwen2Pattern};
  }
  if (pre == "falcon") {
    return std::vector<std::string>{kFalconPunctPattern, kGpt2SplitPattern, kThreeDigitsPattern};
  }
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm") {
    return std::vector<std::string>{R"(\p{N})", kGpt2SplitPattern};
  }
  return NotFound("unknown pre-tokenizer '{}' (tokenizer.ggml.pre)", pre);
}

struct PreSplitter::Impl {
  struct Pattern {
    pcre2_code* code = nullptr;
    bool jit = false;
  };
  std::vector<Pattern> patterns;

  ~Impl() {
    for (Pattern& p : patterns) pcre2_code_free(p.code);
  }
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

// Length of the UTF-8 character whose lead byte is b (input is valid UTF-8).
size_t Utf8CharLen(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

}  // namespace

PreSplitter::PreSplitter() : impl_(std::make_unique<Impl>()) {}
PreSplitter::~PreSplitter() = default;
PreSplitter::PreSplitter(PreSplitter&&) noexcept = default;
PreSplitter& PreSplitter::operator=(PreSplitter&&) noexcept = default;

size_t PreSplitter::num_patterns() const { return impl_->patterns.size(); }

Result<PreSplitter> PreSplitter::Create(const std::vector<std::string>& patterns) {
  PreSplitter s;
  for (const std::string& pattern : patterns) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(error, buf, sizeof(buf));
      return InvalidArgument("pre-tokenizer regex '{}': offset {}: {}", pattern, error_offset,
                             reinterpret_cast<const char*>(buf));
    }
    Impl::Pattern p;
    p.code = code;
    p.jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    s.impl_->patterns.push_back(p);
  }
  return s;
}

void PreSplitter::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  ThreadMatchData& md = GetThreadMatchData();
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t pi = 0; pi < impl_->patterns.size(); ++pi) {
    const Impl::Pattern& p = impl_->patterns[pi];
    std::vector<std::string_view>& out = (pi + 1 == impl_->patterns.size()) ? *pieces : next;
    for (std::string_view piece : current) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0;
      size_t emitted = 0;  // end of the last piece appended
      while (pos < piece.size()) {
        const int rc =
            p.jit
                ? pcre2_jit_match(p.code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md.data, md.context)
                : pcre2_match(p.code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md.data, md.context);
        if (rc < 0) break;  // no further match (or a resource limit): the rest is one gap
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
        const size_t start = ov[0];
        const size_t end = ov[1];
        if (end == start) {  // empty match: step over one character
          pos = start + Utf8CharLen(static_cast<uint8_t>(piece[start]));
          continue;
        }
        if (start > emitted) out.push_back(piece.substr(emitted, start - emitted));
        out.push_back(piece.substr(start, end - start));
        emitted = end;
        pos = end;
      }
      if (emitted < piece.size()) out.push_back(piece.substr(emitted));
    }
    if (&out == &next) {
      current.swap(next);
      next.clear();
    }
  }
  if (impl_->patterns.empty()) pieces->push_back(text);
}

}  // namespace fak
