"""Labels as scikit-learn takes them: the same rows (scikit-learn's breast cancer table) with
their two classes written as 0/1, +1/-1 (CSV and LibSVM, as in a9a), 1/2 (as in
covtype.binary) and as names. For each, distml's logistic regression must
- take the classes scikit-learn takes (np.unique of the labels), in that order;
- fit the same model whatever the spelling: on one rank the same class ids in the same order
  give the same arithmetic, so the coefficients are equal exactly (over several ranks the
  rows' split follows the file's bytes, and so the order of the sums; the dictionary's
  agreement across ranks is tests/ml/sharded_reader_test.cc's);
- write its predictions back as the original label values, matching scikit-learn's
  LogisticRegression (same C, standardised features) on all but the rows the two optimisers
  leave within their tolerance of the boundary (at most 1% of them).

Usage: label_conventions.py DISTML
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv"
SPELLINGS = {  # class 0 (malignant), class 1 (benign)
    "zero_one": ("0", "1"),
    "plus_minus": ("-1", "+1"),
    "one_two": ("1", "2"),
    "names": ("malignant", "nonmalignant"),  # sorted as 0 and 1 are
}


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{out.stdout}{out.stderr}")


def main():
    distml = sys.argv[1]
    with open(DATA) as f:
        rows = list(csv.reader(f))[1:]
    data = np.array(rows, dtype=float)
    x, y = data[:, :-1], data[:, -1].astype(int)
    coefficients = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (zero, one) in SPELLINGS.items():
            labels = np.array([zero, one])[y]
            for fmt in ("csv", "libsvm") if name == "plus_minus" else ("csv",):
                path = os.path.join(tmp, f"{name}.{fmt}")
                with open(path, "w") as f:
                    if fmt == "csv":
                        f.write(",".join(f"f{i}" for i in range(x.shape[1])) + ",label\n")
                        for row, label in zip(x, labels):
                            f.write(",".join(repr(v) for v in row) + f",{label}\n")
                    else:
                        for row, label in zip(x, labels):
                            f.write(label + " " + " ".join(f"{i + 1}:{v!r}" for i, v in
                                                           enumerate(row)) + "\n")
                model, preds = os.path.join(tmp, "m.json"), os.path.join(tmp, "p.csv")
                run(distml, "fit", "logreg", "--data", path, "--standardize", "--model-out",
                    model, "--engine", "local", "--np", "1")
                run(distml, "predict", "--model", model, "--data", path, "--out", preds,
                    "--engine", "local", "--np", "2")
                with open(model) as f:
                    fitted = json.load(f)
                with open(preds) as f:
                    ours = np.array([r[0] for r in list(csv.reader(f))[1:]])
                theirs_model = LogisticRegression(C=1.0, max_iter=10000)
                scaled = StandardScaler().fit_transform(x)
                theirs_model.fit(scaled, labels if name == "names" else labels.astype(float))
                classes = [str(c) for c in np.unique(labels if name == "names" else
                                                     labels.astype(int))]
                assert fitted["class_names"] == classes, (name, fmt, fitted["class_names"])
                theirs = theirs_model.predict(scaled)
                if name != "names":  # the values as distml writes integers back
                    theirs = np.array([str(int(v)) for v in theirs])
                agree = np.mean(ours == theirs)
                assert agree >= 0.99, (name, fmt, agree)
                coefficients[(name, fmt)] = fitted["coef"]
                print(f"ok: {name} ({fmt}): classes {classes}, predictions agree with "
                      f"scikit-learn on {100 * agree:.1f}% of the rows")
    first = next(iter(coefficients.values()))
    for key, coef in coefficients.items():
        assert coef == first, (key, "fits another model than", next(iter(coefficients)))
    print(f"ok: the same coefficients for all {len(coefficients)} spellings")


if __name__ == "__main__":
    main()
