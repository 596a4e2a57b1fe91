// Reader for NumPy .npz files (np.savez and np.savez_compressed): a zip archive, read with
// libzip, holding one .npy file per array. Each .npy is a magic string, a header (a Python
// dict literal with 'descr', 'fortran_order' and 'shape') and the elements in row-major order.
// Rows are read by range, so that each rank reads only its own: a stored (uncompressed) array
// is entered at the first row; a compressed one is inflated from its start, and the rows
// before the range are discarded as they stream past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distml/data/dataset.h"

namespace distml::data {

/// What a .npy header says about one array.
struct NpyArrayInfo {
  std::string name;                // the array's name in the archive, without ".npy"
  std::string dtype;               // NumPy's descr: "<f4", "<f8", "|u1", "<i8", ...
  std::vector<std::size_t> shape;  // shape[0] is the row count; () for a scalar
  std::size_t data_offset = 0;     // where the elements start in the .npy, after the header
  std::size_t rows() const { return shape.empty() ? 1 : shape[0]; }
  std::size_t row_elements() const;  // elements per row: the product of shape[1:]
};

/// An open .npz archive. Not thread-safe; open one per thread.
class NpzFile {
 public:
  /// DataError naming the file when it is missing or not a zip archive.
  explicit NpzFile(const std::string& path);
  ~NpzFile();
  NpzFile(const NpzFile&) = delete;
  NpzFile& operator=(const NpzFile&) = delete;

  /// The header of `array`; DataError naming the file and array when it is absent, its
  /// header is malformed, or its data is big-endian or in Fortran order.
  NpyArrayInfo info(const std::string& array) const;
  /// Rows [begin, end) of the array `info()` described, converted to float / int64.
  /// DataError naming the file and array for a dtype the conversion does not take, or a
  /// truncated array.
  std::vector<float> read_floats(const NpyArrayInfo& array, std::size_t begin,
                                 std::size_t end) const;
  std::vector<std::int64_t> read_ints(const NpyArrayInfo& array, std::size_t begin,
                                      std::size_t end) const;
  const std::string& path() const { return path_; }

 private:
  std::string raw_rows(const NpyArrayInfo& info, std::size_t begin, std::size_t end) const;
  struct Archive;
  std::string path_;
  std::unique_ptr<Archive> archive_;
};

/// What a training file of arrays `x` and `y` holds, checked without reading its rows:
/// x float32 / float64 / uint8 of any shape [N, ...]; y int64 / int32 class ids [N] or float32 /
/// float64 targets [N] or [N, k]. DataError naming the file and array otherwise, or when x and
/// y have different lengths.
struct NpzLayout {
  NpyArrayInfo x, y;
  bool float_targets() const;
};
NpzLayout npz_layout(const NpzFile& file);

/// Rows [begin, end) of `path`'s x and y as a Dataset: features as float32 (uint8 values kept
/// as 0..255: scale them yourself), class ids in `labels` or float targets in `targets`.
Dataset read_npz_rows(const std::string& path, std::size_t begin, std::size_t end);

}  // namespace distml::data
