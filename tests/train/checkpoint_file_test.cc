#include "distml/train/checkpoint_file.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>

#include "../data/temp_dir.h"
#include "distml/core/error.h"

namespace distml::train {
namespace {

using data::testing::TempDir;

// The header of checkpoint_file.h: magic, payload size, CRC-32, the writer's run id.
constexpr std::size_t kHeaderBytes = 8 + 8 + 4 + 16;

// The message of the CheckpointError that `f` throws, after checking it contains every part.
std::string checkpoint_error_of(const std::function<void()>& f,
                                std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << message << "' lacks " << part;
    }
    return message;
  }
  ADD_FAILURE() << "no CheckpointError";
  return "";
}

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<std::string> temporary_files_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) found.push_back(name);
  }
  return found;
}

std::string binary_payload(std::size_t size) {
  std::string payload(size, '\0');
  for (std::size_t i = 0; i < size; ++i) payload[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return payload;
}

TEST(CheckedFile, RoundTripsBinaryPayload) {
  TempDir dir;
  const std::string payload("step\0\xff\x01 state", 13);
  write_checked_file(dir.file("a.ckpt"), payload);
  EXPECT_EQ(read_checked_file(dir.file("a.ckpt")), payload);
  EXPECT_EQ(read_raw(dir.file("a.ckpt")).substr(0, 8), "DMLCKPT2");
}

TEST(CheckedFile, HoldsItsWritersRunIdInTheHeader) {
  TempDir dir;
  write_checked_file(dir.file("a.ckpt"), "payload", "run-7");
  write_checked_file(dir.file("b.ckpt"), "payload");
  EXPECT_EQ(checked_file_run_id(dir.file("a.ckpt")), "run-7");
  EXPECT_EQ(checked_file_run_id(dir.file("b.ckpt")), "");
  EXPECT_EQ(checked_file_run_id(dir.file("missing.ckpt")), std::nullopt);
  EXPECT_EQ(checked_file_run_id(dir.write("foreign.bin", "PK\x03\x04 zip")), std::nullopt);
  // The checksum covers the run id: a damaged id is a damaged file, not another run's.
  std::string bytes = read_raw(dir.file("a.ckpt"));
  bytes[kHeaderBytes - 2] ^= 0x01;
  write_raw(dir.file("a.ckpt"), bytes);
  checkpoint_error_of([&] { read_checked_file(dir.file("a.ckpt")); }, {"checksum"});
  checkpoint_error_of([&] { write_checked_file(dir.file("c.ckpt"), "x", "seventeen-chars-x"); },
                      {"longer than 16 bytes"});
}

// A file of the first version (DMLCKPT1: magic, size, CRC-32 of the payload; no run id), as
// earlier releases wrote it, built here byte by byte.
TEST(CheckedFile, ReadsTheFirstVersionWithoutARunId) {
  TempDir dir;
  const std::string payload = "old weights";
  std::string bytes = "DMLCKPT1";
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xff));
  const auto crc = static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(payload.data()), payload.size()));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  const std::string path = dir.write("v1.ckpt", bytes + payload);
  EXPECT_EQ(read_checked_file(path), payload);
  EXPECT_EQ(checked_file_run_id(path), "");
}

TEST(CheckedFile, RoundTripsEmptyPayload) {
  TempDir dir;
  write_checked_file(dir.file("empty.ckpt"), "");
  EXPECT_EQ(read_checked_file(dir.file("empty.ckpt")), "");
  EXPECT_EQ(std::filesystem::file_size(dir.file("empty.ckpt")), kHeaderBytes);
}

TEST(CheckedFile, RoundTripsTenMegabytePayload) {
  TempDir dir;
  const std::string payload = binary_payload(10 << 20);
  write_checked_file(dir.file("big.ckpt"), payload);
  EXPECT_TRUE(read_checked_file(dir.file("big.ckpt")) == payload);
}

TEST(CheckedFile, CreatesMissingParentDirectories) {
  TempDir dir;
  const std::string path = dir.file("run/step_10/model.ckpt");
  write_checked_file(path, "weights");
  EXPECT_EQ(read_checked_file(path), "weights");
}

TEST(CheckedFile, OverwriteKeepsOnlyNewContentAndNoTemporaryFiles) {
  TempDir dir;
  const std::string path = dir.file("a.ckpt");
  write_checked_file(path, binary_payload(5000));
  write_checked_file(path, "short");
  EXPECT_EQ(read_checked_file(path), "short");
  EXPECT_EQ(std::filesystem::file_size(path), kHeaderBytes + 5u);
  EXPECT_TRUE(temporary_files_in(dir.file("")).empty());
}

TEST(CheckedFile, FailedRenameRemovesTemporaryFileAndKeepsTarget) {
  TempDir dir;
  const std::string path = dir.file("taken");  // a directory: rename(file, dir) must fail
  std::filesystem::create_directories(path + "/inside");
  checkpoint_error_of([&] { write_checked_file(path, "payload"); }, {"cannot rename", path});
  EXPECT_TRUE(std::filesystem::is_directory(path + "/inside"));
  EXPECT_TRUE(temporary_files_in(dir.file("")).empty());
}

