// Starting a rank on another machine without mpirun, as Horovod's elastic mode does: through a
// remote shell (ssh by default), which runs one command line on the host. Its environment and
// folder do not travel with it, so they go into that line:
//   RSH... HOST "cd 'DIR' && exec env 'K=V' ... 'PROGRAM' 'ARG' ..."
// A remote shell passes no signal on, but it does pass the standard input: the launcher gives
// its orders to such ranks there, and a rank whose standard input closes knows its launcher is
// gone (cli/launcher_orders.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace distml::cli {

/// `word` as one word of a POSIX shell's command line: in single quotes, each ' as '\''.
std::string shell_quote(const std::string& word);

/// The command line that runs `argv` on `host` through `rsh` (its words: "ssh -o
/// BatchMode=yes"), in folder `dir` with `env` added to the environment.
std::vector<std::string> remote_command(const std::string& rsh, const std::string& host,
                                        const std::string& dir,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        const std::vector<std::string>& argv);

/// Whether `host` names this machine ("localhost" or its host name): its ranks start here,
/// without a remote shell.
bool is_this_host(const std::string& host);

}  // namespace distml::cli
