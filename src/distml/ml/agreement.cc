#include "distml/ml/agreement.h"

#include "distml/core/error.h"

namespace distml::ml {

std::int64_t allreduce_i64(comm::Communicator& comm, std::int64_t v, comm::ReduceOp op) {
  comm.allreduce(comm::Buffer{&v, 1, comm::DType::i64}, {.op = op});
  return v;
}

std::vector<std::int64_t> allgather_i64(comm::Communicator& comm, std::int64_t v) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(comm::ConstBuffer{&v, 1, comm::DType::i64}, comm::view(all));
  return all;
}

std::int64_t exclusive_prefix(comm::Communicator& comm, std::int64_t v) {
  const std::vector<std::int64_t> all = allgather_i64(comm, v);
  std::int64_t before = 0;
  for (int r = 0; r < comm.rank(); ++r) before += all[static_cast<std::size_t>(r)];
  return before;
}

void throw_if_any_rank_failed(comm::Communicator& comm, const std::string& local_error) {
  const std::int64_t failing =
      allreduce_i64(comm, local_error.empty() ? comm.size() : comm.rank(), comm::ReduceOp::min);
  if (failing == comm.size()) return;
  const int root = static_cast<int>(failing);
  std::int64_t length = static_cast<std::int64_t>(local_error.size());
  comm.broadcast(comm::Buffer{&length, 1, comm::DType::i64}, root);
  std::string message = comm.rank() == root ? local_error : std::string(length, '\0');
  comm.broadcast(comm::Buffer{message.data(), message.size(), comm::DType::u8}, root);
  if (comm.size() > 1) message += cat(" (found by rank ", root, " of ", comm.size(), ")");
  throw DataError(message);
}

}  // namespace distml::ml
