#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "tokenizer/jinja/py_string.h"  // AppendUtf8

namespace fak::jinja {

std::string Where(int line, int col) { return fmt::format("template:{}:{}: ", line, col); }

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& options) : src_(std::move(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> Run() {
    while (pos_ < src_.size()) FAK_RETURN_IF_ERROR(LexRoot());
    Token eof = Make(TokenType::kEof, src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  void LineCol(size_t offset, int* line, int* col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    *line = static_cast<int>(idx) + 1;
    *col = static_cast<int>(offset - line_starts_[idx]) + 1;
  }
  Token Make(TokenType type, size_t offset, std::string text = {}) const {
    Token t;
    t.type = type;
    t.text = std::move(text);
    LineCol(offset, &t.line, &t.col);
    return t;
  }
  template <typename... Args>
  Status Error(size_t offset, fmt::format_string<Args...> f, Args&&... args) const {
    int line, col;
    LineCol(offset, &line, &col);
    return InvalidArgument("{}{}", Where(line, col), fmt::format(f, std::forward<Args>(args)...));
  }

  // After a closing tag: '-' eats all following whitespace, otherwise trim_blocks eats one newline.
  void AfterClose(bool strip) {
    if (strip) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
    } else if (opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void EmitText(size_t begin, std::string text) {
    if (!text.empty()) tokens_.push_back(Make(TokenType::kText, begin, std::move(text)));
  }

  Status LexRoot() {
    size_t start = pos_;
    size_t open = src_.size();
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        open = i;
        break;
      }
    }
    std::string text = src_.substr(start, open - start);
    if (open == src_.size()) {
      EmitText(start, std::move(text));
      pos_ = src_.size();
      return Status::Ok();
    }
    char kind = src_[open + 1];
    char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
    if (sign == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if (l_pos > 0 || line_starting_) {
        bool blank = l_pos < text.size() &&
                     std::all_of(text.begin() + l_pos, text.end(), [](char c) { return IsSpace(c); });
        if (blank) text.resize(l_pos);
      }
    }
    EmitText(start, std::move(text));
    pos_ = open + 2 + ((sign == '-' || (sign == '+' && kind != '{')) ? 1 : 0);
    if (kind == '#') return LexComment(open);
    if (kind == '%' && IsRawTag()) return LexRaw(open);
    tokens_.push_back(Make(kind == '%' ? TokenType::kBlockBegin : TokenType::kVarBegin, open));
    return LexTag(open, kind == '%');
  }

  Status LexComment(size_t open) {
    size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) return Error(open, "missing end of comment tag");
    bool strip = close > pos_ && src_[close - 1] == '-';
    pos_ = close + 2;
    AfterClose(strip);
    return Status::Ok();
  }

  // `{% raw %}` (after the opener): is the tag exactly "raw"?
  bool IsRawTag() const {
    size_t p = pos_;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && IsNameChar(src_[p + 3]))) return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  Status LexRaw(size_t open) {
    size_t close = src_.find("%}", pos_);
    bool strip_after_open = src_[close - 1] == '-';
    pos_ = close + 2;
    AfterClose(strip_after_open);
    size_t body = pos_;
    // Find {% endraw %} with optional whitespace control.
    for (size_t i = body; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t p = i + 2;
      bool strip_before = p < src_.size() && src_[p] == '-';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      bool strip_after = src_.compare(p, 3, "-%}") == 0;
      if (!strip_after && src_.compare(p, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, i - body);
      if (strip_before) {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (opt_.lstrip_blocks) {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (std::all_of(text.begin() + l_pos, text.end(), [](char c) { return c == ' ' || c == '\t'; }) &&
            (l_pos > 0 || line_starting_)) {
          text.resize(l_pos);
        }
      }
      EmitText(body, std::move(text));
      pos_ = p + (strip_after ? 3 : 2);
      AfterClose(strip_after);
      return Status::Ok();
    }
    return Error(open, "missing end of raw directive");
  }

  Status LexTag(size_t open, bool block) {
    std::vector<char> brackets;
    const char* close = block ? "%}" : "}}";
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) {
        return Error(open, "unexpected end of template: '{}' was never closed with '{}'", block ? "{%" : "{{",
                     close);
      }
      if (brackets.empty()) {
        bool strip = src_[pos_] == '-' && src_.compare(pos_ + 1, 2, close) == 0;
        if (strip || src_.compare(pos_, 2, close) == 0) {
          tokens_.push_back(Make(block ? TokenType::kBlockEnd : TokenType::kVarEnd, pos_));
          pos_ += strip ? 3 : 2;
          if (block) {
            AfterClose(strip);
          } else if (strip) {
            AfterClose(true);
          } else {
            line_starting_ = false;
          }
          return Status::Ok();
        }
      }
      char c = src_[pos_];
      if (c == '\'' || c == '"') {
        FAK_RETURN_IF_ERROR(LexString());
      } else if (IsDigit(c)) {
        FAK_RETURN_IF_ERROR(LexNumber());
      } else if (IsNameStart(c)) {
        size_t b = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        tokens_.push_back(Make(TokenType::kName, b, src_.substr(b, pos_ - b)));
      } else {
        FAK_RETURN_IF_ERROR(LexOperator(&brackets));
      }
    }
  }

  Status LexOperator(std::vector<char>* brackets) {
    static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Make(TokenType::kOperator, pos_, op));
        pos_ += 2;
        return Status::Ok();
      }
    }
    char c = src_[pos_];
    static const std::string kOne = "+-/*%~[](){}<>=.:|,;";
    if (kOne.find(c) == std::string::npos) {
      return Error(pos_, "unexpected character '{}'", std::string(1, c));
    }
    if (c == '(' || c == '[' || c == '{') brackets->push_back(c);
    if (c == ')' || c == ']' || c == '}') {
      char want = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets->empty()) return Error(pos_, "unexpected '{}'", std::string(1, c));
      if (brackets->back() != want) {
        char expected = brackets->back() == '(' ? ')' : brackets->back() == '[' ? ']' : '}';
        return Error(pos_, "unexpected '{}', expected '{}'", std::string(1, c), std::string(1, expected));
      }
      brackets->pop_back();
    }
    tokens_.push_back(Make(TokenType::kOperator, pos_, std::string(1, c)));
    ++pos_;
    return Status::Ok();
  }

  Status LexNumber() {
    size_t b = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() && (IsDigit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                                            IsDigit(src_[pos_ + 1])))) {
        ++pos_;
      }
    };
    bool after_dot = b > 0 && src_[b - 1] == '.';
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() &&
        (src_[pos_ + 1] == 'x' || src_[pos_ + 1] == 'X' || src_[pos_ + 1] == 'o' || src_[pos_ + 1] == 'O' ||
         src_[pos_ + 1] == 'b' || src_[pos_ + 1] == 'B')) {
      char r = static_cast<char>(src_[pos_ + 1] | 0x20);
      int base = r == 'x' ? 16 : r == 'o' ? 8 : 2;
      pos_ += 2;
      std::string clean;
      while (pos_ < src_.size() &&
             (std::isxdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') clean += src_[pos_];
        ++pos_;
      }
      Token t = Make(TokenType::kInteger, b, src_.substr(b, pos_ - b));
      t.int_value = static_cast<int64_t>(std::strtoull(clean.c_str(), nullptr, base));
      tokens_.push_back(t);
      return Status::Ok();
    }
    digits();
    bool is_float = false;
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t save = pos_;
      ++pos_;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
      if (pos_ < src_.size() && IsDigit(src_[pos_])) {
        digits();
        is_float = true;
      } else {
        pos_ = save;
      }
    }
    std::string text = src_.substr(b, pos_ - b);
    std::string clean;
    for (char c : text) {
      if (c != '_') clean += c;
    }
    Token t = Make(is_float ? TokenType::kFloat : TokenType::kInteger, b, text);
    if (is_float) {
      t.float_value = std::strtod(clean.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(clean.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(b, "integer literal {} is out of range", text);
    }
    tokens_.push_back(t);
    return Status::Ok();
  }

  // Python string escapes: \n \t \\ \' \" \xhh \uXXXX \UXXXXXXXX \ooo ...; unknown escapes stay.
  Status LexString() {
    size_t b = pos_;
    char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) return Error(b, "unterminated string literal");
      char c = src_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        value += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= src_.size()) return Error(b, "unterminated string literal");
      char e = src_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '\n': break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size() ||
              !std::all_of(src_.begin() + pos_, src_.begin() + pos_ + n,
                           [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
            return Error(pos_ - 2, "truncated \\{} escape in string literal", std::string(1, e));
          }
          uint32_t cp = static_cast<uint32_t>(std::strtoul(src_.substr(pos_, n).c_str(), nullptr, 16));
          if (cp > 0x10ffff)
            return Error(pos_ - 2, "escape \\{} is not a valid code point", src_.substr(pos_ - 1, n + 1));
          AppendUtf8(value, cp);
          pos_ += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            }
            AppendUtf8(value, cp);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    tokens_.push_back(Make(TokenType::kString, b, std::move(value)));
    return Status::Ok();
  }

  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source, const LexOptions& options) {
  std::string norm;
  norm.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      norm += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      norm += source[i];
    }
  }
  if (!options.keep_trailing_newline && !norm.empty() && norm.back() == '\n') norm.pop_back();
  Lexer lexer(std::move(norm), options);
  return lexer.Run();
}

}  // namespace fak::jinja
