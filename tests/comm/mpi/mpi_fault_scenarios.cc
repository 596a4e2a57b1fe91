// Fault scenarios of the mpi engine, one per mpirun job: `distml_mpi_fault_tests SCENARIO`.
// Each rank checks that it got the error the scenario must give and prints one line; then
// the ranks compare verdicts over a separate communicator (the "referee", with a generous
// timeout), and every rank exits 0 only if every rank passed. The exit is also a check of
// clean-up: a scenario that left MPI operations pending would make the exit handler skip
// MPI_Finalize, and mpirun would then fail the test.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/comm/mpi/mpi_connect.h"

namespace distml::test {
namespace {

using namespace std::chrono_literals;
using comm::Algorithm;
using comm::Buffer;
using comm::CommOptions;
using comm::Communicator;
using comm::DType;
using comm::Millis;

constexpr Millis kShort{1000};  // the timeout under test
constexpr Millis kGenerous{60'000};

CommOptions short_options() {
  CommOptions o;
  o.timeout = kShort;
  o.diagnose_grace = 500ms;
  return o;
}

CommOptions generous_options() {
  CommOptions o;
  o.timeout = kGenerous;
  return o;
}

struct Caught {
  std::string kind;  // "", "TimeoutError", "CommError" or "other"
  std::string what;
  bool contains(const std::string& s) const { return what.find(s) != std::string::npos; }
};

Caught catch_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const TimeoutError& e) {
    return {"TimeoutError", e.what()};
  } catch (const CommError& e) {
    return {"CommError", e.what()};
  } catch (const std::exception& e) {
    return {"other", e.what()};
  }
  return {};
}

std::unique_ptr<Communicator> fresh(const CommOptions& options) {
  return std::make_unique<Communicator>(comm::mpi::connect_engine(kGenerous), options);
}

// What one rank saw, and whether that is what the scenario must give.
struct Verdict {
  bool ok = true;
  bool clear = false;  // for scenarios where one clear message somewhere is enough
};

void note(int rank, const char* step, const Caught& c, bool ok, Verdict& v) {
  std::printf("[rank %d] %s: %s: got %s%s%s\n", rank, step, ok ? "ok" : "FAIL",
              c.kind.empty() ? "no error" : c.kind.c_str(), c.what.empty() ? "" : ": ",
              c.what.c_str());
  std::fflush(stdout);
  v.ok = v.ok && ok;
}

// A rank that builds its Communicator after the others gave up is named by all of them;
// the late rank itself times out waiting for rank 0.
Verdict late_communicator(Communicator& referee) {
  Verdict v;
  auto engine = comm::mpi::connect_engine(kGenerous);  // MPI itself is up everywhere
  const int r = engine->rank(), late = engine->size() - 1;
  referee.barrier();
  if (r == late) std::this_thread::sleep_for(kShort + 1500ms);
  Caught c = catch_error([&] { Communicator comm(std::move(engine), short_options()); });
  const bool ok =
      r == late ? c.kind == "TimeoutError"
                : c.kind == "TimeoutError" &&
                      c.contains(cat("did not arrive within ", kShort.count(), " ms: ", late));
  note(r, "late communicator", c, ok, v);
  return v;
}

// Every rank fails (error or timeout) and at least one says clearly that sizes differ.
Verdict mismatched_lengths(Communicator& referee) {
  Verdict all;
  const int r = referee.rank();
  for (Algorithm a :
       {Algorithm::ring, Algorithm::halving_doubling, Algorithm::tree, Algorithm::shm}) {
    referee.barrier();
    auto comm = fresh(short_options());
    std::vector<float> v(100 + r, 1.0f);  // small: every send completes eagerly
    Caught c = catch_error([&] { comm->allreduce(comm::view(v), {.algorithm = a}); });
    Verdict one;
    note(r, cat("mismatched lengths, ", comm::algorithm_name(a)).c_str(), c, !c.kind.empty(), one);
    std::int32_t worst = one.ok ? 1 : 0;
    std::int32_t clearest = c.contains("expected") || c.contains("disagree") ? 1 : 0;
    referee.allreduce(Buffer{&worst, 1, DType::i32}, {.op = comm::ReduceOp::min});
    referee.allreduce(Buffer{&clearest, 1, DType::i32}, {.op = comm::ReduceOp::max});
    if (r == 0 && !clearest)
      std::printf("[rank 0] mismatched lengths, %s: FAIL: no rank named the size mismatch\n",
                  std::string(comm::algorithm_name(a)).c_str());
    all.ok = all.ok && one.ok && clearest;
  }
  // The native algorithm cannot see sizes; the agreement check stops every rank instead.
  referee.barrier();
  auto options = short_options();
  options.check_collectives = true;
  auto comm = fresh(options);
  std::vector<float> v(10 + (r == referee.size() - 1 ? 1 : 0), 1.0f);
  Caught c = catch_error([&] { comm->allreduce(comm::view(v), {.algorithm = Algorithm::native}); });
  note(r, "mismatched lengths, native with check_collectives", c,
       c.kind == "CommError" && c.contains("disagree on the element count"), all);
  return all;
}

Verdict fingerprint_mismatch(Communicator& referee) {
  Verdict v;
  const int r = referee.rank();
  referee.barrier();
  auto options = short_options();
  options.fingerprint = r == 1 ? 0xbad : 0x900d;
  Caught c = catch_error([&] { fresh(options); });
  note(r, "fingerprint mismatch", c, c.kind == "CommError" && c.contains("fingerprint"), v);
  return v;
}

// Rank 1 skips a native all-reduce: the others time out naming it, with an MPI_Iallreduce
// that can never complete. At exit they must skip MPI_Finalize (it would wait for rank 1's
// part forever) and say so; mpirun then ends the job with a failure, not a hang. CTest
// checks for that message instead of the exit status.
Verdict missing_from_native(Communicator& referee) {
  Verdict v;
  const int r = referee.rank();
  referee.barrier();
  auto comm = fresh(short_options());
  if (r == 1) return v;
  // Above the size that uses the blocking MPI_Allreduce: this timeout is an exception.
  std::vector<float> data(100'000, 1.0f);
  Caught c =
      catch_error([&] { comm->allreduce(comm::view(data), {.algorithm = Algorithm::native}); });
  note(r, "missing from native allreduce", c,
       c.kind == "TimeoutError" && c.contains("ranks that did not arrive: 1"), v);
  return v;
}

// A small native all-reduce blocks in MPI_Allreduce: at the deadline the watchdog names the
// missing rank and ends the process (checked by CTest on the output).
Verdict blocked_small_native(Communicator& referee) {
  referee.barrier();
  auto comm = fresh(short_options());
  if (referee.rank() == 1) return {};
  std::vector<float> data(100, 1.0f);
  comm->allreduce(comm::view(data), {.algorithm = Algorithm::native});
  return {};  // not reached
}

// Before MPI exists: rank 1 starts late, so rank 0's first connect times out in MPI_Init;
// its second one waits for the same initialisation and succeeds.
bool init_timeout_before_mpi(int world_rank) {
  if (world_rank == 1) {
    std::this_thread::sleep_for(2s);
    return true;
  }
  if (world_rank != 0) return true;
  Verdict v;
  Caught c = catch_error([] { comm::mpi::connect_engine(500ms); });
  note(0, "init timeout", c,
       c.kind == "TimeoutError" && c.contains("MPI_Init did not complete within 500 ms"), v);
  return v.ok;
}

}  // namespace
}  // namespace distml::test

