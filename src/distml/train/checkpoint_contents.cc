#include "distml/train/checkpoint_contents.h"

#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "distml/core/error.h"

namespace distml::train {
namespace {

// Keys a resumed run may change: they steer the run, not the trajectory.
bool steers_the_run_only(const std::string& key) {
  static const std::set<std::string> keys = {
      "train.epochs",           "train.max_steps",        "train.log_every",
      "train.eval_every",       "train.checkpoint_every", "train.checkpoint_dir",
      "train.keep_checkpoints", "train.export",           "train.export_module",
      "train.timeout_s",        "train.stall_warn_s",     "train.threads"};
  return keys.contains(key);
}

// "key = value" lines of a canonical text, by key.
std::map<std::string, std::string> by_key(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out[line.substr(0, line.find(' '))] = line;
  return out;
}

// The first key that shapes the trajectory and differs between two configs, as a message.
std::string trajectory_difference(const std::string& saved, const std::string& now) {
  const auto a = by_key(saved), b = by_key(now);
  std::set<std::string> keys;
  for (const auto& [k, _] : a) keys.insert(k);
  for (const auto& [k, _] : b) keys.insert(k);
  for (const auto& key : keys) {
    const auto x = a.contains(key) ? a.at(key) : "(no " + key + ")";
    const auto y = b.contains(key) ? b.at(key) : "(no " + key + ")";
    if (x != y && !steers_the_run_only(key))
      return cat("checkpoint has '", x, "', this run '", y, "'");
  }
  return "";
}

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<std::int64_t>(s.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}
std::string tensor_bytes(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return {static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.numel())};
}

// The model's tensors in order, parameters then buffers, and their names one per line.
std::vector<torch::Tensor> model_tensors(const nn::Model& model, std::string& names) {
  std::vector<torch::Tensor> out;
  for (const auto& p : model.named_parameters()) {
    names += p.key() + "\n";
    out.push_back(p.value());
  }
  for (const auto& b : model.named_buffers()) {
    names += b.key() + "\n";
    out.push_back(b.value());
  }
  return out;
}

// A new tensor each time: InputArchive::read into a defined tensor re-points that tensor at the
// stored data but keeps its dtype, which reinterprets the bytes.
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t);
  return t;
}

std::int64_t read_int(torch::serialize::InputArchive& archive, const char* key) {
  return read_tensor(archive, key).item<std::int64_t>();
}

}  // namespace

std::string optimizer_state(torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& state) {
  torch::serialize::InputArchive archive;
  archive.load_from(state.data(), state.size());
  optimizer.load(archive);
}

std::string encode_checkpoint(const nn::Model& model, torch::optim::Optimizer& optimizer,
                              const TrainingPosition& position, const std::vector<RankState>& ranks,
                              const TrainConfig& config) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  std::string names;
  const auto tensors = model_tensors(model, names);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    model_archive.write(cat("t", i), tensors[i].detach());
  model_archive.write("names", bytes_tensor(names));
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("global_step", torch::tensor(position.global_step, torch::kInt64));
  archive.write("sampler_epoch",
                torch::tensor(static_cast<std::int64_t>(position.sampler.epoch), torch::kInt64));
  archive.write("sampler_step",
                torch::tensor(static_cast<std::int64_t>(position.sampler.step), torch::kInt64));
  archive.write("sampler_offset",
                torch::tensor(static_cast<std::int64_t>(position.sampler.offset), torch::kInt64));
  archive.write("world_size", torch::tensor(static_cast<std::int64_t>(ranks.size())));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    archive.write(cat("rng_", r), bytes_tensor(ranks[r].rng));
    archive.write(cat("strategy_", r), bytes_tensor(ranks[r].strategy));
    if (!ranks[r].optimizer.empty())
      archive.write(cat("optimizer_", r), bytes_tensor(ranks[r].optimizer));
  }
  archive.write("config", bytes_tensor(canonical_text(config)));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

Resumed decode_checkpoint(const std::string& payload, const std::string& path, nn::Model& model,
                          torch::optim::Optimizer& optimizer, int rank, int world_size,
                          const TrainConfig& config, WorldChange change) {
  torch::serialize::InputArchive archive, model_archive, optimizer_archive;
  try {
    archive.load_from(payload.data(), payload.size());
    const auto difference =
        trajectory_difference(tensor_bytes(read_tensor(archive, "config")), canonical_text(config));
    if (!difference.empty()) throw CheckpointError(cat(path, ": cannot resume: ", difference));
    const auto saved_world = read_int(archive, "world_size");
    if (saved_world != world_size && change != WorldChange::elastic)
      throw CheckpointError(cat(path, ": written by a run of ", saved_world,
                                " ranks; resume it with the same number, not ", world_size));
    archive.read("model", model_archive);
    std::string names;
    const auto tensors = model_tensors(model, names);
    if (tensor_bytes(read_tensor(model_archive, "names")) != names)
      throw CheckpointError(cat(path, ": written for a model with other parameter names"));
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto t = read_tensor(model_archive, cat("t", i));
      if (!t.sizes().equals(tensors[i].sizes()))
        throw CheckpointError(cat(path, ": written for a model with other tensor shapes"));
      tensors[i].copy_(t);
    }
    Resumed resumed;
    if (torch::Tensor own; archive.try_read(cat("optimizer_", rank), own)) {
      load_optimizer_state(optimizer, tensor_bytes(own));
    } else {
      archive.read("optimizer", optimizer_archive);
      optimizer.load(optimizer_archive);
    }
    resumed.position.global_step = read_int(archive, "global_step");
    resumed.position.sampler.epoch = read_int(archive, "sampler_epoch");
    resumed.position.sampler.step = read_int(archive, "sampler_step");
    if (torch::Tensor offset; archive.try_read("sampler_offset", offset))
      resumed.position.sampler.offset = static_cast<std::size_t>(offset.item<std::int64_t>());
    resumed.saved_world_size = static_cast<int>(saved_world);
    if (rank < saved_world) {  // a rank new to the run (the world grew) saved nothing
      resumed.own.rng = tensor_bytes(read_tensor(archive, cat("rng_", rank)));
      resumed.own.strategy = tensor_bytes(read_tensor(archive, cat("strategy_", rank)));
    }
    if (saved_world != world_size)
      for (std::int64_t r = 0; r < saved_world; ++r)
        resumed.strategies.push_back(tensor_bytes(read_tensor(archive, cat("strategy_", r))));
    return resumed;
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(cat(path, ": unreadable checkpoint contents: ", e.what()));
  }
}

}  // namespace distml::train
