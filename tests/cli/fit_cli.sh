#!/usr/bin/env bash
# `distml fit` / `distml predict` as users run them: a round trip through a model file, and
# bad input with exit code 2. Usage: fit_cli.sh DISTML ENGINE NP [SCOPE]
# SCOPE "engine" (the default) runs what depends on the engine (the round trips); "all" adds
# the label, column and missing-value conventions and the bad input, which are the same
# whatever the engine.
set -uo pipefail
distml=$1 engine=$2 np=$3 scope=${4:-engine}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# shellcheck source=cli_lib.sh
source "$(dirname "$0")/cli_lib.sh"
fit() { "$distml" fit "$@" --engine "$engine" --np "$np"; }

# Two well-separated classes with string labels.
{
  echo "x,y,kind"
  for i in $(seq 0 39); do echo "$((i % 7)).5,$((i % 5)),low"; echo "$((i % 7 + 20)).5,$((i % 5 + 20)),high"; done
} >"$dir/train.csv"

expect 0 '"test_score":1.0' fit logreg --data "$dir/train.csv" --label kind --test-fraction 0.25 \
  --model-out "$dir/m.json" --json
expect 0 "score 1.0000 over 80 rows" "$distml" predict --model "$dir/m.json" --data "$dir/train.csv" \
  --label kind --out "$dir/p.csv" --engine "$engine" --np "$np"
[[ $(head -n 2 "$dir/p.csv" | tail -n 1) == low && $(wc -l <"$dir/p.csv") -eq 81 ]] ||
  fail "predictions file: $(head -n 3 "$dir/p.csv")"
expect 0 '"inertia"' fit kmeans --data "$dir/train.csv" --label kind --set k=2 --json \
  --model-out "$dir/k.json"
# What follows does not depend on the engine: labels, columns, missing values, probabilities.
conventions() {
# A model knows its columns by name: a file without the label column is predicted (not
# scored), one with the columns in another order gives the same predictions.
cut -d, -f1,2 "$dir/train.csv" >"$dir/unlabelled.csv"
awk -F, -v OFS=, '{ print $3, $2, $1 }' "$dir/train.csv" >"$dir/reordered.csv"
out=$("$distml" predict --model "$dir/m.json" --data "$dir/unlabelled.csv" --json \
  --out "$dir/p_unlabelled.csv" --engine "$engine" --np "$np" | tail -n 1) ||
  fail "predict on unlabelled rows failed: $out"
[[ $out == *'"rows":80'* && $out == *'"score":null'* ]] || fail "unlabelled predict: $out"
"$distml" predict --model "$dir/m.json" --data "$dir/reordered.csv" --out "$dir/p_reordered.csv" \
  --engine "$engine" --np "$np" >/dev/null || fail "predict on reordered columns failed"
cmp -s "$dir/p.csv" "$dir/p_unlabelled.csv" && cmp -s "$dir/p.csv" "$dir/p_reordered.csv" ||
  fail "predictions differ by the file's columns"
# --label none: every column is a feature (k-means on x and y), and a classifier refuses it.
expect 0 '"features":2' fit kmeans --data "$dir/unlabelled.csv" --label none --set k=2 --json
expect 2 "--label none: logistic_regression learns from labels" fit logreg --data "$dir/unlabelled.csv" \
  --label none
# A clustering model predicts cluster ids, not the class names of the file's label column.
expect 0 "over 80 rows" "$distml" predict --model "$dir/k.json" --data "$dir/train.csv" \
  --label kind --out "$dir/k.csv" --engine "$engine" --np "$np"
[[ $(tail -n +2 "$dir/k.csv" | sort -u | tr '\n' ' ') == "0 1 " ]] ||
  fail "k-means predictions are not cluster ids: $(head -n 3 "$dir/k.csv")"

# Labels +1/-1 (as in a9a) are two classes, -1 and 1 as np.unique gives them, and the
# predictions are written back as those values.
{
  echo "x,y,label"
  for i in $(seq 0 19); do echo "$((i % 7)).5,$((i % 5)),-1"; echo "$((i % 7 + 20)).5,$((i % 5 + 20)),+1"; done
} >"$dir/pm1.csv"
expect 0 "train score 1.0000" fit logreg --data "$dir/pm1.csv" --model-out "$dir/pm1.json"
"$distml" predict --model "$dir/pm1.json" --data "$dir/pm1.csv" --out "$dir/pm1_out.csv" \
  --engine "$engine" --np "$np" >/dev/null || fail "predict of the +1/-1 model"
[[ $(sed -n '2p;3p' "$dir/pm1_out.csv" | tr '\n' ' ') == "-1 1 " ]] ||
  fail "+1/-1 predictions: $(head -n 3 "$dir/pm1_out.csv")"
/usr/bin/python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))
assert m["class_names"] == m["preprocessing"]["class_names"] == ["-1", "1"], m' "$dir/pm1.json" ||
  fail "the classes in the model file are not -1 and 1"
