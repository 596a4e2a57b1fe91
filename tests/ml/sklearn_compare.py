"""distml fit against scikit-learn on the data sets scikit-learn ships (iris, wine, breast
cancer, digits): the same split, the same standardisation, the same model family and C (for
GBDT the same max_iter, learning_rate and max_leaf_nodes, no early stopping).
Test accuracy must be within 1 point of scikit-learn's; k-means inertia (best of n_init = 10)
within 1%; on breast cancer distml's L1 logistic objective (OWL-QN) at most scikit-learn saga's
plus 0.01%. On digits the best of 10 is itself widely spread (46.3k-47.4k by seed, for both
libraries alike, in two groups near 46.5k and 47.1k), so there the mean over 20 seeds of each
is compared (its standard error is about 0.2%).

Usage: sklearn_compare.py DISTML NP
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
from sklearn.ensemble import HistGradientBoostingClassifier
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


def distml_fit(distml, np_, estimator, train, test, sets, model_out=None):
    cmd = [distml, "fit", estimator, "--data", train, "--test", test, "--label", "label",
           "--standardize", "--np", str(np_), "--json"]
    for s in sets:
        cmd += ["--set", s]
    if model_out:
        cmd += ["--model-out", model_out]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def l1_objective(C, coef, intercept, x, y):
    """scikit-learn's binary L1 logistic objective: C * sum_i log-loss_i + ||coef||_1."""
    z = x @ np.ravel(coef) + intercept[0]
    margin = np.where(y == 1, z, -z)
    return C * np.logaddexp(0, -margin).sum() + np.abs(coef).sum()


def check_l1_objective(distml, np_, train, test, x, y, tmp):
    """distml's objective (from its model file) against saga's, computed from coef_ and
    intercept_ on the same standardised rows; a failure message, or None."""
    model_path = os.path.join(tmp, "l1.json")
    sets = ["C=1", "penalty=l1", "tol=1e-8", "max_iter=1000"]  # run to the optimum
    distml_fit(distml, np_, "logreg", train, test, sets, model_path)
    with open(model_path) as f:
        ours = json.load(f)["objective"]
    saga = LogisticRegression(C=1.0, penalty="l1", solver="saga", max_iter=5000,
                              tol=1e-6).fit(x, y)
    theirs = l1_objective(1.0, saga.coef_, saga.intercept_, x, y)
    ok = ours <= theirs * (1 + 1e-4)
    print(f"{'breast_cancer.csv':20} {'logreg_l1':9} objective distml {ours:.6f}  sklearn saga "
          f"{theirs:.6f}  {'ok' if ok else 'FAIL'}")
    return None if ok else f"breast cancer L1 objective {ours:.6f} vs saga {theirs:.6f}"


def main():
    distml, np_ = sys.argv[1], int(sys.argv[2])
    failures = []
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
                ours = distml_fit(distml, np_, estimator, train, test, sets)["test_score"]
                theirs = model.fit(str_, ytr).score(ste, yte)
                ok = abs(ours - theirs) <= 0.01 + 1e-12
                print(f"{name:20} {label:9} distml {100 * ours:6.2f}%  sklearn "
                      f"{100 * theirs:6.2f}%  {'ok' if ok else 'FAIL'}")
                if not ok:
                    failures.append(f"{name} {label}: {ours:.4f} vs {theirs:.4f}")
            if name == "breast_cancer.csv":
                failure = check_l1_objective(distml, np_, train, test, str_, ytr, tmp)
                if failure:
                    failures.append(failure)
            seeds = range(20) if name.startswith("digits") else [0]
            ours = np.mean([distml_fit(distml, np_, "kmeans", train, test,
                                       [f"k={k}", "n_init=10", f"seed={s}"])["inertia"]
                            for s in seeds])
            theirs = np.mean([KMeans(n_clusters=k, n_init=10, random_state=s).fit(str_).inertia_
                              for s in seeds])
            ratio = ours / theirs
            ok = ratio <= 1.01
            print(f"{name:20} {'kmeans':9} distml {ours:10.3f}  sklearn {theirs:10.3f}  "
                  f"ratio {ratio:.4f}  {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} kmeans inertia ratio {ratio:.4f}")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))


main()
