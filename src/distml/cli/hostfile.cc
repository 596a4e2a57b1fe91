#include "hostfile.h"

#include <fstream>
#include <sstream>

#include "distml/core/error.h"

namespace distml::cli {

std::string first_host(const std::string& hostfile) {
  std::ifstream in(hostfile);
  if (!in) throw UsageError(cat("--hostfile ", hostfile, ": cannot read it"));
  std::string word;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    if (words >> word) return word;
  }
  throw UsageError(cat("--hostfile ", hostfile, ": names no host"));
}

}  // namespace distml::cli
