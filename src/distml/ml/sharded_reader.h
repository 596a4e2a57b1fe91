// Row-sharded readers for the classical estimators: each rank reads only its own byte range
// (CSV, libsvm) or row range (IDX) of a file, and the ranks agree collectively on what a
// whole-file reader would know (feature count, class dictionary, line numbers, global rows).
//
// Every function here is collective over `comm`: all ranks call it with the same arguments.
// When any rank finds bad input, every rank throws a DataError with the same text: the
// message of the lowest failing rank (followed by "(found by rank R of P)" when P > 1).
//
// Byte ranges of CSV and libsvm files, step by step:
//  1. Every rank reads the header line (CSV: the first non-blank line; libsvm: none), which
//     ends at byte H.
//  2. The data bytes [H, file size) are cut by size into P nominal ranges
//     (comm::block_range). Boundary k (0 < k < P) is the byte after the first newline at or
//     after nominal start k; boundary 0 is H and boundary P the file size. Rank r parses the
//     whole lines of [boundary r, boundary r+1), reading from its nominal start to a little
//     past its nominal end, so every line belongs to exactly one rank and none reads it all.
//  3. The ranks all-gather how many lines each range holds, so that each knows the global
//     line number of its first line; only then are parse errors raised (step 4).
//  4. Row errors are agreed: every rank throws the message of the first bad line in the file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

/// How read_csv_shard reads a CSV file with a header row. Default: the label is the last
/// column, class ids from integer or string labels, missing values refused, delimiter ','.
struct CsvShardOptions {
  std::string label_name;  // when set, wins over label_index
  int label_index = -1;    // 0-based; negative counts from the end (-1 = last column)
  bool no_label = false;   // every column is a feature; LocalData::y stays empty
  /// When set (a model's): the features are these columns, by name and in this order, and
  /// the label is the column `label_name` if the file has one (else the rows are unlabelled);
  /// any other column is a DataError.
  std::vector<std::string> features;
  bool regression = false;       // labels are real numbers, read into LocalData::targets
  bool missing_allowed = false;  // a missing feature (empty, NA, NaN, ?) becomes NaN; else it
                                 // is a DataError naming --impute
  char delimiter = ',';
};

/// Reads this rank's rows of a CSV file (see the byte-range scheme above). Features are every
/// column but the label, as float64. Labels, as scikit-learn takes them: the classes are the
/// distinct values over all ranks, sorted by number when every label is one (and then they
/// must be integers: a fractional one is a DataError pointing at regression), else by name,
/// so ids do not depend on the world size; class id i is class_names[i] (a number's integer
/// text: "+1" and "1.0" are class "1"). Real numbers when `o.regression`. Fields may be
/// double-quoted ("" inside is a quote) but not span lines; blank lines are skipped; CRLF endings
/// are accepted. DataError naming the file, the 1-based line and the column (number and header
/// name) for a missing or non-numeric feature, with the line for a wrong field count, and listing
/// the header for an unknown label column.
LocalData read_csv_shard(const std::string& path, comm::Communicator& comm,
                         const CsvShardOptions& o = {});

/// How read_libsvm_shard reads a libsvm file.
struct LibsvmShardOptions {
  bool regression = false;   // labels are real numbers, read into LocalData::targets
  std::size_t features = 0;  // 0: from the largest index over all ranks; else fixed (e.g. to
                             // read a test file like its training file); a larger index is an
                             // error
  int index_base = -1;       // the first feature's index: 0, 1, or -1 to guess as XGBoost does
                             // (0 when any index in the file is 0, else 1)
};

/// Reads this rank's rows of a LibSVM (SVMlight) file into sparse rows (LocalData::sparse):
/// lines "label [qid:q] idx:val idx:val ...", '#' starting a comment; absent entries are 0,
/// and a qid is skipped. The base the indices start from is in LocalData::libsvm_index_base.
/// Labels as for read_csv_shard. DataError naming the file and line for a bad token, an index
/// out of range or given twice.
LocalData read_libsvm_shard(const std::string& path, comm::Communicator& comm,
                            const LibsvmShardOptions& o = {});

/// Reads rows comm::block_range(N, size, rank) of an uncompressed IDX images file (u8,
/// N x ...) and labels file (integer type, N) by seeking, with features scaled to [0, 1].
/// gzip-compressed files are a DataError (decompress them first: seeking needs raw bytes);
/// so are a wrong type, rank or size, unequal counts and negative labels.
LocalData read_idx_shard(const std::string& images_path, const std::string& labels_path,
                         comm::Communicator& comm);

}  // namespace distml::ml
