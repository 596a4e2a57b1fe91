#include "distml/ml/sharded_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include "distml/comm/block_range.h"
#include "distml/core/error.h"
#include "distml/data/csv_fields.h"
#include "distml/data/idx_reader.h"
#include "distml/ml/agreement.h"

namespace distml::ml {
namespace {

using data::csv::parse_integer;
using data::csv::parse_number;
using data::csv::split_fields;
using data::csv::trim;

using comm::Communicator;

// Runs a local step that may throw DataError, then agrees on errors with the other ranks.
template <class Step>
void collectively(Communicator& comm, Step&& step) {
  std::string error;
  try {
    step();
  } catch (const DataError& e) {
    error = e.what();
  }
  throw_if_any_rank_failed(comm, error);
}

// ---- Parsing ----

// Calls fn(line, line_no) for every line of `text`, the first being number `first_line`.
template <class Fn>
void for_each_line(std::string_view text, std::size_t first_line, Fn&& fn) {
  std::size_t line_no = first_line;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    fn(text.substr(0, nl), line_no++);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
}

std::size_t count_lines(std::string_view text) {
  const auto n = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  return n + (!text.empty() && text.back() != '\n' ? 1 : 0);
}

// ---- Byte ranges ----

std::ifstream open_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(cat(path, ": cannot open: ", std::strerror(errno)));
  return in;
}

std::uint64_t file_size(std::ifstream& in) {
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  return size;
}

// Reads a file forward from `offset` in chunks, so that a rank reads only what it needs.
class ForwardReader {
 public:
  ForwardReader(std::ifstream& in, std::uint64_t offset) : in_(in) {
    in_.clear();  // an earlier read may have hit the end of the file
    in_.seekg(static_cast<std::streamoff>(offset));
  }
  std::string& bytes() { return buf_; }
  // Makes at least n bytes available unless the file ends first.
  void fill(std::size_t n) {
    while (buf_.size() < n && more(n - buf_.size())) {
    }
  }
  // The index of the first '\n' at or after `from`, reading on as needed; npos at the end.
  std::size_t find_newline(std::size_t from) {
    fill(from);
    for (;;) {
      const std::size_t nl = buf_.find('\n', from);
      if (nl != std::string::npos) return nl;
      from = std::max(from, buf_.size());
      if (!more(kChunk)) return std::string::npos;
    }
  }

