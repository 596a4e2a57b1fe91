// read_csv_shard: a CSV file with a header row, each rank parsing its own byte range.
#include <algorithm>
#include <limits>
#include <optional>

#include "distml/data/csv_fields.h"
#include "distml/ml/shard_text.h"
#include "distml/ml/sharded_reader.h"

namespace distml::ml {
namespace {

using comm::Communicator;
using data::csv::parse_number;
using data::csv::split_fields;
using data::csv::trim;

// The first non-blank line of a CSV file: its fields, 1-based number and the byte after it.
struct CsvHeader {
  std::vector<std::string> fields;
  std::size_t line = 0;
  std::uint64_t end = 0;
};

CsvHeader read_header(std::ifstream& in, const std::string& path, char delimiter) {
  shard::ForwardReader reader(in, 0);
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

}  // namespace

LocalData read_csv_shard(const std::string& path, Communicator& comm, const CsvShardOptions& o) {
  CsvHeader header;
  Columns columns;
  shard::collectively(comm, [&] {
    std::ifstream in = shard::open_binary(path);
    header = read_header(in, path, o.delimiter);
    columns = columns_of(header, o, path);
  });
  const shard::LineRange lines = shard::read_line_range(path, header.end, header.line, comm);

  const std::vector<std::string>& names = header.fields;
  LocalData d;
  d.features = columns.features.size();
  for (std::size_t c : columns.features) d.feature_names.push_back(names[c]);
  if (columns.label) d.label_name = names[*columns.label];
  shard::RawLabels labels;
  shard::collectively(comm, [&] {
    shard::for_each_line(
        lines.text, lines.first_line, [&](std::string_view line, std::size_t line_no) {
          if (trim(line).empty()) return;
          const std::vector<std::string> f = split_fields(line, o.delimiter, path, line_no);
          if (f.size() != names.size())
            throw DataError(cat(path, ":", line_no, ": ", f.size(), " fields, expected ",
                                names.size(), " as in the header"));
          for (std::size_t c : columns.features) {
            const auto where = [&] {
              return cat(path, ":", line_no, ": column ", c + 1, " (", names[c], ")");
            };
            if (is_missing(f[c])) {
              if (!o.missing_allowed)
                throw DataError(
                    cat(where(), ": missing value", f[c].empty() ? "" : cat(" '", f[c], "'"),
                        ", expected a number; --impute mean|median fills missing values with the "
                        "training column's statistic (gbdt takes them as they are)"));
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
          const std::string origin =
              cat(path, ":", line_no, ": column ", l + 1, " (", names[l], ")");
          if (f[l].empty()) throw DataError(cat(origin, ": missing label"));
          labels.values.push_back(f[l]);
          labels.origins.push_back(origin);
        });
  });
  shard::count_global_rows(comm, d);
  // Every rank read the same header: all have labels or none.
  if (columns.label) shard::assign_labels(comm, labels, o.regression, d);
  return d;
}

}  // namespace distml::ml
