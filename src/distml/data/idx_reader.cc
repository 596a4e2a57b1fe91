#include "distml/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "distml/core/error.h"

namespace distml::data {
namespace {

// A file read front to back through stdio (raw) or zlib (gzip), counting the bytes
// delivered so that errors can name the offset in the (decompressed) stream.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> probe(std::fopen(path.c_str(), "rb"),
                                                          &std::fclose);
    if (!probe) throw DataError(cat(path, ": cannot open: ", std::strerror(errno)));
    unsigned char head[2] = {0, 0};
    const std::size_t got = std::fread(head, 1, 2, probe.get());
    gzip_ = got == 2 && head[0] == 0x1f && head[1] == 0x8b;
    if (gzip_) {
      probe.reset();
      gz_ = gzopen(path.c_str(), "rb");
      if (gz_ == nullptr) throw DataError(cat(path, ": cannot open as gzip"));
    } else {
      std::rewind(probe.get());
      file_ = probe.release();
    }
  }
  ~ByteSource() {
    if (gz_ != nullptr) gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Reads up to n bytes; returns how many arrived (fewer only at end of file).
  std::size_t read(void* dst, std::size_t n) {
    std::size_t total = 0;
    auto* out = static_cast<unsigned char*>(dst);
    while (total < n) {
      std::size_t got = 0;
      if (gzip_) {
        const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - total, 1u << 30));
        const int r = gzread(gz_, out + total, chunk);
        if (r < 0) {
          int code = 0;
          throw DataError(cat(path_, ": gzip error at offset ", offset_ + total,
                              " (decompressed): ", gzerror(gz_, &code)));
        }
        got = static_cast<std::size_t>(r);
      } else {
        got = std::fread(out + total, 1, n - total, file_);
        if (got == 0 && std::ferror(file_))
          throw DataError(cat(path_, ": read error at offset ", offset_ + total));
      }
      if (got == 0) break;
      total += got;
    }
    offset_ += total;
    return total;
  }

  std::size_t offset() const { return offset_; }
  const char* where() const { return gzip_ ? " (decompressed)" : ""; }

 private:
  std::string path_;
  bool gzip_ = false;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  std::size_t offset_ = 0;
};

std::size_t element_bytes(IdxType type) {
  switch (type) {
    case IdxType::kU8:
    case IdxType::kI8: return 1;
    case IdxType::kI16: return 2;
    case IdxType::kI32:
    case IdxType::kF32: return 4;
    case IdxType::kF64: return 8;
  }
  return 0;
}

bool valid_type(std::uint8_t code) {
  return code == 0x08 || code == 0x09 || (code >= 0x0B && code <= 0x0E);
}

std::uint64_t big_endian(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

double decode(IdxType type, const unsigned char* p) {
  const std::uint64_t bits = big_endian(p, element_bytes(type));
  switch (type) {
    case IdxType::kU8: return static_cast<double>(bits);
    case IdxType::kI8: return static_cast<std::int8_t>(bits);
    case IdxType::kI16: return static_cast<std::int16_t>(bits);
    case IdxType::kI32: return static_cast<std::int32_t>(bits);
    case IdxType::kF32: {
      const auto u = static_cast<std::uint32_t>(bits);
      float f;
      std::memcpy(&f, &u, sizeof f);
      return f;
    }
    case IdxType::kF64: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
  return 0;
}

bool is_integer(IdxType type) { return type != IdxType::kF32 && type != IdxType::kF64; }

}  // namespace

const char* idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::kU8: return "u8";
    case IdxType::kI8: return "i8";
    case IdxType::kI16: return "i16";
    case IdxType::kI32: return "i32";
    case IdxType::kF32: return "f32";
    case IdxType::kF64: return "f64";
  }
  return "?";
}

std::size_t IdxArray::size() const {
  std::size_t n = 1;
  for (std::size_t d : dims) n *= d;
  return n;
}

