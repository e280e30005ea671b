// The grammar format, its matcher, and token masks: every mask equals the brute-force answer (each
// token's bytes run through the automaton one by one), on small vocabularies and on Qwen3's 151k.
#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "tokenizer/loader.h"

namespace fak::grammar {
namespace {

std::shared_ptr<const TokenTrie> ByteTrie(std::vector<std::string> extra = {}) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  for (auto& e : extra) pieces.push_back(e);
  pieces.emplace_back();  // the last id: EOS (no bytes)
  return std::make_shared<TokenTrie>(pieces, std::vector<int32_t>{static_cast<int32_t>(pieces.size() - 1)});
}

std::shared_ptr<Automaton> Compile(const std::string& text, std::shared_ptr<const TokenTrie> trie = nullptr) {
  auto g = Grammar::Parse(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << text;
  if (!g.ok()) return nullptr;
  return std::make_shared<Automaton>(std::make_shared<const Grammar>(std::move(*g)),
                                     trie ? trie : ByteTrie());
}

bool Matches(Automaton& a, std::string_view text) {
  const int32_t s = a.Advance(a.start(), text);
  return s >= 0 && a.Accepting(s);
}

std::string ParseError(const std::string& text) {
  auto g = Grammar::Parse(text);
  return g.ok() ? std::string("(parsed)") : g.status().message();
}

TEST(Grammar, RefusesBadGrammarsByName) {
  EXPECT_NE(ParseError("root ::= item\n").find("'item' is used but never defined"), std::string::npos);
  EXPECT_NE(ParseError("root ::= root \"a\" | \"b\"\n").find("left recursion"), std::string::npos);
  EXPECT_NE(ParseError("root ::= x\nx ::= y? root \"a\"\ny ::= \"b\"\n").find("left recursion"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= \"abc\n").find("unterminated string"), std::string::npos);
  EXPECT_NE(ParseError("root ::= [ab\n").find("unterminated character class"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"{3,1}").find("max below min"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"{1000000}").find("repetition bound"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(ParseError("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(ParseError("").find("empty"), std::string::npos);
  EXPECT_NE(ParseError("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= [z-a]").find("end before its start"), std::string::npos);
}

TEST(Grammar, HostileGrammarsHitLimitsNotTheStack) {
  EXPECT_NE(ParseError("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')'))
                .find("nest deeper than 256"),
            std::string::npos);
  // Every "(" may close with ")" or "]": the stacks double with each one; past the limit the
  // automaton refuses and says so instead of growing without bound.
  auto a = Compile("root ::= \"(\" root | \"(\" root \")\" | \"(\" root \"]\" | \"\"");
  EXPECT_GE(a->Advance(a->start(), "(((("), 0);
  EXPECT_EQ(a->Advance(a->start(), std::string(20, '(')), -1);
  EXPECT_TRUE(a->stats().overflow);
  EXPECT_TRUE(a->overflowed());
}

TEST(Grammar, MatchesWhatItDescribes) {
  auto a = Compile(R"(
# a comment
root ::= greeting ", " name ("!" | "?")?
greeting ::= "hello" | "hi"
name ::= [A-Z] [a-z]{1,5}
)");
  EXPECT_TRUE(Matches(*a, "hello, Bob"));
  EXPECT_TRUE(Matches(*a, "hi, Alice!"));
  EXPECT_FALSE(Matches(*a,
                       "hi, Al"
                       "icexyz"));
  EXPECT_FALSE(Matches(*a, "hi, bob"));
  EXPECT_FALSE(Matches(*a, "hey, Bob"));
  EXPECT_EQ(a->Advance(a->start(), "hx"), -1);
  EXPECT_FALSE(Matches(*a, "hello, B"));  // a prefix, not a match
  EXPECT_GE(a->Advance(a->start(), "hello, B"), 0);
}

TEST(Grammar, RepetitionAndRecursion) {
  auto a = Compile("root ::= \"(\" root \")\" | \"x\"{2,3} list\nlist ::= (\",\" [0-9]+)*\n");
  EXPECT_TRUE(Matches(*a, "xx"));
  EXPECT_TRUE(Matches(*a, "(((xxx,1,23)))"));
  EXPECT_FALSE(Matches(*a, "(xx"));
  EXPECT_FALSE(Matches(*a, "x"));
  EXPECT_FALSE(Matches(*a, "xxxx"));
  EXPECT_FALSE(Matches(*a, "xx,"));
}

TEST(Grammar, UnicodeClassesMatchUtf8Bytes) {
  auto a = Compile("root ::= [^a]+");
  EXPECT_TRUE(Matches(*a, "é€😀b"));
  EXPECT_FALSE(Matches(*a, "bab"));
  EXPECT_FALSE(Matches(*a, "\xff"));          // not UTF-8
  EXPECT_FALSE(Matches(*a, "\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(Matches(*a, "\xc3"));          // half a character is a prefix only
  EXPECT_GE(a->Advance(a->start(), "\xc3"), 0);
  auto greek = Compile("root ::= [α-ω]{2} \"\\u00e9\" .");
  EXPECT_TRUE(Matches(*greek, "αωé😀"));
  EXPECT_FALSE(Matches(*greek, "aωé!"));
  EXPECT_FALSE(Matches(*greek, "αωéab"));
}

// Every state reachable in a few steps: the mask equals running each token through the automaton.
void ExpectMasksExact(Automaton& a, const std::vector<std::string>& walks) {
  const TokenTrie& t = a.trie();
  for (const auto& w : walks) {
    const int32_t s = a.Advance(a.start(), w);
    ASSERT_GE(s, 0) << w;
    const auto mask = a.Mask(s);
    int allowed = 0;
    for (int32_t id = 0; id < t.vocab_size(); ++id) {
      bool want = false;
      if (std::find(t.eos().begin(), t.eos().end(), id) != t.eos().end()) {
        want = a.Accepting(s);
      } else if (!t.piece(id).empty()) {
        want = a.Advance(s, t.piece(id)) >= 0;
      }
      ASSERT_EQ(MaskAllows(*mask, id), want)
          << "after '" << w << "' token " << id << " '" << t.piece(id) << "'";
      allowed += want;
    }
    EXPECT_GT(allowed, 0) << w;
  }
}

TEST(Grammar, MasksEqualBruteForceOnASmallVocabulary) {
  std::mt19937 rng(7);
  std::vector<std::string> extra;
  const std::string alphabet = "ab{}\":, 01é";
  for (int i = 0; i < 3000; ++i) {
    std::string p;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    extra.push_back(p);
  }
  auto a =
      Compile("root ::= \"{\" (pair (\", \" pair)*)? \"}\"\npair ::= \"\\\"\" [ab]* \"\\\"\" \":\" [01]+\n",
              ByteTrie(extra));
  ExpectMasksExact(*a, {"", "{", "{\"", "{\"ab", "{\"ab\":", "{\"ab\":1", "{\"ab\":1, \"b\":0}"});
}

TEST(Grammar, MasksEqualBruteForceOnQwen3Vocabulary) {
  auto tok = LoadTokenizer("../shared/fixtures/tokenizers/qwen3");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto trie = BuildTokenTrie(*tok, {});
  EXPECT_EQ(trie->vocab_size(), tok->vocab_size());
  auto text = JsonSchemaToGrammar(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0,
                   "maximum": 150}, "tags": {"type": "array", "items": {"enum": ["x", "yz"]}, "maxItems": 3}},
    "required": ["name", "age"]})"));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto a = Compile(*text, trie);
  ExpectMasksExact(*a, {"", "{", "{\"name\": \"Zo", "{\"name\": \"Zoë\", \"age\": 1",
                        "{\"name\": \"Zoë\", \"age\": 1, \"tags\": [\"x\""});
  // The end of the object: only EOS may follow.
  const int32_t s = a->Advance(a->start(), "{\"name\": \"\", \"age\": 150}");
  ASSERT_GE(s, 0);
  EXPECT_TRUE(a->Accepting(s));
  EXPECT_FALSE(a->CanContinue(s));
}

const std::shared_ptr<const TokenTrie>& Qwen3Trie() {
  static const auto trie = [] {
    auto tok = LoadTokenizer("../shared/fixtures/tokenizers/qwen3");
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    return BuildTokenTrie(*tok, {});
  }();
  return trie;
}

// Bounded repetitions are counted runs: their masks come from a token table, and still equal the
// brute-force answer at the start, the middle and the end of the run, and where the table does not
// apply (an X that may end where another begins; an X most tokens leave).
TEST(Grammar, CountedRunMasksEqualBruteForce) {
  auto text = JsonSchemaToGrammar(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "s": {"type": "string", "minLength": 3, "maxLength": 40}}, "required": ["s"]})"));
  ASSERT_TRUE(text.ok());
  auto a = Compile(*text, Qwen3Trie());
  ExpectMasksExact(*a,
                   {"{\"s\": \"", "{\"s\": \"ab", "{\"s\": \"abcdefghij", "{\"s\": \"" + std::string(37, 'x'),
                    "{\"s\": \"" + std::string(40, 'x'), "{\"s\": \"\\u00e9" + std::string(30, 'y')});
  EXPECT_GE(a->stats().masks_by_run, 5);
  auto ambiguous = Compile("root ::= (\"a\" | \"ab\" | \"b\"){0,20} \"!\"", Qwen3Trie());
  ExpectMasksExact(*ambiguous, {"", "ab", "abababab"});
  EXPECT_EQ(ambiguous->stats().masks_by_run, 0);
  auto letters = Compile("root ::= [a-z]{2,30} \".\"", Qwen3Trie());
  ExpectMasksExact(*letters, {"", "abc"});
  EXPECT_EQ(letters->stats().masks_by_run, 0);
}

TEST(Grammar, MatcherAppliesMasksAndAcceptsTokens) {
  auto trie = ByteTrie({"ab", "abc", "ca"});
  auto a = Compile("root ::= \"ab\" \"c\"?", trie);
  Matcher m(a);
  std::vector<float> logits(static_cast<size_t>(trie->vocab_size()) + 3, 1.0f);  // model vocab may be larger
  m.Apply(logits);
  const int32_t ab = 256, abc = 257, ca = 258, eos = 259;
  EXPECT_EQ(logits['a'], 1.0f);
  EXPECT_EQ(logits[ab], 1.0f);
  EXPECT_EQ(logits[abc], 1.0f);
  EXPECT_TRUE(std::isinf(logits['b']));
  EXPECT_TRUE(std::isinf(logits[ca]));
  EXPECT_TRUE(std::isinf(logits[eos]));
  EXPECT_TRUE(std::isinf(logits.back()));
  EXPECT_FALSE(m.Accept(ca));
  EXPECT_TRUE(m.Accept(ab));
  EXPECT_TRUE(m.Accepting());
  EXPECT_TRUE(m.CanContinue());
  EXPECT_TRUE(m.Accept('c'));
  EXPECT_FALSE(m.CanContinue());
  EXPECT_TRUE(m.Accept(eos));
}

TEST(Grammar, CacheReusesAutomata) {
  GrammarCache cache(ByteTrie(), 2);
  auto a = cache.Get("root ::= \"a\"");
  auto b = cache.Get("root ::= \"a\"");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_FALSE(cache.Get("root ::= nope").ok());
}

}  // namespace
}  // namespace fak::grammar
