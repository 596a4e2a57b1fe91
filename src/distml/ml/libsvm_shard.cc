// read_libsvm_shard: a LibSVM / SVMlight file into sparse rows, each rank parsing its own byte
// range.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "distml/data/csv_fields.h"
#include "distml/ml/shard_text.h"
#include "distml/ml/sharded_reader.h"

namespace distml::ml {
namespace {

using data::csv::parse_integer;
using data::csv::parse_number;
using data::csv::trim;

// A row's stored entry as written: the index is the file's (0- or 1-based).
struct FileEntry {
  std::uint64_t index;
  double value;
};

// Splits off the first blank-separated token of `line`.
std::string_view next_token(std::string_view& line) {
  const std::size_t cut = line.find_first_of(" \t");
  const std::string_view token = line.substr(0, cut);
  line = trim(line.substr(cut == std::string_view::npos ? line.size() : cut));
  return token;
}

}  // namespace

LocalData read_libsvm_shard(const std::string& path, comm::Communicator& comm,
                            const LibsvmShardOptions& o) {
  DML_CHECK(o.index_base >= -1 && o.index_base <= 1, "index_base -1, 0 or 1");
  const shard::LineRange lines = shard::read_line_range(path, 0, 0, comm);

  // Pass 1: tokens, with the indices as written.
  std::vector<std::vector<FileEntry>> rows;
  std::vector<std::string> origins;  // "file:line" of each row
  shard::RawLabels labels;
  std::uint64_t min_index = std::numeric_limits<std::uint64_t>::max(), max_index = 0;
  shard::collectively(comm, [&] {
    shard::for_each_line(
        lines.text, lines.first_line, [&](std::string_view line, std::size_t line_no) {
          line = trim(line.substr(0, line.find('#')));
          if (line.empty()) return;
          const std::string origin = cat(path, ":", line_no);
          const std::string_view label = next_token(line);
          if (label.find(':') != std::string_view::npos)
            throw DataError(cat(origin, ": '", label, "' where a label was expected first"));
          labels.values.emplace_back(label);
          labels.origins.push_back(origin);
          if (line.starts_with("qid:")) next_token(line);  // a ranking group: not a feature
          std::vector<FileEntry>& row = rows.emplace_back();
          while (!line.empty()) {
            const std::string_view token = next_token(line);
            const std::size_t colon = token.find(':');
            const auto index = colon == std::string_view::npos
                                   ? std::nullopt
                                   : parse_integer<std::uint64_t>(token.substr(0, colon));
            if (!index || *index >= std::numeric_limits<std::uint32_t>::max())
              throw DataError(
                  cat(origin, ": '", token, "' is not index:value with an index below 2^32"));
            const std::optional<double> v = parse_number(token.substr(colon + 1));
            if (!v || !std::isfinite(*v))
              throw DataError(cat(origin, ": '", token, "' does not hold a finite number"));
            row.push_back({*index, *v});
            min_index = std::min(min_index, *index);
            max_index = std::max(max_index, *index);
          }
          origins.push_back(origin);
        });
  });

  // The base, as XGBoost's reader guesses it: 0 when any index of the file is 0.
  std::vector<std::int64_t> extremes = {
      -static_cast<std::int64_t>(std::min<std::uint64_t>(min_index, 1)),
      static_cast<std::int64_t>(max_index)};
  comm.allreduce(comm::view(extremes), {comm::ReduceOp::max});
  LocalData d;
  d.libsvm_index_base = o.index_base >= 0 ? o.index_base : (extremes[0] == 0 ? 0 : 1);
  const auto base = static_cast<std::uint64_t>(d.libsvm_index_base);
  d.features = o.features != 0
                   ? o.features
                   : static_cast<std::size_t>(extremes[1]) + 1 - static_cast<std::size_t>(base);

  // Pass 2: 0-based columns in increasing order, each at most once.
  SparseRows& s = d.sparse.emplace();
  shard::collectively(comm, [&] {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::vector<FileEntry>& row = rows[r];
      std::sort(row.begin(), row.end(),
                [](const FileEntry& a, const FileEntry& b) { return a.index < b.index; });
      for (std::size_t p = 0; p < row.size(); ++p) {
        if (row[p].index < base)
          throw DataError(cat(origins[r], ": feature index ", row[p].index,
                              " in a file whose indices start at 1"));
        if (row[p].index - base >= d.features)
          throw DataError(cat(origins[r], ": feature index ", row[p].index, " is beyond the ",
                              d.features, " features expected"));
        if (p > 0 && row[p].index == row[p - 1].index)
          throw DataError(cat(origins[r], ": feature index ", row[p].index, " appears twice"));
        s.columns.push_back(static_cast<std::uint32_t>(row[p].index - base));
        s.values.push_back(row[p].value);
      }
      s.row_start.push_back(s.values.size());
      std::vector<FileEntry>().swap(row);  // the parsed row is in `s` now
    }
  });
  d.rows = rows.size();
  shard::count_global_rows(comm, d);
  shard::assign_labels(comm, labels, o.regression, d);
  return d;
}

}  // namespace distml::ml
