#include "bench/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/timer.h"

extern char** environ;

namespace fak::bench {

void TailBuffer::Append(const char* data, size_t n) {
  s_.append(data, n);
  if (s_.size() > cap_) {
    s_.erase(0, s_.size() - cap_);
    truncated_ = true;
  }
}

Result<std::unique_ptr<Subprocess>> Subprocess::Start(const std::vector<std::string>& argv,
                                                      size_t stdout_cap) {
  if (argv.empty()) return InvalidArgument("no command to run");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return IoError("pipe: {}", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    return IoError("pipe: {}", std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]), close(err_pipe[0]);
    return IoError("cannot start {}: {}", argv[0], std::strerror(rc));
  }
  std::unique_ptr<Subprocess> p(new Subprocess());
  p->pid_ = pid;
  p->out_fd_ = out_pipe[0];
  p->err_fd_ = err_pipe[0];
  p->stdout_cap_ = stdout_cap;
  p->drain_ = std::thread([raw = p.get()] { raw->Drain(); });
  return p;
}

void Subprocess::Drain() {
  char buf[16384];
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, 200) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (i == 0) {
        const size_t room = stdout_cap_ > out_.size() ? stdout_cap_ - out_.size() : 0;
        out_.append(buf, std::min(room, static_cast<size_t>(n)));
      } else {
        err_.Append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
}

bool Subprocess::Running() {
  if (exited_) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exited_ = true;
  if (r == pid_ && WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
  if (r == pid_ && WIFSIGNALED(status)) term_signal_ = WTERMSIG(status);
  Finish();
  return false;
}

bool Subprocess::WaitFor(double seconds) {
  Timer t;
  while (Running()) {
    if (t.Seconds() >= seconds) return false;
    usleep(5000);
  }
  return true;
}

void Subprocess::Finish() {
  kill(-pid_, SIGKILL);  // leftovers of the group would keep the pipes open
  if (drain_.joinable()) drain_.join();
}

void Subprocess::Stop(double grace_seconds) {
  if (!Running()) return;
  kill(-pid_, SIGTERM);
  if (WaitFor(grace_seconds)) return;
  kill(-pid_, SIGKILL);
  WaitFor(60);
}

Subprocess::~Subprocess() {
  Stop(0.5);
  if (drain_.joinable()) drain_.join();
}

std::string Subprocess::ExitDescription() const {
  if (!exited_) return "still running";
  if (term_signal_ != 0)
    return fmt::format("killed by signal {} ({})", term_signal_, strsignal(term_signal_));
  return fmt::format("exit status {}", exit_code_);
}

std::string Subprocess::StdoutHead() {
  std::lock_guard<std::mutex> lock(mu_);
  return out_;
}

std::string Subprocess::StderrTail() {
  std::lock_guard<std::mutex> lock(mu_);
  return err_.str();
}

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, double timeout_seconds) {
  Timer t;
  FAK_ASSIGN_OR_RETURN(auto p, Subprocess::Start(argv));
  ProcessResult r;
  if (!p->WaitFor(timeout_seconds)) {
    r.timed_out = true;
    p->Stop(0.5);
  }
  r.seconds = t.Seconds();
  r.exit_code = p->exit_code();
  r.exit_description =
      r.timed_out ? fmt::format("timed out after {:.1f} s", timeout_seconds) : p->ExitDescription();
  r.out = p->StdoutHead();
  r.err_tail = p->StderrTail();
  return r;
}

Result<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError("socket: {}", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    close(fd);
    return IoError("binding a loopback port: {}", std::strerror(e));
  }
  close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

}  // namespace fak::bench
