#include "distml/train/strategies/ps_protocol.h"

#include <algorithm>

#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"

namespace distml::train::ps {

Mode parse_mode(const std::string& name) {
  if (name == "bsp") return Mode::bsp;
  if (name == "asp") return Mode::asp;
  if (name == "ssp") return Mode::ssp;
  throw ConfigError(cat("strategy.mode: expected bsp, asp or ssp, got '", name, "'"));
}

Layout Layout::plan(const std::vector<std::size_t>& param_bytes,
                    const std::vector<std::size_t>& param_elements, int workers, int servers,
                    std::size_t first_cap, std::size_t cap) {
  Layout l;
  l.workers = workers;
  l.servers = servers;
  l.buckets = plan_buckets(param_bytes, first_cap, cap).buckets;
  l.server_bytes.assign(servers, 0);
  for (const auto& bucket : l.buckets) {
    std::size_t bytes = 0, elements = 0;
    for (std::size_t p : bucket) {
      bytes += param_bytes[p];
      elements += param_elements[p];
    }
    const auto lightest = std::min_element(l.server_bytes.begin(), l.server_bytes.end());
    l.server_of.push_back(static_cast<int>(lightest - l.server_bytes.begin()));
    *lightest += bytes;
    l.elements.push_back(elements);
  }
  return l;
}

std::vector<std::size_t> Layout::buckets_of(int s) const {
  std::vector<std::size_t> out;
  for (std::size_t b = 0; b < buckets.size(); ++b)
    if (server_of[b] == s) out.push_back(b);
  return out;
}

// LibTorch's optimizers keep at most three tensors per parameter (Adam with amsgrad: exp_avg,
// exp_avg_sq, max_exp_avg_sq; centred RMSprop with momentum: square_avg, grad_avg,
// momentum_buffer), each the parameter's size and dtype, and a step count; the archive adds a
// record of well under 1 KiB per tensor and the parameter groups' options. Four times the bytes
// and 4 KiB per possible record stays above that with room, and far below what a corrupt size
// (up to 2^63) would ask for.
std::size_t Layout::max_state_bytes(int s) const {
  std::size_t tensors = 0;
  for (std::size_t b : buckets_of(s)) tensors += buckets[b].size();
  return 4 * server_bytes[s] + (std::size_t{4} << 10) * (4 * tensors + 16);
}

Control decode_control(double word, int worker, int server_rank) {
  if (word == kSync) return Control::sync;
  if (word == kStop) return Control::stop;
  if (word == kSave) return Control::save;
  throw CommError(cat("parameter server rank ", server_rank, ": worker ", worker,
                      " sent an unknown control word ", word));
}

std::size_t checked_state_size(std::int64_t size, std::size_t limit, int from) {
  if (size < 0 || static_cast<std::uint64_t>(size) > limit)
    throw CommError(cat("parameter server: rank ", from, " announced an optimizer state of ", size,
                        " bytes; expected 0 to ", limit));
  return static_cast<std::size_t>(size);
}

void tell_servers(comm::Communicator& world, const Layout& layout, double word) {
  for (int s = 0; s < layout.servers; ++s)
    world.send(comm::ConstBuffer{&word, 1, comm::DType::f64}, layout.workers + s, kControlTag);
}

std::vector<std::string> collect_server_states(comm::Communicator& world, const Layout& layout) {
  std::vector<std::string> states;
  const double save = kSave;
  for (int s = 0; s < layout.servers; ++s) {
    const int server = layout.workers + s;
    world.send(comm::ConstBuffer{&save, 1, comm::DType::f64}, server, kControlTag);
    std::int64_t size = 0;
    world.recv(comm::Buffer{&size, 1, comm::DType::i64}, server, kStateTag);
    std::string bytes(checked_state_size(size, layout.max_state_bytes(s), server), '\0');
    world.recv(comm::Buffer{bytes.data(), bytes.size(), comm::DType::u8}, server, kStateTag);
    states.push_back(std::move(bytes));
  }
  return states;
}

void send_resume(comm::Communicator& world, const Layout& layout, comm::ConstBuffer params,
                 const std::vector<std::string>& states) {
  for (int s = 0; s < layout.servers; ++s) {
    const int server = layout.workers + s;
    world.send(params, server, kStateTag);
    const std::string none;
    const std::string& state = static_cast<std::size_t>(s) < states.size() ? states[s] : none;
    const auto size = static_cast<std::int64_t>(state.size());
    world.send(comm::ConstBuffer{&size, 1, comm::DType::i64}, server, kStateTag);
    world.send(comm::ConstBuffer{state.data(), state.size(), comm::DType::u8}, server, kStateTag);
  }
}

std::string receive_resume(comm::Communicator& world, const Layout& layout, comm::Buffer params) {
  world.recv(params, 0, kStateTag);
  std::int64_t size = 0;
  world.recv(comm::Buffer{&size, 1, comm::DType::i64}, 0, kStateTag);
  const int me = world.rank() - layout.workers;
  std::string state(checked_state_size(size, layout.max_state_bytes(me), 0), '\0');
  world.recv(comm::Buffer{state.data(), state.size(), comm::DType::u8}, 0, kStateTag);
  return state;
}

ServerReport sum_reports(const ServerReport& mine, comm::Communicator& world) {
  std::vector<std::int64_t> counts = mine.staleness;
  counts.push_back(mine.updates);
  world.allreduce(comm::view(counts));
  ServerReport summed;
  summed.max_clock_gap = mine.max_clock_gap;
  world.allreduce(comm::Buffer{&summed.max_clock_gap, 1, comm::DType::i64},
                  {.op = comm::ReduceOp::max});
  summed.updates = counts.back();
  counts.pop_back();
  summed.staleness = std::move(counts);
  return summed;
}

}  // namespace distml::train::ps
