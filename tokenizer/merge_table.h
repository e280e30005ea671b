// The merge engines behind Tokenizer: ranked BPE merges over token ids, and SentencePiece BPE that
// merges adjacent pieces by the score of their concatenation. Internal to tokenizer/.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fak {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// (left id, right id) -> (rank, merged id), an open-addressing table: lookups sit in the BPE hot loop.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t result = 0;
  };
  static constexpr uint64_t kEmpty = ~0ull;

  void Reserve(size_t n);
  // Keeps the first (lowest-rank) entry when a pair repeats.
  void Insert(int32_t left, int32_t right, int32_t rank, int32_t result);
  const Entry* Find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = Key(left, right);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static uint64_t Key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  static size_t Hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  void Grow();

  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// Applies ranked merges to `symbols` (lowest rank first, leftmost first among equal ranks) and
// appends the resulting ids to *out.
void ApplyBpeMerges(const MergeTable& merges, std::span<const int32_t> symbols, std::vector<int32_t>* out);

// SentencePiece BPE over the characters of `text` (already with U+2581 for spaces): repeatedly joins
// the adjacent pair whose concatenation is the highest-scoring mergeable piece (leftmost on ties).
// Characters that end up as no piece become byte tokens (byte_ids[b] >= 0) or unk_id.
struct SpmVocabView {
  const TokenIdMap* mergeable;       // pieces a merge may produce, and single characters
  const std::vector<float>* scores;  // by id
  const int32_t* byte_ids;           // 256 entries, -1 where the vocabulary has no <0xAB> piece
  int32_t unk_id;
};
void SpmEncode(const SpmVocabView& vocab, std::string_view text, std::vector<int32_t>* out);

}  // namespace fak