IdxHeader read_idx_header(const std::function<std::size_t(void*, std::size_t)>& read,
                          const std::string& path, std::string_view where) {
  unsigned char magic[4];
  const std::size_t got = read(magic, 4);
  if (got < 4)
    throw DataError(
        cat(path, ": truncated at offset ", got, where, ": expected a 4-byte IDX magic number"));
  if (magic[0] == 0x1f && magic[1] == 0x8b)
    throw DataError(cat(path,
                        ": gzip-compressed; reading a shard seeks to the rank's rows and needs ",
                        "a raw IDX file (decompress it first, e.g. gunzip -k)"));
  if (magic[0] != 0 || magic[1] != 0 || !valid_type(magic[2]) || magic[3] == 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", magic[0], magic[1], magic[2], magic[3]);
    throw DataError(cat(path, ": bad IDX magic number at offset 0: got ", hex,
                        ", expected 00 00 <type 08/09/0b/0c/0d/0e> <rank >= 1>"));
  }
  IdxHeader h;
  h.type = static_cast<IdxType>(magic[2]);
  h.element_bytes = element_bytes(h.type);
  const int rank = magic[3];
  std::vector<unsigned char> dim_bytes(4 * static_cast<std::size_t>(rank));
  const std::size_t dims_got = read(dim_bytes.data(), dim_bytes.size());
  if (dims_got != dim_bytes.size())
    throw DataError(cat(path, ": truncated at offset ", 4 + dims_got, where, ": expected ",
                        dim_bytes.size(), " bytes of dimensions from offset 4, got ", dims_got));
  for (int i = 0; i < rank; ++i) {
    const auto d = static_cast<std::size_t>(big_endian(&dim_bytes[4 * i], 4));
    h.dims.push_back(d);
    if (d != 0 && h.count > std::numeric_limits<std::size_t>::max() / h.element_bytes / d)
      throw DataError(cat(path, ": dimension ", i, " at offset ", 4 + 4 * i, " (", d,
                          ") makes the array too large to address"));
    h.count *= d;
  }
  h.data_offset = 4 + dim_bytes.size();
  return h;
}

IdxArray read_idx(const std::string& path) {
  ByteSource in(path);
  const IdxHeader h =
      read_idx_header([&](void* dst, std::size_t n) { return in.read(dst, n); }, path, in.where());
  IdxArray a;
  a.type = h.type;
  a.dims = h.dims;
  const std::size_t width = h.element_bytes, count = h.count;
  // Read in chunks so that a corrupt header claiming terabytes fails on the short read,
  // not on an allocation of the claimed size.
  std::vector<unsigned char> raw;
  const std::size_t want = count * width, data_start = in.offset();
  constexpr std::size_t kChunk = std::size_t{16} << 20;
  while (raw.size() < want) {
    const std::size_t n = std::min(kChunk, want - raw.size());
    const std::size_t old = raw.size();
    raw.resize(old + n);
    const std::size_t r = in.read(raw.data() + old, n);
    if (r != n)
      throw DataError(cat(path, ": truncated at offset ", in.offset(), in.where(), ": expected ",
                          want, " bytes of ", idx_type_name(a.type), " data from offset ",
                          data_start, " for ", count, " elements, got ", old + r));
  }
  unsigned char extra;
  if (in.read(&extra, 1) != 0)
    throw DataError(cat(path, ": unexpected bytes after the last element at offset ",
                        in.offset() - 1, in.where(), ": expected end of file"));
  if (a.type == IdxType::kU8) {
    a.u8.assign(raw.begin(), raw.end());
  } else {
    a.values.resize(count);
    for (std::size_t i = 0; i < count; ++i) a.values[i] = decode(a.type, &raw[i * width]);
  }
  return a;
}

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path) {
  const IdxArray images = read_idx(images_path);
  if (images.type != IdxType::kU8)
    throw DataError(cat(images_path, ": images have element type ", idx_type_name(images.type),
                        ", expected u8"));
  const IdxArray labels = read_idx(labels_path);
  if (!is_integer(labels.type))
    throw DataError(cat(labels_path, ": labels have element type ", idx_type_name(labels.type),
                        ", expected an integer type"));
  if (labels.dims.size() != 1)
    throw DataError(cat(labels_path, ": labels have rank ", labels.dims.size(), ", expected 1"));
  const std::size_t n = images.dims[0];
  if (labels.dims[0] != n)
    throw DataError(cat(labels_path, ": holds ", labels.dims[0], " labels (count at offset 4)",
                        " but ", images_path, " holds ", n, " images; expected equal counts"));
  Dataset ds;
  ds.num_samples = n;
  ds.sample_shape.assign(images.dims.begin() + 1, images.dims.end());
  ds.feature_dim = 1;
  for (std::size_t d : ds.sample_shape) ds.feature_dim *= d;
  ds.features.resize(images.u8.size());
  for (std::size_t i = 0; i < images.u8.size(); ++i) ds.features[i] = images.u8[i] / 255.0f;
  ds.labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    ds.labels[i] =
        labels.type == IdxType::kU8 ? labels.u8[i] : static_cast<std::int64_t>(labels.values[i]);
  }
  return ds;
}

}  // namespace distml::data
