// The distml version, compared between ranks when a communicator starts.
#pragma once

namespace distml {
inline constexpr const char* kVersion = "0.1.0";
}
