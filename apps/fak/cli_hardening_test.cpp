// Runs the real `fak` binary on bad and hostile input: malformed and non-finite model files, FIFOs and
// devices, strings built to break the printer, strict flag lists, threads that cannot start. Each
// must exit non-zero with a message naming the problem.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/cli_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_test_util.h"

namespace fak_cli_test {
namespace {

struct BadCase {
  const char* file;
  std::vector<uint8_t> bytes;
  const char* needle;
};

TEST(FakCli, MalformedFilesExitNonZeroWithMessage) {
  using fak::testing::GgufBytes;
  std::vector<BadCase> cases;
  cases.push_back(
      {"magic.gguf", GgufBytes().Pod<uint32_t>(0x46554746).Pod<uint32_t>(3).Zeros(16).bytes, "bad magic"});
  cases.push_back({"version.gguf", GgufBytes().Header(9, 0, 0).bytes, "GGUF version 9"});
  cases.push_back({"trunc.gguf", GgufBytes().Header(3, 0, 1).Str("general.name").bytes, "truncated"});
  cases.push_back({"count.gguf", GgufBytes().Header(3, ~0ull, 0).bytes, "tensor count"});
  cases.push_back(
      {"strlen.gguf", GgufBytes().Header(3, 0, 1).Pod<uint64_t>(~0ull).Zeros(16).bytes, "key length"});
  cases.push_back({"offset.gguf",
                   GgufBytes().Header(3, 1, 0).TensorInfo("w", {32}, 0, 1 << 20).Align().Zeros(128).bytes,
                   "past the end"});
  cases.push_back({"align.gguf",
                   GgufBytes().Header(3, 1, 0).TensorInfo("w", {32}, 0, 8).Align().Zeros(256).bytes,
                   "not aligned"});
  cases.push_back({"dup.gguf",
                   GgufBytes()
                       .Header(3, 2, 0)
                       .TensorInfo("w", {32}, 0, 0)
                       .TensorInfo("w", {32}, 0, 128)
                       .Align()
                       .Zeros(256)
                       .bytes,
                   "duplicate tensor name"});
  std::string notjson = "{\"a\": [1, 2";
  std::vector<uint8_t> st(8);
  uint64_t n = notjson.size();
  std::memcpy(st.data(), &n, 8);
  st.insert(st.end(), notjson.begin(), notjson.end());
  cases.push_back({"bad.safetensors", st, "not valid JSON"});
  cases.push_back({"empty.gguf", {}, "truncated"});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    fs::path p = TempDir() / c.file;
    WriteBytes(p, c.bytes);
    RunResult r = RunFak("inspect " + p.string());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.file), std::string::npos) << r.output;
  }
  RunResult missing = RunFak("inspect /nonexistent/model.gguf");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("no such file"), std::string::npos);
  RunResult usage = RunFak("inspect");
  EXPECT_NE(usage.exit_code, 0);
}

TEST(FakCli, RunBadInputExitsNonZero) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  RunResult ctx = RunFak("run -m " + model + " -c 4 -p 'one two three four five six seven eight'");
  EXPECT_EQ(ctx.exit_code, 1);
  EXPECT_NE(ctx.output.find("exceeds the context length 4"), std::string::npos) << ctx.output;
  RunResult tok =
      RunFak("run -m " + model + " --tokenizer ../shared/fixtures/tokenizers/qwen3/tokenizer.json -p hi");
  EXPECT_EQ(tok.exit_code, 1);
  EXPECT_NE(tok.output.find("vocabulary (vocab_size) is 32000"), std::string::npos) << tok.output;
  RunResult quant = RunFak("run -m " + model + " --quant q3 -p hi");
  EXPECT_EQ(quant.exit_code, 1);
  EXPECT_NE(quant.output.find("unknown weight format 'q3'"), std::string::npos) << quant.output;
  using fak::testing::GgufBytes;
  fs::path mamba = TempDir() / "mamba.gguf";
  WriteBytes(mamba, GgufBytes().Header(3, 0, 1).KvStr("general.architecture", "mamba").bytes);
  RunResult arch = RunFak("run -m " + mamba.string() + " -p hi");
  EXPECT_EQ(arch.exit_code, 1);
  EXPECT_NE(arch.output.find("'mamba' is not supported"), std::string::npos) << arch.output;
  RunResult nop = RunFak("run -m " + model);
  EXPECT_EQ(nop.exit_code, 2);
  // The logits file is created before generating (hardening item 6): a bad path fails first.
  RunResult dump = RunFak("run -m " + model + " -p hi -n 4 --dump-logits /nonexistent-dir/l.npy");
  EXPECT_EQ(dump.exit_code, 1);
  EXPECT_NE(dump.output.find("--dump-logits: i/o error: /nonexistent-dir/l.npy: cannot create"),
            std::string::npos)
      << dump.output;
}

