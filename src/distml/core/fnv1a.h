// FNV-1a (64-bit): a cheap checksum that every rank computes alike, for comparing what the
// ranks hold (configurations, model shapes, parameters) without sending it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace distml {

class Fnv1a {
 public:
  void mix(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ull;
  }
  void mix(std::uint64_t v) { mix(&v, sizeof v); }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 1469598103934665603ull;
};

}  // namespace distml