# Missing values (empty, NA, ?) are refused, naming --impute; with it the training medians
# fill them, in the model file too, so predict fills a new file's the same way.
{ head -n 1 "$dir/train.csv"; tail -n +2 "$dir/train.csv" | awk -F, -v OFS=, \
    'NR % 7 == 1 { $1 = "" } NR % 11 == 2 { $2 = "NA" } NR % 13 == 3 { $1 = "?" } { print }'; } \
  >"$dir/gaps.csv"
expect 2 "missing value, expected a number; --impute mean|median" fit logreg --data "$dir/gaps.csv" \
  --label kind
expect 0 '"rows":80' fit logreg --data "$dir/gaps.csv" --label kind --impute median --json \
  --model-out "$dir/gaps.json"
/usr/bin/python3 -c 'import json, sys; i = json.load(open(sys.argv[1]))["preprocessing"]["imputer"]
assert i["strategy"] == "median" and len(i["values"]) == 2, i' "$dir/gaps.json" ||
  fail "no imputer in the model file"
expect 0 "over 80 rows" "$distml" predict --model "$dir/gaps.json" --data "$dir/gaps.csv" \
  --engine "$engine" --np "$np"
# GBDT takes missing values as they are (each split learns where they go), in fit and predict.
expect 0 '"rows":80' fit gbdt --data "$dir/gaps.csv" --label kind --set min_samples_leaf=5 \
  --json --model-out "$dir/gaps_gbdt.json"
expect 0 "over 80 rows" "$distml" predict --model "$dir/gaps_gbdt.json" \
  --data "$dir/gaps.csv" --engine "$engine" --np "$np"
# So does the random forest, in fit and predict.
expect 0 '"rows":80' fit random_forest --data "$dir/gaps.csv" --label kind --set n_estimators=5 \
  --json --model-out "$dir/gaps_rf.json"
expect 0 "over 80 rows" "$distml" predict --model "$dir/gaps_rf.json" \
  --data "$dir/gaps.csv" --engine "$engine" --np "$np"
# --proba: a column per class, named by it, whose probabilities add up to 1 (normalised, or a
# mean of distributions: up to a few ulps, so 1e-12 is ample); k-means has none.
expect 0 "train score 1.0000" fit rf --data "$dir/pm1.csv" --set n_estimators=5 \
  --model-out "$dir/pm1_rf.json"
for model in pm1 pm1_rf; do
  "$distml" predict --model "$dir/$model.json" --data "$dir/pm1.csv" --out "$dir/proba.csv" \
    --proba --engine "$engine" --np "$np" >/dev/null || fail "predict --proba ($model) failed"
  /usr/bin/python3 -c 'import csv, sys; rows = list(csv.reader(open(sys.argv[1])))
assert rows[0] == ["prediction", "-1", "1"] and len(rows) == 41, rows[:2]
for r in rows[1:]:
    p = [float(v) for v in r[1:]]
    assert abs(sum(p) - 1) < 1e-12 and r[0] == ["-1", "1"][p.index(max(p))], r' "$dir/proba.csv" ||
    fail "probabilities ($model): $(head -n 3 "$dir/proba.csv")"
