// Fuzzes what the start-up handshake reads from its peers (comm/handshake_wire.cc): Hellos
// whose strings need not be terminated, rank 0's verdict and its host table. The input is cut
// into Hellos (rank 0's first) and also read whole as a verdict and as a host table, as raw
// bytes arrive from the wire.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "distml/comm/handshake_wire.h"
#include "distml/core/error.h"

using distml::comm::handshake::Hello;
using distml::comm::handshake::Verdict;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Exactly-sized copies, so that ASan sees a read past any struct.
  std::vector<Hello> hellos(std::max<std::size_t>(1, size / sizeof(Hello)));
  std::memcpy(hellos.data(), data, std::min(size, hellos.size() * sizeof(Hello)));
  distml::comm::handshake::compare_hellos(hellos);

  auto verdict = std::make_unique<Verdict>();
  std::memcpy(verdict.get(), data, std::min(size, sizeof(Verdict)));
  try {
    distml::comm::handshake::raise_verdict(*verdict);
  } catch (const distml::CommError&) {
  }

  std::vector<std::int32_t> hosts(size / 4);
  if (!hosts.empty()) std::memcpy(hosts.data(), data, hosts.size() * 4);
  try {
    distml::comm::handshake::checked_host_table(hosts);
  } catch (const distml::CommError&) {
  }
  return 0;
}
