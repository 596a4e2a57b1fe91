// GBDT models in XGBoost's JSON model format (the schema of XGBoost 1.7), so that
// `xgboost.Booster().load_model(path)` reads a distml model and predicts with it.
//
// What changes on the way: XGBoost stores thresholds and leaf values as float32 and sends a row
// left when x < threshold, where distml sends it left when x <= threshold; the exported
// threshold is the float32 just above distml's, so the rows go the same way unless two feature
// values lie closer than float32 can tell apart (about 6e-8 relative). distml's baselines (the
// log-odds or mean the boosting starts from) are added to the first round's leaves, with
// XGBoost's base_score at its neutral value. Predictions then agree to float32 rounding.
// Features are the model's columns in order; classes are ids 0..K-1, the model's sorted classes.
//
// Missing values: XGBoost sends a missing value down a split's default_left branch, and to
// XGBoost an entry that a sparse row does not store (a LibSVM file's left-out zero) is
// missing, like NaN; a stored 0 is a value. distml's gbdt reads its input the same way (gbdt.h),
// so default_left is simply missing_left and the two agree on every row, in whichever form
// XGBoost gets the rows. Exporting instead a model that took absent entries as zeros cannot
// agree in general: it would need default_left = (0 <= threshold) for the absent entries and
// missing_left for NaN, one flag for two directions that differ wherever a split sends its
// missing values one way and 0 the other (a threshold below 0 with missing values left, say).
#pragma once

#include <nlohmann/json.hpp>

#include "distml/ml/gbdt.h"

namespace distml::ml {

/// The model in XGBoost's JSON format: objective binary:logistic, multi:softprob or
/// reg:squarederror, one tree per class and round in XGBoost's order.
nlohmann::json to_xgboost_json(const GBDT& model);

}  // namespace distml::ml