done
expect 2 "--proba: kmeans gives no class probabilities" "$distml" predict --model "$dir/k.json" \
  --data "$dir/train.csv" --out "$dir/x.csv" --proba --engine "$engine" --np "$np"
# Rows of a class the training data lacks (7) are still predicted, and count as errors: 2 of
# the 10 rows, the other 8 right (score 0.8); predict --json prints a done line.
{ echo "x,y,label"; for i in 0 1 2 3; do echo "1.5,1,-1"; echo "21.5,21,1"; done
  echo "1.5,2,7"; echo "21.5,20,7"; } >"$dir/pm1_new.csv"
out=$("$distml" predict --model "$dir/pm1.json" --data "$dir/pm1_new.csv" --json \
  --out "$dir/pm1_new_out.csv" --engine "$engine" --np "$np" | tail -n 1) ||
  fail "predict with an unseen class failed: $out"
/usr/bin/python3 -c 'import json, sys; d = json.loads(sys.argv[1])
assert d["event"] == "done" and d["rows"] == 10 and d["unseen_class_rows"] == 2, d
assert d["score"] == 0.8 and d["estimator"] == "logistic_regression", d' "$out" ||
  fail "predict done line: $out"
[[ $(wc -l <"$dir/pm1_new_out.csv") -eq 11 ]] || fail "not every row predicted"
expect 0 '"test_unseen_class_rows":2' fit logreg --data "$dir/pm1.csv" --test "$dir/pm1_new.csv" --json
}

bad_input() {
printf 'x,y,kind\n1,2,low\n3,4\n' >"$dir/ragged.csv"
expect 2 "ragged.csv:3: 2 fields, expected 3" fit nb --data "$dir/ragged.csv" --label kind
printf 'x,y,kind\n1,abc,low\n' >"$dir/text.csv"
expect 2 "text.csv:2:" fit nb --data "$dir/text.csv" --label kind
expect 2 "no label column named 'species'; expected one of: x, y, kind" fit nb --data "$dir/train.csv" --label species
expect 2 "more than the 80 rows" fit kmeans --data "$dir/train.csv" --label kind --set k=500
expect 2 "unknown estimator 'forest'" "$distml" fit forest --data "$dir/train.csv"
expect 2 "--xgboost-out: only a gbdt model" "$distml" fit logreg --data "$dir/train.csv" --label kind \
  --xgboost-out "$dir/x.json"
expect 2 'unknown option "k"' fit logreg --data "$dir/train.csv" --set k=3
# More ranks than rows: some shards are empty, the fit still works.
printf 'x,kind\n1,a\n9,b\n' >"$dir/tiny.csv"
expect 0 '"rows":2' "$distml" fit nb --data "$dir/tiny.csv" --label kind --engine local --np 5 --json
}
# LibSVM rows stay sparse: 1,000 rows x 100,000 features at 1% density would take 800 MB
# dense; logistic regression fits them within a quarter of that above a tiny fit's peak memory
# (the sparse rows and their parse take about 12 + 16 bytes per stored entry: 28 MB). The same
# rows with 0-based indices (XGBoost's guess: an index 0 makes a file 0-based) give the same
# model, and predict reads a file as its model's file was read.
sparse() {
/usr/bin/python3 - "$dir" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(1)
rows, features, per_row = 1000, 100000, 1000
w = rng.normal(size=features)
for name, base in (("wide1.libsvm", 1), ("wide0.libsvm", 0)):
    rng_rows = np.random.default_rng(2)
    with open(f"{sys.argv[1]}/{name}", "w") as f:
        for _ in range(rows):
            cols = np.sort(rng_rows.choice(features, per_row, replace=False))
            vals = np.round(rng_rows.random(per_row), 3)
            label = "+1" if w[cols] @ vals > 0 else "-1"
            f.write(label + " " + " ".join(f"{c + base}:{v:g}" for c, v in zip(cols, vals)) + "\n")
PY
[[ $? -eq 0 ]] || fail "could not write the sparse files"
mem() { sed -n 's/.*"peak_rss_mb":\([0-9.]*\).*/\1/p' <<<"$1"; }
base=$(fit logreg --data "$dir/tiny.csv" --label kind --json) || fail "tiny fit: $base"
one=$(fit logreg --data "$dir/wide1.libsvm" --model-out "$dir/wide.json" --json) ||
  fail "sparse fit: $one"
awk -v b="$(mem "$base")" -v s="$(mem "$one")" 'BEGIN { exit !(s - b < 200) }' ||
  fail "sparse logreg took $(mem "$one") MB against $(mem "$base") MB for a tiny fit"
zero=$(fit logreg --data "$dir/wide0.libsvm" --json) || fail "0-based fit: $zero"
score() { sed -n 's/.*"train_score":\([0-9.e-]*\).*/\1/p' <<<"$1"; }
[[ $(score "$one") == "$(score "$zero")" && $one == *'"features":100000'* && $zero == *'"features":100000'* ]] ||
  fail "1-based and 0-based files differ: $one / $zero"
expect 0 "score $(printf %.4f "$(score "$one")") over 1000 rows" "$distml" predict \
  --model "$dir/wide.json" --data "$dir/wide1.libsvm" --engine "$engine" --np "$np"
# An estimator that needs dense rows, and --standardize (centring), get them dense.
printf -- '-1 1:1 3:2\n+1 2:5\n-1 1:2\n+1 2:4 3:1\n' >"$dir/small.libsvm"
expect 0 '"features":3' fit nb --data "$dir/small.libsvm" --json
expect 0 '"train_score":1.0' fit svm --data "$dir/small.libsvm" --standardize --json
}

