"""k-means on NumPy arrays, each rank holding a part of the rows.

    distml launch -n 3 --engine gloo -- /usr/bin/python3 examples/python/kmeans_numpy.py

fit() and score() are collective: the model is the one `distml fit kmeans` would fit on all the
rows, whatever the number of ranks; predict() labels this rank's rows.
"""
import numpy as np

import distml
import distml.ml

distml.init()
rank, size = distml.rank(), distml.size()

# Five blobs in 8 dimensions; this rank generates its own rows.
g = np.random.default_rng(rank)
centres = np.random.default_rng(0).normal(scale=5, size=(5, 8))
X = centres[g.integers(0, 5, 2000)] + g.normal(size=(2000, 8))

model = distml.ml.KMeans(k=5, seed=1).fit(X)
inertia = -model.score(X)
labels = model.predict(X)
counts = np.bincount(labels, minlength=5).astype(np.int64)
distml.allreduce(counts)
if rank == 0:
    print(f"{size} ranks, {size * len(X)} rows: inertia {inertia:.1f} "
          f"({inertia / (size * len(X)):.3f} per row, 8 expected), clusters of {counts.tolist()}")
