#include "distml/core/run_id.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "distml/core/error.h"

namespace distml {
namespace {

bool valid_run_id(const std::string& id) {
  if (id.empty() || id.size() > kRunIdBytes) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

std::string new_run_id() {
  std::random_device entropy;
  const unsigned long long bits = (static_cast<unsigned long long>(entropy()) << 32) ^ entropy();
  char id[kRunIdBytes + 1];
  std::snprintf(id, sizeof id, "%016llx", bits);
  return id;
}

}  // namespace

std::string this_run_id() {
  if (const char* given = std::getenv(kRunIdVar)) {
    if (!valid_run_id(given))
      throw UsageError(cat(kRunIdVar, "='", given, "': a run id is 1-", kRunIdBytes,
                           " letters, digits, '-', '_' or '.'"));
    return given;
  }
  const std::string id = new_run_id();
  ::setenv(kRunIdVar, id.c_str(), 1);
  return id;
}

}  // namespace distml
