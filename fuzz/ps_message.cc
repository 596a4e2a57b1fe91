// Fuzzes what a parameter server and its workers read from each other besides the fixed-size
// tensors (train/strategies/ps_protocol.cc): control words and the announced size of a server's
// optimizer state, against a layout planned from fuzzed parameter sizes.
#include <cstdint>
#include <cstring>
#include <vector>

#include "distml/core/error.h"
#include "distml/train/strategies/ps_protocol.h"

namespace ps = distml::train::ps;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 17) return 0;
  double word;
  std::int64_t announced;
  std::memcpy(&word, data, 8);
  std::memcpy(&announced, data + 8, 8);
  try {
    ps::decode_control(word, 1, 2);
  } catch (const distml::CommError&) {
  }
  // The rest: parameter sizes (u16 elements each, as f32), planned onto 1 to 4 servers.
  std::vector<std::size_t> bytes, elements;
  for (std::size_t i = 17; i + 1 < size && elements.size() < 64; i += 2) {
    elements.push_back(std::size_t{data[i]} << 8 | data[i + 1]);
    bytes.push_back(4 * elements.back());
  }
  const int servers = 1 + data[16] % 4;
  const ps::Layout layout = ps::Layout::plan(bytes, elements, 2, servers, 1 << 10, 4 << 10);
  for (int s = 0; s < servers; ++s) {
    try {
      ps::checked_state_size(announced, layout.max_state_bytes(s), 2 + s);
    } catch (const distml::CommError&) {
    }
  }
  return 0;
}
