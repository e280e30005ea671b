// Hostile and broken GGUF files: each must fail with a message that names the problem, never crash
// (this suite also runs under ASan+UBSan).
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "formats/gguf_test_util.h"

namespace fak {
namespace {

using testing::GgufBytes;

// A small valid file: 2 metadata entries, 2 tensors (f32 [32], q8_0 [32, 2]).
struct ValidFile {
  GgufBytes b;
  size_t after_header = 0, after_kv = 0, after_infos = 0, data_start = 0;
  ValidFile() {
    b.Header(3, 2, 2);
    after_header = b.size();
    b.KvStr("general.architecture", "llama").KvU32("llama.block_count", 1);
    after_kv = b.size();
    b.TensorInfo("a", {32}, 0, 0).TensorInfo("b", {32, 2}, 8, 128);
    after_infos = b.size();
    b.Align();
    data_start = b.size();
    b.Zeros(128 + 68);
  }
};

std::string ParseError(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::Parse(bytes, "bad.gguf");
  if (f.ok()) return "";
  return f.status().message();
}

void ExpectError(const std::vector<uint8_t>& bytes, const std::string& needle) {
  std::string msg = ParseError(bytes);
  ASSERT_FALSE(msg.empty()) << "parsed a file that should fail (want '" << needle << "')";
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
}

TEST(GgufMalformed, ValidBaselineParses) {
  ValidFile v;
  auto f = GgufFile::Parse(v.b.bytes, "ok.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST(GgufMalformed, TruncationAtEveryByteFails) {
  ValidFile v;
  // Every prefix short of the whole file is an error: header, metadata, tensor infos, padding, data.
  for (size_t n = 0; n < v.b.size(); ++n) {
    std::vector<uint8_t> cut(v.b.bytes.begin(), v.b.bytes.begin() + static_cast<long>(n));
    std::string msg = ParseError(cut);
    EXPECT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(GgufMalformed, TruncationAtSectionBoundariesNamesTheSection) {
  ValidFile v;
  auto cut = [&](size_t n) {
    return std::vector<uint8_t>(v.b.bytes.begin(), v.b.bytes.begin() + static_cast<long>(n));
  };
  ExpectError(cut(2), "magic");
  ExpectError(cut(6), "version");
  ExpectError(cut(12), "tensor count");
  ExpectError(cut(v.after_header), "metadata count");  // nothing left for 2 entries
  ExpectError(cut(v.after_kv), "tensor name");
  ExpectError(cut(v.after_infos), "tensor data section");
  ExpectError(cut(v.data_start + 100), "past the end");
}

TEST(GgufMalformed, BadMagic) {
  ValidFile v;
  v.b.bytes[0] = 'X';
  ExpectError(v.b.bytes, "bad magic");
}

TEST(GgufMalformed, UnknownVersion) {
  for (uint32_t version : {0u, 1u, 4u, 0xFFFFFFFFu}) {
    ValidFile v;
    std::memcpy(&v.b.bytes[4], &version, 4);
    ExpectError(v.b.bytes, "GGUF version " + std::to_string(version));
  }
}

TEST(GgufMalformed, HugeCounts) {
  for (uint64_t n : {~0ull, (1ull << 63), (1ull << 40)}) {
    ValidFile v;
    std::memcpy(&v.b.bytes[8], &n, 8);
    ExpectError(v.b.bytes, "tensor count");
    ValidFile w;
    std::memcpy(&w.b.bytes[16], &n, 8);
    ExpectError(w.b.bytes, "metadata count");
  }
}

TEST(GgufMalformed, HugeStringLengths) {
  for (uint64_t n : {~0ull, ~0ull - 7, (1ull << 63)}) {
    GgufBytes key;
    key.Header(3, 0, 1).Pod<uint64_t>(n).Zeros(64);
    ExpectError(key.bytes, "metadata key length");
    GgufBytes val;
    val.Header(3, 0, 1).Str("k").Pod<uint32_t>(8).Pod<uint64_t>(n).Zeros(64);
    ExpectError(val.bytes, "string value length");
    GgufBytes name;
    name.Header(3, 1, 0).Pod<uint64_t>(n).Zeros(64);
    ExpectError(name.bytes, "tensor name length");
  }
}

TEST(GgufMalformed, HugeArrayLength) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("arr").Pod<uint32_t>(9).Pod<uint32_t>(4).Pod<uint64_t>(~0ull / 2).Zeros(64);
  ExpectError(b.bytes, "array of");
  GgufBytes s;  // array of strings claiming 2^61 elements
  s.Header(3, 0, 1).Str("arr").Pod<uint32_t>(9).Pod<uint32_t>(8).Pod<uint64_t>(1ull << 61).Zeros(64);
  ExpectError(s.bytes, "array of");
}

TEST(GgufMalformed, DeeplyNestedArrays) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("deep").Pod<uint32_t>(9);
  for (int i = 0; i < 100; ++i) b.Pod<uint32_t>(9).Pod<uint64_t>(1);
  b.Pod<uint32_t>(4).Pod<uint64_t>(1).Pod<uint32_t>(1);
  ExpectError(b.bytes, "nested deeper");
}

TEST(GgufMalformed, UnknownValueTypes) {
  GgufBytes b;
  b.Header(3, 0, 1).Str("k").Pod<uint32_t>(13).Pod<uint32_t>(0);
  ExpectError(b.bytes, "unknown value type 13");
  GgufBytes a;
  a.Header(3, 0, 1).Str("k").Pod<uint32_t>(9).Pod<uint32_t>(99).Pod<uint64_t>(0);
  ExpectError(a.bytes, "unknown array element type 99");
  GgufBytes bo;
  bo.Header(3, 0, 1).Str("k").Pod<uint32_t>(7).Pod<uint8_t>(2);
  ExpectError(bo.bytes, "bool value 2");
}

TEST(GgufMalformed, DuplicateKeysAndTensors) {
  GgufBytes k;
  k.Header(3, 0, 2).KvU32("x", 1).KvU32("x", 2);
  ExpectError(k.bytes, "duplicate metadata key 'x'");
  GgufBytes t;
  t.Header(3, 2, 0).TensorInfo("w", {32}, 0, 0).TensorInfo("w", {32}, 0, 128).Align().Zeros(256);
  ExpectError(t.bytes, "duplicate tensor name 'w'");
}

// Each byte of the data section belongs to at most one tensor: "a" (32 f32 = 128 bytes at 0) and "b"
// at 96 share 32 bytes; touching ranges are fine.
TEST(GgufMalformed, OverlappingTensorsAreRefused) {
  GgufBytes t;
  t.Header(3, 2, 0).TensorInfo("a", {32}, 0, 0).TensorInfo("b", {32}, 0, 96).Align().Zeros(256);
  ExpectError(t.bytes, "tensor 'a' (data [");
  ExpectError(t.bytes, "overlaps tensor 'b'");
  GgufBytes same;
  same.Header(3, 2, 0).TensorInfo("a", {32}, 0, 0).TensorInfo("b", {8}, 0, 0).Align().Zeros(256);
  ExpectError(same.bytes, "overlaps tensor");
  GgufBytes touching;
  touching.Header(3, 2, 0).TensorInfo("b", {32}, 0, 128).TensorInfo("a", {32}, 0, 0).Align().Zeros(256);
  EXPECT_TRUE(GgufFile::Parse(touching.bytes, "t.gguf").ok());
}

TEST(GgufMalformed, TensorInfoErrors) {
  auto one = [](std::vector<uint64_t> shape, uint32_t type, uint64_t offset, size_t data = 256) {
    GgufBytes b;
    b.Header(3, 1, 0).TensorInfo("w", std::move(shape), type, offset).Align().Zeros(data);
    return b.bytes;
  };
  ExpectError(one({32}, 0, 4096), "past the end of the file");                   // offset past EOF
  ExpectError(one({32}, 0, ~0ull & ~31ull), "past the end of the file");         // offset near 2^64
  ExpectError(one({1ull << 30, 1ull << 30}, 0, 0), "past the end of the file");  // size past EOF
  ExpectError(one({1ull << 40, 1ull << 40}, 0, 0), "overflows");                 // element count overflows
  ExpectError(one({32}, 0, 4), "not aligned");                                   // misaligned data
  ExpectError(one({32}, 4, 0), "unknown ggml type 4");                           // removed type id
  ExpectError(one({32}, 1000, 0), "unknown ggml type 1000");
  ExpectError(one({33}, 8, 0), "block size");  // partial q8_0 block
  ExpectError(one({}, 0, 0), "0 dimensions");
  ExpectError(one({2, 2, 2, 2, 2}, 0, 0), "5 dimensions");
  ExpectError(one({32, 0}, 0, 0), "is zero");
}

TEST(GgufMalformed, BadAlignmentKey) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 30}) {
    GgufBytes b;
    b.Header(3, 0, 1).KvU32("general.alignment", a);
    ExpectError(b.bytes, "general.alignment");
  }
}

TEST(GgufMalformed, RandomByteFlipsNeverCrash) {
  ValidFile v;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> m = v.b.bytes;
    for (int k = 0; k < 3; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      m[x % m.size()] = static_cast<uint8_t>(x >> 32);
    }
    auto f = GgufFile::Parse(m, "flip.gguf");
    if (f.ok()) {
      for (const auto& t : f->tensors()) EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, m.size());
    } else {
      EXPECT_FALSE(f.status().message().empty());
    }
  }
}

}  // namespace
}  // namespace fak
