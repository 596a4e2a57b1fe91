#include "distml/ml/gbdt_xgboost.h"

#include <cmath>
#include <limits>
#include <string>

namespace distml::ml {
namespace {

// The float32 c with x <= threshold exactly when float(x) < c, for every x that float32 tells
// apart from the threshold: the next float32 above the smallest one >= threshold.
float strict_threshold(double threshold) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if (threshold >= kMax) return kMax;  // every present value goes left
  auto up = static_cast<float>(threshold);
  if (static_cast<double>(up) < threshold) up = std::nextafter(up, kMax);
  return std::nextafter(up, kMax);
}

nlohmann::json tree_json(const GBDTTree& t, int id, std::size_t features, double shift) {
  const std::size_t n = t.nodes.size();
  std::vector<int> left(n), right(n), parents(n, std::numeric_limits<int>::max()), split(n, 0),
      default_left(n, 0), zeros(n, 0);
  std::vector<float> conditions(n), weights(n), gains(n), hessians(n);
  for (std::size_t i = 0; i < n; ++i) {
    const GBDTNode& node = t.nodes[i];
    left[i] = node.left;
    right[i] = node.right;
    gains[i] = static_cast<float>(node.gain);
    hessians[i] = static_cast<float>(node.samples);  // rows, for readers; not used to predict
    if (node.is_leaf()) {
      conditions[i] = weights[i] = static_cast<float>(node.value + shift);
      gains[i] = 0;
      continue;
    }
    parents[static_cast<std::size_t>(node.left)] = static_cast<int>(i);
    parents[static_cast<std::size_t>(node.right)] = static_cast<int>(i);
    split[i] = node.feature;
    default_left[i] = node.missing_left ? 1 : 0;
    conditions[i] = strict_threshold(node.threshold);
  }
  return {{"base_weights", weights},
          {"categories", nlohmann::json::array()},
          {"categories_nodes", nlohmann::json::array()},
          {"categories_segments", nlohmann::json::array()},
          {"categories_sizes", nlohmann::json::array()},
          {"default_left", default_left},
          {"id", id},
          {"left_children", left},
          {"loss_changes", gains},
          {"parents", parents},
          {"right_children", right},
          {"split_conditions", conditions},
          {"split_indices", split},
          {"split_type", zeros},
          {"sum_hessian", hessians},
          {"tree_param",
           {{"num_deleted", "0"},
            {"num_feature", std::to_string(features)},
            {"num_nodes", std::to_string(n)},
            {"size_leaf_vector", "0"}}}};
}

}  // namespace

nlohmann::json to_xgboost_json(const GBDT& model) {
  const std::size_t k = model.outputs();
  const bool classifier = model.loss() == "log_loss";
  nlohmann::json trees = nlohmann::json::array(), tree_info = nlohmann::json::array();
  for (std::size_t t = 0; t < model.trees().size(); ++t) {
    const double shift = t < k ? model.baseline()[t] : 0.0;  // the first round carries it
    trees.push_back(tree_json(model.trees()[t], static_cast<int>(t), model.features(), shift));
    tree_info.push_back(t % k);
  }
  // base_score's margin: logit(0.5) = 0 for binary:logistic, 0 itself for squared error, and
  // for softmax the same constant on every class, which changes no probability.
  nlohmann::json objective;
  std::string base_score = "5E-1";
  if (!classifier) {
    objective = {{"name", "reg:squarederror"}, {"reg_loss_param", {{"scale_pos_weight", "1"}}}};
    base_score = "0";
  } else if (k == 1) {
    objective = {{"name", "binary:logistic"}, {"reg_loss_param", {{"scale_pos_weight", "1"}}}};
  } else {
    objective = {{"name", "multi:softprob"},
                 {"softmax_multiclass_param", {{"num_class", std::to_string(k)}}}};
  }
  const std::string features = std::to_string(model.features());
  return {{"learner",
           {{"attributes", nlohmann::json::object()},
            {"feature_names", nlohmann::json::array()},
            {"feature_types", nlohmann::json::array()},
            {"gradient_booster",
             {{"model",
               {{"gbtree_model_param",
                 {{"num_parallel_tree", "1"},
                  {"num_trees", std::to_string(model.trees().size())},
                  {"size_leaf_vector", "0"}}},
                {"tree_info", tree_info},
                {"trees", trees}}},
              {"name", "gbtree"}}},
            {"learner_model_param",
             {{"base_score", base_score},
              {"boost_from_average", "1"},
              {"num_class", classifier && k > 1 ? std::to_string(k) : "0"},
              {"num_feature", features},
              {"num_target", "1"}}},
            {"objective", objective}}},
          {"version", {1, 7, 4}}};
}

}  // namespace distml::ml
