#include "distml/rl/learner_state.h"

#include <sstream>

#include "distml/core/error.h"

namespace distml::rl {

std::string save_learner_state(torch::nn::Module& net, torch::optim::Optimizer& optimizer,
                               const LearnerCounters& counters) {
  torch::serialize::OutputArchive archive, net_archive, optimizer_archive;
  net.save(net_archive);
  optimizer.save(optimizer_archive);
  archive.write("net", net_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("update", torch::tensor(counters.update));
  archive.write("env_steps", torch::tensor(counters.env_steps));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

LearnerCounters load_learner_state(const std::string& payload, const std::string& source,
                                   torch::nn::Module& net, torch::optim::Optimizer& optimizer) {
  try {
    std::istringstream in(payload);
    torch::serialize::InputArchive archive, net_archive, optimizer_archive;
    archive.load_from(in);
    archive.read("net", net_archive);
    archive.read("optimizer", optimizer_archive);
    net.load(net_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor update, env_steps;
    archive.read("update", update);
    archive.read("env_steps", env_steps);
    return {update.item<std::int64_t>(), env_steps.item<std::int64_t>()};
  } catch (const c10::Error& e) {
    throw CheckpointError(cat(source, ": not a checkpoint of this algorithm and network (",
                              e.what_without_backtrace(), ")"));
  }
}

}  // namespace distml::rl
