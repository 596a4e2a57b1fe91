// A plain-text corpus for character-level language modelling: the file's bytes, a vocabulary
// of the distinct bytes in it, and the text encoded as class ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distml::data {

struct TextCorpus {
  std::string vocabulary;         // distinct bytes of the text, in ascending order
  std::vector<std::int64_t> ids;  // the text, each byte replaced by its vocabulary index

  /// Number of (input, target) windows of `length` characters: targets are the inputs
  /// shifted by one, and windows do not overlap.
  std::size_t num_windows(std::size_t length) const;
  /// Window `i`: inputs ids[i*length, (i+1)*length), targets one character further.
  void window(std::size_t i, std::size_t length, std::int64_t* inputs, std::int64_t* targets) const;
};

/// Reads the whole file. DataError naming the path when it cannot be read or holds fewer
/// than two characters (nothing to predict).
TextCorpus read_text_corpus(const std::string& path);

}  // namespace distml::data
