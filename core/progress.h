// A progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <cstdint>
#include <string>

namespace fak {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Update(uint64_t done);  // redraws at most ~20 times a second
  void Finish();

  static bool StderrIsTty();

 private:
  void Draw(bool force);

  std::string label_;
  uint64_t total_;
  uint64_t done_ = 0;
  int64_t last_draw_ns_ = 0;
  bool enabled_;
  bool finished_ = false;
};

}  // namespace fak
