#include "distml/comm/slurm_env.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "distml/core/error.h"

namespace distml::comm {
namespace {

// More hosts than any allocation has: a range past it is a typing mistake, not a cluster.
constexpr std::size_t kMaxHosts = 1 << 20;

std::string text_of(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value ? value : "";
}

int int_of(const EnvLookup& env, const char* name, int unset) {
  const std::string text = text_of(env, name);
  if (text.empty()) return unset;
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw UsageError(cat("environment variable ", name, "='", text,
                         "' is not a non-negative number (Slurm sets it to one)"));
  return value;
}

// A number for the port formula; an ID that is not one (never seen from Slurm) still maps to
// one, consistently on every task.
std::uint64_t id_number(const std::string& id) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), value);
  if (ec == std::errc() && end == id.data() + id.size()) return value;
  return std::hash<std::string>{}(id);
}

// The pieces of `list` between the commas that are outside brackets.
std::vector<std::string_view> top_level_items(std::string_view list) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (i > start) items.push_back(list.substr(start, i - start));
      start = i + 1;
    } else if (list[i] == '[') {
      ++depth;
    } else if (list[i] == ']') {
      --depth;
    }
  }
  return items;
}

std::uint64_t range_bound(std::string_view list, std::string_view digits) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    throw UsageError(
        cat("Slurm host list '", list, "': '", digits, "' in brackets is not a number"));
  return value;
}

// The values of one bracket group's contents, "1-3,5" -> 1 2 3 5, each as wide as its range's
// lower bound is written ("08-10" -> 08 09 10), as Slurm pads them.
std::vector<std::string> bracket_values(std::string_view list, std::string_view ranges) {
  std::vector<std::string> values;
  for (std::string_view range : top_level_items(ranges)) {
    const auto dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::uint64_t lo = range_bound(list, lo_text);
    const std::uint64_t hi =
        dash == std::string_view::npos ? lo : range_bound(list, range.substr(dash + 1));
    if (hi < lo)
      throw UsageError(cat("Slurm host list '", list, "': range ", range, " runs backwards"));
    if (hi - lo >= kMaxHosts)
      throw UsageError(cat("Slurm host list '", list, "': range ", range, " names more than ",
                           kMaxHosts, " hosts"));
    for (std::uint64_t v = lo; v <= hi; ++v) {
      std::string number = std::to_string(v);
      if (number.size() < lo_text.size()) number.insert(0, lo_text.size() - number.size(), '0');
      values.push_back(std::move(number));
    }
  }
  // An empty group names no host: it would multiply the work of the groups around it with
  // nothing to show for it (the size checks below count hosts named).
  if (values.empty())
    throw UsageError(cat("Slurm host list '", list, "': brackets [", ranges, "] name no host"));
  return values;
}

// Appends `prefix` followed by every expansion of `item` (text with bracket groups) to `out`.
void expand_item(std::string_view list, std::string_view item, const std::string& prefix,
                 std::vector<std::string>& out) {
  const auto open = item.find('[');
  if (open == std::string_view::npos) {
    if (item.find(']') != std::string_view::npos)
      throw UsageError(cat("Slurm host list '", list, "': ']' without '['"));
    out.push_back(prefix + std::string(item));
    return;
  }
  const auto close = item.find(']', open);
  if (close == std::string_view::npos)
    throw UsageError(cat("Slurm host list '", list, "': '[' without ']'"));
  const std::string head = prefix + std::string(item.substr(0, open));
  for (const auto& value : bracket_values(list, item.substr(open + 1, close - open - 1))) {
    expand_item(list, item.substr(close + 1), head + value, out);
    if (out.size() > kMaxHosts)
      throw UsageError(cat("Slurm host list '", list, "' names more than ", kMaxHosts, " hosts"));
  }
}

}  // namespace

const char* process_env(const char* name) { return std::getenv(name); }

