"""Classical ML speed against scikit-learn, in one run (recorded in docs/benchmarks.md).

Cases (each rep runs distml, then scikit-learn, on the same data; medians of --reps):
  kmeans_mnist   Lloyd iterations, MNIST train 60000 x 784, k = 10, random init, tol 0
  kmeans_synth   Lloyd iterations, seeded Gaussian blobs 1M x 32, k = 64
  logreg_mnist   multinomial logistic regression, L2, C = 1, lbfgs, MNIST; fit time, accuracy
  gbdt_mnist     histogram GBDT, 100 rounds, learning rate 0.1, 31 leaves, MNIST; time per
                 round (fit time / rounds), test accuracy; HistGradientBoostingClassifier
  gbdt_missing   the same GBDT on digits (70/30 split) with 20% of the feature values removed
                 at random (seeded), taken as missing by both; test accuracy and fit time
  xgb_mnist      GBDT at XGBoost's settings (depth-wise to depth 6, 255 bins, eta 0.1, lambda 1,
                 min_child_weight 1, 100 rounds) against XGBoost 1.7 hist on 2 threads, MNIST;
                 fit time (XGBoost's includes building its DMatrix) and test accuracy
  xgb_fashion    the same on Fashion-MNIST (make data fetches it)
  xgb_letters    the same on a letter-like table: 16 integer features (0-15), 26 classes, 20000
                 training and 5000 test rows (scikit-learn's make_classification, seeded; the
                 UCI letter table itself cannot be fetched here)
  rf_digits      random forest, 100 trees, scikit-learn's defaults (sqrt features, bootstrap,
                 fully grown), on digits (70/30 split); test accuracy and fit time
  rf_mnist       the same forest on MNIST (train 60000, test 10000)
  gmm_digits     Gaussian mixture, 10 components, full covariances, n_init 3, on digits
                 (standardised); mean log-likelihood on the training rows and fit time, each
                 the mean over --gmm-seeds seeds per rep (default 10); the summary pools every
                 rep's seeds into a mean with its standard error
distml runs at 2 ranks (mpi, one thread each) and, for k-means, also at 1 rank (scaling);
scikit-learn runs with 2 threads (threadpoolctl). k-means time per iteration is the fit time
of max_iter = 21 minus that of max_iter = 1, over 20: initialisation and the final inertia
cancel out. Prints one JSON line per measurement, then a markdown table.

Usage: /usr/bin/python3 bench/ml_speed.py [--reps N] [--cases a,b] [--build DIR]
                                         [--gmm-seeds N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MNIST = os.path.join(ROOT, "data", "mnist")
SYNTH = os.path.join(ROOT, "data", "synthetic_1m_32.csv")
FASHION = os.path.join(ROOT, "data", "fashion-mnist")


def read_idx(path):
    """An IDX file, or its .gz beside it."""
    import gzip
    data = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def mnist(split):
    x = read_idx(os.path.join(MNIST, f"{split}-images-idx3-ubyte")).reshape(-1, 784) / 255.0
    return x, read_idx(os.path.join(MNIST, f"{split}-labels-idx1-ubyte")).astype(int)


def idx_table(folder, split):
    """An IDX folder's images (as raw bytes, as distml reads them) and labels."""
    x = read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte")).reshape(-1, 784)
    return x.astype(np.float32), read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte"))