int main(int argc, char** argv) {
  using namespace distml::test;
  using Scenario = Verdict (*)(distml::comm::Communicator&);
  const std::pair<std::string, Scenario> scenarios[] = {
      {"late_communicator", late_communicator},
      {"mismatched_lengths", mismatched_lengths},
      {"fingerprint_mismatch", fingerprint_mismatch},
      {"missing_from_native", missing_from_native},
      {"blocked_small_native", blocked_small_native},
      {"init_timeout", nullptr},  // runs before MPI starts, below
  };
  const std::string name = argc > 1 ? argv[1] : "";
  auto it = std::find_if(std::begin(scenarios), std::end(scenarios),
                         [&](const auto& s) { return s.first == name; });
  if (it == std::end(scenarios)) {
    std::fprintf(stderr, "unknown scenario '%s'; valid:", name.c_str());
    for (const auto& s : scenarios) std::fprintf(stderr, " %s", s.first.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  bool ok = true;
  if (name == "init_timeout") {
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    ok = init_timeout_before_mpi(world_rank ? std::atoi(world_rank) : 0);
  }
  auto referee = fresh(generous_options());
  if (it->second) ok = it->second(*referee).ok && ok;
  std::int32_t all = ok ? 1 : 0;
  referee->allreduce(distml::comm::Buffer{&all, 1, distml::comm::DType::i32},
                     {.op = distml::comm::ReduceOp::min});
  if (referee->rank() == 0)
    std::printf("%s: %s\n", name.c_str(), all ? "every rank passed" : "FAILED on some rank");
  return all ? 0 : 1;
}
