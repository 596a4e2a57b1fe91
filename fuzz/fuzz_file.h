// Gives a fuzz input a file name, for the readers that open a path: an anonymous in-memory file
// (memfd), rewritten for each input and opened by the reader as /proc/self/fd/N, so that
// fuzzing touches no disk and two fuzzers never share a file.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace distml::fuzz {

class FuzzFile {
 public:
  FuzzFile() : fd_(memfd_create("distml-fuzz", 0)) {
    if (fd_ < 0) std::abort();  // the harness cannot run at all: not a finding
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~FuzzFile() { close(fd_); }
  FuzzFile(const FuzzFile&) = delete;
  FuzzFile& operator=(const FuzzFile&) = delete;

  /// Replaces the file's contents with `size` bytes of `data`; returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace distml::fuzz
