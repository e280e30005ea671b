#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include <filesystem>
#include <fstream>
#include <memory>

#include "formats/gguf_test_util.h"
#include "formats/gguf_writer.h"

namespace fak {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> FixtureGgufs() {
  std::vector<std::string> out;
  for (const char* dir : {"../shared/fixtures/vocab", "../shared/fixtures/llamacpp-tiny"}) {
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    }
  }
  return out;
}

TEST(Gguf, ParsesEveryFixture) {
  auto files = FixtureGgufs();
  ASSERT_GE(files.size(), 8u) << "fixtures missing: run from the repo root with ../shared beside it";
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE(f->version() == 2 || f->version() == 3);
    EXPECT_NE(f->Find("general.architecture"), nullptr);
    auto model = f->GetString("tokenizer.ggml.model");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto tokens = f->GetArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok());
    EXPECT_GT((*tokens)->values.size(), 1000u);
    EXPECT_EQ((*tokens)->element_type, GgufValueType::kString);
    for (const auto& t : f->tensors()) {
      EXPECT_NE(t.data, nullptr);
      EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, f->file_size());
    }
  }
}

TEST(Gguf, TinyLlamaTensorTable) {
  auto f = GgufFile::Open("../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetUint("llama.embedding_length"), 256u);
  const GgufTensorInfo* k = f->FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<uint64_t>{256, 128}));
  const GgufTensorInfo* norm = f->FindTensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, GgmlType::kF32);
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);  // tied
  auto missing = f->GetUint("llama.no_such_key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("llama.no_such_key"), std::string::npos);
  auto wrong = f->GetUint("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("is a string"), std::string::npos);
}

TEST(Gguf, EveryValueTypeAndNestedArrays) {
  testing::GgufBytes b;
  b.Header(3, 0, 13);
  b.Str("u8").Pod<uint32_t>(0).Pod<uint8_t>(200);
  b.Str("i8").Pod<uint32_t>(1).Pod<int8_t>(-100);
  b.Str("u16").Pod<uint32_t>(2).Pod<uint16_t>(60000);
  b.Str("i16").Pod<uint32_t>(3).Pod<int16_t>(-30000);
  b.Str("u32").Pod<uint32_t>(4).Pod<uint32_t>(4000000000u);
  b.Str("i32").Pod<uint32_t>(5).Pod<int32_t>(-2000000000);
  b.Str("f32").Pod<uint32_t>(6).Pod<float>(1.5f);
  b.Str("bool").Pod<uint32_t>(7).Pod<uint8_t>(1);
  b.Str("str").Pod<uint32_t>(8).Str("héllo");
  b.Str("u64").Pod<uint32_t>(10).Pod<uint64_t>(1ull << 63);
  b.Str("i64").Pod<uint32_t>(11).Pod<int64_t>(-(1ll << 62));
  b.Str("f64").Pod<uint32_t>(12).Pod<double>(-2.25);
  // array of 2 arrays of i32: [[1, 2], [3]]
  b.Str("nested").Pod<uint32_t>(9).Pod<uint32_t>(9).Pod<uint64_t>(2);
  b.Pod<uint32_t>(5).Pod<uint64_t>(2).Pod<int32_t>(1).Pod<int32_t>(2);
  b.Pod<uint32_t>(5).Pod<uint64_t>(1).Pod<int32_t>(3);
  auto f = GgufFile::Parse(b.bytes, "mem");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->Find("u8")->AsUint(), 200u);
  EXPECT_EQ(*f->Find("i8")->AsInt(), -100);
  EXPECT_EQ(*f->Find("u16")->AsUint(), 60000u);
  EXPECT_EQ(*f->Find("i16")->AsInt(), -30000);
  EXPECT_EQ(*f->Find("u32")->AsUint(), 4000000000u);
  EXPECT_EQ(*f->Find("i32")->AsInt(), -2000000000);
  EXPECT_EQ(*f->Find("f32")->AsFloat(), 1.5);
  EXPECT_EQ(*f->Find("bool")->AsBool(), true);
  EXPECT_EQ(*f->Find("str")->AsString(), "héllo");
  EXPECT_EQ(*f->Find("u64")->AsUint(), 1ull << 63);
  EXPECT_FALSE(f->Find("u64")->AsInt().has_value());  // does not fit
  EXPECT_EQ(*f->Find("i64")->AsInt(), -(1ll << 62));
  EXPECT_EQ(*f->Find("f64")->AsFloat(), -2.25);
  const GgufArray* outer = f->Find("nested")->AsArray();
  ASSERT_NE(outer, nullptr);
  ASSERT_EQ(outer->values.size(), 2u);
  const GgufArray* first = outer->values[0].AsArray();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(*first->values[1].AsInt(), 2);
  EXPECT_EQ(*outer->values[1].AsArray()->values[0].AsInt(), 3);
  EXPECT_EQ(f->metadata().size(), 13u);
  EXPECT_EQ(f->metadata()[0].first, "u8");  // file order is kept
}

