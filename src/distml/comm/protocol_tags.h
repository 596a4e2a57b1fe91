// The tags of distml's own messages on the collective channel, in one place: two protocols
// sharing a tag take each other's messages (the stall inspector's pre-posted receives took
// the shared-memory segment's name once both used 30005).
#pragma once

namespace distml::comm::protocol_tag {

inline constexpr int kHello = 30001;           // start-up handshake (handshake.cc)
inline constexpr int kVerdict = 30002;         // its verdict
inline constexpr int kDiagnose = 30003;        // who did not arrive (communicator.cc)
inline constexpr int kHosts = 30004;           // each rank's host (handshake.cc)
inline constexpr int kStall = 30005;           // the stall inspector's status
inline constexpr int kShmName = 30006;         // a host's shared-memory segment name
inline constexpr int kEngineDiagnose = 30007;  // the mpi engine watchdog's diagnosis

}  // namespace distml::comm::protocol_tag
