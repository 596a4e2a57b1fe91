// The hosts of an elastic job: a discovery script's list, and the world of each start.
#include "elastic_hosts.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "host_discovery.h"
#include "hostfile.h"

namespace distml::cli {
namespace {

using data::testing::TempDir;

std::string names(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += cat(out.empty() ? "" : ",", h.host, ":", h.slots);
  return out;
}

// An executable script printing `text`, in `dir`.
std::string script(const TempDir& dir, const std::string& name, const std::string& body) {
  const auto path = dir.write(name, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

void expect_refused(const std::string& text, const std::string& says) {
  try {
    parse_host_list(text, "hosts.sh");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(HostDiscovery, ReadsHostsWithOrWithoutSlotsSkippingBlankLinesAndComments) {
  EXPECT_EQ(names(parse_host_list("h0\n  h1:2  \n\n# h9\nh2:1", "s")), "h0:0,h1:2,h2:1");
  EXPECT_EQ(names(parse_host_list("", "s")), "");
}

TEST(HostDiscovery, RefusesAMalformedLineNamingIt) {
  expect_refused("h0\nh1:x\n", "hosts.sh:2: 'h1:x': slots must be a count >= 1");
  expect_refused("h0:0\n", "hosts.sh:1");
  expect_refused("h0:\n", "slots must be a count");
  expect_refused(":3\n", "not a host name");
  expect_refused("h0 h1\n", "not a host name");
  expect_refused("h0\nh0:2\n", "hosts.sh:2: 'h0:2': host listed twice");
}

TEST(HostDiscovery, RunsTheScriptAndRefusesOneThatFails) {
  TempDir dir;
  EXPECT_EQ(names(discover_hosts(script(dir, "ok.sh", "echo h1; echo h0:3\n"))), "h1:0,h0:3");
  EXPECT_THROW(discover_hosts(script(dir, "fails.sh", "echo h0; exit 3\n")), UsageError);
  EXPECT_THROW(discover_hosts(dir.file("missing.sh")), UsageError);
}

TEST(ElasticHosts, TakesTheHostsInOrderUpToMaxNp) {
  const std::vector<HostSlots> hosts{{"h0", 2}, {"h1", 2}, {"h2", 2}};
  EXPECT_EQ(names(ElasticHosts(hosts, "", 0).world()), "h0:2,h1:2,h2:2");
  EXPECT_EQ(names(ElasticHosts(hosts, "", 3).world()), "h0:2,h1:1");
  ElasticHosts elastic(hosts, "", 0);
  elastic.lost("h0");  // without a script, for good: nothing can announce it again
  EXPECT_EQ(names(elastic.world()), "h1:2,h2:2");
  EXPECT_EQ(elastic.joining(elastic.world()), "");
}

TEST(ElasticHosts, ALostHostJoinsAgainWhenTheScriptListsIt) {
  TempDir dir;
  const auto list = dir.write("hosts", "h0\nh2:1\n");
  const auto discovery = script(dir, "discover.sh", "cat " + list + "\n");
  ElasticHosts elastic({{"h0", 2}, {"h1", 2}, {"h2", 2}}, discovery, 4);
  auto world = elastic.world();  // the script's hosts, in the job's order, with its slots
  EXPECT_EQ(names(world), "h0:2,h2:1");
  EXPECT_EQ(elastic.joining(world), "");
  elastic.lost("h2");
  world = elastic.world();
  EXPECT_EQ(names(world), "h0:2");
  EXPECT_EQ(elastic.joining(world), "h2");  // the script still lists it: it comes back
  dir.write("hosts", "h1\nh0\n");
  world = elastic.world();
  EXPECT_EQ(names(world), "h0:2,h1:2");
  EXPECT_EQ(elastic.joining(world), "");  // --max-np 4 reached
  dir.write("hosts", "h7\n");
  EXPECT_THROW(elastic.world(), UsageError);  // not one of the job's hosts
  EXPECT_EQ(elastic.joining({}), "");         // while the job runs: reported, and it goes on
}

TEST(ElasticHosts, OnRealMachinesTheScriptMayListHostsTheJobWasNotGiven) {
  TempDir dir;
  const auto list = dir.write("hosts", "n9:2\nh0\nn8\n");
  const auto discovery = script(dir, "discover.sh", "cat " + list + "\n");
  ElasticHosts elastic({{"h0", 2}}, discovery, 0, /*other_hosts=*/true);
  // The job's own hosts first, then the others in the script's order, one rank unless it says.
  auto world = elastic.world();
  EXPECT_EQ(names(world), "h0:2,n9:2,n8:1");
  elastic.lost("n9");
  world = elastic.world();
  EXPECT_EQ(names(world), "h0:2,n8:1");
  EXPECT_EQ(elastic.joining(world), "n9");
}

TEST(Hostfile, ReadsHostsAndSlotsAddingAHostNamedTwice) {
  TempDir dir;
  const auto file = dir.write("hosts", "# cluster\nn1 slots=2 max_slots=4\n\nn2  # one slot\nn1\n");
  EXPECT_EQ(names(read_hostfile(file)), "n1:3,n2:1");
}

TEST(Hostfile, RefusesWhatIsNotAHostLineNamingTheLine) {
  TempDir dir;
  const auto refused = [&](const std::string& text, const std::string& says) {
    try {
      read_hostfile(dir.write("hosts", text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("n1\nn2 slot=2\n", "hosts:2: 'slot=2': expected slots=N");
  refused("n1 slots=0\n", "hosts:1: '0' is not a count >= 1");
  refused("# none\n\n", "names no host");
  EXPECT_THROW(read_hostfile(dir.file("missing")), UsageError);
}

}  // namespace
}  // namespace distml::cli
