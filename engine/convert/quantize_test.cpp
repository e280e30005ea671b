// fak quantize: GGUF -> GGUF requantizes exactly like row-wise dequantize + quantize and keeps every
// key; HF folder -> GGUF permutes llama q/k rows so that fak (and llama.cpp) compute the same logits
// from both; bad input fails with a message and leaves no file.
#include "engine/convert/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/test_temp_dir.h"  // TestPathName
#include "engine/convert/random_weights.h"
#include "engine/model.h"
#include "engine/session.h"
#include "formats/gguf.h"
#include "quant/codec.h"
#include "tokenizer/loader.h"

namespace fak::convert {
namespace {

namespace fs = std::filesystem;

class QuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fak_quantize_test_" + std::to_string(::getpid()) + "_" + TestPathName());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// GPT-2's printable stand-in for each byte, as UTF-8.
std::string ByteChar(int b) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;  // HF order (rows, cols)
  std::vector<float> values;
};

// A tiny checkpoint: config.json, model.safetensors (F32) and a tokenizer: a 257-token byte-level
// tokenizer.json for llama, Llama 2's SentencePiece tokenizer.model for qwen2 (with q/k/v biases).
std::vector<HfTensor> WriteTinyCheckpoint(const fs::path& dir, const std::string& model_type = "llama") {
  const bool qwen2 = model_type == "qwen2";
  const int64_t d = 64, ffn = 128, n_head = 4, n_kv = 2, hd = 16, vocab = qwen2 ? 32000 : 320, layers = 2;
  nlohmann::json config = {{"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                           {"model_type", model_type},
                           {"hidden_size", d},
                           {"intermediate_size", ffn},
                           {"num_hidden_layers", layers},
                           {"num_attention_heads", n_head},
                           {"num_key_value_heads", n_kv},
                           {"vocab_size", vocab},
                           {"max_position_embeddings", 512},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 10000.0},
                           {"tie_word_embeddings", false},
                           {"torch_dtype", "float32"},
                           {"bos_token_id", 256},
                           {"eos_token_id", 256}};
  std::ofstream(dir / "config.json") << config.dump();
  if (qwen2) {
    fs::copy("../shared/fixtures/tokenizers/llama2/tokenizer.model", dir / "tokenizer.model");
  }
  nlohmann::json vocab_json = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab_json[ByteChar(b)] = b;
  nlohmann::json tok = {
      {"model", {{"type", "BPE"}, {"vocab", vocab_json}, {"merges", nlohmann::json::array()}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", {{{"id", 256}, {"content", "<|end|>"}, {"special", true}}}}};
  if (!qwen2) std::ofstream(dir / "tokenizer.json") << tok.dump();

  std::vector<HfTensor> ts;
  auto add = [&](std::string name, std::vector<int64_t> shape, float mean, float sd) {
    HfTensor t{std::move(name), std::move(shape), {}};
    t.values.resize(static_cast<size_t>(t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1)));
    FillRandomRow(TensorKey(3, t.name), 0, mean, sd, t.values.data(), static_cast<int64_t>(t.values.size()));
    ts.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {vocab, d}, 0, 0.5f);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {d}, 1, 0.1f);
    add(p + "self_attn.q_proj.weight", {n_head * hd, d}, 0, 0.3f);
    add(p + "self_attn.k_proj.weight", {n_kv * hd, d}, 0, 0.3f);
    add(p + "self_attn.v_proj.weight", {n_kv * hd, d}, 0, 0.1f);
    if (qwen2) {
      add(p + "self_attn.q_proj.bias", {n_head * hd}, 0, 0.1f);
      add(p + "self_attn.k_proj.bias", {n_kv * hd}, 0, 0.1f);
      add(p + "self_attn.v_proj.bias", {n_kv * hd}, 0, 0.1f);
    }
    add(p + "self_attn.o_proj.weight", {d, n_head * hd}, 0, 0.1f);
    add(p + "post_attention_layernorm.weight", {d}, 1, 0.1f);
    add(p + "mlp.gate_proj.weight", {ffn, d}, 0, 0.1f);
    add(p + "mlp.up_proj.weight", {ffn, d}, 0, 0.1f);
    add(p + "mlp.down_proj.weight", {d, ffn}, 0, 0.1f);
  }
  add("model.norm.weight", {d}, 1, 0.1f);
  add("lm_head.weight", {vocab, d}, 0, 0.1f);

  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const HfTensor& t : ts) {
    const uint64_t n = t.values.size() * 4;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  const uint64_t hn = h.size();
  out.write(reinterpret_cast<const char*>(&hn), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const HfTensor& t : ts) {
    out.write(reinterpret_cast<const char*>(t.values.data()),
              static_cast<std::streamsize>(t.values.size() * 4));
  }
  return ts;
}

std::vector<float> LastLogits(const std::string& path, const std::vector<int32_t>& prompt) {
  auto model = LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  auto rt = Runtime::Create(**model, RuntimeOptions{.max_context = 64, .backend = {.threads = 1}});
  EXPECT_TRUE(rt.ok());
  if (!rt.ok()) return {};
  auto s = Session::Create(**rt);
  std::vector<float> logits(static_cast<size_t>((*model)->config.vocab_size));
  EXPECT_TRUE((*s)->Prefill(prompt, logits.data()).ok());
  return logits;
}

TEST(LlamaPermutation, IsTheConvertersReshapeSwapaxes) {
  // reshape(n_head, 2, hd/2).swapaxes(1, 2): output (h, i, j) <- input (h, j, i).
  const int64_t hd = 8;
  std::vector<int64_t> got;
  for (int64_t r = 0; r < 16; ++r) got.push_back(LlamaPermutedSourceRow(r, hd));
  EXPECT_EQ(got, (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15}));
}

