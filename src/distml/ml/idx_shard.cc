// read_idx_shard: each rank seeks to its own rows of a raw IDX images/labels pair.
#include "distml/comm/block_range.h"
#include "distml/data/idx_reader.h"
#include "distml/ml/shard_text.h"
#include "distml/ml/sharded_reader.h"

namespace distml::ml {
namespace {

using data::IdxHeader;
using data::IdxType;

// The header of a raw file whose size must match it (seeking needs the exact layout).
IdxHeader raw_idx_header(std::ifstream& in, const std::string& path) {
  const std::uint64_t size = shard::file_size(in);
  const IdxHeader h = data::read_idx_header(
      [&](void* dst, std::size_t n) {
        in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
        return static_cast<std::size_t>(in.gcount());
      },
      path);
  if (size != h.data_offset + h.count * h.element_bytes)
    throw DataError(cat(path, ": holds ", size, " bytes, expected ",
                        h.data_offset + h.count * h.element_bytes, " for its header and ", h.count,
                        " elements of ", data::idx_type_name(h.type)));
  return h;
}

std::string read_at(std::ifstream& in, std::uint64_t offset, std::size_t n,
                    const std::string& path) {
  std::string bytes(n, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in.gcount()) != n)
    throw DataError(cat(path, ": read error at offset ", offset));
  return bytes;
}

}  // namespace

LocalData read_idx_shard(const std::string& images_path, const std::string& labels_path,
                         comm::Communicator& comm) {
  LocalData d;
  std::int64_t max_id = -1;
  shard::collectively(comm, [&] {
    std::ifstream images = shard::open_binary(images_path),
                  labels = shard::open_binary(labels_path);
    const IdxHeader ih = raw_idx_header(images, images_path);
    const IdxHeader lh = raw_idx_header(labels, labels_path);
    if (ih.type != IdxType::kU8)
      throw DataError(cat(images_path, ": images have element type ", data::idx_type_name(ih.type),
                          ", expected u8"));
    if (lh.type == IdxType::kF32 || lh.type == IdxType::kF64 || lh.dims.size() != 1)
      throw DataError(cat(labels_path, ": labels are ", data::idx_type_name(lh.type), " of rank ",
                          lh.dims.size(), ", expected an integer type of rank 1"));
    const std::size_t n = ih.dims[0];
    if (lh.dims[0] != n)
      throw DataError(cat(labels_path, ": holds ", lh.dims[0], " labels but ", images_path,
                          " holds ", n, " images; expected equal counts"));
    d.global_rows = n;
    d.features = 1;
    for (std::size_t i = 1; i < ih.dims.size(); ++i) d.features *= ih.dims[i];
    const comm::BlockRange range = comm::block_range(n, comm.size(), comm.rank());
    d.rows = range.size();
    const std::string pixels = read_at(images, ih.data_offset + range.begin * d.features,
                                       d.rows * d.features, images_path);
    d.x.resize(pixels.size());
    for (std::size_t i = 0; i < pixels.size(); ++i)
      d.x[i] = static_cast<unsigned char>(pixels[i]) / 255.0;
    const std::string raw = read_at(labels, lh.data_offset + range.begin * lh.element_bytes,
                                    d.rows * lh.element_bytes, labels_path);
    d.y.resize(d.rows);
    for (std::size_t i = 0; i < d.rows; ++i) {
      std::uint64_t bits = 0;
      for (std::size_t b = 0; b < lh.element_bytes; ++b)
        bits = (bits << 8) | static_cast<unsigned char>(raw[i * lh.element_bytes + b]);
      const std::int64_t v = lh.type == IdxType::kU8    ? static_cast<std::int64_t>(bits)
                             : lh.type == IdxType::kI8  ? static_cast<std::int8_t>(bits)
                             : lh.type == IdxType::kI16 ? static_cast<std::int16_t>(bits)
                                                        : static_cast<std::int32_t>(bits);
      if (v < 0)
        throw DataError(cat(labels_path, ": label ", v, " of row ", range.begin + i,
                            " is negative, expected a class id >= 0"));
      d.y[i] = v;
      max_id = std::max(max_id, v);
    }
  });
  d.num_classes = allreduce_i64(comm, max_id, comm::ReduceOp::max) + 1;
  return d;
}

}  // namespace distml::ml
