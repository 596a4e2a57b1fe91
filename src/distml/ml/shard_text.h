// What the sharded readers share (internal to them, and to the Python estimators, which take
// labels as they do): agreeing on errors, a rank's byte range of a text file, its lines, and the
// class dictionary agreed over all ranks. The scheme is described in sharded_reader.h.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/error.h"
#include "distml/ml/agreement.h"
#include "distml/ml/local_data.h"

namespace distml::ml::shard {

/// Runs a local step that may throw DataError, then agrees on errors with the other ranks.
template <class Step>
void collectively(comm::Communicator& comm, Step&& step) {
  std::string error;
  try {
    step();
  } catch (const DataError& e) {
    error = e.what();
  }
  throw_if_any_rank_failed(comm, error);
}

/// Calls fn(line, line_no) for every line of `text`, the first being number `first_line`.
template <class Fn>
void for_each_line(std::string_view text, std::size_t first_line, Fn&& fn) {
  std::size_t line_no = first_line;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    fn(text.substr(0, nl), line_no++);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
}

std::ifstream open_binary(const std::string& path);
std::uint64_t file_size(std::ifstream& in);

/// Reads a file forward from `offset` in chunks, so that a rank reads only what it needs.
class ForwardReader {
 public:
  ForwardReader(std::ifstream& in, std::uint64_t offset);
  std::string& bytes() { return buf_; }
  /// Makes at least n bytes available unless the file ends first.
  void fill(std::size_t n);
  /// The index of the first '\n' at or after `from`, reading on as needed; npos at the end.
  std::size_t find_newline(std::size_t from);

 private:
  static constexpr std::size_t kChunk = 64 << 10;
  bool more(std::size_t n);
  std::ifstream& in_;
  std::string buf_;
};

/// This rank's whole lines of the data bytes [data_begin, file size) (sharded_reader.h, step
/// 2), and the 1-based file line number of the first (collective: step 3).
struct LineRange {
  std::string text;
  std::size_t first_line = 0;
};
LineRange read_line_range(const std::string& path, std::uint64_t data_begin,
                          std::size_t lines_before, comm::Communicator& comm);

/// Raw labels of this rank's rows, with where each came from for messages.
struct RawLabels {
  std::vector<std::string> values;
  std::vector<std::string> origins;  // "file:line: column c (name)" or "file:line"
};

/// Collective: fills d.y, d.num_classes and d.class_names (or d.targets for regression).
void assign_labels(comm::Communicator& comm, const RawLabels& raw, bool regression, LocalData& d);

/// Collective: d.global_rows from every rank's d.rows.
void count_global_rows(comm::Communicator& comm, LocalData& d);

}  // namespace distml::ml::shard
