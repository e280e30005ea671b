#include "tokenizer/pre_split.h"

#include <algorithm>
#include <initializer_list>

#include "tokenizer/regex.h"    // Regex
#include "tokenizer/unicode.h"  // GetByteLevelTable

namespace fak {

// HuggingFace's ByteLevel pattern (GPT-2).
const char kGpt2SplitPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// The split regexes of the pre-tokenizers llama.cpp knows (src/llama-vocab.cpp), written as the
// models' tokenizer.json files have them where llama.cpp rewrote one for its own regex engine (PCRE2
// runs the originals: case-insensitive groups, \p{Lu}-style classes, possessive quantifiers).
const char kLlama3[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kQwen2[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kQwen35[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kJais2[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
const char kDeepseekLlmLetters[] =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
const char kDeepseekLlmPunct[] =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
const char kDeepseekCjk[] = R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
const char kCjkKana[] = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
const char kDeepseekV3[] =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kSpark25[] =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re";
const char kYoutuCjk[] =
    R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
const char kYoutu[] =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kFalconPunct[] = R"re([\p{P}\$\+<=>\^~\|`]+)re";
const char kDefaultPunct[] = R"re([\p{P}\$\+<=>\^~\|]+)re";
const char kThreeDigits[] = R"re([0-9][0-9][0-9])re";
const char kBloom[] = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";
const char kTekken[] =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kGpt4o[] =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kGraniteEmbMulti[] =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Kimi K2 (tokenization_kimi.py) uses class intersection, [\p{Lu}...&&[^\p{Han}]]; a negative
// lookahead says the same to PCRE2.
const char kKimiK2[] =
    R"re([\p{Han}]+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kBailingMoe[] =
    R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
const char kSeedCoder[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char kUfakzeka[] =
    R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// AFMoE groups a digit run in threes from the right (llama.cpp hand-codes it as \p{AFMoE_digits}).
const char kDigitsInThreesFromRight[] = R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re";
const char kAfmoeCjk[] =
    R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{8C48}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{E40}-\x{E7F}\x{E80}-\x{EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)re";
const char kLines[] = R"re([^\n]+|[\n]+)re";
const char kExaoneMoe[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
const char kMiniCpm5[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct PreEntry {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> patterns;
  bool ignore_merges = false;
  bool byte_level = true;
  bool escape_whitespace = false;
};

// One row per llama.cpp pre-tokenizer type, with every tokenizer.ggml.pre name that selects it.
const PreEntry kPreEntries[] = {
    {{"default"}, {kDefaultPunct, kGpt2SplitPattern, R"(\p{N}+)", kThreeDigits}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      "jina-v5-nano"},
     {kLlama3},
     /*ignore_merges=*/true},
    {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}},
    {{"glm4", "glm5"}, {kLlama3}, /*ignore_merges=*/true},
    {{"jais-2"}, {kJais2}},
    {{"deepseek-llm"},
     {R"([\r\n])", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
    {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
    {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, {R"(\p{N}{1,3})", kCjkKana, kDeepseekV3}},
    {{"spark2_5"}, {R"(\p{N}{1,3})", kCjkKana, kSpark25, R"(\p{N})"}},
    {{"youtu"}, {kYoutuCjk, kYoutu}, /*ignore_merges=*/true},
    {{"falcon"}, {kFalconPunct, kGpt2SplitPattern, kThreeDigits}},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
     {R"(\p{N})", kGpt2SplitPattern}},
    {{"gpt-2",      "gpt2",    "phi-2",  "jina-es",     "jina-de",         "gigachat",     "jina-v2-es",
      "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en",      "jina-v2-code", "roberta-bpe",
      "mpt",        "olmo",    "jais",   "trillion",    "granite-docling", "exaone4"},
     {kGpt2SplitPattern}},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan", "solar-open",
      "grok-2"},
     {kQwen2}},
    {{"qwen35"}, {kQwen35}},
    {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
    {{"viking"}, {kBloom, R"(\p{N})"}},
    {{"tekken"}, {kTekken}, /*ignore_merges=*/true},
    {{"chameleon"},
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", R"(\p{N})",
      R"([\p{P}!-/:-@\[-`{-~])", kGpt2SplitPattern}},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}},
    {{"granite-embed-multi-97m"}, {kGraniteEmbMulti}, /*ignore_merges=*/true},
    {{"tiny_aya", "cohere2moe"}, {R"(\d{1,3}(?=(?:\d{3})*\b))", kGpt4o}},
    {{"kimi-k2"}, {kKimiK2}},
    {{"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}},
    {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingMoe}},
    {{"seed-coder"}, {kSeedCoder}},
    {{"ufakzeka"}, {kUfakzeka}},
    {{"afmoe"}, {kDigitsInThreesFromRight, kAfmoeCjk, kDeepseekV3}},
    {{"laguna"}, {kLines, kQwen2}},
    {{"exaone-moe"}, {kExaoneMoe}},
    {{"gemma4", "granite-embed-multi-311m", "sarvam-moe"},
     {kLines},
     /*ignore_merges=*/false,
     /*byte_level=*/false,
     /*escape_whitespace=*/true},
    {{"minicpm5"}, {R"(\p{N}{1,3})", kMiniCpm5}, /*ignore_merges=*/true},
    {{"whitespace"}, {R"(\S+)"}, /*ignore_merges=*/false, /*byte_level=*/false},
};

}  // namespace

Result<GgufPreTokenizer> GgufPreTokenizerFor(std::string_view pre) {
  for (const PreEntry& e : kPreEntries) {
    if (std::find(e.names.begin(), e.names.end(), pre) == e.names.end()) continue;
    GgufPreTokenizer p;
    for (const char* pattern : e.patterns) p.splits.emplace_back(pattern);
    p.ignore_merges = e.ignore_merges;
    p.byte_level = e.byte_level;
    p.escape_whitespace = e.escape_whitespace;
    return p;
  }
  return NotFound("unknown pre-tokenizer '{}' (tokenizer.ggml.pre)", pre);
}

std::vector<std::string_view> KnownGgufPreNames() {
  std::vector<std::string_view> names;
  for (const PreEntry& e : kPreEntries) names.insert(names.end(), e.names.begin(), e.names.end());
  return names;
}

Result<std::vector<SplitRule>> PreSplitPatternsForGgufPre(std::string_view pre) {
  FAK_ASSIGN_OR_RETURN(GgufPreTokenizer p, GgufPreTokenizerFor(pre));
  return std::move(p.splits);
}

struct PreSplitter::Impl {
  struct Rule {
    Regex regex;
    SplitRule rule;
  };
  std::vector<Rule> rules;
};

namespace {

// A stretch of a piece and whether it counts as a match (after `invert`).
struct Segment {
  size_t begin;
  size_t end;
  bool match;
};

struct SplitScratch {
  std::vector<Regex::Match> matches;
  std::vector<Segment> segments;
  std::string mapped;            // byte-level form of a piece
  std::vector<uint32_t> raw_of;  // mapped offset -> byte offset in the piece (at character starts)
};

SplitScratch& ThreadScratch() {
  thread_local SplitScratch s;
  return s;
}

// Splits `piece` by one rule, appending non-empty pieces to *out.
void SplitPiece(const Regex& regex, const SplitRule& rule, std::string_view piece, SplitScratch& s,
                std::vector<std::string_view>* out) {
  if (rule.on_byte_level) {
    const ByteLevelTable& bl = GetByteLevelTable();
    s.mapped.clear();
    s.raw_of.clear();
    for (size_t i = 0; i < piece.size(); ++i) {
      s.raw_of.resize(s.mapped.size() + 1, 0);
      s.raw_of[s.mapped.size()] = static_cast<uint32_t>(i);
      s.mapped += bl.byte_to_utf8[static_cast<uint8_t>(piece[i])];
    }
    s.raw_of.resize(s.mapped.size() + 1, 0);
    s.raw_of[s.mapped.size()] = static_cast<uint32_t>(piece.size());
    regex.FindAll(s.mapped, &s.matches);
    for (Regex::Match& m : s.matches) {
      m.begin = s.raw_of[m.begin];
      m.end = s.raw_of[m.end];
    }
  } else {
    regex.FindAll(piece, &s.matches);
  }
  // Matches and the gaps between them, in order (empty matches still mark a boundary).
  s.segments.clear();
  size_t prev = 0;
  for (const Regex::Match& m : s.matches) {
    if (m.begin > prev) s.segments.push_back(Segment{prev, m.begin, false});
    s.segments.push_back(Segment{m.begin, m.end, true});
    prev = m.end;
  }
  if (prev < piece.size()) s.segments.push_back(Segment{prev, piece.size(), false});
  if (rule.invert) {
    for (Segment& seg : s.segments) seg.match = !seg.match;
  }
  // Fold the segments into pieces as HuggingFace's SplitDelimiterBehavior does.
  std::vector<Segment>& segs = s.segments;
  size_t n = 0;  // pieces kept in segs[0..n)
  switch (rule.behavior) {
    case SplitBehavior::kIsolated: n = segs.size(); break;
    case SplitBehavior::kRemoved:
      for (const Segment& seg : segs) {
        if (!seg.match) segs[n++] = seg;
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (size_t i = 0; i < segs.size(); ++i) {
        const Segment seg = segs[i];
        if (seg.match && !previous_match && n > 0) {
          segs[n - 1].end = seg.end;
        } else {
          segs[n++] = seg;
        }
        previous_match = seg.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // Right to left: a match joins the piece after it unless that piece is a match too.
      std::vector<Segment> rev;
      bool next_match = false;
      for (size_t i = segs.size(); i-- > 0;) {
        const Segment seg = segs[i];
        if (seg.match && !next_match && !rev.empty()) {
          rev.back().begin = seg.begin;
        } else {
          rev.push_back(seg);
        }
        next_match = seg.match;
      }
      std::reverse(rev.begin(), rev.end());
      segs.swap(rev);
      n = segs.size();
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (size_t i = 0; i < segs.size(); ++i) {
        const Segment seg = segs[i];
        if (seg.match == previous_match && n > 0) {
          segs[n - 1].end = seg.end;
        } else {
          segs[n++] = seg;
        }
        previous_match = seg.match;
      }
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (segs[i].end > segs[i].begin) out->push_back(piece.substr(segs[i].begin, segs[i].end - segs[i].begin));
  }
}

}  // namespace

PreSplitter::PreSplitter() : impl_(std::make_unique<Impl>()) {}
PreSplitter::~PreSplitter() = default;
PreSplitter::PreSplitter(PreSplitter&&) noexcept = default;
PreSplitter& PreSplitter::operator=(PreSplitter&&) noexcept = default;

size_t PreSplitter::num_patterns() const { return impl_->rules.size(); }

Result<PreSplitter> PreSplitter::Create(const std::vector<SplitRule>& rules) {
  PreSplitter s;
  for (const SplitRule& rule : rules) {
    Result<Regex> regex = Regex::Compile(rule.pattern);
    if (!regex.ok()) return regex.status().WithContext("pre-tokenizer");
    s.impl_->rules.push_back(Impl::Rule{std::move(regex).value(), rule});
  }
  return s;
}

void PreSplitter::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  if (impl_->rules.empty()) {
    pieces->push_back(text);
    return;
  }
  SplitScratch& s = ThreadScratch();
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t ri = 0; ri < impl_->rules.size(); ++ri) {
    const Impl::Rule& r = impl_->rules[ri];
    const bool last = ri + 1 == impl_->rules.size();
    std::vector<std::string_view>& out = last ? *pieces : next;
    for (std::string_view piece : current) SplitPiece(r.regex, r.rule, piece, s, &out);
    if (!last) {
      current.swap(next);
      next.clear();
    }
  }
}

}  // namespace fak