TEST(CheckedFile, UncreatableParentDirectoryNamesThePath) {
  TempDir dir;
  const std::string file = dir.write("plain", "x");
  checkpoint_error_of([&] { write_checked_file(file + "/sub/a.ckpt", "payload"); },
                      {"cannot create directory", file + "/sub/a.ckpt"});
}

TEST(CheckedFile, TruncatedPayloadReportsExpectedAndFoundBytes) {
  TempDir dir;
  const std::string path = dir.file("a.ckpt");
  write_checked_file(path, binary_payload(100));
  std::filesystem::resize_file(path, kHeaderBytes + 97);
  checkpoint_error_of([&] { read_checked_file(path); },
                      {path, "truncated", "expected 100 payload bytes, found 97"});
}

TEST(CheckedFile, TruncatedHeaderIsTruncatedNotForeign) {
  TempDir dir;
  const std::string path = dir.file("a.ckpt");
  write_checked_file(path, "payload");
  for (std::uintmax_t size : {30, 12, 5, 0}) {  // shrinking only: growing pads with zeros
    std::filesystem::resize_file(path, size);
    checkpoint_error_of([&] { read_checked_file(path); }, {path, "truncated"});
  }
}

TEST(CheckedFile, FlippedPayloadByteFailsChecksum) {
  TempDir dir;
  const std::string path = dir.file("a.ckpt");
  write_checked_file(path, binary_payload(1000));
  std::string bytes = read_raw(path);
  bytes[kHeaderBytes + 500] ^= 0x10;
  write_raw(path, bytes);
  const std::string message =
      checkpoint_error_of([&] { read_checked_file(path); }, {path, "checksum", "stored crc 0x"});
  EXPECT_NE(message.find("computed 0x"), std::string::npos) << message;
}

TEST(CheckedFile, WrongMagicIsNotADistmlCheckpoint) {
  TempDir dir;
  const std::string path = dir.write("foreign.bin", std::string("PK\x03\x04 some zip file", 19));
  checkpoint_error_of([&] { read_checked_file(path); }, {path, "not a distml checkpoint"});
}

TEST(CheckedFile, MissingFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("nowhere.ckpt");
  checkpoint_error_of([&] { read_checked_file(path); }, {path, "No such file or directory"});
}

TEST(TensorExport, RoundTripsFloatInt64AndNonContiguousView) {
  TempDir dir;
  const torch::Tensor weight = torch::randn({3, 4});
  const torch::Tensor transposed = torch::arange(12, torch::kFloat32).reshape({3, 4}).t();
  ASSERT_FALSE(transposed.is_contiguous());
  const torch::Tensor steps = torch::tensor({7, -3}, torch::kInt64);
  const torch::Tensor trained = torch::ones({2}, torch::requires_grad());
  export_tensors(dir.file("w.pt"),
                 {{"fc.weight", weight}, {"t", transposed}, {"steps", steps}, {"grad", trained}});

  const NamedTensors back = import_tensors(dir.file("w.pt"));
  ASSERT_EQ(back.size(), 4u);
  const std::vector<std::pair<std::string, torch::Tensor>> want = {
      {"fc.weight", weight}, {"t", transposed}, {"steps", steps}, {"grad", trained}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(back[i].first, want[i].first);
    EXPECT_EQ(back[i].second.dtype(), want[i].second.dtype()) << want[i].first;
    EXPECT_EQ(back[i].second.sizes(), want[i].second.sizes()) << want[i].first;
    EXPECT_TRUE(torch::equal(back[i].second, want[i].second.detach())) << want[i].first;
    EXPECT_FALSE(back[i].second.requires_grad()) << want[i].first;
  }
  EXPECT_TRUE(back[1].second.is_contiguous());
  EXPECT_TRUE(temporary_files_in(dir.file("")).empty());
}

TEST(TensorExport, SavesAViewWithoutTheStorageUnderIt) {
  TempDir dir;
  const torch::Tensor big = torch::zeros({1 << 20});  // 4 MiB
  export_tensors(dir.file("w.pt"), {{"row", big.slice(0, 0, 4)}});
  EXPECT_LT(std::filesystem::file_size(dir.file("w.pt")), 64u << 10);
  EXPECT_EQ(import_tensors(dir.file("w.pt"))[0].second.numel(), 4);
}

TEST(TensorExport, RepeatedNameIsRejected) {
  TempDir dir;
  checkpoint_error_of(
      [&] {
        export_tensors(dir.file("w.pt"), {{"a", torch::ones({1})}, {"a", torch::zeros({1})}});
      },
      {"'a'", "repeats"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("w.pt")));
}

TEST(TensorExport, ImportOfAFileThatIsNotTensorsNamesThePath) {
  TempDir dir;
  const std::string path = dir.file("a.ckpt");
  write_checked_file(path, "not a torch file");
  checkpoint_error_of([&] { import_tensors(path); }, {"cannot import", path});
  checkpoint_error_of([&] { import_tensors(dir.file("missing.pt")); },
                      {dir.file("missing.pt"), "No such file"});
}

}  // namespace
}  // namespace distml::train
