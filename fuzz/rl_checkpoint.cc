// Fuzzes the RL checkpoint loader as `distml rl --resume` runs it (rl/algos/common.cc): the
// checked-file layer (train/checkpoint_file.cc: read_checked_file) on the input as a file, then
// the learner state (rl/learner_state.cc: load_learner_state) on what passed the checksum, into
// a tiny network (a 2 x 2 linear layer) with an Adam optimizer and a normaliser of observations
// and rewards. A state that loads must let the network take a step.
//
// As fuzz/checkpoint.cc: DISTML_FUZZ_RAW_PAYLOAD=1 also loads the input as a payload that
// passed (LibTorch's archive reader beneath crashes on mutated archives, a LibTorch bug: for
// exploring, not for make test), and DISTML_FUZZ_WRITE_SEED=DIR writes seed inputs
// (fuzz/corpus/rl_checkpoint/ holds them).
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>

#include "distml/core/error.h"
#include "distml/rl/learner_state.h"
#include "distml/rl/normalizer.h"
#include "distml/train/checkpoint_file.h"
#include "fuzz_file.h"

namespace {

namespace rl = distml::rl;

struct Target {
  torch::nn::Linear net{2, 2};
  torch::optim::Adam optimizer{net->parameters()};
  rl::Normalizer normalizer{{.observations = true, .rewards = true}, 2, 1, 0.99};
  rl::LearnerParts parts() { return {*net, optimizer, &normalizer}; }
  void step() {
    optimizer.zero_grad();
    net->forward(torch::ones({1, 2})).sum().backward();
    optimizer.step();
  }
};

Target& target() {
  static Target* t = [] {
    torch::manual_seed(1);
    return new Target;  // kept for the process: LibTorch's modules outlive the fuzz loop
  }();
  return *t;
}

void write_seeds(const std::string& dir) {
  Target& t = target();
  t.step();  // Adam now has state to save
  float observation[2] = {0.5F, -1.5F};
  t.normalizer.observe(observation);
  t.normalizer.merge_pending(t.normalizer.take_pending());
  const std::string payload = rl::save_learner_state(t.parts(), {.update = 7, .env_steps = 896});
  std::ofstream(dir + "/payload.bin", std::ios::binary) << payload;
  distml::train::write_checked_file(dir + "/checked_file.bin", payload);
}

void load(const std::string& payload) {
  Target& t = target();
  try {
    rl::load_learner_state(payload, "fuzz", t.parts());
  } catch (const distml::CheckpointError&) {
    return;
  }
  t.step();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("DISTML_FUZZ_WRITE_SEED")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  static const bool raw_payload = std::getenv("DISTML_FUZZ_RAW_PAYLOAD") != nullptr;
  try {
    load(distml::train::read_checked_file(file.write(data, size)));
  } catch (const distml::CheckpointError&) {
  }
  if (raw_payload) load(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
