// The timeline's recorder, its trace-event JSON, the clock alignment and the gathering, on
// local ranks whose clocks are shifted by known offsets.
#include "distml/core/timeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/comm/timeline_exchange.h"

namespace distml {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
           ".json"))
      .string();
}

// The events of `trace` named `name`.
std::vector<json> named(const json& trace, const std::string& name) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["name"] == name) out.push_back(e);
  return out;
}

// Rank r's clock runs ahead of the steady clock by r x 3.7 s plus 12345 ns: far more than any
// error the alignment allows, so a wrong sign or a missing offset cannot pass.
std::int64_t offset_of(int rank) { return rank * 3'700'000'000LL + (rank ? 12'345 : 0); }

TEST(Timeline, WritesSpansRelativeToTheOriginExactly) {
  Timeline timeline(3, /*origin_ns=*/1'000'000);
  auto& main = timeline.lane("main");
  main.add_ns("step", 1'001'500, 1'004'000, "step", 7);
  main.add_ns("forward", 999'999, 1'000'000);  // before the origin: a negative time
  timeline.lane("bucket 0").add_ns("bucket", 1'002'000, 1'001'000);  // ends first: duration 0
  EXPECT_EQ(&timeline.lane("main"), &main);
  const json trace = json::parse(trace_file_text({timeline.events_json()}, "{}"));
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  const auto step = named(trace, "step").at(0);
  EXPECT_EQ(step["ph"], "X");
  EXPECT_EQ(step["pid"], 3);
  EXPECT_EQ(step["tid"], 0);
  EXPECT_DOUBLE_EQ(step["ts"].get<double>(), 1.5);  // microseconds
  EXPECT_DOUBLE_EQ(step["dur"].get<double>(), 2.5);
  EXPECT_EQ(step["args"]["step"], 7);
  EXPECT_DOUBLE_EQ(named(trace, "forward").at(0)["ts"].get<double>(), -0.001);
  const auto bucket = named(trace, "bucket").at(0);
  EXPECT_EQ(bucket["tid"], 1);
  EXPECT_EQ(bucket["dur"].get<double>(), 0.0);
  EXPECT_EQ(named(trace, "process_name").at(0)["args"]["name"], "rank 3");
  const auto lanes = named(trace, "thread_name");
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes[0]["args"]["name"], "main");
  EXPECT_EQ(lanes[1]["args"]["name"], "bucket 0");
}

TEST(Timeline, SpanIsANoOpWithoutALane) {
  { Span nothing(nullptr, "step"); }  // must not crash
  Timeline timeline(0);
  { Span span(lane_of(&timeline, "main"), "step", "step", 1); }
  ASSERT_EQ(timeline.lane("main").events().size(), 1u);
  EXPECT_GE(timeline.lane("main").events()[0].duration_ns, 0);
  EXPECT_EQ(lane_of(nullptr, "main"), nullptr);
}

TEST(TimelineExchange, AlignsShiftedClocksWithinTheirBound) {
  for (int size : {2, 4}) {
    std::vector<comm::ClockAlignment> got(size);
    comm::local::run_ranks(size, {}, [&](comm::Communicator& comm) {
      const std::int64_t offset = offset_of(comm.rank());
      got[comm.rank()] =
          comm::align_clocks(comm, [offset] { return Timeline::ns(Clock::now()) + offset; });
    });
    EXPECT_EQ(got[0].error_ns, 0);
    for (int r = 1; r < size; ++r) {
      // Rank 0's t0 read on rank r's clock is t0 + offset_r; the estimate must be within the
      // bound it states, and that bound must be a round trip of a local rendezvous (well
      // under a second even on a loaded machine), not a shift the alignment failed to see.
      const std::int64_t want = got[0].origin_ns + offset_of(r);
      EXPECT_LE(std::llabs(got[r].origin_ns - want), got[r].error_ns) << "rank " << r;
      EXPECT_LT(got[r].error_ns, 500'000'000) << "rank " << r;
    }
  }
}

TEST(TimelineExchange, GatheredRanksShowOneMomentAtOneTime) {
  const std::string path = temp_path("timeline_gather");
  const int size = 3;
  // A moment in the near future, as each rank's shifted clock reads it.
  const std::int64_t moment = Timeline::ns(Clock::now()) + 2'000'000'000LL;
  comm::local::run_ranks(size, {}, [&](comm::Communicator& comm) {
    const std::int64_t offset = offset_of(comm.rank());
    const auto aligned =
        comm::align_clocks(comm, [offset] { return Timeline::ns(Clock::now()) + offset; });
    Timeline timeline(comm.rank(), aligned.origin_ns, aligned.error_ns);
    timeline.lane("main").add_ns("moment", moment + offset, moment + offset + 1000);
    comm::gather_timeline(timeline, comm, path);
  });
  const json trace = read_json(path);
  std::filesystem::remove(path);
  const auto moments = named(trace, "moment");
  ASSERT_EQ(moments.size(), static_cast<std::size_t>(size));
  const auto& errors = trace["otherData"]["clock_error_us"];
  ASSERT_EQ(errors.size(), static_cast<std::size_t>(size));
  EXPECT_TRUE(trace["otherData"]["missing_ranks"].empty());
  const double t0 = moments[0]["ts"];  // rank 0's own clock: no error
  for (const auto& e : moments) {
    const int r = e["pid"];
    // Each rank's time is off by at most its alignment's bound; the file rounds to 1 ns.
    EXPECT_NEAR(e["ts"].get<double>(), t0, errors[r].get<double>() + 0.001) << "rank " << r;
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1.0);
  }
  std::vector<std::string> processes;
  for (const auto& e : named(trace, "process_name")) processes.push_back(e["args"]["name"]);
  EXPECT_EQ(processes, (std::vector<std::string>{"rank 0", "rank 1", "rank 2"}));
}

