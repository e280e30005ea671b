#include "tokenizer/merge_table.h"

#include <algorithm>
#include <queue>

namespace fak {

void MergeTable::Reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap <= slots_.size()) return;
  std::vector<Entry> old;
  old.swap(slots_);
  slots_.assign(cap, Entry{});
  mask_ = cap - 1;
  size_ = 0;
  for (const Entry& e : old) {
    if (e.key != kEmpty)
      Insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key), e.rank, e.result);
  }
}

void MergeTable::Grow() { Reserve(slots_.empty() ? 8 : slots_.size()); }

void MergeTable::Insert(int32_t left, int32_t right, int32_t rank, int32_t result) {
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  const uint64_t key = Key(left, right);
  for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key) return;  // a repeated pair keeps its first rank
    if (e.key == kEmpty) {
      e = Entry{key, rank, result};
      ++size_;
      return;
    }
  }
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t pos;  // left symbol
  int32_t left_id;
  int32_t right_id;
  int32_t result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// Few symbols: rescanning all pairs beats keeping a heap.
void MergeSmall(const MergeTable& merges, std::span<const int32_t> symbols, std::vector<int32_t>* out) {
  int32_t ids[32];
  size_t n = symbols.size();
  std::copy(symbols.begin(), symbols.end(), ids);
  while (n > 1) {
    int32_t best_rank = INT32_MAX;
    size_t best = 0;
    int32_t best_result = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      const MergeTable::Entry* e = merges.Find(ids[i], ids[i + 1]);
      if (e != nullptr && e->rank < best_rank) {
        best_rank = e->rank;
        best = i;
        best_result = e->result;
      }
    }
    if (best_rank == INT32_MAX) break;
    ids[best] = best_result;
    std::copy(ids + best + 2, ids + n, ids + best + 1);
    --n;
  }
  out->insert(out->end(), ids, ids + n);
}

}  // namespace

void ApplyBpeMerges(const MergeTable& merges, std::span<const int32_t> symbols, std::vector<int32_t>* out) {
  const size_t n = symbols.size();
  if (n <= 1) {
    out->insert(out->end(), symbols.begin(), symbols.end());
    return;
  }
  if (n <= 32) {
    MergeSmall(merges, symbols, out);
    return;
  }
  std::vector<Symbol> sym(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = Symbol{symbols[i], static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[left].next;
    if (right < 0) return;
    const MergeTable::Entry* e = merges.Find(sym[left].id, sym[right].id);
    if (e != nullptr) queue.push(Candidate{e->rank, left, sym[left].id, sym[right].id, e->result});
  };
  for (size_t i = 0; i + 1 < n; ++i) push_pair(static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    // Stale entries: the left symbol was merged away or changed, or its right neighbour changed.
    if (left.id != c.left_id || left.next < 0 || sym[left.next].id != c.right_id) continue;
    const int32_t right = left.next;
    left.id = c.result;
    left.next = sym[right].next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    sym[right].id = -1;
    push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

namespace {

struct SpmSymbol {
  int32_t prev;
  int32_t next;
  uint32_t start;
  uint32_t len;  // 0: merged into its left neighbour
};

struct SpmBigram {
  float score;
  int32_t left;
  uint32_t size;  // bytes of the concatenation, to detect stale entries
  bool operator<(const SpmBigram& o) const {
    // priority_queue pops the largest: highest score, then leftmost.
    return score != o.score ? score < o.score : left > o.left;
  }
};

size_t CharLen(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

}  // namespace

void SpmEncode(const SpmVocabView& vocab, std::string_view text, std::vector<int32_t>* out) {
  std::vector<SpmSymbol> sym;
  sym.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min(CharLen(static_cast<uint8_t>(text[i])), text.size() - i);
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back(SpmSymbol{idx - 1, idx + 1, static_cast<uint32_t>(i), static_cast<uint32_t>(len)});
    i += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  std::priority_queue<SpmBigram> queue;
  auto try_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[left].next;
    if (right < 0) return;
    const uint32_t size = sym[left].len + sym[right].len;
    const auto it = vocab.mergeable->find(text.substr(sym[left].start, size));
    if (it == vocab.mergeable->end()) return;
    queue.push(SpmBigram{(*vocab.scores)[it->second], left, size});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_pair(i);

  while (!queue.empty()) {
    const SpmBigram b = queue.top();
    queue.pop();
    SpmSymbol& left = sym[b.left];
    if (left.len == 0 || left.next < 0) continue;
    SpmSymbol& right = sym[left.next];
    if (left.len + right.len != b.size) continue;  // one side changed since this pair was queued
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = b.left;
    try_pair(left.prev);
    try_pair(b.left);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].len);
    const auto it = vocab.mergeable->find(piece);
    if (it != vocab.mergeable->end()) {
      out->push_back(it->second);
      continue;
    }
    bool all_bytes = true;
    for (char c : piece) all_bytes = all_bytes && vocab.byte_ids[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : piece) out->push_back(vocab.byte_ids[static_cast<uint8_t>(c)]);
    } else if (vocab.unk_id >= 0) {
      out->push_back(vocab.unk_id);
    }
  }
}

}  // namespace fak
