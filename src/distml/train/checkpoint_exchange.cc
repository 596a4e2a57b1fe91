#include "distml/train/checkpoint_exchange.h"

#include <algorithm>

#include "distml/core/error.h"
#include "distml/train/checkpoint_file.h"

namespace distml::train {
namespace {

// Collective: every rank's `bytes`, in rank order (sizes first, then one padded all-gather).
std::vector<std::string> allgather_strings(const std::string& bytes, comm::Communicator& comm) {
  std::vector<std::int64_t> sizes(comm.size());
  const std::int64_t size = static_cast<std::int64_t>(bytes.size());
  comm.allgather(comm::ConstBuffer{&size, 1, comm::DType::i64},
                 comm::Buffer{sizes.data(), sizes.size(), comm::DType::i64});
  const std::int64_t widest = *std::max_element(sizes.begin(), sizes.end());
  std::string padded = bytes, joined(widest * comm.size(), '\0');
  padded.resize(widest);
  comm.allgather(comm::ConstBuffer{padded.data(), padded.size(), comm::DType::u8},
                 comm::Buffer{joined.data(), joined.size(), comm::DType::u8});
  std::vector<std::string> all;
  for (int r = 0; r < comm.size(); ++r) all.push_back(joined.substr(r * widest, sizes[r]));
  return all;
}

}  // namespace

std::vector<RankState> gather_rank_states(const RankState& mine, comm::Communicator& comm) {
  const auto rngs = allgather_strings(mine.rng, comm);
  const auto strategies = allgather_strings(mine.strategy, comm);
  const auto optimizers = allgather_strings(mine.optimizer, comm);
  std::vector<RankState> all;
  for (int r = 0; r < comm.size(); ++r) all.push_back({rngs[r], strategies[r], optimizers[r]});
  return all;
}

void write_on_rank0(const std::string& path, const std::function<std::string()>& encode,
                    comm::Communicator& comm) {
  std::int32_t failed = 0;
  std::string why;
  if (comm.rank() == 0) {
    try {
      write_checked_file(path, encode());
    } catch (const std::exception& e) {
      failed = 1;
      why = e.what();
    }
  }
  comm.broadcast(comm::Buffer{&failed, 1, comm::DType::i32}, 0);
  if (!failed) return;
  if (comm.rank() == 0) throw CheckpointError(why);
  throw CheckpointError(cat("rank 0 could not write the checkpoint ", path));
}

std::string read_on_rank0(const std::string& path, comm::Communicator& comm) {
  std::string payload, why;
  std::int64_t size = -1;
  if (comm.rank() == 0) {
    try {
      payload = read_checked_file(path);
      size = static_cast<std::int64_t>(payload.size());
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  comm.broadcast(comm::Buffer{&size, 1, comm::DType::i64}, 0);
  if (size < 0) {
    if (comm.rank() == 0) throw CheckpointError(why);
    throw CheckpointError(cat("rank 0 could not read the checkpoint ", path));
  }
  payload.resize(size);
  comm.broadcast(comm::Buffer{payload.data(), payload.size(), comm::DType::u8}, 0);
  return payload;
}

}  // namespace distml::train
