// A real comparison (two fak:cpu arms on the tiny llama fixture) validates; then every kind of edit
// to its files makes validation fail with a message naming the file and field.
#include "bench/validate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/test_run_util.h"
#include "core/sha256.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ReadText;
using testing::WriteText;

class ValidateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(testing::TempRoot("validate"));
    auto out = RunCompare(testing::TinyOptions(*root_ / "runs", {"fak:cpu", "fak:cpu"}));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    run_ = new fs::path(out->run_dir);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete run_;
  }

  // A fresh copy of the run folder for one test to edit.
  fs::path Copy() {
    const fs::path d = *root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(d);
    fs::copy(*run_, d);
    return d;
  }

  static json Load(const fs::path& p) { return json::parse(ReadText(p)); }
  // Rewrites a JSON file; with rehash, the packet's digest of it is updated so only consistency
  // checks can catch the edit.
  static void Save(const fs::path& dir, const std::string& name, const json& j, bool rehash) {
    const std::string text = j.dump(1) + "\n";
    WriteText(dir / name, text);
    if (!rehash) return;
    json p = Load(dir / "packet.json");
    p["files"][name] = Sha256Hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    WriteText(dir / "packet.json", p.dump(1) + "\n");
  }

  static std::string All(const ValidationReport& r) {
    std::string s;
    for (const auto& v : r.violations) s += v + "\n";
    return s;
  }

  static fs::path* root_;
  static fs::path* run_;
};

fs::path* ValidateTest::root_ = nullptr;
fs::path* ValidateTest::run_ = nullptr;

TEST_F(ValidateTest, RunAsWrittenIsValid) {
  const ValidationReport r = ValidatePacket((*run_ / "packet.json").string());
  EXPECT_TRUE(r.valid) << All(r);
  const std::string text = ReadText(*run_ / "packet.json");
  EXPECT_EQ(r.packet_sha256, Sha256Hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  const auto j = r.ToJson();
  EXPECT_EQ(j.dump(), fmt::format("{{\"schema\":\"fak.bench.comparison.validation.v1\",\"valid\":true,"
                                  "\"packet_sha256\":\"{}\"}}",
                                  r.packet_sha256));
  for (const char* f : {"manifest.json", "packet.json", "fak-cpu-raw.json", "fak-cpu-quality.json",
                        "fak-cpu-2-raw.json", "fak-cpu-2-quality.json"}) {
    EXPECT_TRUE(fs::exists(*run_ / f)) << f;
  }
  // The run folder sits at by-machine/<host>/<timestamp>-<name>.
  EXPECT_EQ(run_->parent_path().parent_path().filename(), "by-machine");
  EXPECT_NE(run_->filename().string().find("-tiny"), std::string::npos);
}

TEST_F(ValidateTest, PacketContentsFollowTheWorkload) {
  const json p = Load(*run_ / "packet.json");
  EXPECT_EQ(p["schema"], "fak.bench.comparison.v1");
  EXPECT_EQ(p["model"]["file"], "tiny-llama-q8_0.gguf");
  EXPECT_EQ(p["model"]["weight_type"], "q8_0");
  EXPECT_EQ(p["workload"]["prompts"], 3);
  EXPECT_EQ(p["reference_arm"], "fak-cpu");
  ASSERT_EQ(p["arms"].size(), 2u);
  const json& a = p["arms"][1];
  EXPECT_EQ(a["status"], "ok");
  EXPECT_EQ(a["metrics"]["ttft_ms"]["n"], 3);
  EXPECT_EQ(a["metrics"]["itl_ms"]["n"], 3 * 7);
  EXPECT_EQ(a["quality"]["verdict"], "pass");  // the same engine twice: identical tokens, cosine 1
  EXPECT_EQ(p["arms"][0]["quality"]["verdict"], "reference");
  EXPECT_EQ(p["ratios"].size(), 4u);
  EXPECT_FALSE(p["hardware"]["cpu"]["model"].get<std::string>().empty());
  const json m = Load(*run_ / "manifest.json");
  EXPECT_EQ(m["model"]["sha256"], p["model"]["sha256"]);
  EXPECT_EQ(m["model"]["file"], "tiny-llama-q8_0.gguf");
  const json q = Load(*run_ / "fak-cpu-2-quality.json");
  EXPECT_EQ(q["prompts"].size(), 3u);
  EXPECT_GE(q["summary"]["min_cosine"].get<double>(), 0.9999);
}

TEST_F(ValidateTest, AnyChangedByteOfARawOrQualityFileIsNamed) {
  for (const char* name : {"fak-cpu-raw.json", "fak-cpu-2-quality.json", "manifest.json"}) {
    const std::string orig = ReadText(*run_ / name);
    for (size_t pos : {size_t{0}, orig.size() / 3, orig.size() / 2, orig.size() - 1}) {
      const fs::path d = Copy();
      std::string s = orig;
      s[pos] = static_cast<char>(s[pos] ^ 0x01);
      WriteText(d / name, s);
      const ValidationReport r = ValidatePacket((d / "packet.json").string());
      EXPECT_FALSE(r.valid) << name << " byte " << pos;
      EXPECT_NE(All(r).find(std::string(name) + ": SHA-256 mismatch"), std::string::npos) << All(r);
    }
  }
}

TEST_F(ValidateTest, DroppedInterTokenSampleIsNamed) {
  const fs::path d = Copy();
  json raw = Load(d / "fak-cpu-2-raw.json");
  raw["requests"][1]["itl_ms"].erase(0);
  Save(d, "fak-cpu-2-raw.json", raw, /*rehash=*/true);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("fak-cpu-2-raw.json: request 1: 6 inter-token samples, expected gen - 1 = 7"),
            std::string::npos)
      << All(r);
  EXPECT_NE(
      All(r).find("arm fak-cpu-2: metrics.itl_ms.n is 21 but the samples in fak-cpu-2-raw.json give 20"),
      std::string::npos)
      << All(r);
}

