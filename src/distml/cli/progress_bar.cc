#include "progress_bar.h"

#include <algorithm>
#include <cmath>

namespace distml::cli {

ProgressBar::ProgressBar(std::FILE* out, std::string unit) : out_(out), unit_(std::move(unit)) {}

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else if (s >= 60)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%llds", s);
  return text;
}

void ProgressBar::update(std::int64_t done, std::int64_t total, const std::string& note) {
  const auto now = Clock::now();
  // The rate counts from the first update, so that a resumed run's earlier steps do not count.
  if (first_done_ < 0) {
    first_done_ = done;
    start_ = now;
  }
  if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? (done - first_done_) / elapsed : 0;
  const int width = 30;
  const int filled = total > 0 ? static_cast<int>(width * done / total) : 0;
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  const std::string eta = rate > 0 ? format_duration((total - done) / rate) : "?";
  std::fprintf(out_, "\r[%s] %lld/%lld %s  %.1f %s/s  ETA %s %s\x1b[K", bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(), rate,
               unit_.c_str(), eta.c_str(), note.c_str());
  std::fflush(out_);
}

void ProgressBar::clear() {
  std::fprintf(out_, "\r\x1b[K");
  std::fflush(out_);
}

}  // namespace distml::cli
