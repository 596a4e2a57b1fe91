#include "distml/data/csv_reader.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "distml/core/error.h"
#include "distml/data/csv_fields.h"

namespace distml::data {
namespace {

using csv::parse_integer;
using csv::parse_number;
using csv::split_fields;
using csv::trim;

std::size_t find_label_column(const std::vector<std::string>& header, const CsvOptions& o,
                              const std::string& path) {
  if (!o.label_name_.empty()) {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == o.label_name_) return i;
    std::string names;
    for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
    throw DataError(
        cat(path, ":1: no label column named '", o.label_name_, "'; expected one of: ", names));
  }
  const long n = static_cast<long>(header.size());
  const long i = o.label_index_ < 0 ? n + o.label_index_ : o.label_index_;
  if (i < 0 || i >= n)
    throw DataError(cat(path, ":1: label column index ", o.label_index_, " is outside the ", n,
                        " columns of the header"));
  return static_cast<std::size_t>(i);
}

}  // namespace

Dataset read_csv(const std::string& path, const CsvOptions& options) {
  std::ifstream in(path);
  if (!in) throw DataError(cat(path, ": cannot open"));
  std::string line;
  std::size_t line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (!trim(line).empty()) header = split_fields(line, options.delimiter_, path, line_no);
  }
  if (header.empty()) throw DataError(cat(path, ": empty file, expected a header row"));
  if (header.size() < 2)
    throw DataError(cat(path, ":", line_no, ": header has ", header.size(),
                        " column, expected at least one feature and a label"));
  const std::size_t label_col = find_label_column(header, options, path);

  Dataset ds;
  ds.feature_dim = header.size() - 1;
  ds.sample_shape = {ds.feature_dim};
  std::vector<std::string> raw_labels;
  std::vector<std::size_t> label_lines;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::vector<std::string> f = split_fields(line, options.delimiter_, path, line_no);
    if (f.size() != header.size())
      throw DataError(cat(path, ":", line_no, ": ", f.size(), " fields, expected ", header.size(),
                          " as in the header"));
    for (std::size_t c = 0; c < f.size(); ++c) {
      if (c == label_col) continue;
      const std::string where = cat(path, ":", line_no, ": column ", c + 1, " (", header[c], ")");
      if (f[c].empty()) throw DataError(cat(where, ": missing value, expected a number"));
      const std::optional<double> v = parse_number(f[c]);
      if (!v) throw DataError(cat(where, ": '", f[c], "' is not a number"));
      if (!std::isfinite(*v))
        throw DataError(cat(where, ": '", f[c], "' is not finite, expected a number"));
      ds.features.push_back(static_cast<float>(*v));
    }
    if (f[label_col].empty())
      throw DataError(cat(path, ":", line_no, ": column ", label_col + 1, " (", header[label_col],
                          "): missing label"));
    raw_labels.push_back(f[label_col]);
    label_lines.push_back(line_no);
  }
  ds.num_samples = raw_labels.size();

  bool integers = options.label_kind_ != LabelKind::kString;
  if (options.label_kind_ == LabelKind::kAuto)
    for (const std::string& s : raw_labels) integers = integers && parse_integer(s).has_value();
  ds.labels.reserve(ds.num_samples);
  if (integers) {
    for (std::size_t i = 0; i < raw_labels.size(); ++i) {
      const std::optional<std::int64_t> v = parse_integer(raw_labels[i]);
      if (!v)
        throw DataError(cat(path, ":", label_lines[i], ": column ", label_col + 1, " (",
                            header[label_col], "): label '", raw_labels[i], "' is not an integer"));
      ds.labels.push_back(*v);
    }
  } else {
    std::map<std::string, std::int64_t> ids;
    for (const std::string& s : raw_labels) {
      const auto [it, added] = ids.emplace(s, static_cast<std::int64_t>(ds.class_names.size()));
      if (added) ds.class_names.push_back(s);
      ds.labels.push_back(it->second);
    }
  }
  return ds;
}

}  // namespace distml::data
