#include "distml/data/npz_reader.h"

#include <zip.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <regex>

#include "distml/core/error.h"

namespace distml::data {
namespace {

// Closes a zip_file_t on every path out.
struct ZipEntry {
  zip_file_t* file;
  ~ZipEntry() {
    if (file) zip_fclose(file);
  }
};

// The byte width in a descr such as "<f4"; 0 when there is none to read (the conversions then
// refuse the dtype by name).
std::size_t element_size(const std::string& dtype) {
  std::size_t n = 0;
  if (dtype.size() < 3) return 0;
  const auto [end, ec] = std::from_chars(dtype.data() + 2, dtype.data() + dtype.size(), n);
  return ec == std::errc() && end == dtype.data() + dtype.size() ? n : 0;
}

// NumPy itself refuses to read a header longer than this (numpy.lib.format's max_header_size,
// 10000 since NumPy 1.24); what it writes for the dtypes read here is about 128 bytes.
constexpr std::size_t kMaxHeaderBytes = 10000;

template <class T, class Out>
void convert(const std::string& raw, std::vector<Out>& out) {
  const std::size_t n = raw.size() / sizeof(T);
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<Out>(v);
  }
}

}  // namespace

struct NpzFile::Archive {
  zip_t* zip = nullptr;
  ~Archive() {
    if (zip) zip_discard(zip);  // read-only: nothing to write back
  }
};

std::size_t NpyArrayInfo::row_elements() const {
  std::size_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

NpzFile::NpzFile(const std::string& path) : path_(path), archive_(std::make_unique<Archive>()) {
  if (!std::filesystem::exists(path)) throw DataError(cat(path, ": no such .npz file"));
  int error = 0;
  archive_->zip = zip_open(path.c_str(), ZIP_RDONLY, &error);
  if (!archive_->zip) {
    zip_error_t e;
    zip_error_init_with_code(&e, error);
    std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw DataError(cat(path, ": not an .npz (zip) archive: ", why));
  }
}

NpzFile::~NpzFile() = default;

// Reads the .npy header at the start of `array`'s entry.
NpyArrayInfo NpzFile::info(const std::string& array) const {
  const std::string entry = array + ".npy", where = cat(path_, ": array '", array, "'");
  ZipEntry f{zip_fopen(archive_->zip, entry.c_str(), 0)};
  if (!f.file) {
    std::string names;
    for (zip_int64_t i = 0; i < zip_get_num_entries(archive_->zip, 0); ++i)
      names += cat(names.empty() ? "" : ", ", zip_get_name(archive_->zip, i, 0));
    throw DataError(cat(where, " is missing (the archive holds: ", names, ")"));
  }
  NpyArrayInfo info;
  info.name = array;
  char preamble[12];
  if (zip_fread(f.file, preamble, 10) != 10 || std::memcmp(preamble, "\x93NUMPY", 6) != 0)
    throw DataError(cat(where, ": not a .npy array (bad magic bytes)"));
  std::size_t header_len =
      static_cast<unsigned char>(preamble[8]) | static_cast<unsigned char>(preamble[9]) << 8;
  if (preamble[6] >= 2) {  // versions 2 and 3: a four-byte length
    if (zip_fread(f.file, preamble + 10, 2) != 2)
      throw DataError(cat(where, ": truncated .npy header"));
    header_len |= static_cast<std::size_t>(static_cast<unsigned char>(preamble[10])) << 16 |
                  static_cast<std::size_t>(static_cast<unsigned char>(preamble[11])) << 24;
  }
  info.data_offset = (preamble[6] >= 2 ? 12 : 10) + header_len;
  if (header_len > kMaxHeaderBytes)
    throw DataError(cat(where, ": .npy header of ", header_len, " bytes; NumPy writes at most ",
                        kMaxHeaderBytes));
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat(archive_->zip, entry.c_str(), 0, &stat) != 0 || !(stat.valid & ZIP_STAT_SIZE))
    throw DataError(cat(where, ": the archive does not say how large the array is"));
  const std::uint64_t entry_bytes = stat.size;
  std::string header(header_len, '\0');
  if (zip_fread(f.file, header.data(), header_len) != static_cast<zip_int64_t>(header_len))
    throw DataError(cat(where, ": truncated .npy header"));

  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    throw DataError(cat(where, ": .npy header without 'descr': ", header));
  info.dtype = m[1];
  if (std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*True)")))
    throw DataError(cat(where, ": stored in Fortran order; save np.ascontiguousarray(a)"));
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    throw DataError(cat(where, ": .npy header without 'shape': ", header));
  const std::string dims = m[1];
  const std::regex number(R"(\d+)");
  // The elements must fit in the entry: a shape read from a corrupt header would otherwise size
  // the buffers of read_floats / read_ints.
  std::uint64_t elements = 1;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    const std::string text = it->str();
    std::uint64_t d = 0;
    const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec != std::errc() || stop != text.data() + text.size())
      throw DataError(cat(where, ": .npy shape (", dims, ") has a dimension beyond 2^64"));
    info.shape.push_back(static_cast<std::size_t>(d));
    elements = d != 0 && elements > kMax / d ? kMax : elements * d;
  }
  const std::uint64_t width = std::max<std::size_t>(1, element_size(info.dtype));
  const std::uint64_t data_bytes = elements > kMax / width ? kMax : elements * width;
  if (info.data_offset > entry_bytes || data_bytes > entry_bytes - info.data_offset)
    throw DataError(cat(where, ": truncated: its header says shape (", dims, ") of '", info.dtype,
                        "', more than the ", entry_bytes, "-byte entry holds"));
  if (info.dtype.size() > 1 && info.dtype[0] == '>' && element_size(info.dtype) > 1)
    throw DataError(cat(where, ": big-endian dtype '", info.dtype,
                        "'; save it as little-endian (a.astype(a.dtype.newbyteorder('<')))"));
  return info;
}

