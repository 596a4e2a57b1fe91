// Reader for CSV files with a header row: every column but the label is a numeric feature.
// String labels become class ids in order of first appearance, which is only consistent
// within one process; a label dictionary shared by all ranks is later work.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "distml/data/dataset.h"

namespace distml::data {

/// How the label column is read.
enum class LabelKind {
  kAuto,     // integers if every label parses as one, else strings
  kInteger,  // a label that is not an integer is a DataError
  kString,   // every label is a class name, even "3"
};

/// Options of read_csv, with chained setters: `CsvOptions().label_name("species")`.
/// Default: the label is the last column, kind kAuto, delimiter ','.
struct CsvOptions {
  std::string label_name_;  // when set, wins over label_index_
  int label_index_ = -1;    // 0-based; negative counts from the end (-1 = last column)
  LabelKind label_kind_ = LabelKind::kAuto;
  char delimiter_ = ',';

  CsvOptions& label_name(std::string name) {
    label_name_ = std::move(name);
    return *this;
  }
  CsvOptions& label_index(int index) {
    label_index_ = index;
    label_name_.clear();
    return *this;
  }
  CsvOptions& label_kind(LabelKind kind) {
    label_kind_ = kind;
    return *this;
  }
  CsvOptions& delimiter(char d) {
    delimiter_ = d;
    return *this;
  }
};

/// Reads a CSV file into a Dataset. Fields may be double-quoted ("" is a quote inside one);
/// a field cannot span lines. Blank lines are skipped. Throws DataError naming the file,
/// line and column (1-based, with the header name) for a missing, non-numeric or non-finite
/// feature, a wrong number of fields, or an unknown label column.
Dataset read_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace distml::data
