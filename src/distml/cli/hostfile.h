// An OpenMPI hostfile, as distml launch reads it: the first host is where the gloo ranks meet.
#pragma once

#include <string>

namespace distml::cli {

/// The first host `hostfile` names: the first word of a line that is not a comment (after '#').
/// UsageError naming the file when it cannot be read or names none.
std::string first_host(const std::string& hostfile);

}  // namespace distml::cli
