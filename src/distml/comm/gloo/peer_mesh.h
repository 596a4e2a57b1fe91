// Point-to-point transfers of the gloo engine: TCP connections of distml's own, one per pair
// of world ranks, shared by the world and its sub-groups. Private to comm/gloo/.
//
// Why not gloo's transfers (UnboundBuffer on the context c10d connected), which the engine
// used until December 2026 (docs/benchmarks.md, "The gloo engine's point-to-point"):
//  1. Every gloo message is a rendezvous: the sender announces it, the receiver answers once
//     it has posted a buffer, and only then does the *sender's* device thread write the data.
//     A receive posted after the announcement (the usual case: a pipeline stage learns an
//     activation's shape from its header, then posts the data) waits for a thread of the
//     sending process to be scheduled; on ranks that share their cores with computing ranks
//     that cost about 1 ms a message, and a 2-stage LeNet-5 pipeline ran 2.3x slower than
//     over Open MPI.
//  2. A receive posted for fewer bytes than the sender sends aborts the receiving process;
//     a wait that times out closes every connection; a transfer cannot be polled or withdrawn.
//
// The protocol, per message (eager, as MPI's for small messages):
//  1. The sending thread writes a 24-byte frame {group, bytes, tag, channel} and the bytes
//     straight to the socket. What the socket cannot take at once the reader thread writes
//     as the socket drains (a send completes when its last byte is written).
//  2. One reader thread per process reads every connection, always (so no send ever waits on
//     a receive being posted): into the receive posted first for the frame's (group, channel,
//     tag), or, when none is posted yet, into a buffer of its own that the next such receive
//     takes (copied out, or claimed and filled as the rest arrives). Frames of one connection
//     arrive in order, so messages of one (peer, group, channel, tag) stay in order.
//  3. A frame whose size differs from the receive's fails that receive (size_mismatch) and
//     is read and dropped: the connection stays usable.
//  4. A request destroyed unfinished withdraws: a posted receive stops being a target (the
//     rest of its frame is dropped), a send not started is dropped, and one partly written
//     keeps its bytes in a copy so that the stream stays whole.
//  5. A connection that breaks (the peer exited or failed) fails every transfer on it,
//     naming the peer; a wait has its own deadline and leaves the connection as it was.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distml/comm/engine.h"

namespace c10d {
class Store;
}

namespace distml::comm::gloo {

/// Identifies a group's messages on the shared connections: 0 for the world, then
/// sub_group_id(parent, split) for each split.
std::uint64_t sub_group_id(std::uint64_t parent, std::uint64_t split_id, int color);

class PeerMesh {
 public:
  /// Listens on `host` (an address of this machine that the peers reach: the one gloo's own
  /// connections use), publishes it in `store` and connects to every other rank; TimeoutError
  /// naming the ranks not connected at `deadline`.
  PeerMesh(c10d::Store& store, int rank, int size, const std::string& host, Deadline deadline);
  ~PeerMesh();
  PeerMesh(const PeerMesh&) = delete;
  PeerMesh& operator=(const PeerMesh&) = delete;

  /// Where a transfer goes within a group: the peer's world rank (its connection) and its rank
  /// in the group (for messages).
  struct Peer {
    std::uint64_t group = 0;
    int world_rank = 0;
    int group_rank = 0;
  };
  /// Starts a transfer; `data` must stay valid until the request completes or is destroyed.
  static RequestPtr send(const std::shared_ptr<PeerMesh>& mesh, Peer peer, Channel ch, int tag,
                         const void* data, std::size_t bytes);
  static RequestPtr recv(const std::shared_ptr<PeerMesh>& mesh, Peer peer, Channel ch, int tag,
                         void* data, std::size_t bytes);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace distml::comm::gloo
