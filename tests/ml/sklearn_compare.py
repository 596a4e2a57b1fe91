"""distml fit against scikit-learn on the data sets scikit-learn ships (iris, wine, breast
cancer, digits): the same split, the same standardisation, the same model family and C (for
GBDT the same max_iter, learning_rate and max_leaf_nodes, no early stopping; for random forests
100 trees, the mean over 5 seeds). Test accuracy must be within 1 point of scikit-learn's (for
forests, or 2 test rows); k-means inertia (best of n_init = 10)
within 1%; on breast cancer scikit-learn's L1 logistic objective, computed in this test from
the coefficients, at most as large for distml's (OWL-QN) as for saga's. On digits the best of 10 is itself widely spread (46.3k-47.4k by seed, for both
libraries alike, in two groups near 46.5k and 47.1k), so there the mean over 20 seeds of each
is compared (its standard error is about 0.2%).

Usage: sklearn_compare.py DISTML NP[,NP...] [--full]

scikit-learn fits each model once; distml fits it at each world size NP. Without --full
(make test) the ranks are threads of one process (--engine local; the mpi and gloo paths of
`distml fit` have their own tests) and the two slowest cases (SLOW below) are left out. With
--full (make bench) every fit runs under mpirun and every case runs.
"""
import csv
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_diabetes
from sklearn.ensemble import (HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                              RandomForestClassifier)
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data"


def load(name):
    """Features and integer labels of one of scikit-learn's bundled CSV files."""
    opener = gzip.open if name.endswith(".gz") else open
    with opener(os.path.join(DATA, name), "rt") as f:
        rows = list(csv.reader(f))
    if name.startswith("digits"):  # no header: 64 pixels then the digit
        data = np.array(rows, dtype=float)
    else:  # header: n_samples, n_features, class names
        data = np.array(rows[1:], dtype=float)
    return data[:, :-1], data[:, -1].astype(int)


def write_csv(path, x, y):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"f{i}" for i in range(x.shape[1])] + ["label"])
        for row, label in zip(x, y):
            w.writerow([repr(v) for v in row] + [int(label)])


ENGINE = "mpi"  # main() sets it from --full


def distml_fit(distml, np_, estimator, train, test, sets, model_out=None, standardize=True):
    cmd = [distml, "fit", estimator, "--data", train, "--test", test, "--label", "label",
           "--np", str(np_), "--engine", ENGINE, "--json"] + ["--standardize"] * standardize
    for s in sets:
        cmd += ["--set", s]
    if model_out:
        cmd += ["--model-out", model_out]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


U = 2.0**-53  # float64 unit roundoff


def l1_objective(C, coef, intercept, x, y):
    """scikit-learn's binary L1 logistic objective, C * sum_i log(1 + exp(-m_i)) + ||coef||_1
    with margins m_i = +-(x_i . coef + intercept) (+ for class 1), computed here from the
    coefficients; and a bound on its float64 rounding error: each margin is a dot product of
    d + 1 terms, off by at most gamma_(d+1) (|x_i| . |coef| + |intercept|) (gamma_k = k u /
    (1 - k u)), which moves a loss term by as much (log(1 + exp(-m)) is 1-Lipschitz in m); each
    term's own evaluation and the n + d additions of non-negative terms add at most
    (n + d + 4) u of the total."""
    coef, intercept = np.ravel(coef), np.ravel(intercept)
    z = x @ coef + intercept[0]
    margin = np.where(y == 1, z, -z)
    objective = C * np.logaddexp(0, -margin).sum() + np.abs(coef).sum()
    n, d = x.shape
    gamma = (d + 1) * U / (1 - (d + 1) * U)
    margin_error = gamma * (np.abs(x) @ np.abs(coef) + abs(intercept[0]))
    return objective, C * margin_error.sum() + (n + d + 4) * U * objective


def saga_l1(x, y):
    """scikit-learn saga's L1 fit at C = 1."""
    return LogisticRegression(C=1.0, penalty="l1", solver="saga", max_iter=5000,
                              tol=1e-6).fit(x, y)


