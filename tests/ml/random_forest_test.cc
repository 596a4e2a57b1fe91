// The random forest: one split computed by hand, fully grown trees that fit their rows, the
// same forest for every world size (through both the all-reduced histograms and the exchange of
// small subtrees), the bootstrap, round trips and errors.
#include "distml/ml/random_forest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "distml/core/error.h"
#include "distml/ml/estimator.h"
#include "synthetic_shards.h"

namespace distml::ml::random_forest_test {
namespace {

using testing::integer_blobs;
using testing::integer_regression;
using testing::on_ranks;

std::string model_text(int np, const LocalData& all, const RandomForestOptions& o) {
  const auto texts = on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
    RandomForest m(o);
    m.fit(d, c);
    return m.to_json().dump();
  });
  for (int r = 1; r < np; ++r) EXPECT_EQ(texts[r], texts[0]) << "rank " << r << " of " << np;
  return texts[0];
}

RandomForest fit_on(int np, const LocalData& all, const RandomForestOptions& o) {
  return on_ranks(np, all, [&](comm::Communicator& c, const LocalData& d) {
    RandomForest m(o);
    m.fit(d, c);
    return m;
  })[0];
}

LocalData one_feature(const std::vector<double>& x, const std::vector<std::int64_t>& y) {
  LocalData d;
  d.rows = d.global_rows = x.size();
  d.features = 1;
  d.x = x;
  d.y = y;
  d.num_classes = 2;
  return d;
}

// Every row once, every feature a candidate: the trees are plain CART trees.
RandomForestOptions cart(int trees = 1) {
  RandomForestOptions o;
  o.n_estimators = trees;
  o.bootstrap = false;
  o.max_features = "all";
  return o;
}

// x = 1..6 with classes 0 0 0 1 1 0; score(S) = sum_k S_k^2 / S_w, the root's is
// (16 + 4) / 6 = 10/3. The thresholds after x = 1..5 gain
//   {0}|{0,0,1,1,0}: 1 + 13/5 - 10/3 = 0.267     {0,0}|{0,1,1,0}: 2 + 2 - 10/3 = 0.667
//   {0,0,0}|{1,1,0}: 3 + 5/3 - 10/3 = 1.333      {0,0,0,1}|{1,0}: 5/2 + 1 - 10/3 = 0.167
//   {0,0,0,1,1}|{0}: 13/5 + 1 - 10/3 = 0.267
// so the root splits at 3.5 (the midpoint edge between 3 and 4), gaining 4/3 (6 x the Gini
// decrease 0.222 that scikit-learn reports), into leaves [1, 0] and [1/3, 2/3].
TEST(RandomForest, SplitsWhereTheGiniDecreaseIsLargest) {
  const auto d = one_feature({1, 2, 3, 4, 5, 6}, {0, 0, 0, 1, 1, 0});
  auto o = cart();
  o.max_depth = 1;
  for (int np : {1, 2, 3}) {
    const auto m = fit_on(np, d, o);
    const auto& nodes = m.trees()[0].nodes;
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0].feature, 0);
    EXPECT_DOUBLE_EQ(nodes[0].threshold, 3.5);
    EXPECT_DOUBLE_EQ(nodes[0].gain, 4.0 / 3);
    EXPECT_EQ(nodes[0].weight, 6);
    EXPECT_EQ(nodes[nodes[0].left].value, (std::vector<double>{1, 0}));
    EXPECT_EQ(nodes[nodes[0].right].value, (std::vector<double>{1.0 / 3, 2.0 / 3}));
    EXPECT_EQ(m.feature_importances(), std::vector<double>{1});
  }
}

// Plain recursive CART on raw values, for integer features (one bin per distinct value, the
// threshold halfway to the next value) with missing values: the reference for trees grown with
// every row once and every feature a candidate. Nodes are written depth-first as the forest
// writes them: the same features, thresholds, missing sides and leaf values.
class ReferenceCart {
 public:
  ReferenceCart(const LocalData& d, int min_samples_leaf)
      : d_(d), min_leaf_(min_samples_leaf), values_(d.features) {
    for (std::size_t f = 0; f < d.features; ++f) {
      for (std::size_t i = 0; i < d.rows; ++i)
        if (!std::isnan(d.row(i)[f])) values_[f].push_back(d.row(i)[f]);
      std::sort(values_[f].begin(), values_[f].end());
      values_[f].erase(std::unique(values_[f].begin(), values_[f].end()), values_[f].end());
    }
  }

