#include "distml/comm/handshake.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "distml/comm/handshake_wire.h"
#include "distml/comm/protocol_tags.h"
#include "distml/core/version.h"

namespace distml::comm {
namespace {

using handshake::Hello;
using handshake::Verdict;

constexpr int kHelloTag = protocol_tag::kHello, kVerdictTag = protocol_tag::kVerdict,
              kHostsTag = protocol_tag::kHosts;

// FNV-1a of the host name, or the emulated host's number.
std::uint64_t host_id(int rank, const CommOptions& options) {
  if (options.emulated_ranks_per_host > 0)
    return static_cast<std::uint64_t>(rank / options.emulated_ranks_per_host);
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h;
}

Hello make_hello(const Engine& engine, const CommOptions& options) {
  Hello h;
  std::strncpy(h.version, kVersion, sizeof h.version - 1);
  std::strncpy(h.engine, std::string(engine.name()).c_str(), sizeof h.engine - 1);
  h.world_size = engine.size();
  h.rank = engine.rank();
  h.fingerprint = options.fingerprint;
  h.host = host_id(engine.rank(), options);
  return h;
}

}  // namespace

// Rank 0 collects a Hello from every rank within the timeout and answers each with a
// Verdict; the others wait a little longer than the timeout, so that a rank-0 verdict naming
// the missing ranks arrives before their own timeout would blame rank 0.
std::vector<int> exchange_fingerprint(Engine& engine, const CommOptions& options) {
  const int p = engine.size(), r = engine.rank();
  Hello mine = make_hello(engine, options);
  Verdict verdict;
  std::vector<std::int32_t> hosts(p);
  if (r != 0) {
    auto send = engine.isend(Channel::collective, &mine, sizeof mine, 0, kHelloTag);
    auto recv = engine.irecv(Channel::collective, &verdict, sizeof verdict, 0, kVerdictTag);
    auto deadline = Deadline::after(options.timeout + options.diagnose_grace);
    if (!recv->wait_until(deadline))
      throw TimeoutError(cat("start-up handshake on rank ", r, ": rank 0 did not answer within ",
                             options.timeout.count(), " ms; ranks that did not arrive: 0"));
    send->wait_until(deadline);
    handshake::raise_verdict(verdict);
    auto table = engine.irecv(Channel::collective, hosts.data(), hosts.size() * 4, 0, kHostsTag);
    if (!table->wait_until(deadline))
      throw TimeoutError(cat("start-up handshake on rank ", r, ": rank 0 sent no host table"));
    return handshake::checked_host_table(hosts);
  }
  std::vector<Hello> hellos(p);
  hellos[0] = mine;
  std::vector<RequestPtr> recvs(p);
  for (int src = 1; src < p; ++src)
    recvs[src] = engine.irecv(Channel::collective, &hellos[src], sizeof(Hello), src, kHelloTag);
  auto deadline = Deadline::after(options.timeout);
  std::vector<int> missing;
  for (int src = 1; src < p; ++src)
    if (!recvs[src]->wait_until(deadline)) missing.push_back(src);
  if (!missing.empty()) {
    std::string list;
    for (int m : missing) list += cat(list.empty() ? "" : ", ", m);
    verdict.status = 2;
    std::snprintf(verdict.message, sizeof verdict.message,
                  "start-up handshake: ranks that did not arrive within %lld ms: %s",
                  static_cast<long long>(options.timeout.count()), list.c_str());
  } else if (auto diff = handshake::compare_hellos(hellos); !diff.empty()) {
    verdict.status = 1;
    std::snprintf(verdict.message, sizeof verdict.message, "start-up handshake: %s", diff.c_str());
  }
  // Hosts numbered in the order of their lowest rank.
  std::vector<std::uint64_t> seen;
  for (int q = 0; q < p; ++q) {
    auto it = std::find(seen.begin(), seen.end(), hellos[q].host);
    hosts[q] = static_cast<std::int32_t>(it - seen.begin());
    if (it == seen.end()) seen.push_back(hellos[q].host);
  }
  std::vector<RequestPtr> sends;
  for (int dst = 1; dst < p; ++dst) {
    if (std::find(missing.begin(), missing.end(), dst) != missing.end()) continue;
    sends.push_back(engine.isend(Channel::collective, &verdict, sizeof verdict, dst, kVerdictTag));
    if (verdict.status == 0)
      sends.push_back(
          engine.isend(Channel::collective, hosts.data(), hosts.size() * 4, dst, kHostsTag));
  }
  auto grace = Deadline::after(options.diagnose_grace);
  for (auto& s : sends) s->wait_until(grace);
  handshake::raise_verdict(verdict);
  return {hosts.begin(), hosts.end()};
}

}  // namespace distml::comm