def check_l1_objective(distml, np_, train, test, xtr, ytr, saga, tmp):
    """distml's L1 fit (OWL-QN) against saga's, each scored by scikit-learn's objective computed
    here from its coefficients, on the rows distml fitted: the training rows standardised by
    the mean and scale in distml's model file (the same float64 operations as distml's, so the
    same rows). distml minimises that objective, so its coefficients must score no worse than
    saga's there, up to the rounding of the two evaluations. The objective the model file
    reports must be the one its coefficients give, to the rounding of two evaluations. A
    failure message, or None."""
    model_path = os.path.join(tmp, "l1.json")
    sets = ["C=1", "penalty=l1", "tol=1e-8", "max_iter=1000"]  # run to the optimum
    distml_fit(distml, np_, "logreg", train, test, sets, model_path)
    with open(model_path) as f:
        model = json.load(f)
    scaler = model["preprocessing"]["standardizer"]
    rows = (xtr - np.array(scaler["mean"])) / np.array(scaler["scale"])
    ours, our_error = l1_objective(1.0, model["coef"], model["intercept"], rows, ytr)
    theirs, their_error = l1_objective(1.0, saga.coef_, saga.intercept_, rows, ytr)
    ok = ours <= theirs + our_error + their_error
    reported = model["objective"]
    reported_ok = abs(reported - ours) <= 2 * our_error
    print(f"{'breast_cancer.csv':20} {'logreg_l1':9} np {np_} objective from the coefficients: "
          f"distml {ours:.6f}  saga {theirs:.6f} (distml reports {reported:.6f})  "
          f"{'ok' if ok and reported_ok else 'FAIL'}")
    if not ok:
        return f"breast cancer L1 objective at np {np_}: {ours:.6f} vs saga {theirs:.6f}"
    if not reported_ok:
        return (f"breast cancer L1 at np {np_}: the model file reports objective {reported!r}, "
                f"its coefficients give {ours!r}")
    return None


# Cases too slow for make test: scikit-learn's saga needs ~50 s for L1 on digits, and the digits
# k-means comparison needs 20 seeds of each library to mean anything.
SLOW = {("digits.csv.gz", "logreg_l1"), ("digits.csv.gz", "kmeans")}


def check_diabetes_regression(distml, worlds, tmp, check):
    """GBDT regression: the test R^2 of HistGradientBoostingRegressor with the same rounds, rate
    and leaves on diabetes (load_diabetes, scaled; 70/30). Every feature has fewer than 255
    distinct training values, so both give each value a bin and grow the same trees;
    scikit-learn keeps gradients in float32, which moves each leaf value by about 2^-24 of
    itself, so R^2 agrees to about 1e-7: 1e-6. (On the raw integer-valued table, gains tie
    exactly and the two break ties differently.)"""
    x, y = load_diabetes(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0)
    paths = []
    for part, (xs, ys) in (("train", (xtr, ytr)), ("test", (xte, yte))):
        paths.append(os.path.join(tmp, f"diabetes_{part}.csv"))
        with open(paths[-1], "w", newline="") as f:
            w = csv.writer(f)
            w.writerow([f"f{i}" for i in range(xs.shape[1])] + ["label"])
            for row, target in zip(xs, ys):
                w.writerow([repr(v) for v in row] + [repr(target)])
    options = dict(max_iter=100, learning_rate=0.1, max_leaf_nodes=31)
    theirs = HistGradientBoostingRegressor(**options, early_stopping=False).fit(xtr, ytr)
    theirs = theirs.score(xte, yte)
    for np_ in worlds:
        # Unscaled, as scikit-learn's: rounding in the scaling can merge two close values.
        ours = distml_fit(distml, np_, "gbdt", *paths,
                          ["loss=squared_error"] + [f"{k}={v}" for k, v in options.items()],
                          standardize=False)
        ours = ours["test_score"]
        check("diabetes.csv", "gbdt_r2", np_, ours, theirs, abs(ours - theirs) <= 1e-6,
              f"distml R2 {ours:.10f}  sklearn {theirs:.10f}")