// The bytes of rows [begin, end): seek where the entry allows it, else read past the rows
// before the range.
std::string NpzFile::raw_rows(const NpyArrayInfo& info, std::size_t begin, std::size_t end) const {
  const std::string where = cat(path_, ": array '", info.name, "'");
  if (begin > end || end > info.rows())
    throw UsageError(cat(where, ": rows [", begin, ", ", end, ") outside its ", info.rows()));
  const std::size_t row_bytes = info.row_elements() * element_size(info.dtype);
  ZipEntry f{zip_fopen(archive_->zip, (info.name + ".npy").c_str(), 0)};
  if (!f.file) throw DataError(cat(where, " is missing"));
  const std::size_t start = info.data_offset + begin * row_bytes;
  zip_stat_t stat;
  zip_stat_init(&stat);
  const bool stored = zip_stat(archive_->zip, (info.name + ".npy").c_str(), 0, &stat) == 0 &&
                      (stat.valid & ZIP_STAT_COMP_METHOD) && stat.comp_method == ZIP_CM_STORE;
  if (stored) {
    if (zip_fseek(f.file, static_cast<zip_int64_t>(start), SEEK_SET) != 0)
      throw DataError(cat(where, ": cannot seek to row ", begin, ": ",
                          zip_error_strerror(zip_file_get_error(f.file))));
  } else {
    // A compressed entry cannot seek: stream past what comes before the range.
    std::size_t at = 0;
    std::string skip(1 << 20, '\0');
    while (at < start) {
      const auto n = zip_fread(f.file, skip.data(), std::min(skip.size(), start - at));
      if (n <= 0) throw DataError(cat(where, ": truncated before row ", begin));
      at += n;
    }
  }
  std::string out((end - begin) * row_bytes, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const auto n = zip_fread(f.file, out.data() + got, out.size() - got);
    if (n <= 0)
      throw DataError(cat(where, ": truncated: its header says ", info.rows(),
                          " rows, the data ends in row ", begin + got / row_bytes));
    got += n;
  }
  return out;
}

