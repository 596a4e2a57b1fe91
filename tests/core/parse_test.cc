#include "distml/core/parse.h"

#include <gtest/gtest.h>

#include "distml/core/error.h"

namespace distml {
namespace {

TEST(ParseBytes, ReadsSuffixesAsPowersOf1024) {
  EXPECT_EQ(parse_bytes("4", "size"), 4u);
  EXPECT_EQ(parse_bytes("1K", "size"), 1024u);
  EXPECT_EQ(parse_bytes("64k", "size"), 65536u);
  EXPECT_EQ(parse_bytes("16M", "size"), 16u << 20);
  EXPECT_EQ(parse_bytes("1GiB", "size"), 1u << 30);
  EXPECT_EQ(format_bytes(65536), "64K");
  EXPECT_EQ(format_bytes(1000), "1000");
}

TEST(ParseBytes, RejectsNonNumbersNamingTheValue) {
  for (const char* bad : {"", "abc", "1X", "-4", "K", "1KK"}) {
    try {
      parse_bytes(bad, "--sizes");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--sizes"), std::string::npos);
    }
  }
}

TEST(SplitList, DropsEmptyPieces) {
  EXPECT_EQ(split_list("a,,b,"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace distml