 private:
  static constexpr std::size_t kChunk = 64 << 10;
  bool more(std::size_t n) {
    const std::size_t old = buf_.size();
    buf_.resize(old + n);
    in_.read(buf_.data() + old, static_cast<std::streamsize>(n));
    buf_.resize(old + static_cast<std::size_t>(in_.gcount()));
    return buf_.size() > old;
  }
  std::ifstream& in_;
  std::string buf_;
};

// The whole lines of this rank's range of [data_begin, size) (see the header, step 2).
std::string read_line_range(std::ifstream& in, std::uint64_t data_begin, std::uint64_t size,
                            int rank, int ranks) {
  const std::uint64_t n = size - data_begin;
  const comm::BlockRange nominal = comm::block_range(n, ranks, rank);
  ForwardReader reader(in, data_begin + nominal.begin);
  const std::size_t nominal_size = nominal.size();
  reader.fill(nominal_size);
  std::size_t begin = 0, end = std::string::npos;
  if (rank > 0) {
    const std::size_t nl = reader.find_newline(0);
    begin = nl == std::string::npos ? reader.bytes().size() : nl + 1;
  }
  if (rank + 1 < ranks) {
    const std::size_t nl = reader.find_newline(nominal_size);
    end = nl == std::string::npos ? reader.bytes().size() : nl + 1;
  } else {
    end = reader.bytes().size();
  }
  return reader.bytes().substr(begin, end - begin);
}

// The first non-blank line of a CSV file: its fields, 1-based number and the byte after it.
struct CsvHeader {
  std::vector<std::string> fields;
  std::size_t line = 0;
  std::uint64_t end = 0;
};

CsvHeader read_header(std::ifstream& in, const std::string& path, char delimiter) {
  ForwardReader reader(in, 0);
  CsvHeader h;
  std::size_t from = 0;
  for (;;) {
    const std::size_t nl = reader.find_newline(from);
    const std::size_t stop = nl == std::string::npos ? reader.bytes().size() : nl;
    ++h.line;
    std::string_view line(reader.bytes().data() + from, stop - from);
    if (from == 0 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // a UTF-8 BOM
    if (!trim(line).empty()) {
      h.fields = split_fields(line, delimiter, path, h.line);
      h.end = nl == std::string::npos ? stop : nl + 1;
      return h;
    }
    if (nl == std::string::npos) throw DataError(cat(path, ": empty file, expected a header row"));
    from = nl + 1;
  }
}

std::size_t find_label_column(const CsvHeader& header, const CsvShardOptions& o,
                              const std::string& path) {
  const std::vector<std::string>& names = header.fields;
  if (!o.label_name.empty()) {
    const auto it = std::find(names.begin(), names.end(), o.label_name);
    if (it != names.end()) return static_cast<std::size_t>(it - names.begin());
    std::string list;
    for (const std::string& h : names) list += (list.empty() ? "" : ", ") + h;
    throw DataError(cat(path, ":", header.line, ": no label column named '", o.label_name,
                        "'; expected one of: ", list));
  }
  const long n = static_cast<long>(names.size());
  const long i = o.label_index < 0 ? n + o.label_index : o.label_index;
  if (i < 0 || i >= n)
    throw DataError(cat(path, ":", header.line, ": label column index ", o.label_index,
                        " is outside the ", n, " columns of the header"));
  return static_cast<std::size_t>(i);
}

// An empty cell, NA, NaN or ? (as pandas and R write a missing value).
bool is_missing(std::string_view field) {
  const auto t = trim(field);
  return t.empty() || t == "NA" || t == "NaN" || t == "nan" || t == "?";
}

// Which columns of the file are the features, in order, and which is the label (none: the
// file has no label column).
struct Columns {
  std::vector<std::size_t> features;
  std::optional<std::size_t> label;
};

Columns columns_of(const CsvHeader& header, const CsvShardOptions& o, const std::string& path) {
  const std::vector<std::string>& names = header.fields;
  const auto where = [&] { return cat(path, ":", header.line, ": "); };
  Columns cols;
  if (!o.features.empty()) {  // by name, and the label if the file has it
    const auto find = [&](const std::string& name) -> std::optional<std::size_t> {
      const auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) return std::nullopt;
      return static_cast<std::size_t>(it - names.begin());
    };
    for (const auto& name : o.features) {
      const auto c = find(name);
      if (!c)
        throw DataError(cat(where(), "no column named '", name, "' (a feature of the model)"));
      cols.features.push_back(*c);
    }
    if (!o.label_name.empty()) cols.label = find(o.label_name);
    if (names.size() != cols.features.size() + (cols.label ? 1 : 0))
      for (std::size_t c = 0; c < names.size(); ++c)
        if (std::find(cols.features.begin(), cols.features.end(), c) == cols.features.end() &&
            c != cols.label)
          throw DataError(
              cat(where(), "column '", names[c], "' is neither a feature of the model",
                  o.label_name.empty() ? "" : cat(" nor its label '", o.label_name, "'")));
    return cols;
  }
  if (!o.no_label) {
    if (names.size() < 2)
      throw DataError(cat(where(), "header has ", names.size(),
                          " column, expected at least one feature and a label"));
    cols.label = find_label_column(header, o, path);
  }
  for (std::size_t c = 0; c < names.size(); ++c)
    if (c != cols.label) cols.features.push_back(c);
  return cols;
}

// ---- Labels, agreed over all ranks ----

// Raw labels of this rank's rows, with where each came from for messages.
struct RawLabels {
  std::vector<std::string> values;
  std::vector<std::string> origins;  // "file:line: column c (name)" or "file:line"
};

// Fills d.y, d.num_classes and d.class_names (or d.targets for regression).
void assign_labels(Communicator& comm, const RawLabels& raw, bool regression, LocalData& d) {
  const std::size_t n = raw.values.size();
  if (regression) {
    d.targets.resize(n);
    collectively(comm, [&] {
      for (std::size_t i = 0; i < n; ++i) {
        const std::optional<double> v = parse_number(raw.values[i]);
        if (!v || !std::isfinite(*v))
          throw DataError(cat(raw.origins[i], ": label '", raw.values[i],
                              "' is not a finite number (regression)"));
        d.targets[i] = *v;
      }
    });
    return;
  }
  // Classes as scikit-learn takes them (np.unique): the sorted distinct label values, by
  // number when every label on every rank is one (they must then be whole: a real-valued
  // label is a regression's), else by name. A class's name is the value as written, or for a
  // number its integer text, so that "1", "+1" and "1.0" are one class.
  bool numbers = true;
  for (const std::string& s : raw.values) numbers = numbers && parse_number(s).has_value();
  numbers = allreduce_i64(comm, numbers ? 1 : 0, comm::ReduceOp::min) == 1;
  std::vector<std::string> keys = raw.values;
  if (numbers)
    collectively(comm, [&] {
      for (std::size_t i = 0; i < n; ++i) {
        const double v = *parse_number(raw.values[i]);
        if (!std::isfinite(v) || v != std::round(v) || std::abs(v) > 9e15)
          throw DataError(cat(raw.origins[i], ": label '", raw.values[i],
                              "' is not a class (an integer or a name); a real-valued label "
                              "is a regression's (--set loss=squared_error)"));
        keys[i] = std::to_string(static_cast<std::int64_t>(v));
      }
    });
  // All-gather each rank's distinct keys, '\n'-terminated (labels hold none).
  const std::set<std::string> mine(keys.begin(), keys.end());
  std::string packed;
  for (const std::string& s : mine) packed += s + '\n';
  const std::vector<std::int64_t> sizes =
      allgather_i64(comm, static_cast<std::int64_t>(packed.size()));
  const std::vector<std::size_t> counts(sizes.begin(), sizes.end());
  std::string all(
      static_cast<std::size_t>(std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0})), '\0');
  comm.allgatherv(comm::ConstBuffer{packed.data(), packed.size(), comm::DType::u8},
                  comm::Buffer{all.data(), all.size(), comm::DType::u8}, counts);
  std::set<std::string> names;
  for_each_line(all, 0, [&](std::string_view s, std::size_t) { names.emplace(s); });
  d.class_names.assign(names.begin(), names.end());
  if (numbers)
    std::sort(
        d.class_names.begin(), d.class_names.end(),
        [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  d.num_classes = static_cast<std::int64_t>(d.class_names.size());
  std::map<std::string, std::int64_t> id;
  for (std::size_t k = 0; k < d.class_names.size(); ++k)
    id[d.class_names[k]] = static_cast<std::int64_t>(k);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) d.y[i] = id.at(keys[i]);
}

}  // namespace