  std::vector<ForestNode> grow() {
    std::vector<std::size_t> all(d_.rows);
    std::iota(all.begin(), all.end(), std::size_t{0});
    nodes_.clear();
    grow(all);
    return nodes_;
  }

 private:
  struct Counts {
    std::vector<double> k;
    double w = 0;
  };
  Counts counts(const std::vector<std::size_t>& rows) const {
    Counts c{std::vector<double>(static_cast<std::size_t>(d_.num_classes), 0.0), 0};
    for (std::size_t i : rows) {
      ++c.k[static_cast<std::size_t>(d_.y[i])];
      ++c.w;
    }
    return c;
  }
  static double score(const Counts& c) {
    double s = 0;
    for (double v : c.k) s += v * v;
    return c.w > 0 ? s / c.w : 0;
  }

  void grow(const std::vector<std::size_t>& rows) {
    const int index = static_cast<int>(nodes_.size());
    const Counts node = counts(rows);
    nodes_.push_back({.weight = node.w, .value = {}});
    const double parent = score(node);
    struct Best {
      double gain = -INFINITY;
      std::size_t f = 0;
      double value = 0;
      bool missing_left = false;
    } best;
    bool found = false;
    const bool splittable = node.w >= 2 * min_leaf_ && node.w - parent > 1e-10 * node.w;
    for (std::size_t f = 0; f < d_.features && splittable; ++f) {
      std::vector<std::size_t> missing;
      for (std::size_t i : rows)
        if (std::isnan(d_.row(i)[f])) missing.push_back(i);
      for (const bool missing_left : {false, true}) {
        if (missing_left && missing.empty()) break;
        for (double v : values_[f]) {
          std::vector<std::size_t> left = missing_left ? missing : std::vector<std::size_t>{},
                                   right;
          for (std::size_t i : rows) {
            const double x = d_.row(i)[f];
            if (!std::isnan(x)) (x <= v ? left : right).push_back(i);
            if (std::isnan(x) && !missing_left) right.push_back(i);
          }
          if (static_cast<int>(left.size()) < min_leaf_ ||
              static_cast<int>(right.size()) < min_leaf_)
            continue;
          const Counts l = counts(left), r = counts(right);
          const double gain = score(l) + score(r) - parent;
          if (gain > best.gain) {
            best = {gain, f, v, missing_left};
            if (missing.empty()) best.missing_left = 2 * l.w >= node.w;
            found = true;
          }
        }
      }
    }
    if (!found) {
      for (double v : node.k) nodes_[index].value.push_back(v / node.w);
      return;
    }
    const auto& vs = values_[best.f];
    const auto next = std::upper_bound(vs.begin(), vs.end(), best.value);
    ForestNode& n = nodes_[index];
    n.feature = static_cast<int>(best.f);
    n.threshold = next == vs.end() ? std::numeric_limits<double>::max() : (best.value + *next) / 2;
    n.missing_left = best.missing_left;
    n.gain = best.gain;
    std::vector<std::size_t> left, right;
    for (std::size_t i : rows) {
      const double x = d_.row(i)[best.f];
      (std::isnan(x) ? best.missing_left : x <= best.value) ? left.push_back(i)
                                                            : right.push_back(i);
    }
    nodes_[index].left = static_cast<int>(nodes_.size());
    grow(left);
    nodes_[index].right = static_cast<int>(nodes_.size());
    grow(right);
  }

  const LocalData& d_;
  int min_leaf_;
  std::vector<std::vector<double>> values_;  // each feature's distinct present values
  std::vector<ForestNode> nodes_;
};

