// Encode throughput on a few MB of mixed English, code and CJK text, built deterministically.
// Not a test: prints MB/s per tokenizer. Run from the repository root:
//   build/tokenizer/fak_tokenizer_bench [--mb 4] [--repeat 3] [MODEL ...]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/timer.h"        // Timer
#include "tokenizer/loader.h"  // LoadTokenizer

namespace {

struct Rng {
  uint64_t s;
  uint32_t Next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 33);
  }
  size_t Below(size_t n) { return Next() % n; }
};

const char* const kWords[] = {"the",          "of",
                              "and",          "to",
                              "in",           "is",
                              "that",         "for",
                              "it",           "as",
                              "was",          "with",
                              "be",           "by",
                              "on",           "not",
                              "he",           "this",
                              "are",          "or",
                              "his",          "from",
                              "at",           "which",
                              "but",          "have",
                              "an",           "had",
                              "they",         "you",
                              "were",         "their",
                              "one",          "all",
                              "we",           "can",
                              "her",          "has",
                              "there",        "been",
                              "if",           "more",
                              "when",         "will",
                              "would",        "who",
                              "so",           "no",
                              "model",        "inference",
                              "tokenizer",    "throughput",
                              "memory",       "bandwidth",
                              "latency",      "government",
                              "experience",   "understanding",
                              "particularly", "nevertheless",
                              "Wednesday",    "London",
                              "Einstein",     "don't",
                              "it's",         "we'll",
                              "they've",      "1984",
                              "2.5%",         "$300",
                              "e-mail",       "co-operate"};
const char* const kCode[] = {
    "for (size_t i = 0; i < n; ++i) {\n    acc += a[i] * b[i];\n}\n",
    "def forward(self, x):\n    h = self.norm(x)\n    return x + self.mlp(h)\n",
    "if (!status.ok()) return status.WithContext(\"while loading \" + path);\n",
    "const auto it = std::lower_bound(v.begin(), v.end(), key);\n",
    "    # TODO(perf): fuse the two loops below\n    out = [f(x) for x in xs if x is not None]\n",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id;\n",
    "<div class=\"row\"><span>{{ item.title }}</span></div>\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n}\n"};
const char kCjk[] =
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要"
    "下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事"
    "只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民"
    "样现分将外但身些与高意进把法此实回二理美点月明東京大阪日本語のテキス"
    "トをトークン化するひらがなカタカナ한국어텍스트토큰화속도측정";

void AppendCjkSentence(Rng& rng, std::string* out) {
  // Characters of kCjk are 3 bytes each.
  const size_t n_chars = (sizeof(kCjk) - 1) / 3;
  const size_t len = 8 + rng.Below(30);
  for (size_t i = 0; i < len; ++i) out->append(kCjk + 3 * rng.Below(n_chars), 3);
  out->append(rng.Below(2) ? "\xE3\x80\x82" : "\xEF\xBC\x8C");  // 。 or ，
}

// About `bytes` of text: half English prose, a quarter code, a quarter CJK, in ~2 KB documents.
std::vector<std::string> BuildCorpus(size_t bytes) {
  Rng rng{12345};
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < bytes) {
    std::string doc;
    const size_t kind = rng.Below(4);
    while (doc.size() < 2048) {
      if (kind <= 1) {
        const size_t len = 6 + rng.Below(20);
        for (size_t i = 0; i < len; ++i) {
          std::string w = kWords[rng.Below(sizeof(kWords) / sizeof(kWords[0]))];
          if (i == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
          doc += w;
          doc += i + 1 == len ? ". " : (rng.Below(10) == 0 ? ", " : " ");
        }
        if (rng.Below(5) == 0) doc += "\n\n";
      } else if (kind == 2) {
        doc += kCode[rng.Below(sizeof(kCode) / sizeof(kCode[0]))];
      } else {
        AppendCjkSentence(rng, &doc);
        if (rng.Below(6) == 0) doc += "\n";
      }
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 4;
  int repeat = 3;
  std::string dump;  // writes the corpus, one document per line (newlines escaped), for other tokenizers
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mb") && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) {
      dump = argv[++i];
    } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else {
      models.push_back(argv[i]);
    }
  }
  if (models.empty()) {
    models = {"../shared/fixtures/tokenizers/qwen3/tokenizer.json",
              "../shared/fixtures/tokenizers/llama2/tokenizer.model"};
  }
  const std::vector<std::string> docs = BuildCorpus(static_cast<size_t>(mb * 1024 * 1024));
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  if (!dump.empty()) {
    FILE* f = std::fopen(dump.c_str(), "wb");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", dump.c_str());
      return 1;
    }
    for (const auto& d : docs) {
      std::string line;
      for (char c : d) {
        if (c == '\n') {
          line += "\\n";
        } else if (c == '\\') {
          line += "\\\\";
        } else {
          line += c;
        }
      }
      std::fprintf(f, "%s\n", line.c_str());
    }
    std::fclose(f);
  }
  std::printf("corpus: %zu documents, %.2f MB (1/2 English, 1/4 code, 1/4 CJK)\n", docs.size(), bytes / 1e6);

  for (const std::string& path : models) {
    fak::Timer load_timer;
    fak::Result<fak::Tokenizer> tok = fak::LoadTokenizer(path);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
      return 1;
    }
    const double load_s = load_timer.Seconds();
    fak::EncodeOptions opts;
    opts.add_special = false;
    double best = 1e30;
    double first = 0;
    size_t n_tokens = 0;
    for (int r = 0; r < repeat; ++r) {
      n_tokens = 0;
      fak::Timer t;
      for (const auto& d : docs) {
        fak::Result<std::vector<int32_t>> ids = tok->Encode(d, opts);
        if (!ids.ok()) {
          std::fprintf(stderr, "%s\n", ids.status().ToString().c_str());
          return 1;
        }
        n_tokens += ids->size();
      }
      const double s = t.Seconds();
      if (r == 0) first = s;
      best = std::min(best, s);
    }
    std::printf(
        "%s: load %.2f s; %zu tokens (%.2f bytes/token); first pass %.1f MB/s; best of %d %.1f MB/s "
        "(%.2f M tokens/s)\n",
        path.c_str(), load_s, n_tokens, static_cast<double>(bytes) / n_tokens, bytes / 1e6 / first, repeat,
        bytes / 1e6 / best, n_tokens / 1e6 / best);
  }
  return 0;
}