if [[ $scope == all ]]; then
  conventions
  bad_input
  sparse
fi

# Regression: a real-valued label, y = 3x + 1 exactly; GBDT with squared error recovers it
# closely (R^2 near 1) and predict writes values, not class ids.
{
  echo "x,y"
  for i in $(seq 0 199); do echo "$i,$((3 * i + 1)).25"; done
} >"$dir/line.csv"
expect 0 '"classes":0' fit gbdt --data "$dir/line.csv" --set loss=squared_error --set min_samples_leaf=2 \
  --model-out "$dir/r.json" --json
out=$("$distml" predict --model "$dir/r.json" --data "$dir/line.csv" --out "$dir/r.csv" --engine "$engine" --np "$np") ||
  fail "predict of the regression model: $out"
score=$(sed -n 's/.*: score \([0-9.]*\) over.*/\1/p' <<<"$out")
awk -v s="$score" 'BEGIN { exit !(s > 0.999) }' || fail "regression score: $out"
awk -F, 'NR == 2 { v = $1 } END { exit !(v > -5 && v < 10) }' "$dir/r.csv" || fail "first value: $(head -n 2 "$dir/r.csv")"
echo "ok: regression $out"
# A regression forest predicts the mean target of its leaves: within the line's spread.
expect 0 '"classes":0' fit random_forest --data "$dir/line.csv" --set criterion=squared_error \
  --set n_estimators=10 --model-out "$dir/rf_r.json" --json
out=$("$distml" predict --model "$dir/rf_r.json" --data "$dir/line.csv" --out "$dir/r.csv" --engine "$engine" --np "$np") ||
  fail "predict of the regression forest: $out"
score=$(sed -n 's/.*: score \([0-9.]*\) over.*/\1/p' <<<"$out")
awk -v s="$score" 'BEGIN { exit !(s > 0.99) }' || fail "regression forest score: $out"
if [[ $scope == all ]]; then
  expect 2 "train.csv:2: column 3 (kind): label 'low' is not a finite number (regression)" \
    fit gbdt --data "$dir/train.csv" --label kind --set loss=squared_error
fi