std::vector<float> NpzFile::read_floats(const NpyArrayInfo& i, std::size_t begin,
                                        std::size_t end) const {
  const auto raw = raw_rows(i, begin, end);
  std::vector<float> out;
  const std::string kind = i.dtype.substr(1);
  if (kind == "f4")
    convert<float>(raw, out);
  else if (kind == "f8")
    convert<double>(raw, out);
  else if (kind == "u1")
    convert<std::uint8_t>(raw, out);
  else
    throw DataError(cat(path_, ": array '", i.name, "' has dtype '", i.dtype,
                        "'; expected float32, float64 or uint8"));
  return out;
}

std::vector<std::int64_t> NpzFile::read_ints(const NpyArrayInfo& i, std::size_t begin,
                                             std::size_t end) const {
  const auto raw = raw_rows(i, begin, end);
  std::vector<std::int64_t> out;
  const std::string kind = i.dtype.substr(1);
  if (kind == "i8")
    convert<std::int64_t>(raw, out);
  else if (kind == "i4")
    convert<std::int32_t>(raw, out);
  else
    throw DataError(cat(path_, ": array '", i.name, "' has dtype '", i.dtype,
                        "'; expected int64 or int32 class ids"));
  return out;
}

bool NpzLayout::float_targets() const { return y.dtype[1] == 'f'; }

NpzLayout npz_layout(const NpzFile& file) {
  const std::string& path = file.path();
  NpzLayout layout{file.info("x"), file.info("y")};
  auto dtype_in = [](const NpyArrayInfo& a, std::initializer_list<const char*> kinds) {
    return std::any_of(kinds.begin(), kinds.end(),
                       [&](const char* k) { return a.dtype.size() > 1 && a.dtype.substr(1) == k; });
  };
  if (!dtype_in(layout.x, {"f4", "f8", "u1"}))
    throw DataError(cat(path, ": array 'x' has dtype '", layout.x.dtype,
                        "'; expected float32, float64 or uint8"));
  if (!dtype_in(layout.y, {"i8", "i4", "f4", "f8"}))
    throw DataError(cat(path, ": array 'y' has dtype '", layout.y.dtype,
                        "'; expected int64 or int32 class ids, or float32 or float64 targets"));
  if (layout.x.shape.empty() || layout.y.shape.empty())
    throw DataError(cat(path, ": array '", layout.x.shape.empty() ? "x" : "y",
                        "' is a scalar; expected one row per sample"));
  if (layout.x.rows() != layout.y.rows())
    throw DataError(cat(path, ": arrays 'x' and 'y' have different lengths: ", layout.x.rows(),
                        " and ", layout.y.rows(), " rows"));
  if (!layout.float_targets() && layout.y.shape.size() != 1)
    throw DataError(cat(path, ": array 'y' holds class ids of shape [", layout.y.rows(),
                        ", ...]; expected one id per sample, shape [N]"));
  return layout;
}

Dataset read_npz_rows(const std::string& path, std::size_t begin, std::size_t end) {
  const NpzFile file(path);
  const auto layout = npz_layout(file);
  Dataset d;
  d.num_samples = end - begin;
  d.feature_dim = layout.x.row_elements();
  d.sample_shape.assign(layout.x.shape.begin() + 1, layout.x.shape.end());
  if (d.sample_shape.empty()) d.sample_shape = {1};
  d.features = file.read_floats(layout.x, begin, end);
  if (layout.float_targets()) {
    d.target_dim = layout.y.row_elements();
    d.target_shape.assign(layout.y.shape.begin() + 1, layout.y.shape.end());
    d.targets = file.read_floats(layout.y, begin, end);
  } else {
    d.labels = file.read_ints(layout.y, begin, end);
  }
  return d;
}

}  // namespace distml::data
