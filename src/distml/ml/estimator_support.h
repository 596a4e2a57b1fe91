// Pieces the classifiers of ml/ share: collective input checks (so that one rank's bad shard
// fails every rank instead of leaving the others waiting in a collective), global accuracy,
// stable log-sum-exp, linear decision values, and parsing of options given by name.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/agreement.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

/// Sums `v` over ranks in place (f64).
void allreduce_sum(comm::Communicator& comm, std::vector<double>& v);

/// What is wrong with this rank's shard for a classifier called `who` (empty when nothing):
/// x and y sizes, at least two classes, labels in [0, num_classes).
std::string check_classification_shard(const LocalData& data, std::string_view who);

/// Collective: DataError on every rank unless all ranks agree on features and num_classes,
/// global_rows is the sum of rows over ranks, and that sum is positive.
void check_shards_agree(comm::Communicator& comm, const LocalData& data, std::string_view who);

/// Collective: the fraction of rows over all ranks whose class id equals `predicted`.
/// DataError on every rank when no rank has a row.
double global_accuracy(comm::Communicator& comm, const LocalData& data,
                       const std::vector<std::int64_t>& predicted);

/// Collective: the coefficient of determination R^2 of `predicted` against data.targets over
/// all ranks' rows (1 for a perfect fit of constant targets). DataError naming `who` on every
/// rank when a rank lacks targets or no rank has a row.
double global_r2(comm::Communicator& comm, const LocalData& data,
                 const std::vector<double>& predicted, std::string_view who);

/// What is wrong with this rank's shard for a tree model called `who` (empty when nothing):
/// shape, infinite features (NaN is missing and allowed), then class ids or, for `regression`,
/// a finite target per row.
std::string check_tree_shard(const LocalData& data, bool regression, std::string_view who);

/// log(sum_k exp(z[k])) without overflow; -inf entries contribute nothing.
double log_sum_exp(const double* z, std::size_t n);

/// 1 / (1 + exp(-z)), without overflow for either sign.
double sigmoid(double z);
/// The logistic loss of a margin m (the score signed by the label): log(1 + exp(-m)), written
/// to neither overflow nor lose digits.
double logistic_loss(double margin);

/// Turns rows of n log-weights into probabilities in place (softmax per row).
void normalize_log_proba(std::vector<double>& v, std::size_t n);

/// Index of the largest of z[0..n) (the first one on ties).
std::int64_t argmax(const double* z, std::size_t n);

/// rows x outputs values x . coef[m] + intercept[m]; coef is outputs x data.features.
std::vector<double> linear_decision(const LocalData& data, const std::vector<double>& coef,
                                    const std::vector<double>& intercept, std::size_t outputs);

/// What keeps an estimator called `who` that needs dense rows from `data` (empty: nothing).
std::string dense_problem(const LocalData& data, std::string_view who);

/// DataError unless `data.features == features` (for a fitted model called `who`) and the rows
/// hold that many.
void check_feature_count(const LocalData& data, std::size_t features, std::string_view who);

// Options by name: the value as text, as it comes from the command line or config.
double parse_double_option(std::string_view key, std::string_view value);
int parse_int_option(std::string_view key, std::string_view value);
std::uint64_t parse_uint64_option(std::string_view key, std::string_view value);
bool parse_bool_option(std::string_view key, std::string_view value);
/// The ConfigError for a key `who` does not have, listing the valid ones.
[[noreturn]] void throw_unknown_option(std::string_view who, std::string_view key,
                                       std::initializer_list<std::string_view> valid);
/// ConfigError "who: key must be ..." unless `ok`.
void require_option(bool ok, std::string_view who, std::string_view key, std::string_view must);

/// The field `key` of a model's JSON; DataError naming `who` and the key when it is missing.
const nlohmann::json& model_field(const nlohmann::json& j, const char* key, std::string_view who);
/// A model's "options" as its Options: DataError where a key whose default (Options{}) is a
/// whole number holds anything else (a float there would convert with undefined behaviour).
template <class Options>
Options model_options(const nlohmann::json& j, std::string_view who) {
  const auto& given = model_field(j, "options", who);
  const nlohmann::json defaults = Options{};
  for (const auto& [key, value] : defaults.items())
    if (value.is_number_integer() && given.is_object() && given.contains(key) &&
        !given[key].is_number_integer())
      throw DataError(cat(who, " model: option \"", key, "\" is ", given[key].dump(),
                          ", not a whole number"));
  return given.get<Options>();
}

/// model_field(j, key, who) as an integer of type T: DataError unless the field is a whole
/// number that T holds (a JSON float, or one out of T's range, would convert with undefined
/// behaviour).
template <class T>
T model_integer(const nlohmann::json& j, const char* key, std::string_view who) {
  using Limits = std::numeric_limits<T>;
  const auto& field = model_field(j, key, who);
  bool fits = false;
  if (field.is_number_unsigned()) {
    fits = field.get<std::uint64_t>() <= static_cast<std::uint64_t>(Limits::max());
  } else if (field.is_number_integer()) {
    const auto v = field.get<std::int64_t>();
    fits = v >= static_cast<std::int64_t>(Limits::min()) &&
           (v < 0 || static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(Limits::max()));
  }
  if (!fits)
    throw DataError(cat(who, " model: field \"", key, "\" is ", field.dump(),
                        ", not a whole number from ", Limits::min(), " to ", Limits::max()));
  return field.get<T>();
}

/// Keeps BLAS (OpenBLAS, when it is the BLAS) to the calling thread: with a rank per core,
/// BLAS threads of its own would only compete with the other ranks. Idempotent.
void use_one_blas_thread();

}  // namespace distml::ml