TEST(Gguf, VersionTwoAndCustomAlignment) {
  testing::GgufBytes b;
  b.Header(2, 1, 1).KvU32("general.alignment", 64);
  b.TensorInfo("t", {32}, /*f32*/ 0, 0).Align(64);
  const size_t data = b.size();
  b.Zeros(128);
  auto f = GgufFile::Parse(b.bytes, "mem");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset(), data);
  EXPECT_EQ(f->tensors()[0].n_bytes, 128u);
}

TEST(GgufWriter, RoundTripsMetadataAndTensors) {
  const std::string path =
      (fs::temp_directory_path() / ("fak_writer_roundtrip_" + std::to_string(getpid()) + ".gguf")).string();
  std::vector<float> w(64 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f;
  std::vector<uint8_t> q8(34 * 2 * 3, 7);
  {
    GgufWriter wr;
    wr.SetString("general.architecture", "llama");
    wr.SetUint32("llama.block_count", 2);
    wr.SetFloat32("llama.rope.freq_base", 500000.0f);
    wr.SetBool("tokenizer.ggml.add_bos_token", true);
    wr.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "<s>"});
    wr.SetInt32Array("ids", {-1, 2});
    ASSERT_TRUE(
        wr.AddTensor("w", {64, 3}, GgmlType::kF32,
                     std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4))
            .ok());
    ASSERT_TRUE(wr.AddTensor("q", {64, 3}, GgmlType::kQ8_0, std::span<const uint8_t>(q8)).ok());
    EXPECT_FALSE(wr.AddTensor("q", {64}, GgmlType::kF32, std::span<const uint8_t>()).ok());  // duplicate
    EXPECT_FALSE(
        wr.AddTensor("bad", {33}, GgmlType::kQ8_0, std::span<const uint8_t>()).ok());  // partial block
    ASSERT_TRUE(wr.Write(path).ok());
  }
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetUint("llama.block_count"), 2u);
  EXPECT_EQ(*f->GetFloat("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(*f->Find("tokenizer.ggml.add_bos_token")->AsBool(), true);
  EXPECT_EQ(*(*f->GetArray("tokenizer.ggml.tokens"))->values[2].AsString(), "<s>");
  EXPECT_EQ(*(*f->GetArray("ids"))->values[0].AsInt(), -1);
  const GgufTensorInfo* tw = f->FindTensor("w");
  ASSERT_NE(tw, nullptr);
  EXPECT_EQ(std::memcmp(tw->data, w.data(), w.size() * 4), 0);
  const GgufTensorInfo* tq = f->FindTensor("q");
  ASSERT_NE(tq, nullptr);
  EXPECT_EQ(tq->type, GgmlType::kQ8_0);
  EXPECT_EQ(tq->n_bytes, q8.size());
  EXPECT_EQ(tq->offset % 32, 0u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  fs::remove(path);
}

TEST(GgufWriter, FailedProducerLeavesNoFile) {
  const std::string path =
      (fs::temp_directory_path() / ("fak_writer_fail_" + std::to_string(getpid()) + ".gguf")).string();
  fs::remove(path);
  GgufWriter wr;
  ASSERT_TRUE(wr.AddTensor("t", {32}, GgmlType::kF32, [](std::span<uint8_t>) {
                  return IoError("source went away");
                }).ok());
  Status s = wr.Write(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("source went away"), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// Tensors are produced while the one before is written by another thread: a producer failing after
// several tensors, and a write failing (the file size limit, EFBIG) while later tensors are produced,
// both leave no file and name what went wrong.
TEST(GgufWriter, FailuresWhileATensorIsBeingWrittenLeaveNoFile) {
  const std::string path =
      (fs::temp_directory_path() / ("fak_writer_overlap_" + std::to_string(getpid()) + ".gguf")).string();
  fs::remove(path);
  auto writer = [](int fail_at) {
    auto wr = std::make_unique<GgufWriter>();
    for (int i = 0; i < 6; ++i) {
      EXPECT_TRUE(wr->AddTensor("t" + std::to_string(i), {64 * 1024}, GgmlType::kF32,
                                [i, fail_at](std::span<uint8_t> out) {
                                  if (i == fail_at) return IoError("source went away at {}", i);
                                  std::fill(out.begin(), out.end(), static_cast<uint8_t>(i));
                                  return Status::Ok();
                                })
                      .ok());
    }
    return wr;
  };
  Status s = writer(4)->Write(path);
  EXPECT_NE(s.message().find("source went away at 4"), std::string::npos) << s.ToString();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // Past 600 KB the file's writes fail with EFBIG (SIGXFSZ ignored); each tensor is 256 KB.
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 600 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  s = writer(-1)->Write(path);
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(s.message().find("write failed"), std::string::npos) << s.ToString();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  ASSERT_TRUE(writer(-1)->Write(path).ok());  // and with the limit back, the same file is written
  EXPECT_GT(fs::file_size(path), 6u * 256 * 1024);
  fs::remove(path);
}

// The writer never replaces or writes through anything but a regular file (hardening item 4): a FIFO,
// a directory, a symbolic link (its target stays as it was) or such a thing at OUT.tmp is refused by
// name, and nothing is created.
TEST(GgufWriter, RefusesOutputsThatAreNotRegularFiles) {
  const fs::path dir = fs::temp_directory_path() / ("fak_writer_kinds_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [](const fs::path& p) {
    GgufWriter wr;
    EXPECT_TRUE(wr.AddTensor("t", {32}, GgmlType::kF32, [](std::span<uint8_t> out) {
                    std::fill(out.begin(), out.end(), uint8_t{0});
                    return Status::Ok();
                  }).ok());
    return wr.Write(p.string());
  };
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  Status s = write(dir / "fifo");
  EXPECT_NE(s.message().find("it is a FIFO"), std::string::npos) << s.ToString();
  s = write("/dev/null");  // run as root, replacing it would break the machine
  EXPECT_NE(s.message().find("it is a character device"), std::string::npos) << s.ToString();
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_FALSE(fs::exists("/dev/null.tmp"));
  fs::create_directories(dir / "sub");
  s = write(dir / "sub");
  EXPECT_NE(s.message().find("it is a directory"), std::string::npos) << s.ToString();
  { std::ofstream(dir / "target") << "keep"; }
  fs::create_symlink(dir / "target", dir / "link");
  s = write(dir / "link");
  EXPECT_NE(s.message().find("it is a symbolic link"), std::string::npos) << s.ToString();
  EXPECT_EQ(fs::file_size(dir / "target"), 4u);
  fs::create_symlink(dir / "target", dir / "out.gguf.tmp");
  s = write(dir / "out.gguf");
  EXPECT_NE(s.message().find("out.gguf.tmp: refusing"), std::string::npos) << s.ToString();
  EXPECT_EQ(fs::file_size(dir / "target"), 4u);
  EXPECT_FALSE(fs::exists(dir / "out.gguf"));
  // A regular file is replaced, and a stale temporary from an interrupted run is no obstacle.
  fs::remove(dir / "out.gguf.tmp");
  { std::ofstream(dir / "out.gguf.tmp") << "stale"; }
  { std::ofstream(dir / "out.gguf") << "old"; }
  EXPECT_TRUE(write(dir / "out.gguf").ok());
  EXPECT_GT(fs::file_size(dir / "out.gguf"), 32u);
  EXPECT_FALSE(fs::exists(dir / "out.gguf.tmp"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fak
