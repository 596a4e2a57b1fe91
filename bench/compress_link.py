"""Gradient compression over a thin link, in one run (recorded in docs/benchmarks.md).

2 emulated hosts x 1 rank (distml launch --netns-cluster 2x1, root needed) train the MNIST MLP
(examples/mnist_mlp.toml, 784-1024-512-10, batch 64 per rank) for --steps steps with each
compressor, at each link rate; each rep runs every (rate, compressor) pair in turn. Prints one
JSON line per run, then per rate a table of median steps/s, the ratio to uncompressed fp32
all-reduce at that rate, and the bytes each rank sent per step.

With --target-accuracy A the runs evaluate every --eval-every steps instead, up to --steps, and
the table gives the time to accuracy: the training seconds (evaluation excluded) at the first
evaluation with test accuracy >= A, or the best accuracy reached where none did.

Usage: /usr/bin/python3 bench/compress_link.py [--reps N] [--steps N] [--rates 100mbit,1gbit]
                                               [--compressors none,fp16,topk,powersgd]
                                               [--target-accuracy A --eval-every K]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(distml, rate, compressor, steps, eval_every=0):
    cmd = [distml, "launch", "--netns-cluster", "2x1", "--bandwidth", rate, "--", distml, "train",
           "--config", os.path.join(ROOT, "examples", "mnist_mlp.toml"), "--json",
           "--set", f"train.max_steps={steps}", "--set", "train.log_every=1000",
           "--set", f"train.eval_every={eval_every}", "--set", f"compress.name={compressor}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if out.returncode != 0:
        sys.exit(f"compress_link: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    done = [e for e in events if e.get("event") == "done"][-1]
    done["evals"] = [e for e in events if e.get("event") == "eval"]
    return done


def time_to_accuracy(evals, target):
    """Training seconds at the first evaluation reaching `target`; None if none did."""
    return next((e["train_s"] for e in evals if e["test_accuracy"] >= target), None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rates", default="100mbit,1gbit")
    p.add_argument("--compressors", default="none,fp16,topk,powersgd,natural,sign")
    p.add_argument("--target-accuracy", type=float, default=0)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = p.parse_args()
    if a.target_accuracy:
        return to_accuracy(a, os.path.join(a.build, "distml"))
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


def to_accuracy(a, distml):
    rows = []
    for rep in range(a.reps):
        for rate in a.rates.split(","):
            for c in a.compressors.split(","):
                d = run(distml, rate, c, a.steps, a.eval_every)
                row = {"rate": rate, "compressor": c, "rep": rep,
                       "seconds": time_to_accuracy(d["evals"], a.target_accuracy),
                       "best_accuracy": max(e["test_accuracy"] for e in d["evals"]),
                       "bytes_per_step": d["bytes_sent"] / d["global_step"]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    rates = a.rates.split(",")
    print(f"\nTraining seconds to test accuracy {a.target_accuracy} (evaluated every "
          f"{a.eval_every} steps, at most {a.steps}), medians of {a.reps}:\n")
    print("| compressor | " + " | ".join(rates) + " |")
    print("| --- | " + " | ".join("---" for _ in rates) + " |")
    for c in a.compressors.split(","):
        cells = []
        for rate in rates:
            mine = [r for r in rows if r["rate"] == rate and r["compressor"] == c]
            reached = [r["seconds"] for r in mine if r["seconds"] is not None]
            cells.append(f"{statistics.median(reached):.1f} s" if len(reached) * 2 > len(mine)
                         else f"not reached (best {max(r['best_accuracy'] for r in mine):.3f})")
        print(f"| {c} | " + " | ".join(cells) + " |")


main()