// A NaN norm weight used to print token 0 forever with exit 0 (hardening item 7): now the run stops
// with an error, and --check-finite names the layer.
TEST(FakCli, NonFiniteModelStopsWithAnError) {
  const std::string src = "../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf";
  auto file = fak::GgufFile::Open(src);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const fak::GgufTensorInfo* t = file->FindTensor("blk.0.attn_norm.weight");
  ASSERT_NE(t, nullptr);
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const float inf = INFINITY;
  std::memcpy(bytes.data() + file->data_offset() + t->offset, &inf, 4);
  const fs::path bad = TempDir() / "inf-norm.gguf";
  std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  RunResult r = RunFak("run -m " + bad.string() + " -p hi -n 4 -t 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("non-finite logits"), std::string::npos) << r.output;
  RunResult c = RunFak("run -m " + bad.string() + " -p hi -n 4 -t 2 --check-finite");
  EXPECT_EQ(c.exit_code, 1) << c.output;
  EXPECT_NE(c.output.find("layer 0's attention block output is the first that is not finite"),
            std::string::npos)
      << c.output;
  // A NaN block scale in a Q8_0 matrix (the f16 at the start of the first 34-byte block) is refused at
  // load: the int8 quantization of the next layer's input would turn its NaNs finite, past any check.
  const std::string q8 = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  auto qfile = fak::GgufFile::Open(q8);
  ASSERT_TRUE(qfile.ok()) << qfile.status().ToString();
  const fak::GgufTensorInfo* q = qfile->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->type, fak::GgmlType::kQ8_0);
  std::ifstream qin(q8, std::ios::binary);
  std::string qbytes((std::istreambuf_iterator<char>(qin)), std::istreambuf_iterator<char>());
  const uint16_t nan_half = 0x7E00;
  std::memcpy(qbytes.data() + qfile->data_offset() + q->offset, &nan_half, 2);
  const fs::path bad_scale = TempDir() / "nan-scale.gguf";
  std::ofstream(bad_scale, std::ios::binary)
      .write(qbytes.data(), static_cast<std::streamsize>(qbytes.size()));
  RunResult s = RunFak("run -m " + bad_scale.string() + " -p hi -n 4 -t 2");
  EXPECT_EQ(s.exit_code, 1) << s.output;
  EXPECT_NE(s.output.find("tensor 'blk.0.attn_q.weight' (q8_0): row 0, block 0: its f16 scale is not finite"),
            std::string::npos)
      << s.output;
}

