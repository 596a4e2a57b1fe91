#include "distml/comm/diagnose.h"

#include <vector>

namespace distml::comm {

std::string diagnose_missing(Engine& engine, std::uint64_t seq, int tag, Millis grace) {
  const int p = engine.size(), r = engine.rank();
  std::vector<std::uint64_t> theirs(p, 0);
  std::vector<RequestPtr> sends, recvs(p);
  for (int peer = 0; peer < p; ++peer) {
    if (peer == r) continue;
    recvs[peer] =
        engine.irecv(Channel::collective, &theirs[peer], sizeof(std::uint64_t), peer, tag);
    sends.push_back(engine.isend(Channel::collective, &seq, sizeof seq, peer, tag));
  }
  const auto deadline = Deadline::after(grace);
  std::string missing;
  for (int peer = 0; peer < p; ++peer) {
    if (peer == r) continue;
    bool heard = false;
    try {
      heard = recvs[peer]->wait_until(deadline) && theirs[peer] >= seq;
    } catch (const CommError&) {
    }
    if (!heard) missing += cat(missing.empty() ? "" : ", ", peer);
  }
  for (auto& s : sends) {
    try {
      s->test();
    } catch (const CommError&) {
    }
  }
  if (missing.empty()) return "every rank reached this operation (one may have failed in it)";
  return cat("ranks that did not arrive: ", missing);
}

}  // namespace distml::comm
