#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/timer.h"

namespace fak {

bool ProgressBar::StderrIsTty() { return isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), enabled_(StderrIsTty()) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done) {
  done_ = done;
  Draw(false);
}

void ProgressBar::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  done_ = total_;
  Draw(true);
  std::fputc('\n', stderr);
}

void ProgressBar::Draw(bool force) {
  if (!enabled_) return;
  const int64_t now = NowNanos();
  if (!force && now - last_draw_ns_ < 50'000'000) return;
  last_draw_ns_ = now;
  constexpr int kWidth = 40;
  const double frac = total_ == 0 ? 1.0 : static_cast<double>(done_) / static_cast<double>(total_);
  const int filled = static_cast<int>(frac * kWidth);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  std::fprintf(stderr, "\r%s [%s] %5.1f%%", label_.c_str(), bar, frac * 100.0);
  std::fflush(stderr);
}

}  // namespace fak
