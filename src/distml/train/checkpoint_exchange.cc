#include "distml/train/checkpoint_exchange.h"

#include <algorithm>
#include <cstdio>

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

void on_rank0_for_all(const std::function<void()>& work, const std::string& what,
                      comm::Communicator& comm) {
  std::int32_t failed = 0;
  std::exception_ptr error;
  if (comm.rank() == 0) {
    try {
      work();
    } catch (const std::exception&) {
      failed = 1;
      error = std::current_exception();
    }
  }
  comm.broadcast(comm::Buffer{&failed, 1, comm::DType::i32}, 0);
  if (!failed) return;
  if (comm.rank() == 0) std::rethrow_exception(error);
  throw CheckpointError(cat("rank 0 could not ", what));
}

void write_on_rank0(const std::string& path, const std::function<std::string()>& encode,
                    const std::string& run_id, comm::Communicator& comm) {
  on_rank0_for_all([&] { write_checked_file(path, encode(), run_id); },
                   cat("write the checkpoint ", path), comm);
}

CheckpointRead read_newest_on_rank0(const std::string& dir, comm::Communicator& comm,
                                    const std::string& written_by) {
  CheckpointRead read;
  std::string why;
  std::int64_t sizes[2] = {-1, 0};  // payload, path
  if (comm.rank() == 0) {
    try {
      read = read_newest_checkpoint(
          dir,
          [](const std::string& path, const std::string& error) {
            std::fprintf(stderr,
                         "distml: warning: skipping checkpoint %s (%s); trying the one before\n",
                         path.c_str(), error.c_str());
          },
          written_by);
      sizes[0] = static_cast<std::int64_t>(read.payload.size());
      sizes[1] = static_cast<std::int64_t>(read.path.size());
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  comm.broadcast(comm::Buffer{sizes, 2, comm::DType::i64}, 0);
  if (sizes[0] < 0) {
    if (comm.rank() == 0) throw CheckpointError(why);
    throw CheckpointError(cat("rank 0 could not read a checkpoint in ", dir));
  }
  read.payload.resize(sizes[0]);
  read.path.resize(sizes[1]);
  comm.broadcast(comm::Buffer{read.path.data(), read.path.size(), comm::DType::u8}, 0);
  comm.broadcast(comm::Buffer{read.payload.data(), read.payload.size(), comm::DType::u8}, 0);
  return read;
}

}  // namespace distml::train
