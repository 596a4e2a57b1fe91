// A POSIX shared-memory segment that the ranks of one host all map, for collectives that
// reduce in place instead of sending (algorithms/shm_allreduce.cc).
//
// The group's first rank creates it under a fresh name, tells the others the name over the
// collective channel, and unlinks it once every rank has mapped it: from then on only the
// mappings hold it, so a job that dies leaves nothing in /dev/shm. The segment holds per rank an
// arrival counter (the barrier, which can name the ranks it waits for) and two signatures (used
// in turn, so that a rank can write its next one while the others still read its last), then
// 2 x size() slots of size() parts each (double-buffered: while the ranks read one set of
// slots, the next piece can be written into the other). A part holds part_bytes() and a page to
// spare, so that it can start at any offset within a page (see agree()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "distml/comm/algorithms/context.h"

namespace distml::comm {

class ShmSegment {
 public:
  /// Collective over `group` (the ranks of one host). CommError naming the segment and the
  /// system's reason when it cannot be created or mapped (on every rank of the group).
  /// `part_bytes` is rounded up to whole pages.
  static std::unique_ptr<ShmSegment> create(AlgoContext& group, std::size_t part_bytes);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t part_bytes() const { return part_bytes_; }
  /// Part j of rank r's slot in buffer b (0 or 1), `shift` (< 4096) bytes into its spare page.
  std::byte* part(int buffer, int r, int j, std::size_t shift) const;
  /// The buffer for the next piece: 0 and 1 in turn, across collectives, so that consecutive
  /// pieces never share one.
  int next_buffer() { return static_cast<int>(pieces_++ % 2); }

  /// What a collective's ranks must agree on (element count, dtype, op, step): they exchange no
  /// message a mismatch would show up in.
  using Signature = std::array<std::uint64_t, 4>;
  /// A barrier that also compares every rank's `signature` (CommError on every rank, naming each
  /// rank's, where they differ) and returns the same offset within a page on every rank: the
  /// one farthest from where every rank's `data` starts in its page. Parts placed at it (plus
  /// their data's offset) are not 4K-aliased to the data they are copied from or into (a load
  /// whose address matches an earlier store's in the low 12 bits waits for that store).
  std::size_t agree(const AlgoContext& ctx, const Signature& signature, const void* data);

  /// Returns once every rank of the group has called it as often. Spins briefly, yields for
  /// 50 us, then sleeps until an arrival wakes it; TimeoutError naming `ctx.what()` and the
  /// ranks that have not arrived at the deadline.
  void barrier(const AlgoContext& ctx);

 private:
  ShmSegment(std::byte* base, std::size_t bytes, int rank, int size, std::size_t part_bytes);
  static std::size_t header_bytes(int size);

  std::byte* base_;
  std::size_t bytes_;
  int rank_, size_;
  std::size_t part_bytes_;
  std::uint64_t barriers_ = 0;  // barriers this rank has entered
  std::uint64_t pieces_ = 0;    // pieces this rank has passed through the slots
  std::uint64_t agreements_ = 0;
};

}  // namespace distml::comm
