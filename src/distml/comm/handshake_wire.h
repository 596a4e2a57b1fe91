// The start-up handshake's messages as they travel (handshake.cc): fixed-size structs sent as
// raw bytes, and the pure functions that read them, so that what a peer sent is checked in one
// place (and can be fuzzed without an engine).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace distml::comm::handshake {

/// What every rank sends rank 0. The strings are NUL-padded, but a peer need not terminate them.
struct Hello {
  char version[16] = {};
  char engine[16] = {};
  std::int32_t world_size = 0;
  std::int32_t rank = 0;
  std::uint64_t fingerprint = 0;
  std::uint64_t host = 0;  // a hash of the host name
};

/// Rank 0's answer to each rank.
struct Verdict {
  std::int32_t status = 0;  // 0 ok, 1 mismatch, 2 ranks missing
  char message[1000] = {};
};

/// The first difference between rank 0's Hello (hellos[0]) and the others', as a message;
/// empty when they all agree.
std::string compare_hellos(std::span<const Hello> hellos);

/// Throws TimeoutError (status 2) or CommError (any other status but 0) with the verdict's text.
void raise_verdict(const Verdict& verdict);

/// Rank 0's table of host numbers, checked: one per rank, numbered 0, 1, ... in the order of
/// each host's lowest rank. CommError naming the first entry that is not.
std::vector<int> checked_host_table(std::span<const std::int32_t> hosts);

}  // namespace distml::comm::handshake
