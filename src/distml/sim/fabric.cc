#include "distml/sim/fabric.h"

#include <algorithm>
#include <limits>

namespace distml::sim {
namespace {

// Resource indices: NIC out and in per host, uplink out and in per rack, memory per host.
struct Index {
  int hosts, racks;
  int nic_out(int h) const { return h; }
  int nic_in(int h) const { return hosts + h; }
  int uplink_out(int r) const { return 2 * hosts + r; }
  int uplink_in(int r) const { return 2 * hosts + racks + r; }
  int memory(int h) const { return 2 * hosts + 2 * racks + h; }
  int size() const { return 3 * hosts + 2 * racks; }
};

constexpr double kDone = 1e-6;  // bytes: a flow with less left has finished

}  // namespace

Fabric::Fabric(const Cluster& cluster, Events& events) : cluster_(cluster), events_(events) {
  const Index at{cluster.hosts, cluster.racks()};
  resources_.resize(at.size());
  left_.resize(at.size());
  count_.assign(at.size(), 0);
  const double nic = cluster.network.bytes_per_s;
  const double uplink =
      nic * std::max(1, cluster.hosts_per_rack) / std::max(1.0, cluster.oversubscription);
  for (int h = 0; h < cluster.hosts; ++h) {
    for (int i : {at.nic_out(h), at.nic_in(h)})
      resources_[i] = {nic, cluster.burst_bytes, cluster.burst_bytes_per_s, cluster.burst_bytes};
    resources_[at.memory(h)].rate = cluster.within_host.bytes_per_s;
  }
  for (int r = 0; r < cluster.racks(); ++r)
    resources_[at.uplink_out(r)].rate = resources_[at.uplink_in(r)].rate = uplink;
  traffic_.sent_by_host.assign(cluster.hosts, 0);
}

void Fabric::send(int from, int to, double bytes, std::function<void()> arrived) {
  const Index at{cluster_.hosts, cluster_.racks()};
  const int a = cluster_.host_of(from), b = cluster_.host_of(to);
  Flow f;
  f.left = bytes;
  f.arrived = std::move(arrived);
  f.latency = cluster_.p2p_overhead_s;
  if (a == b) {
    f.path = {at.memory(a)};
    f.latency += cluster_.within_host.latency_s;
  } else {
    f.path = {at.nic_out(a), at.nic_in(b)};
    if (cluster_.rack_of(a) != cluster_.rack_of(b))
      f.path.insert(f.path.end(),
                    {at.uplink_out(cluster_.rack_of(a)), at.uplink_in(cluster_.rack_of(b))});
    f.latency += cluster_.network.latency_s;
    traffic_.sent_by_host[a] += bytes;
  }
  f.ranks = {from, to};
  auto& queue = queued_[f.ranks];
  queue.push_back(std::move(f));
  if (queue.size() == 1) start(std::move(queue.front()));  // none in flight between them
}

// The pair's message at the head of its queue starts sending (at rate 0 until the flows are
// shared out); it stays in the queue (as a marker) until it has left.
void Fabric::start(Flow flow) {
  progress();
  flows_.push_back(std::move(flow));
  // Messages sent at the same moment (a server's answers, workers' pushes) are shared out
  // once, after all of them.
  if (share_due_) return;
  share_due_ = true;
  events_.at(events_.now(), [this] {
    share_due_ = false;
    progress();
    share();
  });
}

void Fabric::settle(Resource& r) {
  if (r.burst > 0)
    r.tokens =
        std::clamp(r.tokens + (r.rate - r.used) * (events_.now() - r.counted_at), 0.0, r.burst);
  r.counted_at = events_.now();
}

void Fabric::progress() {
  const double dt = events_.now() - updated_;
  updated_ = events_.now();
  if (dt <= 0) return;
  for (auto& f : flows_) f.left -= f.rate * dt;
  for (int r : busy_) settle(resources_[r]);
}

// Progressive filling: the resource whose capacity left, shared among its unfixed flows, is
// least fixes those flows at that share; repeat until every flow has its rate.
void Fabric::share() {
  // Finished flows leave, and arrive a latency later; the next between their ranks starts.
  std::vector<Flow> waiting;
  for (auto it = flows_.begin(); it != flows_.end();) {
    if (it->left > kDone) {
      ++it;
      continue;
    }
    events_.at(events_.now() + it->latency, std::move(it->arrived));
    auto& queue = queued_[it->ranks];
    queue.pop_front();
    if (!queue.empty()) waiting.push_back(std::move(queue.front()));
    it = flows_.erase(it);
  }
  for (auto& f : waiting) flows_.push_back(std::move(f));
  // Only the resources some flow crosses take part; the others idle from now (settled by
  // progress()), and one that idled until now has its tokens refilled first.
  for (int r : busy_) resources_[r].used = 0;
  busy_.clear();
  for (const auto& f : flows_)
    for (int r : f.path)
      if (count_[r]++ == 0) busy_.push_back(r);
  for (int r : busy_) {
    settle(resources_[r]);
    left_[r] = resources_[r].capacity();
  }
  std::vector<bool> fixed(flows_.size(), false);
  for (std::size_t done = 0; done < flows_.size();) {
    int bottleneck = -1;
    double least = std::numeric_limits<double>::infinity();
    for (int r : busy_)
      if (count_[r] > 0 && left_[r] / count_[r] < least) {
        least = left_[r] / count_[r];
        bottleneck = r;
      }
    for (std::size_t i = 0; i < flows_.size(); ++i) {
      auto& f = flows_[i];
      if (fixed[i] || std::find(f.path.begin(), f.path.end(), bottleneck) == f.path.end()) continue;
      fixed[i] = true;
      ++done;
      f.rate = least;
      for (int r : f.path) {
        left_[r] -= least;
        --count_[r];
        resources_[r].used += least;
      }
    }
  }
  // The next change: a flow finishes, or a NIC's tokens run out.
  double next = std::numeric_limits<double>::infinity();
  for (const auto& f : flows_) next = std::min(next, f.left / f.rate);
  for (int i : busy_) {
    const auto& r = resources_[i];
    if (r.burst > 0 && r.tokens > 1e-6 * r.burst && r.used > r.rate)
      next = std::min(next, r.tokens / (r.used - r.rate));
  }
  if (next == std::numeric_limits<double>::infinity()) return;
  const long generation = ++generation_;
  events_.at(events_.now() + next, [this, generation] { check(generation); });
}

void Fabric::check(long generation) {
  if (generation != generation_) return;  // the flows changed since: a later check is due
  progress();
  share();
}

}  // namespace distml::sim
