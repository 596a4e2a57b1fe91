"""Writes the King James Bible's verses as a text-classification task (which of the 66 books a
verse comes from) for fastText-style models: each verse becomes its word unigrams and bigrams,
hashed into BUCKETS - 1 ids (1 ...; 0 pads every row to the longest verse), as in fastText's
hashing trick. Verses are shuffled (seed 0) and the last 10% are the test split.

Usage: bible_verses.py OUT_DIR [BUCKETS]  ->  OUT_DIR/train.npz, OUT_DIR/test.npz (x float32
[N, L] ids, exact below 2^24; y int64 [N] book ids in canonical order) and OUT_DIR/books.txt.
Needs Debian's bible-kjv (the `bible` command) and numpy."""
import os
import re
import subprocess
import sys

import numpy as np


def fnv1a(text):
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def main():
    out = sys.argv[1]
    buckets = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 18
    text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True,
                          check=True).stdout
    verse = re.compile(r"^(\d?[A-Za-z]+)\d+:\d+ (.*)$")
    books, rows, labels = [], [], []
    for line in text.splitlines():
        m = verse.match(line)
        if not m:
            continue
        if not books or books[-1] != m.group(1):
            books.append(m.group(1))
        words = re.findall(r"[a-z']+", m.group(2).lower())
        grams = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
        rows.append([1 + fnv1a(g) % (buckets - 1) for g in grams])
        labels.append(len(books) - 1)
    if len(books) != 66 or len(rows) < 31000:
        sys.exit(f"bible_verses.py: expected 66 books and ~31102 verses from `bible`, got "
                 f"{len(books)} and {len(rows)}")
    x = np.zeros((len(rows), max(map(len, rows))), dtype=np.float32)
    for i, ids in enumerate(rows):
        x[i, :len(ids)] = ids
    y = np.array(labels, dtype=np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    n_test = len(y) // 10
    os.makedirs(out, exist_ok=True)
    np.savez(f"{out}/train.npz", x=x[order[n_test:]], y=y[order[n_test:]])
    np.savez(f"{out}/test.npz", x=x[order[:n_test]], y=y[order[:n_test]])
    with open(f"{out}/books.txt", "w") as f:
        f.write("\n".join(books) + "\n")
    print(f"bible_verses.py: {len(y) - n_test} train and {n_test} test verses of {len(books)} "
          f"books, {x.shape[1]} n-gram ids per row, {buckets} buckets, in {out}")


if __name__ == "__main__":
    main()
