// Fuzzes the LibSVM reader of `distml fit` (ml/libsvm_shard.cc, over ml/shard_text.cc) on one
// rank of the in-process engine, with each choice of index base and a fixed feature count.
#include <cstdint>
#include <memory>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/ml/sharded_reader.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static distml::fuzz::FuzzFile file;
  static distml::comm::local::LocalWorld world(1);
  static std::unique_ptr<distml::comm::Communicator> comm = world.connect(0);
  const std::uint8_t choice = data[0];
  distml::ml::LibsvmShardOptions options;
  options.index_base = static_cast<int>(choice % 3) - 1;  // -1 (guess), 0 or 1
  options.regression = (choice & 4) != 0;
  options.features = (choice & 8) ? 4 : 0;
  try {
    distml::ml::read_libsvm_shard(file.write(data + 1, size - 1), *comm, options);
  } catch (const distml::DataError&) {
  }
  return 0;
}
