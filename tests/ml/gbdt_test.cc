#include "distml/ml/gbdt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "distml/core/error.h"
#include "distml/ml/estimator.h"
#include "distml/ml/gbdt_binning.h"
#include "synthetic_shards.h"

namespace distml::ml {
namespace {

using testing::integer_blobs;
using testing::integer_regression;
using testing::make_blobs;
using testing::on_ranks;

// Rows [begin, end) of `all`.
LocalData rows_of(const LocalData& all, std::size_t begin, std::size_t end) {
  LocalData d = all;
  d.rows = d.global_rows = end - begin;
  d.x.assign(all.x.begin() + begin * all.features, all.x.begin() + end * all.features);
  if (!all.y.empty()) d.y.assign(all.y.begin() + begin, all.y.begin() + end);
  if (!all.targets.empty())
    d.targets.assign(all.targets.begin() + begin, all.targets.begin() + end);
  return d;
}

GBDT fit_on(int np, const LocalData& all, const GBDTOptions& o) {
  const auto models = on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
    GBDT m(o);
    m.fit(d, c);
    return m;
  });
  return models[0];
}

std::string model_text(int np, const LocalData& all, const GBDTOptions& o) {
  const auto texts = on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
    GBDT m(o);
    m.fit(d, c);
    return m.to_json().dump();
  });
  for (int r = 1; r < np; ++r) EXPECT_EQ(texts[r], texts[0]) << "rank " << r << " of " << np;
  return texts[0];
}

double local_accuracy(const GBDT& m, const LocalData& d) {
  const auto p = m.predict(d);
  double hits = 0;
  for (std::size_t i = 0; i < d.rows; ++i) hits += p[i] == d.y[i] ? 1 : 0;
  return hits / static_cast<double>(d.rows);
}

int depth_of(const GBDTTree& t, int node = 0) {
  const auto& n = t.nodes[node];
  return n.is_leaf() ? 0 : 1 + std::max(depth_of(t, n.left), depth_of(t, n.right));
}

struct WorldSizeCase {
  const char* name;
  LocalData data;
  GBDTOptions options;
};

TEST(GBDT, TreesAreIdenticalForEveryWorldSize) {
  GBDTOptions base;
  base.max_iter = 15;
  base.min_samples_leaf = 5;
  base.max_leaf_nodes = 8;
  auto depthwise = base;
  depthwise.growth = "depthwise";
  depthwise.max_depth = 3;
  depthwise.max_leaf_nodes = 0;
  auto stopping = base;
  stopping.early_stopping = true;
  stopping.n_iter_no_change = 2;
  stopping.max_iter = 200;
  stopping.learning_rate = 0.5;
  auto l2 = base;
  l2.l2_regularization = 1.5;
  auto sampled = base;  // rows by global index, features by one shared draw
  sampled.subsample = 0.7;
  sampled.colsample_bytree = 0.6;
  const WorldSizeCase cases[] = {
      {"row and feature samples", integer_blobs(290, 5, 3, 7), sampled},
      {"binary", integer_blobs(301, 3, 2, 1), base},
      {"multiclass", integer_blobs(299, 4, 4, 2), base},
      {"regression", integer_regression(310, 3), base},
      {"depthwise multiclass", integer_blobs(250, 3, 3, 4), depthwise},
      {"early stopping", integer_blobs(300, 3, 3, 5, 0.7), stopping},
      {"l2 regression", integer_regression(257, 6), l2},
  };
  for (const auto& c : cases) {
    const std::string reference = model_text(1, c.data, c.options);
    EXPECT_NE(reference.find("\"threshold\""), std::string::npos);
    for (int np = 2; np <= 4; ++np)
      EXPECT_EQ(model_text(np, c.data, c.options), reference) << c.name << " at np " << np;
  }
}

TEST(GBDT, FewDistinctValuesGetOneBinEach) {
  LocalData d;
  d.rows = d.global_rows = 6;
  d.features = 2;
  d.x = {1, 7, 5, 7, 1, 7, 2, 7, 5, 7, 1, 7};
  for (int np = 1; np <= 3; ++np) {
    const auto edges = on_ranks(np, d, [](comm::Communicator& c, const LocalData& s) {
      const auto bins = FeatureBins::fit(s, 255, c);
      return std::vector<std::vector<double>>{bins.edges(0), bins.edges(1)};
    });
    EXPECT_EQ(edges[0][0], (std::vector<double>{1.5, 3.5})) << "np " << np;
    EXPECT_TRUE(edges[0][1].empty()) << "a constant feature has one bin";
  }
}

