// Python str semantics over UTF-8 bytes: strings index, slice and measure by code point, and the
// str methods chat templates call (strip, split, startswith, ...) behave as in CPython.
// Bytes that are not valid UTF-8 decode to U+DC80..U+DCFF (Python's surrogateescape) and encode back
// to the same byte, so no input is lost or rejected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fak::jinja {

std::vector<uint32_t> DecodeUtf8(std::string_view s);
void AppendUtf8(std::string& out, uint32_t cp);
std::string EncodeUtf8(const std::vector<uint32_t>& cps);
size_t CodepointCount(std::string_view s);

// str.isspace() for one code point.
bool IsPySpace(uint32_t cp);

// Indices selected by Python's slice [start:stop:step] over a sequence of `length` items.
// step must not be 0 (the caller reports that error).
std::vector<int64_t> SliceIndices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                  int64_t step);

// chars == nullopt strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// sep == nullopt splits on whitespace runs. maxsplit < 0: no limit.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);
// str.find / str.rfind: code point index, or -1.
int64_t PyFind(std::string_view s, std::string_view sub, bool reverse);
int64_t PyCount(std::string_view s, std::string_view sub);

}  // namespace fak::jinja
