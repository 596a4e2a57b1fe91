#include "remote_shell.h"

#include <unistd.h>

#include <sstream>

#include "distml/core/error.h"

namespace distml::cli {

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::string> remote_command(const std::string& rsh, const std::string& host,
                                        const std::string& dir,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        const std::vector<std::string>& argv) {
  std::vector<std::string> command;
  std::istringstream words(rsh);
  for (std::string w; words >> w;) command.push_back(w);
  if (command.empty()) throw UsageError("--rsh: no command given");
  std::string line = cat("cd ", shell_quote(dir), " && exec env");
  for (const auto& [name, value] : env) line += " " + shell_quote(name + "=" + value);
  for (const auto& a : argv) line += " " + shell_quote(a);
  command.push_back(host);
  command.push_back(line);
  return command;
}

bool is_this_host(const std::string& host) {
  char name[256] = {};
  return host == "localhost" || (::gethostname(name, sizeof name - 1) == 0 && host == name);
}

}  // namespace distml::cli