TEST(GBDT, ContinuousFeaturesGetAtMostMaxBins) {
  const auto d = make_blobs(3000, 2, 2, 9);
  const auto edges = on_ranks(2, d, [](comm::Communicator& c, const LocalData& s) {
    return FeatureBins::fit(s, 16, c).edges(0);
  });
  EXPECT_EQ(edges[0], edges[1]);
  EXPECT_GE(edges[0].size(), 12u);
  EXPECT_LE(edges[0].size(), 15u);
  EXPECT_TRUE(std::is_sorted(edges[0].begin(), edges[0].end()));
}

TEST(GBDT, SeparatesWellSeparatedBlobs) {
  for (std::int64_t classes : {2, 3}) {
    const auto all = make_blobs(1200, 4, classes, 11, 6.0);
    const auto train = rows_of(all, 0, 600), test = rows_of(all, 600, 1200);
    GBDTOptions o;
    o.max_iter = 30;
    const auto m = fit_on(2, train, o);
    EXPECT_GE(local_accuracy(m, test), 0.95) << classes << " classes";
    EXPECT_EQ(m.outputs(), classes == 2 ? 1u : static_cast<std::size_t>(classes));
    EXPECT_EQ(m.trees().size(), 30 * m.outputs());
  }
}

TEST(GBDT, ScoreIsGlobalAccuracyOrR2) {
  const auto blobs = make_blobs(400, 3, 3, 12, 4.0);
  const auto scores = on_ranks(3, blobs, [](comm::Communicator& c, const LocalData& d) {
    GBDT m;
    m.fit(d, c);
    return std::pair{m.score(d, c), local_accuracy(m, d)};
  });
  EXPECT_GE(scores[0].first, 0.95);
  EXPECT_EQ(scores[0].first, scores[2].first);
  const auto reg = integer_regression(500, 13);
  const auto r2 = on_ranks(2, reg, [](comm::Communicator& c, const LocalData& d) {
    GBDT m;
    m.fit(d, c);
    return m.score(d, c);
  });
  EXPECT_GT(r2[0], 0.9);
  EXPECT_LE(r2[0], 1.0);
}

TEST(GBDT, EarlyStoppingStopsBeforeMaxIter) {
  const auto d = make_blobs(600, 3, 3, 14, 0.5);  // heavily overlapping: overfits soon
  GBDTOptions o;
  o.max_iter = 500;
  o.learning_rate = 0.5;
  o.min_samples_leaf = 2;
  o.early_stopping = true;
  o.n_iter_no_change = 5;
  const auto m = fit_on(2, d, o);
  EXPECT_LT(m.iterations(), 500);
  EXPECT_GT(m.iterations(), 5);
  EXPECT_EQ(m.validation_loss().size(), static_cast<std::size_t>(m.iterations()) + 1);
  EXPECT_EQ(m.trees().size(), static_cast<std::size_t>(m.iterations()) * 3);
}

TEST(GBDT, LeavesRespectMinSamplesLeafAndMaxLeafNodes) {
  const auto d = integer_blobs(800, 4, 3, 15);
  GBDTOptions o;
  o.max_iter = 5;
  o.min_samples_leaf = 40;
  o.max_leaf_nodes = 7;
  const auto m = fit_on(3, d, o);
  std::size_t most_leaves = 0;
  for (const auto& t : m.trees()) {
    std::size_t leaves = 0;
    for (const auto& n : t.nodes) {
      if (!n.is_leaf()) {
        EXPECT_EQ(n.samples, t.nodes[n.left].samples + t.nodes[n.right].samples);
        continue;
      }
      ++leaves;
      EXPECT_GE(n.samples, 40);
    }
    EXPECT_LE(leaves, 7u);
    most_leaves = std::max(most_leaves, leaves);
  }
  EXPECT_EQ(most_leaves, 7u) << "the limit should bind on this data";

  o.growth = "depthwise";
  o.max_depth = 2;
  o.max_leaf_nodes = 0;
  o.min_samples_leaf = 5;
  const auto shallow = fit_on(2, d, o);
  for (const auto& t : shallow.trees()) {
    EXPECT_LE(depth_of(t), 2);
    EXPECT_LE(t.nodes.size(), 7u);
  }
}

