"""distml.ml's estimators on NumPy arrays against `distml fit` and `distml predict` on the same
rows, for every estimator.

usage: estimators.py DISTML [--np N]

This driver writes a training and a test CSV, fits each estimator with `distml fit --np 1`
(one rank reading the whole file) and predicts the test rows with `distml predict`; then it
launches N ranks over gloo (estimators.py --rank-side DIR), each passing a contiguous share of
the training rows to distml.ml, and every rank predicts the whole test file. The predictions
must be equal, label for label: the estimators' own tests show that the world size does not
change the model, so any difference is the binding's (label order, options, rows). The
scores (accuracy, R^2, minus the inertia, mean log-likelihood) must agree within 1e-9
relative: they are sums over the rows in another order.
"""
import json
import subprocess
import sys
import tempfile

import numpy as np

# (estimator, --set options, whether the labels are real numbers). k-means starts from
# k-means++, whose draws do not depend on the rank: k-means||'s per-rank sampling depends on
# how the rows are shared out, which here differs from the CSV reader's byte ranges.
CASES = [
    ("kmeans", {"k": 3, "seed": 1, "init": "k-means++"}, False),
    ("logistic_regression", {"C": 1.0}, False),
    ("linear_svc", {"C": 0.5}, False),
    ("gaussian_nb", {}, False),
    ("multinomial_nb", {"alpha": 0.5}, False),
    ("gbdt", {"max_iter": 5, "max_depth": 3}, False),
    ("random_forest", {"n_estimators": 5, "max_depth": 4, "seed": 3}, False),
    ("gaussian_mixture", {"n_components": 2, "seed": 2}, False),
    ("gbdt", {"max_iter": 5, "max_depth": 3, "loss": "squared_error"}, True),
]


def data(rows, seed):
    """Three classes (labels 10, 20, 30: their ids are not the labels) of 4 non-negative
    features, and a real-valued target."""
    g = np.random.default_rng(seed)
    y = g.integers(0, 3, rows)
    x = np.abs(g.normal(size=(rows, 4)) + y[:, None] * np.array([1.0, 0.5, 0.0, -0.5]) + 1)
    return np.round(x, 3), (y + 1) * 10, np.round(x @ [1.0, -2.0, 0.5, 3.0], 3)


def write_csv(path, x, labels=None):
    with open(path, "w") as f:
        f.write("a,b,c,d" + (",label" if labels is not None else "") + "\n")
        for i, row in enumerate(x):
            f.write(",".join(f"{v:g}" for v in row)
                    + (f",{labels[i]}" if labels is not None else "") + "\n")


def label_of(case):
    name, options, regression = case
    return "target" if regression else ("none" if name in ("kmeans", "gaussian_mixture") else "y")


def driver(distml, np_ranks, tmp):
    x, y, target = data(240, 5)
    xt, yt, targett = data(60, 6)
    for split, (a, b, c) in (("train", (x, y, target)), ("test", (xt, yt, targett))):
        write_csv(f"{tmp}/{split}_y.csv", a, b)
        write_csv(f"{tmp}/{split}_target.csv", a, c)
        write_csv(f"{tmp}/{split}_none.csv", a)
    expected = []
    for i, case in enumerate(CASES):
        name, options, _ = case
        which = label_of(case)
        sets = [a for k, v in options.items() for a in ("--set", f"{k}={v}")]
        fit = subprocess.run(
            [distml, "fit", name, "--data", f"{tmp}/train_{which}.csv", "--label",
             "label" if which != "none" else "none", "--np", "1", "--engine", "local",
             "--model-out", f"{tmp}/model{i}.json", "--json", *sets],
            capture_output=True, text=True, check=True)
        done = json.loads(fit.stdout.strip().splitlines()[-1])
        subprocess.run(
            [distml, "predict", "--model", f"{tmp}/model{i}.json", "--data",
             f"{tmp}/test_{which}.csv", "--np", "1", "--engine", "local",
             "--out", f"{tmp}/pred{i}.csv"], capture_output=True, text=True, check=True)
        expected.append({"train_score": done["train_score"],
                         "predictions": open(f"{tmp}/pred{i}.csv").read().split("\n")[1:]})
    with open(f"{tmp}/expected.json", "w") as f:
        json.dump(expected, f)
    np.savez(f"{tmp}/data.npz", x=x, y=y, target=target, xt=xt)
    return subprocess.run([distml, "launch", "-n", str(np_ranks), "--engine", "gloo", "--",
                           sys.executable, __file__, "--rank-side", tmp]).returncode


def rank_side(tmp):
    import distml
    import distml.ml

    distml.init(timeout=60)
    r, n = distml.rank(), distml.size()
    d = np.load(f"{tmp}/data.npz")
    expected = json.load(open(f"{tmp}/expected.json"))
    rows = slice(len(d["y"]) * r // n, len(d["y"]) * (r + 1) // n)  # contiguous, as a file's
    failures = []
    for case, want in zip(CASES, expected):
        name, options, regression = case
        which = label_of(case)
        labels = None if which == "none" else (d["target"] if regression else d["y"])[rows]
        model = distml.ml.Estimator(name, **options).fit(d["x"][rows], labels)
        score = model.score(d["x"][rows], labels)
        got = model.predict(d["xt"])
        # distml predict writes labels as the classes' names and values with %.17g.
        texts = [f"{v:.17g}" if regression else str(v) for v in got]
        want_texts = [line.split(",")[0] for line in want["predictions"] if line]
        if regression:
            same = np.allclose(np.array(texts, float), np.array(want_texts, float), rtol=1e-12,
                               atol=0)
        else:
            same = texts == want_texts
        if not same:
            failures.append(f"{name} {options}: predictions differ from distml predict's "
                            f"({texts[:5]}... against {want_texts[:5]}...)")
        if abs(score - want["train_score"]) > 1e-9 * max(1.0, abs(want["train_score"])):
            failures.append(f"{name} {options}: score {score!r}, distml fit's "
                            f"{want['train_score']!r}")
    if failures:
        print(f"rank {r}: " + "; ".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"rank {r}: {len(CASES)} estimators predict as distml fit's models")


if __name__ == "__main__":
    if sys.argv[1] == "--rank-side":
        rank_side(sys.argv[2])
    else:
        with tempfile.TemporaryDirectory(prefix="distml-py-estimators-") as folder:
            sys.exit(driver(sys.argv[1], int(sys.argv[3]) if len(sys.argv) > 3 else 3, folder))
