#include "distml/sim/parameter_server.h"

#include <algorithm>
#include <tuple>

#include "distml/core/error.h"
#include "distml/sim/events.h"
#include "distml/sim/fabric.h"

namespace distml::sim {
namespace {

constexpr double kHeaderBytes = 16;  // {clock, learning rate} as two doubles

class PsRun {
 public:
  PsRun(const Profile& profile, const PsOptions& options, const Cluster& cluster)
      : p_(profile), o_(options), fabric_(cluster, events_) {
    const int servers = options.strategy.servers;
    if (servers < 1 || servers >= cluster.world())
      throw ConfigError(cat("strategy.servers = ", servers, " must leave at least one of the ",
                            cluster.world(), " ranks a worker"));
    const double element = profile.dtype == "float64" ? 8 : 4;
    std::vector<std::size_t> bytes, elements;
    for (const auto& q : profile.parameters) {
      bytes.push_back(static_cast<std::size_t>(q.bytes));
      elements.push_back(static_cast<std::size_t>(q.bytes / element));
    }
    layout_ =
        train::ps::Layout::plan(bytes, elements, cluster.world() - servers, servers,
                                options.strategy.first_bucket_bytes, options.strategy.bucket_bytes);
    for (const auto& bucket : layout_.buckets) {
      double b = 0, ready = 0;
      for (auto i : bucket) {
        b += profile.parameters[i].bytes;
        ready = std::max(ready, profile.parameters[i].ready_s);
      }
      bucket_bytes_.push_back(b);
      bucket_ready_.push_back(ready);
    }
    slow_ = compute_slowdown(profile, cluster, layout_.workers);
    const double total = profile.gradient_bytes();
    for (int s = 0; s < servers; ++s) {
      Server server;
      server.buckets = layout_.buckets_of(s);
      server.update_s = total > 0 ? profile.optimizer_s * slow_ *
                                        static_cast<double>(layout_.server_bytes[s]) / total
                                  : 0;
      server.due.assign(layout_.workers, 0);
      server.clock.assign(layout_.workers, 0);
      server.reply_due.assign(layout_.workers, false);
      servers_.push_back(std::move(server));
    }
    workers_.assign(layout_.workers, Worker{});
  }

  StepPrediction run() {
    for (int w = 0; w < layout_.workers; ++w) start_step(w, 0);
    events_.run();
    StepPrediction out;
    out.batches = layout_.workers;
    const int half = o_.steps / 2;
    for (const auto& w : workers_)
      out.step_s += (w.ends.back() - w.ends[half - 1]) / (o_.steps - half) / layout_.workers;
    out.compute_s = (p_.data_s + p_.forward_s + p_.backward_s + p_.other_s) * slow_;
    out.buckets = last_buckets_;
    double first = 1e300, last = 0;
    for (const auto& b : out.buckets) {
      first = std::min(first, b.start_s);
      last = std::max(last, b.end_s);
    }
    out.comm_s = out.buckets.empty() ? 0 : last - first;
    out.exposed_comm_s = std::max(0.0, last - backward_end());
    std::tie(out.busiest_host, out.bytes_per_link) = fabric_.traffic().busiest();
    out.bytes_per_link /= o_.steps;
    return out;
  }

 private:
  struct Worker {
    int step = 0;        // steps begun
    double start_s = 0;  // of the current step
    std::size_t pulls_left = 0;
    std::vector<double> ends;  // each step's end
  };
  struct Server {
    std::vector<std::size_t> buckets;  // in bucket order
    double update_s = 0;
    double free_s = 0;             // the server's thread
    std::vector<std::size_t> due;  // per worker: messages of its current step still to come
    std::vector<int> clock;        // per worker: its steps applied
    std::vector<bool> reply_due;
    int complete = 0;  // bsp: workers whose step is in
  };

  // From a step's start.
  double backward_start() const { return (p_.data_s + p_.forward_s) * slow_; }
  double backward_end() const { return backward_start() + p_.backward_s * slow_; }

