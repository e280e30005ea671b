#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <unordered_map>

#include "core/log.h"
#include "tokenizer/merge_table.h"  // MergeTable, ApplyBpeMerges, SpmEncode
#include "tokenizer/normalizer.h"   // Normalizer
#include "tokenizer/pre_split.h"    // PreSplitter
#include "tokenizer/unicode.h"      // SanitizeUtf8, GetByteLevelTable, kMetaspace

namespace fak {
namespace {

constexpr size_t kMaxCachedPieceBytes = 64;
constexpr size_t kMaxCacheEntries = 1 << 15;

std::atomic<uint64_t> g_next_generation{1};

// Parses "<0xAB>" into 0xAB, or returns -1.
int ParseBytePiece(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool IsWordByte(char c) {
  const auto b = static_cast<uint8_t>(c);
  return b >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Per-thread cache of pre-token -> ids; belongs to one Tokenizer generation at a time.
struct PieceCache {
  uint64_t generation = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

PieceCache& ThreadCache(uint64_t generation) {
  thread_local PieceCache cache;
  if (cache.generation != generation) {
    cache.map.clear();
    cache.generation = generation;
  }
  return cache;
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerSpec spec;
  uint64_t generation = 0;
  TokenIdMap token_to_id;
  TokenIdMap mergeable;         // kSpm: pieces merges may produce
  bool spm_word_split = false;  // kSpm: no mergeable piece has a U+2581 right after another character
  MergeTable merges;
  std::array<int32_t, 256> byte_char_ids;   // byte level: id of each byte's GPT-2 character
  std::array<int32_t, 256> byte_piece_ids;  // <0xAB> pieces
  std::vector<int16_t> byte_of_token;       // id -> byte for <0xAB> pieces, else -1
  std::vector<uint8_t> special;             // id -> control/unknown
  std::vector<uint8_t> added;               // id -> written verbatim when decoding
  PreSplitter splitter;
  Normalizer normalizer;

  std::vector<AddedToken> added_tokens;
  std::array<std::vector<uint32_t>, 256> added_by_first_byte;  // indices, longest content first

  // A run of text between added tokens, or one added token.
  struct Fragment {
    int32_t token = -1;  // -1: text
    size_t begin = 0;
    size_t end = 0;
  };
  void SplitAdded(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;
  // raw_bytes: the text holds invalid UTF-8 bytes kept for byte tokens.
  Status EncodeText(std::string_view text, bool at_start, bool raw_bytes, std::vector<int32_t>* out) const;
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;
  void EncodeWordUncached(std::string_view word, std::vector<int32_t>* out) const;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::Create(TokenizerSpec spec) {
  const std::string& src = spec.source;
  const size_t n = spec.tokens.size();
  if (n == 0) return Corrupt("{}: tokenizer has an empty vocabulary", src);
  if (n > static_cast<size_t>(INT32_MAX)) return Corrupt("{}: vocabulary of {} tokens is too large", src, n);
  if (!spec.types.empty() && spec.types.size() != n) {
    return Corrupt("{}: {} token types for {} tokens", src, spec.types.size(), n);
  }
  if (spec.model == TokenizerModel::kSpm && spec.scores.size() != n) {
    return Corrupt("{}: {} token scores for {} tokens", src, spec.scores.size(), n);
  }
  for (const auto& [name, id] : {std::pair<const char*, int32_t>{"bos", spec.bos_id},
                                 {"eos", spec.eos_id},
                                 {"unk", spec.unk_id},
                                 {"pad", spec.pad_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return Corrupt("{}: {} token id {} is outside the vocabulary of {} tokens", src, name, id, n);
    }
  }
  if (spec.types.empty()) spec.types.assign(n, TokenType::kNormal);

  Tokenizer t;
  Impl& im = *t.impl_;
  im.generation = g_next_generation.fetch_add(1);
  im.token_to_id.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) im.token_to_id.emplace(spec.tokens[i], static_cast<int32_t>(i));

  // Added tokens: from the spec, or the vocabulary's control/user-defined entries.
  if (spec.added_tokens.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const TokenType type = spec.types[i];
      if (spec.tokens[i].empty()) continue;
      if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUserDefined) {
        AddedToken a;
        a.id = static_cast<int32_t>(i);
        a.content = spec.tokens[i];
        a.special = type != TokenType::kUserDefined;
        spec.added_tokens.push_back(std::move(a));
      }
    }
  }
  im.special.assign(n, 0);
  im.added.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    im.special[i] = spec.types[i] == TokenType::kControl || spec.types[i] == TokenType::kUnknown;
    im.added[i] = im.special[i] || spec.types[i] == TokenType::kUserDefined;
  }
  for (size_t k = 0; k < spec.added_tokens.size(); ++k) {
    const AddedToken& a = spec.added_tokens[k];
    if (a.id < 0 || a.id >= static_cast<int64_t>(n)) {
      return Corrupt("{}: added token '{}' has id {} outside the vocabulary of {} tokens", src, a.content,
                     a.id, n);
    }
    if (a.content.empty()) return Corrupt("{}: added token {} has empty content", src, a.id);
    im.added[a.id] = 1;
    if (a.special) im.special[a.id] = 1;
    im.added_tokens.push_back(a);
  }
  for (uint32_t k = 0; k < im.added_tokens.size(); ++k) {
    im.added_by_first_byte[static_cast<uint8_t>(im.added_tokens[k].content[0])].push_back(k);
  }
  for (auto& list : im.added_by_first_byte) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return im.added_tokens[a].content.size() > im.added_tokens[b].content.size();
    });
  }

