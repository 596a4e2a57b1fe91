"""`distml fit gbdt --xgboost-out`: the file loads in XGBoost (xgboost.Booster.load_model) and
predicts what distml predicts, for a binary model with missing values, a softmax model and a
regression, on the training rows; and for a model fitted on a LibSVM file with its zeros left
out, on that file as XGBoost reads it (an absent entry is a missing value) and on the same rows
with every zero written (then a present 0).

XGBoost keeps leaf values in float32 and sums them in float32, so each prediction may differ
from distml's (float64) by rounding alone: at most 2^-24 relative per leaf value and per
addition, i.e. |margin error| <= (T + 1) * 2^-24 * S with T trees and S the sum of the largest
|leaf value| of each tree plus the baseline. Probabilities move by at most the margin error
(sigmoid and softmax change by at most as much as their inputs) plus float32 rounding of the
output. The bound is computed from the model itself; the data are ordinary (no two feature
values closer than float32 tells apart), so every row must take the same path, rows that lie
exactly on a threshold included.

Usage: xgboost_export.py DISTML
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import xgboost as xgb

distml = sys.argv[1]
failures = []


def run(*args):
    out = subprocess.run([distml, *args], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"FAIL: distml {' '.join(args)} exited {out.returncode}:\n{out.stderr}")


def write_csv(path, x, y):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"f{i}" for i in range(x.shape[1])] + ["label"])
        for row, label in zip(x, y):
            w.writerow(["" if np.isnan(v) else repr(v) for v in row] + [label])


def margin_bound(model):
    """(T + 1) * 2^-24 * (|baseline| + sum over trees of the largest |leaf value|)."""
    trees = model["trees"]
    largest = sum(max(abs(n["value"]) for n in t if n["feature"] < 0) for t in trees)
    return (len(trees) + 1) * 2.0**-24 * (max(abs(b) for b in model["baseline"]) + largest)


def on_thresholds(m, x):
    """x with one new row per split of model file m: the first row with the split's feature
    moved onto its threshold. distml sends such a row left, and so must XGBoost."""
    on = [(n["feature"], n["threshold"]) for t in m["trees"] for n in t
          if n["feature"] >= 0 and abs(n["threshold"]) < 1e30]
    extra = np.repeat(x[:1], len(on), axis=0)
    for i, (f, t) in enumerate(on):
        extra[i, f] = t
    return np.vstack([x, extra])


def compare(name, m, preds, theirs):
    """distml's predictions (the --out file of `predict`, model file m) against XGBoost's."""
    regression = m["loss"] == "squared_error"
    rows = list(csv.reader(open(preds)))[1:]
    bound = margin_bound(m)
    if regression:
        ours = np.array([float(r[0]) for r in rows])
        tol = bound + 2.0**-24 * np.abs(ours)
    else:
        ours = np.array([[float(v) for v in r[1:]] for r in rows])
        if theirs.ndim == 1:  # binary: XGBoost gives P(class 1)
            ours = ours[:, 1]
        tol = bound + 2.0**-23
    off = np.abs(ours - theirs) > tol
    if off.ndim > 1:
        off = off.any(axis=1)
    print(f"{name:40} max |distml - xgboost| {np.max(np.abs(ours - theirs)):.3g} "
          f"(bound {np.max(tol):.3g}), {np.sum(off)} of {len(off)} rows beyond it  "
          f"{'FAIL' if off.any() else 'ok'}")
    if off.any():
        failures.append(name)


def fit(data, label, model, exported, sets):
    run("fit", "gbdt", "--data", data, *label, "--np", "2", "--engine", "local",
        "--model-out", model, "--xgboost-out", exported, *sum([["--set", s] for s in sets], []))
    booster = xgb.Booster()
    booster.load_model(exported)
    return json.load(open(model)), booster


def predict(data, m, model, preds):
    run("predict", "--model", model, "--data", data, "--out", preds,
        *([] if m["loss"] == "squared_error" else ["--proba"]), "--engine", "local", "--np", "2")


def check(name, x, y, sets):
    with tempfile.TemporaryDirectory() as tmp:
        data, model, exported, preds = (os.path.join(tmp, f) for f in
                                        ("d.csv", "m.json", "x.json", "p.csv"))
        write_csv(data, x, y)
        m, booster = fit(data, ["--label", "label"], model, exported, sets)
        x = on_thresholds(m, x)
        write_csv(data, x, np.resize(y, len(x)))
        predict(data, m, model, preds)
        compare(name, m, preds, booster.predict(xgb.DMatrix(x, missing=np.nan)).astype(float))


def write_libsvm(path, x, y, zeros):
    """0-based LibSVM rows (XGBoost's reader takes indices as 0-based unless told otherwise);
    entries that are 0 left out unless `zeros`."""
    with open(path, "w") as f:
        for row, label in zip(x, y):
            entries = " ".join(f"{j}:{float(v)!r}" for j, v in enumerate(row) if zeros or v != 0)
            f.write(f"{label} {entries}\n")


def check_libsvm(name, x, y, sets):
    """A model fitted on x written as LibSVM with its zeros left out; predicted by both on that
    file and on the same rows with every zero written."""
    with tempfile.TemporaryDirectory() as tmp:
        data, model, exported, preds = (os.path.join(tmp, f) for f in
                                        ("d.svm", "m.json", "x.json", "p.csv"))
        write_libsvm(data, x, y, zeros=False)
        m, booster = fit(data, [], model, exported, sets)
        x = on_thresholds(m, x)
        y = np.resize(y, len(x))
        for zeros in (False, True):
            write_libsvm(data, x, y, zeros)
            predict(data, m, model, preds)
            theirs = booster.predict(xgb.DMatrix(data + "?format=libsvm")).astype(float)
            compare(f"{name}, zeros {'written' if zeros else 'left out'}", m, preds, theirs)


rng = np.random.default_rng(3)
x = np.round(rng.normal(size=(400, 5)) * 4) / 4 + rng.normal(size=(400, 5)) * 1e-3
x[rng.random(x.shape) < 0.15] = np.nan
score = np.nan_to_num(x[:, 0]) - np.nan_to_num(x[:, 1]) + np.isnan(x[:, 2])
check("binary, missing values", x, (score > 0).astype(int) * 2 - 1, ["max_iter=20"])
classes = np.digitize(np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 3]), [-1, 0, 1])
check("softmax, 4 classes", x, classes, ["max_iter=15", "max_depth=4"])
target = np.nan_to_num(x[:, 0]) * 3 + np.sin(np.nan_to_num(x[:, 1]))
check("regression", x, target, ["max_iter=20", "loss=squared_error"])
# LibSVM: 15% to 40% of the entries 0 and left out of the file. Zeros and missing values must
# take different paths for the check to mean anything: the label depends on x2 being 0, and on
# x0, x1 and x3 whose splits fall on either side of 0; x3 is mostly negative, so a split near
# -0.5 leaves its zeros in the smaller child (where a node sends missing values only if it
# learnt to).
x = np.round(rng.normal(size=(600, 5)) * 4) / 4 + rng.normal(size=(600, 5)) * 1e-3
x[:, 3] -= 1.5
x[rng.random(x.shape) < [0.4, 0.4, 0.4, 0.15, 0.4]] = 0
x[:, 4] = np.where(x[:, 4] == 0, 1, x[:, 4])  # no empty row
score = x[:, 0] - x[:, 1] + (x[:, 2] == 0) + 2 * (x[:, 3] > -0.5) - 1
check_libsvm("libsvm, binary", x, (score > 0).astype(int), ["max_iter=20"])
check_libsvm("libsvm, regression", x, np.round(score * 8) / 8,
             ["max_iter=20", "loss=squared_error"])
if failures:
    sys.exit("FAIL: " + ", ".join(failures))
