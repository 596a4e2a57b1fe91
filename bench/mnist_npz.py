"""Writes MNIST from data/mnist (IDX, from `make data`) as the .npz files a user would bring:
x float32 [N, 28, 28] scaled to [0, 1], y int64. Usage: mnist_npz.py OUT_DIR"""
import gzip
import os
import sys

import numpy as np


def idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(base):
    for name in (base, base + ".gz"):
        if os.path.exists(f"data/mnist/{name}"):
            return f"data/mnist/{name}"
    sys.exit(f"mnist_npz: data/mnist/{base}[.gz] not found; run `make data`")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = idx(find(f"{prefix}-images-idx3-ubyte")).astype(np.float32) / 255
        y = idx(find(f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
        np.savez(f"{out}/mnist_{split}.npz", x=x, y=y)


if __name__ == "__main__":
    main()