TEST(Llama3Rope, FactorsReproduceTheScaledFrequencies) {
  ModelConfig c;
  c.head_dim = 128;
  c.rope.theta = 500000;
  c.rope.scaling = RopeScaling::kLlama3;
  c.rope.factor = 8;
  c.rope.low_freq_factor = 1;
  c.rope.high_freq_factor = 4;
  c.rope.original_max_position = 8192;
  const std::vector<float> factors = Llama3RopeFactors(c);
  ASSERT_EQ(factors.size(), 64u);
  EXPECT_EQ(factors.front(), 1.0f);
  EXPECT_EQ(factors.back(), 8.0f);
  const std::vector<float> want = RopeInvFreq(c);
  ModelConfig plain = c;
  plain.rope.scaling = RopeScaling::kNone;
  const std::vector<float> got = RopeInvFreq(plain, factors.data());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i] / want[i], 1.0f, 1e-5f) << i;
}

TEST_F(QuantizeTest, HfLlamaToGgufPermutesQkAndComputesTheSameLogits) {
  const fs::path hf = dir_ / "tiny-llama-hf";
  fs::create_directories(hf);
  const std::vector<HfTensor> ts = WriteTinyCheckpoint(hf);
  QuantizeOptions o{hf.string(), Path("tiny.gguf"), "f32", 2, {}, {}};
  auto r = QuantizeModel(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto f = GgufFile::Open(Path("tiny.gguf"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetString("tokenizer.ggml.pre"), "gpt2");
  EXPECT_EQ((*f->GetArray("tokenizer.ggml.tokens"))->values.size(), 320u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 256u);

  // Undo the permutation on the GGUF rows: the HF q/k come back exactly; other matrices are as stored.
  for (const HfTensor& t : ts) {
    const std::string name = CanonicalTensorName(t.name, "llama");
    const GgufTensorInfo* g = f->FindTensor(name);
    ASSERT_NE(g, nullptr) << name;
    ASSERT_EQ(g->type, GgmlType::kF32);
    const int64_t cols = t.shape.size() > 1 ? t.shape[1] : t.shape[0];
    const int64_t rows = t.shape.size() > 1 ? t.shape[0] : 1;
    const bool permuted = name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight");
    const float* gv = reinterpret_cast<const float*>(g->data);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t src = permuted ? LlamaPermutedSourceRow(row, 16) : row;
      ASSERT_EQ(0, std::memcmp(gv + row * cols, t.values.data() + src * cols, static_cast<size_t>(cols) * 4))
          << name << " row " << row;
    }
    if (permuted) {
      EXPECT_NE(0, std::memcmp(gv, t.values.data(), t.values.size() * 4)) << name;
    }
  }
  // fak runs HF rotate-half and GGUF llama interleaved RoPE: equal logits prove the permutation.
  const std::vector<int32_t> prompt = {1, 7, 42, 99, 3, 250, 17, 5, 64, 11};
  const std::vector<float> a = LastLogits(hf.string(), prompt);
  const std::vector<float> b = LastLogits(Path("tiny.gguf"), prompt);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4f) << i;
}

