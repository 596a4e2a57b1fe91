"""distml fit gaussian_mixture against expectation-maximisation written out in NumPy below, and
against scikit-learn's GaussianMixture.

For each covariance type, distml fits 3 components to three overlapping blobs once with one EM
iteration and once with four (tol 0, so neither stops early; the same seed, so the same
initialisation). From the first model's parameters the NumPy EM below runs three iterations;
they must give the second model's weights, means, covariances and mean log-likelihood. Both
compute the same float64 sums in another order, so they differ by rounding, about 1e-15
relative per sum of 300 terms; three EM steps on well-separated blobs amplify that by far less
than 1e5, so 1e-9 relative separates rounding from a wrong step (a covariance off by one row's
share moves it by about 3e-3). The fitted model's mean log-likelihood must be within 1% of
scikit-learn's (full, n_init 3), the benchmark's target.

Usage: gmm_reference.py DISTML
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.mixture import GaussianMixture

RTOL = 1e-9


def fit(distml, data, model, sets):
    cmd = [distml, "fit", "gmm", "--data", data, "--label", "none", "--engine", "local",
           "--np", "3", "--json", "--model-out", model] + [a for s in sets for a in ("--set", s)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
    with open(model) as f:
        return json.loads(out.stdout.strip().splitlines()[-1]), json.load(f)


def full_covariances(kind, cov, k, d):
    """Every component's d x d covariance from distml's storage for `kind`."""
    cov = np.asarray(cov)
    if kind == "full":
        return cov.reshape(k, d, d)
    if kind == "diag":
        return np.array([np.diag(c) for c in cov.reshape(k, d)])
    return np.array([c * np.eye(d) for c in cov])


def em_step(x, weights, means, covs, kind, reg):
    """One E-step and M-step from the definitions; returns the new parameters and the mean
    log-likelihood under the old ones."""
    n, d = x.shape
    k = len(weights)
    log_p = np.empty((n, k))
    for c in range(k):
        diff = x - means[c]
        inv = np.linalg.inv(covs[c])
        _, log_det = np.linalg.slogdet(covs[c])
        maha = np.einsum("ij,jk,ik->i", diff, inv, diff)
        log_p[:, c] = np.log(weights[c]) - 0.5 * (d * np.log(2 * np.pi) + log_det + maha)
    top = log_p.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(log_p - top).sum(axis=1))
    resp = np.exp(log_p - lse[:, None])
    nk = resp.sum(axis=0) + 10 * np.finfo(float).eps
    means = resp.T @ x / nk[:, None]
    covs = np.empty((k, d, d))
    for c in range(k):
        diff = x - means[c]
        full = (resp[:, c, None] * diff).T @ diff / nk[c]
        if kind == "full":
            covs[c] = full + reg * np.eye(d)
        elif kind == "diag":
            covs[c] = np.diag(np.diag(full) + reg)
        else:
            covs[c] = np.mean(np.diag(full) + reg) * np.eye(d)
    return nk / nk.sum(), means, covs, lse.mean()


def close(name, got, want):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
    if not err <= RTOL:
        sys.exit(f"FAIL: {name}: relative difference {err:.3g} > {RTOL}\n{got}\n{want}")
    return err


def main():
    distml = sys.argv[1]
    rng = np.random.default_rng(7)
    centres = np.array([[0, 0, 0], [4, 1, -2], [-3, 4, 2]], dtype=float)
    x = np.vstack([c + rng.normal(scale=s, size=(100, 3)) * [1, 0.5, 1.5]
                   for c, s in zip(centres, (1.0, 1.3, 0.8))])
    rng.shuffle(x)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "blobs.csv")
        np.savetxt(data, x, delimiter=",", header="a,b,c", comments="", fmt="%.17g")
        k, d, reg = 3, 3, 1e-6
        for kind in ("full", "diag", "spherical"):
            sets = ["n_components=3", f"covariance_type={kind}", "tol=0", "seed=3"]
            _, one = fit(distml, data, os.path.join(tmp, "one.json"), sets + ["max_iter=1"])
            done, four = fit(distml, data, os.path.join(tmp, "four.json"), sets + ["max_iter=4"])
            weights, means = np.array(one["weights"]), np.array(one["means"]).reshape(k, d)
            covs = full_covariances(kind, one["covariances"], k, d)
            for _ in range(3):
                weights, means, covs, lower = em_step(x, weights, means, covs, kind, reg)
            errors = [close(f"{kind} weights", four["weights"], weights),
                      close(f"{kind} means", four["means"], means.ravel()),
                      close(f"{kind} covariances",
                            full_covariances(kind, four["covariances"], k, d), covs),
                      close(f"{kind} log-likelihood", four["lower_bound"], lower)]
            print(f"ok: {kind}: 3 EM steps equal NumPy's (largest relative difference "
                  f"{max(errors):.2g}); done line mean_log_likelihood "
                  f"{done['mean_log_likelihood']:.6f}")
        done, _ = fit(distml, data, os.path.join(tmp, "fitted.json"),
                      ["n_components=3", "n_init=3"])
        theirs = GaussianMixture(n_components=3, n_init=3, random_state=0).fit(x).score(x)
        ours = done["mean_log_likelihood"]
        if not abs(ours - theirs) <= 0.01 * abs(theirs):
            sys.exit(f"FAIL: mean log-likelihood {ours:.6f} against scikit-learn's {theirs:.6f}")
        print(f"ok: full, n_init 3: mean log-likelihood {ours:.6f}, scikit-learn {theirs:.6f}")


if __name__ == "__main__":
    main()
