#include "distml/ml/shard_text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "distml/comm/block_range.h"
#include "distml/data/csv_fields.h"

namespace distml::ml::shard {
namespace {

using comm::Communicator;
using data::csv::parse_number;

std::size_t count_lines(std::string_view text) {
  const auto n = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  return n + (!text.empty() && text.back() != '\n' ? 1 : 0);
}

// The whole lines of this rank's range of [data_begin, size) (sharded_reader.h, step 2).
std::string read_lines(std::ifstream& in, std::uint64_t data_begin, std::uint64_t size, int rank,
                       int ranks) {
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

}  // namespace

ForwardReader::ForwardReader(std::ifstream& in, std::uint64_t offset) : in_(in) {
  in_.clear();  // an earlier read may have hit the end of the file
  in_.seekg(static_cast<std::streamoff>(offset));
}

void ForwardReader::fill(std::size_t n) {
  while (buf_.size() < n && more(n - buf_.size())) {
  }
}

std::size_t ForwardReader::find_newline(std::size_t from) {
  fill(from);
  for (;;) {
    const std::size_t nl = buf_.find('\n', from);
    if (nl != std::string::npos) return nl;
    from = std::max(from, buf_.size());
    if (!more(kChunk)) return std::string::npos;
  }
}

bool ForwardReader::more(std::size_t n) {
  const std::size_t old = buf_.size();
  buf_.resize(old + n);
  in_.read(buf_.data() + old, static_cast<std::streamsize>(n));
  buf_.resize(old + static_cast<std::size_t>(in_.gcount()));
  return buf_.size() > old;
}

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

LineRange read_line_range(const std::string& path, std::uint64_t data_begin,
                          std::size_t lines_before, Communicator& comm) {
  LineRange range;
  collectively(comm, [&] {
    std::ifstream in = open_binary(path);
    range.text = read_lines(in, data_begin, file_size(in), comm.rank(), comm.size());
  });
  range.first_line = lines_before + 1 +
                     static_cast<std::size_t>(exclusive_prefix(
                         comm, static_cast<std::int64_t>(count_lines(range.text))));
  return range;
}

void count_global_rows(Communicator& comm, LocalData& d) {
  d.global_rows = static_cast<std::size_t>(
      allreduce_i64(comm, static_cast<std::int64_t>(d.rows), comm::ReduceOp::sum));
}

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

}  // namespace distml::ml::shard
