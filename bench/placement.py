"""Placement learnt by REINFORCE beside the dynamic programming's (docs/benchmarks.md,
"Placement").

1. The dynamic programming's own cases (ranks of equal speed): for each model, grid and
   micro-batch count, `distml plan --search rl` plans both placements and predicts each with
   the same simulation; the ratio of the learnt placement's predicted step to the dynamic
   programming's (target: at most 1.05).
2. A slow rank: a deep MLP on 2 pipeline stages, rank 1 computing --slow-factor times slower
   (train.slow_rank). `distml plan --search rl` gives the equal-rank plan and the learnt one;
   then both train for real, in turn, --reps times each, and the medians of their measured
   steps and the ratio are reported (target: the learnt placement at least 15% faster).

Usage: placement.py DISTML [--reps 3] [--steps 60] [--slow-factor 2]
"""
import argparse
import json
import statistics
import subprocess
import sys

DEEP_MLP = "model.layers=[784,512,512,512,512,512,512,512,10]"
# (config, its --set overrides, a name)
MODELS = [("examples/mnist_lenet.toml", [], "LeNet-5"),
          ("examples/mnist_mlp.toml", [DEEP_MLP], "MLP 784-512x7-10"),
          ("examples/fashion_resnet20.toml", [], "ResNet-20")]
LINK = ["--latency-us", "50", "--bandwidth-mbps", "10000"]


def run_json(command):
    p = subprocess.run(command, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(command)}\n{p.stderr[-2000:]}")
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def plan(distml, config, sets, stages, micro):
    command = [distml, "plan", "--config", config, "--engine", "local", "--np", str(stages),
               "--stages", str(stages), "--micro-batches", str(micro), "--search", "rl",
               "--reps", "3", "--json", *LINK]
    for s in sets:
        command += ["--set", s]
    lines = run_json(command)
    by = {c["search"]: c for c in lines[0]["candidates"]}
    return by["dp"], by["rl"]


def equal_ranks(distml):
    print("| model | stages | micro-batches | dp partition | dp step (ms) | rl partition "
          "| rl step (ms) | rl / dp |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for config, sets, name in MODELS:
        for stages in (2, 3, 4):
            for micro in (4, 8):
                dp, rl = plan(distml, config, sets, stages, micro)
                ratio = rl["predicted_step_s"] / dp["predicted_step_s"]
                ratios.append(ratio)
                print(f"| {name} | {stages} | {micro} | {dp['partition']} | "
                      f"{1e3 * dp['predicted_step_s']:.2f} | {rl['partition']} | "
                      f"{1e3 * rl['predicted_step_s']:.2f} | {ratio:.3f} |", flush=True)
    print(f"\nrl / dp over {len(ratios)} cases: geomean "
          f"{statistics.geometric_mean(ratios):.3f}, worst {max(ratios):.3f}\n")


def measured_step_s(distml, partition, slow, steps):
    counts = ",".join(str(c) for c in partition)
    lines = run_json([distml, "train", "--config", "examples/mnist_mlp_pipeline.toml",
                      "--np", "2", "--json", "--set", DEEP_MLP, "--set",
                      "parallel.pipeline_stages=2", "--set", "parallel.micro_batches=4",
                      "--set", f"parallel.partition=[{counts}]", "--set", f"train.max_steps={steps}",
                      "--set", "train.eval_every=0", "--set", "train.checkpoint_dir=\"\"",
                      *(f"--set={s}" for s in slow)])
    done = [l for l in lines if l.get("event") == "done"][-1]
    return 1 / done["steps_per_sec"]


def slow_rank(distml, factor, reps, steps):
    slow = ["train.slow_rank=1", f"train.slow_factor={factor}"]
    dp, rl = plan(distml, "examples/mnist_mlp_pipeline.toml", [DEEP_MLP, *slow], 2, 4)
    times = {"dp": [], "rl": []}
    for _ in range(reps):  # in turn, so that the machine's drift meets both alike
        for name, c in (("dp", dp), ("rl", rl)):
            times[name].append(measured_step_s(distml, c["partition"], slow, steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"rank 1 at 1/{factor} speed, 2 stages, 4 micro-batches, {reps} runs of {steps} "
          "steps each:")
    print("| placement | partition | predicted step (ms) | measured step (ms, median) | runs |")
    print("|---|---|---|---|---|")
    for name, c in (("dp (equal ranks)", dp), ("rl", rl)):
        key = name.split()[0]
        runs = ", ".join(f"{1e3 * t:.1f}" for t in times[key])
        print(f"| {name} | {c['partition']} | {1e3 * c['predicted_step_s']:.1f} | "
              f"{1e3 * med[key]:.1f} | {runs} |")
    print(f"\nmeasured dp / rl step: {med['dp'] / med['rl']:.3f} "
          f"(predicted {dp['predicted_step_s'] / rl['predicted_step_s']:.3f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("distml")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--slow-factor", type=float, default=2)
    ap.add_argument("--skip-equal", action="store_true", help="only part 2")
    a = ap.parse_args()
    if not a.skip_equal:
        equal_ranks(a.distml)
    slow_rank(a.distml, a.slow_factor, a.reps, a.steps)


if __name__ == "__main__":
    main()
