"""Gradient compression over a thin link, in one run (recorded in docs/benchmarks.md).

2 emulated hosts x 1 rank (distml launch --netns-cluster 2x1, root needed) train the MNIST MLP
(examples/mnist_mlp.toml, 784-1024-512-10, batch 64 per rank) for --steps steps with each
compressor, at each link rate; each rep runs every (rate, compressor) pair in turn. Prints one
JSON line per run, then per rate a table of median steps/s, the ratio to uncompressed fp32
all-reduce at that rate, and the bytes each rank sent per step.

Usage: /usr/bin/python3 bench/compress_link.py [--reps N] [--steps N] [--rates 100mbit,1gbit]
                                               [--compressors none,fp16,topk,powersgd]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(distml, rate, compressor, steps):
    cmd = [distml, "launch", "--netns-cluster", "2x1", "--bandwidth", rate, "--", distml, "train",
           "--config", os.path.join(ROOT, "examples", "mnist_mlp.toml"), "--json",
           "--set", f"train.max_steps={steps}", "--set", "train.log_every=1000",
           "--set", f"compress.name={compressor}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if out.returncode != 0:
        sys.exit(f"compress_link: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    done = [json.loads(line) for line in out.stdout.splitlines()
            if line.startswith("{") and '"done"' in line][-1]
    return done


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--compressors", default="none,fp16,topk,powersgd,natural,sign")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = p.parse_args()
    distml = os.path.join(a.build, "distml")
    rows = []
    for rep in range(a.reps):
        for rate in a.rates.split(","):
            for c in a.compressors.split(","):
                d = run(distml, rate, c, a.steps)
                row = {"rate": rate, "compressor": c, "rep": rep,
                       "steps_per_sec": d["steps_per_sec"],
                       "bytes_per_step": d["bytes_sent"] / d["global_step"],
                       "test_accuracy": d["test_accuracy"]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    for rate in a.rates.split(","):
        def med(c, key):
            return statistics.median(r[key] for r in rows if r["rate"] == rate and
                                     r["compressor"] == c)
        base = med("none", "steps_per_sec") if "none" in a.compressors.split(",") else None
        print(f"\n{rate}, {a.steps} steps, medians of {a.reps}:\n")
        print("| compressor | steps/s | vs fp32 all-reduce | bytes sent per step (rank 0) |")
        print("| --- | --- | --- | --- |")
        for c in a.compressors.split(","):
            s = med(c, "steps_per_sec")
            ratio = f"{s / base:.2f}x" if base else ""
            print(f"| {c} | {s:.1f} | {ratio} | {med(c, 'bytes_per_step'):.0f} |")


main()
