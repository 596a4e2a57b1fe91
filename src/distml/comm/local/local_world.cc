#include "distml/comm/local/local_world.h"

#include <thread>
#include <vector>

#include "distml/comm/local/local_engine.h"

namespace distml::comm::local {

LocalWorld::LocalWorld(int size) : size_(size) {
  if (size < 1) throw UsageError(cat("a local world needs at least one rank, got ", size));
  group_ = std::make_shared<Group>(size);
}

LocalWorld::~LocalWorld() = default;

std::unique_ptr<Communicator> LocalWorld::connect(int rank, const CommOptions& options) {
  DML_CHECK(rank >= 0 && rank < size_, "rank ", rank, " outside local world of ", size_);
  return std::make_unique<Communicator>(std::make_unique<LocalEngine>(group_, rank), options);
}

void run_ranks(int size, const CommOptions& options, const std::function<void(Communicator&)>& fn) {
  LocalWorld world(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = world.connect(r, options);
        fn(*comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace distml::comm::local
