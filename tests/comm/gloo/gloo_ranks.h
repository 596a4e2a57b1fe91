// Runs the ranks of a gloo world as forked child processes of the test. Each child connects
// through a FileStore in a fresh temporary folder (or a TCPStore on 127.0.0.1), runs the
// test's function and reports back through a file; the parent reaps every child, killing
// the ones still running at the time limit, so that a hang fails the test instead of
// blocking it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/comm/engine.h"

namespace distml::test {

/// How one child ended.
struct RankOutcome {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, or 0
  std::string report;  // what the rank function returned, or the error it threw
  bool threw = false;  // report is "<ErrorType>: <message>"
  bool killed_at_limit = false;
};

struct GlooWorld {
  int size = 2;
  comm::CommOptions options;
  bool tcp_store = false;           // rendezvous through TCPStore instead of FileStore
  std::vector<int> absent;          // ranks that are never started
  std::chrono::seconds limit{120};  // children still running then are killed
};

/// Runs fn(comm) on every rank of `world` in its own process; returns one outcome per rank
/// (absent ranks: exit_code -1, empty report). A rank's report is fn's return value; an
/// exception becomes report "<type>: <what>" with threw set.
std::vector<RankOutcome> run_gloo_world(const GlooWorld& world,
                                        const std::function<std::string(comm::Communicator&)>& fn);

/// The same without a Communicator: fn gets the bare engine (no start-up handshake).
std::vector<RankOutcome> run_gloo_engines(const GlooWorld& world,
                                          const std::function<std::string(comm::Engine&)>& fn);

/// Lower-level: runs fn(rank) in `size` children with RANK/WORLD_SIZE set and
/// DISTML_TEST_FILE_STORE naming a fresh file store; ranks in `absent` are skipped.
std::vector<RankOutcome> run_processes(int size, const std::vector<int>& absent,
                                       std::chrono::seconds limit,
                                       const std::function<std::string(int)>& fn);

/// A summary of all outcomes for assertion messages.
std::string describe(const std::vector<RankOutcome>& outcomes);

}  // namespace distml::test