TEST(TimelineExchange, LeavesOutARankThatNeverSends) {
  const std::string path = temp_path("timeline_missing");
  comm::CommOptions options;
  options.timeout = comm::Millis(200);  // rank 0 then waits its floor of 1 s
  comm::local::run_ranks(2, options, [&](comm::Communicator& comm) {
    Timeline timeline(comm.rank());
    timeline.lane("main").add_ns("step", timeline.origin_ns(), timeline.origin_ns() + 10);
    if (comm.rank() == 0) comm::gather_timeline(timeline, comm, path);
  });
  const json trace = read_json(path);
  std::filesystem::remove(path);
  EXPECT_EQ(trace["otherData"]["missing_ranks"], json::array({1}));
  ASSERT_EQ(named(trace, "step").size(), 1u);
  EXPECT_EQ(named(trace, "step")[0]["pid"], 0);
}

// The lines of a stream file as JSON objects; a last line cut short is left out.
std::vector<json> stream_events(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> events;
  for (std::string line; std::getline(in, line);) {
    if (!json::accept(line)) continue;
    events.push_back(json::parse(line));
  }
  return events;
}

TEST(TimelineRecording, AFailedRunLeavesEveryRanksStream) {
  const std::string path = temp_path("timeline_failed");
  EXPECT_THROW(comm::local::run_ranks(2, {},
                                      [&](comm::Communicator& comm) {
                                        comm::TimelineRecording recording(comm, path, 3);
                                        auto& lane = recording.timeline()->lane("main");
                                        lane.add_ns("step", 0, 1);  // streamed at once
                                        lane.add_ns("held", 1, 2);  // until the end
                                        throw Error("the run failed");
                                      }),
               Error);
  EXPECT_FALSE(std::filesystem::exists(comm::attempt_path(path, 3)));
  for (int rank = 0; rank < 2; ++rank) {
    const std::string stream = comm::stream_path(path, 3, rank);
    const auto events = stream_events(stream);
    std::filesystem::remove(stream);
    std::vector<std::string> names;
    for (const auto& e : events)
      if (e["pid"] == rank) names.push_back(e["name"]);
    EXPECT_EQ(names, (std::vector<std::string>{"process_name", "process_sort_index", "thread_name",
                                               "thread_sort_index", "step", "held"}))
        << "rank " << rank;
  }
}

TEST(TimelineRecording, AWholeRunWritesItsAttemptsFileAndRemovesTheStreams) {
  const std::string path = temp_path("timeline_whole.json");
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    comm::TimelineRecording recording(comm, path, 1);
    recording.timeline()->lane("main").add_ns("step", recording.timeline()->origin_ns(),
                                              recording.timeline()->origin_ns() + 10);
    recording.finish();
  });
  const std::string written = comm::attempt_path(path, 1);
  EXPECT_EQ(std::filesystem::path(written).filename().string(),
            std::filesystem::path(path).stem().string() + ".attempt1.json");
  const json trace = read_json(written);
  std::filesystem::remove(written);
  EXPECT_EQ(named(trace, "step").size(), 2u);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_FALSE(std::filesystem::exists(comm::stream_path(path, 1, rank))) << "rank " << rank;
}

// A lane streams its spans itself, a quarter of a second apart at most: a span that ends
// later than that after the lane's last append is in the file before flush_stream().
TEST(Timeline, StreamsItsSpansAsTheyEnd) {
  const std::string path = temp_path("timeline_stream");
  Timeline timeline(0);
  timeline.stream_to(path);
  auto& lane = timeline.lane("main");
  const std::int64_t now = Timeline::ns(Clock::now());
  lane.add_ns("first", now, now + 1);  // the lane's first append
  lane.add_ns("held", now, now + 2);   // within 0.25 s of it: held
  EXPECT_EQ(named(json{{"traceEvents", stream_events(path)}}, "held").size(), 0u);
  // Ends 10 s on, however slowly this test runs: streams what was held.
  lane.add_ns("later", now, now + 10'000'000'000);
  const json streamed{{"traceEvents", stream_events(path)}};
  for (const char* name : {"first", "held", "later"})
    EXPECT_EQ(named(streamed, name).size(), 1u) << name;
  std::filesystem::remove(path);
}

TEST(TimelineRecording, RecordsNothingWithoutAPath) {
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    comm::TimelineRecording recording(comm, "");
    EXPECT_EQ(recording.timeline(), nullptr);
    recording.finish();
  });
}

}  // namespace
}  // namespace distml