// Against the reference: the histograms all-reduced for large nodes, the rows sorted for small
// ones, and the subtrees sent to other ranks must all find the same splits as CART.
TEST(RandomForest, TreesEqualAPlainCartReference) {
  LocalData d = integer_blobs(240, 3, 3, 21);
  for (std::size_t i = 0; i < d.x.size(); i += 5) d.x[i] = std::nan("");
  for (const int min_leaf : {1, 3}) {
    const auto expected = ReferenceCart(d, min_leaf).grow();
    auto o = cart();
    o.min_samples_leaf = min_leaf;
    for (int np : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << "min_samples_leaf " << min_leaf << ", " << np << " ranks");
      const auto m = fit_on(np, d, o);
      const auto& nodes = m.trees()[0].nodes;
      ASSERT_EQ(nodes.size(), expected.size());
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        ASSERT_EQ(nodes[i].feature, expected[i].feature) << "node " << i;
        EXPECT_EQ(nodes[i].threshold, expected[i].threshold) << "node " << i;
        EXPECT_EQ(nodes[i].missing_left, expected[i].missing_left) << "node " << i;
        EXPECT_EQ(nodes[i].left, expected[i].left) << "node " << i;
        EXPECT_EQ(nodes[i].weight, expected[i].weight) << "node " << i;
        EXPECT_EQ(nodes[i].value, expected[i].value) << "node " << i;
      }
    }
  }
}

// A checkerboard: every first split gains exactly 0, yet a node that is not pure is split (as
// scikit-learn does), so fully grown trees end with pure leaves and fit every row.
TEST(RandomForest, FullyGrownTreesFitACheckerboard) {
  LocalData d;
  d.features = 2;
  d.num_classes = 2;
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      d.x.insert(d.x.end(), {static_cast<double>(a), static_cast<double>(b)});
      d.y.push_back((a + b) % 2);
    }
  d.rows = d.global_rows = d.y.size();
  for (int np : {1, 3}) {
    const auto m = fit_on(np, d, cart(3));
    EXPECT_EQ(m.predict(d), d.y) << np << " ranks";
    for (const auto& node : m.trees()[0].nodes)
      EXPECT_TRUE(!node.is_leaf() || node.value[0] == 0 || node.value[0] == 1);
  }
}

// With a mean target per leaf, one split of a step function recovers both steps.
TEST(RandomForest, RegressionLeavesHoldTheMeanTarget) {
  LocalData d;
  d.features = 1;
  for (int i = 0; i < 40; ++i) {
    d.x.push_back(i);
    d.targets.push_back(i < 15 ? -2.0 + 0.25 * (i % 2) : 5.0);
  }
  d.rows = d.global_rows = 40;
  auto o = cart();
  o.max_depth = 1;
  const auto m = fit_on(2, d, o);
  const auto& nodes = m.trees()[0].nodes;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_DOUBLE_EQ(nodes[0].threshold, 14.5);
  // 15 rows alternating -2 and -1.75 starting with -2: 8 x -2 + 7 x -1.75 = -28.25.
  EXPECT_DOUBLE_EQ(nodes[nodes[0].left].value[0], -28.25 / 15);
  EXPECT_DOUBLE_EQ(nodes[nodes[0].right].value[0], 5.0);
  EXPECT_EQ(m.loss(), "squared_error");
}

// Bootstrap weights and feature draws come from the tree, the node's path and the global row
// index, and every sum is exact, so the forest (thresholds, gains, leaf values) is the same
// text for every world size. 300 rows make the root's histogram worth all-reducing and the
// deeper nodes' rows worth sending to one rank: both ways of splitting are in each run.
TEST(RandomForest, ForestsAreIdenticalForEveryWorldSize) {
  RandomForestOptions base;
  base.n_estimators = 6;
  base.seed = 5;
  auto shallow = cart(2);
  shallow.max_depth = 3;
  shallow.min_samples_leaf = 4;
  auto regression = base;
  regression.max_features = "0.5";
  auto with_missing = base;
  with_missing.max_samples = 0.6;
  LocalData missing = integer_blobs(280, 4, 3, 9);
  for (std::size_t i = 0; i < missing.x.size(); i += 7) missing.x[i] = std::nan("");
  struct Case {
    const char* name;
    LocalData data;
    RandomForestOptions options;
  };
  const Case cases[] = {
      {"multiclass", integer_blobs(300, 5, 3, 7), base},
      {"binary", integer_blobs(301, 3, 2, 1), base},
      {"no bootstrap, depth 3", integer_blobs(299, 4, 4, 2), shallow},
      {"regression", integer_regression(310, 3), regression},
      {"missing values, max_samples", missing, with_missing},
  };
  for (const auto& c : cases) {
    const std::string reference = model_text(1, c.data, c.options);
    EXPECT_NE(reference.find("\"threshold\""), std::string::npos) << c.name;
    for (int np = 2; np <= 4; ++np)
      EXPECT_EQ(model_text(np, c.data, c.options), reference) << c.name << " at np " << np;
  }
}