  void start_step(int w, double t) {
    Worker& worker = workers_[w];
    if (worker.step == o_.steps) return;
    ++worker.step;
    worker.start_s = t;
    worker.pulls_left = layout_.buckets.size();
    for (auto& s : servers_) s.due[w] = s.buckets.empty() ? 0 : s.buckets.size() + 1;
    for (std::size_t b = 0; b < layout_.buckets.size(); ++b)
      events_.at(t + backward_start() + bucket_ready_[b] * slow_, [this, w, b] {
        push(w, layout_.server_of[b], bucket_bytes_[b], static_cast<int>(b));
      });
    const double straggle =
        w == o_.slow_rank ? (o_.slow_factor - 1) * (p_.forward_s + p_.backward_s) * slow_ : 0;
    events_.at(t + backward_end() + straggle, [this, w] {
      for (int s = 0; s < layout_.servers; ++s)
        if (!servers_[s].buckets.empty()) push(w, s, kHeaderBytes, -1);
    });
  }

  // A worker's bucket (or, for -1, its step header) to server index s.
  void push(int w, int s, double bytes, int bucket) {
    if (bucket >= 0 && w == 0) record(bucket, events_.now());
    fabric_.send(w, layout_.workers + s, bytes, [this, w, s] {
      if (--servers_[s].due[w] == 0) step_in(w, s);
    });
  }

  void step_in(int w, int s) {
    Server& server = servers_[s];
    if (o_.strategy.server.mode != train::ps::Mode::bsp) return update(s, {w});
    if (++server.complete < layout_.workers) return;
    server.complete = 0;
    std::vector<int> all(layout_.workers);
    for (int i = 0; i < layout_.workers; ++i) all[i] = i;
    update(s, all);
  }

  // One optimizer step on the server's thread, then the answers it allows.
  void update(int s, const std::vector<int>& contributors) {
    Server& server = servers_[s];
    server.free_s = std::max(events_.now(), server.free_s) + server.update_s;
    events_.at(server.free_s, [this, s, contributors] {
      Server& server = servers_[s];
      for (int w : contributors) {
        ++server.clock[w];
        server.reply_due[w] = true;
      }
      const int slowest = *std::min_element(server.clock.begin(), server.clock.end());
      for (int w = 0; w < layout_.workers; ++w) {
        const bool held = o_.strategy.server.mode == train::ps::Mode::ssp &&
                          server.clock[w] - slowest > o_.strategy.server.staleness;
        if (!server.reply_due[w] || held) continue;
        server.reply_due[w] = false;
        for (auto b : server.buckets)
          fabric_.send(layout_.workers + s, w, bucket_bytes_[b], [this, w, b] { pulled(w, b); });
      }
    });
  }

  void pulled(int w, std::size_t b) {
    Worker& worker = workers_[w];
    if (w == 0 && worker.step == o_.steps) last_buckets_[b].end_s = events_.now() - worker.start_s;
    if (--worker.pulls_left > 0) return;
    const double end = events_.now() + p_.other_s * slow_;
    worker.ends.push_back(end);
    start_step(w, end);
  }

  void record(int b, double start_s) {
    if (workers_[0].step != o_.steps) return;
    last_buckets_.resize(layout_.buckets.size());
    BucketReplay& r = last_buckets_[b];
    r.bytes = bucket_bytes_[b];
    r.ready_s = backward_start() + bucket_ready_[b] * slow_;
    r.start_s = start_s - workers_[0].start_s;
    r.server = layout_.server_rank(b);
  }

  const Profile& p_;
  const PsOptions& o_;
  Events events_;
  Fabric fabric_;
  train::ps::Layout layout_;
  std::vector<double> bucket_bytes_, bucket_ready_;
  double slow_ = 1;
  std::vector<Worker> workers_;
  std::vector<Server> servers_;
  std::vector<BucketReplay> last_buckets_;
};

}  // namespace

StepPrediction predict_ps_step(const Profile& profile, const PsOptions& options,
                               const Cluster& cluster) {
  if (options.steps < 2) throw UsageError("predict_ps_step: at least 2 steps");
  return PsRun(profile, options, cluster).run();
}

}  // namespace distml::sim
