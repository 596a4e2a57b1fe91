"""Accuracy of compressed training against uncompressed, in one run (docs/benchmarks.md).

LeNet-5 on MNIST (examples/mnist_lenet.toml, its learning rate decayed by a cosine to 0) at 4
ranks (mpi engine, one thread each) for --epochs epochs with each compressor; each rep runs every compressor in turn with the same
seed. Prints one JSON line per run, then a table of median test accuracy, its difference from
the uncompressed run in points, and the bytes each rank sent per step against uncompressed.

Usage: /usr/bin/python3 bench/compress_accuracy.py [--reps N] [--epochs N] [--np N]
                                                   [--compressors none,topk,powersgd,natural]
                                                   [--set section.key=value ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(distml, compressor, epochs, np_, seed, extra):
    cmd = [distml, "train", "--config", os.path.join(ROOT, "examples", "mnist_lenet.toml"),
           "--np", str(np_), "--json", "--set", f"train.epochs={epochs}",
           "--set", "train.log_every=100000", "--set", f"train.seed={seed}",
           "--set", f"compress.name={compressor}"]
    for s in extra:
        cmd += ["--set", s]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    if out.returncode != 0:
        sys.exit(f"compress_accuracy: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines()
            if line.startswith("{") and '"done"' in line][-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--compressors", default="none,topk,powersgd,natural")
    # The example's constant learning rate leaves the last step's accuracy varying by points
    # from seed to seed; a cosine decay to 0 over the run lets each run settle.
    p.add_argument("--set", action="append", default=["optim.schedule=cosine"],
                   help="more section.key=value settings for every run")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = p.parse_args()
    distml = os.path.join(a.build, "distml")
    names = a.compressors.split(",")
    rows = []
    for rep in range(a.reps):
        for c in names:
            d = run(distml, c, a.epochs, a.np, 1 + rep, a.set)
            row = {"compressor": c, "rep": rep, "test_accuracy": d["test_accuracy"],
                   "bytes_per_step": d["bytes_sent"] / d["global_step"], "wall_s": d["wall_s"]}
            rows.append(row)
            print(json.dumps(row), flush=True)

    def med(c, key):
        return statistics.median(r[key] for r in rows if r["compressor"] == c)
    base_acc, base_bytes = med("none", "test_accuracy"), med("none", "bytes_per_step")
    print(f"\nLeNet-5, MNIST, {a.np} ranks, {a.epochs} epochs, medians of {a.reps} (seeds 1..{a.reps}):\n")
    print("| compressor | test accuracy | vs uncompressed | bytes per step | fewer bytes | wall s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in names:
        acc, b = med(c, "test_accuracy"), med(c, "bytes_per_step")
        print(f"| {c} | {100 * acc:.2f}% | {100 * (acc - base_acc):+.2f} pt | {b:.0f} | "
              f"{base_bytes / b:.1f}x | {med(c, 'wall_s'):.1f} |")


main()