def main():
    global ENGINE
    distml, worlds = sys.argv[1], [int(n) for n in sys.argv[2].split(",")]
    full = "--full" in sys.argv[3:]
    ENGINE = "mpi" if full else "local"
    failures = []

    def check(name, label, np_, ours, theirs, ok, text):
        print(f"{name:20} {label:9} np {np_} {text}  {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{name} {label} at np {np_}: {ours:.6g} vs {theirs:.6g}")

    with tempfile.TemporaryDirectory() as tmp:
        for name in ["iris.csv", "wine_data.csv", "breast_cancer.csv", "digits.csv.gz"]:
            x, y = load(name)
            xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
            train, test = os.path.join(tmp, "train.csv"), os.path.join(tmp, "test.csv")
            write_csv(train, xtr, ytr)
            write_csv(test, xte, yte)
            scaler = StandardScaler().fit(xtr)
            str_, ste = scaler.transform(xtr), scaler.transform(xte)
            k = len(set(y))
            cases = [  # label, distml estimator, its options, the scikit-learn model
                ("logreg", "logreg", ["C=1"], LogisticRegression(C=1.0, max_iter=1000)),
                ("logreg_l1", "logreg", ["C=1", "penalty=l1"],
                 LogisticRegression(C=1.0, penalty="l1", solver="saga", max_iter=5000, tol=1e-6)),
                ("svm", "svm", ["C=1"], LinearSVC(C=1.0, max_iter=10000)),
                ("nb", "nb", [], GaussianNB()),
                ("gbdt", "gbdt", ["max_iter=100", "learning_rate=0.1", "max_leaf_nodes=31"],
                 HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1,
                                                max_leaf_nodes=31, early_stopping=False)),
            ]
            for label, estimator, sets, model in cases:
                if (name, label) in SLOW and not full:
                    print(f"{name:20} {label:9} left to --full")
                    continue
                theirs = model.fit(str_, ytr).score(ste, yte)
                for np_ in worlds:
                    ours = distml_fit(distml, np_, estimator, train, test, sets)["test_score"]
                    check(name, label, np_, ours, theirs, abs(ours - theirs) <= 0.01 + 1e-12,
                          f"distml {100 * ours:6.2f}%  sklearn {100 * theirs:6.2f}%")
            # A forest's test accuracy moves by a row or two with its seed on these small test
            # sets (45 rows for iris), for both libraries: the means over 5 seeds must be within
            # 1 point or 2 test rows, whichever is more.
            theirs = np.mean([RandomForestClassifier(100, random_state=s).fit(str_, ytr)
                              .score(ste, yte) for s in range(5)])
            for np_ in worlds:
                ours = np.mean([distml_fit(distml, np_, "random_forest", train, test,
                                           [f"seed={s}"])["test_score"] for s in range(5)])
                check(name, "forest", np_, ours, theirs,
                      abs(ours - theirs) <= max(0.01, 2 / len(yte)) + 1e-12,
                      f"distml {100 * ours:6.2f}%  sklearn {100 * theirs:6.2f}% (5 seeds)")
            if name == "breast_cancer.csv":
                saga = saga_l1(str_, ytr)
                for np_ in worlds:
                    failure = check_l1_objective(distml, np_, train, test, xtr, ytr, saga, tmp)
                    if failure:
                        failures.append(failure)
            if (name, "kmeans") in SLOW and not full:
                print(f"{name:20} {'kmeans':9} left to --full")
                continue
            seeds = range(20) if name.startswith("digits") else [0]
            theirs = np.mean([KMeans(n_clusters=k, n_init=10, random_state=s).fit(str_).inertia_
                              for s in seeds])
            for np_ in worlds:
                ours = np.mean([distml_fit(distml, np_, "kmeans", train, test,
                                           [f"k={k}", "n_init=10", f"seed={s}"])["inertia"]
                                for s in seeds])
                check(name, "kmeans", np_, ours, theirs, ours / theirs <= 1.01,
                      f"distml {ours:10.3f}  sklearn {theirs:10.3f}  ratio {ours / theirs:.4f}")
        check_diabetes_regression(distml, worlds, tmp, check)
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))


main()