TEST_F(ValidateTest, DroppedRequestIsNamedEvenWithoutRehash) {
  const fs::path d = Copy();
  json raw = Load(d / "fak-cpu-raw.json");
  raw["requests"].erase(2);
  Save(d, "fak-cpu-raw.json", raw, /*rehash=*/false);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("fak-cpu-raw.json: SHA-256 mismatch"), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("fak-cpu-raw.json: 2 samples (requests or repetitions), the workload has 3 prompts"),
            std::string::npos)
      << All(r);
}

TEST_F(ValidateTest, BrokenPacketSumIsNamed) {
  const fs::path d = Copy();
  json p = Load(d / "packet.json");
  p["arms"][0]["decomposition"]["parts_ms"]["decode"] =
      p["arms"][0]["decomposition"]["parts_ms"]["decode"].get<double>() + 1;
  Save(d, "packet.json", p, false);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("arm fak-cpu: decomposition: parts sum to"), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("arm fak-cpu: decomposition.parts_ms.decode is"), std::string::npos) << All(r);
}

TEST_F(ValidateTest, BrokenRequestSumIsNamed) {
  const fs::path d = Copy();
  json raw = Load(d / "fak-cpu-2-raw.json");
  raw["requests"][0]["decomposition_ms"]["setup"] =
      raw["requests"][0]["decomposition_ms"]["setup"].get<double>() + 5;
  Save(d, "fak-cpu-2-raw.json", raw, true);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("fak-cpu-2-raw.json: request 0: decomposition_ms: parts sum to"), std::string::npos)
      << All(r);
}

TEST_F(ValidateTest, PercentileOrderAndRecomputationAreChecked) {
  const fs::path d = Copy();
  json p = Load(d / "packet.json");
  auto& t = p["arms"][1]["metrics"]["ttft_ms"];
  t["p50"] = t["p95"].get<double>() * 2;
  Save(d, "packet.json", p, false);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("arm fak-cpu-2: metrics.ttft_ms: p50"), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("is greater than p95"), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("arm fak-cpu-2: metrics.ttft_ms.p50 is"), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("ratios["), std::string::npos) << All(r);  // the ttft ratio no longer follows
}

TEST_F(ValidateTest, QualityVerdictMustMatchEvidence) {
  const fs::path d = Copy();
  json q = Load(d / "fak-cpu-2-quality.json");
  q["prompts"][2]["tokens"][0] = q["prompts"][2]["tokens"][0].get<int>() + 1;
  Save(d, "fak-cpu-2-quality.json", q, true);
  json p = Load(d / "packet.json");
  p["arms"][0]["quality"]["verdict"] = "pass";  // the reference claims a pass
  Save(d, "packet.json", p, false);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("fak-cpu-2-quality.json: prompt 2: tokens_match is true but the token lists differ"),
            std::string::npos)
      << All(r);
  EXPECT_NE(All(r).find("fak-cpu-2-quality.json: verdict \"pass\" but its evidence implies \"fail\""),
            std::string::npos)
      << All(r);
  EXPECT_NE(All(r).find("fak-cpu-quality.json: verdict \"reference\" but the packet says \"pass\""),
            std::string::npos)
      << All(r);
}

TEST_F(ValidateTest, SchemaMissingFilesAndGarbage) {
  const fs::path d = Copy();
  json p = Load(d / "packet.json");
  p["schema"] = "fak.bench.comparison.v0";
  p["workload"].erase("ctx");
  Save(d, "packet.json", p, false);
  fs::remove(d / "fak-cpu-2-quality.json");
  ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("packet.json: schema is \"fak.bench.comparison.v0\""), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("workload: field \"ctx\" is missing"), std::string::npos) << All(r);
  EXPECT_NE(All(r).find("fak-cpu-2-quality.json: referenced by the packet but cannot be read"),
            std::string::npos)
      << All(r);
  WriteText(d / "packet.json", "{\"schema\": ");
  r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("packet.json: not a JSON object"), std::string::npos) << All(r);
  EXPECT_FALSE(r.packet_sha256.empty());
  r = ValidatePacket((d / "missing.json").string());
  EXPECT_FALSE(r.valid);
}

TEST_F(ValidateTest, WrongTypesDeepInsideAreViolationsNotCrashes) {
  const fs::path d = Copy();
  json p = Load(d / "packet.json");
  p["arms"][1]["metrics"]["decode_tps"] = "fast";
  p["ratios"][0]["p50_ratio"] = nullptr;
  p["files"]["../etc/passwd"] = "00";
  Save(d, "packet.json", p, false);
  const ValidationReport r = ValidatePacket((d / "packet.json").string());
  EXPECT_FALSE(r.valid);
  EXPECT_NE(All(r).find("is not a plain file name"), std::string::npos) << All(r);
}

}  // namespace
}  // namespace fak::bench
