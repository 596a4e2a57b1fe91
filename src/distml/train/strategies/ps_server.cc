#include "distml/train/strategies/ps_server.h"

#include <algorithm>
#include <sstream>

#include "distml/core/error.h"
#include "distml/train/strategies/idle_watch.h"
#include "distml/train/strategies/ps_flat_server.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::ps {

// What the server keeps about one worker: its posted receives and where its step stands.
struct Server::Peer {
  int rank = 0;
  double header[2] = {0, 0};  // {clock, learning rate} of the step being pushed
  double control = 0;
  comm::Work header_work, control_work;
  std::vector<torch::Tensor> grads, replies;  // per bucket of mine
  std::vector<torch::Tensor> packed;          // per bucket of mine, with a compressor
  std::vector<comm::Work> grad_work, reply_work;
  std::vector<char> arrived;
  bool header_in = false;
  std::int64_t clock = 0;           // steps of this worker applied
  std::int64_t pulled_version = 0;  // server version its parameters came from
  bool reply_due = false;           // applied, answer not sent yet (ssp holds it back)
  bool syncing = false, stopped = false;
};

Server::Server(comm::Communicator& world, const Layout& layout,
               const std::vector<torch::Tensor>& params, const ServerOptions& options,
               compress::Compressor* unpacker)
    : world_(world), layout_(layout), options_(options), unpacker_(unpacker) {
  const int me = world.rank() - layout.workers;
  mine_ = layout.buckets_of(me);
  std::vector<torch::Tensor> all_mine;
  for (std::size_t b : mine_) {
    params_.emplace_back();
    for (std::size_t p : layout.buckets[b]) {
      params_.back().push_back(params[p]);
      all_mine.push_back(params[p]);
    }
  }
  if (!all_mine.empty()) optimizer_ = make_optimizer(all_mine, options.optim);
  for (int w = 0; w < layout.workers; ++w) {
    auto peer = std::make_unique<Peer>();
    peer->rank = w;
    for (std::size_t b : mine_) {
      peer->grads.push_back(torch::empty({static_cast<std::int64_t>(layout.elements[b])},
                                         params_.back().front().options()));
      peer->replies.push_back(torch::empty_like(peer->grads.back()));
      if (unpacker_)
        peer->packed.push_back(torch::empty(
            {static_cast<std::int64_t>(unpacker_->packed_bytes(b, peer->grads.back().numel()))},
            torch::kUInt8));
    }
    peer->grad_work.resize(mine_.size());
    peer->reply_work.resize(mine_.size());
    peer->arrived.assign(mine_.size(), 0);
    peer->control_work =
        world_.irecv(comm::Buffer{&peer->control, 1, comm::DType::f64}, w, kControlTag);
    peers_.push_back(std::move(peer));
    repost(*peers_.back());
  }
}

// Replies still in flight own their buffers.
Server::~Server() {
  for (auto& w : peers_)
    for (auto& work : w->reply_work) {
      try {
        work.wait();
      } catch (const std::exception&) {  // already reported by whoever saw it first
      }
    }
}

void Server::repost(Peer& w) {
  w.header_in = false;
  std::fill(w.arrived.begin(), w.arrived.end(), 0);
  if (mine_.empty()) return;  // nothing to serve: a worker sends this server no steps
  w.header_work = world_.irecv(comm::Buffer{w.header, 2, comm::DType::f64}, w.rank, kStepTag);
  for (std::size_t i = 0; i < mine_.size(); ++i)
    w.grad_work[i] =
        world_.irecv(buffer_of(unpacker_ ? w.packed[i] : w.grads[i]), w.rank, push_tag(mine_[i]));
}

// Collects what has arrived from `w`; true if anything did.
bool Server::poll(Peer& w) {
  bool progress = false;
  if (!mine_.empty()) {
    for (std::size_t i = 0; i < mine_.size(); ++i)
      if (!w.arrived[i] && w.grad_work[i].test()) {
        w.grad_work[i].wait();  // rethrows a failed receive
        if (unpacker_)
          w.grads[i].copy_(unpacker_->unpack(w.packed[i], mine_[i], w.grads[i].numel()));
        w.arrived[i] = 1;
        progress = true;
      }
    if (!w.header_in && w.header_work.test()) {
      w.header_work.wait();
      w.header_in = true;
      progress = true;
    }
  }
  if (!w.stopped && w.control_work.test()) {
    w.control_work.wait();
    const Control control = decode_control(w.control, w.rank, world_.rank());
    if (control == Control::stop) {
      w.stopped = true;
    } else {
      if (control == Control::sync)
        w.syncing = true;
      else
        send_state(w.rank);
      w.control_work =
          world_.irecv(comm::Buffer{&w.control, 1, comm::DType::f64}, w.rank, kControlTag);
    }
    progress = true;
  }
  return progress;
}

// The optimizer state, serialised, to the worker that saves a checkpoint.
void Server::send_state(int worker) {
  std::string bytes;
  if (optimizer_) {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    bytes = out.str();
  }
  const auto size = static_cast<std::int64_t>(bytes.size());
  world_.send(comm::ConstBuffer{&size, 1, comm::DType::i64}, worker, kStateTag);
  world_.send(comm::ConstBuffer{bytes.data(), bytes.size(), comm::DType::u8}, worker, kStateTag);
}

void Server::load_state(const std::string& state) {
  if (state.empty() || !optimizer_) return;
  torch::serialize::InputArchive archive;
  archive.load_from(state.data(), state.size());
  optimizer_->load(archive);
}

