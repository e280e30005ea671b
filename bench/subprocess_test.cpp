#include "bench/subprocess.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/test_temp_dir.h"
#include "core/timer.h"

namespace fak::bench {
namespace {

std::string Script(const std::string& name, const std::string& body) {
  static const TestTempDir dir("fak_subprocess_test_");
  const auto p = dir.path() / (name + ".sh");
  std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(p, std::filesystem::perms::owner_all);
  return p.string();
}

TEST(Subprocess, CapturesStdoutStderrAndExitCode) {
  auto r = RunProcess({Script("exit3", "echo out; echo err >&2; exit 3")}, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err_tail, "err\n");
  EXPECT_EQ(r->exit_description, "exit status 3");
}

TEST(Subprocess, KeepsOnlyTheStderrTail) {
  auto r = RunProcess(
      {Script("chatty", "i=0; while [ $i -lt 2000 ]; do echo line$i >&2; i=$((i+1)); done; echo LAST >&2")},
      30);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->err_tail.size(), kStderrTailBytes);
  EXPECT_NE(r->err_tail.find("LAST\n"), std::string::npos);
}

TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  Timer t;
  auto r = RunProcess({Script("hang", "echo started >&2; sleep 100 & sleep 100")}, 0.5);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(t.Seconds(), 10);  // the background sleep holds the pipe too: the group kill ends it
  EXPECT_NE(r->exit_description.find("timed out"), std::string::npos);
  EXPECT_EQ(r->err_tail, "started\n");
}

TEST(Subprocess, SignalsAreDescribed) {
  auto r = RunProcess({Script("segv", "kill -SEGV $$")}, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_description.find("signal 11"), std::string::npos) << r->exit_description;
}

TEST(Subprocess, MissingProgramIsAnError) {
  auto r = RunProcess({"/nonexistent/llama-bench", "-h"}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/llama-bench"), std::string::npos);
}

TEST(Subprocess, BackgroundProcessStops) {
  auto p = Subprocess::Start({Script("server", "echo ready >&2; exec sleep 100")});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->Running());
  for (Timer w; (*p)->StderrTail().empty() && w.Seconds() < 10;) usleep(1000);
  Timer t;
  (*p)->Stop(2);
  EXPECT_FALSE((*p)->Running());
  EXPECT_LT(t.Seconds(), 5);
  EXPECT_EQ((*p)->StderrTail(), "ready\n");
  EXPECT_NE((*p)->ExitDescription().find("signal"), std::string::npos);
}

TEST(Subprocess, FreeLoopbackPort) {
  auto port = FreeLoopbackPort();
  ASSERT_TRUE(port.ok());
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

TEST(TailBuffer, KeepsTheLastBytes) {
  TailBuffer t(4);
  t.Append("ab", 2);
  EXPECT_EQ(t.str(), "ab");
  t.Append("cdef", 4);
  EXPECT_EQ(t.str(), "cdef");
  EXPECT_TRUE(t.truncated());
}

}  // namespace
}  // namespace fak::bench
