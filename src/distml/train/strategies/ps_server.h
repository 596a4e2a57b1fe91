// One parameter-server rank: it holds its shard of the parameters and the optimizer state for
// them, applies the workers' gradients and answers with fresh parameters. The protocol is
// written out in ps_strategy.h; this is the server's side of it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compressor.h"
#include "distml/train/optimizer_factory.h"
#include "distml/train/strategies/ps_protocol.h"

namespace distml::train::ps {

class Server {
 public:
  /// `params`: every trainable parameter of the model (this server keeps its buckets').
  /// `unpacker`, when the workers compress their pushes: decodes them (it must outlive this).
  Server(comm::Communicator& world, const Layout& layout, const std::vector<torch::Tensor>& params,
         const ServerOptions& options, compress::Compressor* unpacker = nullptr);
  ~Server();

  /// Serves until every worker has sent stop. TimeoutError naming the workers it waits for
  /// when none of them sends anything for the communicator's timeout.
  void run();

  /// After a resume, before run(): the optimizer state a checkpoint kept for this server
  /// (save_state()'s bytes; empty: none yet).
  void load_state(const std::string& state);

  const ServerReport& report() const { return report_; }
  std::size_t bytes_sent() const { return bytes_sent_; }

 private:
  struct Peer;
  bool poll(Peer& w);
  bool step_complete(const Peer& w) const;
  void apply(const std::vector<Peer*>& contributors);
  void reply(Peer& w);
  void repost(Peer& w);
  std::int64_t lead(const Peer& w) const;
  bool may_proceed(const Peer& w) const;
  void answer_syncs();
  void send_state(int worker);

  comm::Communicator& world_;
  const Layout& layout_;
  ServerOptions options_;
  compress::Compressor* unpacker_;  // decodes compressed pushes; null: they come as they are
  std::vector<std::size_t> mine_;   // my buckets
  std::vector<std::vector<torch::Tensor>> params_;  // per bucket of mine, its parameters
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<std::unique_ptr<Peer>> peers_;  // one per worker
  std::int64_t version_ = 0;                  // updates applied so far
  std::size_t bytes_sent_ = 0;
  ServerReport report_;
};

}  // namespace distml::train::ps
