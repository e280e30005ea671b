// External engines run as child processes in their own process group, with stdout and stderr read
// through pipes by a drain thread (so a chatty engine never blocks on a full pipe), a deadline, and
// a kill of the whole group when it passes or when the caller stops it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace fak::bench {

// Keeps the last `cap` bytes appended to it.
class TailBuffer {
 public:
  explicit TailBuffer(size_t cap) : cap_(cap) {}
  void Append(const char* data, size_t n);
  const std::string& str() const { return s_; }
  bool truncated() const { return truncated_; }

 private:
  size_t cap_;
  std::string s_;
  bool truncated_ = false;
};

inline constexpr size_t kStderrTailBytes = 4096;

class Subprocess {
 public:
  // Starts argv[0] (a path, not searched in PATH) with stdin from /dev/null. stdout is kept up to
  // stdout_cap bytes (the head), stderr's last kStderrTailBytes.
  static Result<std::unique_ptr<Subprocess>> Start(const std::vector<std::string>& argv,
                                                   size_t stdout_cap = 16u << 20);
  ~Subprocess();  // kills the group if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Reaps the child if it has exited; true while it runs.
  bool Running();
  // Waits until the child exits or `seconds` pass; true when it exited.
  bool WaitFor(double seconds);
  // SIGTERM to the group, then SIGKILL after `grace_seconds`; waits for the child and the drain.
  void Stop(double grace_seconds = 2.0);

  // Valid after the child exited: exit code, or -1 when a signal ended it (then term_signal()).
  int exit_code() const { return exit_code_; }
  int term_signal() const { return term_signal_; }
  // "exit status 3", "killed by signal 9"
  std::string ExitDescription() const;

  // Thread-safe snapshots of what was read so far.
  std::string StdoutHead();
  std::string StderrTail();

 private:
  Subprocess() = default;
  void Drain();
  void Finish();  // after exit: kill leftovers in the group, join the drain thread

  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  int term_signal_ = 0;
  int out_fd_ = -1, err_fd_ = -1;
  size_t stdout_cap_ = 0;
  std::mutex mu_;
  std::string out_;
  TailBuffer err_{kStderrTailBytes};
  std::thread drain_;
};

struct ProcessResult {
  bool timed_out = false;
  int exit_code = -1;
  std::string exit_description;
  std::string out;
  std::string err_tail;
  double seconds = 0;
};

// Runs argv to completion, or kills its process group after timeout_seconds.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, double timeout_seconds);

// A TCP port on 127.0.0.1 that was free a moment ago (bound with port 0, then closed).
Result<int> FreeLoopbackPort();

}  // namespace fak::bench
