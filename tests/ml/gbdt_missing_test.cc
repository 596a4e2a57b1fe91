// GBDT on missing values (NaN) against trees worked out by hand: one round of squared error
// with learning rate 1, l2_regularization 1, min_samples_leaf 2 and two leaves, on 8 rows of
// one feature, at 1 to 4 ranks. The baseline is the mean target, each gradient is
// baseline - y and each hessian 1; a split's gain is G_L^2/(H_L+1) + G_R^2/(H_R+1) - G^2/(H+1)
// and a leaf's value -G/(H+1).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "distml/ml/gbdt.h"
#include "synthetic_shards.h"

namespace distml::ml::gbdt_missing_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

LocalData table(const std::vector<double>& x, const std::vector<double>& y) {
  LocalData d;
  d.rows = d.global_rows = x.size();
  d.features = 1;
  d.x = x;
  d.targets = y;
  return d;
}

GBDTOptions one_stump() {
  GBDTOptions o;
  o.loss = "squared_error";
  o.max_iter = 1;
  o.learning_rate = 1;
  o.l2_regularization = 1;
  o.min_samples_leaf = 2;
  o.max_leaf_nodes = 2;
  o.early_stopping = false;
  return o;
}

struct Stump {
  double baseline, threshold;
  bool missing_left;
  double left_value, right_value;
};

void expect_stump(const LocalData& data, const Stump& want) {
  for (int np = 1; np <= 4; ++np) {
    SCOPED_TRACE(np);
    const GBDT m = testing::on_ranks(np, data, [](comm::Communicator& c, const LocalData& d) {
      GBDT g(one_stump());
      g.fit(d, c);
      return g;
    })[0];
    ASSERT_EQ(m.trees().size(), 1u);
    const auto& nodes = m.trees()[0].nodes;
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(m.baseline()[0], want.baseline);
    EXPECT_EQ(nodes[0].feature, 0);
    EXPECT_EQ(nodes[0].threshold, want.threshold);
    EXPECT_EQ(nodes[0].missing_left, want.missing_left);
    // Sums of a few small integers and one division: within an ulp of the hand values.
    EXPECT_NEAR(nodes[nodes[0].left].value, want.left_value, 1e-15);
    EXPECT_NEAR(nodes[nodes[0].right].value, want.right_value, 1e-15);
    const LocalData missing = table({kNaN}, {0});
    EXPECT_NEAR(m.predict_values(missing)[0],
                want.baseline + (want.missing_left ? want.left_value : want.right_value), 1e-15);
  }
}

// x: 1 2 3 4 5 6 and two missing; the missing rows' targets are the low ones'. Baseline 2,
// gradients +2 (y = 0) and -2 (y = 4), G = 0, H = 8. The best split keeping 2 rows a side is
// x <= 2.5 with the missing rows left: G_L = 8, H_L = 4, G_R = -8, H_R = 4, gain
// 64/5 + 64/5 = 25.6; with them right it gains 16/3 + 16/7 = 7.6. Leaves -8/5 and 8/5.
TEST(GBDTMissing, MissingRowsGoWhereTheirGradientsBelong) {
  expect_stump(table({1, 2, 3, 4, kNaN, kNaN, 5, 6}, {0, 0, 4, 4, 0, 0, 4, 4}),
               {2, 2.5, true, -1.6, 1.6});
}

// The same x with the missing rows' targets high: baseline 3, gradients +3 (y = 0) and -1
// (y = 4). x <= 2.5 with the missing right gains 36/3 + 36/7 = 17.14 (G_L = 6, H_L = 2),
// with them left 16/5 + 16/5 = 6.4: the direction is learnt, not fixed. Leaves -2 and 6/7.
TEST(GBDTMissing, TheDirectionIsLearntNotFixed) {
  expect_stump(table({1, 2, 3, 4, kNaN, kNaN, 5, 6}, {0, 0, 4, 4, 4, 4, 4, 4}),
               {3, 2.5, false, -2, 6.0 / 7});
}

// No missing value in training: x <= 6.5 (G_L = 6 over 6 rows, G_R = -6 over 2) gains
// 36/7 + 36/3 = 17.14, the most; a missing value then goes to the larger child, left, as in
// scikit-learn. Leaves -6/7 and 2.
TEST(GBDTMissing, WithoutMissingValuesInTrainingTheyGoToTheLargerChild) {
  expect_stump(table({1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0, 0, 0, 4, 4}),
               {1, 6.5, true, -6.0 / 7, 2});
}

// Only the missing rows differ: "present left, missing right" is a split of its own, past
// the last edge. Baseline 1, G_L = 6 over 6 rows, G_R = -6 over 2: leaves -6/7 and 2.
TEST(GBDTMissing, PresentAgainstMissingIsASplit) {
  expect_stump(table({1, 1, 1, 1, 1, 1, kNaN, kNaN}, {0, 0, 0, 0, 0, 0, 4, 4}),
               {1, std::numeric_limits<double>::max(), false, -6.0 / 7, 2});
}

}  // namespace
}  // namespace distml::ml::gbdt_missing_test