def raw_fashion_mnist():
    """Fashion-MNIST's IDX files decompressed (distml fit seeks in raw IDX files)."""
    import gzip
    import shutil
    folder = FASHION + "-raw"
    os.makedirs(folder, exist_ok=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        if not os.path.exists(os.path.join(folder, name)):
            with gzip.open(os.path.join(FASHION, name + ".gz")) as src, \
                    open(os.path.join(folder, name), "wb") as dst:
                shutil.copyfileobj(src, dst)
    return folder


def xgboost_hist(x, y, xt, yt):
    """XGBoost 1.7 hist with GBDT's settings in the xgb_ cases: fit time, test accuracy."""
    import xgboost as xgb
    t = time.perf_counter()
    booster = xgb.train({"tree_method": "hist", "max_depth": 6, "max_bin": 255, "eta": 0.1,
                         "lambda": 1, "min_child_weight": 1, "objective": "multi:softprob",
                         "num_class": int(y.max()) + 1, "nthread": 2},
                        xgb.DMatrix(x, y, nthread=2), 100)
    fit_s = time.perf_counter() - t
    predicted = booster.predict(xgb.DMatrix(xt, nthread=2)).argmax(axis=1)
    return fit_s, float((predicted == yt).mean())


def letters_tables():
    """The letter-like table (xgb_letters), written once as CSV files for distml."""
    from sklearn.datasets import make_classification
    x, y = make_classification(n_samples=25000, n_features=16, n_informative=12, n_redundant=2,
                               n_classes=26, n_clusters_per_class=2, class_sep=1.5,
                               random_state=7)
    x = np.clip(np.round((x - x.min(0)) / (x.max(0) - x.min(0)) * 15), 0, 15)
    paths = [os.path.join(ROOT, "data", f"letters_like_{s}.csv") for s in ("train", "test")]
    header = ",".join(f"f{i}" for i in range(16)) + ",label"
    for path, rows in zip(paths, (slice(0, 20000), slice(20000, None))):
        if not os.path.exists(path):
            np.savetxt(path + ".tmp", np.column_stack([x[rows], y[rows]]), delimiter=",",
                       header=header, comments="", fmt="%d")
            os.replace(path + ".tmp", path)
    return x[:20000], y[:20000], x[20000:], y[20000:], ["--data", paths[0], "--test", paths[1]]


def synthetic():
    """1M x 32 blobs around 64 centres; written once as CSV for distml."""
    rng = np.random.default_rng(7)
    centres = rng.normal(0, 10, size=(64, 32))
    labels = rng.integers(0, 64, size=1_000_000)
    x = centres[labels] + rng.normal(0, 1, size=(1_000_000, 32))
    if not os.path.exists(SYNTH):
        tmp = SYNTH + ".tmp"
        header = ",".join(f"f{i}" for i in range(32)) + ",label"
        np.savetxt(tmp, np.column_stack([x, labels]), delimiter=",", header=header, comments="",
                   fmt=["%.6f"] * 32 + ["%d"])
        os.replace(tmp, SYNTH)
    return x


def distml(build, args, np_):
    cmd = [os.path.join(build, "distml"), "fit", *args, "--np", str(np_), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"ml_speed: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def distml_iteration_s(build, data_args, k, np_):
    def fit(iters):
        return distml(build, ["kmeans", *data_args, "--set", f"k={k}", "--set", "init=random",
                              "--set", f"max_iter={iters}", "--set", "tol=0"], np_)["fit_time_s"]
    return (fit(21) - fit(1)) / 20


def sklearn_iteration_s(x, k):
    def fit(iters):
        with threadpool_limits(2):
            t = time.perf_counter()
            KMeans(k, init="random", n_init=1, max_iter=iters, tol=0, algorithm="lloyd",
                   random_state=0).fit(x)
            return time.perf_counter() - t
    return (fit(21) - fit(1)) / 20


def digits_tables(missing_share):
    """scikit-learn's digits split 70/30, a share of the feature values set missing (NaN),
    written as CSV for distml (a missing value as an empty cell)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    x, y = load_digits(return_X_y=True)
    x = x.astype(float)
    x[np.random.default_rng(11).random(x.shape) < missing_share] = np.nan
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    paths = []
    for name, (xs, ys) in (("train", (xtr, ytr)), ("test", (xte, yte))):
        paths.append(os.path.join(ROOT, "data", f"digits_missing{missing_share}_{name}.csv"))
        with open(paths[-1], "w") as f:
            f.write(",".join(f"f{i}" for i in range(64)) + ",label\n")
            for row, label in zip(xs, ys):
                f.write(",".join("" if np.isnan(v) else f"{v:g}" for v in row) + f",{label}\n")
    return xtr, xte, ytr, yte, paths


def sklearn_gbdt(x, y):
    """HistGradientBoostingClassifier with distml's GBDT defaults on 2 threads, and its fit
    time."""
    with threadpool_limits(2):
        t = time.perf_counter()
        m = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, max_leaf_nodes=31,
                                           early_stopping=False, random_state=0).fit(x, y)
        return m, time.perf_counter() - t


def emit(rows, **row):
    rows.append(row)
    print(json.dumps(row), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cases", default="kmeans_mnist,kmeans_synth,logreg_mnist,gbdt_mnist,"
                                      "gbdt_missing,gmm_digits,rf_digits,rf_mnist")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--gmm-seeds", type=int, default=10)
    a = p.parse_args()
    cases = a.cases.split(",")
    rows = []
    if any(c.endswith("_mnist") for c in cases):
        xtr, ytr = mnist("train")
        xte, yte = mnist("t10k")
    for rep in range(a.reps):
        for case in cases:
            if case.startswith("kmeans"):
                x, data_args, k = ((xtr, ["--data", MNIST], 10) if case == "kmeans_mnist" else
                                   (synthetic(), ["--data", SYNTH, "--label", "label"], 64))
                for np_ in (2, 1):
                    emit(rows, case=case, impl="distml", np=np_, rep=rep,
                         iteration_s=distml_iteration_s(a.build, data_args, k, np_))
                emit(rows, case=case, impl="sklearn", threads=2, rep=rep,
                     iteration_s=sklearn_iteration_s(x, k))
            elif case == "logreg_mnist":
                d = distml(a.build, ["logreg", "--data", MNIST, "--set", "C=1",
                                     "--set", "max_iter=100"], 2)
                emit(rows, case=case, impl="distml", np=2, rep=rep, fit_s=d["fit_time_s"],
                     test_accuracy=d["test_score"], iterations=d["iterations"])
                with threadpool_limits(2):
                    t = time.perf_counter()
                    m = LogisticRegression(C=1.0, max_iter=100).fit(xtr, ytr)
                    fit_s = time.perf_counter() - t
                emit(rows, case=case, impl="sklearn", threads=2, rep=rep, fit_s=fit_s,
                     test_accuracy=m.score(xte, yte), iterations=int(m.n_iter_[0]))
            elif case == "gbdt_mnist":
                d = distml(a.build, ["gbdt", "--data", MNIST, "--set", "max_iter=100"], 2)
                emit(rows, case=case, impl="distml", np=2, rep=rep,
                     round_s=d["fit_time_s"] / d["iterations"], test_accuracy=d["test_score"])
                m, fit_s = sklearn_gbdt(xtr, ytr)
                emit(rows, case=case, impl="sklearn", threads=2, rep=rep,
                     round_s=fit_s / m.n_iter_, test_accuracy=m.score(xte, yte))
            elif case == "gbdt_missing":
                xtr_m, xte_m, ytr_m, yte_m, (train, test) = digits_tables(0.2)
                d = distml(a.build, ["gbdt", "--data", train, "--test", test, "--set",
                                     "max_iter=100"], 2)
                emit(rows, case=case, impl="distml", np=2, rep=rep, fit_s=d["fit_time_s"],
                     test_accuracy=d["test_score"])
                m, fit_s = sklearn_gbdt(xtr_m, ytr_m)
                emit(rows, case=case, impl="sklearn", threads=2, rep=rep, fit_s=fit_s,
                     test_accuracy=m.score(xte_m, yte_m))
            elif case.startswith("xgb_"):
                if case == "xgb_letters":
                    x, y, xt, yt, data_args = letters_tables()
                else:
                    folder = MNIST if case == "xgb_mnist" else raw_fashion_mnist()
                    x, y = idx_table(folder, "train")
                    xt, yt = idx_table(folder, "t10k")
                    data_args = ["--data", folder]
                d = distml(a.build, ["gbdt", *data_args, "--set", "growth=depthwise",
                                     "--set", "max_depth=6", "--set", "max_leaf_nodes=0",
                                     "--set", "max_bins=255", "--set", "learning_rate=0.1",
                                     "--set", "l2_regularization=1", "--set", "min_samples_leaf=1",
                                     "--set", "min_child_weight=1", "--set", "max_iter=100"], 2)
                emit(rows, case=case, impl="distml", np=2, rep=rep, fit_s=d["fit_time_s"],
                     test_accuracy=d["test_score"])
                fit_s, accuracy = xgboost_hist(x, y, xt, yt)
                emit(rows, case=case, impl="xgboost", threads=2, rep=rep, fit_s=fit_s,
                     test_accuracy=accuracy)
            elif case.startswith("rf_"):
                if case == "rf_mnist":
                    x, y, xt, yt, args = xtr, ytr, xte, yte, ["--data", MNIST]
                else:
                    x, xt, y, yt, (train, test) = digits_tables(0.0)
                    args = ["--data", train, "--test", test]
                d = distml(a.build, ["random_forest", *args, "--set", f"seed={rep}"], 2)
                emit(rows, case=case, impl="distml", np=2, rep=rep, fit_s=d["fit_time_s"],
                     test_accuracy=d["test_score"])
                with threadpool_limits(2):
                    t = time.perf_counter()
                    m = RandomForestClassifier(100, n_jobs=2, random_state=rep).fit(x, y)
                    fit_s = time.perf_counter() - t
                emit(rows, case=case, impl="sklearn", threads=2, rep=rep, fit_s=fit_s,
                     test_accuracy=m.score(xt, yt))
            elif case == "gmm_digits":
                # One fit's optimum depends on its seed for both libraries (54 to 65 for
                # scikit-learn alone), so each rep compares the means over --gmm-seeds seeds.
                xtr_g, _, _, _, (train, _) = digits_tables(0.0)
                scaled = StandardScaler().fit_transform(xtr_g)
                ours, theirs = [], []
                for seed in range(a.gmm_seeds * rep, a.gmm_seeds * (rep + 1)):
                    ours.append(distml(a.build, ["gmm", "--data", train, "--standardize",
                                                 "--set", "n_components=10", "--set", "n_init=3",
                                                 "--set", f"seed={seed}"], 2))
                    with threadpool_limits(2):
                        t = time.perf_counter()
                        m = GaussianMixture(10, n_init=3, random_state=seed).fit(scaled)
                        theirs.append((time.perf_counter() - t, m.score(scaled)))
                ours_ll = [d["mean_log_likelihood"] for d in ours]
                theirs_ll = [ll for _, ll in theirs]
                emit(rows, case=case, impl="distml", np=2, rep=rep,
                     fit_s=statistics.mean(d["fit_time_s"] for d in ours),
                     mean_log_likelihood=statistics.mean(ours_ll), per_seed=ours_ll)
                emit(rows, case=case, impl="sklearn", threads=2, rep=rep,
                     fit_s=statistics.mean(t for t, _ in theirs),
                     mean_log_likelihood=statistics.mean(theirs_ll), per_seed=theirs_ll)
            else:
                sys.exit(f"ml_speed: unknown case {case}")
    summarize(rows)


def summarize(rows):
    def med(case, impl, key, np_=None):
        vals = [r[key] for r in rows if r["case"] == case and r["impl"] == impl and
                (np_ is None or r.get("np") == np_)]
        return statistics.median(vals) if vals else None

    print("\n| case | distml 2 ranks | distml 1 rank | scikit-learn or XGBoost (2 threads) | "
          "distml / baseline | scaling np2 vs np1 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case in ("kmeans_mnist", "kmeans_synth"):
        d2, d1, sk = (med(case, "distml", "iteration_s", 2), med(case, "distml", "iteration_s", 1),
                      med(case, "sklearn", "iteration_s"))
        if d2 is None:
            continue
        print(f"| {case} s/iteration | {d2:.4f} | {d1:.4f} | {sk:.4f} | {d2 / sk:.2f} | "
              f"{d1 / d2:.2f}x |")
    if med("logreg_mnist", "distml", "fit_s") is not None:
        d, s = med("logreg_mnist", "distml", "fit_s"), med("logreg_mnist", "sklearn", "fit_s")
        print(f"| logreg_mnist fit s | {d:.2f} | | {s:.2f} | {d / s:.2f} | |")
    if med("gbdt_mnist", "distml", "round_s") is not None:
        d, s = med("gbdt_mnist", "distml", "round_s"), med("gbdt_mnist", "sklearn", "round_s")
        print(f"| gbdt_mnist s/round | {d:.3f} | | {s:.3f} | {d / s:.2f} | |")
    for case in ("gbdt_missing", "gmm_digits", "rf_digits", "rf_mnist", "xgb_mnist",
                 "xgb_fashion", "xgb_letters"):
        if med(case, "distml", "fit_s") is not None:
            d = med(case, "distml", "fit_s")
            s = med(case, "xgboost" if case.startswith("xgb_") else "sklearn", "fit_s")
            print(f"| {case} fit s | {d:.2f} | | {s:.2f} | {d / s:.2f} | |")
    if med("gmm_digits", "distml", "mean_log_likelihood") is not None:
        d = med("gmm_digits", "distml", "mean_log_likelihood")
        s = med("gmm_digits", "sklearn", "mean_log_likelihood")
        print(f"\ngmm_digits mean log-likelihood: distml {d:.3f}, scikit-learn {s:.3f} "
              f"({100 * (d - s) / abs(s):+.2f}%)")
        # Pooled over every rep's seeds: the mean and its standard error per library.
        pooled = {impl: [v for r in rows if r["case"] == "gmm_digits" and r["impl"] == impl
                         for v in r["per_seed"]] for impl in ("distml", "sklearn")}
        (dm, ds), (sm, ss) = ((statistics.mean(v), statistics.stdev(v) / len(v) ** 0.5)
                              for v in pooled.values())
        print(f"gmm_digits pooled over {len(pooled['distml'])} seeds: distml {dm:.3f} ± {ds:.3f}, "
              f"scikit-learn {sm:.3f} ± {ss:.3f} ({100 * (dm - sm) / abs(sm):+.2f}% ± "
              f"{100 * (ds ** 2 + ss ** 2) ** 0.5 / abs(sm):.2f}%)")
    for case in ("logreg_mnist", "gbdt_mnist", "gbdt_missing", "rf_digits", "rf_mnist",
                 "xgb_mnist", "xgb_fashion", "xgb_letters"):
        if med(case, "distml", "test_accuracy") is not None:
            other = "xgboost" if case.startswith("xgb_") else "sklearn"
            print(f"\n{case} test accuracy: distml "
                  f"{100 * med(case, 'distml', 'test_accuracy'):.2f}%, {other} "
                  f"{100 * med(case, other, 'test_accuracy'):.2f}%")


main()
