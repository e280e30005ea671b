#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace fak {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<uint8_t> Build(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

struct Tensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> BuildFile(const std::vector<Tensor>& ts, json meta = nullptr) {
  json h = json::object();
  std::vector<uint8_t> data;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  if (!meta.is_null()) h["__metadata__"] = meta;
  return Build(h.dump(), data);
}

void WriteFile(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<long>(b.size()));
}

std::vector<uint8_t> F32Bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Safetensors, ReadsEveryDtypeInPlace) {
  std::vector<Tensor> ts = {
      {"f32", "F32", {2, 2}, F32Bytes({1, 2, 3, 4})},
      {"bf16", "BF16", {3}, std::vector<uint8_t>(6, 1)},
      {"f16", "F16", {1, 2}, std::vector<uint8_t>(4, 2)},
      {"i8", "I8", {5}, std::vector<uint8_t>(5, 3)},
      {"u8", "U8", {1}, {9}},
      {"i64", "I64", {2}, std::vector<uint8_t>(16, 0)},
      {"bool", "BOOL", {2}, {0, 1}},
      {"f64", "F64", {1}, std::vector<uint8_t>(8, 0)},
      {"scalar", "F32", {}, F32Bytes({7})},
      {"empty", "F32", {0, 4}, {}},
  };
  auto bytes = BuildFile(ts, json{{"format", "pt"}});
  auto f = SafetensorsFile::Parse(bytes, "mem.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->tensors().size(), ts.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsTensor* t = f->Find("f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(t->shape, (std::vector<uint64_t>{2, 2}));
  float x[4];
  std::memcpy(x, t->data, 16);
  EXPECT_EQ(x[3], 4.0f);
  EXPECT_GE(t->data, bytes.data());  // points into the buffer: no copy
  EXPECT_LT(t->data, bytes.data() + bytes.size());
  EXPECT_EQ(f->Find("scalar")->n_elements, 1u);
  EXPECT_EQ(f->Find("empty")->n_elements, 0u);
  EXPECT_EQ(f->Find("bf16")->dtype, SafetensorsDtype::kBF16);
}

std::string Err(const std::vector<uint8_t>& b) {
  auto f = SafetensorsFile::Parse(b, "bad.safetensors");
  return f.ok() ? "" : f.status().message();
}

void ExpectErr(const std::vector<uint8_t>& b, const std::string& needle) {
  std::string m = Err(b);
  ASSERT_FALSE(m.empty()) << "parsed; want " << needle;
  EXPECT_NE(m.find(needle), std::string::npos) << m;
  EXPECT_NE(m.find("bad.safetensors"), std::string::npos) << m;
}

TEST(SafetensorsMalformed, HeaderProblems) {
  ExpectErr({1, 2, 3}, "truncated");
  std::vector<uint8_t> huge(16, 0xFF);
  ExpectErr(huge, "header length");
  std::vector<uint8_t> past = Build("{}", {});
  past[0] = 200;
  ExpectErr(past, "runs past the end");
  ExpectErr(Build("{\"a\": ", {}), "not valid JSON");
  ExpectErr(Build("not json at all", {}), "not valid JSON");
  ExpectErr(Build("[1, 2]", {}), "not an object");
  ExpectErr(Build("{\"t\": 5}", {}), "tensor 't' is not an object");
  ExpectErr(Build("{\"__metadata__\": {\"a\": 1}}", {}), "__metadata__.a");
}

TEST(SafetensorsMalformed, TensorEntryProblems) {
  std::vector<uint8_t> d(16, 0);
  ExpectErr(Build(R"({"t": {"shape": [4], "data_offsets": [0, 16]}})", d), "'dtype'");
  ExpectErr(Build(R"({"t": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 16]}})", d),
            "unknown dtype 'Q9'");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "data_offsets": [0, 16]}})", d), "'shape'");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", d), "non-integer");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [4]}})", d), "data_offsets");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})", d), "end before");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 32]}})", d), "past the end");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 18446744073709551615]}})", d),
            "past the end");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", d),
            "16 bytes of data for 3");
  ExpectErr(
      Build(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})", d),
      "overflows");
  ExpectErr(Build(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                  d),
            "overlap");
  ExpectErr(Build(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                  d),
            "duplicate tensor name 't'");
}

TEST(SafetensorsMalformed, TruncationAtEveryByteFails) {
  auto bytes = BuildFile({{"a", "F32", {4}, F32Bytes({1, 2, 3, 4})}, {"b", "BF16", {2}, {1, 2, 3, 4}}});
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_FALSE(Err(cut).empty()) << n;
  }
}

TEST(SafetensorsCheckpoint, SingleFileAndShards) {
  const fs::path dir = fs::temp_directory_path() / ("fak_st_ckpt_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  WriteFile(dir / "model-00001-of-00002.safetensors",
            BuildFile({{"model.embed_tokens.weight", "BF16", {4, 2}, std::vector<uint8_t>(16, 1)}}));
  WriteFile(dir / "model-00002-of-00002.safetensors",
            BuildFile({{"model.norm.weight", "F32", {2}, F32Bytes({1, 1})},
                       {"lm_head.weight", "BF16", {4, 2}, std::vector<uint8_t>(16, 2)}}));
  json index = {{"metadata", {{"total_size", 36}}},
                {"weight_map",
                 {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                  {"model.norm.weight", "model-00002-of-00002.safetensors"},
                  {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  auto ck = SafetensorsCheckpoint::Open(dir.string());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->shards().size(), 2u);
  EXPECT_EQ(ck->tensors().size(), 3u);
  ASSERT_NE(ck->Find("lm_head.weight"), nullptr);
  EXPECT_EQ(ck->Find("lm_head.weight")->data[0], 2);

  // The index names a tensor its shard lacks.
  index["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  auto bad = SafetensorsCheckpoint::Open(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.layers.0.mlp.up_proj.weight"), std::string::npos);

  // A shard path that escapes the folder.
  index["weight_map"]["model.norm.weight"] = "../evil.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  auto evil = SafetensorsCheckpoint::Open(dir.string());
  ASSERT_FALSE(evil.ok());
  EXPECT_NE(evil.status().message().find("outside"), std::string::npos);

  // A missing shard file.
  index["weight_map"]["model.norm.weight"] = "model-00003-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  auto missing = SafetensorsCheckpoint::Open(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model-00003-of-00002.safetensors"), std::string::npos);

  // A single-file checkpoint.
  fs::remove(dir / "model.safetensors.index.json");
  EXPECT_FALSE(SafetensorsCheckpoint::Open(dir.string()).ok());  // no model.safetensors either
  WriteFile(dir / "model.safetensors", BuildFile({{"x", "F32", {1}, F32Bytes({3})}}));
  auto single = SafetensorsCheckpoint::Open(dir.string());
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->tensors().size(), 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fak