// Strings from a file (keys, values, string arrays, tensor names) reach the terminal and JSON with
// invalid UTF-8 replaced and control characters escaped; nothing aborts (hardening item 1).
TEST(FakCli, InspectCopesWithHostileStrings) {
  using fak::testing::GgufBytes;
  const std::string bad = std::string("caf\xc3 \xff\xfe ") + "\x1b[31mred";
  GgufBytes b;
  b.Header(3, 1, 3).KvStr("general.name", bad).KvStr("key\xff" + std::string("\x1b]0;x"), "v");
  b.Str("tokenizer.ggml.tokens")
      .Pod<uint32_t>(9)
      .Pod<uint32_t>(8)
      .Pod<uint64_t>(3)
      .Str(bad)
      .Str("ok")
      .Str("\xc0\x80");
  b.TensorInfo("w\xff" + std::string("\x1b"), {32}, 0, 0).Align().Zeros(128);
  const fs::path f = TempDir() / "hostile.gguf";
  WriteBytes(f, b.bytes);
  for (const char* flags : {"", " --json"}) {
    RunResult r = RunFak("inspect " + f.string() + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << r.output;
    EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << flags << r.output;
    EXPECT_NE(r.output.find("\xef\xbf\xbd"), std::string::npos) << flags << r.output;  // U+FFFD
  }
}

// A FIFO or a device as a model, tokenizer, prompt or template file is refused at once, naming what it
// is: never a blocking open, never a read of /dev/zero until memory runs out (hardening item 5).
TEST(FakCli, FifosAndDevicesAreRefusedAtOnce) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  const fs::path fifo = TempDir() / "input.fifo";
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string f = fifo.string();
  const fs::path sparse = TempDir() / "huge_prompt.txt";  // 256 MiB + 1 byte, no blocks written
  { std::ofstream out(sparse); }
  fs::resize_file(sparse, (uintmax_t{256} << 20) + 1);
  struct Case {
    std::string args, needle;
  };
  for (const Case& c :
       std::vector<Case>{{"inspect " + f, "it is a FIFO"},
                         {"run -m " + f + " -p hi", "it is a FIFO"},
                         {"run -m " + model + " -f " + f, "it is a FIFO"},
                         {"run -m " + model + " -f /dev/zero", "it is a character device"},
                         {"run -m " + model + " -f " + sparse.string(), "more than the 256 MiB a text input"},
                         {"run -m " + model + " --tokenizer " + f + " -p hi", "FIFO"},
                         {"tokenize -m " + model + " -f /dev/zero", "character device"},
                         {"template -m ../shared/fixtures/tokenizers/qwen3 -f " + f, "it is a FIFO"}}) {
    RunResult r = RunFak(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << ": " << r.output;
  }
  fs::remove(fifo);
  fs::remove(sparse);
}

// Number lists are read strictly: junk, overflow, suffixes and signs are errors naming the item, before
// any model is loaded.
TEST(FakCli, BenchNumberListsAreStrict) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  for (const char* bad : {"-p abc", "-p 99999999999999999999", "-n 1x", "-p -5", "-p 4,,8", "-n ' 3'"}) {
    RunResult r = RunFak("bench -m " + model + " " + bad + " -r 1");
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("is not a whole number"), std::string::npos) << bad << ": " << r.output;
  }
  RunResult batch = RunFak("bench batch -m " + model + " -b 1,0");
  EXPECT_EQ(batch.exit_code, 2) << batch.output;
  EXPECT_NE(batch.output.find("-b: '0' is not a whole number from 1"), std::string::npos) << batch.output;
  // More threads than 4 per CPU are capped with a warning (hardening item 3: -t 100000 aborted).
  RunResult many = RunFak("bench -m " + model + " -t 100000 -p 8 -n 0 -r 1 --json");
  EXPECT_EQ(many.exit_code, 0) << many.output;
  EXPECT_NE(many.output.find("100000 threads asked for, more than 4 per CPU"), std::string::npos)
      << many.output;
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_NE(many.output.find(fmt::format("\"threads\": {}", 4 * cpus)), std::string::npos) << many.output;
  RunResult ok = RunFak("bench -m " + model + " -p 8,0 -n 0 -r 1 --json");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("\"pp8\""), std::string::npos) << ok.output;
  EXPECT_EQ(ok.output.back(), '\n');  // --json output ends its line (hardening item 12)
  // -t takes a list, like llama-bench: one result object per thread count, in the order given.
  RunResult bad_threads = RunFak("bench -m " + model + " -t 1,two -p 8 -n 0 -r 1");
  EXPECT_EQ(bad_threads.exit_code, 2) << bad_threads.output;
  EXPECT_NE(bad_threads.output.find("-t: 'two' is not a whole number"), std::string::npos)
      << bad_threads.output;
  RunResult list = RunFak("bench -m " + model + " -t 2,1 -p 8 -n 2 -r 1 --json");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  const auto runs = nlohmann::json::parse(list.output.substr(list.output.find('[')));
  ASSERT_TRUE(runs.is_array()) << list.output;
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["threads"], 2);
  EXPECT_EQ(runs[1]["threads"], 1);
  for (const auto& run : runs) {
    ASSERT_EQ(run["results"].size(), 2u);
    EXPECT_EQ(run["results"][0]["test"], "pp8");
    EXPECT_GT(run["results"][1]["tokens_per_second"].get<double>(), 0);
  }
}