LocalData read_csv_shard(const std::string& path, Communicator& comm, const CsvShardOptions& o) {
  CsvHeader header;
  Columns columns;
  std::string text;
  collectively(comm, [&] {
    std::ifstream in = open_binary(path);
    const std::uint64_t size = file_size(in);
    header = read_header(in, path, o.delimiter);
    columns = columns_of(header, o, path);
    text = read_line_range(in, header.end, size, comm.rank(), comm.size());
  });
  const std::size_t first_line = header.line + 1 +
                                 static_cast<std::size_t>(exclusive_prefix(
                                     comm, static_cast<std::int64_t>(count_lines(text))));

  const std::vector<std::string>& names = header.fields;
  LocalData d;
  d.features = columns.features.size();
  for (std::size_t c : columns.features) d.feature_names.push_back(names[c]);
  if (columns.label) d.label_name = names[*columns.label];
  RawLabels labels;
  collectively(comm, [&] {
    for_each_line(text, first_line, [&](std::string_view line, std::size_t line_no) {
      if (trim(line).empty()) return;
      const std::vector<std::string> f = split_fields(line, o.delimiter, path, line_no);
      if (f.size() != names.size())
        throw DataError(cat(path, ":", line_no, ": ", f.size(), " fields, expected ", names.size(),
                            " as in the header"));
      for (std::size_t c : columns.features) {
        const auto where = [&] {
          return cat(path, ":", line_no, ": column ", c + 1, " (", names[c], ")");
        };
        if (is_missing(f[c])) {
          if (!o.missing_allowed)
            throw DataError(cat(where(), ": missing value",
                                f[c].empty() ? "" : cat(" '", f[c], "'"),
                                ", expected a number; --impute mean|median fills missing values "
                                "with the training column's statistic"));
          d.x.push_back(std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        const std::optional<double> v = parse_number(f[c]);
        if (!v) throw DataError(cat(where(), ": '", f[c], "' is not a number"));
        if (!std::isfinite(*v))
          throw DataError(cat(where(), ": '", f[c], "' is not finite, expected a number"));
        d.x.push_back(*v);
      }
      ++d.rows;
      if (!columns.label) return;
      const std::size_t l = *columns.label;
      const std::string origin = cat(path, ":", line_no, ": column ", l + 1, " (", names[l], ")");
      if (f[l].empty()) throw DataError(cat(origin, ": missing label"));
      labels.values.push_back(f[l]);
      labels.origins.push_back(origin);
    });
  });
  d.global_rows = static_cast<std::size_t>(
      allreduce_i64(comm, static_cast<std::int64_t>(d.rows), comm::ReduceOp::sum));
  // Every rank read the same header: all have labels or none.
  if (columns.label) assign_labels(comm, labels, o.regression, d);
  return d;
}

LocalData read_libsvm_shard(const std::string& path, Communicator& comm,
                            const LibsvmShardOptions& o) {
  std::string text;
  collectively(comm, [&] {
    std::ifstream in = open_binary(path);
    text = read_line_range(in, 0, file_size(in), comm.rank(), comm.size());
  });
  const std::size_t first_line = 1 + static_cast<std::size_t>(exclusive_prefix(
                                         comm, static_cast<std::int64_t>(count_lines(text))));

  struct Entry {
    std::size_t row, index;  // index 1-based
    double value;
  };
  std::vector<Entry> entries;
  std::size_t max_index = 0;
  RawLabels labels;
  collectively(comm, [&] {
    for_each_line(text, first_line, [&](std::string_view line, std::size_t line_no) {
      line = trim(line.substr(0, line.find('#')));
      if (line.empty()) return;
      const std::string origin = cat(path, ":", line_no);
      bool first = true;
      while (!line.empty()) {
        const std::size_t cut = line.find_first_of(" \t");
        const std::string_view token = line.substr(0, cut);
        line = trim(line.substr(cut == std::string_view::npos ? line.size() : cut));
        if (first) {
          if (token.find(':') != std::string_view::npos)
            throw DataError(cat(origin, ": '", token, "' where a label was expected first"));
          labels.values.emplace_back(token);
          labels.origins.push_back(origin);
          first = false;
          continue;
        }
        const std::size_t colon = token.find(':');
        const auto index = colon == std::string_view::npos
                               ? std::nullopt
                               : parse_integer<std::size_t>(token.substr(0, colon));
        if (!index || *index == 0)
          throw DataError(cat(origin, ": '", token, "' is not index:value with a 1-based index"));
        if (o.features != 0 && *index > o.features)
          throw DataError(cat(origin, ": index ", *index, " is larger than the ", o.features,
                              " features expected"));
        const std::optional<double> v = parse_number(token.substr(colon + 1));
        if (!v || !std::isfinite(*v))
          throw DataError(cat(origin, ": '", token, "' does not hold a finite number"));
        entries.push_back({labels.values.size() - 1, *index, *v});
        max_index = std::max(max_index, *index);
      }
    });
  });
  LocalData d;
  d.rows = labels.values.size();
  d.features = o.features != 0
                   ? o.features
                   : static_cast<std::size_t>(allreduce_i64(
                         comm, static_cast<std::int64_t>(max_index), comm::ReduceOp::max));
  d.global_rows = static_cast<std::size_t>(
      allreduce_i64(comm, static_cast<std::int64_t>(d.rows), comm::ReduceOp::sum));
  d.x.assign(d.rows * d.features, 0.0);
  for (const Entry& e : entries) d.x[e.row * d.features + e.index - 1] = e.value;
  assign_labels(comm, labels, o.regression, d);
  return d;
}

namespace {

// The header of a raw IDX file: element type, dimensions and where the elements start.
struct IdxHeader {
  data::IdxType type = data::IdxType::kU8;
  std::vector<std::size_t> dims;
  std::uint64_t data_offset = 0;
  std::size_t width = 1;  // bytes per element
};

std::size_t idx_width(std::uint8_t code) {
  switch (code) {
    case 0x08:
    case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C:
    case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
  }
}

IdxHeader read_idx_header(std::ifstream& in, const std::string& path) {
  const std::uint64_t size = file_size(in);
  unsigned char magic[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(magic), 4);
  if (in.gcount() >= 2 && magic[0] == 0x1f && magic[1] == 0x8b)
    throw DataError(cat(path, ": gzip-compressed; sharded reading seeks to each rank's rows and ",
                        "needs a raw IDX file (decompress it first, e.g. gunzip -k)"));
  if (in.gcount() < 4 || magic[0] != 0 || magic[1] != 0 || idx_width(magic[2]) == 0 ||
      magic[3] == 0)
    throw DataError(cat(path, ": bad IDX magic number at offset 0, expected 00 00 ",
                        "<type 08/09/0b/0c/0d/0e> <rank >= 1>"));
  IdxHeader h;
  h.type = static_cast<data::IdxType>(magic[2]);
  h.width = idx_width(magic[2]);
  h.data_offset = 4 + 4 * std::uint64_t{magic[3]};
  std::uint64_t count = 1;
  for (int i = 0; i < magic[3]; ++i) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    if (in.gcount() != 4)
      throw DataError(cat(path, ": truncated at offset ", 4 + 4 * i, ": expected dimensions"));
    h.dims.push_back((std::size_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
    count *= h.dims.back();
  }
  if (size != h.data_offset + count * h.width)
    throw DataError(cat(path, ": holds ", size, " bytes, expected ",
                        h.data_offset + count * h.width, " for its header and ", count,
                        " elements of ", data::idx_type_name(h.type)));
  return h;
}

std::string read_at(std::ifstream& in, std::uint64_t offset, std::size_t n,
                    const std::string& path) {
  std::string bytes(n, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in.gcount()) != n)
    throw DataError(cat(path, ": read error at offset ", offset));
  return bytes;
}

}  // namespace

LocalData read_idx_shard(const std::string& images_path, const std::string& labels_path,
                         Communicator& comm) {
  LocalData d;
  std::int64_t max_id = -1;
  collectively(comm, [&] {
    std::ifstream images = open_binary(images_path), labels = open_binary(labels_path);
    const IdxHeader ih = read_idx_header(images, images_path);
    const IdxHeader lh = read_idx_header(labels, labels_path);
    if (ih.type != data::IdxType::kU8)
      throw DataError(cat(images_path, ": images have element type ", data::idx_type_name(ih.type),
                          ", expected u8"));
    if (lh.type == data::IdxType::kF32 || lh.type == data::IdxType::kF64 || lh.dims.size() != 1)
      throw DataError(cat(labels_path, ": labels are ", data::idx_type_name(lh.type), " of rank ",
                          lh.dims.size(), ", expected an integer type of rank 1"));
    const std::size_t n = ih.dims[0];
    if (lh.dims[0] != n)
      throw DataError(cat(labels_path, ": holds ", lh.dims[0], " labels but ", images_path,
                          " holds ", n, " images; expected equal counts"));
    d.global_rows = n;
    d.features = 1;
    for (std::size_t i = 1; i < ih.dims.size(); ++i) d.features *= ih.dims[i];
    const comm::BlockRange range = comm::block_range(n, comm.size(), comm.rank());
    d.rows = range.size();
    const std::string pixels = read_at(images, ih.data_offset + range.begin * d.features,
                                       d.rows * d.features, images_path);
    d.x.resize(pixels.size());
    for (std::size_t i = 0; i < pixels.size(); ++i)
      d.x[i] = static_cast<unsigned char>(pixels[i]) / 255.0;
    const std::string raw =
        read_at(labels, lh.data_offset + range.begin * lh.width, d.rows * lh.width, labels_path);
    d.y.resize(d.rows);
    for (std::size_t i = 0; i < d.rows; ++i) {
      std::uint64_t bits = 0;
      for (std::size_t b = 0; b < lh.width; ++b)
        bits = (bits << 8) | static_cast<unsigned char>(raw[i * lh.width + b]);
      const std::int64_t v = lh.type == data::IdxType::kU8    ? static_cast<std::int64_t>(bits)
                             : lh.type == data::IdxType::kI8  ? static_cast<std::int8_t>(bits)
                             : lh.type == data::IdxType::kI16 ? static_cast<std::int16_t>(bits)
                                                              : static_cast<std::int32_t>(bits);
      if (v < 0)
        throw DataError(cat(labels_path, ": label ", v, " of row ", range.begin + i,
                            " is negative, expected a class id >= 0"));
      d.y[i] = v;
      max_id = std::max(max_id, v);
    }
  });
  d.num_classes = allreduce_i64(comm, max_id, comm::ReduceOp::max) + 1;
  return d;
}

}  // namespace distml::ml