TEST_F(QuantizeTest, HfQwen2ToGgufKeepsRowsBiasesAndASentencePieceTokenizer) {
  const fs::path hf = dir_ / "tiny-qwen2-hf";
  fs::create_directories(hf);
  const std::vector<HfTensor> ts = WriteTinyCheckpoint(hf, "qwen2");
  auto r = QuantizeModel({hf.string(), Path("q.gguf"), "f32", 2, {}, {}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto f = GgufFile::Open(Path("q.gguf"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->GetString("general.architecture"), "qwen2");
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  for (const HfTensor& t : ts) {  // nothing is permuted for qwen2
    const GgufTensorInfo* g = f->FindTensor(CanonicalTensorName(t.name, "llama"));
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(0, std::memcmp(g->data, t.values.data(), t.values.size() * 4)) << t.name;
  }
  auto from_gguf = LoadTokenizer(Path("q.gguf"));
  auto from_model = LoadTokenizer((hf / "tokenizer.model").string());
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().ToString();
  ASSERT_TRUE(from_model.ok());
  for (const char* text : {"Hello world", " leading space, déjà vu 123", "multi\nline\ttabs"}) {
    EXPECT_EQ(*from_gguf->Encode(text), *from_model->Encode(text)) << text;
  }
  const std::vector<int32_t> prompt = {1, 15043, 3186, 29892, 920, 526};
  const std::vector<float> a = LastLogits(hf.string(), prompt);
  const std::vector<float> b = LastLogits(Path("q.gguf"), prompt);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i += 97) EXPECT_NEAR(a[i], b[i], 1e-4f) << i;
}

TEST_F(QuantizeTest, GgufF16ToQ8_0EqualsRowWiseRequantization) {
  const fs::path hf = dir_ / "hf";
  fs::create_directories(hf);
  WriteTinyCheckpoint(hf);
  ASSERT_TRUE(QuantizeModel({hf.string(), Path("f16.gguf"), "f16", 2, {}, {}}).ok());
  auto r = QuantizeModel({Path("f16.gguf"), Path("q8.gguf"), "q8_0", 2, {}, {}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto in = GgufFile::Open(Path("f16.gguf"));
  auto out = GgufFile::Open(Path("q8.gguf"));
  ASSERT_TRUE(in.ok() && out.ok());
  EXPECT_EQ(*out->GetUint("general.file_type"), 7u);
  EXPECT_EQ(in->metadata().size(), out->metadata().size());
  for (const auto& [k, v] : in->metadata()) {
    ASSERT_NE(out->Find(k), nullptr) << k;
    if (k != "general.file_type") {
      EXPECT_EQ(out->Find(k)->type, v.type) << k;
    }
  }
  ASSERT_EQ(in->tensors().size(), out->tensors().size());
  for (const GgufTensorInfo& t : in->tensors()) {
    const GgufTensorInfo* q = out->FindTensor(t.name);
    ASSERT_NE(q, nullptr);
    const int64_t cols = static_cast<int64_t>(t.shape[0]);
    const int64_t rows = static_cast<int64_t>(t.n_elements) / cols;
    const GgmlType want = t.shape.size() == 1 ? GgmlType::kF32 : GgmlType::kQ8_0;
    ASSERT_EQ(q->type, want) << t.name;
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> bytes(*GgmlRowBytes(want, static_cast<uint64_t>(cols)));
    for (int64_t i = 0; i < rows; ++i) {
      ASSERT_TRUE(DequantizeRow(t.type, t.data + i * (t.n_bytes / rows), row.data(), cols).ok());
      ASSERT_TRUE(QuantizeRow(want, row.data(), bytes.data(), cols).ok());
      ASSERT_EQ(0, std::memcmp(bytes.data(), q->data + i * bytes.size(), bytes.size()))
          << t.name << " row " << i;
    }
  }
  // Same type again: tensors are copied byte for byte.
  ASSERT_TRUE(QuantizeModel({Path("q8.gguf"), Path("q8b.gguf"), "q8_0", 1, {}, {}}).ok());
  auto again = GgufFile::Open(Path("q8b.gguf"));
  for (const GgufTensorInfo& t : out->tensors()) {
    const GgufTensorInfo* c = again->FindTensor(t.name);
    ASSERT_EQ(c->n_bytes, t.n_bytes);
    EXPECT_EQ(0, std::memcmp(c->data, t.data, t.n_bytes)) << t.name;
  }
}

TEST_F(QuantizeTest, BadInputFailsClearlyAndWritesNothing) {
  const fs::path hf = dir_ / "hf";
  fs::create_directories(hf);
  WriteTinyCheckpoint(hf);
  std::ofstream(Path("notes.txt")) << "not a model";
  const fs::path broken = dir_ / "broken";
  fs::create_directories(broken);
  fs::copy(hf / "tokenizer.json", broken / "tokenizer.json");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(hf / "config.json"));
  config["tie_word_embeddings"] = true;  // no lm_head below: the embedding is the output matrix
  std::ofstream(broken / "config.json") << config.dump();
  {  // a checkpoint without the layers
    const std::string h =
        R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[320,64],"data_offsets":[0,81920]}})";
    std::string hp = h;
    while (hp.size() % 8 != 0) hp.push_back(' ');
    std::ofstream out(broken / "model.safetensors", std::ios::binary);
    const uint64_t n = hp.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << hp << std::string(81920, '\0');
  }
  // The same checkpoint with a config that says the output matrix is its own (hardening item 8).
  const fs::path untied = dir_ / "untied";
  fs::create_directories(untied);
  fs::copy(broken / "tokenizer.json", untied / "tokenizer.json");
  fs::copy(broken / "model.safetensors", untied / "model.safetensors");
  config["tie_word_embeddings"] = false;
  std::ofstream(untied / "config.json") << config.dump();
  struct Bad {
    QuantizeOptions o;
    std::string want;
  };
  const std::vector<Bad> cases = {
      {{Path("missing.gguf"), Path("o.gguf"), "q8_0", 1, {}, {}}, "no such file"},
      {{hf.string(), Path("no/folder/o.gguf"), "q8_0", 1, {}, {}}, "does not exist"},
      {{hf.string(), Path("o.gguf"), "q2_k", 1, {}, {}}, "unknown type 'q2_k'"},
      {{Path("notes.txt"), Path("o.gguf"), "q8_0", 1, {}, {}}, "not a GGUF file"},
      {{broken.string(), Path("o.gguf"), "q8_0", 1, {}, {}}, "missing tensor 'blk.0.attn_norm.weight'"},
      {{untied.string(), Path("o.gguf"), "q8_0", 1, {}, {}},
       "config.json says tie_word_embeddings is false, but the checkpoint has no output matrix"},
  };
  for (const Bad& b : cases) {
    auto r = QuantizeModel(b.o);
    ASSERT_FALSE(r.ok()) << b.want;
    EXPECT_NE(r.status().message().find(b.want), std::string::npos) << r.status().ToString();
    EXPECT_FALSE(fs::exists(Path("o.gguf")));
    EXPECT_FALSE(fs::exists(Path("o.gguf.tmp")));
  }
}

}  // namespace
}  // namespace fak::convert
