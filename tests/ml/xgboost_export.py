"""`distml fit gbdt --xgboost-out`: the file loads in XGBoost (xgboost.Booster.load_model) and
predicts what distml predicts, for a binary model with missing values, a softmax model and a
regression, on the training rows.

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


def check(name, x, y, sets):
    with tempfile.TemporaryDirectory() as tmp:
        data, model, exported, preds = (os.path.join(tmp, f) for f in
                                        ("d.csv", "m.json", "x.json", "p.csv"))
        write_csv(data, x, y)
        run("fit", "gbdt", "--data", data, "--label", "label", "--np", "2", "--engine", "local",
            "--model-out", model, "--xgboost-out", exported, *sum([["--set", s] for s in sets], []))
        m = json.load(open(model))
        regression = m["loss"] == "squared_error"
        # New rows that lie exactly on thresholds (the first row with one feature moved onto
        # each split's threshold): distml sends them left, and so must XGBoost.
        on = [(n["feature"], n["threshold"]) for t in m["trees"] for n in t
              if n["feature"] >= 0 and abs(n["threshold"]) < 1e30]
        x = np.vstack([x, np.repeat(x[:1], len(on), axis=0)])
        for i, (f, t) in enumerate(on):
            x[len(x) - len(on) + i, f] = t
        y = np.concatenate([y, np.repeat(y[:1], len(on))])
        write_csv(data, x, y)
        run("predict", "--model", model, "--data", data, "--out", preds,
            *([] if regression else ["--proba"]), "--engine", "local", "--np", "2")
        rows = list(csv.reader(open(preds)))[1:]
        booster = xgb.Booster()
        booster.load_model(exported)
        theirs = booster.predict(xgb.DMatrix(x, missing=np.nan)).astype(float)
        bound = margin_bound(m)
        if regression:
            ours = np.array([float(r[0]) for r in rows])
            tol = bound + 2.0**-24 * np.abs(ours)
        else:
            ours = np.array([[float(v) for v in r[1:]] for r in rows])
            if theirs.ndim == 1:  # binary: XGBoost gives P(class 1)
                ours = ours[:, 1]
            tol = bound + 2.0**-23
        worst = np.max(np.abs(ours - theirs) - tol)
        ok = worst <= 0
        print(f"{name:28} max |distml - xgboost| {np.max(np.abs(ours - theirs)):.3g} "
              f"(bound {np.max(tol):.3g})  {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(name)


rng = np.random.default_rng(3)
x = np.round(rng.normal(size=(400, 5)) * 4) / 4 + rng.normal(size=(400, 5)) * 1e-3
x[rng.random(x.shape) < 0.15] = np.nan
score = np.nan_to_num(x[:, 0]) - np.nan_to_num(x[:, 1]) + np.isnan(x[:, 2])
check("binary, missing values", x, (score > 0).astype(int) * 2 - 1, ["max_iter=20"])
classes = np.digitize(np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 3]), [-1, 0, 1])
check("softmax, 4 classes", x, classes, ["max_iter=15", "max_depth=4"])
target = np.nan_to_num(x[:, 0]) * 3 + np.sin(np.nan_to_num(x[:, 1]))
check("regression", x, target, ["max_iter=20", "loss=squared_error"])
if failures:
    sys.exit("FAIL: " + ", ".join(failures))
