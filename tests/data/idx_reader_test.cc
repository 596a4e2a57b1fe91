#include "distml/data/idx_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "distml/core/error.h"
#include "temp_dir.h"

namespace distml::data {
namespace {

using testing::TempDir;

// Bytes of an IDX file: magic, big-endian dims, then `payload` as given.
std::string idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims,
                      const std::string& payload) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((d >> shift) & 0xff);
  return s + payload;
}

std::string bytes_of(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }

std::string write_raw(const TempDir& dir, const std::string& name, const std::string& bytes) {
  return dir.write(name, bytes);
}

std::string write_gzip(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.file(name);
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
  return path;
}

// Runs `f`, expects a DataError, and returns its message.
template <class F>
std::string data_error(F f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DataError";
  return "";
}

const std::vector<std::uint8_t> kPixels = {0, 255, 51, 102, 7, 8, 9, 10, 11, 12, 13, 14};

TEST(ReadIdx, ReadsRawAndGzipU8Identically) {
  TempDir dir;
  const std::string bytes = idx_bytes(0x08, {3, 2, 2}, bytes_of(kPixels));
  for (const std::string& path :
       {write_raw(dir, "a.idx", bytes), write_gzip(dir, "a.idx.gz", bytes)}) {
    const IdxArray a = read_idx(path);
    EXPECT_EQ(a.type, IdxType::kU8) << path;
    EXPECT_EQ(a.dims, (std::vector<std::size_t>{3, 2, 2})) << path;
    EXPECT_EQ(a.u8, kPixels) << path;
    EXPECT_EQ(a.size(), 12u);
  }
}

TEST(ReadIdx, DecodesBigEndianI32AndF32) {
  TempDir dir;
  const std::string i32 = idx_bytes(0x0C, {2}, std::string("\xff\xff\xff\xfe\x00\x01\x00\x00", 8));
  const IdxArray a = read_idx(write_gzip(dir, "i.gz", i32));
  EXPECT_EQ(a.values, (std::vector<double>{-2.0, 65536.0}));
  // 1.5f is 0x3fc00000.
  const IdxArray f =
      read_idx(write_raw(dir, "f", idx_bytes(0x0D, {1}, std::string("\x3f\xc0\0\0", 4))));
  EXPECT_EQ(f.values, (std::vector<double>{1.5}));
}

TEST(ReadIdx, RejectsBadMagicNamingFileAndOffset) {
  TempDir dir;
  std::string bytes = idx_bytes(0x08, {2}, "ab");
  bytes[2] = 0x07;
  const std::string path = write_raw(dir, "bad_magic", bytes);
  const std::string msg = data_error([&] { read_idx(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 0"), std::string::npos) << msg;
}

TEST(ReadIdx, RejectsTruncatedDataRawAndGzip) {
  TempDir dir;
  const std::string bytes = idx_bytes(0x08, {3, 4}, bytes_of(kPixels)).substr(0, 8 + 10);
  for (const std::string& path :
       {write_raw(dir, "short", bytes), write_gzip(dir, "short.gz", bytes)}) {
    const std::string msg = data_error([&] { read_idx(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated at offset 18"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected 12 bytes"), std::string::npos) << msg;
  }
  // A gzip stream cut in the middle, not a short file compressed whole.
  std::string big(4096, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 251);
  std::ifstream in(write_gzip(dir, "full.gz", idx_bytes(0x08, {4096}, big)), std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = write_raw(dir, "cut.gz", gz.substr(0, gz.size() / 2));
  const std::string msg = data_error([&] { read_idx(cut); });
  EXPECT_NE(msg.find(cut), std::string::npos) << msg;
  EXPECT_NE(msg.find("(decompressed)"), std::string::npos) << msg;
}

TEST(ReadIdx, RejectsTruncatedHeaderAndTrailingBytes) {
  TempDir dir;
  const std::string header_cut = write_raw(dir, "hdr", idx_bytes(0x08, {3, 4}, "").substr(0, 6));
  EXPECT_NE(data_error([&] { read_idx(header_cut); }).find("dimensions"), std::string::npos);
  const std::string tiny = write_raw(dir, "tiny", std::string("\0\0", 2));
  EXPECT_NE(data_error([&] { read_idx(tiny); }).find("magic"), std::string::npos);
  const std::string trailing = write_raw(dir, "trail", idx_bytes(0x08, {2}, "abc"));
  EXPECT_NE(data_error([&] { read_idx(trailing); }).find("offset 10"), std::string::npos);
}

TEST(ReadIdx, RejectsMissingFile) {
  TempDir dir;
  const std::string path = dir.file("absent");
  EXPECT_NE(data_error([&] { read_idx(path); }).find(path), std::string::npos);
}

TEST(LoadIdxPair, ScalesPixelsToUnitRangeAndReadsLabels) {
  TempDir dir;
  const std::string images =
      write_gzip(dir, "img.gz", idx_bytes(0x08, {3, 2, 2}, bytes_of(kPixels)));
  const std::string labels =
      write_raw(dir, "lab", idx_bytes(0x08, {3}, std::string("\x07\x00\x09", 3)));
  const Dataset ds = load_idx_pair(images, labels);
  EXPECT_EQ(ds.num_samples, 3u);
  EXPECT_EQ(ds.feature_dim, 4u);
  EXPECT_EQ(ds.sample_shape, (std::vector<std::size_t>{2, 2}));
  EXPECT_EQ(ds.labels, (std::vector<std::int64_t>{7, 0, 9}));
  ASSERT_EQ(ds.features.size(), 12u);
  for (std::size_t i = 0; i < kPixels.size(); ++i)
    EXPECT_FLOAT_EQ(ds.features[i], kPixels[i] / 255.0f);
  EXPECT_FLOAT_EQ(ds.row(0)[1], 1.0f);
  EXPECT_FLOAT_EQ(ds.row(1)[0], 7 / 255.0f);
}

TEST(LoadIdxPair, RejectsLabelCountMismatchNamingBothFiles) {
  TempDir dir;
  const std::string images = write_raw(dir, "img", idx_bytes(0x08, {3, 2, 2}, bytes_of(kPixels)));
  const std::string labels = write_raw(dir, "lab", idx_bytes(0x08, {2}, "\x01\x02"));
  const std::string msg = data_error([&] { load_idx_pair(images, labels); });
  EXPECT_NE(msg.find(labels), std::string::npos) << msg;
  EXPECT_NE(msg.find(images), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 labels"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 images"), std::string::npos) << msg;
}

TEST(LoadIdxPair, RejectsNonU8ImagesAndFloatLabels) {
  TempDir dir;
  const std::string f32_images = write_raw(dir, "fimg", idx_bytes(0x0D, {1}, std::string(4, '\0')));
  const std::string labels = write_raw(dir, "lab", idx_bytes(0x08, {1}, "\x01"));
  EXPECT_NE(data_error([&] { load_idx_pair(f32_images, labels); }).find("expected u8"),
            std::string::npos);
  const std::string images = write_raw(dir, "img", idx_bytes(0x08, {1, 1}, "\x01"));
  const std::string f32_labels = write_raw(dir, "flab", idx_bytes(0x0D, {1}, std::string(4, '\0')));
  EXPECT_NE(data_error([&] { load_idx_pair(images, f32_labels); }).find(f32_labels),
            std::string::npos);
}

}  // namespace
}  // namespace distml::data