// Each row's weight is a Poisson(max_samples) count: the root weighs about max_samples * rows,
// every node weighs a whole number, and the trees differ.
TEST(RandomForest, BootstrapWeighsRowsByPoissonCounts) {
  const auto d = integer_blobs(2000, 3, 2, 11);
  RandomForestOptions o;
  o.n_estimators = 4;
  o.max_depth = 2;
  o.max_samples = 0.5;
  const auto m = fit_on(2, d, o);
  for (const auto& t : m.trees()) {
    // The sum of 2000 Poisson(0.5) counts has mean 1000 and sd 31.6; 5 sd either way.
    EXPECT_NEAR(t.nodes[0].weight, 1000, 160);
    for (const auto& n : t.nodes) EXPECT_EQ(n.weight, std::round(n.weight));
  }
  EXPECT_NE(m.trees()[0].nodes[0].weight, m.trees()[1].nodes[0].weight);
}

TEST(RandomForest, SeparatesBlobsAndRoundTripsThroughJson) {
  for (const auto& d : {integer_blobs(400, 4, 3, 12, 4.0), integer_regression(300, 13)}) {
    RandomForestOptions o;
    o.n_estimators = 10;
    const auto m = fit_on(2, d, o);
    if (d.num_classes > 0) {
      const auto p = m.predict(d);
      std::size_t hits = 0;
      for (std::size_t i = 0; i < d.rows; ++i) hits += p[i] == d.y[i] ? 1 : 0;
      EXPECT_GE(hits, 380u);  // 4-sd-apart blobs: a forest fits nearly all training rows
      const auto proba = m.predict_proba(d);
      for (std::size_t i = 0; i < d.rows; ++i)
        EXPECT_NEAR(proba[3 * i] + proba[3 * i + 1] + proba[3 * i + 2], 1, 1e-12);
    }
    const auto back = RandomForest::from_json(nlohmann::json::parse(m.to_json().dump()));
    EXPECT_EQ(back.to_json(), m.to_json());
    if (d.num_classes > 0)
      EXPECT_EQ(back.predict_proba(d), m.predict_proba(d));
    else
      EXPECT_EQ(back.predict_values(d), m.predict_values(d));
    double sum = 0;
    for (double v : m.feature_importances()) sum += v;
    EXPECT_NEAR(sum, 1, 1e-12);
  }
}

TEST(RandomForest, RejectsBadOptionsAndModels) {
  RandomForestOptions o;
  try {
    set_option(o, "n_trees", "3");
    FAIL() << "unknown option accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("n_estimators"), std::string::npos) << e.what();
  }
  for (const char* bad : {"half", "0.0", "1.5", "0", "-3"})
    EXPECT_THROW(set_option(o, "max_features", bad), ConfigError) << bad;
  EXPECT_THROW(set_option(o, "criterion", "entropy"), ConfigError);
  EXPECT_THROW(set_option(o, "max_samples", "0"), ConfigError);
  set_option(o, "max_features", "0.25");
  set_option(o, "max_features", "7");
  EXPECT_EQ(o.max_features, "7");

  RandomForestOptions squared;
  squared.criterion = "squared_error";
  const auto blobs = integer_blobs(40, 2, 2, 19);
  EXPECT_THROW(fit_on(2, blobs, squared), DataError) << "class ids but no targets";
  EXPECT_THROW(RandomForest().predict(blobs), DataError) << "before fit";
  auto j = fit_on(1, blobs, RandomForestOptions{}).to_json();
  j["trees"][0][0]["left"] = 0;  // a node that is its own child
  EXPECT_THROW(RandomForest::from_json(j), DataError);
}

TEST(RandomForest, RunsThroughTheEstimatorRegistry) {
  const auto d = integer_blobs(200, 3, 3, 20);
  const auto names = on_ranks(2, d, [](comm::Communicator& c, const LocalData& s) {
    auto e = make_estimator("rf");
    e->set("n_estimators", "3");
    e->fit(s, c);
    EXPECT_TRUE(e->gives_probabilities());
    return e->to_json()["estimator"].get<std::string>();
  });
  EXPECT_EQ(names[0], "random_forest");
}

}  // namespace
}  // namespace distml::ml::random_forest_test
