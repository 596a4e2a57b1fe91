#include "distml/comm/handshake_wire.h"

#include <cstring>
#include <string_view>

#include "distml/core/error.h"

namespace distml::comm::handshake {
namespace {

// A NUL-padded field as text: up to its first NUL, or all of it when a peer sent none.
template <std::size_t N>
std::string_view text(const char (&field)[N]) {
  return {field, strnlen(field, N)};
}

}  // namespace

std::string compare_hellos(std::span<const Hello> hellos) {
  const Hello& a = hellos[0];
  for (const Hello& b : hellos) {
    if (text(a.version) != text(b.version))
      return cat("distml version differs: rank 0 runs ", text(a.version), ", rank ", b.rank,
                 " runs ", text(b.version));
    if (text(a.engine) != text(b.engine))
      return cat("engine differs: rank 0 uses ", text(a.engine), ", rank ", b.rank, " uses ",
                 text(b.engine));
    if (a.world_size != b.world_size)
      return cat("world size differs: rank 0 sees ", a.world_size, ", rank ", b.rank, " sees ",
                 b.world_size);
    if (a.fingerprint != b.fingerprint)
      return cat("fingerprint (config hash) differs: rank 0 has ", std::hex, a.fingerprint,
                 ", rank ", std::dec, b.rank, " has ", std::hex, b.fingerprint,
                 " - the ranks run with different configurations");
  }
  return {};
}

void raise_verdict(const Verdict& verdict) {
  const std::string message(text(verdict.message));
  if (verdict.status == 2) throw TimeoutError(message);
  if (verdict.status != 0) throw CommError(message);
}

std::vector<int> checked_host_table(std::span<const std::int32_t> hosts) {
  std::vector<int> out;
  int next = 0;  // the number the next new host gets
  for (std::size_t q = 0; q < hosts.size(); ++q) {
    if (hosts[q] < 0 || hosts[q] > next)
      throw CommError(cat("start-up handshake: rank 0's host table gives rank ", q, " host ",
                          hosts[q], "; expected 0 to ", next));
    if (hosts[q] == next) ++next;
    out.push_back(hosts[q]);
  }
  return out;
}

}  // namespace distml::comm::handshake