// A tree grown on a sample of the rows still adds its value to every row's output: the rows
// outside the sample walk the tree on their bins, and must land where predict puts them.
TEST(GBDT, RowsOutsideTheSampleGetTheTreesValue) {
  const LocalData d = integer_blobs(200, 3, 2, 21);
  comm::local::run_ranks(1, {}, [&](comm::Communicator& c) {
    const auto bins = FeatureBins::fit(d, 255, c);
    const auto binned = bins.bin_rows(d);
    TreeGrower grower(bins, binned, d.rows, {.max_leaf_nodes = 6, .min_samples_leaf = 5});
    std::vector<double> g(d.rows), h(d.rows, 1.0), out(d.rows, 0.0);
    for (std::size_t i = 0; i < d.rows; ++i) g[i] = d.y[i] == 1 ? -1.0 : 1.0;
    TreeSample sample{.all_rows = false, .rows = {}, .features = {}};
    for (std::uint32_t i = 0; i < d.rows; i += 3) sample.rows.push_back(i);
    const GBDTTree tree = grower.grow(g, h, c, out.data(), 1, sample);
    ASSERT_GT(tree.nodes.size(), 3u);
    EXPECT_EQ(tree.nodes[0].samples, static_cast<std::int64_t>(sample.rows.size()));
    for (std::size_t i = 0; i < d.rows; ++i) EXPECT_EQ(out[i], tree.predict(d.row(i))) << i;
  });
}

// A multi-class round's trees grow side by side, their histograms in one all-reduce a step, in
// groups as the memory budget allows; each must be the tree grown alone, node for node, and add
// the same values to the outputs. Integer gradients keep every sum exact, so the histograms
// all-reduced in a batch equal those all-reduced one by one bit for bit.
void expect_side_by_side_as_alone(comm::Communicator& c, const LocalData& d) {
  constexpr std::size_t kTasks = 5;
  const auto bins = FeatureBins::fit(d, 255, c);
  const auto binned = bins.bin_rows(d);
  TreeGrowthOptions o{
      .max_leaf_nodes = 0, .max_depth = 3, .depthwise = true, .min_samples_leaf = 3};
  TreeGrower alone(bins, binned, d.rows, o);
  // Two trees' histograms (a histogram per leaf and per smaller child, 2^3 leaves) and a
  // half: groups of 2, 2 and 1.
  o.together_bytes = 2.5 * 2 * 8 * static_cast<double>(alone.histogram_bytes());
  TreeGrower side_by_side(bins, binned, d.rows, o);
  std::vector<std::vector<double>> g(kTasks, std::vector<double>(d.rows)),
      h(kTasks, std::vector<double>(d.rows));
  std::vector<double> out_alone(d.rows * kTasks, 0.0), out_together(d.rows * kTasks, 0.0);
  std::vector<TreeTask> tasks(kTasks);
  for (std::size_t k = 0; k < kTasks; ++k) {
    for (std::size_t i = 0; i < d.rows; ++i) {
      g[k][i] = d.y[i] == static_cast<std::int64_t>(k) ? -1.0 : 1.0;
      h[k][i] = 1.0 + static_cast<double>((i + k) % 2);
    }
    tasks[k] = {g[k], h[k], out_together.data() + k, kTasks, {}};
  }
  tasks[1].sample.all_rows = false;  // every other row
  for (std::uint32_t i = 0; i < d.rows; i += 2) tasks[1].sample.rows.push_back(i);
  tasks[3].sample.features = {true, false, true, true};
  const auto together = side_by_side.grow(tasks, c);
  ASSERT_EQ(together.size(), kTasks);
  for (std::size_t k = 0; k < kTasks; ++k) {
    const GBDTTree tree = alone.grow(g[k], h[k], c, out_alone.data() + k, kTasks, tasks[k].sample);
    ASSERT_EQ(together[k].nodes.size(), tree.nodes.size()) << "tree " << k;
    EXPECT_GT(tree.nodes.size(), 3u) << "tree " << k;
    for (std::size_t n = 0; n < tree.nodes.size(); ++n) {
      const GBDTNode &a = together[k].nodes[n], &b = tree.nodes[n];
      EXPECT_EQ(a.feature, b.feature) << "tree " << k << " node " << n;
      EXPECT_EQ(a.threshold, b.threshold) << "tree " << k << " node " << n;
      EXPECT_EQ(a.missing_left, b.missing_left) << "tree " << k << " node " << n;
      EXPECT_EQ(a.value, b.value) << "tree " << k << " node " << n;
      EXPECT_EQ(a.samples, b.samples) << "tree " << k << " node " << n;
    }
  }
  EXPECT_EQ(out_together, out_alone);
}

