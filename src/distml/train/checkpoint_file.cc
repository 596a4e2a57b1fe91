#include "distml/train/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>

#include "distml/core/error.h"

namespace distml::train {
namespace {

constexpr std::string_view kMagic = "DMLCKPT1";
constexpr std::size_t kHeaderSize = 8 + 8 + 4;  // magic, payload size, crc

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

// Replaces `path` by `pieces` written one after another. The bytes go to a temporary file in the
// same directory (so the rename cannot cross file systems), which is fsynced before the rename so
// `path` never names a half-written file; the directory is fsynced after it so the rename itself
// survives a crash. On failure the temporary file is removed and `path` is untouched.
void write_atomically(const std::string& path, std::initializer_list<std::string_view> pieces) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw CheckpointError(
        cat("cannot create directory ", dir.string(), " for ", path, ": ", ec.message()));
  }

  const std::string tmp = cat(path, ".tmp.", ::getpid());
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

std::uint32_t crc_of(std::string_view bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::string hex32(std::uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  }
  return value;
}

}  // namespace

void write_checked_file(const std::string& path, std::string_view payload) {
  std::string header(kMagic);
  put_le(header, payload.size(), 8);
  put_le(header, crc_of(payload), 4);
  write_atomically(path, {header, payload});
}

std::string read_checked_file(const std::string& path) {
  const std::vector<char> bytes = read_whole_file(path);
  const std::string_view file(bytes.data(), bytes.size());
  // A file cut inside the magic still starts like one: call that truncated, not foreign.
  if (file.substr(0, kMagic.size()) != kMagic.substr(0, file.size())) {
    throw CheckpointError(
        cat(path, ": not a distml checkpoint (does not start with ", kMagic, ")"));
  }
  if (file.size() < kHeaderSize) {
    throw CheckpointError(cat(path, ": truncated: expected a ", kHeaderSize, "-byte header, found ",
                              file.size(), " bytes"));
  }
  const std::uint64_t expected = get_le(file.data() + 8, 8);
  const auto stored_crc = static_cast<std::uint32_t>(get_le(file.data() + 16, 4));
  const std::string_view payload = file.substr(kHeaderSize);
  if (payload.size() < expected) {
    throw CheckpointError(
        cat(path, ": truncated: expected ", expected, " payload bytes, found ", payload.size()));
  }
  if (payload.size() > expected) {
    throw CheckpointError(cat(path, ": expected ", expected, " payload bytes, found ",
                              payload.size(), " (extra bytes after the payload)"));
  }
  const std::uint32_t computed_crc = crc_of(payload);
  if (computed_crc != stored_crc) {
    throw CheckpointError(cat(path, ": checksum mismatch: stored crc ", hex32(stored_crc),
                              ", computed ", hex32(computed_crc)));
  }
  return std::string(payload);
}

void export_tensors(const std::string& path, const NamedTensors& tensors) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [name, tensor] : tensors) {
      if (dict.contains(name)) {
        throw CheckpointError(cat("cannot export ", path, ": tensor name '", name, "' repeats"));
      }
      // A copy, not a view: saving a view would save the whole storage under it.
      dict.insert(name, tensor.detach().clone(at::MemoryFormat::Contiguous));
    }
    bytes = torch::pickle_save(c10::IValue(dict));
  } catch (const c10::Error& e) {
    throw CheckpointError(cat("cannot export ", path, ": ", e.what_without_backtrace()));
  }
  write_atomically(path, {std::string_view(bytes.data(), bytes.size())});
}

NamedTensors import_tensors(const std::string& path) {
  c10::IValue value;
  try {
    value = torch::pickle_load(read_whole_file(path));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
    throw CheckpointError(cat("cannot import ", path, ": ",
                              torch_error ? torch_error->what_without_backtrace() : e.what()));
  }
  if (!value.isGenericDict()) {
    throw CheckpointError(
        cat("cannot import ", path, ": holds a ", value.tagKind(), ", not a dict of tensors"));
  }
  NamedTensors tensors;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      throw CheckpointError(cat("cannot import ", path, ": an entry is ", entry.key().tagKind(),
                                " -> ", entry.value().tagKind(), ", not name -> tensor"));
    }
    tensors.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return tensors;
}

}  // namespace distml::train
