#include "distml/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include "distml/core/error.h"

namespace distml {
namespace {

// Takes the errno first so that callers read it before anything can overwrite it.
template <class... Parts>
[[noreturn]] void throw_os_error(int err, const Parts&... what) {
  throw CheckpointError(cat(what..., ": ", std::strerror(err)));
}

// Owns a file descriptor; close() reports the error that a destructor would have to swallow.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  /// Closes now; 0 on success, else the errno (some file systems report write errors here).
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// 0 on success, else the errno of the failed write.
int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

// Replaces `path` by `pieces` written one after another. The bytes go to a temporary file in the
// same directory (so the rename cannot cross file systems), which is fsynced before the rename so
// `path` never names a half-written file; the directory is fsynced after it so the rename itself
// survives a crash. On failure the temporary file is removed and `path` is untouched.
void write_file_atomically(const std::string& path,
                           std::initializer_list<std::string_view> pieces) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw CheckpointError(
        cat("cannot create directory ", dir.string(), " for ", path, ": ", ec.message()));
  }

  // The writer in the name, so that a file left by a writer that died can be told from one
  // being written (remove_stale_temporary_files).
  const std::string tmp = cat(path, ".tmp.", ::getpid(), "@", host_name());
  FileDescriptor file(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (file.get() < 0) throw_os_error(errno, "cannot create ", tmp);
  auto fail = [&](int err, const auto&... what) {
    if (file.get() >= 0) file.close();
    ::unlink(tmp.c_str());
    throw_os_error(err, what...);
  };
  for (std::string_view piece : pieces) {
    if (int err = write_all(file.get(), piece)) fail(err, "cannot write ", tmp);
  }
  if (::fsync(file.get()) != 0) fail(errno, "cannot sync ", tmp);
  if (int err = file.close()) fail(err, "cannot close ", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    fail(errno, "cannot rename ", tmp, " to ", path);
  }

  FileDescriptor dir_file(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_file.get() < 0 || ::fsync(dir_file.get()) != 0) {
    const int err = errno;
    throw_os_error(err, "wrote ", path, " but cannot sync its directory ", dir.string());
  }
}

std::vector<std::string> remove_stale_temporary_files(
    const std::string& dir, const std::function<bool(const std::string&)>& ours) {
  static const std::regex pattern(R"(.+\.tmp\.(\d{1,9})@(.+))");
  const std::string here = host_name();
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern) || m[2].str() != here || !ours(name)) continue;
    const auto pid = static_cast<pid_t>(std::stoll(m[1].str()));
    const bool alive = pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
    std::error_code gone;
    if (!alive && std::filesystem::remove(entry.path(), gone)) removed.push_back(entry.path());
  }
  return removed;
}

std::vector<char> read_whole_file(const std::string& path) {
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) throw_os_error(errno, "cannot open ", path);
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) throw_os_error(errno, "cannot stat ", path);
  std::vector<char> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t filled = 0;
  while (true) {
    if (filled == bytes.size()) bytes.resize(bytes.size() + 4096);  // the file grew; read on
    const ssize_t n = ::read(file.get(), bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_os_error(errno, "cannot read ", path);
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  bytes.resize(filled);
  return bytes;
}

void check_writable_folder(const std::string& folder, const std::string& what) {
  const std::string where = folder.empty() ? std::string(".") : folder;
  std::error_code ec;
  std::filesystem::create_directories(where, ec);
  if (ec) throw UsageError(cat(what, ": cannot write in ", where, " (", ec.message(), ")"));
  const std::string probe =
      (std::filesystem::path(where) / cat(".distml-write-probe.", ::getpid())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw UsageError(cat(what, ": cannot write in ", where, " (", std::strerror(errno), ")"));
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_writable_file(const std::string& path, const std::string& what) {
  if (std::filesystem::is_directory(path))
    throw UsageError(cat(what, ": ", path, " is a folder; name the file to write"));
  check_writable_folder(std::filesystem::path(path).parent_path().string(), what);
}

}  // namespace distml
