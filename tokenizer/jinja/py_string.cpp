#include "tokenizer/jinja/py_string.h"

#include <algorithm>

#include <utf8proc.h>

namespace fak::jinja {

std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok) {
      // Reject overlong forms, surrogates and values past U+10FFFF.
      static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    }
    if (!ok) {
      out.push_back(0xdc00 + c);  // surrogateescape: keeps the raw byte
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp >= 0xdc80 && cp <= 0xdcff) {
    out += static_cast<char>(cp - 0xdc00);  // an undecodable byte, restored
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string EncodeUtf8(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) AppendUtf8(out, cp);
  return out;
}

size_t CodepointCount(std::string_view s) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
  return ascii ? s.size() : DecodeUtf8(s).size();
}

bool IsPySpace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0a:
    case 0x0b:
    case 0x0c:
    case 0x0d:
    case 0x1c:
    case 0x1d:
    case 0x1e:
    case 0x1f:
    case 0x20:
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200a;
  }
}

std::vector<int64_t> SliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                  int64_t step) {
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + length : *v;
    return std::clamp(x, lo, hi);
  };
  std::vector<int64_t> out;
  if (step > 0) {
    int64_t b = clamp(start, 0, 0, length);
    int64_t e = clamp(stop, length, 0, length);
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    int64_t b = clamp(start, length - 1, -1, length - 1);
    int64_t e = clamp(stop, -1, -1, length - 1);
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<uint32_t> cps = DecodeUtf8(s);
  std::vector<uint32_t> set;
  if (chars) set = DecodeUtf8(*chars);
  auto strip_it = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : IsPySpace(cp);
  };
  size_t b = 0;
  size_t e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return EncodeUtf8(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e));
}

static std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit, bool reverse) {
  std::vector<uint32_t> cps = DecodeUtf8(s);
  if (reverse) std::reverse(cps.begin(), cps.end());
  std::vector<std::string> out;
  size_t i = 0;
  int64_t splits = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPySpace(cps[i])) ++i;
    if (i == cps.size()) break;
    size_t b = i;
    if (maxsplit >= 0 && splits >= maxsplit) {
      // The rest, minus trailing whitespace, is the last piece.
      size_t e = cps.size();
      while (e > b && IsPySpace(cps[e - 1])) --e;
      i = e;
    } else {
      while (i < cps.size() && !IsPySpace(cps[i])) ++i;
    }
    std::vector<uint32_t> piece(cps.begin() + b, cps.begin() + i);
    if (reverse) std::reverse(piece.begin(), piece.end());
    out.push_back(EncodeUtf8(piece));
    ++splits;
  }
  if (reverse) std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit) {
  if (!sep) return SplitWhitespace(s, maxsplit, false);
  std::vector<std::string> out;
  size_t pos = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
    ++splits;
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  if (!sep) return SplitWhitespace(s, maxsplit, true);
  std::vector<std::string> out;
  size_t end = s.size();
  int64_t splits = 0;
  while ((maxsplit < 0 || splits < maxsplit) && end >= sep->size()) {
    size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
    ++splits;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement between every code point (and at both ends).
    std::vector<uint32_t> cps = DecodeUtf8(s);
    int64_t n = 0;
    for (uint32_t cp : cps) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      AppendUtf8(out, cp);
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out += s.substr(pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++n;
  }
  out += s.substr(pos);
  return out;
}

template <typename F>
static std::string MapCodepoints(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : DecodeUtf8(s)) AppendUtf8(out, f(cp));
  return out;
}

static uint32_t ToUpper(uint32_t cp) {
  return cp < 0x80 ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp)
                   : static_cast<uint32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}
static uint32_t ToLower(uint32_t cp) {
  return cp < 0x80 ? (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp)
                   : static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}
static uint32_t ToTitle(uint32_t cp) {
  return cp < 0x80 ? ToUpper(cp) : static_cast<uint32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}
static bool IsCased(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

std::string PyUpper(std::string_view s) { return MapCodepoints(s, ToUpper); }
std::string PyLower(std::string_view s) { return MapCodepoints(s, ToLower); }

std::string PyTitle(std::string_view s) {
  bool prev_cased = false;
  return MapCodepoints(s, [&](uint32_t cp) {
    uint32_t r = prev_cased ? ToLower(cp) : ToTitle(cp);
    prev_cased = IsCased(cp);
    return r;
  });
}

std::string PyCapitalize(std::string_view s) {
  bool first = true;
  return MapCodepoints(s, [&](uint32_t cp) {
    uint32_t r = first ? ToTitle(cp) : ToLower(cp);
    first = false;
    return r;
  });
}

int64_t PyFind(std::string_view s, std::string_view sub, bool reverse) {
  size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(CodepointCount(s.substr(0, hit)));
}

int64_t PyCount(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodepointCount(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

}  // namespace fak::jinja