SlurmEnv read_slurm_env(const EnvLookup& env) {
  SlurmEnv s;
  s.job_id = text_of(env, "SLURM_JOB_ID");
  s.step_id = text_of(env, "SLURM_STEP_ID");
  s.procid = int_of(env, "SLURM_PROCID", -1);
  s.localid = int_of(env, "SLURM_LOCALID", -1);
  // A batch script sees the job's task count; a task sees its step's, which srun -n may make
  // smaller.
  const int job_tasks = int_of(env, "SLURM_NTASKS", 0);
  s.ntasks = s.step_id.empty() ? job_tasks : int_of(env, "SLURM_STEP_NUM_TASKS", job_tasks);
  s.nodelist = text_of(env, "SLURM_STEP_NODELIST");
  if (s.nodelist.empty() || s.step_id.empty()) s.nodelist = text_of(env, "SLURM_JOB_NODELIST");
  return s;
}

std::vector<std::string> expand_hostlist(std::string_view hostlist) {
  std::vector<std::string> hosts;
  int depth = 0;
  for (char c : hostlist) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0 || depth > 1)
      throw UsageError(cat("Slurm host list '", hostlist, "': brackets do not pair up"));
  }
  if (depth != 0) throw UsageError(cat("Slurm host list '", hostlist, "': '[' without ']'"));
  for (std::string_view item : top_level_items(hostlist)) expand_item(hostlist, item, "", hosts);
  return hosts;
}

int rendezvous_port(const SlurmEnv& slurm) {
  // Below Linux's ephemeral range (32768-60999), so that no outgoing connection holds the port
  // by chance; 16 ports per job, one per step (modulo 16), so that jobs started one after
  // another and the steps of one job get different ports. Jobs 2125 IDs apart share one
  // (16 * 2125 = 2 * 17000): MASTER_PORT is the way out.
  constexpr std::uint64_t kBase = 15000, kSpan = 17000, kStepsPerJob = 16;
  const std::uint64_t job = id_number(slurm.job_id), step = id_number(slurm.step_id);
  return static_cast<int>(kBase + (job * kStepsPerJob + step % kStepsPerJob) % kSpan);
}

std::vector<std::pair<std::string, std::string>> slurm_rank_variables(const EnvLookup& env) {
  if (env("OMPI_COMM_WORLD_RANK")) return {};  // mpirun's tasks inherit its srun's SLURM_PROCID
  const SlurmEnv slurm = read_slurm_env(env);
  if (!slurm.in_srun_task()) return {};
  std::vector<std::pair<std::string, std::string>> wanted{{"RANK", std::to_string(slurm.procid)}};
  if (slurm.ntasks > 0) wanted.emplace_back("WORLD_SIZE", std::to_string(slurm.ntasks));
  if (slurm.localid >= 0) wanted.emplace_back("LOCAL_RANK", std::to_string(slurm.localid));
  if (const auto hosts = expand_hostlist(slurm.nodelist); !hosts.empty())
    wanted.emplace_back("MASTER_ADDR", hosts.front());  // task 0 runs on the step's first node
  wanted.emplace_back("MASTER_PORT", std::to_string(rendezvous_port(slurm)));
  std::vector<std::pair<std::string, std::string>> unset;
  for (auto& [name, value] : wanted)
    if (!env(name.c_str())) unset.emplace_back(name, value);
  return unset;
}

void adopt_slurm_rank_variables() {
  for (const auto& [name, value] : slurm_rank_variables()) ::setenv(name.c_str(), value.c_str(), 0);
}

bool srun_task_without_pmix(const EnvLookup& env) {
  return !env("OMPI_COMM_WORLD_RANK") && !env("PMIX_RANK") && read_slurm_env(env).in_srun_task();
}

void check_mpi_can_start(const EnvLookup& env) {
  if (!srun_task_without_pmix(env)) return;
  const SlurmEnv slurm = read_slurm_env(env);
  throw UsageError(cat("srun started this task (SLURM_PROCID=", slurm.procid, " in step ",
                       slurm.job_id, ".", slurm.step_id, ") without PMIx, which the mpi engine ",
                       "needs to start: run it with --engine gloo (or DISTML_ENGINE=gloo), or ",
                       "start it with srun --mpi=pmix"));
}

}  // namespace distml::comm