TEST(GBDT, TreesGrownSideBySideAreTheTreesGrownAlone) {
  on_ranks(3, integer_blobs(240, 4, 5, 31), [](comm::Communicator& c, const LocalData& d) {
    expect_side_by_side_as_alone(c, d);
    return 0;
  });
}

TEST(GBDT, MinChildWeightBoundsEachSidesHessian) {
  const LocalData d = integer_regression(300, 22);
  GBDTOptions o;
  o.max_iter = 3;
  o.min_samples_leaf = 1;
  o.min_child_weight = 151;  // squared error: one unit of hessian per row, 300 in all
  const GBDT stumps = fit_on(2, d, o);
  for (const auto& t : stumps.trees()) EXPECT_EQ(t.nodes.size(), 1u);
  o.min_child_weight = 100;
  const GBDT split = fit_on(2, d, o);
  std::size_t nodes = 0;
  for (const auto& t : split.trees())
    for (const auto& n : t.nodes) {
      EXPECT_GE(n.samples, 100);
      ++nodes;
    }
  EXPECT_GT(nodes, split.trees().size());  // and some did split
}

// The target depends on feature 0 alone: it takes nearly all the split gain.
TEST(GBDT, FeatureImportancesAreTheShareOfTheGain) {
  LocalData d = integer_regression(400, 23);
  for (std::size_t i = 0; i < d.rows; ++i) d.targets[i] = 2 * d.row(i)[0];
  GBDTOptions o;
  o.max_iter = 10;
  const auto importances = fit_on(2, d, o).feature_importances();
  ASSERT_EQ(importances.size(), d.features);
  double total = 0;
  for (double v : importances) total += v;
  EXPECT_NEAR(total, 1, 1e-12);
  EXPECT_GT(importances[0], 0.9);
}

TEST(GBDT, JsonRoundTripPredictsTheSame) {
  for (const auto& d :
       {integer_blobs(300, 3, 2, 16), integer_blobs(300, 3, 4, 17), integer_regression(300, 18)}) {
    GBDTOptions o;
    o.max_iter = 10;
    const auto m = fit_on(2, d, o);
    const auto back = GBDT::from_json(nlohmann::json::parse(m.to_json().dump()));
    EXPECT_EQ(back.to_json(), m.to_json());
    EXPECT_EQ(back.decision_function(d), m.decision_function(d));
    if (m.loss() == "log_loss")
      EXPECT_EQ(back.predict_proba(d), m.predict_proba(d));
    else
      EXPECT_EQ(back.predict_values(d), m.predict_values(d));
  }
}

TEST(GBDT, RejectsBadOptionsAndModels) {
  GBDTOptions o;
  try {
    set_option(o, "max_leaves", "3");
    FAIL() << "unknown option accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("max_leaf_nodes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(set_option(o, "max_bins", "256"), ConfigError);
  EXPECT_THROW(set_option(o, "loss", "hinge"), ConfigError);
  EXPECT_THROW(set_option(o, "growth", "breadth"), ConfigError);
  EXPECT_THROW(set_option(o, "learning_rate", "0"), ConfigError);
  EXPECT_THROW(set_option(o, "early_stopping", "maybe"), ConfigError);
  EXPECT_THROW(set_option(o, "validation_fraction", "1"), ConfigError);
  set_option(o, "max_iter", "7");
  EXPECT_EQ(o.max_iter, 7);

  GBDTOptions squared;
  squared.loss = "squared_error";
  const auto blobs = integer_blobs(40, 2, 2, 19);
  EXPECT_THROW(fit_on(2, blobs, squared), DataError) << "class ids but no targets";
  EXPECT_THROW(GBDT::from_json({{"estimator", "logistic_regression"}, {"version", 1}}), DataError);
  auto j = fit_on(1, blobs, GBDTOptions{}).to_json();
  j["trees"][0][0]["left"] = 0;  // a node that is its own child
  EXPECT_THROW(GBDT::from_json(j), DataError);
}

TEST(GBDT, RunsThroughTheEstimatorRegistry) {
  const auto d = integer_blobs(200, 3, 3, 20);
  const auto iterations = on_ranks(2, d, [](comm::Communicator& c, const LocalData& s) {
    auto e = make_estimator("gbdt");
    e->set("max_iter", "4");
    e->fit(s, c);
    EXPECT_EQ(e->to_json()["estimator"], "gbdt");
    return e->iterations();
  });
  EXPECT_EQ(iterations[0], 4);
}

}  // namespace
}  // namespace distml::ml
