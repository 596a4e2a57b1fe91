#include "distml/rl/learner_state.h"

#include <sstream>

#include "distml/core/error.h"

namespace distml::rl {

std::string save_learner_state(const LearnerParts& parts, const LearnerCounters& counters) {
  torch::serialize::OutputArchive archive, net_archive, optimizer_archive;
  parts.net.save(net_archive);
  parts.optimizer.save(optimizer_archive);
  archive.write("net", net_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("update", torch::tensor(counters.update));
  archive.write("env_steps", torch::tensor(counters.env_steps));
  if (parts.normalizer) {
    std::vector<double> stats = parts.normalizer->shared_state();
    archive.write("normalizer", torch::tensor(stats, torch::kFloat64));
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

LearnerCounters load_learner_state(const std::string& payload, const std::string& source,
                                   const LearnerParts& parts) {
  try {
    std::istringstream in(payload);
    torch::serialize::InputArchive archive, net_archive, optimizer_archive;
    archive.load_from(in);
    archive.read("net", net_archive);
    archive.read("optimizer", optimizer_archive);
    parts.net.load(net_archive);
    parts.optimizer.load(optimizer_archive);
    torch::Tensor update, env_steps;
    archive.read("update", update);
    archive.read("env_steps", env_steps);
    if (parts.normalizer) {
      torch::Tensor stats;
      archive.read("normalizer", stats);
      stats = stats.contiguous();
      parts.normalizer->set_shared(
          {stats.data_ptr<double>(), static_cast<std::size_t>(stats.numel())});
    }
    return {update.item<std::int64_t>(), env_steps.item<std::int64_t>()};
  } catch (const c10::Error& e) {
    throw CheckpointError(cat(source, ": not a checkpoint of this algorithm and network (",
                              e.what_without_backtrace(), ")"));
  } catch (const Error& e) {
    throw CheckpointError(cat(source, ": ", e.what()));
  } catch (const std::exception& e) {  // LibTorch's archive reader throws others too
    throw CheckpointError(cat(source, ": unreadable checkpoint contents: ", e.what()));
  }
}

}  // namespace distml::rl