  // Byte tables.
  im.byte_char_ids.fill(-1);
  im.byte_piece_ids.fill(-1);
  im.byte_of_token.assign(n, -1);
  if (spec.byte_level) {
    const ByteLevelTable& bl = GetByteLevelTable();
    for (int b = 0; b < 256; ++b) {
      const auto it = im.token_to_id.find(bl.byte_to_utf8[b]);
      if (it != im.token_to_id.end()) im.byte_char_ids[b] = it->second;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (spec.types[i] != TokenType::kByte && !spec.byte_fallback) continue;
    const int b = ParseBytePiece(spec.tokens[i]);
    if (b < 0) continue;
    if (im.byte_piece_ids[b] < 0) im.byte_piece_ids[b] = static_cast<int32_t>(i);
    im.byte_of_token[i] = static_cast<int16_t>(b);
  }

  // Merges.
  if (spec.model == TokenizerModel::kBpe) {
    im.merges.Reserve(spec.merges.size());
    size_t skipped = 0;
    std::string joined;
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const auto& [a, b] = spec.merges[r];
      const auto ia = im.token_to_id.find(a);
      const auto ib = im.token_to_id.find(b);
      joined = a;
      joined += b;
      const auto ij = im.token_to_id.find(joined);
      if (ia == im.token_to_id.end() || ib == im.token_to_id.end() || ij == im.token_to_id.end()) {
        ++skipped;
        continue;
      }
      im.merges.Insert(ia->second, ib->second, static_cast<int32_t>(r), ij->second);
    }
    if (skipped > 0)
      FAK_LOG_WARN("{}: {} merges name pieces missing from the vocabulary; ignored", src, skipped);
  } else {
    for (size_t i = 0; i < n; ++i) {
      const TokenType type = spec.types[i];
      if (type == TokenType::kNormal || type == TokenType::kUserDefined || type == TokenType::kUndefined) {
        im.mergeable.emplace(spec.tokens[i], static_cast<int32_t>(i));
      }
    }
    // SentencePiece merges by the score of the merged piece, leftmost first on ties. Every split of a
    // mergeable piece into two mergeable pieces becomes a pair in the merge table, ranked by the
    // score of the piece (equal scores share a rank, so the position decides, as in SentencePiece).
    std::vector<float> distinct;
    for (const auto& [piece, id] : im.mergeable) distinct.push_back(spec.scores[id]);
    std::sort(distinct.begin(), distinct.end(), std::greater<>());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    im.spm_word_split = true;
    for (const auto& [piece, id] : im.mergeable) {
      for (size_t k = piece.find(kMetaspace, 1); k != std::string::npos; k = piece.find(kMetaspace, k + 1)) {
        if (k < kMetaspace.size() ||
            piece.compare(k - kMetaspace.size(), kMetaspace.size(), kMetaspace) != 0) {
          im.spm_word_split = false;
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string& piece = spec.tokens[i];
      if (piece.size() < 2 || im.mergeable.find(piece) == im.mergeable.end()) continue;
      const auto rank = static_cast<int32_t>(
          std::lower_bound(distinct.begin(), distinct.end(), spec.scores[i], std::greater<>()) -
          distinct.begin());
      for (size_t k = 1; k < piece.size(); ++k) {
        if ((static_cast<uint8_t>(piece[k]) & 0xC0) == 0x80) continue;  // not a character boundary
        const auto l = im.mergeable.find(std::string_view(piece).substr(0, k));
        const auto r = im.mergeable.find(std::string_view(piece).substr(k));
        if (l != im.mergeable.end() && r != im.mergeable.end()) {
          im.merges.Insert(l->second, r->second, rank, static_cast<int32_t>(i));
        }
      }
    }
  }

  Result<PreSplitter> splitter = PreSplitter::Create(spec.split_patterns);
  if (!splitter.ok()) return splitter.status().WithContext(src);
  im.splitter = std::move(splitter).value();
  Result<Normalizer> normalizer = Normalizer::Create(spec.normalizers);
  if (!normalizer.ok()) return normalizer.status().WithContext(src);
  im.normalizer = std::move(normalizer).value();
  im.spec = std::move(spec);
  return t;
}

void Tokenizer::Impl::SplitAdded(std::string_view text, bool parse_special,
                                 std::vector<Fragment>* out) const {
  size_t seg_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& candidates = added_by_first_byte[static_cast<uint8_t>(text[pos])];
    bool matched = false;
    for (uint32_t k : candidates) {
      const AddedToken& a = added_tokens[k];
      if (a.special && !parse_special) continue;
      if (text.compare(pos, a.content.size(), a.content) != 0) continue;
      size_t start = pos;
      size_t end = pos + a.content.size();
      if (a.single_word &&
          ((start > 0 && IsWordByte(text[start - 1])) || (end < text.size() && IsWordByte(text[end])))) {
        continue;
      }
      if (a.lstrip) {
        while (start > seg_start && IsAsciiSpace(text[start - 1])) --start;
      }
      if (a.rstrip) {
        while (end < text.size() && IsAsciiSpace(text[end])) ++end;
      }
      if (start > seg_start) out->push_back(Fragment{-1, seg_start, start});
      out->push_back(Fragment{a.id, start, end});
      seg_start = pos = end;
      matched = true;
      break;
    }
    if (!matched) ++pos;
  }
  if (seg_start < text.size()) out->push_back(Fragment{-1, seg_start, text.size()});
}

void Tokenizer::Impl::EncodeWordUncached(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  if (spec.byte_level) {
    if (spec.ignore_merges) {
      std::string mapped;
      const ByteLevelTable& bl = GetByteLevelTable();
      for (char c : word) mapped += bl.byte_to_utf8[static_cast<uint8_t>(c)];
      const auto it = token_to_id.find(mapped);
      if (it != token_to_id.end()) {
        out->push_back(it->second);
        return;
      }
    }
    for (char c : word) {
      const int32_t id = byte_char_ids[static_cast<uint8_t>(c)];
      if (id >= 0) {
        symbols.push_back(id);
      } else if (spec.unk_id >= 0) {
        symbols.push_back(spec.unk_id);
      }
    }
  } else {
    if (spec.ignore_merges) {
      const auto it = token_to_id.find(word);
      if (it != token_to_id.end()) {
        out->push_back(it->second);
        return;
      }
    }
    for (size_t i = 0; i < word.size();) {
      size_t len = 1;
      const auto b = static_cast<uint8_t>(word[i]);
      if (b >= 0xF0) {
        len = 4;
      } else if (b >= 0xE0) {
        len = 3;
      } else if (b >= 0xC0) {
        len = 2;
      }
      len = std::min(len, word.size() - i);
      const std::string_view ch = word.substr(i, len);
      const TokenIdMap& pieces = spec.model == TokenizerModel::kSpm ? mergeable : token_to_id;
      const auto it = pieces.find(ch);
      bool all_bytes = spec.byte_fallback;
      for (char c : ch) all_bytes = all_bytes && byte_piece_ids[static_cast<uint8_t>(c)] >= 0;
      if (it != pieces.end()) {
        symbols.push_back(it->second);
      } else if (all_bytes) {
        for (char c : ch) symbols.push_back(byte_piece_ids[static_cast<uint8_t>(c)]);
      } else if (spec.unk_id >= 0) {
        symbols.push_back(spec.unk_id);
      }
      i += len;
    }
  }
  ApplyBpeMerges(merges, symbols, out);
}

void Tokenizer::Impl::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (word.size() == 1 && spec.byte_level && byte_char_ids[static_cast<uint8_t>(word[0])] >= 0) {
    out->push_back(byte_char_ids[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (word.size() > kMaxCachedPieceBytes) {
    EncodeWordUncached(word, out);
    return;
  }
  PieceCache& cache = ThreadCache(generation);
  const auto it = cache.map.find(word);
  if (it != cache.map.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t before = out->size();
  EncodeWordUncached(word, out);
  if (cache.map.size() >= kMaxCacheEntries) cache.map.clear();
  cache.map.emplace(std::string(word), std::vector<int32_t>(out->begin() + before, out->end()));
}

Status Tokenizer::Impl::EncodeText(std::string_view text, bool at_start, bool raw_bytes,
                                   std::vector<int32_t>* out) const {
  std::string normalized;
  if (!normalizer.empty()) {
    FAK_ASSIGN_OR_RETURN(normalized, normalizer.Apply(text));
    text = normalized;
    if (text.empty()) return Status::Ok();
  }
  std::string prepared;
  if (spec.metaspace) {
    prepared.reserve(text.size() + 8);
    const bool starts_with_space = text.starts_with(' ') || text.starts_with(kMetaspace);
    const bool prefix = spec.add_space_prefix && (at_start || !spec.space_prefix_first_only) &&
                        !(spec.space_prefix_if_missing && starts_with_space);
    if (prefix) prepared.append(kMetaspace);
    for (char c : text) {
      if (c == ' ') {
        prepared.append(kMetaspace);
      } else {
        prepared.push_back(c);
      }
    }
    text = prepared;
  } else if (spec.byte_level && spec.add_prefix_space && !text.empty() && text[0] != ' ') {
    prepared.reserve(text.size() + 1);
    prepared.push_back(' ');
    prepared.append(text);
    text = prepared;
  }
  if (spec.model == TokenizerModel::kSpm) {
    // Splitting at each U+2581 assumes characters end before it; raw invalid bytes (kept for byte
    // tokens) can run into it, so such a text is one word, as llama.cpp takes every text.
    if (!spm_word_split || raw_bytes) {
      EncodeWordUncached(text, out);
      return Status::Ok();
    }
    // Words start at each U+2581 that follows another character; no piece spans such a boundary.
    size_t start = 0;
    for (size_t i = 1; i + kMetaspace.size() <= text.size(); ++i) {
      if (text.compare(i, kMetaspace.size(), kMetaspace) != 0) continue;
      if (i >= kMetaspace.size() && text.compare(i - kMetaspace.size(), kMetaspace.size(), kMetaspace) == 0)
        continue;
      EncodeWord(text.substr(start, i - start), out);
      start = i;
      i += kMetaspace.size() - 1;
    }
    if (start < text.size()) EncodeWord(text.substr(start), out);
    return Status::Ok();
  }
  std::vector<std::string_view> words;
  splitter.Split(text, &words);
  for (std::string_view w : words) EncodeWord(w, out);
  return Status::Ok();
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, EncodeOptions options) const {
  const Impl& im = *impl_;
  std::string sanitized;
  // Invalid UTF-8 (a prompt cut inside a character, say) is tokenized as llama.cpp tokenizes it: a
  // SentencePiece vocabulary with byte tokens takes the bytes as they are (they become byte tokens); a
  // byte-level vocabulary gets U+FFFD for each byte at which no character can be decoded; any other
  // gets U+FFFD for each maximal invalid subpart.
  bool raw_bytes = false;  // invalid UTF-8 kept as it is
  if (!IsValidUtf8(text)) {
    if (im.spec.model == TokenizerModel::kSpm && im.spec.byte_fallback && im.normalizer.empty()) {
      raw_bytes = true;
    } else if (im.spec.byte_level) {
      sanitized = ReplaceUndecodableBytes(text);
      text = sanitized;
    } else {
      sanitized = SanitizeUtf8(text);
      text = sanitized;
    }
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special && im.spec.add_bos && im.spec.bos_id >= 0) out.push_back(im.spec.bos_id);
  std::vector<Impl::Fragment> fragments;
  im.SplitAdded(text, options.parse_special, &fragments);
  for (const Impl::Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    FAK_RETURN_IF_ERROR(im.EncodeText(text.substr(f.begin, f.end - f.begin), f.begin == 0, raw_bytes, &out));
  }
  if (options.add_special && im.spec.add_eos && im.spec.eos_id >= 0) out.push_back(im.spec.eos_id);
  return out;
}

Result<std::string> Tokenizer::TokenBytes(int32_t id, DecodeOptions options) const {
  const Impl& im = *impl_;
  if (id < 0 || id >= vocab_size()) {
    return OutOfRange("token id {} is outside the vocabulary of {} tokens", id, vocab_size());
  }
  const std::string& text = im.spec.tokens[id];
  if (im.special[id]) {
    if (options.skip_special) return std::string();
    return text;
  }
  if (im.added[id]) return text;
  if (im.byte_of_token[id] >= 0) return std::string(1, static_cast<char>(im.byte_of_token[id]));
  if (im.spec.byte_level) {
    const ByteLevelTable& bl = GetByteLevelTable();
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const size_t start = i;
      uint32_t cp = 0xFFFD;
      if (ValidUtf8PrefixLength(std::string_view(text).substr(i)) > 0) {
        cp = DecodeUtf8(text, &i);
      } else {
        ++i;
      }
      if (cp < bl.cp_to_byte.size() && bl.cp_to_byte[cp] >= 0) {
        out.push_back(static_cast<char>(bl.cp_to_byte[cp]));
      } else {
        out.append(text, start, i - start);
      }
    }
    return out;
  }
  if (im.spec.metaspace) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kMetaspace.size(), kMetaspace) == 0) {
        out.push_back(' ');
        i += kMetaspace.size();
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }
  return text;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids, DecodeOptions options) const {
  std::string bytes;
  for (int32_t id : ids) {
    FAK_ASSIGN_OR_RETURN(std::string piece, TokenBytes(id, options));
    bytes += piece;
  }
  if (strips_leading_space() && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  return SanitizeUtf8(bytes);
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= vocab_size()) return kEmpty;
  return impl_->spec.tokens[id];
}

int32_t Tokenizer::FindToken(std::string_view piece) const {
  const auto it = impl_->token_to_id.find(piece);
  return it == impl_->token_to_id.end() ? -1 : it->second;
}

TokenType Tokenizer::GetTokenType(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return impl_->spec.types[id];
}

bool Tokenizer::IsSpecial(int32_t id) const { return id >= 0 && id < vocab_size() && impl_->special[id]; }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->spec.tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->spec.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->spec.eos_id; }
const TokenizerSpec& Tokenizer::spec() const { return impl_->spec; }
bool Tokenizer::strips_leading_space() const { return impl_->spec.metaspace && impl_->spec.add_space_prefix; }

Detokenizer::Detokenizer(const Tokenizer& tokenizer, DecodeOptions options, bool continuation, bool raw)
    : tokenizer_(&tokenizer),
      options_(options),
      continuation_(continuation),
      raw_(raw),
      at_start_(!continuation) {}

Status Detokenizer::Push(int32_t id, std::string* out) {
  FAK_ASSIGN_OR_RETURN(std::string piece, tokenizer_->TokenBytes(id, options_));
  if (piece.empty()) return Status::Ok();
  if (at_start_) {
    at_start_ = false;
    if (tokenizer_->strips_leading_space() && piece[0] == ' ') piece.erase(0, 1);
  }
  if (raw_) {
    *out += piece;
    return Status::Ok();
  }
  pending_ += piece;
  const size_t hold = IncompleteUtf8SuffixLength(pending_);
  const std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - hold);
  *out += SanitizeUtf8(ready);
  pending_.erase(0, ready.size());
  return Status::Ok();
}

void Detokenizer::Flush(std::string* out) {
  *out += SanitizeUtf8(pending_);
  pending_.clear();
  at_start_ = !continuation_;
}

}  // namespace fak
