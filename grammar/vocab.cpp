#include "grammar/vocab.h"

namespace fak::grammar {

std::shared_ptr<const TokenTrie> BuildTokenTrie(const Tokenizer& tokenizer, const std::vector<int64_t>& eos) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    auto bytes = tokenizer.TokenBytes(id);
    if (bytes.ok()) pieces[static_cast<size_t>(id)] = std::move(*bytes);
  }
  std::vector<int32_t> ends;
  if (tokenizer.eos_id() >= 0) ends.push_back(tokenizer.eos_id());
  for (int64_t e : eos) {
    if (e >= 0 && e < n) ends.push_back(static_cast<int32_t>(e));
  }
  return std::make_shared<TokenTrie>(pieces, std::move(ends));
}

Result<std::shared_ptr<Automaton>> GrammarCache::Get(const std::string& grammar_text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first == grammar_text) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().second;
      }
    }
  }
  auto g = Grammar::Parse(grammar_text);
  if (!g.ok()) return g.status();
  auto a = std::make_shared<Automaton>(std::make_shared<const Grammar>(std::move(*g)), trie_);
  std::lock_guard<std::mutex> lock(mu_);
  lru_.emplace_front(grammar_text, a);
  if (lru_.size() > capacity_) lru_.pop_back();
  return a;
}

}  // namespace fak::grammar
