// UTF-8 and Unicode helpers for the tokenizers: validation with the replacement rule Python and the
// reference tokenizers use, GPT-2's byte-to-unicode table, and NFC/NFKC through utf8proc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace fak {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space (Metaspace).
inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";

// Length in bytes of the valid UTF-8 sequence starting at s[0], or 0 when s does not start with one
// (bad lead byte, bad continuation, overlong form, surrogate, above U+10FFFF, or cut short).
size_t ValidUtf8PrefixLength(std::string_view s);

// True when the whole string is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// Returns `s` with every ill-formed subsequence replaced by U+FFFD, one replacement per maximal
// subpart (Unicode 15 §3.9, the rule of Python's bytes.decode(errors="replace")).
std::string SanitizeUtf8(std::string_view s);
// s with U+FFFD for each byte at which no UTF-8 sequence decodes (a lead byte whose continuation bytes
// are missing or wrong, or a stray continuation byte), decodable sequences re-encoded from their code
// point (an overlong form becomes the short one; a surrogate or a value past U+10FFFF, U+FFFD): the
// rule llama.cpp's byte-level tokenizers apply to their input, always giving valid UTF-8.
std::string ReplaceUndecodableBytes(std::string_view s);

// Length of a leading incomplete-but-so-far-valid UTF-8 sequence at the end of `s` that more bytes
// could still complete (0..3). Streaming decoders hold these bytes back.
size_t IncompleteUtf8SuffixLength(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (which must be <= 0x10FFFF).
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes one code point from valid UTF-8 at s[*pos] and advances *pos.
uint32_t DecodeUtf8(std::string_view s, size_t* pos);

// GPT-2 byte-level alphabet: every byte maps to one printable code point, stored as UTF-8.
struct ByteLevelTable {
  std::array<std::string, 256> byte_to_utf8;  // byte -> its printable character
  std::array<int16_t, 324> cp_to_byte;        // code point (< 324) -> byte, or -1
};
const ByteLevelTable& GetByteLevelTable();

enum class NormalizationForm { kNone, kNfc, kNfkc, kNfd, kNfkd };

// Normalizes valid UTF-8 text. Fails only when utf8proc rejects the input.
Result<std::string> Normalize(std::string_view text, NormalizationForm form);

}  // namespace fak
