"""Writes a small MNIST-like data set (IDX files) for CLI tests, optionally broken on purpose.

Usage: make_idx.py DIR [--samples N] [--bad-magic] [--truncate] [--label L]
Labels depend on the pixels, so that a model can learn them.
"""
import argparse
import os
import random
import struct


def idx(path, dims, data, magic_type=0x08):
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, magic_type, len(dims)))
        f.write(struct.pack(">" + "I" * len(dims), *dims))
        f.write(bytes(data))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--bad-magic", action="store_true", help="train images start with 1 2 3 4")
    p.add_argument("--truncate", action="store_true", help="cut 100 bytes off the train images")
    p.add_argument("--label", type=int, help="give the first train sample this label")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = random.Random(5)
    for prefix in ("train", "t10k"):
        images, labels = [], []
        for _ in range(a.samples):
            pixels = [rng.randrange(256) for _ in range(784)]
            images += pixels
            labels.append(pixels[0] * 10 // 256)
        if prefix == "train" and a.label is not None:
            labels[0] = a.label
        images_path = os.path.join(a.dir, f"{prefix}-images-idx3-ubyte")
        idx(images_path, [a.samples, 28, 28], images)
        idx(os.path.join(a.dir, f"{prefix}-labels-idx1-ubyte"), [a.samples], labels)
        if prefix == "train" and a.bad_magic:
            with open(images_path, "r+b") as f:
                f.write(bytes([1, 2, 3, 4]))
        if prefix == "train" and a.truncate:
            os.truncate(images_path, os.path.getsize(images_path) - 100)


main()
