// Fuzzes the text corpus reader (data/text_corpus.cc) and the windows cut from it.
#include "distml/data/text_corpus.h"

#include <cstdint>
#include <vector>

#include "distml/core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  try {
    const distml::data::TextCorpus corpus = distml::data::read_text_corpus(file.write(data, size));
    for (std::size_t length : {std::size_t{1}, std::size_t{7}}) {
      std::vector<std::int64_t> inputs(length), targets(length);
      const std::size_t windows = corpus.num_windows(length);
      for (std::size_t i = 0; i < windows; ++i)
        corpus.window(i, length, inputs.data(), targets.data());
    }
  } catch (const distml::DataError&) {
  }
  return 0;
}