// fak bench kernels --backend cuda names what it cannot run before it looks for a GPU, as a command-line
// error (on a build without the CUDA backend: that it has none).
TEST(FakCli, CudaKernelBenchRefusesBadInputByName) {
  RunResult backend = RunFak("bench kernels --backend tpu");
  EXPECT_EQ(backend.exit_code, 2) << backend.output;
  EXPECT_NE(backend.output.find("--backend is cpu or cuda, not 'tpu'"), std::string::npos) << backend.output;
  RunResult cpu_shape = RunFak("bench kernels --shape a:256x256");
  EXPECT_EQ(cpu_shape.exit_code, 2) << cpu_shape.output;
  EXPECT_NE(cpu_shape.output.find("--shape, --setting and --batch are for --backend cuda"), std::string::npos)
      << cpu_shape.output;
  const struct {
    const char* args;
    const char* says;
  } cases[] = {{"--shape bad", "shape 'bad': want NAME:ROWS[+ROWS]xCOLS"},
               {"--shape a:256x255", "columns must be a multiple of 256"},
               {"--shape a:0x256", "rows must be positive integers"},
               {"--shape a:1+1+1+1x256", "1 to 3 matrices per launch"},
               {"--shape 'a:99999999999x256'", "rows must be positive integers"},
               {"--type q5_0", "no matrix-vector kernel for type 'q5_0'"},
               {"--setting FAK_CUDA_MATVEC_ROWS", "want KEY=VALUE"},
               {"--rounds 0", "--rounds must be at least 1"},
               {"--batch 0", "--batch must be 1 to 512"},
               {"--batch 513", "--batch must be 1 to 512"}};
  for (const auto& c : cases) {
    RunResult r = RunFak(std::string("bench kernels --backend cuda ") + c.args);
    const bool named = r.output.find(c.says) != std::string::npos;
    const bool no_cuda = r.output.find("this build of fak has no CUDA backend") != std::string::npos;
    EXPECT_TRUE(named || no_cuda) << c.args << ": " << r.output;
    EXPECT_EQ(r.exit_code, no_cuda ? 1 : 2) << c.args << ": " << r.output;
  }
}

// A thread the system refuses to start is an error naming it, wherever fak starts threads (hardening
// item 3): the model backend, fak quantize, fak synth and bench kernels. A stack-size limit of about
// 1 TB makes every new thread's stack mapping fail.
TEST(FakCli, ThreadsThatCannotStartAreAnError) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  const fs::path out = TempDir() / "threads.gguf";
  for (const std::string& args :
       {"bench -m " + model + " -t 4 -p 8 -n 0 -r 1",
        "quantize " + model + " " + out.string() + " q8_0 --threads 4",
        "synth --geometry tiny -o " + out.string() + " --threads 4",
        std::string("bench kernels -t 4 --type q8_0 --matmul-only --rows 64 --cols 256 --tokens 4")}) {
    const RunResult r = RunShell("ulimit -s 1000000000 && " + std::string(FAK_BINARY) + " " + args + " 2>&1");
    const std::string& output = r.output;
    if (output.find("ulimit") != std::string::npos) GTEST_SKIP() << "the shell refused the stack limit";
    if (output.find("Sanitizer") != std::string::npos) {
      GTEST_SKIP()
          << "a sanitizer runtime does not start under a 1 TB stack limit (the Release run covers this)";
    }
    EXPECT_EQ(r.exit_code, 1) << args << ": " << output;
    EXPECT_NE(output.find("threads could start"), std::string::npos) << args << ": " << output;
    EXPECT_NE(output.find("cannot start thread 2 of 4"), std::string::npos) << args << ": " << output;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

}  // namespace
}  // namespace fak_cli_test
