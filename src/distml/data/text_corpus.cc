#include "distml/data/text_corpus.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>

#include "distml/core/error.h"

namespace distml::data {

std::size_t TextCorpus::num_windows(std::size_t length) const {
  if (length == 0 || ids.size() < 2) return 0;
  return (ids.size() - 1) / length;
}

void TextCorpus::window(std::size_t i, std::size_t length, std::int64_t* inputs,
                        std::int64_t* targets) const {
  DML_CHECK_LT(i, num_windows(length), "window index out of range");
  std::copy_n(ids.begin() + i * length, length, inputs);
  std::copy_n(ids.begin() + i * length + 1, length, targets);
}

TextCorpus read_text_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(cat(path, ": cannot open the text corpus"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError(cat(path, ": read error"));
  if (text.size() < 2)
    throw DataError(
        cat(path, ": a text corpus needs at least 2 characters, the file has ", text.size()));
  std::array<bool, 256> present{};
  for (unsigned char c : text) present[c] = true;
  TextCorpus corpus;
  std::array<std::int64_t, 256> index{};
  for (int c = 0; c < 256; ++c)
    if (present[c]) {
      index[c] = static_cast<std::int64_t>(corpus.vocabulary.size());
      corpus.vocabulary.push_back(static_cast<char>(c));
    }
  corpus.ids.reserve(text.size());
  for (unsigned char c : text) corpus.ids.push_back(index[c]);
  return corpus;
}

}  // namespace distml::data
