#include "distml/train/strategies/easgd_async_strategy.h"

#include <algorithm>

#include "distml/core/error.h"
#include "distml/train/strategies/easgd_centre_flat.h"
#include "distml/train/strategies/idle_watch.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

using easgd::kControlTag, easgd::kExchangeTag, easgd::kResumeTag, easgd::kStop, easgd::kSync;

// What the centre rank keeps about one worker.
struct Peer {
  int rank;
  torch::Tensor incoming, answer;
  comm::Work exchange_work, control_work, answer_work;
  double control = 0;
  bool syncing = false, stopped = false;
};

// 3. and the centre's half of 4. and 5., on the last rank of `world`, over `params` (the
// centre variable, updated in place at the end). Returns the payload bytes sent.
std::size_t serve_centre(comm::Communicator& world, const std::vector<torch::Tensor>& params,
                         double alpha) {
  torch::Tensor centre = flat_copy(params);
  const int centre_rank = world.size() - 1;
  std::size_t bytes_sent = 0;
  std::vector<Peer> peers(centre_rank);
  auto post_control = [&](Peer& w) {
    w.control_work =
        world.irecv(comm::Buffer{&w.control, 1, comm::DType::f64}, w.rank, kControlTag);
  };
  for (int r = 0; r < centre_rank; ++r) {
    Peer& w = peers[r];
    w.rank = r;
    w.incoming = torch::empty_like(centre);
    w.answer = torch::empty_like(centre);
    w.exchange_work = world.irecv(buffer_of(w.incoming), r, kExchangeTag);
    post_control(w);
  }
  auto answer = [&](Peer& w, const torch::Tensor& values) {
    w.answer_work.wait();  // the previous answer still owns the buffer
    w.answer.copy_(values);
    w.answer_work = world.isend(buffer_of(w.answer), w.rank, kExchangeTag);
    bytes_sent += w.answer.numel() * w.answer.element_size();
  };
  IdleWatch watch(world.options().timeout);
  auto running = [&] {
    return std::any_of(peers.begin(), peers.end(), [](const Peer& w) { return !w.stopped; });
  };
  while (running()) {
    bool progress = false;
    for (Peer& w : peers) {
      if (w.stopped) continue;
      if (w.exchange_work.test()) {
        w.exchange_work.wait();
        const torch::Tensor d = alpha * (w.incoming - centre);
        centre += d;
        answer(w, d);
        w.exchange_work = world.irecv(buffer_of(w.incoming), w.rank, kExchangeTag);
        progress = true;
      }
      if (w.control_work.test()) {
        w.control_work.wait();
        if (w.control == kStop) {
          w.stopped = true;
        } else if (w.control == kSync) {
          w.syncing = true;
          post_control(w);
        } else {
          throw CommError(cat("EASGD centre rank ", world.rank(), ": worker ", w.rank,
                              " sent an unknown control word ", w.control));
        }
        progress = true;
      }
    }
    if (std::all_of(peers.begin(), peers.end(),
                    [](const Peer& w) { return w.stopped || w.syncing; }))
      for (Peer& w : peers)
        if (w.syncing) {
          answer(w, centre);
          w.syncing = false;
        }
    if (watch.expired(progress)) {
      std::string waiting;
      for (const Peer& w : peers)
        if (!w.stopped) waiting += cat(waiting.empty() ? "" : ", ", w.rank);
      throw TimeoutError(cat("EASGD centre rank ", world.rank(), ": no message from worker(s) ",
                             waiting, " for ", watch.timeout_s(), " s"));
    }
  }
  // The receives still posted for stopped workers never complete: nothing more is sent.
  for (Peer& w : peers) w.answer_work.wait();
  copy_from_flat(centre, params);
  return bytes_sent;
}

}  // namespace

AsyncEasgdStrategy::AsyncEasgdStrategy(comm::Communicator& world, AsyncEasgdOptions options)
    : world_(world), options_(options), centre_rank_(world.size() - 1) {
  if (world.size() < 2)
    throw ConfigError(
        "strategy.asynchronous: asynchronous EASGD needs at least 2 ranks (workers "
        "and the centre rank)");
  workers_ = world.split(trains() ? 0 : -1, world.rank());
}

AsyncEasgdStrategy::~AsyncEasgdStrategy() = default;

void AsyncEasgdStrategy::setup(const nn::ModelTensors& model) {
  params_ = start_from_rank0(model, world_).tensors;  // 1.
  exchange_ = flat_parameters();
}

torch::Tensor AsyncEasgdStrategy::flat_parameters() const {
  std::vector<torch::Tensor> flat;
  for (const auto& p : params_) flat.push_back(p.detach().reshape(-1));
  return torch::cat(flat);
}

void AsyncEasgdStrategy::set_parameters(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (auto& p : params_) {
    p.copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

// 2. and the worker's half of 3.
void AsyncEasgdStrategy::after_optimizer_step(torch::optim::Optimizer&, std::int64_t step) {
  if (step % options_.period != 0) return;
  const torch::Tensor mine = flat_parameters();
  exchange_.copy_(mine);
  world_.send(buffer_of(exchange_), centre_rank_, kExchangeTag);
  stats_.bytes_sent += exchange_.numel() * exchange_.element_size();
  try {
    world_.recv(buffer_of(exchange_), centre_rank_, kExchangeTag);
  } catch (const TimeoutError& e) {
    throw TimeoutError(cat("EASGD centre rank ", centre_rank_, " did not answer: ", e.what()));
  }
  set_parameters(mine - exchange_);
}

// 6. Workers load the checkpoint, the centre rank does not (it reads no files): worker 0 sends
// it the model the checkpoint holds, which is the centre it saved.
void AsyncEasgdStrategy::resumed_at(std::int64_t) {
  if (world_.rank() == 0) {
    exchange_.copy_(flat_parameters());
    world_.send(buffer_of(exchange_), centre_rank_, kResumeTag);
  } else if (!trains()) {
    world_.recv(buffer_of(exchange_), 0, kResumeTag);
    set_parameters(exchange_);
  }
}

void AsyncEasgdStrategy::send_control(double word) {
  control_ = word;
  world_.send(comm::ConstBuffer{&control_, 1, comm::DType::f64}, centre_rank_, kControlTag);
}

// 4.
void AsyncEasgdStrategy::reconcile(torch::optim::Optimizer& optimizer) {
  send_control(kSync);
  try {
    world_.recv(buffer_of(exchange_), centre_rank_, kExchangeTag);
  } catch (const TimeoutError& e) {
    throw TimeoutError(cat("EASGD centre rank ", centre_rank_, " did not answer: ", e.what()));
  }
  set_parameters(exchange_);
  stats_.bytes_sent += average_across_ranks(optimizer_state_tensors(optimizer), *workers_);
}

void AsyncEasgdStrategy::finish() { send_control(kStop); }

void AsyncEasgdStrategy::serve() {
  stats_.bytes_sent += serve_centre(world_, params_, options_.alpha);
}

namespace easgd {

void serve_centre_flat(comm::Communicator& world, const std::vector<FlatParameter>& params,
                       double alpha, bool resumed) {
  const std::vector<torch::Tensor> tensors = tensors_over(params, "EASGD centre");
  if (resumed) {
    auto flat = flat_copy(tensors);
    world.recv(buffer_of(flat), 0, kResumeTag);
    copy_from_flat(flat, tensors);
  }
  serve_centre(world, tensors, alpha);
}

}  // namespace easgd
}  // namespace distml::train