bool Server::step_complete(const Peer& w) const {
  return w.header_in && std::all_of(w.arrived.begin(), w.arrived.end(), [](char a) { return a; });
}

// One optimizer step on the sum of the contributors' gradients over the number of workers:
// the average for bsp (all of them), one worker's share for asp and ssp.
void Server::apply(const std::vector<Peer*>& contributors) {
  torch::NoGradGuard no_grad;
  const double scale = 1.0 / layout_.workers;
  for (std::size_t i = 0; i < mine_.size(); ++i) {
    auto sum = contributors.front()->grads[i].clone();
    for (std::size_t c = 1; c < contributors.size(); ++c) sum.add_(contributors[c]->grads[i]);
    sum.mul_(scale);
    std::int64_t offset = 0;
    for (auto& p : params_[i]) {
      p.mutable_grad() = sum.narrow(0, offset, p.numel()).view(p.sizes()).clone();
      offset += p.numel();
    }
  }
  set_lr(*optimizer_, contributors.front()->header[1]);
  optimizer_->step();
  for (Peer* w : contributors) {
    const auto staleness = static_cast<std::size_t>(version_ - w->pulled_version);
    ++report_.staleness[std::min(staleness, kStalenessBins - 1)];
    ++w->clock;
    w->reply_due = true;
    repost(*w);
  }
  ++version_;
  ++report_.updates;
}

// Sends `w` the current parameters of every bucket of mine.
void Server::reply(Peer& w) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < mine_.size(); ++i) {
    w.reply_work[i].wait();  // the previous answer still owns the buffer
    std::int64_t offset = 0;
    for (auto& p : params_[i]) {
      w.replies[i].narrow(0, offset, p.numel()).copy_(p.reshape(-1));
      offset += p.numel();
    }
    w.reply_work[i] = world_.isend(buffer_of(w.replies[i]), w.rank, pull_tag(mine_[i]));
    bytes_sent_ += w.replies[i].numel() * w.replies[i].element_size();
  }
  w.pulled_version = version_;
  w.reply_due = false;
}

// How many steps `w` is ahead of the slowest worker still running.
std::int64_t Server::lead(const Peer& w) const {
  std::int64_t slowest = w.clock;
  for (const auto& p : peers_)
    if (!p->stopped) slowest = std::min(slowest, p->clock);
  return w.clock - slowest;
}

// ssp: a worker at clock c goes on only while the slowest running worker is at c - s or later.
bool Server::may_proceed(const Peer& w) const {
  return options_.mode != Mode::ssp || lead(w) <= options_.staleness;
}

// Once every running worker asks, all of them get the same parameters: replicas agree.
void Server::answer_syncs() {
  for (const auto& p : peers_)
    if (!p->stopped && !p->syncing) return;
  for (auto& p : peers_) {
    if (!p->syncing) continue;
    reply(*p);
    p->syncing = false;
  }
}

void Server::run() {
  IdleWatch watch(world_.options().timeout);
  auto running = [&] {
    return std::any_of(peers_.begin(), peers_.end(), [](const auto& p) { return !p->stopped; });
  };
  while (running()) {
    bool progress = false;
    for (auto& w : peers_) progress |= poll(*w);
    if (options_.mode == Mode::bsp) {
      std::vector<Peer*> all;
      for (auto& w : peers_)
        if (!w->stopped) all.push_back(w.get());
      if (!all.empty() &&
          std::all_of(all.begin(), all.end(), [&](const Peer* w) { return step_complete(*w); }))
        apply(all);
    } else {
      for (auto& w : peers_)
        if (step_complete(*w)) apply({w.get()});
    }
    for (auto& w : peers_) {
      if (!w->reply_due || !may_proceed(*w)) continue;
      report_.max_clock_gap = std::max(report_.max_clock_gap, lead(*w));
      reply(*w);
      progress = true;
    }
    answer_syncs();
    if (watch.expired(progress)) {
      std::string waiting;
      for (const auto& p : peers_)
        if (!p->stopped) waiting += cat(waiting.empty() ? "" : ", ", p->rank);
      throw TimeoutError(cat("parameter server rank ", world_.rank(),
                             ": no message from worker(s) ", waiting, " for ", watch.timeout_s(),
                             " s"));
    }
  }
}

ServerReport serve_flat(comm::Communicator& world, const Layout& layout,
                        const std::vector<FlatParameter>& params, const ServerOptions& options,
                        bool resumed, const compress::CompressOptions* compress) {
  const std::vector<torch::Tensor> tensors = tensors_over(params, "parameter server");
  std::unique_ptr<compress::Compressor> unpacker;
  if (compress) {
    std::vector<compress::BucketLayout> layouts;
    for (const auto& bucket : layout.buckets) {
      std::vector<torch::Tensor> members;
      for (std::size_t p : bucket) members.push_back(tensors[p]);
      layouts.push_back(compress::layout_of(members, *compress));
    }
    unpacker = compress::make_compressor(*compress, layouts);
  }
  Server server(world, layout, tensors, options, unpacker.get());
  if (resumed) {
    auto flat = flat_copy(tensors);
    const std::string state = receive_resume(world, layout, buffer_of(flat));
    copy_from_flat(flat, tensors);
    server.load_state(state);
  }
  server.run();
  return sum_reports(server.report(), world);
}

}  // namespace distml::train::ps
