#include "distml/data/text_corpus.h"

#include <gtest/gtest.h>

#include "distml/core/error.h"
#include "temp_dir.h"

namespace distml::data {
namespace {

TEST(TextCorpus, VocabularyIsTheSortedDistinctBytesAndIdsRoundTrip) {
  testing::TempDir dir;
  auto corpus = read_text_corpus(dir.write("t.txt", "call me ishmael."));
  EXPECT_EQ(corpus.vocabulary, " .acehilms");
  ASSERT_EQ(corpus.ids.size(), 16u);
  std::string decoded;
  for (auto id : corpus.ids) decoded.push_back(corpus.vocabulary[id]);
  EXPECT_EQ(decoded, "call me ishmael.");
}

TEST(TextCorpus, WindowsTargetTheNextCharacter) {
  testing::TempDir dir;
  auto corpus = read_text_corpus(dir.write("t.txt", "abcdefghij"));  // 10 chars
  EXPECT_EQ(corpus.num_windows(3), 3u);                              // (10 - 1) / 3
  EXPECT_EQ(corpus.num_windows(9), 1u);
  EXPECT_EQ(corpus.num_windows(10), 0u);
  std::int64_t in[3], out[3];
  corpus.window(2, 3, in, out);
  EXPECT_EQ(corpus.vocabulary[in[0]], 'g');
  EXPECT_EQ(corpus.vocabulary[out[0]], 'h');
  EXPECT_EQ(corpus.vocabulary[out[2]], 'j');
  EXPECT_THROW(corpus.window(3, 3, in, out), InternalError);
}

TEST(TextCorpus, MissingOrTooShortFilesNameThePath) {
  testing::TempDir dir;
  try {
    read_text_corpus(dir.file("absent.txt"));
    ADD_FAILURE();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.txt: cannot open"), std::string::npos);
  }
  EXPECT_THROW(read_text_corpus(dir.write("one.txt", "x")), DataError);
}

}  // namespace
}  // namespace distml::data
