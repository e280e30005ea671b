#include "tokenizer/unicode.h"

#include <cstdlib>

#include <utf8proc.h>  // utf8proc_map, UTF8PROC_COMPOSE, ...

namespace fak {
namespace {

// Bounds of the second byte for each lead byte; later continuation bytes are always 80..BF.
struct LeadInfo {
  uint8_t length;  // 0: not a lead byte
  uint8_t lo;
  uint8_t hi;
};

LeadInfo GetLeadInfo(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes of s that form a valid prefix of a UTF-8 sequence (the "maximal subpart"), and
// whether that prefix is a complete code point.
size_t MaximalSubpart(std::string_view s, bool* complete) {
  *complete = false;
  if (s.empty()) return 0;
  const LeadInfo info = GetLeadInfo(static_cast<uint8_t>(s[0]));
  if (info.length == 0) return 1;
  if (info.length == 1) {
    *complete = true;
    return 1;
  }
  size_t n = 1;
  for (; n < info.length && n < s.size(); ++n) {
    const uint8_t c = static_cast<uint8_t>(s[n]);
    const uint8_t lo = n == 1 ? info.lo : 0x80;
    const uint8_t hi = n == 1 ? info.hi : 0xBF;
    if (c < lo || c > hi) return n;
  }
  *complete = n == info.length;
  return n;
}

ByteLevelTable BuildByteLevelTable() {
  ByteLevelTable t;
  t.cp_to_byte.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    AppendUtf8(static_cast<uint32_t>(cp), &t.byte_to_utf8[b]);
    t.cp_to_byte[cp] = static_cast<int16_t>(b);
  }
  return t;
}

}  // namespace

size_t ValidUtf8PrefixLength(std::string_view s) {
  bool complete = false;
  const size_t n = MaximalSubpart(s, &complete);
  return complete ? n : 0;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = ValidUtf8PrefixLength(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path.
    size_t j = i;
    while (j < s.size() && static_cast<uint8_t>(s[j]) < 0x80) ++j;
    out.append(s.data() + i, j - i);
    i = j;
    if (i >= s.size()) break;
    bool complete = false;
    const size_t n = MaximalSubpart(s.substr(i), &complete);
    if (complete) {
      out.append(s.data() + i, n);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += n;
  }
  return out;
}

std::string ReplaceUndecodableBytes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    // The sequence length by the lead byte's pattern; 0 for a continuation byte or 0xF8 and above.
    const size_t n = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      out.append("\xEF\xBF\xBD");
      ++i;
      continue;
    }
    uint32_t cp = b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    const bool scalar = cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    AppendUtf8(scalar ? cp : 0xFFFD, &out);  // a surrogate or beyond U+10FFFF: one U+FFFD
    i += n;
  }
  return out;
}

size_t IncompleteUtf8SuffixLength(std::string_view s) {
  // A lead byte at most 3 bytes back whose sequence is valid so far but cut short by the end.
  const size_t max_back = s.size() < 3 ? s.size() : 3;
  for (size_t back = 1; back <= max_back; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    bool complete = false;
    const std::string_view tail = s.substr(s.size() - back);
    const size_t n = MaximalSubpart(tail, &complete);
    return (!complete && n == back && GetLeadInfo(b).length > back) ? back : 0;
  }
  return 0;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t DecodeUtf8(std::string_view s, size_t* pos) {
  const auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[*pos + k])); };
  const uint32_t b0 = byte(0);
  if (b0 < 0x80) {
    *pos += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    const uint32_t cp = ((b0 & 0x1F) << 6) | (byte(1) & 0x3F);
    *pos += 2;
    return cp;
  }
  if (b0 < 0xF0) {
    const uint32_t cp = ((b0 & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    *pos += 3;
    return cp;
  }
  const uint32_t cp =
      ((b0 & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  *pos += 4;
  return cp;
}

const ByteLevelTable& GetByteLevelTable() {
  static const ByteLevelTable table = BuildByteLevelTable();
  return table;
}

Result<std::string> Normalize(std::string_view text, NormalizationForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNone: return std::string(text);
    case NormalizationForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalizationForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalizationForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalizationForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  // Pure ASCII is invariant under every normalization form.
  bool ascii = true;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    return InvalidArgument("unicode normalization failed: {}", utf8proc_errmsg(n));
  }
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
  std::free(mapped);
  return out;
}

}  // namespace fak
